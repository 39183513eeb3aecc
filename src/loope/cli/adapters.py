"""``loope adapters`` and ``loope doctor``: which agents are here, and what to fix."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from loope import config
from loope.agents.inspect import Check, diagnose, survey
from loope.cli.options import project_dir, workdir_option
from loope.errors import EXIT_FAILED


@click.command(short_help="List agent adapters: installed, version, safety, cost.")
@click.option("--json", "json_", is_flag=True, help="One JSON array.")
def adapters(json_: bool) -> int:
    """List every adapter: installed or not, version, read-only enforcement, cost source."""

    rows = survey()
    if json_:
        import json  # only for --json: nothing else adapters or doctor loads before its first program needs it

        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    for r in rows:
        state = f"installed {r.version or ''}".strip() if r.installed else "not installed"
        click.echo(f"{r.name:<9} {state}")
        if r.binary:
            click.echo(f"          binary:    {r.binary}")
        click.echo(f"          read-only: {r.read_only}")
        click.echo(f"          cost:      {r.cost_source}")
        if not r.installed:
            click.echo(f"          install:   {r.install}")
    return 0


@click.command(short_help="Check the configured agents and say what to fix.")
@workdir_option
@click.option("--json", "json_", is_flag=True, help="One JSON object.")
def doctor(workdir: Path | None, json_: bool) -> int:
    """Check the agents this project is configured to use, and say what to fix."""
    root = project_dir(workdir)
    names, options, sandbox, workspace = _configured(root)
    agents = diagnose([n for n in dict.fromkeys(names) if n], options, root, sandbox=sandbox)
    checks = [*agents, _sandbox_check(sandbox), _overlay_check(root, workspace)]
    if json_:
        import json

        click.echo(json.dumps([c.to_dict() for c in checks], indent=2))
    else:
        for c in checks:
            mark = "ok " if c.ok else "FIX"
            click.echo(f"{mark} {c.agent}: {c.summary}")
            for fix in c.fixes:
                click.echo(f"      → {fix}")
    return 0 if all(c.ok for c in checks) else EXIT_FAILED


def _configured(root: Path) -> tuple[list[str | None], Mapping[str, Any], str, str | None]:
    """The agents a run here would use, their settings, its sandbox and workspace modes.

    The project's settings are checked as a run checks them (a spec is built); a project with none
    has the defaults, and no spec to build.
    """
    if not config.load_config(root)[0]:
        return [config.IMPLEMENTER, *config.REVIEWERS], {}, config.SANDBOX, None
    from loope.spec import build_spec

    spec = build_spec({"goal": "doctor"}, root)
    names = [spec.implementer, *spec.reviewers, spec.designer, spec.verifier, spec.critic]
    options = {name: spec.agent_options(name) for name in spec.agents}
    return names, options, spec.sandbox, spec.workspace


def _sandbox_check(mode: str) -> Check:
    """The sandbox as this project's runs would get it: fine unless ``--sandbox on`` cannot work."""
    from loope.bwrap_probe import status_line  # not the sandbox package: doctor builds no box

    works, line = status_line()
    if mode == "off":
        return Check("sandbox", True, 'off (sandbox = "off" in loope.toml): only the guard keeps the rules')
    fixes = () if works else ("install bubblewrap: apt-get install -y bubblewrap",)
    return Check("sandbox", works or mode != "on", line, fixes)


def _overlay_check(root: Path, mode: str | None) -> Check:
    """Whether runs take an overlay here by default (``auto``: the probe's answer, asked once per machine)."""
    from loope.enums import WorkspaceMode  # builds loope's enum classes: doctor only, after its first program
    from loope.workspace import overlay
    from loope.workspace.git import toplevel  # loads the workspace layer: doctor only, not `adapters`

    found = overlay.probe(root) if toplevel(root) is not None else None
    if found is None:
        return Check("overlay", mode != WorkspaceMode.OVERLAY, "not a git repository: runs make a copy")
    cached = f"(probe cached in {overlay.probe_cache()})"
    if found.works:
        return Check("overlay", True, f"runs use an overlay here {cached}")
    fixes = () if mode != WorkspaceMode.OVERLAY else ('use workspace = "auto" or "worktree" in loope.toml',)
    summary = f"runs use a worktree here: no overlay ({found.reason}) {cached}"
    return Check("overlay", mode != WorkspaceMode.OVERLAY, summary, fixes)
