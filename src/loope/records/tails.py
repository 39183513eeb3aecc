"""Reading a run from outside its runner: new lines of events.jsonl, the tail of a check's output.

Both read only what was added since the last look (a byte offset, or the file's last few kilobytes),
so following a run for hours costs the same per poll as following it for a minute.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loope.text import strip_ansi

TAIL_BYTES = 8192
POLL_S = 0.2
CHECK_ADAPTERS = ("gate", "metric", "success")


def tail_lines(path: Path, count: int, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The last ``count`` non-empty lines of ``path`` (read from its last ``max_bytes``); [] when it is absent."""

    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    text = strip_ansi(data.decode("utf-8", "replace")).replace("\r", "\n")
    return [line.rstrip() for line in text.splitlines() if line.strip()][-count:]


def check_log(step_dir: Path) -> Path | None:
    """The output log a check step is writing (the newest, when a metric repeats)."""
    try:
        logs = [p for p in step_dir.iterdir() if p.suffix == ".log"]
    except OSError:
        return None
    return max(logs, key=lambda p: p.stat().st_mtime_ns) if logs else None


class LineTail:
    """The complete lines appended to a file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""
        """The start of a line not yet complete (read again once its newline is written)."""
        self._inode: int | None = None

    def read_lines(self) -> list[bytes]:
        try:
            with self.path.open("rb") as handle:
                info = os.fstat(handle.fileno())
                if (self._inode is not None and info.st_ino != self._inode) or info.st_size < self.offset:
                    self.offset, self.pending = 0, b""  # put back whole by its writer: read it again
                self._inode = info.st_ino
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        self.offset += len(data)
        complete, newline, self.pending = (self.pending + data).rpartition(b"\n")
        return complete.split(b"\n") if newline else []


class EventTail(LineTail):
    """The events the runner appended to an events.jsonl since the last read, as dicts.

    Only the runner's lines are taken: each carries the next ``seq`` (``records.sealed``); a line
    written by anything else, or one already read before the file was put back, is skipped.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.expected: int | None = None

    def read(self) -> list[dict[str, Any]]:

        events = []
        for line in self.read_lines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a torn or damaged line: skip it, never stop following
            if isinstance(event, dict):
                taken, self.expected = next_line(event, self.expected)
                if taken:
                    events.append(event)
        return events


class OutputTail:
    """New lines of the checks a run is running, for views that print them as they arrive."""

    def __init__(self, rundir: Path, lines: int = 20) -> None:
        self.rundir = rundir
        self.lines = lines
        self.tails: dict[Path, LineTail] = {}

    def read(self, steps: list[Any]) -> list[str]:
        """New output of the running check ``steps`` (``records.runview.Step``), at most ``lines`` of it per poll."""

        out: list[str] = []
        for step in steps:
            if step.role != "verifier" or step.adapter not in CHECK_ADAPTERS or not step.dir:
                continue
            log = check_log(self.rundir / step.dir)
            if log is None:
                continue
            tail = self.tails.setdefault(log, LineTail(log))
            text = [strip_ansi(b.decode("utf-8", "replace")).rstrip() for b in tail.read_lines()]
            out += [line for line in text if line.strip()][-self.lines :]
        return out


def follow(
    source: EventTail,
    *,
    alive: Callable[[], bool],
    poll_s: float = POLL_S,
    on_idle: Callable[[], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Each new event of ``source`` as it is written, until ``run_finished``.

    Stops too when ``alive()`` says the runner is gone and nothing more was written (a runner that
    died leaves no ``run_finished``). ``on_idle`` runs between polls (to draw output as it arrives).
    """
    while True:
        events = source.read()
        for event in events:
            yield event
            if event.get("type") == "run_finished":
                return
        if not events:
            if not alive():
                yield from source.read()
                return
            if on_idle is not None:
                on_idle()
            time.sleep(poll_s)


def next_line(data: dict[str, Any], expected: int | None) -> tuple[bool, int | None]:
    """Whether a reader takes event ``data`` given the ``seq`` it expects next (None: any), and what it expects then.

    A line without ``seq`` is taken only before the first numbered one (a run written by an older loope).
    """
    seq = data.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        return expected is None, expected
    if expected is not None and seq != expected:
        return False, expected
    return True, seq + 1
