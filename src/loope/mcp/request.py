"""The ``loop`` tool's input: one pydantic model, and its errors as one clear line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from loope.enums import Direction
from loope.errors import LoopeError

Action = Literal["start", "status", "stop", "list", "show", "apply"]
ACTIONS: tuple[str, ...] = get_args(Action)

# Phantom's defaults for a loop started by another agent: longer than the CLI's 3 iterations, capped in USD.
DEFAULT_MAX_ITERATIONS = 20
DEFAULT_MAX_COST_USD = 5.0


class LoopRequest(BaseModel):
    """One call of the ``loop`` tool. Which fields matter depends on ``action``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    action: Action
    """What to do: start a loop, show its status, stop it, list loops, show a finished loop, apply its changes."""

    # -- start ------------------------------------------------------------------------------------
    goal: str | None = Field(default=None, min_length=1, max_length=10_000)
    """start: what the agents must achieve, with how to tell it is done."""
    workspace: str | None = Field(default=None, min_length=1, max_length=4096)
    """The project directory the loop runs in (default: the directory this server serves); every action."""
    max_iterations: int = Field(default=DEFAULT_MAX_ITERATIONS, ge=1, le=200)
    """start: iterations (fresh agent sessions) at most; the default yields to max_iters in loope.toml."""
    max_cost_usd: float = Field(default=DEFAULT_MAX_COST_USD, gt=0, le=50)
    """start: USD the loop may spend; the default yields to max_cost in loope.toml."""
    max_tick_duration_minutes: int | None = Field(default=None, ge=1, le=60)
    """start: minutes one agent step may take before it is killed (default: loope.toml's timeout, else 30)."""
    checkpoint_interval: int | None = Field(default=None, ge=0, le=200)
    """start: have the critic critique progress after every N-th iteration (0: never)."""
    success_command: str | None = Field(default=None, min_length=1, max_length=10_000)
    """start: a command run after each iteration with a sanitized environment; exit 0 means done."""
    verify_command: str | None = Field(default=None, min_length=1, max_length=10_000)
    """start: the gate, a shell command run in the loop's workspace; exit 0 passes."""
    metric_command: str | None = Field(default=None, min_length=1, max_length=10_000)
    """start: a command whose last printed number is the score (metric search); needs direction."""
    direction: Direction | None = None
    """start: whether a lower or a higher metric score is better."""
    implementer: str | None = Field(default=None, min_length=1, max_length=1000)
    """start: the writing agent: claude, codex, claude:opus, exec:<command> (default: loope.toml, else claude)."""
    reviewers: list[str] | None = Field(default=None, max_length=8)
    """start: read-only reviewing agents that must say VERDICT: PASS; none unless listed here."""
    critic: str | None = Field(default=None, min_length=1, max_length=1000)
    """start: a read-only agent that critiques progress every checkpoint_interval iterations."""
    notify: list[str] | None = Field(default=None, max_length=8)
    """start: progress notifications: slack:CHANNEL, webhook:URL or cmd:COMMAND."""

    # -- the other actions ------------------------------------------------------------------------
    loop_id: str | None = Field(default=None, min_length=1, max_length=200)
    """status, stop, show, apply: the loop's id, or a unique prefix of it such as 0007."""
    now: bool = False
    """stop: also kill the agent step in flight instead of waiting for it to finish."""
    include_finished: bool = False
    """list: also list finished loops (the 50 most recent), not only running ones."""
    diff: bool = False
    """show: include the loop's cumulative diff."""
    delete: bool = False
    """apply: also delete the files the loop deleted."""
    force: bool = False
    """apply: overwrite files changed in the workdir since the loop started."""
    dry_run: bool = False
    """apply: return the plan; write nothing."""

    @model_validator(mode="after")
    def _needs(self) -> LoopRequest:
        if self.action == "start" and self.goal is None:
            raise ValueError("goal is required to start a loop")
        if self.action in ("status", "stop", "show", "apply") and self.loop_id is None:
            raise ValueError(f"loop_id is required for action {self.action!r}; action 'list' gives the ids")
        if self.metric_command and not self.direction:
            raise ValueError("direction ('lower' or 'higher') is required with metric_command")
        if self.goal is not None and not self.goal.strip():
            raise ValueError("goal is empty; say what the agents should achieve")
        return self


def input_schema() -> dict[str, Any]:
    """The tool's JSON schema, every field described."""
    return LoopRequest.model_json_schema()


def parse(arguments: Mapping[str, Any] | None) -> LoopRequest:
    """The request in ``arguments``; a LoopeError naming the field and its limit otherwise."""
    try:
        return LoopRequest.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        raise LoopeError(describe(exc.errors()[0])) from None


def describe(error: Mapping[str, Any]) -> str:
    """One line for one pydantic error, e.g. ``max_iterations must be at most 200 (got 500)``."""
    field = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
    kind = error["type"]
    ctx = error.get("ctx") or {}
    given = error.get("input")
    if kind == "extra_forbidden":
        known = ", ".join(LoopRequest.model_fields)
        return f"unknown field {field!r}; the loop tool takes: {known}"
    if kind == "missing":
        return f"{field} is required"
    if kind == "literal_error" and field == "action":
        return f"action must be one of {', '.join(ACTIONS)} (got {given!r})"
    if kind in ("literal_error", "enum"):
        return f"{field} must be {ctx.get('expected')} (got {given!r})"
    limits = {
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("more than", "gt"),
    }
    if kind in limits:
        words, key = limits[kind]
        limit = ctx.get(key)
        shown = f"{limit:g}" if isinstance(limit, float) else str(limit)
        return f"{field} must be {words} {shown} (got {given!r})"
    if kind == "string_too_long":
        return f"{field} must be at most {ctx.get('max_length')} characters (got {len(str(given))})"
    if kind == "string_too_short":
        return f"{field} must not be empty"
    if kind == "too_long":
        return f"{field} takes at most {ctx.get('max_length')} items (got {ctx.get('actual_length')})"
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    if kind == "value_error":
        return message
    shown = "" if isinstance(given, dict | list) else f" (got {given!r})"
    return f"{field}: {message}{shown}"
