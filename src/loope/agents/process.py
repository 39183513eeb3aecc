"""The shared machinery of adapters that drive an external program.

A subclass says how to build the command line, how to read one line of its output, and how to
judge the finished process; this class runs it, streams the transcript to the step directory and
turns the parsed lines into live events.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from loope.agents import catalog
from loope.agents.base import AgentEvent, AgentRequest, AgentResult
from loope.agents.catalog import AdapterInfo
from loope.agents.config_seal import seal_for, state_dir_files, state_paths
from loope.agents.failure import explain
from loope.agents.message import MessageText, bounded
from loope.agents.pricing import estimate
from loope.agents.setback import Setback, from_text
from loope.proc import ProcResult, run_process
from loope.record import record
from loope.records.atomic import write_text
from loope.streams import split_lines
from loope.text import last_line

ARGUMENT_PROMPT_LIMIT = 100_000
"""Bytes of prompt that may travel as one argument (Linux refuses a single argument over 128 KiB)."""


@record()
class Session:
    """What has been read from one agent's output so far."""

    texts: MessageText = field(default_factory=MessageText)
    """The message's text lines as they came (bounded: its beginning and its end)."""
    final: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_reported: bool = False
    errors: list[str] = field(default_factory=list)
    last_action: str | None = None
    model: str | None = None
    budget_exhausted: bool = False
    """The CLI stopped at the spending cap loope passed it."""
    setback: Setback | None = None
    """What the CLI itself said makes the failure transient, or a usage limit (it wins over its text)."""

    def add_usage(self, event: AgentEvent) -> None:
        self.input_tokens += event.input_tokens or 0
        self.output_tokens += event.output_tokens or 0
        if event.cost_usd is not None:
            self.cost_usd += event.cost_usd
            self.cost_reported = True

    @property
    def message(self) -> str:
        return bounded(self.final) if self.final is not None else self.texts.text().strip()


S = TypeVar("S", bound=Session)


class ProcessAgent(Generic[S]):
    """Base for adapters that run a program once per step, reading its output into a session of type ``S``."""

    name: ClassVar[str]
    info: ClassVar[AdapterInfo]
    prompt_on_stdin: ClassVar[bool] = True
    transcript_name: ClassVar[str] = "transcript.jsonl"
    home_env: ClassVar[tuple[str, ...]] = ()
    """Variables that point the CLI at a private config dir under ``--isolate-home``."""
    home_state: ClassVar[tuple[str, ...]] = ()
    """The CLI's own state under HOME (``.claude``, ``.claude.json``): writable inside the sandbox."""
    session_state: ClassVar[tuple[str, ...]] = ()
    """Where in its state dir (the first of ``home_state``, or ``home_env``'s) the CLI keeps each session's
    transcript: private to each step of a race candidate, so that no candidate reads another's."""
    home_config: ClassVar[tuple[str, ...]] = ()
    """Files in that state dir the CLI follows in every later session (hooks, MCP servers, memory):
    whatever a step changes there is put back (``config_seal``)."""
    home_config_keys: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    """Keys of state files the CLI rewrites itself (under HOME, or ``home_env``'s dir) that are configuration too."""

    def __init__(self, model: str | None = None, *, options: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.options: Mapping[str, Any] = options or {}

    @property
    def label(self) -> str:
        return self.name

    # -- what a subclass provides -------------------------------------------------------------

    def argv(self, request: AgentRequest) -> list[str]:
        raise NotImplementedError

    session_type: type[S]
    """The parse state of one run (``new_session`` makes one from the model alone unless overridden)."""

    def parse_line(self, line: str, session: S) -> Iterable[AgentEvent]:
        """Events in one line of output; plain text is part of the final message by default."""
        session.texts.append(line)
        return ()

    def read_block(self, block: bytes, session: S) -> Iterable[AgentEvent]:
        """Events in a block of complete output lines; by default, each non-blank line through ``parse_line``."""
        events: list[AgentEvent] = []
        for line in split_lines(block):
            if line.strip():
                events.extend(self.parse_line(line, session))
        return events

    def new_session(self, request: AgentRequest) -> S:
        """The parse state for one run; adapters that track more keep it in a Session subclass."""
        return self.session_type(model=self.model)

    def finish(self, proc: ProcResult, session: S) -> Iterable[AgentEvent]:
        """Events known only once the process ended, however it ended (a timeout or kill included).

        For CLIs that report totals in a last line that may never come: what the partial output says.
        """
        return ()

    def judge(self, proc: ProcResult, session: S) -> str | None:
        """Why the step failed, or None. Subclasses add the failures their CLI hides behind exit 0."""
        if proc.exit_code == 0:
            return session.errors[-1] if session.errors else None
        detail = session.errors[-1] if session.errors else last_line(proc.stderr_tail or proc.stdout_tail)
        reason = f"{self.label} exited with {proc.describe()}"
        return f"{reason}: {detail}" if detail else reason

    def setback(self, error: str, proc: ProcResult, session: S) -> Setback | None:
        """Whether a failure may pass when tried again: the CLI's own signal, else its error text."""
        if session.setback is not None:
            return session.setback
        return from_text("\n".join([error, *session.errors[-3:], *proc.stderr_tail.strip().splitlines()[-5:]]))

    # -- shared machinery -----------------------------------------------------------------------

    @classmethod
    def binary_env_var(cls) -> str:
        return catalog.binary_env_var(cls.name)

    def binary(self) -> str:
        """The program to run: loope.toml's ``bin``, else ``LOOPE_<NAME>_BIN``, else the first installed name."""
        return catalog.program(self.info, self.options)

    def extra_args(self) -> list[str]:
        return [str(a) for a in self.options.get("args", [])]

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = dict(os.environ)
        env.update(request.protocol_env())
        env.update(request.env)
        if request.isolate_home and self.home_env:
            home = request.step_dir / "home"
            home.mkdir(parents=True, exist_ok=True)
            for var in self.home_env:
                env[var] = str(home)
        return env

    def run(self, request: AgentRequest) -> AgentResult:
        if not self.prompt_on_stdin and len(request.prompt.encode()) > ARGUMENT_PROMPT_LIMIT:
            # An argument this long is refused by the kernel (E2BIG); the prompt is in prompt.md.
            pointer = f"Your instructions are in the file {request.prompt_file}: read it and follow it exactly."
            request = replace(request, prompt=pointer)
        missing = self.preflight(request.workspace)
        if missing:
            return AgentResult(ok=False, message="", error=missing)
        argv = self.argv(request)
        # The command line as run (the prompt, when it travels as an argument, is in prompt.md already).
        shown = [a.replace(request.prompt, "<prompt.md>") if request.prompt else a for a in argv]
        write_text(request.step_dir / "argv.json", json.dumps(shown, indent=2) + "\n")
        session = self.new_session(request)

        def report(events: Iterable[AgentEvent]) -> None:
            for event in events:
                if event.kind == "usage":
                    session.add_usage(event)
                elif event.kind == "action":
                    session.last_action = event.describe()
                request.on_event(event)

        def on_block(block: bytes) -> None:
            report(self.read_block(block, session))

        env = self.environment(request)
        problem = self.runtime_problem(request, env)
        if problem:
            return AgentResult(ok=False, message="", error=problem)
        seal = seal_for(env, self)
        box = request.sandbox.agent(
            write=request.mode == "write",
            state=self.state_paths(env),
            visible=[*self.visible_paths(request), *seal.files],  # read-only inside, put back outside
            private=state_dir_files(env, self.home_env, self.home_state, self.session_state),
        )
        proc = run_process(
            argv,
            cwd=request.workspace,
            env=env,
            stdin=request.prompt if self.prompt_on_stdin else None,
            timeout=request.timeout_s,
            stdout_path=request.step_dir / self.transcript_name,
            stderr_path=request.step_dir / "stderr.log",
            on_stdout_block=on_block,
            cancel=request.cancel,
            on_spawn=request.on_spawn,
            confine=box,
        )
        undone = seal.restore()
        report(self.finish(proc, session))
        return replace(self._result(proc, session, request), undone=tuple(undone))

    def state_paths(self, env: Mapping[str, str]) -> list[Path]:
        """Where the CLI keeps its own state for this step: ``home_state`` under HOME, and ``home_env``'s dirs."""
        return state_paths(env, self.home_env, self.home_state)

    def visible_paths(self, request: AgentRequest) -> list[Path]:
        """Files the command needs to see, read-only, wherever they are (inside the sandbox): its program,
        should it be named by a path (``bin`` in loope.toml) under /tmp, which the step's private /tmp hides."""
        program = Path(self.binary()).expanduser()
        return [program] if program.is_absolute() and program.exists() else []

    def runtime_problem(self, request: AgentRequest, env: Mapping[str, str]) -> str | None:
        """Why this step cannot do its work in the environment it is about to get, or None.

        Checked just before the process starts; a CLI whose own sandbox cannot run here says so.
        """
        return None

    def doctor_problem(self, workdir: Path, *, sandboxed: bool) -> str | None:
        """What ``loope doctor`` finds wrong beyond the binary and credentials (a sandbox that cannot run), or None.

        ``sandboxed``: the project's steps will run inside loope's sandbox.
        """
        return None

    def preflight(self, workdir: Path) -> str | None:
        """Why the program cannot run, checked before a run writes anything; None when it can."""
        return catalog.program_problem(self.info, self.binary(), workdir)

    def _result(self, proc: ProcResult, session: S, request: AgentRequest) -> AgentResult:
        setback: Setback | None = None
        if proc.start_error:
            hint = f"; install it with: {self.info.install}" if proc.start_error.startswith("command not found") else ""
            error: str | None = f"{self.label}: {proc.start_error}{hint}"
        elif proc.timed_out:
            error = f"timed out after {round(request.timeout_s or 0, 1):g}s"
            if session.last_action:
                error += f" (last action: {session.last_action})"
        elif proc.cancelled:
            error = "stopped"
        else:
            error = self.judge(proc, session)
            if error:
                setback = None if session.budget_exhausted else self.setback(error, proc, session)
                error = explain(error, proc.stderr_tail)
        cost, estimated = self.cost(session)
        # Not reported and not priceable: tokens were spent at an unknown price, or the CLI never says.
        used_tokens = session.input_tokens + session.output_tokens > 0
        known = session.cost_reported or estimated or not (used_tokens or self.info.cost_source.startswith("none"))
        return AgentResult(
            ok=error is None,
            message=session.message,
            error=error,
            exit_code=proc.exit_code,
            timed_out=proc.timed_out,
            cancelled=proc.cancelled,
            input_tokens=session.input_tokens,
            output_tokens=session.output_tokens,
            cost_usd=cost,
            cost_estimated=estimated,
            cost_known=known,
            last_action=session.last_action,
            model=session.model,
            budget_exhausted=session.budget_exhausted,
            setback=setback,
        )

    def cost(self, session: S) -> tuple[float, bool]:
        """USD the step cost, and whether it is an estimate rather than the CLI's own figure."""
        if session.cost_reported:
            return session.cost_usd, False

        estimated = estimate(session.model or self.model, session.input_tokens, session.output_tokens, self.options)
        if estimated is None:
            return 0.0, False
        return estimated, True
