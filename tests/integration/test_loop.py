"""The core loop end to end: scripted exec: agents, real git repositories, real pytest as the gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import APPROVE, FIX, FIXED_CALC, GATE, alive_in_group, gone, in_workspace, run_file, run_has


@pytest.fixture
def cli(cli, workspace_mode):  # type: ignore[no-untyped-def]
    """Each test runs in the default workspace and in an overlay."""
    return in_workspace(cli, workspace_mode)


def steps_of(run: dict, role: str) -> list[dict]:
    return [s for s in run["steps"] if s["role"] == role]


def step_dir(project, name: str) -> Path:  # type: ignore[no-untyped-def]
    return project.runs()[-1] / "agents" / name


def test_a_reviewer_block_is_fed_back_and_the_next_iteration_passes(project, agent_script, cli):
    implementer = agent_script(
        FIX
        + "if 'NEEDS-DOCSTRING-7' in prompt:\n"
        + "    pathlib.Path('calc.py').write_text('def add(a, b):\\n    \"The sum.\"\\n    return a + b\\n')\n"
    )
    reviewer = agent_script(
        """
        if os.environ["LOOPE_ITERATION"] == "1":
            print("calc.py:1 NEEDS-DOCSTRING-7: add() has no docstring.")
            print("VERDICT: BLOCK")
        else:
            print("VERDICT: PASS")
        """
    )
    result = cli(
        "run", "fix add", "--implementer", implementer, "--reviewer", reviewer, "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"], run["iterations"]) == (
        "converged",
        "converged",
        True,
        2,
    )
    assert [s["verdict"] for s in steps_of(run, "reviewer")] == ["BLOCK", "PASS"]
    assert [s["verdict_inferred"] for s in steps_of(run, "reviewer")] == [False, False]
    # iteration 1: 01 implementer, 02 gate, 03 reviewer; iteration 2 starts at step 04.
    second = step_dir(project, "04-implementer-exec") / "prompt.md"
    text = second.read_text()
    assert "address these blocking findings" in text
    assert "calc.py:1 NEEDS-DOCSTRING-7: add() has no docstring." in text
    assert "VERDICT" not in text.split("address these blocking findings", 1)[1].split("#", 1)[0]
    first = (step_dir(project, "01-implementer-exec") / "prompt.md").read_text()
    assert "NEEDS-DOCSTRING-7" not in first
    assert '"The sum."' in run_file(run, "calc.py")


def test_a_failing_gate_is_fed_back_and_reviewers_wait_for_a_passing_gate(project, agent_script, cli):
    implementer = agent_script(
        """
        if "test_add_negative" in prompt:
            pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
        else:
            pathlib.Path("calc.py").write_text("def add(a, b):\\n    return abs(a) + abs(b)\\n")
        """
    )
    reviewer = agent_script(APPROVE)
    result = cli(
        "run", "fix add", "--implementer", implementer, "--reviewer", reviewer, "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    roles = [(s["iteration"], s["role"], s["adapter"]) for s in run["steps"]]
    assert roles == [
        (1, "implementer", "exec"),
        (1, "verifier", "gate"),  # failed: no reviewer in iteration 1
        (2, "implementer", "exec"),
        (2, "verifier", "gate"),
        (2, "reviewer", "exec"),
    ]
    assert [s["gate_passed"] for s in steps_of(run, "verifier")] == [False, True]
    prompt = (step_dir(project, "03-implementer-exec") / "prompt.md").read_text()
    assert "Failing checks:" in prompt
    assert "`tests/test_calc.py::test_add_negative`" in prompt
    assert "assert 5 == -5" in prompt  # the assertion line, parsed from pytest's output
    assert "Last lines of its output:" in prompt
    assert "test_add_negative" not in (step_dir(project, "01-implementer-exec") / "prompt.md").read_text()
    ledger = [json.loads(line) for line in (project.runs()[-1] / "ledger.jsonl").read_text().splitlines()]
    assert [a["iteration"] for a in ledger] == [1, 2]
    assert ledger[0]["gate"]["passed"] is False
    assert ledger[0]["gate"]["failures"] == ["tests/test_calc.py::test_add_negative"]
    assert ledger[1]["verdict"] == "converged"
    assert ledger[1]["changed_files"] == ["calc.py"]


def test_a_hard_agent_failure_halts_at_once_with_step_failed(project, agent_script, cli):
    implementer = agent_script("print('working'); print('fatal: no model', file=sys.stderr); sys.exit(3)")
    result = cli("run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, cwd=project.path)
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"], run["iterations"]) == (
        "step_failed",
        "step_failed",
        False,
        1,
    )
    assert "exit code 3" in run["stop_detail"]
    assert "fatal: no model" in run["stop_detail"]
    assert [(s["role"], s["ok"]) for s in run["steps"]] == [("implementer", False)]  # no gate, no retry
    assert "halted after 1 iteration (step_failed)" in (project.runs()[-1] / "report.md").read_text()


def test_a_failing_reviewer_halts_with_step_failed(project, agent_script, cli):
    reviewer = agent_script("sys.exit(2)")
    implementer = agent_script(FIX)
    result = cli(
        "run", "fix", "--implementer", implementer, "--reviewer", reviewer, "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("step_failed", 1)
    assert run["steps"][-1]["role"] == "reviewer"
    assert run["steps"][-1]["ok"] is False


def test_a_timeout_halts_with_timed_out_and_leaves_none_of_the_agents_processes(project, agent_script, cli, tmp_path):
    pids = tmp_path / "agent-pids.json"
    implementer = agent_script(
        f"""
        import subprocess, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        pathlib.Path({str(pids)!r}).write_text(json.dumps([os.getpid(), child.pid, os.getpgid(0)]))
        print(json.dumps({{"type": "action", "action": "command", "target": "sleep 300"}}), flush=True)
        time.sleep(300)
        """
    )
    # Unsandboxed: the agent reports its pids, which the sandbox's PID namespace would renumber.
    args = ("--implementer", implementer, "--no-review", "--timeout", "2", "--sandbox", "off")
    result = cli("run", "fix add", *args, cwd=project.path)
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"]) == ("timed_out", "timed_out", False)
    assert "timed out after 2s" in run["stop_detail"]
    assert "sleep 300" in run["stop_detail"]  # the last action, to say where it hung
    agent, child, group = json.loads(pids.read_text())
    assert gone(agent)
    assert gone(child)
    assert alive_in_group(group) == []


def test_dry_run_converges_in_one_iteration_without_any_agent(project, cli):
    # The real agents are checked first (here: programs that exist), then only stubs run.
    real = ("--implementer", "exec:true", "--reviewer", "exec:true")
    result = cli("run", "add a changelog", "--dry-run", *real, "--plain", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 1)
    assert {s["adapter"] for s in run["steps"]} == {"stub"}
    assert "Goal: add a changelog" in run_file(run, "loope-dry-run.md")
    assert [f["path"] for f in run["changes"]["files"]] == ["loope-dry-run.md"]
    assert not (project.path / "loope-dry-run.md").exists()
    assert "dry run" in result.out


def test_reviewers_run_in_parallel(project, agent_script, cli, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()

    def reviewer(name: str) -> str:
        # Each waits for the other to have started: run one after the other, the first gives up.
        return agent_script(
            f"""
            import time
            root = pathlib.Path({str(barrier)!r})
            (root / {name!r}).touch()
            deadline = time.monotonic() + 60
            while len(list(root.iterdir())) < 2:
                if time.monotonic() > deadline:
                    print("the other reviewer never started"); sys.exit(1)
                time.sleep(0.05)
            print("VERDICT: PASS")
            """
        )

    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--reviewer", reviewer("a"), "--reviewer", reviewer("b"),
        "--verify-cmd", GATE, "--sandbox-writable", str(barrier), cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert [s["verdict"] for s in steps_of(run, "reviewer")] == ["PASS", "PASS"]


def test_one_blocking_reviewer_of_two_blocks(project, agent_script, cli):
    blocker = agent_script("print('Missing a test for zero.')\nprint('**VERDICT: BLOCK**')")
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--reviewer", agent_script(APPROVE),
        "--reviewer", blocker, "--verify-cmd", GATE, "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert sorted(s["verdict"] for s in steps_of(run, "reviewer")) == ["BLOCK", "PASS"]
    assert run["stop_reason"] == "max_iters"


def test_an_inferred_block_is_recorded_as_inferred(project, agent_script, cli):
    reviewer = agent_script("print('Blocking: there is no test for zero.')")
    cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--reviewer", reviewer, "--verify-cmd", GATE,
        "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    review = steps_of(project.run_json(), "reviewer")[0]
    assert (review["verdict"], review["verdict_inferred"]) == ("BLOCK", True)
    assert "BLOCK (inferred)" in (project.runs()[-1] / "report.md").read_text()


def test_design_contract_is_saved_and_given_to_implementer_and_reviewers(project, agent_script, cli):
    designer = agent_script("print('# Contract CONTRACT-MARK-31')\nprint('1. add(a, b) returns a + b.')")
    result = cli(
        "run", "fix add", "--design", "--designer", designer, "--implementer", agent_script(FIX),
        "--reviewer", agent_script(APPROVE), "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    rundir = project.runs()[-1]
    run = project.run_json()
    assert (run["steps"][0]["role"], run["steps"][0]["iteration"]) == ("designer", 0)
    assert "CONTRACT-MARK-31" in (rundir / "design-contract.md").read_text()
    assert "CONTRACT-MARK-31" in run_file(run, "DESIGN_CONTRACT.md")
    assert "CONTRACT-MARK-31" in (rundir / "agents" / "02-implementer-exec" / "prompt.md").read_text()
    assert "CONTRACT-MARK-31" in (rundir / "agents" / "04-reviewer-exec" / "prompt.md").read_text()
    assert "## Design" in (rundir / "report.md").read_text()


def test_an_agent_verifier_blocks_convergence_until_it_passes(project, agent_script, cli):
    verifier = agent_script(
        """
        assert os.environ["LOOPE_ROLE"] == "verifier" and os.environ["LOOPE_MODE"] == "read"
        if os.environ["LOOPE_ITERATION"] == "1":
            print("Criterion 2 VERIFIER-GAP-5 is not met.")
            print("VERDICT: BLOCK")
        else:
            print("VERDICT: PASS")
        """
    )
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verifier", verifier,
        "--verify-cmd", GATE,
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    verdicts = [(s["adapter"], s["verdict"]) for s in steps_of(run, "verifier") if s["adapter"] != "gate"]
    assert verdicts == [("exec", "BLOCK"), ("exec", "PASS")]
    prompt = (step_dir(project, "04-implementer-exec") / "prompt.md").read_text()
    assert "VERIFIER-GAP-5" in prompt


def test_an_always_blocking_verifier_never_converges(project, agent_script, cli):
    verifier = agent_script("print('VERDICT: BLOCK')")
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--verifier", verifier,
        "--verify-cmd", GATE,
        "--max-iters", "2", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert run["converged"] is False
    assert run["stop_reason"] in ("max_iters", "stalled")
    assert project.read("calc.py") != FIXED_CALC  # nothing lands in the user's tree by itself


def test_a_reviewer_that_writes_has_its_changes_undone_and_fed_back(project, agent_script, cli):
    reviewer = agent_script(
        """
        pathlib.Path("calc.py").write_text("# the reviewer was here\\n")
        pathlib.Path("review-notes.txt").write_text("notes\\n")
        print("VERDICT: PASS" if os.environ["LOOPE_ITERATION"] == "2" else "VERDICT: BLOCK")
        """
    )
    # The guard as the only line (inside the sandbox the reviewer's writes are refused: test_sandbox_attacks.py).
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--reviewer", reviewer, "--verify-cmd", GATE,
        "--sandbox", "off", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    review = steps_of(run, "reviewer")[0]
    assert any("may only read" in v for v in review["violations"])
    assert run_file(run, "calc.py") == FIXED_CALC
    assert not run_has(run, "review-notes.txt")
    assert [f["path"] for f in run["changes"]["files"]] == ["calc.py"]
    prompt = (step_dir(project, "04-implementer-exec") / "prompt.md").read_text()
    assert "### Changes that were undone" in prompt
