"""The exec: agent protocol, the terminal outputs (--json, --plain), and Ctrl-C on a real process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import APPROVE, EVENT_TYPES, FIX, GATE, gone, run_state, unsandboxed
from tests.helpers import interrupt_when


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """These agents report to the test through files outside the workspace: unsandboxed runs."""
    return unsandboxed(cli)


def recorder(out_dir: Path, then: str) -> str:
    """An agent body that saves its environment, stdin and cwd as JSON, then runs ``then``."""
    return (
        f"out = pathlib.Path({str(out_dir)!r})\n"
        "out = out / (os.environ['LOOPE_ROLE'] + '-' + os.environ['LOOPE_ITERATION'] + '.json')\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('LOOPE_')}\n"
        "out.write_text(json.dumps({'env': env, 'stdin': prompt, 'cwd': os.getcwd()}))\n" + then
    )


def test_exec_agents_get_the_protocol_variables(project, agent_script, cli, tmp_path):
    seen = tmp_path / "seen"
    seen.mkdir()
    gate = f"{GATE} && env > {seen / 'gate-env.txt'}"
    result = cli(
        "run", "fix add", "--implementer", agent_script(recorder(seen, FIX)),
        "--reviewer", agent_script(recorder(seen, APPROVE)), "--verify-cmd", gate, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    rundir = project.runs()[-1]
    workspace = Path(run["workspace"]["path"])
    impl = json.loads((seen / "implementer-1.json").read_text())
    review = json.loads((seen / "reviewer-1.json").read_text())
    for record, role, mode, step in (
        (impl, "implementer", "write", "01-implementer-exec"),
        (review, "reviewer", "read", "03-reviewer-exec"),
    ):
        env = record["env"]
        assert env["LOOPE_ROLE"] == role
        assert env["LOOPE_MODE"] == mode
        assert env["LOOPE_ITERATION"] == "1"
        assert env["LOOPE_RUN_ID"] == run["run_id"]
        assert Path(env["LOOPE_RUN_DIR"]) == rundir
        assert Path(env["LOOPE_STEP_DIR"]) == rundir / "agents" / step
        assert Path(env["LOOPE_WORKSPACE"]) == workspace
        assert Path(record["cwd"]) == workspace
        assert Path(env["LOOPE_STATE_FILE"]) == workspace / ".loope" / "state.md"
        assert Path(env["LOOPE_PROMPT_FILE"]).read_text() == record["stdin"]
    assert impl["env"]["LOOPE_STATE_FILE"] in impl["stdin"]  # the implementer's prompt names it too
    state = run_state(rundir)
    assert state.startswith(f"---\nloop_id: {run['run_id']}\nstatus: in-progress\n")
    # The gate is the user's check: loope's own variables do not leak into it.
    # None of loope's protocol variables; only the marker every step's processes carry (so none outlives it).
    gate_env = [line for line in (seen / "gate-env.txt").read_text().splitlines() if "LOOPE_" in line]
    assert [line.split("=", 1)[0] for line in gate_env] == ["LOOPE_STEP_TOKEN"]


def test_event_lines_are_events_and_other_lines_are_the_message(project, agent_script, cli):
    body = """
    print("Working on it.")
    print(json.dumps({"type": "action", "action": "read", "target": "calc.py"}))
    print(json.dumps({"type": "action", "action": "teleport", "target": "x"}))
    print(json.dumps({"type": "message", "text": "thinking aloud"}))
    print(json.dumps({"type": "usage", "input_tokens": 10, "output_tokens": 5}))
    print(json.dumps({"type": "usage", "input_tokens": 7, "output_tokens": 1, "cost_usd": 0.125}))
    print(json.dumps({"type": "something-else", "n": 1}))
    print("Done.")
    """
    cli("run", "read", "--implementer", agent_script(body), "--no-review", "--max-iters", "1", cwd=project.path)
    step = project.runs()[-1] / "agents" / "01-implementer-exec"
    events = [json.loads(line) for line in (step / "events.jsonl").read_text().splitlines()]
    assert [e.pop("seq") for e in events] == list(range(1, len(events) + 1))  # the runner's lines, numbered
    assert events == [
        {"kind": "action", "action": "read", "target": "calc.py"},
        {"kind": "action", "action": "other", "target": "x"},
        {"kind": "message", "text": "thinking aloud"},
        {"kind": "usage", "input_tokens": 10, "output_tokens": 5},
        {"kind": "usage", "input_tokens": 7, "output_tokens": 1, "cost_usd": 0.125},
    ]
    message = (step / "result.md").read_text()
    assert message.splitlines() == ["Working on it.", '{"type": "something-else", "n": 1}', "Done."]
    run = project.run_json()
    assert (run["totals"]["input_tokens"], run["totals"]["output_tokens"]) == (17, 6)
    assert run["totals"]["cost_usd"] == 0.125


def test_json_prints_one_event_per_line(project, agent_script, cli):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--reviewer", agent_script(APPROVE), "--verify-cmd", GATE,
        "--json", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.err
    lines = result.out.splitlines()
    events = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(e, dict) for e in events)
    assert {e["type"] for e in events} <= EVENT_TYPES
    assert (events[0]["type"], events[-1]["type"]) == ("run_started", "run_finished")
    assert events[-1]["converged"] is True
    on_disk = (project.runs()[-1] / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in on_disk] == [e["type"] for e in events]


def test_plain_output_has_no_escape_codes(project, agent_script, cli):
    body = FIX + "print(json.dumps({'type': 'action', 'action': 'edit', 'target': 'calc.py'}))\n"
    result = cli(
        "run", "fix add", "--implementer", agent_script(body), "--reviewer", agent_script(APPROVE),
        "--verify-cmd", GATE, "--plain", "--color", "always", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.err
    assert "\x1b" not in result.out + result.err
    assert "iteration 1/3" in result.out
    assert "✎ edit calc.py" in result.out
    assert "converged in 1 iteration" in result.out
    assert "[03] reviewer exec  ok" in result.out
    assert "PASS" in result.out


def test_ctrl_c_records_the_run_as_stopped_and_exits_130(project, agent_script, tmp_path):
    started = tmp_path / "agent.pid"
    implementer = agent_script(
        f"""
        import time
        pathlib.Path({str(started)!r}).write_text(str(os.getpid()))
        time.sleep(300)
        """
    )
    loope = Path(sys.executable).parent / "loope"
    argv = [str(loope), "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, "--plain"]
    argv += ["--sandbox", "off"]  # the agent reports its pid through a file outside the workspace
    code, out, err = interrupt_when([started], argv, project.path)
    assert code == 130, out + err
    assert "Traceback" not in err
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"]) == ("stopped", "stopped", False)
    assert run["finished_at"]
    assert gone(int(started.read_text())), "the agent outlived Ctrl-C"
    assert "stopped after 1 iteration (stopped)" in (project.runs()[-1] / "report.md").read_text()
    assert os.path.exists(project.runs()[-1] / "events.jsonl")


def test_non_utf8_output_from_agents_does_not_break_the_run(project, agent_script, cli):
    implementer = agent_script(
        FIX + "sys.stdout.buffer.write(b'latin-1 caf\\xe9\\n'); sys.stderr.buffer.write(b'\\xff\\xfe')\n"
    )
    reviewer = agent_script("sys.stdout.buffer.write(b'ok \\xff\\nVERDICT: PASS\\n')\n")
    result = cli(
        "run", "fix add", "--implementer", implementer, "--reviewer", reviewer, "--verify-cmd", GATE, "--plain",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert [s["verdict"] for s in run["steps"] if s["role"] == "reviewer"] == ["PASS"]
    message = (project.runs()[-1] / "agents" / "01-implementer-exec" / "result.md").read_text(encoding="utf-8")
    assert "latin-1 caf\ufffd" in message


def test_quiet_prints_only_the_summary(project, converge):
    result = converge(FIX, "--quiet", goal="fix add", cwd=project.path)
    assert result.exit_code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "converged in 1 iteration"
    assert not any(line.startswith(("iteration ", "[0")) for line in lines)


def test_color_always_draws_the_live_view_and_ends_with_the_summary(project, agent_script, cli):
    implementer = agent_script(
        'print(json.dumps({"type": "action", "action": "edit", "target": "calc.py"}))\n'
        'pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")\n'
        'print("fixed add")\n'
    )
    result = cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE,
        "--color", "always", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.err
    assert "\x1b[" in result.out  # styled: the live view, not plain lines
    assert "iteration 1/3" in result.out
    assert "✎ edit calc.py" in result.out
    assert "converged in 1 iteration" in result.out
    assert "land:   loope apply 0001" in result.out
