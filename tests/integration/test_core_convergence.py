"""When the loop stops: convergence, --max-iters, stalls, the agent's own "done" (DESIGN.md, The loop)."""

from __future__ import annotations

from tests.conftest import FIX, GATE, PYTHON


def test_max_iters_1_is_a_single_pass(project, agent_script, cli):
    implementer = agent_script("pathlib.Path('calc.py').write_text('def add(a, b):\\n    return 0\\n')")
    result = cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, "--max-iters", "1",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["iterations"], run["converged"]) == (
        "max_iters",
        "max_iters",
        1,
        False,
    )
    assert [s["role"] for s in run["steps"]] == ["implementer", "verifier"]


def test_max_iters_defaults_to_3(project, agent_script, cli):
    # A different wrong change each time: progress, never convergence, never a stall.
    implementer = agent_script(
        "n = os.environ['LOOPE_ITERATION']\npathlib.Path('calc.py').write_text(f'def add(a, b):\\n    return {n}\\n')"
    )
    result = cli("run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, cwd=project.path)
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("max_iters", 3)


def test_two_iterations_without_a_change_stall(project, agent_script, cli):
    implementer = agent_script("print('I see nothing to change.')")
    result = cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, "--max-iters", "5",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    # The first idle iteration had fresh feedback (the failing gate) to act on; the second stalls.
    assert (run["stop_reason"], run["iterations"]) == ("stalled", 2)
    assert "no effective change" in run["stop_detail"]


def test_the_same_failures_again_and_again_stall(project, agent_script, cli):
    implementer = agent_script(
        "src = pathlib.Path('calc.py')\n"
        "src.write_text(src.read_text() + f\"# attempt {os.environ['LOOPE_ITERATION']}\\n\")"
    )
    result = cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, "--max-iters", "6",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("stalled", 3)
    assert "the same failures" in run["stop_detail"]


def test_stall_after_1_stops_an_idle_iteration_that_repeats_the_last_failures(project, agent_script, cli):
    implementer = agent_script(
        "if os.environ['LOOPE_ITERATION'] == '1':\n"
        "    pathlib.Path('calc.py').write_text('def add(a, b):\\n    return a * b\\n')\n"
    )
    cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, "--max-iters", "5",
        "--stall-after", "1", cwd=project.path,
    )  # fmt: skip
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("stalled", 2)


def test_the_agents_done_is_the_gate_only_when_there_is_no_check(project, agent_script, cli):
    implementer = agent_script(
        """
        state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
        if os.environ["LOOPE_ITERATION"] == "2":
            state.write_text(state.read_text().replace("status: in-progress", "status: done"))
        pathlib.Path("notes.txt").write_text("iteration " + os.environ["LOOPE_ITERATION"] + "\\n")
        """
    )
    result = cli("run", "write notes", "--implementer", implementer, "--no-review", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"], run["state"]["status"]) == ("converged", 2, "done")
    # The state file is the agent's memory, never part of the change.
    assert [f["path"] for f in run["changes"]["files"]] == ["notes.txt"]


def test_the_agents_done_never_overrides_a_failing_gate(project, agent_script, cli):
    implementer = agent_script(
        """
        state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
        state.write_text(state.read_text().replace("status: in-progress", "status: done"))
        pathlib.Path("calc.py").write_text("def add(a, b):\\n    return " + os.environ["LOOPE_ITERATION"] + "\\n")
        """
    )
    cli(
        "run",
        "fix add",
        "--implementer",
        implementer,
        "--no-review",
        "--verify-cmd",
        GATE,
        "--max-iters",
        "2",
        cwd=project.path,
    )
    run = project.run_json()
    assert (run["stop_reason"], run["converged"]) == ("max_iters", False)


def test_a_gate_that_hangs_times_out_and_is_fed_back(project, agent_script, cli):
    """A gate timeout is the agent's failure to act on (its change hangs the tests), not a halt."""
    implementer = agent_script(
        "if 'failed (timed out)' in prompt:\n"
        + "".join(f"    {line}\n" for line in FIX.splitlines())
        + "else:\n"
        + "    pathlib.Path('calc.py').write_text('def add(a, b):\\n    while True:\\n        pass\\n')\n"
    )
    # A check that starts fast, so that only the hang can hit the short timeout.
    quick_gate = f"{PYTHON} -c 'from calc import add; assert add(2, 3) == 5 and add(-2, -3) == -5'"
    result = cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", quick_gate, "--timeout", "3",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    assert [s["gate_passed"] for s in run["steps"] if s["role"] == "verifier"] == [False, True]
    prompt = (project.runs()[-1] / "agents" / "03-implementer-exec" / "prompt.md").read_text()
    assert "### The verify command failed (timed out)" in prompt
