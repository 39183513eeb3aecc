"""cargo test (``... FAILED`` and ``--- FAILED``, the panic as message) and rustc's ``error[..]`` diagnostics."""

from __future__ import annotations

import re
from collections.abc import Sequence

from loope.verify.failures.common import MAX_SCAN, Found, failure_of, first_lines

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
        for follow in section[k + 1 : k + 1 + MAX_SCAN]:
            if not follow or follow.startswith(("note: ", "stack backtrace:")):
                break
            collected.append(follow)
        if collected and not rest.endswith(":"):
            collected[-1] = _CARGO_OLD_LOCATION.sub("", collected[-1])
        return first_lines(collected)
    return first_lines(section[:MAX_SCAN])


def parse_cargo(lines: Sequence[str]) -> list[Found]:
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
        if current is not None and len(current) < MAX_SCAN:
            current.append(line)
    found = [(pos, failure_of(name, _cargo_message(sections.get(name, [])), "cargo")) for pos, name in failed]
    return found + _parse_rustc(lines)


def _parse_rustc(lines: Sequence[str]) -> list[Found]:
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
    return [(first, failure_of(crate or "build", first_lines(errors), "cargo"))]


_SUMMARY = re.compile(r"^test result: FAILED\. \d+ passed; (\d+) failed;")


def summary_count(line: str) -> int | None:
    """Failed tests in cargo's ``test result: FAILED. 3 passed; 2 failed; ...``, else None."""
    return int(match.group(1)) if (match := _SUMMARY.match(line)) else None
