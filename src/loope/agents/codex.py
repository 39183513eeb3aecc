"""``codex``: OpenAI's Codex CLI (``@openai/codex``) through ``codex exec``.

One process per step: ``codex exec --json ... -`` with the prompt on stdin (given ``-``, codex reads
stdin to its end; given a prompt argument and a stdin nobody closes, it waits forever). Each stdout
line is a JSON event: ``thread.started``, ``turn.started``, ``item.started`` / ``item.completed``
(``agent_message``, ``reasoning``, ``command_execution``, ``file_change``, ``mcp_tool_call``,
``web_search``, ``todo_list``, ``error``), then ``turn.completed`` with the turn's token usage, or
``turn.failed`` (and exit 1). Codex reports no cost and, in its events, no model name: the tokens
are priced by the model the spec, the ``[agents.codex]`` args or codex's config.toml name.

What the events do not say plainly:

- a top-level ``error`` is a retry notice (``Reconnecting... 2/5 (...)``) or the reason a
  ``turn.failed`` repeats; only ``turn.failed`` fails the turn. An ``error`` *item* is a warning.
- exit 0 does not mean the commands worked: a sandbox refusal shows as a failed command item at
  best (a rejected patch, and sometimes a refused command, leave no item at all; the guard and the
  diff see the files). A sandbox that cannot start at all (a container without user namespaces)
  fails every command, so loope fails the step and says how to fix it.
- codex can wait forever (a server that never answers): the step timeout covers it. Unbounded
  "waiting for network" retries are switched off so an unreachable provider fails the step.

Writers run with ``--sandbox workspace-write`` (the workspace and /tmp writable, ``.git`` and the
network not), readers with ``--sandbox read-only``. Loope never resumes a codex session, so runs are
``--ephemeral``. Provider settings are the user's: their config.toml, or ``-c`` flags in
``[agents.codex] args``.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from loope.agents.base import Action, AgentEvent, AgentRequest
from loope.agents.catalog import CODEX_DEFAULT_PRICE, INFO, AdapterInfo
from loope.agents.codex_sandbox import own_sandbox_in_use, sandbox_problem
from loope.agents.jsonl import StreamAgent, StreamSession, api_error, as_dict, detail_from
from loope.agents.pricing import estimate
from loope.proc import ProcResult
from loope.text import count as as_int
from loope.text import one_line

_SANDBOX_FLAGS = ("-s", "--sandbox", "--dangerously-bypass-approvals-and-sandbox")
_MODEL_FLAGS = ("-m", "--model")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_RETRY_NOTICE = re.compile(r"^Reconnecting\.\.\.")
# bubblewrap, codex's Linux sandbox, cannot make its namespaces (Docker's default seccomp profile, say).
_SANDBOX_BROKEN = re.compile(r"^bwrap: .*(namespace|uid map|Operation not permitted)|panicked at linux-sandbox", re.I)
_CHANGE_ACTIONS: dict[str, Action] = {"add": "write", "update": "edit", "delete": "edit"}


@dataclass
class CodexSession(StreamSession):
    """What one ``codex exec`` has printed so far, beyond what every JSON-streaming CLI reports."""

    reported: set[str] = field(default_factory=set)
    """Items whose action was already shown when they started."""
    notice: str | None = None
    """The last top-level ``error`` (a retry notice, or the reason a failed turn repeats)."""


class CodexAgent(StreamAgent[CodexSession]):
    session_type = CodexSession
    name = "codex"
    product = "Codex CLI"
    prompt_on_stdin = True
    home_env = ("CODEX_HOME",)
    home_state = (".codex",)
    session_state = ("sessions",)
    home_config = ("config.toml", "AGENTS.md", "AGENTS.override.md", "prompts")
    info: ClassVar[AdapterInfo] = INFO["codex"]

    # -- the command --------------------------------------------------------------------------

    def argv(self, request: AgentRequest) -> list[str]:
        extra = self.extra_args()
        argv = [self.binary(), "exec", "--json", "--skip-git-repo-check", "--ephemeral", "-C", str(request.workspace)]
        if not _has_option(extra, _SANDBOX_FLAGS):
            # A sandbox in the user's args wins (containers without user namespaces need danger-full-access).
            argv += ["-s", _own_sandbox(request)]
        argv += ["-c", "analytics.enabled=false", "--disable", "unbounded_connection_retries"]
        if self.model:
            # The spec's model wins over one in loope.toml's args (codex refuses -m twice).
            argv += ["-m", self.model]
            extra = _without_option(extra, _MODEL_FLAGS)
        return [*argv, *extra, "-"]

    def runtime_problem(self, request: AgentRequest, env: Mapping[str, str]) -> str | None:
        argv = self.argv(request)
        return sandbox_problem(argv[0], env, request.workspace) if own_sandbox_in_use(argv) else None

    def doctor_problem(self, workdir: Path, *, sandboxed: bool) -> str | None:
        """Whether codex's own sandbox runs a command, as a step outside loope's sandbox would find it.

        Inside loope's sandbox codex runs with none of its own (``danger-full-access``): nothing to ask.
        """
        if sandboxed or not own_sandbox_in_use(self.extra_args()):
            return None
        return sandbox_problem(self.binary(), os.environ, workdir)

    # -- reading its output -------------------------------------------------------------------

    def new_session(self, request: AgentRequest) -> CodexSession:
        return CodexSession(model=self.model_name(request), workspace=request.workspace)

    def model_name(self, request: AgentRequest) -> str | None:
        """The model codex will use, as far as loope can tell: the spec, the args, then config.toml."""
        if self.model:
            return self.model
        from_args = _option_value(self.extra_args(), _MODEL_FLAGS) or _config_override(self.extra_args(), "model")
        if from_args:
            return from_args
        env = {**os.environ, **request.env}
        home = request.step_dir / "home" if request.isolate_home else None
        home = home or (Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else Path.home() / ".codex")
        return _configured_model(home / "config.toml")

    def on_json(self, data: dict[str, Any], session: CodexSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        if kind in ("item.started", "item.updated", "item.completed"):
            return _item(str(kind), as_dict(data.get("item")), session)
        if kind == "turn.completed":
            session.done = True
            usage = as_dict(data.get("usage"))
            # OpenAI counts cached input inside input_tokens, and reasoning inside output_tokens.
            return [AgentEvent.usage(as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")))]
        if kind == "turn.failed":
            session.done = True
            message = as_dict(data.get("error")).get("message")
            session.errors.append(_reason(str(message or session.notice or "codex reported a failed turn")))
        elif kind == "error" and isinstance(data.get("message"), str):
            session.notice = data["message"]
            if _RETRY_NOTICE.match(data["message"]):
                return [AgentEvent.say(f"codex: {one_line(data['message'])}")]
        elif kind == "turn.started":
            session.done = False
        elif kind == "thread.started" and isinstance(data.get("model"), str):
            session.model = data["model"]  # not in 0.171's events; taken if a later codex reports it
        return []

    def judge(self, proc: ProcResult, session: CodexSession) -> str | None:
        if session.errors:
            return session.errors[-1]
        if not session.done and session.notice and session.json_seen:
            # The turn never ended: the last thing codex complained about is the best reason there is.
            ended = f"was killed by {proc.signal_name}" if proc.signal_name else f"exited with {proc.describe()}"
            return f"{self.label} {ended} before its turn ended; last error: {_reason(session.notice)}"
        if not session.json_seen and proc.exit_code not in (0, None) and not proc.signal_name:
            detail = _stderr_detail(proc.stderr_tail)
            reason = f"{self.label} exited with {proc.describe()}"
            return f"{reason}: {detail}" if detail else reason
        return super().judge(proc, session)

    def cost(self, session: CodexSession) -> tuple[float, bool]:

        usd = None
        for model in (session.model, CODEX_DEFAULT_PRICE):
            usd = estimate(model, session.input_tokens, session.output_tokens, self.options) if model else None
            if usd is not None:
                break
        return (usd, True) if usd is not None else (0.0, False)


# -- one item at a time --------------------------------------------------------------------------


def _item(kind: str, item: dict[str, Any], session: CodexSession) -> list[AgentEvent]:
    item_type = item.get("type")
    item_id = str(item["id"]) if item.get("id") is not None else None
    if item_type == "agent_message" and kind == "item.completed" and isinstance(item.get("text"), str):
        return session.say(item["text"])
    if item_type == "error" and kind == "item.completed":
        return [AgentEvent.say(f"codex warning: {one_line(str(item.get('message') or ''))}")]
    if item_type not in ("command_execution", "file_change", "mcp_tool_call", "web_search"):
        return []  # reasoning (not part of the answer), todo_list, anything newer
    events = [] if item_id is not None and item_id in session.reported else _actions(item, session)
    if item_id is not None:
        session.reported.add(item_id)
    if kind == "item.completed":
        events += _outcome(item, session)
    return events


def _actions(item: dict[str, Any], session: CodexSession) -> list[AgentEvent]:
    item_type = item.get("type")
    if item_type == "command_execution":
        return [AgentEvent.act("command", _unwrap(str(item.get("command") or "")) or None)]
    if item_type == "file_change":
        changes = [as_dict(c) for c in item.get("changes") or []]
        return [
            AgentEvent.act(_CHANGE_ACTIONS.get(str(c.get("kind")), "edit"), session.relative(str(c["path"])))
            for c in changes
            if isinstance(c.get("path"), str)
        ]
    if item_type == "web_search":
        query = item.get("query")
        return [AgentEvent.act("search", query if isinstance(query, str) and query else None)]
    tool = ".".join(str(item[k]) for k in ("server", "tool") if item.get(k))
    return [AgentEvent.act("other", tool or "mcp tool")]


def _outcome(item: dict[str, Any], session: CodexSession) -> list[AgentEvent]:
    """What a finished command or file change says beyond its action: a failure, in a line."""
    status = item.get("status")
    if item.get("type") == "command_execution" and status in ("failed", "declined"):
        output = str(item.get("aggregated_output") or "")
        broken = next((ln for ln in output.splitlines() if _SANDBOX_BROKEN.search(ln)), None)
        if broken:
            session.errors.append(
                f"codex's sandbox cannot run commands here ({one_line(broken)}); allow unprivileged"
                ' user namespaces, or let the container be the sandbox: [agents.codex] args = ["-s",'
                ' "danger-full-access"]'
            )
        if status == "declined":
            return [AgentEvent.say("codex declined the command")]
        lines = [ln for ln in output.splitlines() if ln.strip()]
        last = f": {one_line(lines[-1])}" if lines else ""
        return [AgentEvent.say(f"command failed (exit {item.get('exit_code')}){last}")]
    if item.get("type") == "file_change" and status == "failed":
        paths = [session.relative(str(as_dict(c).get("path"))) for c in item.get("changes") or []]
        return [AgentEvent.say(f"codex could not change {', '.join(paths) or 'a file'}")]
    return []


# -- small helpers -------------------------------------------------------------------------------


def _own_sandbox(request: AgentRequest) -> str:
    """The ``-s`` codex gets: none of its own inside loope's sandbox, else one for the step's mode.

    Inside loope's sandbox the step is already confined (its namespaces, what it may write, a
    read-only workspace for readers); codex's bubblewrap would only nest a second one that needs
    user namespaces inside ours and, as 0.171 does under a system bubblewrap, can fail without a word.
    """
    if request.sandboxed:
        return "danger-full-access"
    return "workspace-write" if request.mode == "write" else "read-only"


def _unwrap(command: str) -> str:
    """``/bin/bash -lc 'pytest -q'`` -> ``pytest -q``: codex runs every command through a shell."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return command
    if len(parts) == 3 and os.path.basename(parts[0]) in _SHELLS and parts[1] in ("-c", "-lc"):
        return parts[2]
    return command


def _reason(message: str) -> str:
    """A failed turn's message in one line (an HTTP error's JSON body reduced to its message)."""
    text = message.strip()
    if text.startswith("{"):
        return api_error(text)
    if text.startswith("Missing environment variable"):
        return f"{one_line(text)} (the API key your codex model provider reads; set it, or log in with `codex login`)"
    return one_line(text)


def _stderr_detail(stderr: str) -> str:
    """The telling line of codex's stderr: its last ``error``, not clap's ``For more information`` line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    return one_line(errors[-1]) if errors else detail_from(stderr)


def _has_option(args: Sequence[str], names: Sequence[str]) -> bool:
    return any(a in names or any(a.startswith(f"{n}=") for n in names if n.startswith("--")) for a in args)


def _option_value(args: Sequence[str], names: Sequence[str]) -> str | None:
    """The last value given to option ``names`` (``-m X``, ``--model X``, ``--model=X``)."""
    found = None
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            found = args[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(f"{name}="):
                found = arg.split("=", 1)[1]
    return found


def _without_option(args: Sequence[str], names: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not any(n.startswith("--") and arg.startswith(f"{n}=") for n in names):
            kept.append(arg)
    return kept


def _config_override(args: Sequence[str], key: str) -> str | None:
    """The value of ``-c key=value`` in ``args`` (TOML-quoted or bare), the last one winning."""
    found = None
    for i, arg in enumerate(args):
        value = args[i + 1] if arg in ("-c", "--config") and i + 1 < len(args) else None
        if value is None and arg.startswith("--config="):
            value = arg.split("=", 1)[1]
        if value and value.split("=", 1)[0].strip() == key and "=" in value:
            found = value.split("=", 1)[1].strip().strip("\"'")
    return found or None


def _configured_model(config: Path) -> str | None:
    """The top-level ``model`` of codex's config.toml, if it names one."""
    try:
        data: Mapping[str, Any] = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    model = data.get("model")
    return model if isinstance(model, str) and model else None
