"""``loope run`` driving the real Codex CLI against the scripted model server, with real pytest as the gate.

The provider reaches codex the way a user would configure it: ``[agents.codex] args`` in the
project's loope.toml (see the ``use_codex`` fixture).
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
from pathlib import Path

import pytest

from loope.agents.pricing import estimate
from tests.conftest import FIXED_CALC, GATE, Project, gone, run_file
from tests.e2e.conftest import codex_sandbox
from tests.e2e.model_server import (
    Fail,
    Hang,
    ModelServer,
    Response,
    ResponsesRequest,
    ScriptedResponses,
    Tokens,
    apply_patch,
    exec_command,
    message,
)

pytestmark = pytest.mark.e2e

PYTHON = shlex.quote(sys.executable)
TOKENS = Tokens(input_tokens=3000, output_tokens=200, cached_tokens=1000, reasoning_tokens=50)
EDIT = "import pathlib; p = pathlib.Path('calc.py'); p.write_text(p.read_text().replace('a - b', 'a + b'))"
SHELL_FIX = f'{PYTHON} -c "{EDIT}"'
DOCSTRING_PATCH = '''*** Begin Patch
*** Update File: calc.py
@@
 def add(a, b):
+    """The sum of a and b."""
     return a + b
*** End Patch'''
DOCUMENTED = 'def add(a, b):\n    """The sum of a and b."""\n    return a + b\n'
NO_DOCSTRING = "add() has no docstring: document what it returns."


def run_loop(cli, project: Project, *args: str):
    # Sandboxed wherever bubblewrap works (the real CLI inside loope's sandbox).
    argv = ("run", "Fix add() in calc.py", "--verify-cmd", GATE, "--timeout", "120", "--sandbox", "auto", *args)
    return cli(*argv, cwd=project.path)


def requests(server: ModelServer) -> list[ResponsesRequest]:
    return [ResponsesRequest(r.body, r.headers) for r in server.requests_for("openai")]


def step_dir(project: Project, pattern: str) -> list[Path]:
    return sorted((project.runs()[-1] / "agents").glob(pattern))


def events(step: Path) -> list[dict]:
    return [json.loads(line) for line in (step / "events.jsonl").read_text().splitlines()]


def transcript(step: Path) -> list[dict]:
    return [json.loads(line) for line in (step / "transcript.jsonl").read_text().splitlines() if line.strip()]


def implementer_script(request: ResponsesRequest) -> Response:
    """Fix calc.py with a shell command, document add() with apply_patch, run the tests, report."""
    steps = [
        exec_command(SHELL_FIX),
        apply_patch(DOCSTRING_PATCH),
        exec_command(f"{PYTHON} -m pytest -q -p no:cacheprovider"),
    ]
    if request.turn < len(steps):
        return Response((steps[request.turn],), TOKENS)
    return Response((message("add() returns a + b and says so; the tests pass."),), TOKENS)


def test_codex_fixes_the_bug_through_its_shell_tool_in_workspace_write(
    project, cli, use_codex, model_server: ModelServer, tmp_path
):
    use_codex(implementer_script)

    result = run_loop(cli, project, "--implementer", "codex:gpt-5.5", "--no-review")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 1)
    assert run_file(run, "calc.py") == DOCUMENTED
    assert project.read("calc.py") == "def add(a, b):\n    return a - b\n"  # the user's tree is untouched
    (step,) = step_dir(project, "*-implementer-codex")
    actions = [(e["action"], e["target"]) for e in events(step) if e["kind"] == "action"]
    # The shell write is a command (codex reports no file change for it); the patch is an edit.
    assert actions == [
        ("command", SHELL_FIX),
        ("edit", "calc.py"),
        ("command", f"{PYTHON} -m pytest -q -p no:cacheprovider"),
    ]
    (record,) = [s for s in run["steps"] if s["role"] == "implementer"]
    assert record["changed_files"] == ["calc.py"]
    assert (record["input_tokens"], record["output_tokens"]) == (4 * 3000, 4 * 200)
    assert record["cost_estimated"] is True
    assert record["cost_usd"] == estimate("gpt-5.5", 4 * 3000, 4 * 200)
    # codex ran writable: every tool call worked, and the agent's own pytest run passed.
    sent = requests(model_server)
    assert {(r.sandbox_mode, r.model) for r in sent} == {(codex_sandbox("workspace-write"), "gpt-5.5")}
    outputs = sent[-1].outputs()
    assert "Process exited with code 0" in outputs[0]
    assert "Success. Updated the following files:\nM calc.py" in outputs[1]
    assert "2 passed" in outputs[2]
    assert sent[0].prompt.startswith((step / "prompt.md").read_text().strip()[:200])
    assert transcript(step)[-1]["type"] == "turn.completed"
    assert any((tmp_path / "codex-home").iterdir())  # no --isolate-home: the CODEX_HOME it was given


def reviewer_script(request: ResponsesRequest) -> Response:
    """Read calc.py; block until add() is documented."""
    if request.turn == 0:
        return Response((exec_command("cat calc.py"),))
    if '"""' in request.outputs()[0]:
        return Response((message("add() is right and documented.\n\nVERDICT: PASS"),))
    return Response((message(f"The fix is right, but:\n- {NO_DOCSTRING}\n\nVERDICT: BLOCK"),))


def test_codex_reviewer_blocks_and_its_findings_reach_the_next_implementer(
    project, cli, agent_script, use_codex, model_server: ModelServer
):
    use_codex(reviewer_script)
    implementer = agent_script(
        f"""
        if "no docstring" in prompt:
            pathlib.Path("calc.py").write_text({DOCUMENTED!r})
            print("documented add()")
        else:
            pathlib.Path("calc.py").write_text({FIXED_CALC!r})
            print("fixed add: it returns a + b now")
        """
    )

    result = run_loop(cli, project, "--implementer", implementer, "--reviewer", "codex")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 2)
    reviews = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert [(s["iteration"], s["verdict"], s["ok"]) for s in reviews] == [(1, "BLOCK", True), (2, "PASS", True)]
    first, second = step_dir(project, "*-implementer-exec")
    assert NO_DOCSTRING not in (first / "prompt.md").read_text()
    assert NO_DOCSTRING in (second / "prompt.md").read_text()
    assert run_file(run, "calc.py") == DOCUMENTED
    # Both reviews ran read-only, without a model flag: codex used its own default model.
    sent = requests(model_server)
    assert len(sent) == 4
    assert {r.sandbox_mode for r in sent} == {codex_sandbox("read-only")}
    assert all(r["model"] is None and r["cost_estimated"] for r in reviews)  # priced at the table's codex entry


def test_codex_unauthorized_fails_the_step_with_a_login_message(project, cli, use_codex, model_server: ModelServer):
    use_codex(ScriptedResponses(Fail(401, "Incorrect API key provided")))

    result = run_loop(cli, project, "--implementer", "codex", "--no-review")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "unexpected status 401 Unauthorized: Incorrect API key provided" in run["stop_detail"]
    assert "not logged in" in run["stop_detail"]
    assert len(model_server.requests_for("openai")) == 1  # the provider's retries are off
    (step,) = [s for s in run["steps"] if s["role"] == "implementer"]
    assert step["ok"] is False


def test_codex_failed_turn_exits_1_and_fails_the_step_with_codexs_reason(
    project, cli, use_codex, model_server: ModelServer
):
    use_codex(ScriptedResponses(Fail(429, "Rate limit reached for requests", retry_after=0)))

    result = run_loop(cli, project, "--implementer", "codex", "--no-review", "--retries", "0")

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "step_failed"
    assert "429 Too Many Requests" in run["stop_detail"]
    assert "rate limited by the model provider" in run["stop_detail"]
    assert "exit code" not in run["stop_detail"]  # turn.failed says why; its exit 1 adds nothing
    (step,) = step_dir(project, "*-implementer-codex")
    assert [e["type"] for e in transcript(step)][-2:] == ["error", "turn.failed"]
    assert run_file(run, "calc.py") == "def add(a, b):\n    return a - b\n"


def test_codex_waiting_forever_on_the_model_is_cut_by_the_step_timeout(
    project, cli, use_codex, model_server: ModelServer
):
    # A provider that takes the request and never answers: codex has no timeout for that, loope's covers it.
    release = threading.Event()
    use_codex(ScriptedResponses(Hang(release)))
    try:
        result = run_loop(cli, project, "--implementer", "codex", "--no-review", "--timeout", "3")
    finally:
        release.set()

    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "timed_out"
    assert "timed out after 3s" in run["stop_detail"]
    assert len(model_server.requests_for("openai")) == 1
    (step,) = step_dir(project, "*-implementer-codex")
    assert gone(int((step / "process.pid").read_text()))  # the whole process group was killed
    assert [e["type"] for e in transcript(step)] == ["thread.started", "turn.started"]
