"""The preflight: the gate on the starting tree, before any agent is called."""

from __future__ import annotations

import json

import pytest

from tests.conftest import APPROVE, FIX, GATE, no_loope_runs, one_error_line, reporting_to


@pytest.fixture
def cli(cli, tmp_path):  # type: ignore[no-untyped-def]
    """These agents report to the test through files beside the project, which the sandbox lets them write."""
    return reporting_to(cli, tmp_path)


def _agent_never_called(tmp_path):
    marker = tmp_path / "agent-was-called"
    return marker, f"pathlib.Path({str(marker)!r}).write_text('yes')\n" + FIX


def test_a_gate_whose_program_is_missing_is_a_usage_error_and_no_agent_runs(project, agent_script, cli, tmp_path):
    marker, body = _agent_never_called(tmp_path)
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", "pytset -q",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "--verify-cmd 'pytset -q'" in line
    assert "command not found: pytset" in line
    assert not marker.exists()
    assert no_loope_runs(project.path)


def test_a_missing_program_behind_a_shell_word_is_found_by_the_baseline(project, agent_script, cli, tmp_path):
    marker, body = _agent_never_called(tmp_path)
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", "cd tests && pytset -q",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 2
    run = project.run_json()
    assert run["stop_reason"] == "failed"
    assert "cannot run" in run["stop_detail"]
    assert "fix --verify-cmd" in run["stop_detail"]
    assert not marker.exists()
    assert run["steps"] == []
    assert run["gate_baseline"]["exit_code"] == 127


def test_an_already_passing_gate_converges_with_zero_iterations(project, agent_script, cli, tmp_path):
    project.write("calc.py", "def add(a, b):\n    return a + b\n")
    project.commit("fixed already")
    marker, body = _agent_never_called(tmp_path)
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 0)
    assert "already passes" in run["stop_detail"]
    assert "already passes" in result.out
    assert not marker.exists()


def test_an_already_passing_gate_with_reviewers_still_runs_the_loop(project, agent_script, cli, tmp_path):
    project.write("calc.py", "def add(a, b):\n    return a + b\n")
    project.commit("fixed already")
    marker, body = _agent_never_called(tmp_path)
    result = cli(
        "run", "document add", "--implementer", agent_script(body), "--reviewer", agent_script(APPROVE),
        "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["iterations"] == 1
    assert marker.exists()


def test_the_starting_failures_are_recorded_and_shown(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    base = run["gate_baseline"]
    assert (base["passed"], base["failing"]) == (False, 2)
    assert sorted(base["failures"]) == ["tests/test_calc.py::test_add", "tests/test_calc.py::test_add_negative"]
    rundir = project.runs()[-1]
    assert (rundir / "baseline" / "output.log").exists()
    assert (rundir / "agents" / "01-implementer-exec").is_dir()  # the agents' steps keep their numbers
    assert "2 failing at the start → 0" in (rundir / "report.md").read_text()
    ledger = [json.loads(x) for x in (rundir / "ledger.jsonl").read_text().splitlines()]
    assert [a["iteration"] for a in ledger] == [1]


def test_no_baseline_skips_it(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, "--no-baseline",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0
    run = project.run_json()
    assert run["gate_baseline"] is None
    assert not (project.runs()[-1] / "baseline").exists()
