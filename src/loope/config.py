"""A project's settings as written (``loope.toml``, or ``[tool.loope]`` in pyproject.toml), and the roles a
run has when none are set. Read without building a spec: ``loope doctor`` of a project with no settings
needs only these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loope.errors import LoopeError

IMPLEMENTER = "claude"
"""The implementer when none is set."""
REVIEWERS = ("codex",)
"""The reviewers when none are set."""
SANDBOX = "auto"
"""``--sandbox`` when none is set: bubblewrap around every step where it works."""


def load_config(workdir: Path) -> tuple[dict[str, Any], str | None]:
    """Settings from ``loope.toml`` (or pyproject's ``[tool.loope]``) in ``workdir``, and where they came from."""
    for name, section in (("loope.toml", None), ("pyproject.toml", ("tool", "loope"))):
        path = workdir / name
        if not path.is_file():
            continue
        import tomllib  # only where there is a file to read

        try:
            data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise LoopeError(f"{path}: not valid TOML ({exc}); fix the file or move it aside") from None
        if section:
            for key in section:
                data = data.get(key, {}) if isinstance(data, dict) else {}
            if not data:
                continue
        return dict(data), str(path)
    return {}, None
