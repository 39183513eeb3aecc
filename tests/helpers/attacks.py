"""Running an attacking agent: a shell script as the ``exec:`` implementer of a ``fix add`` run."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.conftest import GATE, Project


def shell_implementer(where: Path, script: str) -> str:
    """Write ``script`` to a new file under ``where`` and return the ``exec:`` spec that runs it with sh."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"attack-{len(list(where.glob('attack-*.sh')))}.sh"
    path.write_text(script)
    return f"exec:sh {shlex.quote(str(path))}"


def run_attack(cli, proj: Project, implementer: str, *extra: str, gate: str = GATE):  # type: ignore[no-untyped-def]
    """One iteration of ``fix add`` with ``implementer``, no reviewer and ``gate``."""
    return cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", gate,
        "--max-iters", "1", "--plain", *extra, cwd=proj.path,
    )  # fmt: skip


def violations(proj: Project) -> list[str]:
    """Every violation the last run recorded, over all its steps."""
    return [v for s in proj.run_json()["steps"] for v in s.get("violations", [])]


def gate_passed(proj: Project) -> bool:
    return next(s for s in proj.run_json()["steps"] if s["adapter"] == "gate")["gate_passed"]
