"""The one way records become JSON data and come back: dataclasses field by field, enums as strings.

``to_data`` writes a dataclass as its fields in declaration order (a class may shape itself with
its own ``to_dict``); ``from_data`` reads one back from the field types, keeping what it knows and
defaulting what is missing, so a file written by an older loope still reads.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def to_data(value: Any) -> Any:
    """``value`` as JSON data."""
    if isinstance(value, enum.Enum):
        return value.value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_data(value)
    if isinstance(value, list | tuple):
        return [to_data(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_data(v) for k, v in value.items()}
    return value


def fields_data(value: Any) -> dict[str, Any]:
    """A dataclass instance as its fields' data, in declaration order (for a ``to_dict`` to build on)."""
    return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}


def from_data(cls: type[T], data: Mapping[str, Any]) -> T:
    """A ``cls`` from ``data``: known fields typed by their annotations, unknown ones dropped."""
    return cls(**{name: read(data[name]) for name, read in _readers(typing.cast(type, cls)) if name in data})


@functools.cache
def _readers(cls: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """Each field's name and how to read its value (worked out once per class: a record has thousands)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _reader(hints[f.name])) for f in dataclasses.fields(typing.cast(Any, cls)) if f.init)


def _same(value: Any) -> Any:
    return value


@functools.cache
def _reader(hint: Any) -> Callable[[Any], Any]:
    """How to read a value as ``hint``; a value of an unexpected shape is kept as it is."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(options) != 1:
            return _same
        inner = _reader(options[0])
        return lambda value: None if value is None else inner(value)
    if origin is list:
        (item,) = typing.get_args(hint)
        each = _reader(item)
        return lambda value: [each(v) for v in value] if isinstance(value, list) else value
    if origin is dict:
        _, item = typing.get_args(hint)
        each = _reader(item)
        return lambda value: {k: each(v) for k, v in value.items()} if isinstance(value, Mapping) else value
    if isinstance(hint, type):
        if dataclasses.is_dataclass(hint):
            return lambda value: from_data(hint, value) if isinstance(value, Mapping) else value
        if issubclass(hint, enum.Enum):
            return functools.partial(_enum, hint)
        if hint is float:
            return lambda value: float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    return _same


def _enum(cls: type[enum.Enum], value: Any) -> Any:
    try:
        return cls(value)
    except ValueError:
        return value
