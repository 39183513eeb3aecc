"""The live state of one run that the engine and its step runner share."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from dataclasses import field, replace
from pathlib import Path

from loope.engine.bus import EventBus
from loope.engine.roster import Control
from loope.enums import StopReason
from loope.record import record
from loope.records.anchor import RunDirAnchor
from loope.records.ledger import Attempt, Reader
from loope.records.model import LoopState, RunRecord, StepRecord
from loope.records.rundir import RunDir
from loope.records.runjson import RunJsonWriter
from loope.records.space import unless_disk_full
from loope.sandbox import UNSANDBOXED, RunSandbox
from loope.spec import LoopSpec
from loope.workspace.workspace import Workspace


class Halt(Exception):
    """Stop the loop now, for a reason from the closed set of stop reasons."""

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class BadInput(Halt):
    """A halt caused by the user's input, found only once the run ran (a gate whose program is missing): exit 2."""


@record()
class RunState:
    spec: LoopSpec
    rundir: RunDir
    workspace: Workspace
    record: RunRecord
    bus: EventBus
    state_file: Path
    loop: LoopState = field(default_factory=LoopState)
    """What the next iteration needs from the last one (saved in run.json as ``loop`` after each)."""
    control: Control | None = None
    """Asked before every step whether someone (``loope stop``, the MCP tool) wants the run to stop."""
    cancel: threading.Event = field(default_factory=threading.Event)
    sandbox: RunSandbox = UNSANDBOXED
    """Gives every step's process its box (bubblewrap, or only the nets that end what it started)."""
    anchor: RunDirAnchor | None = None
    """The run directory's place, held open: a step that moves it away ends the run."""
    next_step: int = 0
    """The number the next step gets (0: after the record's last step)."""
    started: float = field(default_factory=time.monotonic)
    candidate: int | None = None
    """In a candidate's view of the run (engine/candidates.py): which one, 1…N."""
    candidates: int = 1
    """How many candidates race in each iteration."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _writer: RunJsonWriter | None = None
    _begun: int = 0
    """The iteration run.json names begun before it started (see :meth:`complete`); 0: none."""
    _ledger: Reader | None = None

    def __post_init__(self) -> None:
        self.next_step = self.next_step or max((s.id for s in self.record.steps), default=0) + 1

    def attempts(self) -> list[Attempt]:
        """The ledger's attempts so far (each line parsed once: the cost does not grow with the run)."""
        if self._ledger is None:
            self._ledger = Reader(self.rundir / "ledger.jsonl")
        return self._ledger.attempts()

    def stop_requested(self) -> bool:
        return self.control is not None and self.control.stop_requested()

    def precheck(self) -> None:
        """Halt before a step when a stop was requested or a budget is spent."""
        if self.cancel.is_set() or self.stop_requested():
            raise Halt(StopReason.STOPPED, "stop requested")
        spent = self.budget_left()
        if spent:
            raise Halt(StopReason.BUDGET_EXCEEDED, spent)

    def begin(self, n: int) -> None:
        """Iteration ``n`` starts (after the pre-check), as run.json says."""
        self.precheck()
        begun, self._begun = self._begun, 0
        if begun != n:  # not yet named by the last iteration's save
            self.record.iterations = n
            self.save()

    def complete(self, n: int, *, next_iteration: int | None = None) -> None:
        """Iteration ``n`` is done: a resumed run goes on from its head and loop state.

        ``next_iteration``: the one the loop goes on to, named begun in the same save (one write of
        run.json fewer per iteration); should it not start after all, :meth:`unbegin` takes it back.
        A runner killed in between leaves ``completed`` right, which is all ``resume`` goes by.
        """
        self.record.completed = n
        self.record.completed_head = self.workspace.head
        self.record.loop = replace(self.loop)
        if next_iteration is not None:
            self.record.iterations = self._begun = next_iteration
        self.save()

    def unbegin(self) -> None:
        """The iteration named begun by the last one's save did not start (a stop, a spent budget, Ctrl-C)."""
        if self._begun:
            self.record.iterations = self._begun - 1
            self._begun = 0

    def new_step(self, role: str, adapter: str) -> tuple[int, Path]:
        with self._lock:
            number = self.next_step
            self.next_step += 1
        return number, self.rundir.step_dir(number, role, adapter)

    def release(self) -> None:
        """Let go of what the run held open while it ran."""
        if self.anchor is not None:
            self.anchor.close()

    def add_step(self, step: StepRecord) -> None:
        with self._lock:
            self.record.steps.append(step)
            self.record.totals.add(step)
            self._save()

    def save(self) -> None:
        with self._lock:
            self._save()

    def save_if_possible(self) -> None:
        """Save, unless the disk is too full for it: the run's last record, written where a byte still can be."""

        with unless_disk_full():
            self.save()

    def _save(self) -> None:
        self.sync_workspace()
        self.record.duration_s = round(self.elapsed(), 3)
        if self._writer is None:
            self._writer = RunJsonWriter(self.rundir / "run.json")
        self._writer.save(self.record)

    def sync_workspace(self) -> None:
        self.record.workspace.head = self.workspace.head

    def elapsed(self) -> float:
        """Wall time of the run, earlier runners of a resumed run included."""
        return self.record.elapsed_before_s + time.monotonic() - self.started

    def step_timeout(self) -> float:
        """A step's timeout: --timeout, cut to the wall time --max-time leaves (at least a second)."""
        if self.spec.max_time is None:
            return self.spec.timeout
        return max(1.0, min(self.spec.timeout, self.spec.max_time - self.elapsed()))

    def remaining_usd(self) -> float | None:
        if self.spec.max_cost is None:
            return None
        return max(0.0, self.spec.max_cost - self.record.totals.cost_usd)

    def budget_left(self) -> str | None:
        """Which budget is spent, or None while all have some left."""
        spec, totals = self.spec, self.record.totals
        if spec.max_cost is not None and totals.cost_usd >= spec.max_cost:
            return f"spent ${totals.cost_usd:.4f} of --max-cost ${spec.max_cost:g}"
        if spec.max_tokens is not None and totals.tokens >= spec.max_tokens:
            return f"used {totals.tokens} tokens of --max-tokens {spec.max_tokens}"
        if spec.max_time is not None and self.elapsed() >= spec.max_time:
            return f"ran {self.elapsed():.0f}s of --max-time {spec.max_time:g}s"
        return None


class RunnerLock:
    """One runner per run: an exclusive lock on ``runner.lock`` that dies with the process holding it.

    Whether the lock is held is also how every other command tells a live run from a dead one
    (``loope.runners``). The lock belongs to the open file, not to a process: a runner hands it on
    by passing the file descriptor to the process that takes the run over (``adopt``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def fd(self) -> int | None:
        return self._fd

    def acquire(self) -> bool:

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        # A command asking whether the run is alive takes a shared lock for an instant: try a few
        # times before saying another runner has it.
        for attempt in range(20):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 19:
                    os.close(fd)
                    return False
                time.sleep(0.01)
        self._fd = fd
        self.write_pid(os.getpid())
        return True

    def adopt(self, fd: int) -> bool:
        """Take over the lock a parent holds on this file through ``fd`` (passed to this process).

        False when ``fd`` is not this run's lock file, or another process holds the lock.
        """
        try:
            mine, named = os.fstat(fd), os.stat(self.path)
        except OSError:
            return False
        if (mine.st_dev, mine.st_ino) != (named.st_dev, named.st_ino):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held through this very file: granted at once
        except OSError:
            return False
        os.set_inheritable(fd, False)  # the agents this runner starts must not keep the run alive
        self._fd = fd
        self.write_pid(os.getpid())
        return True

    def write_pid(self, pid: int) -> None:
        """Name ``pid`` as the holder (at offset 0: a parent and the child it passed the file to share one offset)."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{pid}\n".encode(), 0)

    def release(self) -> None:
        """Close the file; the lock goes with the last descriptor of it (a child it was passed to keeps it)."""

        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def holder(self) -> str:
        try:
            return self.path.read_text().strip() or "?"
        except OSError:
            return "?"
