"""Helpers the tests share."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], object], timeout: float = 60.0) -> bool:
    """Whether ``condition()`` becomes true within ``timeout`` seconds (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())
