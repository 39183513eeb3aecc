"""Attacks on the metric: its script is protected in every shape, with the local modules it imports.

The attacker (a shell ``exec:`` implementer) may only edit solution.py (metric mode needs
``--editable``); it tries to forge a better score by rewriting whatever the metric command runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.conftest import PYTHON, Project, run_file, unsandboxed
from tests.helpers.attacks import sandboxed_too
from tests.helpers.tree_snapshot import repo_changes, snapshot

FORGE = "print('SCORE', 0)\\n"


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """The guard as the only line (``--sandbox off``): with the sandbox these writes are refused first."""
    return unsandboxed(cli)


@pytest.fixture
def scored(tmp_path: Path) -> Project:
    proj = Project(tmp_path / "scored")
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    proj.write("solution.py", "SCORE = 10\n")
    proj.write("scoring.py", "import solution\n\ndef score():\n    return solution.SCORE\n")
    proj.write(
        "tools/score.py", "import sys\nsys.path.insert(0, '..')\nimport scoring\nprint('SCORE', scoring.score())\n"
    )
    proj.write("bench/__init__.py", "")
    proj.write("bench/__main__.py", "from bench import report\nreport.show()\n")
    proj.write("bench/report.py", "import scoring\n\ndef show():\n    print('SCORE', scoring.score())\n")
    proj.write("measure.sh", f"#!/bin/sh\ncd tools && {PYTHON} score.py\n")
    proj.commit("initial")
    return proj


SHAPES = {
    "cd && python": ("cd tools && {py} score.py", "tools/score.py"),
    "sh -c": ("sh -c 'cd tools && {py} score.py'", "tools/score.py"),
    "python -m": ("{py} -m bench", "bench/__main__.py"),
    "python -m, an imported module": ("{py} -m bench", "bench/report.py"),
    "a shell script": ("sh measure.sh", "tools/score.py"),
    "an imported local module": ("cd tools && {py} score.py", "scoring.py"),
}


@pytest.mark.parametrize(("shape", "sandbox"), sandboxed_too(SHAPES, "cd && python"))
def test_the_metric_in_any_shape_cannot_be_rewritten(scored, tmp_path, cli, shape, sandbox):
    command, target = SHAPES[shape]
    command = command.format(py=PYTHON)
    script = tmp_path / "attack.sh"
    forged = "def score():\\n    return 0\\n" if target == "scoring.py" else FORGE
    script.write_text(f"printf '{forged}' > {target}\n" + "printf 'SCORE = 9\\n' > solution.py\n")
    before = snapshot(scored.path, skip=(".loope",))
    result = cli(
        "run", "lower the score", "--implementer", f"exec:sh {shlex.quote(str(script))}", "--no-review",
        "--metric-cmd", command, "--direction", "lower", "--editable", "solution.py", "--editable", "**/*.py",
        "--max-iters", "1", "--plain", "--sandbox", sandbox, cwd=scored.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    violations = [v for s in run["steps"] for v in s.get("violations", [])]
    if sandbox == "off":  # inside the sandbox the write is refused: nothing to undo
        assert f"{target} is protected; your change to it was undone" in violations, violations
    assert run_file(run, target) == (scored.path / target).read_text()
    assert run["best"]["score"] == 9  # the honest change was measured, by the real metric
    assert repo_changes(before, snapshot(scored.path, skip=(".loope",))) == []


def test_a_module_the_metric_imports_stays_the_agents_when_editable_names_it(scored, tmp_path, cli):
    """solution.py is imported by the metric too: naming it editable keeps it the agent's to change."""
    script = tmp_path / "attack.sh"
    script.write_text("printf 'SCORE = 7\\n' > solution.py\n")
    result = cli(
        "run", "lower the score", "--implementer", f"exec:sh {script}", "--no-review",
        "--metric-cmd", f"cd tools && {PYTHON} score.py", "--direction", "lower", "--editable", "solution.py",
        "--max-iters", "1", "--plain", cwd=scored.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert scored.run_json()["best"]["score"] == 7


def test_a_module_shadowing_python_m_is_refused(project, tmp_path, cli):
    """``python -m pytest`` runs a pytest.py in the workspace first, if one appears there."""
    from tests.conftest import GATE

    script = tmp_path / "attack.sh"
    script.write_text("printf 'raise SystemExit(0)\\n' > pytest.py\n")
    result = cli(
        "run", "fix add", "--implementer", f"exec:sh {script}", "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    violations = [v for s in project.run_json()["steps"] for v in s.get("violations", [])]
    assert "pytest.py is protected; your change to it was undone" in violations
