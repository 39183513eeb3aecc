"""go test: ``--- FAIL:`` (subtests as ``Parent/sub``) with their ``file.go:N:`` lines; ``# pkg`` build errors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from loope.verify.failures.common import MAX_SCAN, Found, failure_of, first_lines, indent_of

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
        self.package_failures: list[Found] = []
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
                if len(self.build) < MAX_SCAN:
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
        if self.collecting is not None and indent_of(line) <= self.collect_indent:
            self.collecting = None
        if self.collecting is not None:
            bucket = self.collecting.lines
        elif self.running:
            bucket = self.pending.setdefault(self.running, [])
        else:
            return False
        if len(bucket) < MAX_SCAN:
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
        self.package_failures.append((pos, failure_of(name, first_lines([note]), "go")))

    def found(self) -> list[Found]:
        parents: set[str] = set()  # names with a failing subtest
        for f in self.failures:
            cut = f.name.rfind("/")
            while cut > 0:
                parents.add(f.name[:cut])
                cut = f.name.rfind("/", 0, cut)
        found = [
            (f.pos, failure_of(f.name, first_lines(f.lines), "go"))
            for f in self.failures
            if f.lines or f.name not in parents
        ]
        found.extend((pos, failure_of(name, first_lines(errors), "go")) for name, (pos, errors) in self.builds.items())
        return found + self.package_failures


def parse_go(lines: Sequence[str]) -> list[Found]:
    scan = _GoScan()
    for pos, line in enumerate(lines):
        scan.feed(pos, line, lines[pos + 1] if pos + 1 < len(lines) else "")
    return scan.found()
