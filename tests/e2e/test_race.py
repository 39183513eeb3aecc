"""The real Claude Code and Codex CLIs race one iteration against the scripted model servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GATE, git
from tests.e2e.model_server import ModelServer
from tests.e2e.test_claude import WRONG
from tests.e2e.test_claude import implementer_script as claude_script
from tests.e2e.test_codex import DOCUMENTED
from tests.e2e.test_codex import implementer_script as codex_script

pytestmark = pytest.mark.e2e


def test_claude_and_codex_race_and_the_passing_candidate_is_kept(
    project, cli, use_claude, use_codex, model_server: ModelServer
):
    use_claude(claude_script)  # its first fix is wrong (abs values): the gate fails it
    use_codex(codex_script)  # fixes add and documents it: the gate passes
    result = cli(
        "run", "Fix add() in calc.py", "--implementer", "claude:sonnet", "--implementer", "codex:gpt-5.5",
        "--no-review", "--verify-cmd", GATE, "--timeout", "120", "--max-iters", "1",
        "--keep-workspace", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["iterations"]) == ("converged", 1)
    (round_,) = run["rounds"]
    assert round_["winner"] == 2
    by = {c["candidate"]: c for c in round_["candidates"]}
    assert (by[1]["agent"], by[1]["gate_passed"], by[1]["why"]) == (
        "claude:sonnet",
        False,
        "lost: its gate failed (1 failing)",
    )
    assert (by[2]["agent"], by[2]["gate_passed"]) == ("codex:gpt-5.5", True)
    assert (Path(run["workspace"]["path"]) / "calc.py").read_text() == DOCUMENTED
    # Each CLI worked in its own fork: claude's wrong fix is kept under its ref, not in the run.
    ref = f"refs/loope/{run['run_id']}/iter-1-cand-1"
    assert WRONG in git(project.path, "show", f"{ref}:calc.py")
    assert model_server.requests_for("anthropic")
    assert model_server.requests_for("openai")
    costs = sum(s["cost_usd"] for s in run["steps"])
    assert run["totals"]["cost_usd"] == pytest.approx(costs)
    assert by[1]["cost_usd"] > 0
    assert by[2]["cost_usd"] > 0
