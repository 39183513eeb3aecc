"""state.md: the agent's memory between fresh sessions. The runner reads only its frontmatter."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

STATUSES = ("in-progress", "done", "blocked")
_FRONTMATTER = re.compile(r"\A\ufeff?\s*---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_SECTION = r"(?m)^#+\s*(.+?)\s*$"  # compiled on first use (re keeps it): a blocked run's notes only
_PLAIN_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): +([A-Za-z0-9][A-Za-z0-9_-]*) *")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_YAML_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "null", "y", "n"})
_PREFIXES = ("0x", "0o", "0b")


def initial(run_id: str, goal: str) -> str:
    return (
        f"---\nloop_id: {run_id}\nstatus: in-progress\niteration: 0\n---\n"
        f"# Goal\n{goal.strip()}\n\n# Progress\n(nothing yet)\n\n# Next Action\n"
        "Read the goal and the code, then take the first concrete step.\n\n# Notes\n"
    )


def create(path: Path, run_id: str, goal: str) -> None:
    """Write a fresh state file unless one is already there (a resumed run keeps its memory)."""
    if not path.exists():
        from loope.records.atomic import write_text  # a write: `loope status RUN` only reads the file

        write_text(path, initial(run_id, goal))


class State(NamedTuple):
    """The state file as read: its status, iteration and loop id, its frontmatter and its text."""

    status: str
    """in-progress, done or blocked; in-progress when the file is missing or invalid."""
    iteration: int | None
    loop_id: str | None
    frontmatter: dict[str, Any]
    text: str
    problem: str | None = None
    """Why the frontmatter could not be read, when it could not."""

    @property
    def notes(self) -> str:
        return section(self.text, "notes")

    @property
    def body(self) -> str:
        """The markdown after the frontmatter (all of it when there is none)."""
        match = _FRONTMATTER.match(self.text)
        return (self.text[match.end() :] if match else self.text).strip()


def section(text: str, name: str) -> str:
    """The body of the markdown section called ``name`` (case-insensitive), or ''."""
    matches = list(re.finditer(_SECTION, text))
    for i, match in enumerate(matches):
        if match.group(1).strip().lower() == name.lower():
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            return text[match.end() : end].strip()
    return ""


def plain_mapping(text: str) -> dict[str, Any] | None:
    """The frontmatter as YAML reads it when every line is ``key: word`` or ``key: 123``, else None (ask YAML).

    That is the frontmatter loope writes and agents keep; reading it without PyYAML keeps ``loope
    status`` from importing it. A word YAML would read as something else than a string (``yes``,
    ``null``, ``0x1f``, a date, ``1_000``) is left to YAML.
    """
    data: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        found = _PLAIN_LINE.fullmatch(line)
        if found is None:
            return None
        key, value = found.groups()
        if key.lower() in _YAML_WORDS:
            return None
        if _DECIMAL.fullmatch(value):
            data[key] = int(value)
        elif value.lower() in _YAML_WORDS or not any(c.isalpha() for c in value) or value[:2].lower() in _PREFIXES:
            return None
        else:
            data[key] = value
    return data or None


def read(path: Path, run_id: str | None = None) -> State:
    """Parse the frontmatter tolerantly (comments, quotes, odd case); problems are noted, never raised.

    With ``run_id``, a ``done`` counts only from this run's frontmatter (its ``loop_id``, a numeric
    ``iteration``): a state file copied from another run, or a bare ``status: done``, ends nothing.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return State("in-progress", None, None, {}, "", problem="the state file is missing")
    except OSError as exc:
        return State("in-progress", None, None, {}, "", problem=f"the state file cannot be read ({exc})")
    match = _FRONTMATTER.match(text)
    if not match:
        return State("in-progress", None, None, {}, text, problem="the state file has no --- frontmatter ---")
    data = plain_mapping(match.group(1))
    if data is None:
        import yaml

        try:
            data = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0]
            return State("in-progress", None, None, {}, text, problem=f"invalid frontmatter: {first}")
    if not isinstance(data, dict):
        return State("in-progress", None, None, {}, text, problem="the frontmatter is not a mapping")
    # Agents write ``Status: Done`` as often as ``status: done``: keys are matched whatever their case.
    keys = {str(k).strip().lower(): v for k, v in data.items()}
    raw_status = str(keys.get("status", "")).strip().strip("'\"").lower().replace("_", "-").replace(" ", "-")
    problem = None
    if raw_status not in STATUSES:
        problem = f"unknown status {keys.get('status')!r} (expected {', '.join(STATUSES)})"
        raw_status = "in-progress"
    raw_iteration = keys.get("iteration")
    iteration = raw_iteration if isinstance(raw_iteration, int) and not isinstance(raw_iteration, bool) else None
    loop_id = str(keys["loop_id"]).strip() if keys.get("loop_id") is not None else None
    if run_id is not None and raw_status == "done" and problem is None:
        if loop_id != run_id:
            problem = f"status done ignored: loop_id is {loop_id!r}, this run is {run_id!r}"
        elif iteration is None:
            problem = f"status done ignored: iteration should be a number (got {raw_iteration!r})"
        if problem:
            raw_status = "in-progress"
    return State(
        raw_status,
        iteration,
        loop_id,
        {k: v for k, v in data.items() if isinstance(k, str)},
        text,
        problem,
    )
