"""The sandbox around every agent step and every check, and the end of every process a step started.

A run has one :class:`RunSandbox`; each step gets a :class:`StepBox` from it, which ``loope.proc``
applies to the step's process (``run_process(confine=...)``):

- with bubblewrap (``--sandbox auto`` where it works, or ``on``), the process runs in a mount and
  PID namespace of its own with the policy of ``layout.py``;
- with or without it, the step gets a private TMPDIR, and when its process ends (or times out, or
  is stopped) everything it started is killed: in the box by its PID namespace, outside it through a
  cgroup; a marker in their environment finds what is left either way (``reap.py``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from loope.errors import LoopeError
from loope.record import record
from loope.sandbox import bwrap, reap, tmpdirs
from loope.sandbox.layout import Layout, named_paths


@record(frozen=True)
class Choice:
    """Whether a run's steps are sandboxed, and the line that says why not."""

    enabled: bool
    warning: str | None = None


def choose(mode: str) -> Choice:
    """``mode`` resolved on this machine; ``on`` where bubblewrap cannot work is a usage error."""
    if mode == "off":
        return Choice(False)
    found = bwrap.support()
    if found.works:
        return Choice(True)
    if mode == "on":
        raise LoopeError(f"--sandbox on: {found.reason}; install bubblewrap, or run with --sandbox off")
    return Choice(False, f"sandbox off: {found.reason}; only the guard keeps the agent to its rules")


class StepBox:
    """One step's confinement (a ``loope.proc.Confinement``)."""

    def __init__(
        self,
        binary: str | None,
        layout: Layout | None,
        *,
        write: bool,
        state: Iterable[Path] = (),
        visible: Iterable[Path] = (),
        network: bool = True,
        cwd: Path | None = None,
        tmp_of: StepBox | None = None,
        private: Iterable[Path] = (),
    ) -> None:
        self.binary = binary if layout is not None else None
        self.private = tuple(private)
        self.layout = layout
        self.write = write
        self.state = tuple(state)
        self.visible = tuple(visible)
        self.network = network
        self.cwd = cwd
        self.tmp_of = tmp_of
        """A box whose /tmp this one shares (an ACP agent's, for the commands it runs through loope)."""
        self.tmp: Path | None = None
        self._borrowed_tmp: Path | None = None
        self.token = reap.new_token()
        self.cgroup: reap.StepCgroup | None = None
        self._killed = False

    @property
    def sandboxed(self) -> bool:
        return self.binary is not None

    def enter(self, argv: tuple[str, ...], env: dict[str, str]) -> tuple[tuple[str, ...], dict[str, str]]:
        self._killed = False
        self._borrowed_tmp = self.tmp_of.tmp if self.tmp_of is not None else None
        self.tmp = self._borrowed_tmp or Path(tempfile.mkdtemp(prefix="loope-step-"))
        env = {**env, reap.TOKEN_VAR: self.token}
        base = reap.step_base()  # once per process: what dead runners left there is swept first
        if self.binary is not None and self.layout is not None:
            policy = self.layout.policy(
                tmp=self.tmp,
                write=self.write,
                state=self.state,
                visible=self.visible,
                network=self.network,
                cwd=self.cwd,
                private=self.private,
            )
            argv = tuple(bwrap.command(self.binary, policy, argv))
            env["TMPDIR"] = "/tmp"
            return argv, env  # its PID namespace ends every process in it: no cgroup (and no shell to join one)
        env["TMPDIR"] = str(self.tmp)
        if base is not None:
            with contextlib.suppress(OSError):
                self.cgroup = reap.StepCgroup(base, self.token)
        if self.cgroup is not None:
            argv = (*self.cgroup.prefix(), *argv)
        return argv, env

    def kill(self, *, ended: bool = False) -> None:
        self._killed = True
        if self.cgroup is not None:
            self.cgroup.kill()
        # Outside the box this is the net for what left the step's group. In the box nothing can leave
        # its PID namespace, but a namespace whose bubblewrap was killed (a timeout, a stop, an ACP
        # agent's end) is torn down after bubblewrap is gone: this waits until its processes are too.
        # A bubblewrap that ended on its own is gone only after its namespace is: the kernel ends every
        # process in a PID namespace, and waits for them, before its first process's end is seen.
        if not (ended and self.sandboxed):
            reap.kill_marked(self.token)

    def close(self) -> None:
        if not self._killed:  # once the process ended (``run_process`` kills at once), not again
            self.kill()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.tmp is not None and self.tmp is not self._borrowed_tmp:
            tmpdirs.remove_later(self.tmp)  # off the way to the next step


class RunSandbox:
    """Hands each step of a run its box."""

    def __init__(
        self, layout: Layout | None = None, *, check_network: bool = True, writable: Iterable[Path] = ()
    ) -> None:
        found = bwrap.support() if layout is not None else None
        self.binary = found.binary if found is not None and found.works else None
        self.layout = layout if self.binary is not None else None
        self.check_network = check_network
        self.writable = tuple(writable)
        """Directories the user lets every step write (``--sandbox-writable``)."""

    @property
    def enabled(self) -> bool:
        return self.layout is not None

    def agent(
        self,
        *,
        write: bool,
        state: Iterable[Path] = (),
        visible: Iterable[Path] = (),
        cwd: Path | None = None,
        tmp_of: StepBox | None = None,
        private: Iterable[Path] = (),
    ) -> StepBox:
        """An agent step's box: the work tree writable for writers, ``state`` (its CLI's own files) for all.

        ``cwd``: where the command starts (the workspace unless said); ``tmp_of``: a box whose /tmp it shares;
        ``private``: dirs in its state (session transcripts) that a race candidate's step gets empty, of its own.
        """
        existing = [p for p in state if _prepare_state(p)] if self.enabled else []
        state = [*existing, *self.writable]
        isolated = self.layout is not None and self.layout.isolation is not None
        hidden = [p for p in private if _prepare_state(p)] if isolated else []
        return StepBox(
            self.binary, self.layout, write=write, state=state, visible=visible, cwd=cwd, tmp_of=tmp_of, private=hidden
        )

    def check(self, command: str, cwd: Path) -> StepBox:
        """A gate, metric or success command's box: the work tree writable (caches), no home state."""
        visible = named_paths(command, cwd) if self.enabled else []
        return StepBox(
            self.binary, self.layout, write=True, state=self.writable, visible=visible, network=self.check_network
        )


UNSANDBOXED = RunSandbox()
"""Steps run outside any sandbox (still with a private TMPDIR, and nothing outlives them)."""


def _prepare_state(path: Path) -> bool:
    """Whether ``path`` (an agent's state dir or file) can be bound writable; directories are made."""
    if path.exists():
        return True
    if path.suffix:  # a file such as ~/.claude.json: the CLI makes it, outside the sandbox too
        return False
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.path.isdir(path)
