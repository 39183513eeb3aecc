"""LoopSpec: every knob of a run, validated, layered from defaults < loope.toml < flags."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from loope.config import IMPLEMENTER, REVIEWERS, SANDBOX, load_config
from loope.enums import Direction, SandboxMode, Switch, WorkspaceMode
from loope.errors import LoopeError, clip
from loope.text import parse_duration
from loope.text import parse_min_improvement as parse_min_improvement  # noqa: PLC0414 - re-exported for its importers

GOAL_LIMIT = 100_000
MAX_CANDIDATES = 16

PRESETS: dict[str, dict[str, Any]] = {
    "claude-codex": {"implementer": "claude", "reviewers": ["codex"]},
    "codex-claude": {"implementer": "codex", "reviewers": ["claude"]},
    "claude-solo": {"implementer": "claude", "reviewers": []},
    "dual-review": {"implementer": "claude", "reviewers": ["claude", "codex"]},
    "opencode-codex": {"implementer": "opencode", "reviewers": ["codex"]},
    "gemini-claude": {"implementer": "gemini", "reviewers": ["claude"]},
}


class AgentOptions(BaseModel):
    """Per-adapter settings from loope.toml's ``[agents.<name>]``."""

    model_config = ConfigDict(extra="forbid")

    args: list[str] = Field(default_factory=list)
    """Extra arguments added to the agent CLI's command line."""
    bin: str | None = None
    """The program to run instead of the adapter's default binary."""


class LoopSpec(BaseModel):
    """Everything one run needs; saved as spec.json in the run dir, the single source of the gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    goal: str = Field(min_length=1)
    """What the agents must achieve."""
    workdir: Path
    """The project directory the run starts from."""
    workspace: WorkspaceMode | None = None
    """How agents get a tree to edit: a git worktree (default in git), a copy, the tree itself, or an overlay."""
    branch: str | None = None
    """The run branch in worktree mode (default ``loope/<run-id>``)."""
    keep_workspace: bool = False
    """Keep a finished run's worktree (by default it is removed: the result is on the run branch)."""

    implementer: str = IMPLEMENTER
    """The agent that writes the change."""
    race: list[str] = Field(default_factory=list)
    """Different implementers racing each iteration (``--implementer`` given more than once)."""
    candidates: int = Field(default=1, ge=1, le=MAX_CANDIDATES)
    """Candidates per iteration (per agent of a race): forks of the kept state, the best is kept."""
    jobs: int | None = Field(default=None, ge=1, le=64)
    """The candidates' gates and metrics that run at once at most (default: the number of CPUs)."""
    review_candidates: int = Field(default=1, ge=1, le=MAX_CANDIDATES)
    """Passing candidates the reviewers look at, best first, while they block."""
    diversify: bool = False
    """Tell each candidate it is one of N and to try an approach unlike the ideas tried before."""
    reviewers: list[str] = Field(default_factory=lambda: list(REVIEWERS))
    """Read-only agents that return VERDICT: PASS or BLOCK; run in parallel after the gate passed."""
    design: bool = False
    """Run a designer once before iteration 1 to write a contract with acceptance criteria."""
    designer: str | None = None
    """The designer agent (default: the implementer)."""
    verifier: str | None = None
    """An agent verifier run after the gate command; its verdict gates convergence."""
    critic: str | None = None
    """A read-only agent that critiques progress every ``checkpoint_every`` iterations."""
    checkpoint_every: int = Field(default=0, ge=0, le=200)
    """Critique after every N-th iteration (0: never)."""

    verify_cmd: str | None = None
    """The gate: a shell command run in the workspace; exit 0 passes."""
    metric_cmd: str | None = None
    """A shell command whose last printed number is the score (metric mode)."""
    direction: Direction | None = None
    """Whether a lower or a higher score is better."""
    target: float | None = None
    """Converge once the best score reaches this value (a finite number)."""
    metric_repeat: int = Field(default=1, ge=1, le=100)
    """Run the metric K times and take the median."""
    patience: int | None = Field(default=None, ge=1)
    """Stop as stalled after N attempts in a row without improvement (metric mode)."""
    min_improvement: str | None = None
    """The smallest change that counts as an improvement: absolute (0.5) or relative (2%)."""

    max_iters: int = Field(default=3, ge=1)
    """Iterations at most (1 is a single pass)."""
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """USD the run may spend."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Tokens (input + output) the run may use."""
    max_time: float | None = Field(default=None, gt=0)
    """Seconds of wall time the run may take."""
    timeout: float = Field(default=1800.0, gt=0)
    """Seconds one step may take before its process group is killed."""
    stall_after: int = Field(default=2, ge=1)
    """Stop as stalled after N iterations in a row without progress."""
    retries: int = Field(default=3, ge=0, le=20)
    """Times a step that failed transiently (HTTP 429/5xx/529, a dropped connection) is tried again."""
    retry_delay: float = Field(default=15.0, gt=0, le=3600)
    """Seconds before the first retry; each next one waits twice as long (with jitter), at most 10 minutes."""
    baseline: bool = True
    """Run the gate once on the starting tree before iteration 1 (``--no-baseline`` skips it)."""
    no_wait: bool = False
    """Stop as ``usage_limited`` when an agent hits its plan's usage limit, instead of waiting for the reset."""

    editable: list[str] = Field(default_factory=list)
    """Globs the agent may change (empty: everything not protected)."""
    protect: list[str] = Field(default_factory=list)
    """Globs the agent may not change; changes are undone and fed back."""
    success_cmd: str | None = None
    """A command run after each iteration with a sanitized environment; exit 0 means done."""
    success_timeout: float = Field(default=300.0, gt=0)
    """Seconds the success command may take."""
    notify: list[str] = Field(default_factory=list)
    """Notification targets: ``slack:CHANNEL``, ``webhook:URL``, ``cmd:COMMAND``."""

    dry_run: bool = False
    """Check the real set-up, then use the stub for every agent and skip commands."""
    dry_run_agents: list[str] = Field(default_factory=list)
    """In a dry run: the real agents the stubs stand in for (checked before the run starts)."""
    isolate_home: bool = False
    """Give each agent step a private config dir (CLAUDE_CONFIG_DIR, CODEX_HOME, ...)."""
    sandbox: SandboxMode = SandboxMode(SANDBOX)
    """Run every agent step and check under bubblewrap: auto (where it works), on (or refuse), off."""
    sandbox_network: Switch = Switch.ON
    """Whether gate, metric and success commands reach the network inside the sandbox (agents always do)."""
    sandbox_writable: list[str] = Field(default_factory=list)
    """Directories every sandboxed step may also write (a build cache such as ``~/.cache/go-build``)."""
    agents: dict[str, AgentOptions] = Field(default_factory=dict)
    """Per-adapter options from loope.toml."""
    prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """USD per million (input, output) tokens, overriding the built-in table for estimates."""

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the goal is empty; say what the agents should achieve")
        if len(value) > GOAL_LIMIT:
            raise ValueError(
                f"the goal has {len(value)} characters, more than {GOAL_LIMIT}; put the details in a file"
                " in the project and name it in a shorter goal"
            )
        return value.strip()

    @field_validator("target")
    @classmethod
    def _finite_target(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number; give --target the score to reach, such as 0.95")
        return value

    @field_validator("min_improvement")
    @classmethod
    def _min_improvement(cls, value: str | None) -> str | None:
        if value is not None:
            parse_min_improvement(value)
        return value

    @field_validator("verify_cmd", "metric_cmd", "success_cmd")
    @classmethod
    def _command_not_blank(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not value.strip():
            flag = _flag(info.field_name or "")
            raise ValueError(f"the command is empty; give {flag} a command, or leave {flag} out")
        return value

    @field_validator("editable", "protect")
    @classmethod
    def _globs(cls, value: list[str], info: ValidationInfo) -> list[str]:
        import pathspec

        flag = _flag(info.field_name or "")
        for glob in value:
            if not glob.strip():
                raise ValueError(f"an empty glob matches nothing; give {flag} a pattern such as 'src/**'")
            try:
                pathspec.GitIgnoreSpec.from_lines([glob])
            except ValueError:  # pathspec's GitIgnorePatternError
                raise ValueError(
                    f"{glob!r} is not a valid glob (a trailing backslash, or a bare '!'?);"
                    f" fix it, e.g. {flag} 'src/**' or {flag} '*.py'"
                ) from None
        return value

    @field_validator("sandbox_writable")
    @classmethod
    def _writable_dirs(cls, value: list[str], info: ValidationInfo) -> list[str]:
        from loope.sandbox.layout import writable_dirs

        return writable_dirs(value, info.data.get("workdir"))

    @model_validator(mode="after")
    def _metric_settings(self) -> LoopSpec:
        if self.metric_cmd and not self.direction:
            raise ValueError("metric mode needs --direction lower or --direction higher")
        if self.metric_cmd and not self.editable:
            # A score is only as honest as what it measures: everything outside the editable globs
            # (the metric script, its modules, the tests) must be out of the agent's reach.
            raise ValueError(
                "metric mode needs --editable GLOB naming the files the agent may change"
                " (everything else, the metric script included, is protected)"
            )
        if not self.metric_cmd:
            # Values, not model_fields_set: a spec read back from spec.json has every field set.
            given = [name for name in _METRIC_ONLY if getattr(self, name) != type(self).model_fields[name].default]
            if given:
                flags = ", ".join(_flag(name) for name in given)
                raise ValueError(f"{flags} only applies to a metric search; add --metric-cmd CMD, or drop {flags}")
        if self.checkpoint_every and not self.critic:
            raise ValueError(
                "--checkpoint-every needs a critic to run; add --critic A (e.g. --critic claude),"
                " or drop --checkpoint-every"
            )
        return self

    @model_validator(mode="after")
    def _candidate_count(self) -> LoopSpec:
        count = len(self.candidate_agents)
        if count > MAX_CANDIDATES:
            raise ValueError(
                f"{count} candidates per iteration is more than {MAX_CANDIDATES};"
                " give fewer --implementer or a smaller --candidates"
            )
        return self

    def agent_options(self, name: str) -> dict[str, Any]:
        options: dict[str, Any] = self.agents[name].model_dump() if name in self.agents else {}
        options["prices"] = {k: list(v) for k, v in self.prices.items()}
        return options

    @property
    def metric_mode(self) -> bool:
        return bool(self.metric_cmd)

    @property
    def candidate_agents(self) -> list[str]:
        """The implementer of each candidate, 1…N; a single one when nothing races."""
        return [agent for agent in self.race or [self.implementer] for _ in range(self.candidates)]


_METRIC_ONLY = ("direction", "target", "patience", "metric_repeat", "min_improvement")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# -- layering -------------------------------------------------------------------------------------

_ALIASES = {
    "max_attempts": "max_iters",
    "metric": "metric_cmd",
    "gate": "verify_cmd",
    "reviewer": "reviewers",
}
_DURATIONS = ("max_time", "timeout", "success_timeout", "retry_delay")


def _normalize(layer: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in layer.items():
        if value is None:
            continue
        name = _ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))
        if name == "reviewers" and isinstance(value, str):
            out[name] = [v.strip() for v in value.split(",") if v.strip()]
        elif name == "implementer" and isinstance(value, list | tuple):
            out.update({"implementer": value[0]} if value else {})
            out.update({"race": list(value)} if len(value) > 1 else {})
        else:
            out[name] = value
    preset = out.pop("preset", None)
    if preset is not None:
        if preset not in PRESETS:
            raise LoopeError(f"unknown preset {preset!r}; known presets: {', '.join(sorted(PRESETS))}")
        out = {**PRESETS[preset], **out}
    if out.pop("no_review", False):
        out["reviewers"] = []
    if out.pop("no_baseline", False):
        out["baseline"] = False
    for key in _DURATIONS:
        if key in out:
            out[key] = parse_duration(out[key], what=f"--{key.replace('_', '-')}")
    return out


def build_spec(
    flags: Mapping[str, Any],
    workdir: Path,
    *,
    use_config: bool = True,
    defaults: Mapping[str, Any] | None = None,
) -> LoopSpec:
    """The run's spec: defaults (the spec's, then ``defaults``), loope.toml in ``workdir``, then ``flags``.

    A flag whose value is None is unset. ``defaults`` lets a caller (the MCP tool) set its own
    defaults beneath the project's loope.toml.
    """
    if not workdir.is_dir():
        raise LoopeError(f"workdir {workdir} does not exist or is not a directory; pass an existing --workdir")
    config, source = load_config(workdir) if use_config else ({}, None)
    try:
        from_config = _normalize(config)
    except LoopeError as exc:
        raise LoopeError(f"{source}: {exc}") from None
    from_flags = _normalize(flags)
    layers: dict[str, Any] = {"workdir": workdir.resolve(), **_normalize(defaults or {}), **from_config, **from_flags}
    if "goal" not in layers:
        raise LoopeError(
            'no goal: give one as an argument (loope run "make the tests pass"), with --goal-file,'
            " or as goal in loope.toml (loope init --goal ...)"
        )
    if layers.get("dry_run"):
        layers.update(_dry_run(layers))
    config_only = {key: source for key in from_config if key not in from_flags and source}
    return validate(layers, config_only)


def _dry_run(layers: Mapping[str, Any]) -> dict[str, Any]:
    real = [
        *(layers.get("race") or [layers.get("implementer", IMPLEMENTER)]),
        *(layers.get("reviewers", REVIEWERS) or []),
    ]
    real += [layers[role] for role in ("designer", "verifier", "critic") if layers.get(role)]
    stubbed: dict[str, Any] = {
        "dry_run_agents": list(dict.fromkeys(str(a) for a in real)),
        "implementer": "stub",
        "race": ["stub"] * len(layers.get("race") or []),
        # One stub step per configured reviewer: the dry run checks the real roster's shape.
        "reviewers": ["stub"] * len(layers.get("reviewers", REVIEWERS) or []),
    }
    for role in ("designer", "verifier", "critic"):
        if layers.get(role):
            stubbed[role] = "stub"
    return stubbed


def validate(data: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> LoopSpec:
    """A LoopSpec from ``data``; one clear line naming the setting (and its file) when something is wrong."""
    try:
        return LoopSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise _user_error(exc.errors()[0], sources or {}) from None


def _user_error(error: Any, sources: Mapping[str, str]) -> LoopeError:
    """The first validation error as one line, in the spelling of wherever the setting came from.

    Messages name settings as flags (``--metric-cmd``); a setting that came from loope.toml is named
    as its key there (``metric_cmd``), after the file's name.
    """
    message = str(error["msg"]).removeprefix("Value error, ")
    key = str(error["loc"][0]) if error["loc"] else ""
    where = ".".join(str(p) for p in error["loc"])
    named = [m.replace("-", "_") for m in _FLAG.findall(message)]
    source = sources.get(key) or next((sources[n] for n in named if n in sources), None)
    prefix = f"{source}: " if source else ""
    if source:
        message = _FLAG.sub(lambda m: m.group(1).replace("-", "_"), message)
    if error["type"] == "extra_forbidden":
        return LoopeError(f"{prefix}unknown setting {where!r}; `loope run --help` lists the settings")
    given = error.get("input")
    shown = f" (got {clip(repr(given), 80)})" if key and not isinstance(given, dict | list) else ""
    what = (where if source else _flag(where)) if key else ""
    return LoopeError(f"{prefix}{what}: {message}{shown}" if what else f"{prefix}{message}")


_FLAG = re.compile(r"--([a-z][a-z-]*[a-z])")
