"""Shared fixtures: real git repositories in tmp_path, scripted exec: agents, and the CLI in-process."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from loope.cli.main import run_cli
from loope.workspace.loopedir import outside_view

PYTHON = shlex.quote(sys.executable)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "user@example.com",
}


def git(cwd: Path, *args: str) -> str:
    """Run git as the user would (their own identity), returning stdout."""
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout


@dataclass
class Project:
    """A user's project: a directory, usually a git repository with a first commit."""

    path: Path

    def write(self, rel: str, text: str) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
        return target

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text()

    def git(self, *args: str) -> str:
        return git(self.path, *args)

    def commit(self, message: str = "change") -> None:
        self.git("add", "-A")
        self.git("commit", "-qm", message)

    def runs(self) -> list[Path]:
        root = self.path / ".loope" / "runs"
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []

    def run_json(self, index: int = -1) -> dict:
        return json.loads((self.runs()[index] / "run.json").read_text())


def _finished_tree(run: dict) -> tuple[Path, list[str]] | None:
    """Where git reads a finished run's last commit (cwd, git options); None while its tree is still there."""
    ws = run["workspace"]
    if ws.get("mode") == "overlay":  # its tree was a mount, gone with the runner; its commits are in shadow.git
        return Path(run["workdir"]), ["--git-dir", str(Path(ws["path"]).parent / "shadow.git")]
    if ws.get("removed"):
        return Path(run["workdir"]), []
    return None


def run_file(run: dict, rel: str) -> str:
    """``rel`` as the run left it: its worktree's file, or its last commit's once the tree is gone."""
    found = _finished_tree(run)
    if found is None:
        return (Path(run["workspace"]["path"]) / rel).read_text()
    cwd, options = found
    return git(cwd, *options, "show", f"{run['workspace']['head']}:./{rel}")


def run_state(rundir: Path) -> str:
    """The agent's state file as the run left it (the run dir keeps a copy once the tree is gone), or
    as it is now in a running one (an overlay's from its upper layer, as ``loope status`` reads it)."""
    run = json.loads((rundir / "run.json").read_text())
    if _finished_tree(run) is not None and (rundir / "state.md").is_file():
        return (rundir / "state.md").read_text()
    return outside_view(Path(run["workspace"]["path"]) / ".loope" / "state.md").read_text()


def run_has(run: dict, rel: str) -> bool:
    """Whether the run left ``rel`` (in its worktree, or in its last commit once the tree is gone)."""
    found = _finished_tree(run)
    if found is None:
        return os.path.lexists(Path(run["workspace"]["path"]) / rel)
    cwd, options = found
    check = ["git", *options, "cat-file", "-e", f"{run['workspace']['head']}:./{rel}"]
    return subprocess.run(check, cwd=cwd, check=False, capture_output=True).returncode == 0


CALC = """\
def add(a, b):
    return a - b
"""

CALC_TESTS = """\
from calc import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-2, -3) == -5
"""


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A git repository holding a buggy calc.py and its pytest tests, committed."""
    return make_project(tmp_path / "proj")


def make_project(path: Path) -> Project:
    """The ``project`` fixture's repository, at ``path``."""
    proj = Project(path)
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    proj.write("calc.py", CALC)
    proj.write("tests/test_calc.py", CALC_TESTS)
    proj.write(".gitignore", "__pycache__/\n.pytest_cache/\n")
    proj.commit("initial")
    return proj


@pytest.fixture
def agent_script(tmp_path: Path):
    """Write a Python exec: agent and return its ``exec:`` spec. The body reads the prompt from ``prompt``."""
    counter = iter(range(1000))

    def make(body: str, name: str | None = None) -> str:
        path = tmp_path / "agents" / f"{name or 'agent'}_{next(counter)}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        header = "import json, os, sys, pathlib\nprompt = sys.stdin.read()\n"
        path.write_text(header + textwrap.dedent(body))
        return f"exec:{PYTHON} {shlex.quote(str(path))}"

    return make


GATE = f"{PYTHON} -m pytest -q -p no:cacheprovider"

# DESIGN.md, Events: the closed set of event types (written out here, not imported, to test the contract).
EVENT_TYPES = {
    "run_started",
    "baseline",
    "iteration_started",
    "step_started",
    "agent_event",
    "step_finished",
    "step_retry",
    "limit_wait",
    "guard",
    "verify_finished",
    "metric",
    "review_finished",
    "selection",
    "decision",
    "critique",
    "iteration_finished",
    "run_finished",
}


@dataclass
class CliResult:
    exit_code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run ``loope ARGS`` in-process (as the console script would) and capture its output."""

    def invoke(*args: str, cwd: Path | None = None) -> CliResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = run_cli(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


def unless_named(cli, option: str, value: str):  # type: ignore[no-untyped-def]
    """``cli`` that adds ``option value`` to every ``loope run`` that does not name ``option`` itself."""

    def invoke(*args: str, cwd: Path | None = None) -> CliResult:
        add = args[:1] == ("run",) and option not in args
        return cli(*args, *((option, value) if add else ()), cwd=cwd)

    return invoke


def unsandboxed(cli):  # type: ignore[no-untyped-def]
    """``cli`` whose runs go without the sandbox (unless a run names ``--sandbox`` itself): for tests
    of what holds without it (the guard as the only line), or whose agents report their pids (the
    sandbox's PID namespace renumbers them)."""
    return unless_named(cli, "--sandbox", "off")


def in_workspace(cli, mode: str):  # type: ignore[no-untyped-def]
    """``cli`` whose runs work in a ``mode`` workspace (``default``: as loope chooses), unless a run names one."""
    return cli if mode == "default" else unless_named(cli, "--workspace", mode)


def overlay_works() -> bool:
    """Whether overlay workspaces work here (then a run in a git repository gets one by default)."""
    from loope.workspace import overlayfs

    return overlayfs.probe(Path(os.environ.get("TMPDIR", "/tmp"))).works


@pytest.fixture(params=["worktree", "overlay"])
def workspace_mode(request: pytest.FixtureRequest) -> str:
    """Tests of the loop's own behaviour run twice: in a worktree and in an overlay."""
    if request.param == "overlay" and not overlay_works():
        pytest.skip("overlay workspaces do not work on this machine")
    return str(request.param)


def run_git(run: dict, *args: str) -> str:
    """git on the repository holding the run's commits and refs (an overlay run's own, else the user's)."""
    found = _finished_tree(run)
    options = found[1] if found else []
    return git(Path(run["workdir"]), *options, *args)


def reporting_to(cli, *dirs: Path):  # type: ignore[no-untyped-def]
    """``cli`` whose runs' steps may also write ``dirs`` (``--sandbox-writable``): for tests whose
    agents report to the test through files there (what they saw, how often they ran)."""
    return with_run_args(cli, *(arg for d in dirs for arg in ("--sandbox-writable", str(d))))


def with_run_args(cli, *extra: str):  # type: ignore[no-untyped-def]
    """``cli`` that adds ``extra`` to every ``loope run``."""

    def invoke(*args: str, cwd: Path | None = None) -> CliResult:
        return cli(*args, *extra, cwd=cwd) if args[:1] == ("run",) else cli(*args, cwd=cwd)

    return invoke


@pytest.fixture(autouse=True)
def _no_user_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a real agent login or the user's loope settings by accident."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("LOOPE_DEBUG", raising=False)
    # An observer that raises fails the test (in production it is logged and the run goes on).
    monkeypatch.setenv("LOOPE_STRICT_OBSERVERS", "1")


# -- helpers for the core loop tests ----------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` is dead, giving a killed process time to be reaped (not a timing assertion)."""
    import time

    deadline = time.monotonic() + within_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def no_loope_runs(path: Path) -> bool:
    """Whether ``path`` holds no run directory (a refused run must leave nothing half-written)."""
    runs = path / ".loope" / "runs"
    return not runs.exists() or not any(runs.iterdir())


def one_error_line(err: str) -> str:
    """The single ``loope: error:`` line of ``err``; fails on anything more (a traceback, say)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("loope: error: "), err
    assert "Traceback" not in err
    return lines[0]


def alive_in_group(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


FIXED_CALC = "def add(a, b):\n    return a + b\n"

# exec: agent bodies (see ``agent_script``) shared by the loop tests.
FIX = f"pathlib.Path('calc.py').write_text({FIXED_CALC!r})\nprint('fixed add: it returns a + b now')\n"
APPROVE = "print('add() returns the sum.')\nprint('VERDICT: PASS')\n"


@pytest.fixture
def converge(cli, agent_script):  # type: ignore[no-untyped-def]
    """Run an ``exec:`` agent with ``body`` once, from ``cwd``, to convergence (a ``true`` gate, no review)."""

    def run(body: str, *extra: str, goal: str, cwd: Path) -> CliResult:
        flags = ("--no-review", "--verify-cmd", "true", "--no-baseline")
        result = cli("run", goal, "--implementer", agent_script(body), *flags, *extra, cwd=cwd)
        assert result.exit_code == 0, result.out + result.err
        return result

    return run
