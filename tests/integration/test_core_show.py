"""``loope runs`` and ``loope show RUN [--diff|--json]``, with unique-prefix matching."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIX


@pytest.fixture
def two_runs(project, agent_script, cli, converge):  # type: ignore[no-untyped-def]
    """0001 converges with a change to calc.py; 0002 stops at --max-iters 1 without a change."""
    # The gate does not matter here: `true` and `false` keep these runs quick.
    converge(FIX, goal="fix the add function", cwd=project.path)
    idle = agent_script("print('nothing')")
    second = cli(
        "run", "look around", "--implementer", idle, "--no-review", "--verify-cmd", "false", "--max-iters", "1",
        cwd=project.path,
    )  # fmt: skip
    assert second.exit_code == 1
    return project


def test_runs_lists_every_run(two_runs, cli):
    result = cli("runs", cwd=two_runs.path)
    assert result.exit_code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "ITER", "COST", "AGE"]
    assert lines[1].split()[:3] == ["0001-fix-the-add-function", "converged", "1/3"]
    assert lines[2].split()[:3] == ["0002-look-around", "max_iters", "1/1"]


def test_runs_json(two_runs, cli):
    result = cli("runs", "--json", cwd=two_runs.path)
    assert result.exit_code == 0, result.err
    rows = json.loads(result.out)
    assert [(r["run_id"], r["status"], r["iterations"]) for r in rows] == [
        ("0001-fix-the-add-function", "converged", 1),
        ("0002-look-around", "max_iters", 1),
    ]
    assert rows[0]["goal"] == "fix the add function"


def test_runs_with_none_yet(project, cli):
    result = cli("runs", cwd=project.path)
    assert result.exit_code == 0
    assert "no runs yet" in result.out


def test_show_accepts_a_unique_prefix(two_runs, cli):
    for ref in ("0001", "1", "0001-fix", "0001-fix-the-add-function"):
        result = cli("show", ref, cwd=two_runs.path)
        assert result.exit_code == 0, result.err
        assert result.out.startswith("# loope run 0001-fix-the-add-function"), ref
        assert "**Outcome:** converged in 1 iteration" in result.out
        assert "| calc.py | modified | 1 | 1 |" in result.out
    assert cli("show", "0002-look", cwd=two_runs.path).out.startswith("# loope run 0002-look-around")


def test_show_diff_prints_the_cumulative_diff(two_runs, cli):
    result = cli("show", "0001", "--diff", cwd=two_runs.path)
    assert result.exit_code == 0, result.err
    assert "--- a/calc.py" in result.out
    assert "-    return a - b\n+    return a + b" in result.out
    empty = cli("show", "2", "--diff", cwd=two_runs.path)
    assert empty.out.strip() == "(no changes)"


def test_show_json_prints_run_json(two_runs, cli):
    result = cli("show", "0002", "--json", cwd=two_runs.path)
    assert result.exit_code == 0, result.err
    data = json.loads(result.out)
    assert data == two_runs.run_json(1)
    assert (data["run_id"], data["stop_reason"]) == ("0002-look-around", "max_iters")


def test_show_with_workdir_from_elsewhere(two_runs, cli, tmp_path):
    result = cli("show", "0002", "--workdir", str(two_runs.path), cwd=tmp_path)
    assert result.exit_code == 0, result.err
    assert "stopped after 1 iteration (max_iters)" in result.out
