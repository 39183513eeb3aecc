"""What the terminal on stdout can show."""

from __future__ import annotations

import os
import sys


def fancy_output(color: str) -> bool:
    """Whether to redraw in place: a terminal that takes escape codes, unless NO_COLOR or --color never."""
    return color == "always" or (
        color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )
