"""Notifications: observers of the engine's events that tell people and systems how a run goes."""

from __future__ import annotations

from typing import Any


def build_notifiers(specs: list[str], *, store: Any, spec: Any) -> list[Any]:
    from loope.errors import LoopeError

    raise LoopeError(f"--notify {specs[0]!r}: notifications are not available in this build")
