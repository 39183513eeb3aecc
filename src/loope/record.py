"""``@record``: a dataclass whose methods are shared by every record, not written for each class.

``dataclasses.dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__`` (and, frozen,
``__setattr__``, ``__delattr__``, ``__hash__``) as source text and compiles it: about 1 ms a class on
this interpreter, and a run defines a hundred records before its first step. A record is still a
dataclass to everything that reads one (``fields``, ``replace``, ``asdict``, ``is_dataclass``,
``__match_args__``, pattern matching, type checkers); only those methods are the shared ones below,
which do what the written ones do. Constructing one costs a few microseconds more, so records made
by the thousand (a diff's files, say) stay plain dataclasses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, dataclass_transform

T = TypeVar("T")


class _Shape(NamedTuple):
    """A record class's fields as its ``__init__`` takes them."""

    names: tuple[str, ...]
    positional: tuple[str, ...]
    defaults: dict[str, Any]
    factories: dict[str, Callable[[], Any]]


_shapes: dict[type, _Shape] = {}


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(*, frozen: bool = False, kw_only: bool = False) -> Callable[[type[T]], type[T]]:
    """Make the class a dataclass (``frozen``, ``kw_only`` as for ``dataclasses.dataclass``) with shared methods."""

    def make(cls: type[T]) -> type[T]:
        if cls.__dict__.get("__doc__") is None:  # dataclass would ask inspect for a signature to write one
            cls.__doc__ = cls.__name__
        dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=kw_only)(cls)
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        _shapes[cls] = _Shape(
            tuple(f.name for f in fields),
            tuple(f.name for f in fields if not f.kw_only),
            {f.name: f.default for f in fields if f.default is not dataclasses.MISSING},
            {f.name: f.default_factory for f in fields if f.default_factory is not dataclasses.MISSING},
        )
        own = {**_METHODS, **(_FROZEN if frozen else {})}
        for name, method in own.items():
            if name not in cls.__dict__ or (name == "__hash__" and cls.__dict__[name] is None):
                setattr(cls, name, method)  # as dataclass does: what the class defines itself stays
        if not frozen and not callable(cls.__dict__.get("__hash__")):
            cls.__hash__ = None  # type: ignore[assignment]  # compared by value and mutable: unhashable
        return cls

    return make


def _shape(cls: type) -> _Shape:
    """The shape of ``cls``: its own, or (a subclass not made a record itself) its nearest record base's."""
    found = _shapes.get(cls)
    if found is None:
        found = _shapes[cls] = next(_shapes[base] for base in cls.__mro__ if base in _shapes)
    return found


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    shape = _shape(type(self))
    if len(args) > len(shape.positional):
        raise TypeError(f"{type(self).__name__}() takes {len(shape.positional)} positional arguments, got {len(args)}")
    values = dict(zip(shape.positional, args, strict=False))
    for name, value in kwargs.items():
        if name in values:
            raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
        if name not in shape.names:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}")
        values[name] = value
    for name in shape.names:
        if name in values:
            value = values[name]
        elif name in shape.defaults:
            value = shape.defaults[name]
        elif name in shape.factories:
            value = shape.factories[name]()
        else:
            raise TypeError(f"{type(self).__name__}() missing required argument: {name!r}")
        object.__setattr__(self, name, value)
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in _shape(type(self)).names)


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shape(type(self)).names)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: object) -> object:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_METHODS: dict[str, Any] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
_FROZEN: dict[str, Any] = {"__setattr__": _frozen_setattr, "__delattr__": _frozen_delattr, "__hash__": _hash}
