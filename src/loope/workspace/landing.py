"""Landing a run like a colleague's change: ``apply --commit`` makes one commit of it on the current branch."""

from __future__ import annotations

from pathlib import Path

from loope.errors import LoopeError
from loope.records.model import RunRecord
from loope.workspace.git import Git, toplevel


def landing_message(record: RunRecord, summary: str) -> str:
    """The goal as the subject, the implementer's last summary as the body, and a ``Loope-Run:`` trailer."""
    goal = " ".join(record.goal.split())
    subject = goal if len(goal) <= 72 else goal[:71].rstrip() + "…"
    parts = [subject]
    if summary.strip():
        parts.append(summary.strip())
    if record.stop_reason != "converged":
        parts.append(f"The run stopped without converging ({record.stop_reason}).")
    parts.append(f"Loope-Run: {record.run_id}")
    return "\n\n".join(parts)


def commit_applied(target: Path, paths: list[str], message: str) -> str:
    """Commit exactly ``paths`` (relative to ``target``) on the current branch as the user; the new commit.

    Whatever else the user has staged stays staged and out of the commit.
    """
    top = toplevel(target)
    if top is None:
        raise LoopeError(f"--commit needs a git repository; {target} is not in one (the files were applied)")
    git = Git(top)
    if git.rev("HEAD") is not None and git.run("symbolic-ref", "-q", "HEAD", check=False).exit_code != 0:
        raise LoopeError("--commit needs a branch checked out (HEAD is detached); the files were applied")
    prefix = target.resolve().relative_to(top.resolve())
    rels = [str(prefix / p) if str(prefix) != "." else p for p in paths]
    git.run("add", "-A", "--", *rels)
    git.run("commit", "-q", "--no-verify", "-m", message, "--only", "--", *rels, env=git.author())
    return git.out("rev-parse", "HEAD")
