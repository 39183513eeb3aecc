"""A run's view folded event by event: what ``RunView.to_dict`` says after each (the dashboard's data)."""

from __future__ import annotations

import json
from pathlib import Path

from loope.records.runview import RunView

# Every kind of event the view folds, two racing candidates, a metric, a review, a wait.
T = "2026-01-01T00:00:%02dZ"
EVENTS = [
    {
        "type": "run_started",
        "ts": T % 0,
        "run_id": "0007-x",
        "goal": "fix it",
        "run_dir": "/r",
        "started_at": T % 0,
        "max_iters": 5,
        "budgets": {"max_cost": 1.5},
        "metric_cmd": "score",
    },
    {"type": "metric", "ts": T % 1, "iteration": 0, "baseline": 2.0, "step": 1},
    {"type": "iteration_started", "ts": T % 2, "iteration": 1, "max_iters": 5},
    {
        "type": "step_started",
        "ts": T % 3,
        "step": 2,
        "iteration": 1,
        "role": "implementer",
        "adapter": "claude",
        "dir": "agents/02",
        "model": "opus",
        "candidate": 1,
    },
    {
        "type": "step_started",
        "ts": T % 3,
        "step": 3,
        "iteration": 1,
        "role": "implementer",
        "adapter": "codex",
        "index": 2,
        "candidate": 2,
    },
    {"type": "agent_event", "ts": T % 4, "step": 2, "event": {"kind": "action", "action": "edit", "target": "a.py"}},
    {"type": "agent_event", "ts": T % 4, "step": 3, "event": {"kind": "message", "text": "first\n\n last line \n"}},
    {"type": "agent_event", "ts": T % 4, "step": 3, "event": {"kind": "usage", "input_tokens": 3}},
    {
        "type": "step_finished",
        "ts": T % 5,
        "step": 2,
        "role": "implementer",
        "adapter": "claude",
        "ok": True,
        "cost_usd": 0.25,
        "input_tokens": 10,
        "output_tokens": 5,
    },
    {
        "type": "verify_finished",
        "ts": T % 6,
        "step": 4,
        "iteration": 1,
        "passed": False,
        "exit_code": 1,
        "failing": 2,
        "failures": [{"test": "t1", "message": "boom"}],
        "summary": "2 failed",
        "output_tail": ["E boom"],
        "duration_s": 1.5,
        "candidate": 1,
    },
    {"type": "step_finished", "ts": T % 6, "step": 5, "adapter": "metric", "score": 3.5, "candidate": 2},
    {"type": "metric", "ts": T % 7, "iteration": 1, "score": 3.5, "best": 2.0, "step": 5},
    {
        "type": "review_finished",
        "ts": T % 8,
        "verdicts": [
            {"step": 3, "adapter": "codex", "verdict": "approve", "findings": ["ok"]},
            {"step": 9, "adapter": "amp", "verdict": None},
        ],
    },
    {"type": "guard", "ts": T % 8, "violations": ["wrote .git/hooks"]},
    {"type": "limit_wait", "ts": T % 8, "until": "later"},
    {
        "type": "selection",
        "ts": T % 9,
        "iteration": 1,
        "winner": 2,
        "why": "score",
        "candidates": [{"candidate": 1, "rank": 2}, {"candidate": 2, "rank": 1}],
    },
    {"type": "decision", "ts": T % 9, "iteration": 1, "verdict": "kept"},
    {"type": "iteration_finished", "ts": T % 10, "totals": {"cost_usd": 0.5, "input_tokens": 20, "output_tokens": 7}},
    {"type": "iteration_started", "ts": T % 11, "iteration": 2},
    {"type": "step_started", "ts": T % 12, "step": 6, "iteration": 2, "role": "implementer", "adapter": "exec"},
]
SNAPSHOTS = Path(__file__).parent.parent / "fixtures" / "runview" / "snapshots.json"


def snapshots() -> list[str]:
    view, seen = RunView(), []
    for event in EVENTS:
        view.apply(event)
        data = view.to_dict()
        del data["elapsed_s"]  # now minus the start: the only value that moves
        seen.append(json.dumps(data))  # as the dashboard sends it: the keys' order too
    return seen


def test_the_view_after_each_event_is_what_it_has_been() -> None:
    assert snapshots() == [json.dumps(data) for data in json.loads(SNAPSHOTS.read_text(encoding="utf-8"))]


def test_a_views_data_is_a_copy() -> None:
    view = RunView()
    for event in EVENTS[:12]:
        view.apply(event)
    data = view.to_dict()
    data["gate"]["failures"].append({"test": "t2"})
    data["budgets"]["max_cost"] = 0
    data["lanes"]["lanes"][1]["action"] = "changed"
    data["running"][0]["message"] = "changed"
    assert view.to_dict()["gate"]["failures"] == [{"test": "t1", "message": "boom"}]
    assert view.budgets == {"max_cost": 1.5}
    assert view.lanes.lanes[1].action == "✎ edit a.py"
    assert view.running[3].message == "last line"
