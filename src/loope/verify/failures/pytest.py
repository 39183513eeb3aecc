"""pytest: the short test summary, else the FAILURES/ERRORS sections, else the ``-v`` progress lines."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from loope.verify.failures.common import Found, failure_of, first_lines


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

    def failures(self) -> list[Found]:
        if self.summary:
            by_key: dict[str, deque[_PytestSection]] = {}
            for section in self.sections:
                by_key.setdefault(section.key, deque()).append(section)
            found: list[Found] = []
            for pos, nodeid, msg in self.summary:
                message = ""
                for key in (_pytest_short_key(nodeid), nodeid):
                    queue = by_key.get(key)
                    if queue:
                        message = first_lines(queue.popleft().e_lines)
                        break
                found.append((pos, failure_of(nodeid, message or first_lines([msg]), "pytest")))
            return found
        if self.sections:
            return [(s.pos, failure_of(s.key, first_lines(s.e_lines), "pytest")) for s in self.sections]
        return [(pos, failure_of(nodeid, "", "pytest")) for pos, nodeid in self.progress]


def parse_pytest(lines: Sequence[str]) -> list[Found]:
    scan = _PytestScan()
    for pos, line in enumerate(lines):
        scan.feed(pos, line)
    return scan.failures()


_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b.*?=*$")
_SUMMARY_PART = re.compile(r"(\d+) (failed|errors?)\b")


def summary_count(line: str) -> int | None:
    """Failed tests and errors in pytest's closing ``== 2 failed, 1 error in 0.12s ==`` line, else None."""
    if match := _SUMMARY.match(line):
        parts = _SUMMARY_PART.findall(match.group(1))
        return sum(int(n) for n, _ in parts) if parts else None
    return None
