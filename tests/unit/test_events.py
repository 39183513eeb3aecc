"""The event contract: typed classes, their JSON lines, and how the bus treats a failing observer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loope.agents.base import AgentEvent
from loope.engine.bus import EventBus, ObserverFailed
from loope.engine.loop import Engine
from loope.engine.roster import Services
from loope.enums import StopReason
from loope.events import (
    EVENT_CLASSES,
    EVENT_TYPES,
    AgentActivity,
    Decision,
    Event,
    Failure,
    IterationStarted,
    RunFinished,
    VerifyFinished,
)
from loope.spec import LoopSpec
from tests.conftest import EVENT_TYPES as CONTRACT_TYPES
from tests.conftest import Project


def test_the_event_types_derive_from_the_classes_and_are_the_contracts():
    assert set(EVENT_TYPES) == CONTRACT_TYPES
    assert len(EVENT_TYPES) == len(CONTRACT_TYPES)
    assert {c.type for c in EVENT_CLASSES} == set(EVENT_TYPES)
    assert (EVENT_TYPES[0], EVENT_TYPES[-1]) == ("run_started", "run_finished")


def test_a_line_is_ts_run_id_type_then_the_fields_in_order():
    event = VerifyFinished(
        run_id="0001-x",
        ts="2026-01-01T00:00:00.000Z",
        step=3,
        iteration=1,
        command="pytest",
        passed=False,
        exit_code=1,
        timed_out=False,
        failures=[Failure("tests/test_a.py::test_a", "assert 1 == 2")],
        duration_s=0.5,
        failing=1,
        summary="1 failed in 0.1s",
        output_tail=["E  assert 1 == 2"],
    )
    line = event.to_json()
    assert line == (
        '{"ts": "2026-01-01T00:00:00.000Z", "run_id": "0001-x", "type": "verify_finished", "step": 3,'
        ' "iteration": 1, "command": "pytest", "passed": false, "exit_code": 1, "timed_out": false,'
        ' "failures": [{"test": "tests/test_a.py::test_a", "message": "assert 1 == 2"}], "duration_s": 0.5,'
        ' "failing": 1, "summary": "1 failed in 0.1s", "output_tail": ["E  assert 1 == 2"], "candidate": null}'
    )


def test_an_agent_event_keeps_its_compact_shape_and_enums_are_their_strings():
    activity = AgentActivity(step=2, role="implementer", event=AgentEvent.act("edit", "calc.py"))
    assert activity.to_dict()["event"] == {"kind": "action", "action": "edit", "target": "calc.py"}
    decision = Decision(
        iteration=1, stop=StopReason.CONVERGED, verdict="converged", why="every check passed", blockers=0
    )
    assert json.loads(decision.to_json())["stop"] == "converged"


class Recorder:
    def __init__(self) -> None:
        self.seen: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.seen.append(event)


class Raises:
    def on_event(self, event: Event) -> None:
        raise KeyError("workspace")


def test_in_production_a_failing_observer_is_logged_and_the_others_still_see_the_event(tmp_path: Path):
    after = Recorder()
    bus = EventBus([Raises(), after], strict=False)
    bus.run_id, bus.error_log = "0001-x", tmp_path / "observer-errors.log"
    sent = bus.emit(IterationStarted(iteration=1, max_iters=3))
    assert after.seen == [sent]
    assert sent.run_id == "0001-x"  # stamped by the bus
    log = bus.error_log.read_text()
    assert "Raises failed on iteration_started" in log
    assert "KeyError: 'workspace'" in log


def test_in_strict_mode_a_failing_observer_stops_the_process(tmp_path: Path):
    bus = EventBus([Raises()], strict=True)
    bus.error_log = tmp_path / "observer-errors.log"
    with pytest.raises(ObserverFailed, match="Raises failed on iteration_started"):
        bus.emit(IterationStarted(iteration=1, max_iters=3))
    assert "KeyError" in bus.error_log.read_text()  # logged as well


def test_the_test_suite_runs_observers_strictly():
    assert EventBus().strict


def test_a_failing_observer_never_changes_a_run(project: Project, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LOOPE_STRICT_OBSERVERS")
    finished = Recorder()
    spec = LoopSpec(goal="a dry goal", workdir=project.path, implementer="stub", reviewers=["stub"], dry_run=True)
    record = Engine(spec, Services(observers=[Raises(), finished])).run()
    assert (record.status, record.converged) == ("converged", True)
    assert isinstance(finished.seen[-1], RunFinished)
    run_dir = project.runs()[-1]
    assert "Raises failed on run_started" in (run_dir / "observer-errors.log").read_text()
    types = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert (types[0], types[-1]) == ("run_started", "run_finished")


def test_in_strict_mode_a_failing_observer_fails_the_test_instead_of_the_run(project: Project):
    spec = LoopSpec(goal="a dry goal", workdir=project.path, implementer="stub", reviewers=["stub"], dry_run=True)
    with pytest.raises(ObserverFailed):
        Engine(spec, Services(observers=[Raises()])).run()
