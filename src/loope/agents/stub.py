"""The hermetic stub behind ``--dry-run``: no binaries, no network, converges in one iteration."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest, AgentResult
from loope.agents.catalog import INFO, AdapterInfo
from loope.records.atomic import write_text

STUB_FILE = "loope-dry-run.md"


class StubAgent:
    name = "stub"
    info: ClassVar[AdapterInfo] = INFO["stub"]

    def __init__(self, model: str | None = None, *, options: Mapping[str, Any] | None = None) -> None:
        self.model = model

    @property
    def label(self) -> str:
        return self.name

    def preflight(self, workdir: Path) -> str | None:
        return None

    def run(self, request: AgentRequest) -> AgentResult:
        emit = request.on_event
        goal = _goal_line(request.prompt)
        if request.role == "designer":
            message = (
                "# Design contract (dry run)\n\n## Goal\n"
                f"{goal}\n\n## Acceptance criteria\n- `{STUB_FILE}` exists and names the goal.\n"
            )
        elif request.role == "implementer":
            emit(AgentEvent.act("write", STUB_FILE))
            write_text(
                request.workspace / STUB_FILE,
                f"# Dry run\n\nIteration {request.iteration} of run {request.run_id}.\n\nGoal: {goal}\n",
            )
            _mark_done(request)
            message = f"Wrote {STUB_FILE} (dry run: no agent was called)."
        elif request.role == "critic":
            message = "Assessment: the dry run is on track.\nSuggestion: replace --dry-run with real agents."
        else:
            emit(AgentEvent.act("read", STUB_FILE))
            message = "The dry-run change is in place.\nVERDICT: PASS"
        emit(AgentEvent.say(message.splitlines()[0]))
        emit(AgentEvent.usage(0, 0, 0.0))
        return AgentResult(ok=True, message=message)


def _mark_done(request: AgentRequest) -> None:
    """Keep the state-file contract as a real agent would: record the step and say the goal is met."""
    path = request.state_file
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    body = text.split("---", 2)[2] if text.startswith("---") and text.count("---") >= 2 else text
    progress = f"\n- iteration {request.iteration}: wrote {STUB_FILE} (dry run)\n"
    write_text(
        path,
        f"---\nloop_id: {request.run_id}\nstatus: done\niteration: {request.iteration}\n---{body.rstrip()}{progress}",
    )


def _goal_line(prompt: str) -> str:
    """The goal from a loope prompt: the first non-empty line under its '# Goal' heading."""
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        if line.strip().lower() == "# goal":
            for rest in lines[i + 1 :]:
                if rest.strip():
                    return rest.strip()
    return "the goal"
