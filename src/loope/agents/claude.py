"""``claude``: Claude Code (``@anthropic-ai/claude-code``) in headless print mode.

One process per step: ``claude -p --output-format stream-json --verbose`` with the prompt on stdin.
Each stdout line is a JSON object: ``system`` (init, permission denials, API retries), ``assistant``
(one line per content block: text or a tool call), ``user`` (tool results) and, last, ``result``
with the final text, the token totals and ``total_cost_usd``. Only the ``result`` line's totals are
counted; the per-message usage on assistant lines is partial (written before the reply ends) and
serves as an estimate only when no ``result`` line ever came (a timeout, a kill, a crash).

Claude Code reports API failures with exit 1 and ``is_error: true`` on the result line while its
``subtype`` still says ``success``; ``is_error`` (or an ``error_*`` subtype) decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from loope.agents.base import Action, AdapterInfo, AgentEvent, AgentRequest
from loope.agents.jsonl import json_object, relative_path
from loope.agents.process import ProcessAgent, Session
from loope.proc import ProcResult
from loope.text import amount as as_float
from loope.text import count as as_int
from loope.text import last_line

# Tool name -> (action, the input field naming its target).
_TOOLS: dict[str, tuple[Action, str]] = {
    "Edit": ("edit", "file_path"),
    "MultiEdit": ("edit", "file_path"),
    "NotebookEdit": ("edit", "notebook_path"),
    "Write": ("write", "file_path"),
    "Read": ("read", "file_path"),
    "NotebookRead": ("read", "notebook_path"),
    "Bash": ("command", "command"),
    "Grep": ("search", "pattern"),
    "Glob": ("search", "pattern"),
    "WebSearch": ("search", "query"),
}
_SUBTYPE_ERRORS = {
    "error_max_budget_usd": "stopped by its spending cap (--max-budget-usd, the run's remaining --max-cost)",
    "error_max_turns": "stopped at its turn limit (--max-turns)",
}
# claude rejects a cap of 0; the engine never starts a step with nothing left, this is a floor for rounding.
_MIN_BUDGET_USD = 1e-6


@dataclass
class ClaudeSession(Session):
    """What one claude process has printed so far, beyond what every adapter tracks."""

    workspace: Path | None = None
    cwd: str | None = None
    """The working directory claude reports in its init line."""
    result_seen: bool = False
    message_usage: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per API message: (input incl. cache, output) tokens from assistant lines, for the no-result fallback."""
    noise: list[str] = field(default_factory=list)
    """Lines that were not JSON objects."""

    def relative(self, path: str) -> str:
        """``path`` relative to the workspace when it lies inside it (claude reports absolute paths)."""
        return relative_path(path, self.cwd, str(self.workspace) if self.workspace else None)


class ClaudeAgent(ProcessAgent):
    name = "claude"
    home_env = ("CLAUDE_CONFIG_DIR",)
    info: ClassVar[AdapterInfo] = AdapterInfo(
        name="claude",
        binary="claude",
        install="npm install -g @anthropic-ai/claude-code",
        read_only=(
            "enforced: read roles run with --permission-mode plan (Claude Code refuses edits and"
            " commands that are not read-only); loope also undoes any change a reader leaves"
        ),
        cost_source="reported (total_cost_usd)",
        summary="Claude Code in print mode; stream-json events, reported cost, --max-budget-usd per step",
        auth_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        login_files=("$CLAUDE_CONFIG_DIR/.credentials.json", ".claude/.credentials.json", ".claude.json"),
    )

    # -- the command --------------------------------------------------------------------------

    def argv(self, request: AgentRequest) -> list[str]:
        argv = [self.binary(), "-p", "--output-format", "stream-json", "--verbose"]
        if request.mode == "write":
            # acceptEdits alone denies every Bash call in print mode; --allowedTools is variadic,
            # so it goes before the other flags where it cannot swallow anything.
            argv += ["--allowedTools", "Bash", "--permission-mode", "acceptEdits"]
        else:
            argv += ["--permission-mode", "plan"]
        if self.model:
            argv += ["--model", self.model]
        if request.max_budget_usd is not None:
            argv += ["--max-budget-usd", f"{max(request.max_budget_usd, _MIN_BUDGET_USD):.6g}"]
        return argv + self.extra_args()

    def environment(self, request: AgentRequest) -> dict[str, str]:
        env = super().environment(request)
        # Only model calls: no preconnects, no direct api.anthropic.com traffic (bootstrap, telemetry).
        env.setdefault("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        env.setdefault("DISABLE_AUTOUPDATER", "1")
        return env

    # -- reading its output -------------------------------------------------------------------

    def new_session(self, request: AgentRequest) -> Session:
        return ClaudeSession(model=self.model, workspace=request.workspace)

    def parse_line(self, line: str, session: Session) -> Iterable[AgentEvent]:
        assert isinstance(session, ClaudeSession)
        data = json_object(line)
        if data is None:
            session.noise.append(line)
            return ()
        kind = data.get("type")
        if kind == "assistant":
            return _assistant(data, session)
        if kind == "result":
            return _result(data, session)
        if kind == "system":
            return _system(data, session)
        return ()

    def finish(self, proc: ProcResult, session: Session) -> Iterable[AgentEvent]:
        assert isinstance(session, ClaudeSession)
        if session.result_seen or not session.message_usage:
            return ()
        # No totals: count what the assistant lines showed (their output counts are partial), priced as an estimate.
        tokens_in = sum(i for i, _ in session.message_usage.values())
        tokens_out = sum(o for _, o in session.message_usage.values())
        return (AgentEvent.usage(tokens_in, tokens_out),)

    def judge(self, proc: ProcResult, session: Session) -> str | None:
        assert isinstance(session, ClaudeSession)
        if session.errors:
            return session.errors[-1]
        if session.result_seen and proc.exit_code == 0:
            return None
        if proc.signal_name:
            killed = f"{self.label} was killed by {proc.signal_name}"
            return f"{killed} (last action: {session.last_action})" if session.last_action else killed
        if session.result_seen:
            return super().judge(proc, session)
        ended = f"{self.label} exited" if proc.exit_code == 0 else f"{self.label} exited with {proc.describe()}"
        stderr = last_line(proc.stderr_tail)
        if session.noise and session.cwd is None:
            shown = session.noise[0].strip()[:200]
            reason = (
                f"{ended} without printing Claude Code's stream-json (first line: {shown!r});"
                f" check that {self.binary()} is Claude Code"
            )
        else:
            reason = f"{ended} before its result line"
        return f"{reason}: {stderr}" if stderr else reason


# -- one line at a time ------------------------------------------------------------------------


def _assistant(data: Mapping[str, Any], session: ClaudeSession) -> list[AgentEvent]:
    message = data.get("message")
    if not isinstance(message, dict):
        return []
    _note_usage(message, session)
    events: list[AgentEvent] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            text = str(block.get("text") or "").strip()
            if text:
                session.texts.append(text)
                events.append(AgentEvent.say(text))
        elif block.get("type") == "tool_use":
            events.append(_tool_event(str(block.get("name") or "tool"), block.get("input"), session))
    return events


def _tool_event(name: str, tool_input: object, session: ClaudeSession) -> AgentEvent:
    args = tool_input if isinstance(tool_input, dict) else {}
    action, key = _TOOLS.get(name, ("other", ""))
    value = args.get(key) if key else None
    if action == "other" or not isinstance(value, str) or not value:
        return AgentEvent.act(action, name if action == "other" else None)
    if action in ("edit", "write", "read"):
        value = session.relative(value)
    return AgentEvent.act(action, value)


def _note_usage(message: Mapping[str, Any], session: ClaudeSession) -> None:
    usage = message.get("usage")
    msg_id = message.get("id")
    if not isinstance(usage, dict) or not isinstance(msg_id, str) or message.get("model") == "<synthetic>":
        return
    tokens_in = as_int(usage.get("input_tokens"))
    tokens_in += as_int(usage.get("cache_creation_input_tokens")) + as_int(usage.get("cache_read_input_tokens"))
    tokens_out = as_int(usage.get("output_tokens"))
    # One line per content block, each repeating the message's usage: keep the largest, not the sum.
    seen_in, seen_out = session.message_usage.get(msg_id, (0, 0))
    session.message_usage[msg_id] = (max(seen_in, tokens_in), max(seen_out, tokens_out))


def _result(data: Mapping[str, Any], session: ClaudeSession) -> list[AgentEvent]:
    session.result_seen = True
    events: list[AgentEvent] = []
    text = data.get("result")
    if isinstance(text, str):
        session.final = text.strip()
        if session.final and (not session.texts or session.texts[-1] != session.final):
            events.append(AgentEvent.say(session.final))
    error = _result_error(data)
    if error:
        session.errors.append(error)
    session.budget_exhausted = data.get("subtype") == "error_max_budget_usd"
    tokens_in, tokens_out = _result_tokens(data)
    cost = data.get("total_cost_usd")
    events.append(AgentEvent.usage(tokens_in, tokens_out, as_float(cost)))
    return events


def _result_tokens(data: Mapping[str, Any]) -> tuple[int, int]:
    """(input incl. cache, output) tokens of the whole run.

    ``modelUsage`` holds what was billed, and so matches ``total_cost_usd``: ``usage`` also counts
    failed stream attempts, and is all zeros when the spending cap stopped the run.
    """
    per_model = data.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        models = [m for m in per_model.values() if isinstance(m, dict)]
        tokens_in = sum(
            as_int(m.get("inputTokens"))
            + as_int(m.get("cacheReadInputTokens"))
            + as_int(m.get("cacheCreationInputTokens"))
            for m in models
        )
        return tokens_in, sum(as_int(m.get("outputTokens")) for m in models)
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    tokens_in = as_int(usage.get("input_tokens"))
    tokens_in += as_int(usage.get("cache_creation_input_tokens")) + as_int(usage.get("cache_read_input_tokens"))
    return tokens_in, as_int(usage.get("output_tokens"))


def _result_error(data: Mapping[str, Any]) -> str | None:
    """Why the run failed, from a result line; None when it succeeded."""
    subtype = str(data.get("subtype") or "")
    if not (data.get("is_error") is True or subtype.startswith("error")):
        return None
    errors = "; ".join(str(e) for e in data.get("errors") or [] if e)
    if subtype in _SUBTYPE_ERRORS:
        return f"{_SUBTYPE_ERRORS[subtype]}: {errors}" if errors else _SUBTYPE_ERRORS[subtype]
    text = data.get("result")
    detail = (text.strip() if isinstance(text, str) else "") or errors or subtype or "claude reported an error"
    status, kind = data.get("api_error_status"), data.get("api_error_type") or data.get("api_error")
    extras = [str(v) for v in (status, kind) if isinstance(v, int | str) and v and str(v) not in detail]
    return f"{detail} ({' '.join(extras)})" if extras else detail


def _system(data: Mapping[str, Any], session: ClaudeSession) -> list[AgentEvent]:
    subtype = data.get("subtype")
    if subtype == "init":
        if isinstance(data.get("model"), str):
            session.model = data["model"]
        if isinstance(data.get("cwd"), str):
            session.cwd = data["cwd"]
        return []
    if subtype == "permission_denied":
        tool = data.get("tool_name") or "a tool"
        why = data.get("message") or data.get("decision_reason") or "permission denied"
        return [AgentEvent.say(f"claude was refused {tool}: {why}")]
    if subtype == "api_retry":
        status = data.get("error_status") or data.get("error") or "error"
        return [AgentEvent.say(f"API error {status}; retry {data.get('attempt')} of {data.get('max_retries')}")]
    return []


# -- small helpers -----------------------------------------------------------------------------
