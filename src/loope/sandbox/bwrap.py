"""Bubblewrap: the command line for a policy (whether it works here is :mod:`loope.bwrap_probe`'s)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from loope.bwrap_probe import BASE, ISOLATE, Support, support
from loope.record import record

__all__ = ["Policy", "Support", "command", "support"]  # the probe's names too: bwrap.support() is the sandbox's


@record(frozen=True)
class Policy:
    """What one sandboxed process sees: the whole file system read-only, but for these."""

    cwd: Path
    tmp: Path
    """A directory of the runner's, mounted as the process's private /tmp."""
    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    """Shown read-only, on top of a writable parent (a protected file) or over the private /tmp."""
    network: bool = True
    hidden: tuple[Path, ...] = ()
    """Covered by an empty file system first (the paths above are bound on top where they lie inside)."""
    shown_at: tuple[tuple[Path, Path], ...] = ()
    """(source, target): ``source`` shown read-only at ``target``, in place of what is there."""


def command(binary: str, policy: Policy, argv: Sequence[str]) -> list[str]:
    """``argv`` under bubblewrap with ``policy``.

    Mounts are applied parents first, so a protected file inside the writable workspace stays
    read-only, and a writable state file inside a read-only directory stays writable. Paths that
    do not exist are skipped (bubblewrap cannot bind them; the guard sees what is created there),
    and so is any path that goes through a symlink: a mount follows it, and an agent's link must
    never turn into a writable view of what it points at.
    """
    mounts: list[tuple[Path, str, Path]] = [(p, "--tmpfs", p) for p in policy.hidden]
    mounts += [(p, "--bind", p) for p in policy.writable]
    mounts += [(p, "--ro-bind", p) for p in policy.read_only]
    mounts += [(target, "--ro-bind", source) for source, target in policy.shown_at]
    mounts.sort(key=lambda m: len(m[0].parts))  # stable: a hidden path goes before what is shown inside it
    args = [binary, *BASE, "--bind", str(policy.tmp), "/tmp"]
    for path, flag, source in mounts:
        if _direct(path) and _direct(source):
            args += [flag, str(path)] if flag == "--tmpfs" else [flag, str(source), str(path)]
    args += ISOLATE
    if not policy.network:
        args.append("--unshare-net")
    return [*args, "--setenv", "TMPDIR", "/tmp", "--chdir", str(policy.cwd), "--", *argv]


def _direct(path: Path) -> bool:
    """Whether ``path`` exists and no symlink leads to it (a mount would follow the link)."""
    return path.exists() and os.path.realpath(path) == str(path)
