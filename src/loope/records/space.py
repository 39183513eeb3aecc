"""A full disk: recognizing one, and the space a run keeps in reserve to record that it failed.

A run that fills the disk (an agent's ``dd``, a test suite's logs, a huge diff) must still end as a
run: its run.json saying ``failed`` and why, its report, its last event. Each of those writes needs
a few pages, so a running run holds a reserve file in its run dir; finalizing deletes it first, and
the space it frees is what the last records are written in.
"""

from __future__ import annotations

import contextlib
import errno
import os
import traceback
from collections.abc import Iterator
from pathlib import Path

from loope.records.atomic import append_line, write_text

RESERVE_NAME = ".reserve"
RESERVE_BYTES = 512 * 1024
"""Enough for run.json, report.md and the last events of a run with hundreds of steps."""

_FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXT = ("no space left on device", "disk quota exceeded", "database or disk is full")


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the disk or the quota is full."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in _FULL:
            return True
        if any(text in str(seen).lower() for text in _FULL_TEXT):  # git's stderr, sqlite's message
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def full_disk_detail(exc: BaseException, when: str = "") -> str:
    """One line: the disk is full, where (and ``when``: `` while finalizing``), and what to do."""
    where = f" writing {exc.filename}" if isinstance(exc, OSError) and exc.filename else ""
    return f"the disk is full{where}{when} ({_reason(exc)}); free some space, then start the run again"


def failure_detail(exc: BaseException, error_log: Path) -> str:
    """The stop detail of a run that loope itself failed; the traceback goes to ``error_log`` if it can."""
    if disk_full(exc):
        return full_disk_detail(exc)

    try:
        write_text(error_log, traceback.format_exc())
    except OSError:
        return f"loope failed: {type(exc).__name__}: {exc}"
    return f"loope failed: {type(exc).__name__}: {exc} (see {error_log.name})"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return os.strerror(exc.errno or errno.ENOSPC)
    return " ".join(str(exc).split())[:300]


class Reserve:
    """A file of real (not sparse) blocks held while a run runs, released to finalize it."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / RESERVE_NAME

    def hold(self) -> None:
        """Allocate the reserve; an OSError (ENOSPC) when the disk cannot spare it."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            chunk = b"\0" * 65536
            for _ in range(RESERVE_BYTES // len(chunk)):
                os.write(fd, chunk)  # zeros written, not a hole: the pages are really taken
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.release()
            raise
        os.close(fd)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


@contextlib.contextmanager
def unless_disk_full() -> Iterator[None]:
    """Run the block; a full disk ends it quietly (what it could not write is written later, if ever)."""
    try:
        yield
    except OSError as exc:
        if not disk_full(exc):
            raise


def append_quietly(path: Path, line: str) -> None:
    """Append a diagnostic line when the disk allows it: a log that cannot be written must not end a run."""

    with contextlib.suppress(OSError):
        append_line(path, line)
