"""One ACP step: start the agent, one session, one prompt; cancel on timeout or stop; kill its group."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.connection import StreamEvent
from acp.interfaces import Client
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

from loope.agents.acp.client import LoopeClient
from loope.agents.base import AgentRequest
from loope.proctree import kill_tree
from loope.sandbox import StepBox
from loope.spawn import spawn_piped

CANCEL_GRACE_S = 5.0
"""How long an agent has to end its turn after ``session/cancel`` before its process group is killed."""
_POLL_S = 0.1
_FAILED_STOPS = {"refusal": "the agent refused to go on", "cancelled": "the agent cancelled its turn"}
FOLLOW_UPS = 2
"""Prompts loope may add to a step's session to tell the agent why it refused something (see ``_told``)."""


@dataclass
class Outcome:
    """How the session ended."""

    client: LoopeClient | None
    message: str = ""
    error: str | None = None
    timed_out: bool = False
    cancelled: bool = False
    stderr_tail: str = ""


async def drive(
    argv: list[str], env: dict[str, str], request: AgentRequest, *, client_version: str, box: StepBox
) -> Outcome:
    """Run one step's session with the agent ``argv`` starts, confined by ``box``.

    The commands the agent runs through loope's terminal get boxes of their own from the same
    sandbox (and share the agent's /tmp); when the step ends, ``box`` ends what is left of it all.
    """
    command, full_env = box.enter(tuple(argv), env)
    try:
        return await _session(command, full_env, request, client_version, box)
    finally:
        box.close()


async def _session(
    argv: tuple[str, ...], env: dict[str, str], request: AgentRequest, client_version: str, box: StepBox
) -> Outcome:
    stderr_path = request.step_dir / "stderr.log"
    proc = await spawn_piped(argv, cwd=request.workspace, env=env, stderr_path=stderr_path)
    if isinstance(proc, str):
        return Outcome(None, error=proc)
    assert proc.stdin is not None  # spawn_piped opens both pipes
    assert proc.stdout is not None

    def terminal_box(cwd: Path) -> StepBox:
        return request.sandbox.agent(write=request.mode == "write", cwd=cwd, tmp_of=box)

    client = LoopeClient(request, terminal_box)
    outcome = Outcome(client)
    with (request.step_dir / "transcript.jsonl").open("a", encoding="utf-8") as transcript:
        try:
            if request.on_spawn is not None:
                request.on_spawn(proc.pid)
            await _converse(
                proc.stdin, proc.stdout, client=client, outcome=outcome, transcript=transcript, version=client_version
            )
        finally:
            await asyncio.to_thread(client.terminals.close)
            kill_tree(proc.pid)  # the agent and all it started (shell tools leave its group): nothing outlives the step
            await proc.wait()
    outcome.message = client.finish()
    outcome.stderr_tail = _tail(stderr_path)
    return outcome


async def _converse(
    stdin: asyncio.StreamWriter,
    stdout: asyncio.StreamReader,
    *,
    client: LoopeClient,
    outcome: Outcome,
    transcript: IO[str],
    version: str,
) -> None:

    def record(event: StreamEvent) -> None:
        transcript.write(json.dumps({"dir": event.direction.value, **event.message}, ensure_ascii=False) + "\n")
        transcript.flush()

    request = client.request
    # LoopeClient serves the methods loope offers (files, terminals, permissions, updates); the SDK
    # answers "method not found" for the rest (elicitation), which the Client protocol also lists.
    conn = connect_to_agent(cast("Client", client), stdin, stdout, observers=[record])
    session: list[str] = []

    async def turn() -> Any:
        await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
            ),
            client_info=Implementation(name="loope", version=version),
        )
        started = await conn.new_session(cwd=str(request.workspace), mcp_servers=[])
        session.append(started.session_id)
        response = await conn.prompt(session_id=started.session_id, prompt=[text_block(request.prompt)])
        told = 0
        for _ in range(FOLLOW_UPS):
            # A permission answer carries no reason an agent shows its model (claude-agent-acp says "User
            # refused", codex-acp ends the turn): the reasons follow in the same session, as a user would.
            reasons = client.seen.refusals[told:]
            if not reasons:
                break
            told = len(client.seen.refusals)
            client.flush_message()  # the step's final message is the one after loope's follow-up
            response = await conn.prompt(session_id=started.session_id, prompt=[text_block(_told(reasons))])
        return response

    task = asyncio.create_task(turn())
    try:
        stop = await _watch(task, request)
        if stop is not None:
            outcome.timed_out, outcome.cancelled = stop == "timeout", stop == "stop"
            if session:
                with contextlib.suppress(Exception):  # the agent may be gone already; it is killed next
                    await asyncio.wait_for(conn.cancel(session_id=session[0]), CANCEL_GRACE_S)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, CANCEL_GRACE_S)
            return
        response = task.result()
        usage = getattr(response, "usage", None)
        if usage is not None:
            client.seen.input_tokens = int(usage.input_tokens or 0)
            client.seen.output_tokens = int(usage.output_tokens or 0)
        outcome.error = _FAILED_STOPS.get(str(response.stop_reason))
    except RequestError as exc:
        detail = exc.data.get("message") or exc.data.get("details") if isinstance(exc.data, dict) else exc.data
        outcome.error = f"{exc}: {detail}" if detail else str(exc)
    except (ConnectionError, OSError, EOFError) as exc:
        outcome.error = f"the agent ended the connection ({exc or type(exc).__name__})"
    finally:
        task.cancel()
        with contextlib.suppress(Exception):
            await conn.close()


async def _watch(task: asyncio.Task[Any], request: AgentRequest) -> str | None:
    """Wait for the turn; "timeout" or "stop" when one came first."""
    deadline = time.monotonic() + request.timeout_s if request.timeout_s else None
    while not task.done():
        if request.cancel is not None and request.cancel.is_set():
            return "stop"
        if deadline is not None and time.monotonic() >= deadline:
            return "timeout"
        await asyncio.wait({task}, timeout=_POLL_S)
    return None


def _told(reasons: list[str]) -> str:
    lines = "\n".join(f"- {reason}" for reason in dict.fromkeys(reasons))
    return (
        f"loope refused what you just tried:\n{lines}\n"
        "Do not try it again. Carry on with the task without it, then end with the reply your instructions ask for."
    )


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(handle.tell() - 4000, 0))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
