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

Everything here is pure and linear in the size of the output: ANSI colour and
other control characters are dropped, over-long lines are cut before any
regular expression sees them, and message scans are bounded.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from loope.text import strip_ansi

__all__ = ["Failure", "parse_failures"]


@dataclass(frozen=True)
class Failure:
    """One failing check."""

    test: str
    """Test id as the runner names it, e.g. ``tests/test_calc.py::test_add``."""
    message: str
    """The assertion / error line(s): at most 3 lines and 300 characters."""
    runner: str
    """``pytest``, ``unittest``, ``cargo``, ``go``, ``jest`` or ``vitest``."""


MAX_MESSAGE_LINES = 3
MAX_MESSAGE_CHARS = 300
_MAX_TEST_CHARS = 300
_MAX_LINE_CHARS = 2000  # longer lines are cut before matching
_MAX_SCAN = 60  # lines looked at after a header when collecting its message

_Found = tuple[int, Failure]  # (line index where it was reported, failure)


def parse_failures(output: str, limit: int = 20) -> list[Failure]:
    """The failing checks found in a test runner's output, in order, de-duplicated; [] when none recognised.

    ``limit`` caps the number returned; failures are keyed by (runner, test id).
    """
    if limit <= 0 or not output or not isinstance(output, str):
        return []
    lines = _clean_lines(output)
    found: list[tuple[int, int, Failure]] = []
    for rank, parser in enumerate(_PARSERS):
        try:
            hits = parser(lines)
        except Exception:  # a parser bug must not break the loop: skip that runner  # noqa: BLE001 - a parser bug skips that runner instead of failing the loop
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


# --------------------------------------------------------------------------
# shared helpers

_CONTROL = {c: None for c in (*range(0, 9), *range(11, 32), 127)}


def _clean_lines(output: str) -> list[str]:
    text = strip_ansi(output)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.translate(_CONTROL)
    return [line[:_MAX_LINE_CHARS].rstrip() for line in text.split("\n")]


def _message(lines: Iterable[str]) -> str:
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped:
            kept.append(stripped)
            if len(kept) == MAX_MESSAGE_LINES:
                break
    text = "\n".join(kept)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1].rstrip() + "…"
    return text


def _failure(test: str, message: str, runner: str) -> Failure:
    test = test.strip()
    if len(test) > _MAX_TEST_CHARS:
        test = test[: _MAX_TEST_CHARS - 1] + "…"
    return Failure(test=test, message=message, runner=runner)


def _is_rule(line: str, char: str) -> bool:
    """A separator line made only of ``char`` (unittest, pytest)."""
    return len(line) >= 20 and not line.strip(char)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


# --------------------------------------------------------------------------
# pytest


@dataclass
class _PytestSection:
    pos: int
    key: str  # "test_add", "TestCalc.test_add", "tests/test_x.py" for collection errors
    e_lines: list[str]


def _pytest_section_key(title: str) -> str:
    for prefix in ("ERROR collecting ", "ERROR at setup of ", "ERROR at teardown of "):
        if title.startswith(prefix):
            return title[len(prefix) :].strip()
    return title


def _split_pytest_summary(rest: str) -> tuple[str, str]:
    """Split ``nodeid - message``; a parametrize id may itself contain " - "."""
    sep = rest.find(" - ")
    bracket = rest.find("[")
    if bracket != -1 and (sep == -1 or bracket < sep):
        close = rest.find("] - ", bracket)
        if close != -1:
            return rest[: close + 1], rest[close + 4 :]
        if rest.endswith("]"):
            return rest, ""
    if sep == -1:
        return rest, ""
    return rest[:sep], rest[sep + 3 :]


def _pytest_short_key(nodeid: str) -> str:
    head, sep, tail = nodeid.partition("::")
    return tail.replace("::", ".") if sep else head


def _pytest_progress_nodeid(line: str) -> str:
    """The node id of a ``-v`` progress line ``path.py::test FAILED [ 50%]``, else ""."""
    if "::" not in line or line[:1].isspace():
        return ""
    body = line
    if body.endswith("]") and "[" in body:  # drop the "[ 66%]" column
        cut = body.rfind("[")
        if body[cut + 1 : -1].strip().endswith("%"):
            body = body[:cut].rstrip()
    for status in (" FAILED", " ERROR"):
        if body.endswith(status):
            nodeid = body[: -len(status)].strip()
            path = nodeid.partition("::")[0]
            if path.endswith(".py") and " " not in path:
                return nodeid
    return ""


class _PytestScan:
    def __init__(self) -> None:
        self.sections: list[_PytestSection] = []
        self.summary: list[tuple[int, str, str]] = []  # (pos, nodeid, message)
        self.progress: list[tuple[int, str]] = []  # -v lines
        self.block = ""  # title of the ====== block we are in
        self.current: _PytestSection | None = None

    def feed(self, pos: int, line: str) -> None:
        if line.startswith("==") and line.endswith("=="):
            self.block = line.strip("=").strip()
            self.current = None
        elif self.block in ("FAILURES", "ERRORS"):
            self._section_line(pos, line)
        elif self.block == "short test summary info":
            self._summary_line(pos, line)
        else:
            nodeid = _pytest_progress_nodeid(line)
            if nodeid:
                self.progress.append((pos, nodeid))

    def _section_line(self, pos: int, line: str) -> None:
        if line.startswith("___") and line.endswith("___"):
            title = line.strip("_").strip()
            if title:
                self.current = _PytestSection(pos, _pytest_section_key(title), [])
                self.sections.append(self.current)
        elif self.current is not None and line[:1] == "E" and (len(line) == 1 or line[1] == " "):
            text = line[1:].strip()
            if not text.startswith(("Use -v to get", "Use -vv to get")):
                self.current.e_lines.append(text)

    def _summary_line(self, pos: int, line: str) -> None:
        for kind in ("FAILED ", "ERROR "):
            if line.startswith(kind):
                nodeid, msg = _split_pytest_summary(line[len(kind) :].strip())
                if nodeid:
                    self.summary.append((pos, nodeid, msg))

    def failures(self) -> list[_Found]:
        if self.summary:
            by_key: dict[str, deque[_PytestSection]] = {}
            for section in self.sections:
                by_key.setdefault(section.key, deque()).append(section)
            found: list[_Found] = []
            for pos, nodeid, msg in self.summary:
                message = ""
                for key in (_pytest_short_key(nodeid), nodeid):
                    queue = by_key.get(key)
                    if queue:
                        message = _message(queue.popleft().e_lines)
                        break
                found.append((pos, _failure(nodeid, message or _message([msg]), "pytest")))
            return found
        if self.sections:
            return [(s.pos, _failure(s.key, _message(s.e_lines), "pytest")) for s in self.sections]
        return [(pos, _failure(nodeid, "", "pytest")) for pos, nodeid in self.progress]


def _parse_pytest(lines: Sequence[str]) -> list[_Found]:
    scan = _PytestScan()
    for pos, line in enumerate(lines):
        scan.feed(pos, line)
    return scan.failures()


# --------------------------------------------------------------------------
# unittest

_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S.*)$")


def _unittest_message(body: Sequence[str]) -> str:
    """The exception at the end of a traceback (the last one when chained)."""
    message: list[str] = []
    state = "start"  # start | frames | message | between
    for line in body:
        if line.startswith("Traceback (most recent call last)"):
            state, message = "frames", []
            continue
        if line.startswith(("During handling of the above exception", "The above exception was")):
            state = "between"
            continue
        if state == "frames":
            if not line or line[:1].isspace():
                continue
            state = "message"
        if state in ("message", "start"):
            message.append(line)
    return _message(message)


def _parse_unittest(lines: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    n = len(lines)
    i = 0
    while i < n - 1:
        if not _is_rule(lines[i], "="):
            i += 1
            continue
        head = _UNITTEST_HEAD.match(lines[i + 1])
        if head is None:
            i += 1
            continue
        kind, test = head.group(1), head.group(2)
        start = i + 2
        for j in range(i + 2, min(i + 8, n)):  # optional docstring lines, then "----"
            if _is_rule(lines[j], "-"):
                start = j + 1
                break
        end = start
        while end < n and not _is_rule(lines[end], "=") and not _is_rule(lines[end], "-"):
            end += 1
        message = _unittest_message(lines[start:end])
        if not message and kind == "UNEXPECTED SUCCESS":
            message = "unexpected success"
        found.append((i + 1, _failure(test, message, "unittest")))
        i = max(end, i + 1)
    return found


# --------------------------------------------------------------------------
# cargo test / rustc

_CARGO_FAILED = re.compile(r"^test (\S.*) \.\.\. FAILED$")
_CARGO_Q_FAILED = re.compile(r"^(\S.*) --- FAILED$")
_CARGO_SECTION = re.compile(r"^---- (\S.*) (?:stdout|stderr) ----$")
_CARGO_PANIC = re.compile(r"^thread '[^']*' (?:\(\d+\) )?panicked at (.*)$")
_CARGO_OLD_LOCATION = re.compile(r"',? \S+:\d+:\d+$")
_RUSTC_ERROR = re.compile(r"^error(\[E\d+\])?: (\S.*)$")
_RUSTC_CRATE = re.compile(r"^error: could not compile `([^`]+)`")


def _cargo_message(section: Sequence[str]) -> str:
    for k, line in enumerate(section):
        panic = _CARGO_PANIC.match(line)
        if panic is None:
            continue
        rest = panic.group(1)
        collected: list[str] = []
        if not rest.endswith(":"):  # Rust < 1.73: panicked at 'msg', src/lib.rs:1:2
            collected.append(rest[1:] if rest.startswith("'") else rest)
        for follow in section[k + 1 : k + 1 + _MAX_SCAN]:
            if not follow or follow.startswith(("note: ", "stack backtrace:")):
                break
            collected.append(follow)
        if collected and not rest.endswith(":"):
            collected[-1] = _CARGO_OLD_LOCATION.sub("", collected[-1])
        return _message(collected)
    return _message(section[:_MAX_SCAN])


def _parse_cargo(lines: Sequence[str]) -> list[_Found]:
    failed: list[tuple[int, str]] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for pos, line in enumerate(lines):
        head = _CARGO_SECTION.match(line)
        if head is not None:
            current = sections.setdefault(head.group(1), [])
            continue
        if line in ("failures:", "successes:") or line.startswith(("test result: ", "running ")):
            current = None
        hit = _CARGO_FAILED.match(line) or _CARGO_Q_FAILED.match(line)
        if hit is not None:
            failed.append((pos, hit.group(1)))
            continue
        if current is not None and len(current) < _MAX_SCAN:
            current.append(line)
    found = [(pos, _failure(name, _cargo_message(sections.get(name, [])), "cargo")) for pos, name in failed]
    return found + _parse_rustc(lines)


def _parse_rustc(lines: Sequence[str]) -> list[_Found]:
    errors: list[str] = []
    first = -1
    crate = ""
    for pos, line in enumerate(lines):
        named = _RUSTC_CRATE.match(line)
        if named is not None:
            crate = crate or named.group(1)
            continue
        error = _RUSTC_ERROR.match(line)
        if error is None or pos + 1 >= len(lines):
            continue
        location = lines[pos + 1].strip()
        if not location.startswith("--> "):
            continue
        code = error.group(1) or ""
        errors.append(f"{location[4:].strip()}: error{code}: {error.group(2)}")
        if first < 0:
            first = pos
    if not errors:
        return []
    return [(first, _failure(crate or "build", _message(errors), "cargo"))]


# --------------------------------------------------------------------------
# go test / go build

_GO_FAIL = re.compile(r"^(\s*)--- FAIL: (\S+) \(\d+(?:\.\d+)?s\)$")
_GO_MARK = re.compile(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)$")
_GO_PKG = re.compile(r"^(?:FAIL|ok  |\?   )\t(\S+)(.*)$")
_GO_BUILD_HEAD = re.compile(r"^# (\S+)(?: \[\S+\])?$")
_GO_LOCATION = re.compile(r"^\S+\.go:\d+(?::\d+)?: \S")


@dataclass
class _GoFailure:
    pos: int
    name: str
    lines: list[str]


class _GoScan:
    def __init__(self) -> None:
        self.failures: list[_GoFailure] = []
        self.builds: dict[str, tuple[int, list[str]]] = {}  # package -> compile errors
        self.package_failures: list[_Found] = []
        self.pending: dict[str, list[str]] = {}  # -v: output printed before "--- FAIL"
        self.running = ""  # -v: test named by the last "=== RUN/CONT/NAME"
        self.collecting: _GoFailure | None = None  # plain: output printed after "--- FAIL"
        self.collect_indent = 0
        self.build: list[str] | None = None  # compile errors being read
        self.segment_fails = 0  # test failures since the last package result line
        self.segment_notes: list[str] = []

    def feed(self, pos: int, line: str, next_line: str) -> None:
        if self.build is not None:
            if _GO_LOCATION.match(line) or (line[:1].isspace() and line.strip()):
                if len(self.build) < _MAX_SCAN:
                    self.build.append(line.strip())
                return
            self.build = None
        fail = _GO_FAIL.match(line)
        if fail is not None:
            self._test_failed(pos, fail.group(2), len(fail.group(1)))
            return
        mark = _GO_MARK.match(line)
        if mark is not None:
            self.running, self.collecting = mark.group(1), None
        elif not self._test_output(line):
            self._other(pos, line, next_line)

    def _test_failed(self, pos: int, name: str, indent: int) -> None:
        self.collecting = _GoFailure(pos, name, self.pending.pop(name, []))
        self.collect_indent = indent
        self.failures.append(self.collecting)
        self.segment_fails += 1

    def _test_output(self, line: str) -> bool:
        """Attribute a line printed by a test; False when it is none."""
        stripped = line.strip()
        if stripped.startswith("--- "):  # --- PASS / --- SKIP
            self.collecting = None
            return True
        if stripped.startswith("panic: "):
            self.segment_notes.append(stripped)
            current = self.collecting
            if current is not None and not any(x.startswith("panic: ") for x in current.lines):
                current.lines.append(stripped)
            self.collecting = None
            return True
        if not stripped or not line[:1].isspace():
            if stripped:
                self.collecting = None
            return False
        if self.collecting is not None and _indent(line) <= self.collect_indent:
            self.collecting = None
        if self.collecting is not None:
            bucket = self.collecting.lines
        elif self.running:
            bucket = self.pending.setdefault(self.running, [])
        else:
            return False
        if len(bucket) < _MAX_SCAN:
            bucket.append(stripped)
        return True

    def _other(self, pos: int, line: str, next_line: str) -> None:
        head = _GO_BUILD_HEAD.match(line)
        if head is not None and _GO_LOCATION.match(next_line):
            self.build = self.builds.setdefault(head.group(1), (pos, []))[1]
            return
        pkg = _GO_PKG.match(line)
        if pkg is not None:
            if line.startswith("FAIL\t") and self.segment_fails == 0:
                self._package_failed(pos, pkg.group(1), pkg.group(2).strip())
            self.segment_fails, self.segment_notes, self.running, self.pending = 0, [], "", {}
            return
        stripped = line.strip()
        if stripped.startswith("exit status ") or "test timed out" in stripped:
            self.segment_notes.append(stripped)

    def _package_failed(self, pos: int, name: str, tail: str) -> None:
        """A package failed without a failing test: no build, a panic in init, os.Exit..."""
        if name in self.builds:
            return
        if tail.startswith("["):
            note = f"{name} {tail}"
        else:
            note = next(iter(self.segment_notes), "package failed without a failing test")
        self.package_failures.append((pos, _failure(name, _message([note]), "go")))

    def found(self) -> list[_Found]:
        parents: set[str] = set()  # names with a failing subtest
        for f in self.failures:
            cut = f.name.rfind("/")
            while cut > 0:
                parents.add(f.name[:cut])
                cut = f.name.rfind("/", 0, cut)
        found = [
            (f.pos, _failure(f.name, _message(f.lines), "go"))
            for f in self.failures
            if f.lines or f.name not in parents
        ]
        found.extend((pos, _failure(name, _message(errors), "go")) for name, (pos, errors) in self.builds.items())
        return found + self.package_failures


def _parse_go(lines: Sequence[str]) -> list[_Found]:
    scan = _GoScan()
    for pos, line in enumerate(lines):
        scan.feed(pos, line, lines[pos + 1] if pos + 1 < len(lines) else "")
    return scan.found()


# --------------------------------------------------------------------------
# jest / vitest

_JS_FILE_HEAD = re.compile(r"^\s*FAIL\s+(\S.*)$")
_JEST_BULLET = re.compile(r"^\s*● (\S.*)$")
_JS_CODE_FRAME = re.compile(r"^\s*>?\s*\d+\s?\|")
_JS_DIFF_LEGEND = re.compile(r"^[-+] (?:Expected|Received)\b")
_JEST_NOT_TESTS = ("Console", "Validation Error", "Validation Error:")
_VITEST_BANNER = re.compile(r"^\s*RUN\s+v\d")


def _js_message(lines: Sequence[str], start: int, *, stop: Callable[[str], bool]) -> str:
    collected: list[str] = []
    in_diff = False  # after "- Expected / + Received" only the changed lines matter
    for line in lines[start : start + _MAX_SCAN]:
        stripped = line.strip()
        if stop(line) or _JS_CODE_FRAME.match(line) or stripped.startswith(("at ", "❯ ")):
            break
        if _JS_DIFF_LEGEND.match(stripped):
            in_diff = True
            continue
        if in_diff and not stripped.startswith(("-", "+")):
            continue
        if stripped:
            collected.append(stripped)
            if len(collected) == MAX_MESSAGE_LINES:
                break
    return _message(collected)


def _jest_stop(line: str) -> bool:
    return bool(_JEST_BULLET.match(line) or _JS_FILE_HEAD.match(line)) or line.startswith(
        ("Test Suites:", "PASS ", " PASS ")
    )


def _parse_jest(lines: Sequence[str]) -> list[_Found]:
    found: list[_Found] = []
    current_file = ""
    has_summary = any(x.startswith("Test Suites:") for x in lines)
    for pos, line in enumerate(lines):
        head = _JS_FILE_HEAD.match(line)
        if head is not None:
            current_file = head.group(1).strip()
            continue
        bullet = _JEST_BULLET.match(line)
        if bullet is None:
            continue
        name = bullet.group(1).strip()
        if not (current_file or has_summary):
            continue
        if name in _JEST_NOT_TESTS or name.endswith(("Warning", "Warning:")):
            continue
        if name == "Test suite failed to run":
            name = current_file or name
        found.append((pos, _failure(name, _js_message(lines, pos + 1, stop=_jest_stop), "jest")))
    return found


def _vitest_head(line: str) -> str:
    """The test id of a vitest "FAIL" header, or "" when the line is none."""
    head = _JS_FILE_HEAD.match(line)
    if head is None:
        return ""
    name = head.group(1).strip()
    if " > " in name:
        return name
    if name.endswith(" ]") and " [ " in name:  # a suite that failed to load
        return name[: name.find(" [ ")].strip()
    return ""


def _vitest_stop(line: str) -> bool:
    return "⎯" in line or bool(_vitest_head(line))


def _parse_vitest(lines: Sequence[str]) -> list[_Found]:
    if not any(_VITEST_BANNER.match(x) or x.lstrip().startswith("Test Files ") or "⎯" in x for x in lines):
        return []
    found: list[_Found] = []
    group: list[tuple[int, str]] = []  # consecutive headers share one error
    for pos, line in enumerate(lines):
        name = _vitest_head(line)
        if name:
            group.append((pos, name))
            next_line = lines[pos + 1] if pos + 1 < len(lines) else ""
            if _vitest_head(next_line):
                continue
            message = _js_message(lines, pos + 1, stop=_vitest_stop)
            found.extend((p, _failure(n, message, "vitest")) for p, n in group)
            group = []
    return found


_PARSERS: tuple[Callable[[Sequence[str]], list[_Found]], ...] = (
    _parse_pytest,
    _parse_unittest,
    _parse_cargo,
    _parse_go,
    _parse_jest,
    _parse_vitest,
)
