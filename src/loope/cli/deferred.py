"""``inspect``, loaded when something first needs it rather than when click is imported.

click imports ``inspect`` at its start (and ``ast``, ``dis`` and ``tokenize`` with it: about a fifth of
what ``import click`` costs), yet a command that only reads uses one function of it: ``cleandoc``, on
each option's help, which is one line of text that needs no cleaning. So, before click is imported, the
``inspect`` module is put in place unexecuted: its own code runs into it the first time anything else
is asked of it (the way ``importlib.util.LazyLoader`` does it, which would cost a third of the saving to
import). It is the same module object before and after, so ``import inspect`` anywhere gets it.
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
        module.__spec__.loader.exec_module(module)  # type: ignore[union-attr]  # defer_inspect sets both
        del module.__dict__["_loope_loading"]
        module.__class__ = types.ModuleType  # type: ignore[assignment]  # back to a plain module, loaded


def _cleandoc(doc: Any) -> Any:
    """``inspect.cleandoc``: a non-blank line without tabs or leading space is its own clean form."""
    if isinstance(doc, str) and doc and "\n" not in doc and "\t" not in doc and not doc[0].isspace():
        return doc
    import inspect

    _load(inspect)  # its code replaces this function with its own
    return inspect.cleandoc(doc)


def defer_inspect() -> None:
    """Put ``inspect`` in ``sys.modules`` unexecuted, unless it is imported already (or cannot be found)."""
    if "inspect" in sys.modules:
        return
    spec = PathFinder.find_spec("inspect")
    if spec is None or spec.loader is None or spec.origin is None:
        return
    module = _Deferred("inspect")
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__cached__ = spec.cached  # type: ignore[attr-defined]  # a module attribute the import system sets
    module.__package__ = ""
    module.__dict__["cleandoc"] = _cleandoc
    sys.modules["inspect"] = module
