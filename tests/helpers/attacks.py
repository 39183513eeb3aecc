"""Running an attacking agent: a shell script as the ``exec:`` implementer of a ``fix add`` run."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path

import pytest

from loope.sandbox import bwrap
from tests.conftest import GATE, Project

NEEDS_BWRAP = pytest.mark.skipif(not bwrap.support().works, reason=f"needs bubblewrap: {bwrap.support().reason}")
SANDBOX_ON = pytest.param("on", marks=NEEDS_BWRAP)
BOTH = [SANDBOX_ON, "off"]


def sandboxed_too(values: Iterable[str], representative: str) -> list:  # type: ignore[type-arg]
    """``(value, sandbox)`` params: every value with the guard as the only line (``off``), and the
    cheapest representative of the class inside the sandbox too, where the guard is the second line."""
    params = [pytest.param(v, "off", id=f"{v}-off") for v in values]
    return [*params, pytest.param(representative, "on", marks=NEEDS_BWRAP, id=f"{representative}-on")]


def shell_implementer(where: Path, script: str) -> str:
    """Write ``script`` to a new file under ``where`` and return the ``exec:`` spec that runs it with sh."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"attack-{len(list(where.glob('attack-*.sh')))}.sh"
    path.write_text(script)
    return f"exec:sh {shlex.quote(str(path))}"


def run_attack(cli, proj: Project, implementer: str, *extra: str, gate: str = GATE):  # type: ignore[no-untyped-def]
    """One iteration of ``fix add`` with ``implementer``, no reviewer and ``gate``; the workspace is kept to be read."""
    return cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", gate,
        "--max-iters", "1", "--keep-workspace", "--plain", *extra, cwd=proj.path,
    )  # fmt: skip


def violations(proj: Project) -> list[str]:
    """Every violation the last run recorded, over all its steps."""
    return [v for s in proj.run_json()["steps"] for v in s.get("violations", [])]


def gate_passed(proj: Project) -> bool:
    return next(s for s in proj.run_json()["steps"] if s["adapter"] == "gate")["gate_passed"]
