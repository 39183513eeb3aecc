"""``loope init``: loope.toml, the program, and hooks for in-session loops, for a project's toolchain."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loope.errors import LoopeError
from loope.records.atomic import write_text
from loope.workspace.loopedir import ensure_loope_dir

FAIL_CLOSED = (
    "echo 'loope: no verify command is set, so nothing can pass; run: loope init --force --verify-cmd CMD' >&2; exit 1"
)

# First match wins. A Go gate must fail when either step fails: build && test, never `! build && test`.
TOOLCHAINS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("go.mod",), "go", "go build ./... && go test ./..."),
    (("Cargo.toml",), "cargo", "cargo test"),
    (("pyproject.toml", "setup.py"), "python", "python -m pytest -q"),
    (("package.json",), "node", "npm test --silent"),
    (("Makefile",), "make", "make test"),
)


HOOK_FILES = {"claude": Path(".claude") / "settings.json", "kiro": Path(".kiro") / "agents" / "loop.json"}


def detect_gate(root: Path) -> tuple[str, str]:
    """(toolchain, gate command) for the project in ``root``; a gate that fails closed when none is found."""
    for markers, name, command in TOOLCHAINS:
        if any((root / marker).exists() for marker in markers):
            return name, command
    return "none", FAIL_CLOSED


@dataclass
class InitOptions:
    goal: str | None = None
    editable: list[str] = field(default_factory=list)
    protect: list[str] = field(default_factory=list)
    max_attempts: int = 10
    metric: str | None = None
    direction: str | None = None
    verify_cmd: str | None = None
    hooks: str | None = None
    force: bool = False


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid TOML basic string


def render_config(options: InitOptions, gate: str, toolchain: str) -> str:
    lines = [
        "# loope's settings for this project; `loope run` reads them, flags override them.",
        f"goal = {_toml_value(options.goal)}"
        if options.goal
        else '# goal = "Describe the goal here; then `loope run` needs no arguments"',
        f"max_attempts = {options.max_attempts}",
        f"# The gate, detected from the {toolchain} toolchain; it must exit 0 only when the work is right.",
        f"verify_cmd = {_toml_value(gate)}",
    ]
    if options.metric:
        lines += [
            "# Metric mode: the last number the command prints is the score.",
            f"metric_cmd = {_toml_value(options.metric)}",
            f"direction = {_toml_value(options.direction)}",
        ]
    lines.append(f"editable = {_toml_value(options.editable)}")
    lines.append(f"protect = {_toml_value(options.protect)}")
    return "\n".join(lines) + "\n"


def render_program(options: InitOptions, gate: str) -> str:
    goal = options.goal or "(set the goal in loope.toml)"
    editable = ", ".join(options.editable) or "any file that is not protected"
    # The state file is the agent's own memory in `loope run`; everything else under .loope/ is loope's.
    protected = ", ".join(["loope.toml", ".loope/ (except the state file .loope/state.md)", *options.protect])
    if options.metric:
        direction = options.direction or "lower"
        scoring = (
            f"Each attempt must first pass the gate `{gate}`. Then `{options.metric}` scores it; its last printed"
            f" number is the score and {direction} is better. An attempt that improves on the best score is kept"
            " (committed); anything else is reverted to the best kept state, and its idea goes on the list of"
            " dead ends."
        )
    else:
        scoring = (
            f"This is a gate, not a search: `{gate}` rejects broken changes, but it cannot tell an improvement"
            " from a no-op. An attempt passes when the gate exits 0 and the reviewers (if any) approve."
        )
    return f"""# Program

## Goal
{goal}

## Constraints
- Change only: {editable}.
- Never change: {protected}. Changes there are undone by loope and reported back to you.
- At most {options.max_attempts} attempts.

## Protocol
1. Read the goal, the state file, and the attempts so far (the ledger in your prompt).
2. Make one focused change toward the goal; do not retry an idea listed as a dead end.
3. Stop and summarize what you changed and why. loope verifies it; you do not grade yourself.

## Scoring
{scoring}

## Why the verifier is off-limits
The gate and metric commands come from the run's saved settings, not from files you can edit, and
loope alone writes the best score, the score log and the ledger. Changing tests, scripts or these
files cannot make an attempt pass: such changes are detected, undone and recorded as violations.
"""


def _load_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise LoopeError(f"{path} is not valid JSON ({exc}); fix it or move it aside, then run init again") from None
    if not isinstance(data, dict):
        raise LoopeError(f"{path} does not hold a JSON object; fix it or move it aside, then run init again")
    return data


class _Shape(ValueError):
    """A hook file holds valid JSON of another shape than the agent expects (``hooks`` is a list, say)."""


def _member(parent: dict[str, Any], *keys: str, kind: type) -> Any:
    """``parent[k1][k2]…``, created when missing; _Shape when a value on the way has another type."""
    node: Any = parent
    for depth, key in enumerate(keys):
        want = kind if depth == len(keys) - 1 else dict
        value = node.setdefault(key, want())
        if not isinstance(value, want):
            raise _Shape(f"{'.'.join(keys[: depth + 1])} should be a JSON {'object' if want is dict else 'array'}")
        node = value
    return node


def _commands(hooks: list[Any]) -> set[Any]:
    return {h.get("command") for h in hooks if isinstance(h, dict)}


def loope_command() -> str:
    """How a hook calls loope: ``loope`` from PATH, never this machine's absolute path (the file is shared)."""
    return "loope"


def claude_settings(existing: dict[str, Any], protected: list[str]) -> dict[str, Any]:
    """``existing`` .claude/settings.json with a Stop hook running the gate and deny rules for protected files."""
    settings: dict[str, Any] = json.loads(json.dumps(existing))
    command = f"{loope_command()} verify --hook claude"
    stop = _member(settings, "hooks", "Stop", kind=list)
    groups = [g["hooks"] for g in stop if isinstance(g, dict) and isinstance(g.get("hooks"), list)]
    if not any(command in _commands(hooks) for hooks in groups):
        stop.append({"hooks": [{"type": "command", "command": command, "timeout": 600}]})
    deny = _member(settings, "permissions", "deny", kind=list)
    for pattern in protected:
        for tool in ("Edit", "Write"):
            rule = f"{tool}({pattern})"
            if rule not in deny:
                deny.append(rule)
    return settings


def kiro_agent(existing: dict[str, Any], protected: list[str], editable: Sequence[str] = ()) -> dict[str, Any]:
    """``existing`` .kiro/agents/loop.json with a stop hook running the gate, write.deniedPaths and allowedPaths.

    The allowed paths are the editable globs, so Kiro's write tool keeps to them inside a session too.
    """
    agent: dict[str, Any] = json.loads(json.dumps(existing))
    agent.setdefault("name", "loop")
    agent.setdefault("description", "Works toward the goal in .loope/program.md; loope's gate decides when it is done.")
    agent.setdefault("prompt", "file://../../.loope/program.md")
    agent.setdefault("tools", ["*"])
    command = f"{loope_command()} verify"
    stop = _member(agent, "hooks", "stop", kind=list)
    if command not in _commands(stop):
        stop.append({"command": command, "timeout_ms": 600_000})
    denied = _member(agent, "toolsSettings", "write", "deniedPaths", kind=list)
    for pattern in protected:
        if pattern not in denied:
            denied.append(pattern)
    if editable:
        allowed = _member(agent, "toolsSettings", "write", "allowedPaths", kind=list)
        for pattern in editable:
            if pattern not in allowed:
                allowed.append(pattern)
    return agent


@dataclass
class InitResult:
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    merged: list[Path] = field(default_factory=list)
    toolchain: str = ""
    gate: str = ""


def init_project(root: Path, options: InitOptions) -> InitResult:
    """Write loope.toml, .loope/program.md and the requested hook files; existing files are kept unless forced."""

    if options.direction and options.direction not in ("lower", "higher"):
        raise LoopeError(f"--direction {options.direction!r}: use lower or higher")
    if options.metric and not options.direction:
        raise LoopeError("--metric needs --direction lower or --direction higher")
    if options.max_attempts < 1:
        raise LoopeError(f"--max-attempts must be at least 1 (got {options.max_attempts})")
    toolchain, detected = detect_gate(root)
    gate = options.verify_cmd or detected
    if options.verify_cmd:
        toolchain = "given"
    result = InitResult(toolchain=toolchain, gate=gate)
    protected = ["loope.toml", ".loope/**", *options.protect]
    # Hook files are read (and refused when invalid) before anything is written.
    hook_files: list[tuple[Path, dict[str, Any]]] = []
    if options.hooks is not None:
        if options.hooks not in HOOK_FILES:
            raise LoopeError(f"--hooks {options.hooks!r}: use claude or kiro")
        path = root / HOOK_FILES[options.hooks]
        try:
            existing = _load_json(path)
            merged = (
                claude_settings(existing, protected)
                if options.hooks == "claude"
                else kiro_agent(existing, protected, options.editable)
            )
            hook_files.append((path, merged))
        except _Shape as exc:
            raise LoopeError(f"{path}: {exc}; fix it or move it aside, then run init again") from None
    ensure_loope_dir(root)
    for path, text in (
        (root / "loope.toml", render_config(options, gate, toolchain)),
        (root / ".loope" / "program.md", render_program(options, gate)),
    ):
        if path.exists() and not options.force:
            result.kept.append(path)
            continue
        write_text(path, text)
        result.written.append(path)
    for path, data in hook_files:
        (result.merged if path.exists() else result.written).append(path)
        write_text(path, json.dumps(data, indent=2) + "\n")
    return result
