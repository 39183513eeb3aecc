"""The run directory: ids, paths, and finding a run by a unique prefix."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from loope.errors import LoopeError, clip
from loope.records import runfile

if TYPE_CHECKING:
    from loope.records.model import RunRecord
    from loope.spec import LoopSpec

LOOPE_DIR = ".loope"
RUNS = Path(LOOPE_DIR) / "runs"
DB_NAME = "loope.db"
"""The project's database (``loope.store.db``), in LOOPE_DIR; named here, where asking for it loads no sqlite3."""
STATE_COPY = "state.md"
"""The agent's state file, copied into the run dir when the run's worktree is removed."""
NOTIFY_LOG = "notify.log"
"""Notifications that could not be delivered (a notifier never fails the run)."""
_IGNORE_ALL = "# loope's own files: never part of your repository\n*\n"
_WORD = r"[a-z0-9]+"  # compiled on first use (re keeps it): a run's slug, made when it starts
_ID = re.compile(r"^(\d{4,})-")


def ensure_loope_dir(root: Path) -> Path:
    """``root/.loope``, created with a .gitignore that keeps it out of git without the user's help."""
    path = root / LOOPE_DIR
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        from loope.records.atomic import write_text  # a write: the commands that only read never load it

        write_text(ignore, _IGNORE_ALL)
    return path


class RunFileError(LoopeError, ValueError):
    """A run's file is missing or damaged.

    Also a ValueError, so callers that skip runs they cannot read (``except (OSError, ValueError)``)
    keep skipping them.
    """

    def __init__(self, rundir: RunDir, name: str, reason: str) -> None:
        super().__init__(
            f"run {rundir.run_id}: {name} is damaged ({clip(reason, 300)}); restore it, or move {rundir.root} aside"
        )


def slug(goal: str, *, words: int = 6, chars: int = 40) -> str:
    """Up to six words / forty characters of the goal, lowercase, hyphenated."""
    picked: list[str] = []
    for word in re.findall(_WORD, goal.lower())[:words]:
        if len("-".join([*picked, word])) > chars:
            break
        picked.append(word)
    return "-".join(picked) or "run"


class RunDir(NamedTuple):
    """Paths inside ``<workdir>/.loope/runs/<id>/``.

    A NamedTuple rather than a frozen dataclass: every command that reads a run defines it at its start,
    and a dataclass compiles its methods from source when it is defined.
    """

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def workdir(self) -> Path:
        return self.root.parent.parent.parent

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    @property
    def agents(self) -> Path:
        return self.root / "agents"

    def step_dir(self, number: int, role: str, adapter: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", adapter).strip("-") or "agent"
        path = self.agents / f"{number:02d}-{role}-{safe}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def read_json(self, name: str, *, whole: bool = False) -> dict[str, Any]:
        """One of the run's JSON files, as an object; a RunFileError saying which when it cannot be read.

        run.json is checked to have the shape of a run's record (:mod:`loope.records.runfile`);
        ``whole``: with everything a record needs to be acted on.
        """
        if name == "run.json":
            try:
                return runfile.load_dir(str(self.root), whole=whole)
            except OSError as exc:
                raise RunFileError(self, name, exc.strerror or str(exc)) from None
            except runfile.DamagedRecord as exc:
                raise RunFileError(self, name, str(exc)) from None
        try:
            data = json.loads((self.root / name).read_text(encoding="utf-8"))
        except OSError as exc:
            raise RunFileError(self, name, exc.strerror or str(exc)) from None
        except ValueError as exc:  # invalid JSON, or bytes that are not UTF-8
            raise RunFileError(self, name, f"not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise RunFileError(self, name, f"a JSON {type(data).__name__}, not an object")
        return data

    def saved_spec(self) -> LoopSpec:
        """The spec the run started with (spec.json, the single source of its gate), checked."""
        from pydantic import ValidationError

        from loope.spec import LoopSpec

        data = self.read_json("spec.json")
        try:
            return LoopSpec.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            raise RunFileError(self, "spec.json", f"{where}: {message}" if where else message) from None

    def record(self) -> RunRecord:
        """The run's record, from its checked run.json."""
        from loope.records.model import RunRecord  # its dataclasses cost more to build than show and logs read

        return RunRecord.from_dict(self.read_json("run.json", whole=True))

    @classmethod
    def allocate(cls, workdir: Path, goal: str) -> RunDir:
        """Create the next ``NNNN-slug`` run directory (safe against concurrent runs)."""
        ensure_loope_dir(workdir)
        runs = workdir / RUNS
        runs.mkdir(parents=True, exist_ok=True)
        name = slug(goal)
        number = max((_number(p.name) for p in runs.iterdir()), default=0) + 1
        while True:
            root = runs / f"{number:04d}-{name}"
            try:
                root.mkdir()
            except FileExistsError:
                number += 1
                continue
            return cls(root)


def _number(name: str) -> int:
    match = _ID.match(name)
    return int(match.group(1)) if match else 0


def list_runs(workdir: Path) -> list[RunDir]:
    """Every run of the project, oldest first."""
    runs = workdir / RUNS
    if not runs.is_dir():
        return []
    found = [RunDir(p) for p in runs.iterdir() if p.is_dir() and _ID.match(p.name)]
    return sorted(found, key=lambda r: (_number(r.run_id), r.run_id))


def find_run(
    workdir: Path,
    ref: str,
    *,
    start_hint: str = "start one with `loope run`",
    list_hint: str = "`loope runs` lists them",
) -> RunDir:
    """The run whose id starts with ``ref`` (``0007`` or ``7`` or the whole id); exactly one must match.

    The hints name the caller's own commands (the MCP tools name theirs).
    """
    runs = list_runs(workdir)
    if not runs:
        raise LoopeError(f"no runs in {workdir / RUNS}; {start_hint}")
    ref = ref.strip()
    matches = [r for r in runs if r.run_id == ref] or [r for r in runs if r.run_id.startswith(ref)]
    if not matches and ref.isdigit():
        matches = [r for r in runs if _number(r.run_id) == int(ref)]
    if not matches:
        raise LoopeError(f"no run matches {ref!r}; {list_hint}")
    if len(matches) > 1:
        names = ", ".join(r.run_id for r in matches[:5])
        raise LoopeError(f"{ref!r} matches {len(matches)} runs ({names}); give more of the id")
    return matches[0]


def state_file_of(run_root: Path, workspace: Any) -> Path | None:
    """Where a run's state file is now: in its workspace, or the run dir's copy once the worktree is gone.

    ``workspace`` is run.json's ``workspace`` object (or anything with a ``path``).
    """
    path = workspace.get("path") if isinstance(workspace, dict) else getattr(workspace, "path", None)
    if not path:
        return None
    in_workspace = Path(str(path)) / ".loope" / "state.md"
    copy = run_root / STATE_COPY
    return copy if not in_workspace.exists() and copy.exists() else in_workspace
