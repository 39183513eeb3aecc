"""The run's sandbox, laid out from its workspace, run directory and guard."""

from __future__ import annotations

from pathlib import Path

from loope.engine.run import RunState
from loope.enums import WorkspaceMode
from loope.sandbox import UNSANDBOXED, Choice, RunSandbox
from loope.sandbox.layout import Layout
from loope.workspace.git import toplevel
from loope.workspace.guard import Guard
from loope.workspace.overlay import overlay_needs


def run_sandbox(run: RunState, choice: Choice, guard: Guard) -> RunSandbox:
    """The sandbox every step of this run gets (UNSANDBOXED when ``choice`` says off)."""
    if not choice.enabled:
        return UNSANDBOXED
    spec, workspace = run.spec, run.workspace
    layout = Layout.of(
        work_tree=workspace.git.work_tree,
        workspace=workspace.path,
        run_dir=run.rundir.root,
        project=toplevel(spec.workdir) or spec.workdir,
        state_file=run.state_file,
        tracked=[p for p in workspace.git.out("ls-files", "-z").split("\0") if p],
        protected_patterns=guard.protected_patterns,
        hide_project_but=overlay_needs(workspace.git_dir) if workspace.mode == WorkspaceMode.OVERLAY else None,
    )
    writable = [Path(p) for p in spec.sandbox_writable]
    return RunSandbox(layout, check_network=spec.sandbox_network == "on", writable=writable)
