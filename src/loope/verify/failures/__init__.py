"""Pull the failing checks out of a test runner's output.

The next agent iteration does better with "which test, and what went wrong"
than with a few hundred lines of raw log, so :func:`parse_failures` reduces the
combined stdout+stderr of a verify command to a list of :class:`Failure`.

Recognised formats (detected from the text itself, several may be mixed):

* pytest: the "short test summary info" ``FAILED``/``ERROR`` lines, with the
  ``E   `` lines of the matching FAILURES/ERRORS section as the message;
  collection errors are reported under the file that failed to import.
  Without a summary the sections, or the ``-v`` progress lines, are used.
* unittest (``python -m unittest``, Django's runner): ``FAIL:``/``ERROR:``
  blocks, the message being the exception at the end of the traceback.
* cargo test: ``test x ... FAILED`` (and ``-q``'s ``x --- FAILED``) with the
  panic message from the ``---- x stdout ----`` section; rustc ``error[..]``
  diagnostics are reported under the crate that failed to compile.
* go test: ``--- FAIL: Name`` (subtests as ``Parent/sub``, a parent dropped
  when only its subtests failed) with the ``file.go:N:`` lines of either the
  plain or the ``-v`` layout; ``# pkg`` compile errors from ``go build``/
  ``go vet``/``go test`` are reported under the package.
* jest: the ``●`` blocks naming each failing test ("Test suite failed to
  run" is reported under the file of the preceding ``FAIL`` header).
* vitest: the `` FAIL  file > suite > test`` blocks of its failure summary.

Each runner's module also reads the failing count of its closing summary line
(``summary_count``), which ``loope.verify.summary`` adds up.

Everything here is pure and linear in the size of the output: ANSI colour and
other control characters are dropped, over-long lines are cut before any
regular expression sees them, and message scans are bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from loope.verify.failures import cargo, go, jest, pytest, unittest, vitest
from loope.verify.failures.common import Failure, Parser, clean_lines

__all__ = ["Failure", "parse_failures"]

_log = logging.getLogger(__name__)

_PARSERS: tuple[Parser, ...] = (
    pytest.parse_pytest,
    unittest.parse_unittest,
    cargo.parse_cargo,
    go.parse_go,
    jest.parse_jest,
    vitest.parse_vitest,
)


def parse_failures(
    output: str, limit: int = 20, *, on_error: Callable[[str, Exception], None] | None = None
) -> list[Failure]:
    """The failing checks found in a test runner's output, in order, de-duplicated; [] when none recognised.

    ``limit`` caps the number returned; failures are keyed by (runner, test id). A parser that
    raises is skipped (the others still run) and reported to ``on_error`` (by default, this
    module's logger) with its name.
    """
    if limit <= 0 or not output or not isinstance(output, str):
        return []
    lines = clean_lines(output)
    found: list[tuple[int, int, Failure]] = []
    for rank, parser in enumerate(_PARSERS):
        try:
            hits = parser(lines)
        except Exception as exc:  # noqa: BLE001 - a parser bug skips that runner instead of failing the loop
            (on_error or _log_error)(parser.__module__.rsplit(".", 1)[-1], exc)
            continue
        found.extend((pos, rank, failure) for pos, failure in hits)
    found.sort(key=lambda item: (item[0], item[1]))
    result: list[Failure] = []
    seen: set[tuple[str, str]] = set()
    for _pos, _rank, failure in found:
        key = (failure.runner, failure.test)
        if key in seen:
            continue
        seen.add(key)
        result.append(failure)
        if len(result) >= limit:
            break
    return result


def _log_error(runner: str, exc: Exception) -> None:
    _log.warning("the %s output parser failed and was skipped: %r", runner, exc, exc_info=exc)
