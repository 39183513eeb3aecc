"""The fleet file (TOML): ``[fleet]`` settings, ``[defaults]`` for every task, ``[[task]]`` tables.

Each task is an ordinary run: its keys are loope.toml's, layered as
spec defaults < ``[defaults]`` < the task's own loope.toml < the task's keys,
so a fleet file can be checked whole before any loop starts.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loope.errors import LoopeError
from loope.proc import run_process
from loope.text import parse_duration
from loope.workspace.git import safe_command, safe_env

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FLEET_KEYS = {"jobs", "max_cost", "max_time", "temporal", "remote", "namespace", "task_queue"}
_TEXT_KEYS = ("temporal", "remote", "namespace", "task_queue")
_TASK_ONLY = {"name", "workdir", "repo"}


@dataclass(frozen=True)
class FleetSettings:
    """The ``[fleet]`` table: how many loops at once, and the budget they share."""

    jobs: int
    max_cost: float | None
    max_time: float | None
    temporal: dict[str, str] = field(default_factory=dict)
    """``temporal`` (HOST:PORT), ``remote``, ``namespace``, ``task_queue``: the defaults of ``--temporal``."""


@dataclass(frozen=True)
class FleetTask:
    """One ``[[task]]``: its name, the directory its run works in, and its validated spec."""

    name: str
    workdir: Path
    spec: Any  # a LoopSpec; typed loosely so this module stays importable without pydantic


@dataclass(frozen=True)
class FleetFile:
    path: Path
    digest: str
    settings: FleetSettings
    tasks: tuple[FleetTask, ...]


def load_fleet(path: Path, *, jobs: int | None = None) -> FleetFile:
    """Read and check a fleet file whole: one clear line naming the task and key when it is wrong."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LoopeError(f"cannot read the fleet file {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LoopeError(f"{path}: not valid TOML ({exc}); fix the file") from None
    unknown = sorted(set(data) - {"fleet", "defaults", "task"})
    if unknown:
        raise LoopeError(f"{path}: unknown table {unknown[0]!r}; a fleet file has [fleet], [defaults] and [[task]]")
    settings = _settings(path, _table(path, data, "fleet"), jobs)
    defaults = _table(path, data, "defaults")
    for key in sorted(_TASK_ONLY & set(defaults)):
        raise LoopeError(f"{path}: [defaults] cannot set {key!r}; set it in each [[task]]")
    tasks_raw = data.get("task", [])
    if not isinstance(tasks_raw, list) or not tasks_raw or not all(isinstance(t, dict) for t in tasks_raw):
        raise LoopeError(f"{path}: no [[task]] tables; add at least one with a name and a goal")
    tasks: list[FleetTask] = []
    for index, entry in enumerate(tasks_raw, 1):
        tasks.append(_task(path, index, dict(entry), defaults))
    names = [t.name for t in tasks]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise LoopeError(f"{path}: two tasks are named {dup!r}; task names must be unique")
    return FleetFile(path.resolve(), hashlib.sha256(raw).hexdigest()[:16], settings, tuple(tasks))


def _table(path: Path, data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise LoopeError(f"{path}: {name} must be a table ([{name}])")
    return dict(value)


def _settings(path: Path, table: dict[str, Any], jobs_flag: int | None) -> FleetSettings:

    unknown = sorted(set(table) - _FLEET_KEYS)
    if unknown:
        raise LoopeError(f"{path}: [fleet] has no setting {unknown[0]!r}; known: {', '.join(sorted(_FLEET_KEYS))}")
    jobs = jobs_flag if jobs_flag is not None else table.get("jobs", 2)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= 64:
        raise LoopeError(f"{path}: jobs must be a whole number from 1 to 64 (got {jobs!r})")
    max_cost = table.get("max_cost")
    if max_cost is not None and (isinstance(max_cost, bool) or not isinstance(max_cost, int | float) or max_cost <= 0):
        raise LoopeError(f"{path}: [fleet] max_cost must be a positive number of dollars (got {max_cost!r})")
    max_time = table.get("max_time")
    seconds = parse_duration(max_time, what=f"{path}: [fleet] max_time") if max_time is not None else None
    temporal: dict[str, str] = {}
    for key in _TEXT_KEYS:
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise LoopeError(f"{path}: [fleet] {key} must be a non-empty string (got {value!r})")
        if value is not None:
            temporal[key] = value.strip()
    remote = temporal.get("remote")
    if remote and "://" not in remote and (path.parent / remote).exists():
        temporal["remote"] = str((path.parent / remote).resolve())  # a local remote, relative to the file
    return FleetSettings(jobs, float(max_cost) if max_cost is not None else None, seconds, temporal)


def _task(path: Path, index: int, entry: dict[str, Any], defaults: dict[str, Any]) -> FleetTask:
    from loope.spec import build_spec

    name = entry.pop("name", None)
    if not isinstance(name, str) or not _NAME.match(name):
        raise LoopeError(f"{path}: task {index} needs a name of letters, digits, '.', '_' or '-' (got {name!r})")
    where = f"{path}: task {name!r}"
    workdir_key, repo = entry.pop("workdir", None), entry.pop("repo", None)
    if workdir_key is not None and repo is not None:
        raise LoopeError(f"{where}: give a workdir or a repo, not both")
    if repo is not None:
        workdir = _clone(path.parent, name, repo, where)
    elif workdir_key is None or isinstance(workdir_key, str):
        workdir = (path.parent / (workdir_key or ".")).resolve()
    else:
        raise LoopeError(f"{where}: workdir must be a path (relative to the fleet file)")
    if not workdir.is_dir():
        raise LoopeError(f"{where}: workdir {workdir} does not exist; fix the path (it is relative to the fleet file)")
    try:
        spec = build_spec(entry, workdir, defaults=defaults)
    except LoopeError as exc:
        raise LoopeError(f"{where}: {exc.message}") from None
    return FleetTask(name, workdir, spec)


def _clone(home: Path, name: str, url: Any, where: str) -> Path:
    """A task's ``repo``, cloned once under ``<home>/.loope/fleet-repos/<name>`` (its runs work there)."""

    if not isinstance(url, str) or not url.strip():
        raise LoopeError(f"{where}: repo must be a git URL or path")
    dest = home / ".loope" / "fleet-repos" / name
    if (dest / ".git").exists():
        return dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    argv = safe_command("clone", "--quiet", "--no-checkout", "--", url, str(dest))
    result = run_process(argv, cwd=home, env=safe_env(), capture=True)
    if result.ok:  # checked out apart from the clone, so a checkout failure names itself
        result = run_process(safe_command("checkout", "--quiet"), cwd=dest, env=safe_env(), capture=True)
    if not result.ok:
        lines = result.stderr_tail.strip().splitlines()
        raise LoopeError(f"{where}: cannot clone {url}: {lines[-1] if lines else result.describe()}")
    return dest.resolve()
