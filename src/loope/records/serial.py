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
from collections.abc import Mapping
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
    hints = _hints(typing.cast(type, cls))
    values = {
        f.name: _typed(hints[f.name], data[f.name])
        for f in dataclasses.fields(typing.cast(Any, cls))
        if f.init and f.name in data
    }
    return cls(**values)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _typed(hint: Any, value: Any) -> Any:
    """``value`` read as ``hint``; a value of an unexpected shape is kept as it is."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _typed(options[0], value) if len(options) == 1 else value
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(hint)
        return [_typed(item, v) for v in value]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(hint)
        return {k: _typed(item, v) for k, v in value.items()}
    if isinstance(hint, type):
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            return from_data(hint, value)
        if issubclass(hint, enum.Enum):
            try:
                return hint(value)
            except ValueError:
                return value
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    return value
