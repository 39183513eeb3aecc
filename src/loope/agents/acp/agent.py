"""``acp:<command>`` and its presets: any agent that speaks the Agent Client Protocol over stdio.

One step is one session: the agent process starts, ``initialize``, ``session/new`` with the
workspace as cwd, one ``session/prompt``; then the process group is killed. A timeout or a stop
sends ``session/cancel`` first and gives the agent a moment to end its turn.

Inside loope's sandbox the agent runs as every other agent does (the workspace writable for
writers, read-only for reviewers, its own state dirs under HOME writable), and so does each
command it runs through loope's terminal.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from loope import __version__
from loope.agents import catalog
from loope.agents.base import AgentRequest, AgentResult
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.claude import ClaudeAgent
from loope.agents.claude import sandbox_env as claude_sandbox_env
from loope.agents.codex import CodexAgent
from loope.agents.config_seal import seal_for, state_dir_files, state_paths
from loope.agents.failure import explain
from loope.agents.gemini import GeminiAgent
from loope.agents.pricing import estimate
from loope.agents.setback import from_text
from loope.records.atomic import write_text


class AcpAgent:
    """An ACP agent run by its command line (``acp:<command>``)."""

    name: ClassVar[str] = "acp"
    info: ClassVar[AdapterInfo] = INFO["acp"]
    launch: ClassVar[tuple[str, ...]] = ()
    """The preset's arguments after the program (``--experimental-acp``)."""
    home_env: ClassVar[tuple[str, ...]] = ()
    """Variables naming the agent's own state dir (writable inside the sandbox), as for its CLI's adapter."""
    home_state: ClassVar[tuple[str, ...]] = ()
    """Its state under HOME (``.claude``), writable inside the sandbox."""
    session_state: ClassVar[tuple[str, ...]] = ()
    """Its session transcripts in that state dir: private to each step of a race candidate."""
    home_config: ClassVar[tuple[str, ...]] = ()
    """Its configuration files in that state dir: put back after each step, as for its CLI's adapter."""
    home_config_keys: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    """Configuration keys of state files it rewrites itself (``mcpServers`` in ``~/.claude.json``)."""

    def __init__(self, command: str | None = None, *, options: Mapping[str, Any] | None = None) -> None:
        self.command = command
        self.model: str | None = None
        self.options: Mapping[str, Any] = options or {}

    @property
    def label(self) -> str:
        return self.name

    # -- how it starts ----------------------------------------------------------------------------

    def argv(self) -> list[str]:
        extra = [str(a) for a in self.options.get("args", [])]
        if self.command is not None:
            return [*shlex.split(self.command), *extra]
        return [self.binary(), *self.launch, *self.model_args(), *extra]

    @classmethod
    def binary_env_var(cls) -> str:
        return catalog.binary_env_var(cls.name)

    def binary(self) -> str:
        """loope.toml's ``bin``, else ``LOOPE_<NAME>_BIN``, else the preset's program."""
        return catalog.program(self.info, self.options)

    def model_args(self) -> list[str]:
        return []

    def model_env(self) -> dict[str, str]:
        return {}

    def sandbox_args(self, request: AgentRequest) -> list[str]:
        """Arguments for a step inside loope's sandbox (none of the agent's own sandbox, where it would nest)."""
        return []

    def sandbox_env(self, request: AgentRequest) -> dict[str, str]:
        return {}

    def preflight(self, workdir: Path) -> str | None:
        try:
            argv = self.argv()
        except ValueError as exc:
            return f"{self.name}: cannot parse the command {self.command!r}: {exc}"
        if not argv:
            return "acp: needs a command, for example --implementer 'acp:gemini --experimental-acp'"
        program = argv[0]
        if self.command is not None and os.sep in program:
            path = Path(program).expanduser()
            return (
                None if (path if path.is_absolute() else workdir / path).exists() else f"acp: {program} does not exist"
            )
        return catalog.program_problem(self.info, program, workdir)

    # -- one step ---------------------------------------------------------------------------------

    def run(self, request: AgentRequest) -> AgentResult:
        missing = self.preflight(request.workspace)
        if missing:
            return AgentResult(ok=False, message="", error=missing)
        argv = [*self.argv(), *self.sandbox_args(request)]
        write_text(request.step_dir / "argv.json", json.dumps(argv, indent=2) + "\n")
        env = {**os.environ, **request.protocol_env(), **self.model_env(), **self.sandbox_env(request), **request.env}
        import asyncio  # here, not at import: listing the adapters needs no event loop

        from loope.agents.acp.session import drive  # loads the ACP SDK, asyncio and pydantic
        from loope.sandbox.layout import named_paths

        state = state_paths(env, self.home_env, self.home_state)
        visible = named_paths(shlex.join(argv), request.workspace) if request.sandboxed else []
        private = state_dir_files(env, self.home_env, self.home_state, self.session_state)
        seal = seal_for(env, self)
        visible += seal.files  # its configuration: read-only inside the sandbox, put back outside it
        box = request.sandbox.agent(write=request.mode == "write", state=state, visible=visible, private=private)
        outcome = asyncio.run(drive(argv, env, request, client_version=__version__, box=box))
        return replace(self._result(outcome, request), undone=tuple(seal.restore()))

    def _result(self, outcome: Any, request: AgentRequest) -> AgentResult:
        seen = outcome.client.seen if outcome.client is not None else None
        error = outcome.error
        if outcome.timed_out:
            error = f"timed out after {round(request.timeout_s or 0, 1):g}s"
            if seen is not None and seen.last_action:
                error += f" (last action: {seen.last_action})"
        elif outcome.cancelled:
            error = "stopped"
        elif error:
            error = explain(f"{self.label}: {error}", outcome.stderr_tail)

        # A rate limit or a plan's usage limit is retried or waited out, as for every other adapter.
        setback = None
        if error is not None and not (outcome.timed_out or outcome.cancelled):
            setback = from_text("\n".join([error, *outcome.stderr_tail.strip().splitlines()[-5:]]))
        input_tokens = seen.input_tokens if seen else 0
        output_tokens = seen.output_tokens if seen else 0
        cost, estimated = self.cost(seen.cost_usd if seen else None, input_tokens, output_tokens)
        reported = seen is not None and seen.cost_usd is not None
        return AgentResult(
            ok=error is None,
            message=outcome.message,
            error=error,
            timed_out=outcome.timed_out,
            cancelled=outcome.cancelled,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost,
            cost_estimated=estimated,
            cost_known=reported or estimated,  # an agent that reports neither cost nor tokens: unknown, not $0
            last_action=seen.last_action if seen else None,
            model=self.model,
            setback=setback,
        )

    def cost(self, reported: float | None, input_tokens: int, output_tokens: int) -> tuple[float, bool]:
        """The agent's own figure when it sent one, else an estimate from the tokens (flagged)."""
        if reported is not None:
            return reported, False

        estimated = estimate(self.model, input_tokens, output_tokens, self.options)
        return (estimated, True) if estimated is not None else (0.0, False)


class _Preset(AcpAgent):
    """A named ACP agent: its program, its install line, how it takes a model."""

    def __init__(self, model: str | None = None, *, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(None, options=options)
        self.model = model


class ClaudeAcpAgent(_Preset):
    name = "claude-acp"
    home_env = ClaudeAgent.home_env
    home_state = ClaudeAgent.home_state
    session_state = ClaudeAgent.session_state
    home_config = ClaudeAgent.home_config
    home_config_keys = ClaudeAgent.home_config_keys
    info = INFO["claude-acp"]

    def model_env(self) -> dict[str, str]:
        return {"ANTHROPIC_MODEL": self.model} if self.model else {}

    def sandbox_env(self, request: AgentRequest) -> dict[str, str]:
        return claude_sandbox_env(request)


class CodexAcpAgent(_Preset):
    name = "codex-acp"
    home_env = CodexAgent.home_env
    home_state = CodexAgent.home_state
    session_state = CodexAgent.session_state
    home_config = CodexAgent.home_config
    info = INFO["codex-acp"]

    def model_args(self) -> list[str]:
        return ["-c", f"model={json.dumps(self.model)}"] if self.model else []

    def sandbox_args(self, request: AgentRequest) -> list[str]:
        # As for codex itself: loope's sandbox confines the step, codex's own would nest in it and fail.
        chosen = any(str(a).startswith("sandbox_mode=") for a in self.options.get("args", []))
        return [] if chosen or not request.sandboxed else ["-c", 'sandbox_mode="danger-full-access"']


class GeminiAcpAgent(_Preset):
    name = "gemini-acp"
    home_env = GeminiAgent.home_env
    home_state = GeminiAgent.home_state
    home_config = GeminiAgent.home_config
    launch = ("--experimental-acp",)
    info = INFO["gemini-acp"]

    def model_args(self) -> list[str]:
        return ["--model", self.model] if self.model else []
