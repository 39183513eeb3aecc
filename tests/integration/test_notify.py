"""--notify end to end: real runs through the CLI, a fake Slack Web API and a webhook server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from loope.cli.slack_actions import Reply, handle_action, post_reply
from loope.errors import LoopeError
from loope.notify.delivery import Drain, NotifyLog, Worker
from loope.store.db import Store
from tests.conftest import FIX, GATE, PYTHON, no_loope_runs, one_error_line, run_state
from tests.helpers import eventually, fake_slack, webhook_server

GOAL = "make add() return the sum & keep <calc.py> tidy"
GOAL_SHOWN = "make add() return the sum &amp; keep &lt;calc.py&gt; tidy"

# An implementer that costs $0.30 an iteration, writes a different wrong add() until iteration 4
# fixes it, and keeps its state file: in-progress, then done with long notes.
FOURTH_TIME_LUCKY = """
it = int(os.environ["LOOPE_ITERATION"])
body = "return a + b" if it >= 4 else f"return a - b + {it}"
pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    {body}\\n")
status = "done" if it >= 4 else "in-progress"
notes = "\\n".join(f"- note {n:03d}: " + "x" * 70 for n in range(90)) + "\\n- ping <!channel> & co" if it >= 4 else "-"
pathlib.Path(os.environ["LOOPE_STATE_FILE"]).write_text(
    f"---\\nloop_id: {os.environ['LOOPE_RUN_ID']}\\nstatus: {status}\\niteration: {it}\\n---\\n"
    f"# Goal\\nfix add\\n\\n# Progress\\nattempt {it}\\n\\n# Notes\\n{notes}\\n"
)
print(json.dumps({"type": "usage", "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.3}))
print(f"attempt {it}")
"""


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch):
    fake = fake_slack.start()
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("LOOPE_SLACK_API_URL", fake.url)
    yield fake
    fake.close()


@pytest.fixture
def hook():
    server = webhook_server.start()
    yield server
    server.close()


def notify_log(project) -> list[str]:  # type: ignore[no-untyped-def]
    path = project.runs()[-1] / "notify.log"
    return path.read_text().splitlines() if path.exists() else []


def reactions(fake: fake_slack.FakeSlack) -> list[tuple[str, str]]:
    return [(c.method, c.params["name"]) for c in fake.calls if c.method.startswith("reactions.")]


def run_fix(cli, project, agent: str, *extra: str):  # type: ignore[no-untyped-def]
    return cli("run", GOAL, "--implementer", agent, "--no-review", "--verify-cmd", GATE, *extra, cwd=project.path)


# -- Slack --------------------------------------------------------------------------------------


def test_slack_message_follows_the_run_and_ends_with_the_state_file_in_its_thread(project, agent_script, cli, slack):
    result = run_fix(
        cli, project, agent_script(FOURTH_TIME_LUCKY),
        "--max-iters", "10", "--max-cost", "5", "--stall-after", "5", "--notify", "slack:#loops",
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 4)

    assert slack.methods() == [
        "chat.postMessage",
        "reactions.add",
        "chat.update",
        "reactions.remove",
        "reactions.add",
        "chat.update",
        "chat.update",
        "chat.update",
        "chat.update",
        "reactions.remove",
        "reactions.add",
        *["chat.postMessage"] * (len(slack.of("chat.postMessage")) - 1),
    ]
    assert reactions(slack) == [
        ("reactions.add", "hourglass"),
        ("reactions.remove", "hourglass"),
        ("reactions.add", "arrows_counterclockwise"),
        ("reactions.remove", "arrows_counterclockwise"),
        ("reactions.add", "white_check_mark"),
    ]
    assert {c.token for c in slack.calls} == {"xoxb-test"}

    start, *thread = slack.of("chat.postMessage")
    assert start.params["channel"] == "#loops"
    text = start.params["text"]
    assert run["run_id"] in text
    assert GOAL_SHOWN in text
    assert "budget: 10 iterations · $5.00" in text
    assert "[░░░░░░░░░░] 0/10 · $0.00/$5.00 · starting" in text
    button = start.params["blocks"][-1]["elements"][0]
    assert button["action_id"] == "loope_stop"
    assert json.loads(button["value"]) == {"workdir": str(project.path), "run_id": run["run_id"]}

    ts = "1700000000.000001"
    updates = slack.of("chat.update")
    assert {(u.params["channel"], u.params["ts"]) for u in updates} == {(fake_slack.CHANNEL_ID, ts)}
    ticks = [u.params["text"].splitlines()[-1] for u in updates[:4]]
    assert ticks == [
        "[█░░░░░░░░░] 1/10 · $0.30/$5.00 · in-progress",
        "[██░░░░░░░░] 2/10 · $0.60/$5.00 · in-progress",
        "[███░░░░░░░] 3/10 · $0.90/$5.00 · in-progress",
        "[████░░░░░░] 4/10 · $1.20/$5.00 · done",
    ]
    assert all(u.params["blocks"][-1]["type"] == "actions" for u in updates[:4])  # Stop, while it runs
    final = updates[-1].params
    assert ":white_check_mark: Converged after 4 iterations" in final["text"]
    assert final["text"].splitlines()[-1] == "[████░░░░░░] 4/10 · $1.20/$5.00 · done"
    assert all(b["type"] != "actions" for b in final["blocks"])  # no Stop button on a finished run

    assert len(thread) >= 3  # ~7,000 characters of notes
    assert {(c.params["channel"], c.params["thread_ts"]) for c in thread} == {(fake_slack.CHANNEL_ID, ts)}
    assert all(len(c.params["text"]) <= 3000 for c in thread)
    state = run_state(project.runs()[-1])
    body = state.split("---\n", 2)[2]
    posted = "\n".join(c.params["text"] for c in thread)
    assert " ".join(posted.split()) == " ".join(
        body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").split()
    )
    assert "<!channel>" not in posted  # what the agent wrote cannot page the channel
    assert "status:" not in thread[0].params["text"]

    stored = Store.for_project(project.path).notification_ids(run["run_id"])
    assert stored == {"slack:#loops": {"channel": fake_slack.CHANNEL_ID, "ts": ts, "reaction": "white_check_mark"}}
    assert notify_log(project) == []


@pytest.mark.parametrize(
    ("body", "flags", "reason", "reaction"),
    [
        ("sys.exit(3)\n", [], "step_failed", "x"),
        (
            FIX + "print(json.dumps({'type': 'usage', 'input_tokens': 1, 'output_tokens': 1, 'cost_usd': 0.5}))\n",
            ["--max-cost", "0.01"],
            "budget_exceeded",
            "warning",
        ),
        ("print('nothing to do')\n", ["--max-iters", "1"], "max_iters", "heavy_minus_sign"),
        ("import time\ntime.sleep(60)\n", ["--timeout", "1"], "timed_out", "alarm_clock"),
    ],
    ids=["step_failed", "budget_exceeded", "max_iters", "timed_out"],
)
def test_the_final_reaction_says_how_the_run_ended(project, agent_script, cli, slack, *, body, flags, reason, reaction):
    result = run_fix(cli, project, agent_script(body), *flags, "--notify", "slack:#loops")
    assert result.exit_code == 1, result.out + result.err
    assert project.run_json()["stop_reason"] == reason
    final = [r for r in reactions(slack) if r[0] == "reactions.add"][-1]
    assert final == ("reactions.add", reaction)
    assert slack.of("chat.update")[-1].params["text"].count(f":{reaction}:") == 1
    assert slack.of("chat.postMessage")[-1].params.get("thread_ts") == "1700000000.000001"
    assert notify_log(project) == []


def test_the_stop_button_stops_a_detached_run(project, agent_script, cli, slack, tmp_path):
    started, release = tmp_path / "started", tmp_path / "release"
    agent = agent_script(
        f"""
        import time
        pathlib.Path({str(started)!r}).write_text("yes")
        deadline = time.monotonic() + 120
        while not pathlib.Path({str(release)!r}).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("waited")
        """
    )
    result = run_fix(cli, project, agent, "--notify", "slack:#loops", "--detach", "--sandbox-writable", str(tmp_path))
    assert result.exit_code == 0, result.out + result.err
    run_id = result.out.strip()
    try:
        assert slack.wait_for(lambda f: f.of("chat.postMessage"))
        assert eventually(started.exists)
        start = slack.of("chat.postMessage")[0]
        button = start.params["blocks"][-1]["elements"][0]
        payload = {
            "type": "block_actions",
            "user": {"id": "U123", "username": "ana"},
            "channel": {"id": fake_slack.CHANNEL_ID, "name": "loops"},
            "container": {"type": "message", "message_ts": "1700000000.000001", "channel_id": fake_slack.CHANNEL_ID},
            "message": {"ts": "1700000000.000001", "text": start.params["text"]},
            "actions": [{"action_id": button["action_id"], "block_id": "loope_controls", "value": button["value"]}],
        }
        reply = handle_action(payload, workdir=project.path)
        assert reply is not None
        assert reply.stopped == run_id
        assert (reply.channel, reply.thread_ts) == (fake_slack.CHANNEL_ID, "1700000000.000001")
        assert "<@U123> asked run" in reply.text
        assert Store.for_project(project.path).stop_flags(run_id) == (True, False)

        from loope.notify.slack import web_client

        post_reply(web_client("xoxb-test"), reply)
        confirmation = slack.of("chat.postMessage")[-1].params
        assert (confirmation["thread_ts"], confirmation["text"]) == ("1700000000.000001", reply.text)
    finally:
        release.write_text("go")
    assert eventually(lambda: project.run_json()["status"] != "running")
    assert project.run_json()["stop_reason"] == "stopped"
    assert slack.wait_for(lambda f: ("reactions.add", "octagonal_sign") in reactions(f))
    assert slack.wait_for(lambda f: ":octagonal_sign: Stopped" in f.of("chat.update")[-1].params["text"])


def test_stop_payloads_that_are_not_for_this_listener_change_nothing(project, agent_script, cli, slack):
    result = run_fix(cli, project, agent_script(FIX), "--notify", "slack:#loops")
    assert result.exit_code == 0
    run_id = project.run_json()["run_id"]
    store = Store.for_project(project.path)

    def click(value: str) -> Reply | None:
        payload = {
            "type": "block_actions",
            "user": {"id": "U1"},
            "channel": {"id": "C1"},
            "message": {"ts": "1.1"},
            "actions": [{"action_id": "loope_stop", "value": value}],
        }
        return handle_action(payload, workdir=project.path)

    finished = click(json.dumps({"workdir": str(project.path), "run_id": run_id}))
    assert finished is not None
    assert finished.stopped is None
    assert "already finished" in finished.text
    elsewhere = click(json.dumps({"workdir": "/somewhere/else", "run_id": run_id}))
    assert elsewhere is not None
    assert elsewhere.stopped is None
    assert "loope slack-listen --workdir /somewhere/else" in elsewhere.text
    escaping = click(json.dumps({"workdir": str(project.path), "run_id": "../../etc"}))
    assert escaping is not None
    assert escaping.stopped is None
    assert click("not json") is not None
    assert handle_action({"type": "block_actions", "actions": [{"action_id": "other"}]}, workdir=project.path) is None
    assert handle_action({"type": "view_submission"}, workdir=project.path) is None
    assert store.stop_flags(run_id) == (False, False)


def test_a_resumed_run_edits_its_message_instead_of_posting_a_new_one(project, agent_script, cli, slack, tmp_path):
    slept = tmp_path / "slept.json"
    agent = agent_script(
        f"""
        import time
        n = int(os.environ["LOOPE_ITERATION"])
        slept = pathlib.Path({str(slept)!r})
        if n == 2 and not slept.exists():
            slept.write_text(json.dumps(os.getpgid(0)))
            time.sleep(300)
        pathlib.Path("log.txt").write_text(f"iteration {{n}}\\n")
        print(f"did iteration {{n}}")
        """
    )
    argv = ["run", "write the log", "--implementer", agent, "--no-review", "--max-iters", "2", "--plain"]
    argv += ["--sandbox", "off"]  # the agent reports its process group (the sandbox's PID namespace renumbers it)
    runner = subprocess.Popen(
        [sys.executable, "-m", "loope", *argv, "--notify", "slack:#loops"],
        cwd=project.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert eventually(slept.exists)
        run_id = project.runs()[-1].name
        store = Store.for_project(project.path)
        assert eventually(
            lambda: store.notification_ids(run_id).get("slack:#loops", {}).get("reaction") == "arrows_counterclockwise"
        )
        runner.kill()
        runner.wait(timeout=60)
        before = len(slack.calls)
        result = cli("resume", run_id, "--plain", cwd=project.path)
    finally:
        with contextlib.suppress(ProcessLookupError):
            runner.kill()
        if slept.exists():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(slept.read_text()), signal.SIGKILL)
    assert result.exit_code == 1, result.out + result.err  # max_iters
    after = slack.calls[before:]
    ts = "1700000000.000001"
    assert [c.method for c in after] == [
        "chat.update",  # the same message, marked resumed
        "chat.postMessage",  # "Resumed at iteration 2." in its thread
        "chat.update",  # iteration 2
        "chat.update",  # the outcome
        "reactions.remove",
        "reactions.add",
        "chat.postMessage",  # the state file, in the thread
    ]
    assert all(c.params.get("ts", ts) == ts for c in after if c.method == "chat.update")
    assert [c.params["thread_ts"] for c in after if c.method == "chat.postMessage"] == [ts, ts]
    assert "(resumed)" in after[0].params["text"]
    assert after[1].params["text"] == "Resumed at iteration 2."
    assert after[3].params["text"].startswith(f"loope run `{run_id}`")
    assert [c.params["name"] for c in after if c.method.startswith("reactions.")] == [
        "arrows_counterclockwise",
        "heavy_minus_sign",
    ]
    assert len([c for c in slack.calls if c.method == "chat.postMessage" and "thread_ts" not in c.params]) == 1


def test_two_slack_channels_keep_their_own_message_ids(project, agent_script, cli, slack):
    result = run_fix(
        cli, project, agent_script(FOURTH_TIME_LUCKY), "--max-iters", "5", "--notify", "slack:#one",
        "--notify", "slack:#two",
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    posted = {c.params["channel"]: c for c in slack.of("chat.postMessage") if "thread_ts" not in c.params}
    assert set(posted) == {"#one", "#two"}
    ids = Store.for_project(project.path).notification_ids(project.run_json()["run_id"])
    # Each notifier saved its entry after every post and reaction; neither overwrote the other's.
    assert set(ids) == {"slack:#one", "slack:#two"}
    assert {ids[key]["ts"] for key in ids} == {"1700000000.000001", "1700000000.000002"}
    assert {ids[key]["reaction"] for key in ids} == {"white_check_mark"}
    assert notify_log(project) == []


def test_slack_listen_says_what_to_set_when_it_cannot_connect(project, slack, monkeypatch):
    from loope.cli.slack import slack_listen

    def listen() -> str:
        with pytest.raises(LoopeError) as refused:
            slack_listen.main(["--workdir", str(project.path)], standalone_mode=False)
        return str(refused.value)

    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    assert "set SLACK_APP_TOKEN to an app-level token" in listen()
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-test")
    slack.fail("apps.connections.open", "invalid_auth")
    assert "Slack refused the Socket Mode connection (invalid_auth)" in listen()
    assert slack.of("apps.connections.open")[0].token == "xapp-test"


@pytest.mark.parametrize(
    ("method", "mode", "times", "logged"),
    [
        ("chat.postMessage", "ratelimited", 1, "rate limited (HTTP 429); retrying in 1s"),
        ("chat.update", "http500", None, "chat.update failed: HTTP 500"),
        ("chat.postMessage", "hang", 1, "chat.postMessage failed: no answer within 10s"),
    ],
    ids=["429-once", "http500", "hang"],
)
def test_slack_failures_are_logged_and_never_change_the_run(
    project, agent_script, cli, slack, *, method, mode, times, logged
):
    slack.fail(method, mode, times)
    result = run_fix(cli, project, agent_script(FIX), "--notify", "slack:#loops")
    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["status"] == "converged"
    log = notify_log(project)
    assert any(logged in line for line in log), log
    assert all(line.split(" ", 2)[1] == "slack:#loops:" for line in log)
    assert ("reactions.add", "white_check_mark") in reactions(slack)  # it carried on after the failure
    if mode == "ratelimited":
        assert slack.methods()[:3] == ["chat.postMessage", "chat.postMessage", "reactions.add"]
    if mode == "hang":  # the start message was lost; the first tick posted it instead
        assert slack.methods()[:3] == ["chat.postMessage", "chat.postMessage", "reactions.add"]


def test_a_bad_slack_token_is_logged_once_and_slack_is_left_alone(project, agent_script, cli, slack):
    slack.fail("*", "invalid_auth", None)
    result = run_fix(cli, project, agent_script(FIX), "--notify", "slack:#loops")
    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["status"] == "converged"
    assert slack.methods() == ["chat.postMessage"]
    log = notify_log(project)
    assert len(log) == 1, log
    assert "invalid_auth (check SLACK_BOT_TOKEN); no more Slack messages for this run" in log[0]


# -- webhook ------------------------------------------------------------------------------------


def test_a_webhook_receives_every_event_in_order(project, agent_script, cli, hook):
    agent = agent_script(FIX + "print(json.dumps({'type': 'action', 'action': 'edit', 'target': 'calc.py'}))\n")
    result = run_fix(cli, project, agent, "--notify", f"webhook:{hook.url}")
    assert result.exit_code == 0, result.out + result.err
    received = hook.events()
    lines = (project.runs()[-1] / "events.jsonl").read_text().splitlines()
    assert received == [_unnumbered(line) for line in lines]
    types = [e["type"] for e in received]
    assert types[0] == "run_started"
    assert types[-1] == "run_finished"
    assert {"iteration_started", "step_started", "agent_event", "step_finished", "verify_finished"} <= set(types)
    assert {e["run_id"] for e in received} == {project.run_json()["run_id"]}
    assert notify_log(project) == []


@pytest.mark.parametrize("failure", ["http500", "refused", "hang-once"])
def test_webhook_failures_are_logged_and_never_change_the_run(project, agent_script, cli, hook, failure):
    url = webhook_server.refused_url() if failure == "refused" else hook.url
    if failure == "http500":
        hook.fail("http500")
    elif failure == "hang-once":
        hook.fail("hang", times=1)
    result = run_fix(cli, project, agent_script(FIX), "--notify", f"webhook:{url}")
    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["status"] == "converged"
    log = notify_log(project)
    expected = {
        "http500": "run_started not delivered after 3 tries: HTTP 500",
        "refused": "run_started not delivered after 3 tries: cannot connect:",
        "hang-once": "run_started delivered on try 2 (before: no answer within 5s)",
    }[failure]
    assert expected in log[0], log
    if failure != "hang-once":  # an endpoint that keeps failing gets one try an event, but the last gets all
        assert "run_finished not delivered after 3 tries" in log[-1]
        assert any("step_started not delivered after 1 try" in line for line in log), log
    # the URL's path (often a secret) stays out of the log
    assert all(" webhook http://127.0.0.1:" in line for line in log), log
    assert all("/hook" not in line for line in log), log
    if failure == "hang-once":  # retried: every event arrived, in order
        events = (project.runs()[-1] / "events.jsonl").read_text().splitlines()
        assert hook.events() == [_unnumbered(line) for line in events]
        assert len(log) == 1


def test_a_full_queue_drops_the_oldest_agent_event_first(tmp_path):
    log = NotifyLog("webhook test")
    log.open(tmp_path)
    done: list[str] = []
    gate = threading.Event()
    worker = Worker(log, name="test", capacity=3)
    worker.submit("blocker", gate.wait)
    assert eventually(lambda: not worker._tasks)  # the blocker is in flight; the queue is empty
    worker.submit("run_started event", lambda: done.append("run_started"))
    worker.submit("agent_event 1", lambda: done.append("agent 1"), droppable=True)
    worker.submit("agent_event 2", lambda: done.append("agent 2"), droppable=True)
    worker.submit("run_finished event", lambda: done.append("run_finished"))
    gate.set()
    assert worker.drain(time.monotonic() + 30) == 0
    assert done == ["run_started", "agent 2", "run_finished"]
    lines = (tmp_path / "notify.log").read_text().splitlines()
    assert len(lines) == 1
    assert "the queue is full" in lines[0]
    assert "dropped agent_event 1" in lines[0]


def test_the_end_of_a_run_waits_for_deliveries_only_so_long(tmp_path):
    from loope.events import Event, RunFinished
    from loope.records.model import Totals, WorkspaceInfo

    log = NotifyLog("slow")
    log.open(tmp_path)
    worker = Worker(log, name="slow")
    gate = threading.Event()
    worker.submit("a delivery that never ends", gate.wait)
    worker.submit("the last message", lambda: None)

    class Slow:
        def __init__(self) -> None:
            self.log, self.worker = log, worker

        def on_event(self, event: Event) -> None:
            return

    finished = RunFinished(
        run_id="0001-x",
        status="converged",
        stop_reason="converged",
        stop_detail=None,
        converged=True,
        iterations=1,
        totals=Totals(),
        best=None,
        baseline=None,
        changes=[],
        workspace=WorkspaceInfo("worktree", str(tmp_path), None, "base", "head"),
    )
    Drain([Slow()], limit_s=0.2).on_event(finished)
    gate.set()
    lines = (tmp_path / "notify.log").read_text().splitlines()
    assert len(lines) == 1
    assert "gave up after 0.2s: 2 notification(s) not delivered" in lines[0]


# -- cmd ------------------------------------------------------------------------------------------


def test_a_command_runs_once_at_the_end_with_the_run_json(project, agent_script, cli, tmp_path):
    seen = tmp_path / "seen.json"
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, os, pathlib, sys\n"
        "run = json.loads(pathlib.Path(os.environ['LOOPE_RUN_JSON']).read_text())\n"
        f"pathlib.Path({str(seen)!r}).write_text(json.dumps(\n"
        "    {'run': run, 'id': os.environ['LOOPE_RUN_ID'], 'status': os.environ['LOOPE_STATUS'], 'cwd': os.getcwd()}\n"
        "))\n"
        "print('hook ran')\n"
    )
    result = run_fix(cli, project, agent_script(FIX), "--notify", f"cmd:{PYTHON} {script}")
    assert result.exit_code == 0, result.out + result.err
    data = json.loads(seen.read_text())
    run = project.run_json()
    assert data["run"]["run_id"] == data["id"] == run["run_id"]
    assert data["run"]["status"] == data["status"] == "converged"
    assert Path(data["cwd"]).resolve() == project.path.resolve()
    assert (project.runs()[-1] / "notify-cmd.log").read_text() == "hook ran\n"
    assert notify_log(project) == []


def test_a_failing_command_is_logged_and_never_changes_the_run(project, agent_script, cli):
    result = run_fix(cli, project, agent_script(FIX), "--notify", "cmd:echo oops >&2; exit 7")
    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["status"] == "converged"
    log = notify_log(project)
    assert len(log) == 1, log
    assert "failed: exit code 7" in log[0]
    assert (project.runs()[-1] / "notify-cmd.log").read_text() == "oops\n"


def test_every_notifier_at_once(project, agent_script, cli, *, slack, hook, tmp_path):
    marker = tmp_path / "marker"
    result = run_fix(
        cli, project, agent_script(FIX),
        "--notify", "slack:#loops", "--notify", f"webhook:{hook.url}", "--notify", f"cmd:echo done > {marker}",
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert ("reactions.add", "white_check_mark") in reactions(slack)
    assert hook.events()[-1]["type"] == "run_finished"
    assert marker.read_text() == "done\n"
    assert notify_log(project) == []


# -- bad specs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("email:me@example.com", "unknown kind 'email'; use slack:CHANNEL, webhook:URL or cmd:COMMAND"),
        ("slack:", "slack: needs a value"),
        ("slack:#loops", "set SLACK_BOT_TOKEN"),
        ("webhook:ftp://example.com/x", "is not an http(s) URL"),
        ("webhook:example.com/hook", "is not an http(s) URL"),
        ("webhook:http://h:abc/x", "'http://h:abc/x' has a port that is not a number from 0 to 65535"),
        ("webhook:https://example.com:99999/x", "has a port that is not a number from 0 to 65535"),
        ("cmd:", "cmd: needs a value"),
    ],
)
def test_a_bad_notify_spec_is_one_clear_line_and_no_run(project, agent_script, cli, monkeypatch, *, spec, says):
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    result = run_fix(cli, project, agent_script(FIX), "--notify", spec)
    assert result.exit_code == 2
    assert says in one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_a_bad_notify_spec_is_refused_before_a_detached_run_starts(project, agent_script, cli, monkeypatch):
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    result = run_fix(cli, project, agent_script(FIX), "--notify", "slack:#loops", "--detach")
    assert result.exit_code == 2
    assert "set SLACK_BOT_TOKEN" in one_error_line(result.err)
    assert no_loope_runs(project.path)


def _unnumbered(line: str) -> dict:
    """An events.jsonl line as the event itself (its ``seq`` is the file's, not the event's)."""
    event = json.loads(line)
    event.pop("seq")
    return event
