"""Lessons that teach: "what worked" only from attempts that passed, recall only on a real match, and why."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIX, GATE, reporting_to

WRONG_THEN_FIX = (
    "log = pathlib.Path(__file__).parent.parent / 'calls'  # beside the project\n"
    "n = int(log.read_text()) + 1 if log.exists() else 1\n"
    "log.write_text(str(n))\n"
    "if n == 1:\n"
    "    pathlib.Path('calc.py').write_text('def add(a, b):\\n    return abs(a) + abs(b)\\n')\n"
    "    print('tried absolute values')\n"
    "    sys.exit(0)\n" + FIX
)


@pytest.fixture
def cli(cli, tmp_path):  # type: ignore[no-untyped-def]
    """These agents report to the test through files beside the project, which the sandbox lets them write."""
    return reporting_to(cli, tmp_path)


def prompts(project) -> list[str]:
    return [p.read_text() for p in sorted((project.runs()[-1] / "agents").glob("*-implementer-*/prompt.md"))]


def test_what_worked_holds_only_attempts_that_passed(project, agent_script, cli):
    result = cli(
        "run", "fix the add function in calc.py", "--implementer", agent_script(WRONG_THEN_FIX), "--no-review",
        "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    (lesson,) = json.loads(cli("lessons", "--json", cwd=project.path).out)
    assert lesson["worked"] == "iteration 2: fixed add: it returns a + b now"
    assert "iteration 1: gate failed" in lesson["failed"]


def test_recall_needs_a_real_match_and_says_why(project, agent_script, cli):
    first = cli(
        "run", "fix the add function in calc.py", "--implementer", agent_script(FIX), "--no-review",
        "--verify-cmd", GATE, cwd=project.path,
    )  # fmt: skip
    assert first.exit_code == 0
    idle = agent_script("print('looked around')")
    # One shared word ("fix") is no match.
    cli("run", "fix the parser's unicode handling", "--implementer", idle, "--no-review", "--max-iters", "1",
        cwd=project.path)  # fmt: skip
    assert "RECALLED MEMORIES" not in prompts(project)[0]
    # Sharing what the goals are about is.
    cli("run", "make the add function in calc.py faster", "--implementer", idle, "--no-review", "--max-iters", "1",
        cwd=project.path)  # fmt: skip
    prompt = prompts(project)[0]
    assert "RECALLED MEMORIES" in prompt
    assert "Recalled because both goals are about: add, calc, function" in prompt
