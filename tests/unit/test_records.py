"""Typed records: what run.json and ledger.jsonl hold reads back into the same types, old files included."""

from __future__ import annotations

import json

from loope.enums import Direction
from loope.records import ledger
from loope.records.model import Best, Changes, FileChange, LoopState, MetricSettings, RunRecord

# A run.json as loope 0.1 wrote it: no loop state, no attempts per step, plain dicts everywhere.
OLD_RUN = {
    "schema": 1,
    "run_id": "0003-lower-the-score",
    "goal": "lower the score",
    "workdir": "/p",
    "status": "max_iters",
    "converged": False,
    "iterations": 2,
    "stop_reason": "max_iters",
    "stop_detail": "reached --max-iters 2",
    "started_at": "2026-01-01T00:00:00.000Z",
    "finished_at": "2026-01-01T00:01:00.000Z",
    "duration_s": 60.0,
    "workspace": {"mode": "worktree", "path": "/p/ws", "branch": "loope/0003", "base": "b" * 40, "head": "c" * 40},
    "totals": {"cost_usd": 0.5, "cost_estimated": False, "input_tokens": 10, "output_tokens": 5},
    "metric": {"command": "python score.py", "direction": "lower", "target": 1},
    "best": {"score": 3, "iteration": 1, "commit": "c" * 40},
    "baseline": 4.0,
    "steps": [
        {
            "id": 1,
            "iteration": 1,
            "role": "implementer",
            "adapter": "exec",
            "ok": True,
            "gate_passed": None,
            "verdict": None,
            "duration_s": 1.0,
            "cost_usd": 0.5,
            "input_tokens": 10,
            "output_tokens": 5,
            "changed_files": ["a.py"],
            "files": [{"path": "a.py", "status": "modified", "added": 1, "removed": 1}],
            "dir": "agents/01-implementer-exec",
            "removed_in_a_later_version": True,
        }
    ],
    "changes": {"files": [{"path": "a.py", "status": "modified", "added": 1, "removed": 1}]},
}


def test_an_old_run_json_reads_into_typed_records():
    record = RunRecord.from_dict(json.loads(json.dumps(OLD_RUN)))
    assert record.metric == MetricSettings("python score.py", Direction.LOWER, 1.0)
    assert record.best == Best(3.0, 1, "c" * 40)
    assert record.best_score == 3.0
    assert record.changes == Changes([FileChange("a.py", "modified", 1, 1)])
    assert record.steps[0].files == [FileChange("a.py", "modified", 1, 1)]
    assert record.loop == LoopState()  # absent in the old file: a fresh one
    assert record.workspace.git_dir is None
    assert record.totals.cost_unknown_steps == 0


def test_a_record_writes_back_every_field_it_read_under_the_same_names():
    data = RunRecord.from_dict(json.loads(json.dumps(OLD_RUN))).to_dict()
    for key, value in OLD_RUN.items():
        if key in ("steps", "totals", "workspace", "metric"):
            continue
        assert data[key] == value, key
    assert data["metric"] == {"command": "python score.py", "direction": "lower", "target": 1.0}
    assert json.dumps(data["metric"]["direction"]) == '"lower"'
    assert {k: data["workspace"][k] for k in OLD_RUN["workspace"]} == OLD_RUN["workspace"]
    step = data["steps"][0]
    assert {k: step[k] for k in OLD_RUN["steps"][0] if k != "removed_in_a_later_version"} == {
        k: v for k, v in OLD_RUN["steps"][0].items() if k != "removed_in_a_later_version"
    }
    assert RunRecord.from_dict(json.loads(json.dumps(data))).to_dict() == data  # a fixed point


def test_a_ledger_line_round_trips_with_its_gate_typed(tmp_path):
    attempt = ledger.Attempt(
        iteration=2,
        summary="fixed add",
        gate=ledger.GateSummary(False, 1, ["tests/test_calc.py::test_add"]),
        verdict="kept",
    )
    line = ledger.line(attempt)
    assert line.endswith("\n")
    assert json.loads(line)["gate"] == {"passed": False, "exit_code": 1, "failures": ["tests/test_calc.py::test_add"]}
    path = tmp_path / "ledger.jsonl"
    path.write_text(line + '{"iteration": 3, "summary": "old line", "gate": {"passed": true, "exit_code": 0}}\n')
    first, old = ledger.load(path)
    assert first == attempt
    assert old.gate == ledger.GateSummary(True, 0, [])
