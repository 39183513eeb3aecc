"""Services a CLI-started run is wired to: the project's store (control, index, memory) and notifiers."""

from __future__ import annotations

from typing import Any


def attach(engine: Any, spec: Any) -> None:
    """Attach the project's services to ``engine`` (added as they are built)."""
    return None
