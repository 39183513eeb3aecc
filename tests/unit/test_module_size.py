"""Modules stay small: each holds one thing, named for it (none over 400 lines)."""

from __future__ import annotations

from pathlib import Path

import loope

LIMIT = 400


def test_no_module_is_over_the_limit():
    root = Path(loope.__file__).parent
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in root.rglob("*.py")}
    assert sizes, "no modules found"
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
