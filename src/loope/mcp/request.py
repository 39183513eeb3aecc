"""The MCP tools' inputs: one pydantic model per tool, their schemas, and their errors as one clear line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from loope.errors import LoopeError

# Phantom's defaults for a loop started by another agent: longer than the CLI's 3 iterations, capped in USD.
DEFAULT_MAX_ITERATIONS = 20
DEFAULT_MAX_COST_USD = 5.0
WAIT_MAX_S = 300
"""The longest one ``loope_status`` call waits: long enough to cover an agent step, short of clients' timeouts."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    workspace: str | None = Field(default=None, min_length=1, max_length=4096)
    """The project directory (default: the directory this server serves)."""


class StartArgs(_Args):
    """``loope_start``: a new loop, run in the background."""

    goal: str = Field(min_length=1, max_length=10_000)
    """What the agents must achieve, with how to tell it is done."""
    verify_command: str | None = Field(default=None, min_length=1, max_length=10_000)
    """The gate: a shell command run in the loop's workspace; exit 0 passes. Give one: the agent cannot fool it."""
    implementer: str | None = Field(default=None, min_length=1, max_length=1000)
    """The writing agent: claude, codex, claude:opus, claude-acp, exec:<command> (default: loope.toml, else claude)."""
    candidates: int | None = Field(default=None, ge=1, le=16)
    """Candidates per iteration: implementers racing in forks of the kept state, the best one kept."""
    implementers: list[str] | None = Field(default=None, min_length=2, max_length=8)
    """Different writing agents that race each iteration (instead of one implementer)."""
    reviewers: list[str] | None = Field(default=None, max_length=8)
    """Read-only reviewing agents that must say VERDICT: PASS; none unless listed here."""
    max_iterations: int = Field(default=DEFAULT_MAX_ITERATIONS, ge=1, le=200)
    """Iterations (fresh agent sessions) at most; the default yields to max_iters in loope.toml."""
    max_cost_usd: float = Field(default=DEFAULT_MAX_COST_USD, gt=0, le=50)
    """USD the loop may spend; the default yields to max_cost in loope.toml."""
    max_tick_duration_minutes: int | None = Field(default=None, ge=1, le=60)
    """Minutes one agent step may take before it is killed (default: loope.toml's timeout, else 30)."""
    metric_command: str | None = Field(default=None, min_length=1, max_length=10_000)
    """A command whose last printed number is the score (metric search); needs direction."""
    direction: Literal["lower", "higher"] | None = None
    """Whether a lower or a higher metric score is better."""
    critic: str | None = Field(default=None, min_length=1, max_length=1000)
    """A read-only agent that critiques progress every checkpoint_interval iterations."""
    checkpoint_interval: int | None = Field(default=None, ge=0, le=200)
    """Have the critic critique progress after every N-th iteration (0: never)."""
    success_command: str | None = Field(default=None, min_length=1, max_length=10_000)
    """A command run after each iteration with a sanitized environment; exit 0 means done."""
    notify: list[str] | None = Field(default=None, max_length=8)
    """Progress notifications: slack:CHANNEL, webhook:URL or cmd:COMMAND."""

    @model_validator(mode="after")
    def _consistent(self) -> StartArgs:
        if not self.goal.strip():
            raise ValueError("goal is empty; say what the agents should achieve")
        if self.metric_command and not self.direction:
            raise ValueError("direction ('lower' or 'higher') is required with metric_command")
        return self


class _LoopArgs(_Args):
    loop_id: str = Field(min_length=1, max_length=200)
    """The loop's id, or a unique prefix of it such as 0007 (loope_list gives them)."""


class StatusArgs(_LoopArgs):
    """``loope_status``: where a loop is, optionally after waiting for it to move on."""

    wait_s: float = Field(default=0, ge=0, le=WAIT_MAX_S)
    """Wait up to this many seconds, returning as soon as the loop finishes an iteration or ends."""


class StopArgs(_LoopArgs):
    """``loope_stop``: ask a loop to stop."""

    now: bool = False
    """Also kill the agent step in flight instead of letting it finish."""


class ListArgs(_Args):
    """``loope_list``: the project's loops."""

    all: bool = False
    """Every loop (the 50 most recent), not only the running and recently finished ones."""


class ShowArgs(_LoopArgs):
    """``loope_show``: a loop's report."""

    diff: bool = False
    """Include the loop's cumulative diff."""


class ApplyArgs(_LoopArgs):
    """``loope_apply``: land a finished loop's changes in its project."""

    delete: bool = False
    """Also delete the files the loop deleted."""
    force: bool = False
    """Overwrite files changed in the project since the loop started."""
    dry_run: bool = False
    """Return the plan; write nothing."""


class _Plain(GenerateJsonSchema):
    """Schemas a model reads easily: no titles, and an optional ``X | None`` field shown as plain ``X``."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        found = super().default_schema(schema)
        if found.get("default", 0) is None:
            del found["default"]  # "default: null" says nothing a model needs
        return found


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's JSON schema, every field described."""
    schema = model.model_json_schema(schema_generator=_Plain)
    schema.pop("title", None)
    schema.pop("description", None)  # the tool's own description says it
    return schema


Args = TypeVar("Args", bound=BaseModel)


def parse(tool: str, model: type[Args], arguments: Mapping[str, Any] | None) -> Args:
    """The arguments as ``model``; a LoopeError naming the field and its limit otherwise."""
    try:
        return model.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        raise LoopeError(describe(exc.errors()[0], tool, model)) from None


def describe(error: Mapping[str, Any], tool: str, model: type[BaseModel]) -> str:
    """One line for one pydantic error, e.g. ``max_iterations must be at most 200 (got 500)``."""
    field = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
    kind = error["type"]
    ctx = error.get("ctx") or {}
    given = error.get("input")
    if kind == "extra_forbidden":
        return f"unknown field {field!r}; {tool} takes: {', '.join(model.model_fields)}"
    if kind == "missing":
        return f"{field} is required" + ("; loope_list gives the ids" if field == "loop_id" else "")
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
