"""``loope continue``: a stopped run goes on from its last completed iteration with more budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FIX, GATE, one_error_line, reporting_to

USAGE = "print(json.dumps({'type': 'usage', 'input_tokens': 10, 'output_tokens': 5, 'cost_usd': 0.01}))\n"


@pytest.fixture
def cli(cli, tmp_path):  # type: ignore[no-untyped-def]
    """These agents report to the test through files beside the project, which the sandbox lets them write."""
    return reporting_to(cli, tmp_path)


def nth_call(counter: Path, fix_on: int, before: str = "print('looked, changed nothing')\n") -> str:
    """An implementer that runs ``before`` on its first ``fix_on - 1`` calls, then fixes calc.py."""
    return (
        f"log = pathlib.Path({str(counter)!r})\n"
        "n = int(log.read_text()) + 1 if log.exists() else 1\n"
        "log.write_text(str(n))\n"
        + USAGE
        + f"if n < {fix_on}:\n"
        + "".join(f"    {line}\n" for line in before.splitlines())
        + "    sys.exit(0)\n"
        + FIX
    )


def test_continue_after_max_iters_carries_the_ledger_totals_and_branch(project, agent_script, cli, tmp_path):
    impl = agent_script(nth_call(tmp_path / "calls", 3))
    first = cli(
        "run", "fix add", "--implementer", impl, "--no-review", "--verify-cmd", GATE, "--max-iters", "2",
        "--stall-after", "5", cwd=project.path,
    )  # fmt: skip
    assert first.exit_code == 1
    before = project.run_json()
    assert before["stop_reason"] == "max_iters"
    run_id = before["run_id"]

    result = cli("continue", run_id[:4], "--max-iters", "2", "--plain", cwd=project.path)

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert len(project.runs()) == 1
    assert (run["stop_reason"], run["iterations"], run["max_iters"]) == ("converged", 3, 4)
    assert run["workspace"]["branch"] == before["workspace"]["branch"]
    ledger = [json.loads(x) for x in (project.runs()[-1] / "ledger.jsonl").read_text().splitlines()]
    assert [a["iteration"] for a in ledger] == [1, 2, 3]
    assert run["totals"]["cost_usd"] == 0.03
    assert [(s["first_iteration"], s["max_iters"], s["stop_reason"]) for s in run["segments"]] == [
        (1, 2, "max_iters"),
        (3, 2, None),
    ]
    assert json.loads((project.runs()[-1] / "spec.json").read_text())["max_iters"] == 4
    # The feedback of iteration 2 reached iteration 3's prompt.
    (third,) = sorted((project.runs()[-1] / "agents").glob("05-implementer-*"))
    assert "test_add" in (third / "prompt.md").read_text()


def test_continue_after_step_failed_redoes_the_cut_iteration(project, agent_script, cli, tmp_path):
    impl = agent_script(nth_call(tmp_path / "calls", 2, before="sys.exit(3)"))
    assert (
        cli("run", "fix add", "--implementer", impl, "--no-review", "--verify-cmd", GATE, cwd=project.path).exit_code
        == 1
    )
    before = project.run_json()
    assert before["stop_reason"] == "step_failed"

    result = cli("continue", before["run_id"], "--plain", cwd=project.path)

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 1)
    assert run["segments"][0]["stop_reason"] == "step_failed"
    assert run["max_iters"] == 3  # as many again as the first segment had, after 0 completed


def test_continue_after_stop_clears_the_spent_stop_request(project, agent_script, cli, tmp_path):
    stop_self = (
        "import subprocess\n"
        "subprocess.run([sys.executable, '-m', 'loope', 'stop', os.environ['LOOPE_RUN_ID'],"
        f" '--workdir', {str(project.path)!r}], check=True)\n"
    )
    impl = agent_script(nth_call(tmp_path / "calls", 2, before=stop_self))
    # The agent asks for the stop itself, through the project's store, which the sandbox keeps read-only.
    args = ("--implementer", impl, "--no-review", "--verify-cmd", GATE, "--sandbox", "off")
    assert cli("run", "fix add", *args, cwd=project.path).exit_code == 1
    before = project.run_json()
    assert before["stop_reason"] == "stopped"

    result = cli("continue", before["run_id"], "--plain", cwd=project.path)

    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["stop_reason"] == "converged"


def test_continue_adds_budgets_to_what_was_spent(project, agent_script, cli, tmp_path):
    impl = agent_script(nth_call(tmp_path / "calls", 3))
    args = ("--implementer", impl, "--no-review", "--verify-cmd", GATE, "--max-cost", "0.015", "--stall-after", "5")
    assert cli("run", "fix add", *args, cwd=project.path).exit_code == 1
    before = project.run_json()
    assert before["stop_reason"] == "budget_exceeded"
    spent = before["totals"]["cost_usd"]

    result = cli("continue", before["run_id"], "--max-cost", "0.5", "--max-time", "1h", "--plain", cwd=project.path)

    assert result.exit_code == 0, result.out + result.err
    spec = json.loads((project.runs()[-1] / "spec.json").read_text())
    assert spec["max_cost"] == round(spent + 0.5, 6)
    assert spec["max_time"] >= 3600
    assert project.run_json()["segments"][-1]["max_cost"] == 0.5  # what this segment was given
    assert project.run_json()["stop_reason"] == "converged"


def test_a_converged_run_continues_only_toward_a_new_goal(project, agent_script, cli):
    impl = agent_script("print('nothing to do')\n")
    project.write("calc.py", "def add(a, b):\n    return a + b\n")
    project.commit("fixed")
    assert (
        cli("run", "fix add", "--implementer", impl, "--no-review", "--verify-cmd", GATE, cwd=project.path).exit_code
        == 0
    )
    run_id = project.run_json()["run_id"]

    refused = cli("continue", run_id, cwd=project.path)
    assert refused.exit_code == 2
    assert "--goal" in one_error_line(refused.err)
    assert project.run_json()["status"] == "converged"

    result = cli("continue", run_id, "--goal", "document add()", "--max-iters", "1", "--plain", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["goal"] == "document add()"
    assert [s["goal"] for s in run["segments"]] == ["fix add", "document add()"]


def test_continue_refuses_a_run_that_is_running(project, agent_script, cli):
    impl = agent_script("print('x')\n")
    assert (
        cli(
            "run",
            "fix add",
            "--implementer",
            impl,
            "--no-review",
            "--verify-cmd",
            GATE,
            "--max-iters",
            "1",
            cwd=project.path,
        ).exit_code
        == 1
    )
    rundir = project.runs()[-1]
    import fcntl
    import os

    fd = os.open(rundir / "runner.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = cli("continue", rundir.name, cwd=project.path)
    finally:
        os.close(fd)
    assert result.exit_code == 2
    assert "being run by another process" in one_error_line(result.err)
