"""A step cut short keeps the cost it reported; every step, the gate's included, is in the store.

(A step cut short by a runner that died and was resumed: test_control's resume tests; by a full
disk: test_full_disk.)
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

from tests.conftest import FIX, GATE, PYTHON, Project, gone
from tests.helpers import interrupt_when

LOOPE = [sys.executable, "-m", "loope"]

USAGE = (
    'print(json.dumps({"type": "usage", "input_tokens": 1500, "output_tokens": 500, "cost_usd": 0.3}), flush=True)\n'
)


def store_steps(project: Project) -> list[dict[str, Any]]:
    with sqlite3.connect(project.path / ".loope" / "loope.db") as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM steps ORDER BY step")]


def sleeper(agent_script, started: Path, *, verdict: bool = False) -> str:  # type: ignore[no-untyped-def]
    return agent_script(
        USAGE
        + f"import time\npathlib.Path({str(started)!r}).write_text(str(os.getpid()))\ntime.sleep(300)\n"
        + ("print('VERDICT: PASS')\n" if verdict else "")
    )


def test_ctrl_c_during_a_step_keeps_the_cost_it_reported(project, agent_script, tmp_path):
    started = tmp_path / "agent.pid"
    # The agent reports its pid (the sandbox's PID namespace would renumber it): unsandboxed.
    argv = [*LOOPE, "run", "fix add", "--implementer", sleeper(agent_script, started), "--no-review", "--plain"]
    code, out, err = interrupt_when([started], [*argv, "--sandbox", "off"], project.path)
    assert code == 130, out + err
    assert "Traceback" not in err
    assert gone(int(started.read_text()))
    run = project.run_json()
    assert run["status"] == "stopped"
    (step,) = run["steps"]
    assert (step["role"], step["ok"], step["error"]) == ("implementer", False, "cut short: interrupted with Ctrl-C")
    assert (step["cost_usd"], step["input_tokens"], step["output_tokens"]) == (0.3, 1500, 500)
    assert (run["totals"]["cost_usd"], run["totals"]["input_tokens"]) == (0.3, 1500)
    (row,) = store_steps(project)
    assert (row["step"], row["role"], row["ok"], row["cost_usd"]) == (1, "implementer", 0, 0.3)
    assert "$0.3000" in out  # the summary counts it too


def test_ctrl_c_during_parallel_reviews_keeps_every_reviewers_cost(project, agent_script, tmp_path):
    marks = [tmp_path / "reviewer-1.pid", tmp_path / "reviewer-2.pid"]
    args = [*LOOPE, "run", "fix add", "--implementer", agent_script(FIX), "--verify-cmd", GATE, "--plain"]
    args += ["--sandbox-writable", str(tmp_path)]  # where the reviewers say they started
    for mark in marks:
        args += ["--reviewer", sleeper(agent_script, mark, verdict=True)]
    code, out, err = interrupt_when(marks, args, project.path)
    assert code == 130, out + err
    assert "Traceback" not in err
    run = project.run_json()
    reviews = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert len(reviews) == 2
    assert all(not s["ok"] for s in reviews)
    assert [s["cost_usd"] for s in reviews] == [0.3, 0.3]
    assert run["totals"]["cost_usd"] == 0.6
    assert run["totals"]["input_tokens"] == 3000


def test_every_step_is_in_the_store_the_gate_and_other_checks_included(project, agent_script, cli):
    reviewer = agent_script("print('VERDICT: PASS')\n")
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--reviewer", reviewer, "--verify-cmd", GATE,
        "--success-cmd", "true", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    rows = store_steps(project)
    assert [(r["step"], r["iteration"], r["role"], r["adapter"]) for r in rows] == [
        (s["id"], s["iteration"], s["role"], s["adapter"]) for s in run["steps"]
    ]
    assert {r["adapter"] for r in rows} >= {"gate", "success", "exec"}
    (gate,) = [r for r in rows if r["adapter"] == "gate"]
    assert (gate["role"], gate["ok"], gate["verdict"]) == ("verifier", 1, "pass")


def test_a_failing_gate_and_the_metric_are_in_the_store_too(project, agent_script, cli):
    score = project.write("score.py", "print(3)\n")
    result = cli(
        "run", "fix add", "--implementer", agent_script("print('nothing done')"), "--no-review",
        "--verify-cmd", GATE, "--max-iters", "1", "--metric-cmd", f"{PYTHON} {score}", "--direction", "lower",
        "--editable", "calc.py", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    rows = store_steps(project)
    run = project.run_json()
    assert [(r["step"], r["role"], r["adapter"]) for r in rows] == [
        (s["id"], s["role"], s["adapter"]) for s in run["steps"]
    ]
    gates = [r for r in rows if r["adapter"] == "gate"]
    assert gates
    assert {g["verdict"] for g in gates} == {"fail"}
