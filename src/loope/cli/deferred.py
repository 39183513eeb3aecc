"""Standard modules that the CLI's libraries import at their start but a read-only command never uses.

- ``inspect``: click imports it (and ``ast``, ``dis`` and ``tokenize`` with it: about a fifth of what
  ``import click`` costs), yet uses one function of it to start: ``cleandoc``, on each option's help,
  which is one line of text that needs no cleaning.
- ``uuid`` (and ``platform``, which it imports): click imports it for its UUID parameter type, which no
  loope option has; at its import click names ``uuid.UUID`` once, as a type argument.
- ``urllib.parse``: ``pathlib`` imports it for ``quote_from_bytes``, which only ``as_uri`` calls.
- ``ipaddress``: ``urllib.parse`` imports it to check an IPv6 host in a URL.
- ``ntpath`` and ``fnmatch``: ``pathlib`` imports them for Windows paths and for glob patterns.
- ``locale``: click passes each of its own strings through ``gettext``, which imports ``locale`` (a
  table of a thousand locale names, and a pattern) to spell the user's language every way a catalog
  could be named, then looks for one in its locale directory, every time. Where that directory does
  not exist no catalog can be found, whatever the language: ``gettext.find`` says so at once.

Each is put in ``sys.modules`` unexecuted before anything imports it: its own code runs into it the
first time anything is asked of it (the way ``importlib.util.LazyLoader`` does it, which would cost a
third of the saving to import). It is the same module object before and after, so ``import inspect``
anywhere gets it.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from importlib.machinery import PathFinder
from typing import Any

_LOCK = threading.RLock()


class _Deferred(types.ModuleType):
    """A module whose code has not run yet: an attribute it lacks runs it (once), then is looked up."""

    def __getattr__(self, name: str) -> Any:
        if name == "__path__":  # `from x import y` asks whether x is a package: a deferred module is not
            raise AttributeError(name)
        _load(self)
        if type(self) is _Deferred:  # asked by the module's own code while it runs: not defined yet
            raise AttributeError(f"partially initialized module {self.__name__!r} has no attribute {name!r}")
        return getattr(self, name)


def _load(module: types.ModuleType) -> None:
    with _LOCK:  # a second thread waits for the first one's load to finish
        if type(module) is not _Deferred or module.__dict__.get("_loope_loading"):
            return
        module.__dict__["_loope_loading"] = True
        try:
            module.__spec__.loader.exec_module(module)  # type: ignore[union-attr]  # defer() sets both
        finally:  # a failed run raises to whoever asked; the next question runs the code again
            del module.__dict__["_loope_loading"]
        module.__class__ = types.ModuleType  # type: ignore[assignment]  # back to a plain module, loaded


def _cleandoc(doc: Any) -> Any:
    """``inspect.cleandoc``: a non-blank line without tabs or leading space is its own clean form."""
    if isinstance(doc, str) and doc and "\n" not in doc and "\t" not in doc and not doc[0].isspace():
        return doc
    import inspect

    _load(inspect)  # its code replaces this function with its own
    return inspect.cleandoc(doc)


def _quote_from_bytes(bs: bytes, safe: str = "/") -> str:
    """``urllib.parse.quote_from_bytes``, which pathlib binds at its import: loads the module, then asks it."""
    import urllib.parse

    _load(urllib.parse)  # its code replaces this function with its own (pathlib keeps this one)
    return urllib.parse.quote_from_bytes(bs, safe)


def _no_catalogs_without_a_directory() -> None:
    """``gettext.find`` answering at once where the directory it would look in does not exist."""
    import gettext

    default = getattr(gettext, "_default_localedir", None)
    if default is None:
        return  # another gettext: left as it is
    find = gettext.find

    def find_where_there_is_a_directory(
        domain: str,
        localedir: str | None = None,
        languages: Any = None,
        all: bool = False,
    ) -> Any:
        if not os.path.isdir(localedir or default):
            return [] if all else None
        return find(domain, localedir, languages, all)

    gettext.find = find_where_there_is_a_directory  # type: ignore[assignment]  # the same calls, one answer sooner


class _UUIDStandIn:
    """What ``uuid.UUID`` is while click imports: there it is only a type argument (``ParamType[uuid.UUID]``)."""


def defer_unused() -> None:
    """Defer the modules above, then import click (``uuid.UUID`` stood in for while it does)."""
    inspect = defer("inspect")
    if inspect is not None:
        inspect.__dict__["cleandoc"] = _cleandoc
    parse = defer("urllib.parse")
    if parse is not None:
        parse.__dict__["quote_from_bytes"] = _quote_from_bytes
    for name in ("ipaddress", "ntpath", "fnmatch"):
        defer(name)
    _no_catalogs_without_a_directory()
    uuid = defer("uuid")
    if uuid is None:
        return
    uuid.__dict__["UUID"] = _UUIDStandIn
    try:
        import click  # noqa: F401  # here, so that the stand-in is gone before anything else can see it
    finally:
        if uuid.__dict__.get("UUID") is _UUIDStandIn:  # (unless something loaded uuid meanwhile)
            del uuid.__dict__["UUID"]  # the next use of uuid.UUID (a UUID option converting) loads uuid


def defer(name: str) -> types.ModuleType | None:
    """Put the plain source module ``name`` in ``sys.modules`` unexecuted; None if imported already or not found.

    A submodule's package is imported (for its ``__path__``), and the submodule set on it, as an import does.
    """
    if name in sys.modules:
        return None
    package, _, child = name.rpartition(".")
    path = None
    if package:
        __import__(package)
        path = getattr(sys.modules[package], "__path__", None)
        if path is None:
            return None
    spec = PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None or spec.origin is None or spec.submodule_search_locations is not None:
        return None  # not a plain source module (a package, a builtin): imported as usual
    module = _Deferred(name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__cached__ = spec.cached  # type: ignore[attr-defined]  # a module attribute the import system sets
    module.__package__ = package
    sys.modules[name] = module
    if package:
        setattr(sys.modules[package], child, module)
    return module
