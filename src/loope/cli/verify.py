"""``loope verify``: the configured gate (and metric) once, on the tree as it is."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.config import load_config
from loope.errors import LoopeError
from loope.verify.gate import run_gate
from loope.verify.metric import measure
from loope.workspace.loopedir import ensure_loope_dir

HOOK_STATE = "hook-attempts.json"


def _settings(root: Path) -> dict[str, Any]:
    from loope.spec import _normalize

    config, source = load_config(root)
    settings = _normalize(config)
    if not settings.get("verify_cmd"):
        raise LoopeError(
            f"no gate configured in {source or root}: set verify_cmd in loope.toml (`loope init` detects one)"
        )
    if settings.get("metric_cmd") and settings.get("direction") not in ("lower", "higher"):
        raise LoopeError(f'{source}: metric_cmd needs direction = "lower" or direction = "higher"')
    return settings


@click.command(short_help="Run the configured gate (and metric) once.")
@click.option("--json", "json_", is_flag=True, help="The verdict as JSON.")
@click.option("--hook", type=click.Choice(["claude"]), help="Follow an agent's Stop-hook contract.")
@workdir_option
def verify(json_: bool, hook: str | None, workdir: Path | None) -> int:
    """Run the gate (and the metric, when set) on the current tree; exit 0 when it passes, 1 when not."""

    root = project_dir(workdir)
    try:
        settings = _settings(root)
    except LoopeError as exc:
        if hook != "claude":
            raise
        # Exit 2 from a Stop hook keeps the agent working; a configuration it cannot fix must not trap it.
        click.echo(f"loope: error: {exc.message}", err=True)
        return 1
    logs = ensure_loope_dir(root) / "verify"
    logs.mkdir(exist_ok=True)
    log = logs / "gate.log"
    log.unlink(missing_ok=True)
    timeout = float(settings.get("timeout", 1800))
    gate = run_gate(settings["verify_cmd"], cwd=root, log=log, timeout=timeout)
    result: dict[str, Any] = {
        "command": gate.command,
        "passed": gate.passed,
        "exit_code": gate.proc.exit_code,
        "failures": [{"test": t, "message": m} for t, m in gate.failures],
        "score": None,
    }
    if gate.passed and settings.get("metric_cmd"):
        for old in logs.glob("metric*.log"):
            old.unlink()
        measured = measure(
            settings["metric_cmd"],
            cwd=root,
            log_dir=logs,
            repeat=int(settings.get("metric_repeat", 1)),
            timeout=timeout,
        )
        result.update(score=measured.score, metric_error=measured.error, direction=settings.get("direction"))
        result["passed"] = measured.score is not None
    if hook == "claude":
        return _claude_hook(root, settings, result, gate.report().output)
    if json_:
        click.echo(json.dumps(result, indent=2))
    else:
        _print(result, gate.report().output)
    return 0 if result["passed"] else 1


def _print(result: dict[str, Any], output: str) -> None:
    verdict = "PASS" if result["passed"] else "FAIL"
    click.echo(f"{verdict}: {result['command']} (exit {result['exit_code']})")
    for failure in result["failures"]:
        click.echo(f"  {failure['test']}: {failure['message']}")
    if result.get("score") is not None:
        click.echo(f"score: {result['score']:g} ({result.get('direction')} is better)")
    elif result.get("metric_error"):
        click.echo(f"no score: {result['metric_error']}")
    if not result["passed"] and not result["failures"] and output:
        click.echo(output)


def _claude_hook(root: Path, settings: dict[str, Any], result: dict[str, Any], output: str) -> int:
    """Claude Code's Stop hook: exit 2 with the failures on stderr keeps the agent working.

    The attempts are counted in loope's own directory (protected by the deny rules `init` wrote), so
    after ``max_attempts`` failing stops the session may end instead of looping for ever.
    """
    sys.stdin.read() if not sys.stdin.isatty() else None
    state = root / ".loope" / HOOK_STATE
    if result["passed"]:
        state.unlink(missing_ok=True)
        return 0
    attempts = _attempts(state) + 1
    limit = int(settings.get("max_iters", 10))
    if attempts > limit:
        click.echo(f"loope: the gate still fails after {limit} attempts; stopping here", err=True)
        state.unlink(missing_ok=True)
        return 0
    state.write_text(json.dumps({"attempts": attempts}))
    lines = [f"The verify command `{result['command']}` fails (attempt {attempts} of {limit}). Fix it before stopping:"]
    lines += [f"- {f['test']}: {f['message']}" for f in result["failures"]]
    if result.get("metric_error"):
        lines.append(f"- {result['metric_error']}")
    if not result["failures"]:
        lines.append(output[-3000:])
    click.echo("\n".join(lines), err=True)
    return 2


def _attempts(state: Path) -> int:
    try:
        return int(json.loads(state.read_text()).get("attempts", 0))
    except (OSError, ValueError, AttributeError):
        return 0
