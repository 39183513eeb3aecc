"""The real claude and codex CLIs losing the API and hitting plan limits: retried, waited out, or stopped."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time

import pytest

from loope.agents.setback import iso, parse_reset
from loope.control import run_status
from loope.text import local_clock
from tests.conftest import GATE, Project, run_file
from tests.e2e.model_server import (
    Fail,
    MessagesRequest,
    Response,
    ResponsesRequest,
    Turn,
    codex_usage_limit,
    exec_command,
    message,
    plan_limit,
    reply,
    text,
    tool_use,
)
from tests.helpers import eventually

pytestmark = pytest.mark.e2e

FAST = "retry_delay = 0.05\n"


class FailFirst:
    """A script whose first ``times`` main requests get ``failure``; later ones go to ``then``."""

    def __init__(self, times: int, failure, then) -> None:
        self.times, self.failure, self.then = times, failure, then
        self.failed = 0
        self.answered_at: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request):
        with self._lock:
            main = getattr(request, "main", True)
            if main and self.failed < self.times:
                self.failed += 1
                return self.failure() if callable(self.failure) else self.failure
            if main:
                self.answered_at.append(time.time())
        return self.then(request)


def claude_fixer(request: MessagesRequest) -> Turn | Fail:
    """Edit calc.py in one go, then say what changed."""
    if not request.main:
        return reply(text("Fix add"))
    if request.turn == 0:
        calc = f"{request.cwd}/calc.py"
        return reply(tool_use("Edit", file_path=calc, old_string="return a - b", new_string="return a + b"))
    return reply(text("add() returns a + b now."))


def run_loop(cli, project: Project, *args: str):
    return cli(
        "run", "Fix add() in calc.py", "--verify-cmd", GATE, "--timeout", "120", "--no-review", *args, cwd=project.path
    )


def events_of(project: Project) -> list[dict]:
    return [json.loads(line) for line in (project.runs()[-1] / "events.jsonl").read_text().splitlines()]


def implementer(project: Project) -> dict:
    (step,) = [s for s in project.run_json()["steps"] if s["role"] == "implementer"]
    return step


def test_claude_529_then_success_is_one_iteration_with_two_attempts(project, cli, use_claude, model_server):
    project.write("loope.toml", FAST)
    use_claude(FailFirst(1, Fail(529, "Overloaded"), claude_fixer))  # CLAUDE_CODE_MAX_RETRIES=0: it gives up at once

    result = run_loop(cli, project, "--implementer", "claude")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 1)
    step = implementer(project)
    assert step["attempts"] == 2
    assert step["ok"]
    step_dir = project.runs()[-1] / step["dir"]
    first = (step_dir / "attempts" / "1" / "transcript.jsonl").read_text()
    assert '"api_error_status":529' in first.replace(" ", "")
    (line,) = [json.loads(x) for x in (step_dir / "attempts.jsonl").read_text().splitlines()]
    assert line["kind"] == "transient"
    assert "529" in line["error"]
    assert run_file(run, "calc.py") == "def add(a, b):\n    return a + b\n"
    assert [e["type"] for e in events_of(project)].count("step_retry") == 1


def test_claude_persistent_500_ends_as_step_failed_after_the_retries(project, cli, use_claude, model_server):
    project.write("loope.toml", FAST)
    use_claude(FailFirst(99, Fail(500, "Internal server error"), claude_fixer))

    result = run_loop(cli, project, "--implementer", "claude", "--retries", "2")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "500" in run["stop_detail"]
    assert "after 3 attempts" in run["stop_detail"]
    assert implementer(project)["attempts"] == 3
    main = [r for r in model_server.requests_for("anthropic") if MessagesRequest(r.body).main]
    assert len(main) == 3


def test_claude_plan_limit_is_waited_out_until_its_exact_reset(project, cli, use_claude, model_server):
    resets: list[float] = []

    def limited() -> Fail:
        resets.append(time.time() + 3)  # a few seconds after the refused request, however slow the start was
        return plan_limit(resets[-1])

    script = FailFirst(1, limited, claude_fixer)
    use_claude(script, subscription=True)

    result = run_loop(cli, project, "--implementer", "claude", "--retries", "0")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("converged", 1)
    events = events_of(project)
    (wait,) = [e for e in events if e["type"] == "limit_wait"]
    types = [e["type"] for e in events]
    assert types.index("limit_wait") < types.index("step_finished")
    # The reset comes from the rate_limit_event's resetsAt (Unix seconds), not the rounded "resets 9:45am".
    assert wait["reset_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(resets[0])))
    reset = parse_reset(wait["reset_at"])
    assert reset is not None
    assert script.answered_at
    assert min(script.answered_at) >= reset
    assert implementer(project)["attempts"] == 2


def test_claude_plan_limit_with_no_wait_stops_as_usage_limited(project, cli, use_claude, model_server):
    reset_at = time.time() + 3600
    use_claude(FailFirst(1, lambda: plan_limit(reset_at), claude_fixer), subscription=True)

    result = run_loop(cli, project, "--implementer", "claude", "--no-wait")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "usage_limited"
    assert time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(reset_at))) in run["stop_detail"]
    assert "hit your" in run["stop_detail"]


def codex_reply(request: ResponsesRequest) -> Response:
    return Response((message("Looked at calc.py; nothing to change."),))


CODEX_EDIT = "import pathlib; p = pathlib.Path('calc.py'); p.write_text(p.read_text().replace('a - b', 'a + b'))"


def codex_fixer(request: ResponsesRequest) -> Response:
    """Fix calc.py with one shell command, then say so."""
    if request.turn == 0:
        return Response((exec_command(f'{shlex.quote(sys.executable)} -c "{CODEX_EDIT}"'),))
    return Response((message("add() returns a + b now."),))


def test_codex_server_error_then_success_is_retried_in_the_same_step(project, cli, use_codex, model_server):
    project.write("loope.toml", FAST)
    use_codex(FailFirst(1, Fail(500, "boom"), codex_reply))

    result = run_loop(cli, project, "--implementer", "codex", "--max-iters", "1")

    assert result.exit_code == 1  # the gate still fails: the reply changed nothing
    assert project.run_json()["stop_reason"] == "max_iters"
    step = implementer(project)
    assert step["ok"]
    assert step["attempts"] == 2
    assert len(model_server.requests_for("openai")) == 2


def test_codex_usage_limit_with_no_wait_stops_with_the_reset_time(project, cli, use_codex, model_server):
    reset_at = time.time() + 7200
    use_codex(FailFirst(1, lambda: codex_usage_limit(reset_at), codex_reply))

    result = run_loop(cli, project, "--implementer", "codex", "--no-wait")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "usage_limited"
    assert "usage limit" in run["stop_detail"]
    # codex prints its local reset time to the minute ("try again at 10:50 AM"): loope waits to the end of it.
    (line,) = [s for s in run["stop_detail"].split("; ") if s.startswith("the limit resets at ")]
    reset = parse_reset(line.removeprefix("the limit resets at "))
    assert reset is not None
    assert reset_at <= reset <= reset_at + 60


def test_codex_usage_limit_is_waited_out_then_the_same_step_succeeds(project, cli, use_codex, model_server):
    resets: list[float] = []

    def limited() -> Fail:
        at = time.time() + 5  # a few seconds after the refused request
        # Clear of a minute's edges, so the minute codex prints is the same whichever way it rounds.
        resets.append(at if 2 <= at % 60 <= 57 else at + 5)
        return codex_usage_limit(resets[-1])

    script = FailFirst(1, limited, codex_fixer)
    use_codex(script)
    detached = run_loop(cli, project, "--implementer", "codex", "--detach")
    assert detached.exit_code == 0, detached.out + detached.err
    run_id = detached.out.strip()
    rundir = project.path / ".loope" / "runs" / run_id

    shown: list[str] = []

    def finished() -> bool:
        loop = run_status(project.path, run_id)["loop"]
        if loop["waiting_text"]:
            shown.append(loop["waiting_text"])
        return loop["status"] not in ("running", "dead")

    assert eventually(finished, 300), (rundir / "runner.log").read_text()
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 1), run["stop_detail"]
    assert implementer(project)["attempts"] == 2
    events = events_of(project)
    types = [e["type"] for e in events]
    assert types.index("limit_wait") < types.index("step_finished")
    (wait,) = [e for e in events if e["type"] == "limit_wait"]
    # codex prints the reset to the minute ("try again at 10:50 AM"): loope waits to the end of that minute.
    assert wait["reset_at"] == iso((int(resets[0]) // 60 + 1) * 60)
    reset = parse_reset(wait["reset_at"])
    assert reset is not None
    assert min(script.answered_at) >= reset  # the step was tried again only once the limit had reset
    # While it waited, `status` said so (the wait is in run.json, where a resumed runner finds it too).
    assert shown
    assert shown[0].startswith(f"waiting for the usage limit until {local_clock(reset)}")
    assert run.get("waiting") is None
