"""A race's money budget reaches the CLIs that take a cap: each claude candidate gets its share of what is left.

The ``claude`` here is a program of the test's (``LOOPE_CLAUDE_BIN``): it records the command line it
was given, changes nothing and reports what it spent in Claude Code's stream-json, as the real CLI does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import GATE, Project

SPENT = 0.25
FAKE_CLAUDE = f"""#!{sys.executable}
import json, os, sys
sys.stdin.read()
name = os.environ["LOOPE_CANDIDATE"] + "-" + os.environ["LOOPE_ITERATION"] + ".json"
with open(os.path.join({{report!r}}, name), "w") as handle:
    json.dump(sys.argv[1:], handle)
print(json.dumps({{{{"type": "result", "subtype": "success", "is_error": False, "result": "looked, changed nothing",
                  "total_cost_usd": {SPENT}, "usage": {{{{"input_tokens": 10, "output_tokens": 1}}}}}}}}))
"""


def cap(argv: list[str]) -> str:
    return argv[argv.index("--max-budget-usd") + 1]


def claude_in_place(project: Project, monkeypatch: pytest.MonkeyPatch, script: str = FAKE_CLAUDE) -> Path:
    """Put ``script`` (formatted with the report dir) in claude's place; the dir it reports to."""
    report = project.path.parent / "report"
    report.mkdir()
    program = project.path.parent / "claude"
    program.write_text(script.format(report=str(report)))
    program.chmod(0o755)
    monkeypatch.setenv("LOOPE_CLAUDE_BIN", str(program))
    return report


def test_each_claude_candidate_gets_its_share_of_the_remaining_budget(project, cli, monkeypatch):
    report = claude_in_place(project, monkeypatch)
    result = cli(
        "run", "fix add", "--implementer", "claude", "--candidates", "2", "--no-review", "--verify-cmd", GATE,
        "--max-cost", "2", "--max-iters", "2", "--stall-after", "3", "--sandbox-writable", str(report), "--plain",
        cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    seen = {path.stem: json.loads(path.read_text()) for path in report.glob("*.json")}
    assert sorted(seen) == ["1-1", "1-2", "2-1", "2-2"]
    # Round 1: $2 left, two candidates: $1 each. Round 2: $2 - 2 x $0.25 = $1.50 left: $0.75 each.
    assert {name: cap(argv) for name, argv in seen.items()} == {"1-1": "1", "2-1": "1", "1-2": "0.75", "2-2": "0.75"}
    assert project.run_json()["totals"]["cost_usd"] == SPENT * 4
