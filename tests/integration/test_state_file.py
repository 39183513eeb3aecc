"""state.md, the agent's only memory between fresh sessions: created, carried, read, tolerated when broken."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIX, GATE, run_file


def prompts(project) -> dict[int, str]:  # type: ignore[no-untyped-def]
    """The implementer prompts of the last run, by iteration."""
    run = project.run_json()
    rundir = project.runs()[-1]
    return {
        s["iteration"]: (rundir / s["dir"] / "prompt.md").read_text()
        for s in run["steps"]
        if s["role"] == "implementer"
    }


def set_status(status: str) -> str:
    """An agent body line that sets the state file's status."""
    return (
        "state = pathlib.Path(os.environ['LOOPE_STATE_FILE'])\n"
        f"state.write_text(state.read_text().replace('status: in-progress', 'status: {status}'))\n"
    )


def test_the_state_file_is_created_at_the_start_and_handed_to_the_agent(project, agent_script, cli, tmp_path):
    seen = tmp_path / "seen.json"
    body = f"""
    path = os.environ["LOOPE_STATE_FILE"]
    text = pathlib.Path(path).read_text()
    pathlib.Path({str(seen)!r}).write_text(json.dumps({{"path": path, "text": text}}))
    """
    result = cli(
        "run", "keep a tidy changelog", "--implementer", agent_script(body), "--no-review", "--max-iters", "1",
        "--sandbox-writable", str(tmp_path), cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1  # no check and no `done`: one pass, not converged
    run = project.run_json()
    workspace = Path(run["workspace"]["path"])
    got = json.loads(seen.read_text())
    assert Path(got["path"]) == workspace / ".loope" / "state.md"
    text = got["text"]
    assert text.startswith(f"---\nloop_id: {run['run_id']}\nstatus: in-progress\niteration: 0\n---\n")
    assert [line for line in text.splitlines() if line.startswith("# ")] == [
        "# Goal",
        "# Progress",
        "# Next Action",
        "# Notes",
    ]
    assert "# Goal\nkeep a tidy changelog\n" in text
    prompt = prompts(project)[1]
    assert got["path"] in prompt
    assert "$LOOPE_STATE_FILE" in prompt
    # The contract: what to keep, what to set, and when.
    for rule in ("keep `loop_id`", "set `status` (in-progress, done or blocked)", "increment `iteration`"):
        assert rule in prompt
    assert "Goal, Progress, Next Action, Notes" in prompt
    assert "`status: done` only when the goal is fully met" in prompt
    assert "`status: blocked`, with the reason under Notes" in prompt
    # And its current contents.
    assert "Its current contents:\n```markdown\n" + text.rstrip() + "\n```" in prompt
    assert run["state"] == {"loop_id": run["run_id"], "status": "in-progress", "iteration": 0}


def test_memory_between_fresh_sessions_is_carried_only_by_the_state_file(project, agent_script, cli, tmp_path):
    # Iteration 1 invents a plan nobody else can know and writes it only to the state file (its
    # reply says nothing about it); iteration 2, a fresh process, must find it there and act on it.
    body = """
    import uuid
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    n = int(os.environ["LOOPE_ITERATION"])
    if n == 1:
        token = "PLAN-" + uuid.uuid4().hex
        text = state.read_text().replace("iteration: 0", "iteration: 1")
        first_step = "Read the goal and the code, then take the first concrete step."
        text = text.replace(first_step, f"write {token} to plan.txt")
        state.write_text(text)
        pathlib.Path("scratch.txt").write_text("looked around\\n")
        print("I looked around and planned the next step.")
    else:
        text = state.read_text()
        assert "status: in-progress" in text and "iteration: 1" in text
        line = text.split("# Next Action", 1)[1].strip().splitlines()[0]
        token = line.split()[1]
        pathlib.Path("plan.txt").write_text(token + "\\n")
        state.write_text(text.replace("status: in-progress", "status: done").replace("iteration: 1", "iteration: 2"))
        print("Did the planned step.")
    """
    result = cli("run", "follow the plan", "--implementer", agent_script(body), "--no-review", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    token = run_file(run, "plan.txt").strip()
    assert token.startswith("PLAN-")
    assert len(token) == len("PLAN-") + 32
    by_iteration = prompts(project)
    assert token not in by_iteration[1]
    assert f"write {token} to plan.txt" in by_iteration[2]  # through the state file's contents, nothing else
    assert by_iteration[2].count(token) == 1
    transcripts = "".join(p.read_text() for p in (project.runs()[-1] / "agents").rglob("result.md"))
    assert token not in transcripts
    assert run["state"]["status"] == "done"
    assert run["state"]["iteration"] == 2
    assert sorted(f["path"] for f in run["changes"]["files"]) == ["plan.txt", "scratch.txt"]


def test_done_without_any_check_converges_at_once(project, agent_script, cli):
    body = set_status("done") + "pathlib.Path('CHANGELOG.md').write_text('# Changelog\\n')\n"
    result = cli("run", "start a changelog", "--implementer", agent_script(body), "--no-review", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"], run["iterations"]) == (
        "converged",
        "converged",
        True,
        1,
    )
    assert [s["role"] for s in run["steps"]] == ["implementer"]
    assert run["state"]["status"] == "done"


def test_done_is_ignored_while_the_gate_fails(project, agent_script, cli):
    # Done from the start; the fix only comes in iteration 2.
    body = (
        set_status("done")
        + "if os.environ['LOOPE_ITERATION'] == '2':\n"
        + "".join(f"    {line}\n" for line in FIX.splitlines())
    )
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--no-review", "--verify-cmd", GATE, cwd=project.path
    )
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    assert [(s["iteration"], s["gate_passed"]) for s in run["steps"] if s["role"] == "verifier"] == [
        (1, False),
        (2, True),
    ]
    ledger = [json.loads(line) for line in (project.runs()[-1] / "ledger.jsonl").read_text().splitlines()]
    assert [a["verdict"] for a in ledger] == ["kept", "converged"]


def test_blocked_goes_on_and_status_shows_the_notes(project, agent_script, cli):
    body = """
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    n = os.environ["LOOPE_ITERATION"]
    text = state.read_text().replace("status: in-progress", "status: blocked")
    text = text.split("# Notes")[0] + "# Notes\\nNEED-CREDENTIALS-9: the payment sandbox key is missing.\\n"
    state.write_text(text)
    pathlib.Path("attempts.txt").write_text("attempt " + n + "\\n")
    """
    result = cli(
        "run", "wire payments", "--implementer", agent_script(body), "--no-review", "--verify-cmd", "true",
        "--no-baseline", "--max-iters", "3", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    # A passing gate, yet blocked: never converged, and the loop went on to its last iteration.
    assert (run["stop_reason"], run["converged"], run["iterations"]) == ("max_iters", False, 3)
    assert run["state"]["status"] == "blocked"
    assert "NEED-CREDENTIALS-9" in prompts(project)[2]  # the next session sees why
    status = cli("status", run["run_id"], cwd=project.path)
    assert status.exit_code == 0, status.err
    assert "BLOCKED — the agent's notes: NEED-CREDENTIALS-9: the payment sandbox key is missing." in status.out
    info = json.loads(cli("status", run["run_id"], "--json", cwd=project.path).out)
    assert info["frontmatter"]["status"] == "blocked"
    assert info["state_notes"] == "NEED-CREDENTIALS-9: the payment sandbox key is missing."


def test_an_invalid_frontmatter_counts_as_in_progress_and_is_noted_in_the_next_prompt(project, agent_script, cli):
    body = """
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    n = os.environ["LOOPE_ITERATION"]
    pathlib.Path("work.txt").write_text("step " + n + "\\n")
    if n == "1":
        state.write_text("---\\nstatus: done\\niteration: [1\\n---\\n# Notes\\nhalf-written\\n")
    else:
        run_id = os.environ["LOOPE_RUN_ID"]
        state.write_text(f"---\\nloop_id: {run_id}\\nstatus: done\\niteration: 2\\n---\\n# Notes\\nfixed\\n")
    """
    result = cli("run", "write work", "--implementer", agent_script(body), "--no-review", cwd=project.path)
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    # The broken `done` of iteration 1 did not count; the valid one of iteration 2 did.
    assert (run["stop_reason"], run["iterations"]) == ("converged", 2)
    by_iteration = prompts(project)
    assert "invalid frontmatter" not in by_iteration[1]
    assert "Note: invalid frontmatter:" in by_iteration[2]
    assert "keep the frontmatter valid" in by_iteration[2]
    assert "iteration: [1" in by_iteration[2]  # and the broken file itself, to repair


def test_a_deleted_or_corrupt_state_file_does_not_crash_the_run(project, agent_script, cli):
    body = """
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    n = os.environ["LOOPE_ITERATION"]
    pathlib.Path("work.txt").write_text("step " + n + "\\n")
    if n == "1":
        state.unlink()
    elif n == "2":
        state.write_bytes(b"\\xff\\xfe\\x00 not markdown \\x80\\x81")
    """
    result = cli(
        "run", "write work", "--implementer", agent_script(body), "--no-review", "--verify-cmd", "true",
        "--no-baseline", "--max-iters", "3", cwd=project.path,
    )  # fmt: skip
    # A passing gate: the run converges after iteration 1 whatever became of the state file.
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 1)
    assert not (project.runs()[-1] / "error.log").exists()

    result = cli(
        "run", "write work", "--implementer", agent_script(body), "--no-review", "--max-iters", "3", cwd=project.path
    )
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["iterations"]) == ("max_iters", "max_iters", 3)
    assert not (project.runs()[-1] / "error.log").exists()
    by_iteration = prompts(project)
    assert "Note: the state file is missing; keep the frontmatter valid." in by_iteration[2]
    assert "Note: the state file has no --- frontmatter ---" in by_iteration[3]
    status = cli("status", run["run_id"], "--json", cwd=project.path)
    assert status.exit_code == 0, status.err
    assert json.loads(status.out)["state_problem"] == "the state file has no --- frontmatter ---"
    assert [f["path"] for f in run["changes"]["files"]] == ["work.txt"]  # the state file is never part of the diff


def test_a_state_file_replaced_by_a_directory_does_not_crash_the_run(project, agent_script, cli):
    body = """
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    n = os.environ["LOOPE_ITERATION"]
    pathlib.Path("work.txt").write_text("step " + n + "\\n")
    if n == "1":
        state.unlink()
        state.mkdir()
        (state / "notes.md").write_text("I keep my notes here now\\n")
    """
    result = cli(
        "run", "write work", "--implementer", agent_script(body), "--no-review", "--max-iters", "2", cwd=project.path
    )
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("max_iters", 2), run["stop_detail"]
    assert result.exit_code == 1
    assert "the state file cannot be read" in prompts(project)[2]


def test_done_from_another_runs_frontmatter_is_a_state_problem_fed_back(project, agent_script, cli):
    """With no gate and no reviewer, ``done`` ends the run only in this run's own frontmatter."""
    body = """
    state = pathlib.Path(os.environ["LOOPE_STATE_FILE"])
    n = os.environ["LOOPE_ITERATION"]
    pathlib.Path("work.txt").write_text("step " + n + "\\n")
    if n == "1":
        state.write_text("---\\nloop_id: 0001-some-other-run\\nstatus: done\\niteration: 1\\n---\\n# Notes\\n")
    elif n == "2":
        run_id = os.environ["LOOPE_RUN_ID"]
        state.write_text(f"---\\nloop_id: {run_id}\\nstatus: done\\niteration: two\\n---\\n# Notes\\n")
    else:
        state.write_text("---\\nstatus: done\\n---\\n# Notes\\n")
    """
    result = cli("run", "write work", "--implementer", agent_script(body), "--no-review", cwd=project.path)
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["converged"], run["iterations"]) == ("max_iters", False, 3)
    by_iteration = prompts(project)
    assert "status done ignored: loop_id is '0001-some-other-run'" in by_iteration[2]
    assert "status done ignored: iteration should be a number (got 'two')" in by_iteration[3]


def test_a_huge_state_file_is_cut_in_the_prompt_and_says_where_the_whole_file_is(project, agent_script, cli):
    grow = """
    state = pathlib.Path(os.environ['LOOPE_STATE_FILE'])
    text = state.read_text()
    if 'cut: only the first' not in prompt:
        state.write_text(text + '\\n' + ('a long note that never ends ' * 40 + '\\n') * 2700)
    """
    result = cli(
        "run", "keep notes", "--implementer", agent_script(grow), "--no-review", "--max-iters", "2",
        "--critic", agent_script("print('go on')"), "--checkpoint-every", "1", "--keep-workspace", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    workspace = Path(project.run_json()["workspace"]["path"])
    state = workspace / ".loope" / "state.md"
    size = state.stat().st_size
    assert size > 3_000_000
    second = prompts(project)[2]
    assert len(second.encode()) < 100_000
    assert f"cut: only the first 32000 of its {size} bytes are shown here; the whole file is {state}" in second
    assert "loop_id:" in second  # the head of the file, frontmatter first, is what is shown
    critic = next(p for p in project.runs()[-1].glob("agents/*-critic-*/prompt.md"))
    assert len(critic.read_bytes()) < 100_000
