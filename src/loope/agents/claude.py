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

import os
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from loope.agents.base import AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import StreamAgent, StreamSession, ToolTable, assistant_blocks
from loope.agents.setback import Setback, limit, parse_reset, transient
from loope.proc import ProcResult
from loope.text import amount as as_float
from loope.text import count as as_int

_TOOLS: ToolTable = {
    "Edit": ("edit", ("file_path",)),
    "MultiEdit": ("edit", ("file_path",)),
    "NotebookEdit": ("edit", ("notebook_path",)),
    "Write": ("write", ("file_path",)),
    "Read": ("read", ("file_path",)),
    "NotebookRead": ("read", ("notebook_path",)),
    "Bash": ("command", ("command",)),
    "Grep": ("search", ("pattern",)),
    "Glob": ("search", ("pattern",)),
    "WebSearch": ("search", ("query",)),
}
_SUBTYPE_ERRORS = {
    "error_max_budget_usd": "stopped by its spending cap (--max-budget-usd, the run's remaining --max-cost)",
    "error_max_turns": "stopped at its turn limit (--max-turns)",
}
_PROJECT_CONFIG = (
    "mcpServers",
    "enabledMcpjsonServers",
    "enableAllProjectMcpServers",
    "allowedTools",
    "hasTrustDialogAccepted",
)
"""What ``~/.claude.json`` holds for each project that is configuration, not state: put back after each step."""
# claude rejects a cap of 0; the engine never starts a step with nothing left, this is a floor for rounding.
_MIN_BUDGET_USD = 1e-6


class ClaudeAgent(StreamAgent[StreamSession]):
    session_type = StreamSession
    usage_from_lines = "without a result"  # then priced as an estimate
    name = "claude"
    product = "Claude Code"
    prompt_on_stdin = True
    home_env = ("CLAUDE_CONFIG_DIR",)
    home_state = (".claude", ".claude.json", ".cache/claude")
    session_state = ("projects", "todos", "shell-snapshots")
    home_config = ("settings.json", "settings.local.json", "CLAUDE.md", "commands", "agents", "skills")
    home_config_keys = (  # MCP servers of every session, and what each project allows and trusts
        (".claude.json", ("mcpServers", *(f"projects.*.{key}" for key in _PROJECT_CONFIG))),
    )
    info: ClassVar[AdapterInfo] = INFO["claude"]

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
        return {**sandbox_env(request), **env}

    # -- reading its output -------------------------------------------------------------------

    def on_json(self, data: dict[str, Any], session: StreamSession) -> Iterable[AgentEvent]:
        kind = data.get("type")
        if kind == "assistant":
            return _assistant(data, session)
        if kind == "result":
            return _result(data, session)
        if kind == "system":
            return _system(data, session)
        if kind == "rate_limit_event":
            return _rate_limit(data, session)
        return ()

    def setback(self, error: str, proc: ProcResult, session: StreamSession) -> Setback | None:
        """Claude Code's own verdict on its failure (result line, rate-limit event) before its text."""
        if session.setback is not None or session.errors:
            return session.setback
        return super().setback(error, proc, session)


def sandbox_env(request: AgentRequest) -> dict[str, str]:
    """``IS_SANDBOX=1`` for a step run as root inside loope's sandbox, else nothing.

    Claude Code refuses its bypass modes (``--dangerously-skip-permissions``, and the bundled one
    claude-agent-acp starts) as root unless it is told it runs in a sandbox; this step does.
    """
    return {"IS_SANDBOX": "1"} if request.sandboxed and os.geteuid() == 0 else {}


# -- one line at a time ------------------------------------------------------------------------


def _assistant(data: Mapping[str, Any], session: StreamSession) -> list[AgentEvent]:
    message = data.get("message")
    if not isinstance(message, dict):
        return []
    usage = message.get("usage")
    msg_id = message.get("id")
    if isinstance(usage, dict) and isinstance(msg_id, str) and message.get("model") != "<synthetic>":
        # One line per content block, each repeating the message's usage: it counts once.
        tokens_in = as_int(usage.get("input_tokens"))
        tokens_in += as_int(usage.get("cache_creation_input_tokens")) + as_int(usage.get("cache_read_input_tokens"))
        session.note_usage(msg_id, tokens_in, as_int(usage.get("output_tokens")))
    return assistant_blocks(message, session, _TOOLS)


def _result(data: Mapping[str, Any], session: StreamSession) -> list[AgentEvent]:
    session.done = True
    events: list[AgentEvent] = []
    text = data.get("result")
    if isinstance(text, str):
        session.final = text.strip()
        if session.final and session.texts.last != session.final:
            events.append(AgentEvent.say(session.final))
    error = _result_error(data)
    if error:
        session.errors.append(error)
        session.setback = _setback(data, error, session.setback)
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


def _system(data: Mapping[str, Any], session: StreamSession) -> list[AgentEvent]:
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


def _rate_limit(data: Mapping[str, Any], session: StreamSession) -> list[AgentEvent]:
    """A ``rate_limit_event``: when refused, its ``resetsAt`` (exact; the printed "resets 7:40am" is rounded)."""
    info = data.get("rate_limit_info")
    if not isinstance(info, dict) or info.get("status") != "rejected":
        return []
    reset = parse_reset(info.get("resetsAt"))
    session.setback = limit(f"claude: {info.get('rateLimitType') or 'usage'} limit reached", reset)
    return []


# Claude Code's ``api_error`` values that say the provider could not be reached, not that the request was wrong.
_UNREACHABLE = frozenset({"connection_failed", "connection_error", "timeout", "request_timeout", "stream_error"})


def _setback(data: Mapping[str, Any], error: str, seen: Setback | None) -> Setback | None:
    """A failed result as a setback: a usage limit (with its reset), or an error Claude Code gave up retrying.

    Claude Code retries 429/5xx/529 and dropped connections itself (``CLAUDE_CODE_MAX_RETRIES``,
    each shown as a ``system``/``api_retry`` line) and keeps its conversation while it does; a
    result that still carries such an error means its retries ran out, and loope's own, slower
    retries take over with a fresh session.
    """
    api_error, status = data.get("api_error"), data.get("api_error_status")
    if api_error == "usage_limit_reached" or (seen is not None and seen.kind == "limit"):
        params = data.get("api_error_params")
        info = params.get("rate_limit_info") if isinstance(params, dict) else None
        reset = parse_reset(info.get("resetsAt")) if isinstance(info, dict) else None
        return limit(error, reset or (seen.reset_at if seen else None))
    if status == 429 or (isinstance(status, int) and status >= 500) or api_error in _UNREACHABLE:
        return transient(error)
    return None
