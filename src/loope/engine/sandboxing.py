"""The run's sandbox, laid out from its workspace, run directory and guard."""

from __future__ import annotations

from pathlib import Path

from loope.engine.run import RunState
from loope.enums import WorkspaceMode
from loope.sandbox import UNSANDBOXED, Choice, RunSandbox
from loope.sandbox.isolation import Isolation
from loope.sandbox.layout import Layout
from loope.verify.confine import BOUNDARY_NAME
from loope.workspace import fork
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
        project=workspace.user_repo(spec.workdir) or spec.workdir,
        state_file=run.state_file,
        tracked=workspace.tracked_files(),
        protected_patterns=guard.protected_patterns,
        hide_project_but=overlay_needs(workspace.git_dir) if workspace.mode == WorkspaceMode.OVERLAY else None,
        isolation=_isolation(run),
    )
    writable = [Path(p) for p in spec.sandbox_writable]
    return RunSandbox(layout, check_network=spec.sandbox_network == "on", writable=writable)


RUN_FILES = ("spec.json", "design-contract.md", "ledger.jsonl", "best", "score.log", BOUNDARY_NAME)
"""The run dir's files a candidate's steps still see: none of them changes while a round runs."""


def _isolation(run: RunState) -> Isolation | None:
    """A race candidate's view of loope's files (its own only), or None for the run's own steps."""
    git_dir = run.workspace.git_dir
    if run.candidate is None or git_dir is None:
        return None
    return Isolation.of(
        run_dir=run.rundir.root,
        git_dir=git_dir,
        common_dir=fork.common_dir(git_dir),
        candidate=run.candidate,
        run_files=RUN_FILES,
        objects=fork.objects_of(run.rundir.root, run.candidate),
    )
