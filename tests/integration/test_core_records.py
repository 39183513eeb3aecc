"""What a run leaves behind: run.json, report.md, events.jsonl, step directories, ledger (DESIGN.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loope.enums import StopReason
from tests.conftest import APPROVE, EVENT_TYPES, GATE, overlay_works

# DESIGN.md, run.json (schema 1)
RUN_FIELDS = {
    *("schema", "run_id", "goal", "status", "converged", "iterations", "stop_reason", "stop_detail"),
    *("started_at", "finished_at", "duration_s", "workspace", "totals", "best", "steps", "changes"),
}
STEP_FIELDS = {
    *("id", "iteration", "role", "adapter", "ok", "gate_passed", "verdict", "duration_s", "cost_usd"),
    *("input_tokens", "output_tokens", "changed_files", "dir"),
}

# The first attempt is wrong (the gate fails), the second fixes it and adds a file; the reviewer passes.
IMPLEMENTER = """
print(json.dumps({"type": "action", "action": "edit", "target": "calc.py"}))
print(json.dumps({"type": "usage", "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.25}))
if os.environ["LOOPE_ITERATION"] == "1":
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a * b\\n")
else:
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
    pathlib.Path("NOTES.md").write_text("add fixed\\nsecond line\\n")
print("Changed calc.py in iteration", os.environ["LOOPE_ITERATION"])
"""


@pytest.fixture
def finished(project, agent_script, cli):  # type: ignore[no-untyped-def]
    result = cli(
        "run", "fix the add function", "--implementer", agent_script(IMPLEMENTER), "--reviewer", agent_script(APPROVE),
        "--verify-cmd", GATE, "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    return project


def test_run_json_has_every_schema_1_field(finished):
    run = finished.run_json()
    assert set(run) >= RUN_FIELDS
    assert run["schema"] == 1
    assert re.fullmatch(r"0001-fix-the-add-function", run["run_id"])
    assert run["goal"] == "fix the add function"
    assert (run["status"], run["converged"], run["iterations"], run["stop_reason"]) == (
        "converged",
        True,
        2,
        "converged",
    )
    assert run["stop_reason"] in {r.value for r in StopReason}
    assert run["started_at"] <= run["finished_at"]
    assert run["duration_s"] > 0
    assert set(run["workspace"]) >= {"mode", "path", "branch", "base"}
    assert run["workspace"]["mode"] == ("overlay" if overlay_works() else "worktree")
    assert run["workspace"]["branch"] == f"loope/{run['run_id']}"
    assert re.fullmatch(r"[0-9a-f]{40}", run["workspace"]["base"])
    assert set(run["totals"]) >= {"cost_usd", "cost_estimated", "input_tokens", "output_tokens"}
    assert run["best"] is None  # gate mode
    for step in run["steps"]:
        assert set(step) >= STEP_FIELDS
    assert [s["id"] for s in run["steps"]] == list(range(1, len(run["steps"]) + 1))
    files = {f["path"]: f for f in run["changes"]["files"]}
    assert files["calc.py"] == {"path": "calc.py", "status": "modified", "added": 1, "removed": 1}
    assert files["NOTES.md"] == {"path": "NOTES.md", "status": "added", "added": 2, "removed": 0}


def test_usage_lines_add_up_into_the_totals(finished):
    run = finished.run_json()
    assert run["totals"]["input_tokens"] == 200
    assert run["totals"]["output_tokens"] == 40
    assert run["totals"]["cost_usd"] == pytest.approx(0.5)
    assert run["totals"]["cost_estimated"] is False
    implementers = [s for s in run["steps"] if s["role"] == "implementer"]
    assert [(s["input_tokens"], s["output_tokens"], s["cost_usd"]) for s in implementers] == [(100, 20, 0.25)] * 2


def test_step_directories_hold_the_prompt_events_result_and_diff(finished):
    rundir = finished.runs()[-1]
    names = sorted(p.name for p in (rundir / "agents").iterdir())
    assert names == [
        "01-implementer-exec",
        "02-verifier-gate",
        "03-implementer-exec",
        "04-verifier-gate",
        "05-reviewer-exec",
    ]
    run = finished.run_json()
    assert [s["dir"] for s in run["steps"]] == [f"agents/{n}" for n in names]
    first = rundir / "agents" / "01-implementer-exec"
    assert "fix the add function" in (first / "prompt.md").read_text()
    assert (first / "result.md").read_text().strip() == "Changed calc.py in iteration 1"  # event lines are not text
    events = [json.loads(line) for line in (first / "events.jsonl").read_text().splitlines()]
    assert [e.pop("seq") for e in events] == list(range(1, len(events) + 1))  # the runner's lines, numbered
    assert {"kind": "action", "action": "edit", "target": "calc.py"} in events
    assert {"kind": "usage", "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.25} in events
    diff = (first / "changes.diff").read_text()
    assert "-    return a - b" in diff
    assert "+    return a * b" in diff
    second = (rundir / "agents" / "03-implementer-exec" / "changes.diff").read_text()
    assert "+    return a + b" in second
    assert "+add fixed" in second
    review = rundir / "agents" / "05-reviewer-exec"
    assert (review / "result.md").read_text().strip().endswith("VERDICT: PASS")
    assert "+    return a + b" in (review / "prompt.md").read_text()  # the reviewer sees the change
    assert not (review / "changes.diff").exists()  # a reviewer only reads
    assert "2 failed" in (rundir / "agents" / "02-verifier-gate" / "output.log").read_text()


def test_run_dir_files(finished):
    rundir = finished.runs()[-1]
    for name in (
        "spec.json",
        "run.json",
        "report.md",
        "events.jsonl",
        "ledger.jsonl",
        "changes.diff",
        "changed-files.txt",
    ):
        assert (rundir / name).is_file(), name
    assert json.loads((rundir / "spec.json").read_text())["verify_cmd"] == GATE
    assert sorted((rundir / "changed-files.txt").read_text().split()) == ["NOTES.md", "calc.py"]
    cumulative = (rundir / "changes.diff").read_text()
    assert "-    return a - b\n+    return a + b" in cumulative
    assert "a * b" not in cumulative  # from the base to the end, not step by step


def test_events_have_the_documented_types_in_order(finished):
    lines = (finished.runs()[-1] / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    run_id = finished.run_json()["run_id"]
    assert all({"ts", "run_id", "type"} <= set(e) for e in events)
    assert {e["run_id"] for e in events} == {run_id}
    assert {e["type"] for e in events} <= EVENT_TYPES
    types = [e["type"] for e in events]
    assert types[0] == "run_started"
    assert types[-1] == "run_finished"
    assert types.count("iteration_started") == types.count("iteration_finished") == 2
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    # Within each iteration: started, steps, the decision, finished.
    outline = [
        t
        for t in types
        if t in ("iteration_started", "verify_finished", "review_finished", "decision", "iteration_finished")
    ]
    assert outline == [
        "iteration_started", "verify_finished", "decision", "iteration_finished",
        "iteration_started", "verify_finished", "review_finished", "decision", "iteration_finished",
    ]  # fmt: skip
    started = [e["step"] for e in events if e["type"] == "step_started"]
    finished_steps = [e["step"] for e in events if e["type"] in ("step_finished", "verify_finished")]
    assert started == finished_steps == [1, 2, 3, 4, 5]
    for step in started:
        begin = next(i for i, e in enumerate(events) if e["type"] == "step_started" and e["step"] == step)
        end = next(
            i
            for i, e in enumerate(events)
            if e["type"] in ("step_finished", "verify_finished") and e.get("step") == step
        )
        agent = [i for i, e in enumerate(events) if e["type"] == "agent_event" and e["step"] == step]
        assert all(begin < i < end for i in agent)
    agent_events = [e["event"] for e in events if e["type"] == "agent_event"]
    assert {"kind": "action", "action": "edit", "target": "calc.py"} in agent_events
    last = events[-1]
    assert (last["status"], last["stop_reason"], last["converged"], last["iterations"]) == (
        "converged",
        "converged",
        True,
        2,
    )
    decisions = [e for e in events if e["type"] == "decision"]
    assert [d["stop"] for d in decisions] == [None, "converged"]


def test_report_shows_the_outcome_and_every_step_by_iteration(finished):
    report = (finished.runs()[-1] / "report.md").read_text()
    run = finished.run_json()
    assert report.startswith(f"# loope run {run['run_id']}")
    assert "**Outcome:** converged in 2 iterations" in report
    assert "**Goal:** fix the add function" in report
    assert "## Iteration 1" in report
    assert "## Iteration 2" in report
    assert report.index("## Iteration 1") < report.index("## Iteration 2")
    iteration_2 = report.split("## Iteration 2", 1)[1].split("## Changes", 1)[0]
    rows = [line for line in iteration_2.splitlines() if line.startswith("| 0")]
    assert len(rows) == 3
    implementer, gate, reviewer = (row.split("|") for row in rows)
    assert [c.strip() for c in implementer[2:4]] == ["implementer", "exec"]
    assert "calc.py +1 −1" in implementer[8]
    assert "NOTES.md +2 −0" in implementer[8]
    assert re.fullmatch(r" \d+\.\ds ", implementer[6])
    assert gate[4].strip() == "passed"
    assert reviewer[5].strip() == "PASS"
    assert "| calc.py | modified | 1 | 1 |" in report
    assert f"loope apply {run['run_id']}" in report


def test_the_run_leaves_the_users_git_status_clean(finished):
    assert finished.git("status", "--porcelain") == ""
    assert (finished.path / ".loope").is_dir()
    assert finished.git("check-ignore", ".loope/runs") == ".loope/runs\n"
    assert finished.read(".gitignore") == "__pycache__/\n.pytest_cache/\n"  # loope did not edit the user's


def test_the_ledger_has_one_line_per_attempt(finished):
    ledger = [json.loads(line) for line in (finished.runs()[-1] / "ledger.jsonl").read_text().splitlines()]
    assert [a["iteration"] for a in ledger] == [1, 2]
    for attempt in ledger:
        assert {
            "iteration",
            "summary",
            "changed_files",
            "diffstat",
            "gate",
            "verdict",
            "violations",
            "cost_usd",
            "tokens",
            "duration_s",
        } <= set(attempt)
    assert ledger[0]["summary"] == "Changed calc.py in iteration 1"
    assert ledger[0]["gate"]["passed"] is False
    assert (ledger[1]["verdict"], ledger[1]["gate"]["passed"]) == ("converged", True)
    assert ledger[1]["tokens"] == 120
    prompt = (finished.runs()[-1] / "agents" / "03-implementer-exec" / "prompt.md").read_text()
    assert "iteration 1: kept" in prompt  # the compact ledger view, not a transcript


def test_a_run_started_from_a_subdirectory_records_in_the_workdir(project, converge):
    sub = project.path / "pkg"
    sub.mkdir()
    (sub / "mod.txt").write_text("one\n")
    project.commit("pkg")
    body = "pathlib.Path('mod.txt').write_text('two\\n')"
    # a subdirectory as the workdir (without it, the repository root is)
    converge(body, "--workdir", str(sub), goal="edit", cwd=sub)
    run = json.loads(next((sub / ".loope" / "runs").iterdir()).joinpath("run.json").read_text())
    assert Path(run["workspace"]["path"]).name == "pkg"  # the agents work in the workdir's counterpart
    assert [(f["path"].rsplit("/", 1)[-1], f["status"]) for f in run["changes"]["files"]] == [("mod.txt", "modified")]
    assert project.git("status", "--porcelain") == ""
    assert (sub / "mod.txt").read_text() == "one\n"
