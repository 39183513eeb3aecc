"""Helpers the tests share."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def eventually(condition: Callable[[], object], timeout: float = 60.0) -> bool:
    """Whether ``condition()`` becomes true within ``timeout`` seconds (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def interrupt_when(started: Sequence[Path], argv: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``argv``, press Ctrl-C (SIGINT) once every file in ``started`` holds something; exit code, out, err."""
    proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text() for p in started):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agents never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err
