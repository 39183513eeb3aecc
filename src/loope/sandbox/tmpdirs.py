"""A finished step's private /tmp, removed on a thread of its own rather than between two steps.

Removing it costs what the file system charges for unlinking: on ext4 a journal update for each
directory, and bubblewrap leaves one in it for each path under /tmp the step was shown (a repository
or a script there). That took from one to several milliseconds on the way from a step to the next.
Nothing writes there any more once the step is over (its processes were ended with it), so the
removal goes on while the runner does the next thing; a run waits for what is left as it ends
(``Engine.drive``), so none outlives it.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
from pathlib import Path


class _Remover:
    """One thread per process, started with the first directory handed to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.Queue[Path] | None = None
        self._pid = 0

    def remove_later(self, path: Path) -> None:
        with self._lock:
            if self._queue is None or self._pid != os.getpid():  # a forked child has no thread: its own
                self._queue, self._pid = queue.Queue(), os.getpid()
                threading.Thread(target=_remove, args=(self._queue,), name="loope-tmp-remover", daemon=True).start()
            self._queue.put(path)

    def wait(self) -> None:
        if self._queue is not None and self._pid == os.getpid():
            self._queue.join()


def _remove(paths: queue.Queue[Path]) -> None:
    while True:
        path = paths.get()
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            paths.task_done()


_REMOVER = _Remover()


def remove_later(path: Path) -> None:
    """Remove the directory ``path`` and all in it soon, on the remover's thread."""
    _REMOVER.remove_later(path)


def wait() -> None:
    """Return once every directory handed over so far is gone."""
    _REMOVER.wait()
