"""The metric: a command whose last printed number is the score; the median of K runs."""

from __future__ import annotations

import re
import statistics
import threading
import time
from dataclasses import field
from pathlib import Path

from loope.record import record
from loope.sandbox import UNSANDBOXED, RunSandbox
from loope.text import strip_ansi
from loope.verify.gate import read_output, run_shell

# Thousands separators (1,234,567) are part of one number; other digits glued to words or dots are not numbers.
_NUMBER = re.compile(
    r"(?<![\w.,])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][-+]?\d+)?(?![\w.]|,\d)"
    r"|(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])"
)
# Colour and cursor codes (ESC [ ... letter) would glue a score to the letters around it.


def parse_score(output: str) -> float | None:
    """The last number printed, or None when there is none."""
    last = None
    for match in _NUMBER.finditer(strip_ansi(output)):
        last = match.group(0)
    if last is None:
        return None
    try:
        return float(last.replace(",", ""))
    except ValueError:
        return None


def median(scores: list[float]) -> float:
    return float(statistics.median(scores))


@record(frozen=True)
class Measurement:
    score: float | None
    runs: list[float] = field(default_factory=list)
    error: str | None = None
    """Why there is no score: the command failed, or it printed no number."""
    duration_s: float = 0.0


def measure(
    command: str,
    *,
    cwd: Path,
    log_dir: Path,
    repeat: int,
    timeout: float | None,
    cancel: threading.Event | None = None,
    sandbox: RunSandbox = UNSANDBOXED,
) -> Measurement:
    """Run the metric ``repeat`` times; the median score, or why there is none."""
    runs: list[float] = []
    started = time.monotonic()
    for index in range(1, repeat + 1):
        log = log_dir / (f"metric-{index}.log" if repeat > 1 else "metric.log")
        proc = run_shell(command, cwd=cwd, log=log, timeout=timeout, cancel=cancel, sandbox=sandbox)
        output = read_output(log)
        if not proc.ok:
            return Measurement(
                None,
                runs,
                f"the metric command failed ({proc.describe()}): {command}",
                time.monotonic() - started,
            )
        score = parse_score(output)
        if score is None:
            last = output.strip().splitlines()[-1:] or ["(no output)"]
            return Measurement(
                None,
                runs,
                f"the metric command printed no number (last line: {last[0][:120]!r}): {command}",
                time.monotonic() - started,
            )
        runs.append(score)
    return Measurement(median(runs), runs, None, time.monotonic() - started)
