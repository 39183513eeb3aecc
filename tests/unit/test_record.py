"""``@record`` behaves as ``@dataclass`` does, for every option loope's records use: each check runs on a
record and on the same class made by ``dataclasses.dataclass``, and both must answer alike."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from loope.record import record


def shapes(make: Any, frozen: bool, kw_only: bool) -> tuple[type, type]:
    """A base class and a subclass with defaults, a factory and a ClassVar, made by ``make``."""

    @make(frozen=frozen, kw_only=kw_only)
    class Base:
        """A base."""

        kind: ClassVar[str] = "base"
        name: str
        tags: list[str] = field(default_factory=list)

    @make(frozen=frozen, kw_only=kw_only)
    class Child(Base):
        """A child."""

        size: int = 0
        note: str | None = None

    return Base, Child


MAKERS = {"record": record, "dataclass": dataclass}
OPTIONS = [(False, False), (True, False), (True, True)]


def answers(make: Any, frozen: bool, kw_only: bool) -> list[object]:
    """What a class made by ``make`` does, in a comparable form (repr, equality, errors, fields…)."""
    base, child = shapes(make, frozen, kw_only)
    out: list[object] = []

    def attempt(fn: Any) -> object:
        try:
            return ("ok", fn())
        except Exception as exc:  # noqa: BLE001 - the kind of error is what is compared
            return ("error", type(exc).__name__)

    one = child(name="a", size=2) if kw_only else child("a", ["t"], 2)
    two = child(name="a", size=2) if kw_only else child("a", ["t"], 2)
    out += [repr(one).split(".")[-1], one == two, one != child(name="b"), one == "a", one.tags is not two.tags]
    out += [dataclasses.is_dataclass(one), [f.name for f in dataclasses.fields(child)], child.__match_args__]
    out += [dataclasses.asdict(one), repr(dataclasses.replace(one, size=3)).split(".")[-1]]
    out += [attempt(lambda: hash(one) == hash(two)), attempt(lambda: setattr(one, "size", 5)), one.size]
    out += [attempt(lambda: delattr(one, "note")), attempt(child)]
    out += [attempt(lambda: child(name="a", bogus=1)), attempt(lambda: child("a", name="b"))]
    out += [attempt(lambda: child("a", [], 1, None, 9)), base(name="x").tags, child.kind]
    out += [copy.deepcopy(one) == one, copy.copy(one) == one, base.__doc__, isinstance(one, base)]
    match one:
        case child(name=matched):
            out.append(matched)
    return out


@pytest.mark.parametrize(("frozen", "kw_only"), OPTIONS)
def test_a_record_answers_as_the_dataclass_would(frozen, kw_only):
    assert answers(record, frozen, kw_only) == answers(dataclass, frozen, kw_only)


def test_post_init_runs_after_the_fields_are_set():
    @record()
    class Counted:
        items: list[int]
        count: int = 0

        def __post_init__(self) -> None:
            self.count = len(self.items)

    assert Counted([1, 2, 3]).count == 3


def test_a_record_without_a_docstring_is_named_without_asking_inspect():
    @record(frozen=True)
    class Bare:
        value: int

    assert Bare.__doc__ == "Bare"
    assert Bare(1) == Bare(value=1)


def test_a_subclass_not_made_a_record_itself_is_built_as_its_base():
    @record(frozen=True, kw_only=True)
    class Base:
        name: str
        size: int = 0

    class Plain(Base):
        kind = "plain"

    made = Plain(name="a")
    assert (made.name, made.size, made.kind) == ("a", 0, "plain")
    assert made == Plain(name="a")
    assert made != Base(name="a")  # as a dataclass compares: the same class only
