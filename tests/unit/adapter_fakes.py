"""Stand-in agent CLIs for the adapter tests (tests/unit/test_adapters_*.py).

A stand-in is a shell script that replays recorded output (tests/fixtures/agents/) and exits as the
recorded run did; the adapter runs it for real through ``Agent.run``: the same process, parsing,
judging and costing path the real CLI goes through.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from loope.agents.base import AgentEvent, AgentRequest, AgentResult
from loope.sandbox import RunSandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def sandbox_around(workspace: Path, run_dir: Path) -> RunSandbox:
    """A run's sandbox whose workspace is ``workspace`` (nothing tracked or protected in it)."""
    from loope.sandbox.layout import Layout

    layout = Layout.of(
        work_tree=workspace,
        workspace=workspace,
        run_dir=run_dir,
        project=run_dir,
        state_file=workspace / ".loope" / "state.md",
        tracked=[],
        protected_patterns=[],
    )
    return RunSandbox(layout)


def make_request(tmp_path: Path, role: str = "implementer", **overrides: Any) -> AgentRequest:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    fields: dict[str, Any] = {
        "role": role,
        "prompt": "You are the implementer. Replace hello with goodbye in hello.txt, then run ls.",
        "workspace": workspace,
        "step_dir": tmp_path / "step",
        "run_id": "0001-hello",
        "run_dir": tmp_path,
        "iteration": 1,
        "state_file": workspace / ".loope" / "state.md",
        **overrides,
    }
    return AgentRequest(**fields)


SANDBOX_WORKS = '[ "$1" = sandbox ] && exit 0\n'
"""How a stand-in answers codex's ``codex sandbox -- true`` (asked before each step): its sandbox runs."""


def fake_binary(tmp_path: Path, body: str, name: str = "fake-agent") -> str:
    """A stand-in program: a shell script running ``body`` (whose own sandbox, if asked, works)."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + SANDBOX_WORKS + body + "\n")
    path.chmod(0o755)
    return str(path)


def replay_body(
    fixture: str, exit_code: int = 0, *, stderr: str | None = None, recorded: str | None = None, workspace: Path
) -> str:
    """Shell lines printing a recorded stdout (its recorded directory mapped onto ``workspace``)."""
    path = shlex.quote(str(FIXTURES / fixture))
    if recorded:
        script = shlex.quote(f"s#{recorded}#{workspace}#g")
        lines = [f"sed {script} {path}"]
    else:
        lines = [f"cat {path}"]
    if stderr:
        lines.append(f"cat {shlex.quote(str(FIXTURES / stderr))} >&2")
    return "\n".join([*lines, f"exit {exit_code}"])


def run_agent(
    cls: Any,
    tmp_path: Path,
    body: str,
    *,
    model: str | None = None,
    options: dict[str, Any] | None = None,
    **request: Any,
) -> tuple[AgentResult, list[AgentEvent]]:
    """Run adapter ``cls`` with the stand-in ``body`` as its binary; its result and live events."""
    events: list[AgentEvent] = []
    agent = cls(model, options={"bin": fake_binary(tmp_path, body), **(options or {})})
    result = agent.run(make_request(tmp_path, on_event=events.append, **request))
    return result, events


def replay(
    cls: Any,
    tmp_path: Path,
    fixture: str,
    exit_code: int = 0,
    *,
    stderr: str | None = None,
    recorded: str | None = None,
    model: str | None = None,
    options: dict[str, Any] | None = None,
    **request: Any,
) -> tuple[AgentResult, list[AgentEvent]]:
    """Run adapter ``cls`` on a recorded transcript, exiting as the recorded run did."""
    body = replay_body(fixture, exit_code, stderr=stderr, recorded=recorded, workspace=tmp_path / "workspace")
    return run_agent(cls, tmp_path, body, model=model, options=options, **request)


def actions(events: list[AgentEvent]) -> list[tuple[str | None, str | None]]:
    return [(e.action, e.target) for e in events if e.kind == "action"]


def messages(events: list[AgentEvent]) -> list[str]:
    return [e.text or "" for e in events if e.kind == "message"]


def usages(events: list[AgentEvent]) -> list[AgentEvent]:
    return [e for e in events if e.kind == "usage"]
