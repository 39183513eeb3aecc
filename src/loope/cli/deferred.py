"""Standard modules that the CLI's libraries import at their start but a read-only command never uses.

- ``inspect``: click imports it (and ``ast``, ``dis`` and ``tokenize`` with it: about a fifth of what
  ``import click`` costs), yet uses one function of it to start: ``cleandoc``, on each option's help,
  which is one line of text that needs no cleaning.
- ``ipaddress``: ``urllib.parse`` imports it (``pathlib`` imports that) to check an IPv6 host in a URL.
- ``ntpath`` and ``fnmatch``: ``pathlib`` imports them for Windows paths and for glob patterns.

Each is put in ``sys.modules`` unexecuted before anything imports it: its own code runs into it the
first time anything is asked of it (the way ``importlib.util.LazyLoader`` does it, which would cost a
third of the saving to import). It is the same module object before and after, so ``import inspect``
anywhere gets it.
"""

from __future__ import annotations

import sys
import threading
import types
from importlib.machinery import PathFinder
from typing import Any

_LOCK = threading.RLock()


class _Deferred(types.ModuleType):
    """A module whose code has not run yet: an attribute it lacks runs it (once), then is looked up."""

    def __getattr__(self, name: str) -> Any:
        _load(self)
        if type(self) is _Deferred:  # asked by the module's own code while it runs: not defined yet
            raise AttributeError(f"partially initialized module {self.__name__!r} has no attribute {name!r}")
        return getattr(self, name)


def _load(module: types.ModuleType) -> None:
    with _LOCK:  # a second thread waits for the first one's load to finish
        if type(module) is not _Deferred or module.__dict__.get("_loope_loading"):
            return
        module.__dict__["_loope_loading"] = True
        module.__spec__.loader.exec_module(module)  # type: ignore[union-attr]  # defer() sets both
        del module.__dict__["_loope_loading"]
        module.__class__ = types.ModuleType  # type: ignore[assignment]  # back to a plain module, loaded


def _cleandoc(doc: Any) -> Any:
    """``inspect.cleandoc``: a non-blank line without tabs or leading space is its own clean form."""
    if isinstance(doc, str) and doc and "\n" not in doc and "\t" not in doc and not doc[0].isspace():
        return doc
    import inspect

    _load(inspect)  # its code replaces this function with its own
    return inspect.cleandoc(doc)


def defer_unused() -> None:
    """Defer ``inspect`` (its ``cleandoc`` answered for one line without loading it) and the others above."""
    inspect = defer("inspect")
    if inspect is not None:
        inspect.__dict__["cleandoc"] = _cleandoc
    for name in ("ipaddress", "ntpath", "fnmatch"):
        defer(name)


def defer(name: str) -> types.ModuleType | None:
    """Put the top-level module ``name`` in ``sys.modules`` unexecuted; None if imported already or not found."""
    if name in sys.modules:
        return None
    spec = PathFinder.find_spec(name)
    if spec is None or spec.loader is None or spec.origin is None or spec.submodule_search_locations is not None:
        return None  # not a plain source module (a package, a builtin): imported as usual
    module = _Deferred(name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__cached__ = spec.cached  # type: ignore[attr-defined]  # a module attribute the import system sets
    module.__package__ = ""
    sys.modules[name] = module
    return module
