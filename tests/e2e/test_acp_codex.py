"""``codex-acp``: Zed's real codex-acp driven by loope over ACP, its model scripted on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loope.sandbox import bwrap
from tests.conftest import FIX, GATE, Project, run_file
from tests.e2e.conftest import CODEX_KEY_ENV, _add_agent_settings, agent_binary, codex_provider_args, ran_sandboxed
from tests.e2e.model_server import (
    ModelServer,
    OpenAIResponses,
    Response,
    ResponsesRequest,
    apply_patch,
    message,
)

pytestmark = pytest.mark.e2e

RIGHT = "return a + b"
WRONG = "return abs(a) + abs(b)"


@pytest.fixture
def use_codex_acp(model_server: ModelServer, project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Point loope's codex-acp at the installed codex-acp and codex at the model server (loope.toml args)."""

    def mount(script) -> OpenAIResponses:
        for name in ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "LOOPE_CODEX_ACP_BIN"):
            monkeypatch.delenv(name, raising=False)
        home = tmp_path / "codex-home"
        home.mkdir(exist_ok=True)
        monkeypatch.setenv("CODEX_HOME", str(home))
        monkeypatch.setenv(CODEX_KEY_ENV, "sk-test")
        # No sandbox of codex's own (inside loope's, codex's would nest; without it, codex-acp finds no
        # codex-linux-sandbox helper for the system bwrap here): codex asks loope before each command it
        # does not know to be read-only ("untrusted").
        sandbox = ["-c", 'sandbox_mode="danger-full-access"', "-c", 'approval_policy="untrusted"']
        args = [*codex_provider_args(model_server), "-c", "features.plugins=false", *sandbox]
        _add_agent_settings(project, "codex-acp", bin=str(agent_binary("codex-acp")), args=args)
        api = OpenAIResponses(script)
        model_server.mount(api)
        return api

    return mount


def patch(old: str, new: str) -> str:
    return f"*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    {old}\n+    {new}\n*** End Patch"


def implementer_script(request: ResponsesRequest) -> Response:
    """Patch calc.py: a wrong fix first; once the prompt names the failing test, the right one over it.

    (No read first: on a loaded machine codex may report a ``cat`` as still running after its 10 s
    yield, and the script must not depend on the time a command takes. A failed attempt is kept in
    gate mode, so the second patch starts from the first one's line.)
    """
    if request.turn == 0:
        fed_back = "test_add_negative" in request.prompt
        change = patch(WRONG, RIGHT) if fed_back else patch("return a - b", WRONG)
        return Response((apply_patch(change),))
    return Response((message("patched add()"),))


def run_loop(cli, project: Project, *args: str):
    return cli("run", "Fix add() in calc.py", "--verify-cmd", GATE, "--timeout", "120", *args, cwd=project.path)


def test_codex_acp_fixes_the_bug_in_two_iterations_from_gate_feedback(project, cli, use_codex_acp) -> None:
    use_codex_acp(implementer_script)

    result = run_loop(cli, project, "--implementer", "codex-acp", "--no-review")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["converged"], run["iterations"]) == ("converged", True, 2)
    steps = sorted((project.runs()[-1] / "agents").glob("*-implementer-codex-acp"))
    assert len(steps) == 2
    for step in steps:
        actions = [json.loads(line) for line in (step / "events.jsonl").read_text().splitlines()]
        assert any(a.get("action") == "edit" and a.get("target") == "calc.py" for a in actions), actions
    assert run_file(run, "calc.py") == f"def add(a, b):\n    {RIGHT}\n"
    assert ran_sandboxed(project) is bwrap.support().works  # codex-acp inside loope's sandbox


def test_codex_acps_patch_of_a_protected_test_file_is_refused_at_the_permission_request(
    project, cli, use_codex_acp, model_server: ModelServer
) -> None:
    test_patch = (
        "*** Begin Patch\n*** Update File: tests/test_calc.py\n@@\n-from calc import add\n+from calc import add  # ok\n"
        "*** End Patch"
    )

    def script(request: ResponsesRequest) -> Response:
        if "loope refused" in request.prompt:  # loope's follow-up prompt, after codex ended its turn
            return Response((message("I will leave the tests alone."),))
        return Response((apply_patch(test_patch),))

    use_codex_acp(script)
    before = project.read("tests/test_calc.py")

    result = run_loop(
        cli, project, "--implementer", "codex-acp", "--no-review", "--max-iters", "1", "--protect", "tests/**"
    )

    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert run_file(run, "tests/test_calc.py") == before
    assert run["steps"][0]["violations"] == []  # refused before it was written: nothing for the guard to undo
    (step,) = sorted((project.runs()[-1] / "agents").glob("*-implementer-codex-acp"))
    said = [json.loads(line).get("text") for line in (step / "events.jsonl").read_text().splitlines()]
    assert "loope refuses: tests/test_calc.py is protected; leave it as it is" in said
    # codex-acp offers only "abort" (its turn ends): loope's reason reaches the model in a follow-up prompt.
    told = [ResponsesRequest(r.body).prompt for r in model_server.requests_for("openai")]
    assert any("tests/test_calc.py is protected" in prompt for prompt in told), told
    assert run["steps"][0]["ok"] is True


def test_a_codex_acp_reviewers_patch_is_refused(project, cli, agent_script, use_codex_acp) -> None:
    def reviewer(request: ResponsesRequest) -> Response:
        if "loope refused" in request.prompt:
            return Response((message("add() returns the sum.\n\nVERDICT: PASS"),))
        return Response((apply_patch(patch(RIGHT, "return b + a")),))

    use_codex_acp(reviewer)
    result = run_loop(cli, project, "--implementer", agent_script(FIX), "--reviewer", "codex-acp")

    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    (review,) = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert (review["verdict"], review["violations"]) == ("PASS", [])
    (step,) = sorted((project.runs()[-1] / "agents").glob("*-reviewer-codex-acp"))
    said = [json.loads(line).get("text") for line in (step / "events.jsonl").read_text().splitlines()]
    assert "loope refuses: the reviewer is read-only and may not edit anything" in said
    assert run_file(run, "calc.py") == f"def add(a, b):\n    {RIGHT}\n"
