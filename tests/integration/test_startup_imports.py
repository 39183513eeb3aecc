"""Read-only commands start light: which modules they import, in a fresh interpreter (no timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIX, GATE

# Imported by a run, never by a command that only reads one.
HEAVY = (
    *("pydantic", "yaml", "rich", "asyncio", "mcp", "sqlite3", "ssl", "http", "subprocess", "tempfile", "ctypes"),
    *("concurrent", "loope.spec", "loope.sandbox", "loope.engine", "loope.agents", "loope.store", "loope.events"),
    *("loope.records.model", "loope.workspace.git", "loope.ui.live"),
    "inspect",  # ast, dis and tokenize with it, where click only cleans one-line help texts
    "ipaddress",  # urllib.parse's, for IPv6 hosts in URLs
    "urllib.parse",  # pathlib's, for Path.as_uri
    *("uuid", "platform"),  # click's, for a UUID option (loope has none)
    "dataclasses",  # a dataclass compiles its methods when defined: the records these commands read are not
)
LIGHT_COMMANDS = {
    "help": ["--help"],
    "runs": ["runs"],
    "show": ["show", "{run}"],
    "show a missing run": ["show", "9999"],
    "logs": ["logs", "{run}"],
    "logs of a missing run": ["logs", "nope"],
    "status": ["status", "{run}"],
    "status of every running run": ["status"],
    "adapters": ["adapters"],
    "doctor": ["doctor"],
}
# What each one prints (so the probe is known to have run the command to its end).
SAYS = {
    "help": "Commands:",
    "runs": "{run}",
    "show": "fix add",
    "show a missing run": "9999",
    "logs": "{run}",
    "logs of a missing run": "nope",
    "status": "{run}",
    "status of every running run": "no run is running",
    "adapters": "claude",
    "doctor": "sandbox",
}
# What a command may still need: the store's database; what the adapters are (their catalog, not their
# code: no agent CLI is installed here, so there is no version to ask); doctor checks the sandbox and
# the overlay file system by running programs. A project with no settings has no spec to build.
# And what a command imports no more than that: with no run running, status reads no run's events (it
# asks the store which runs are running: see below for a project without one), nor with one that
# finished (unless it raced candidates: its last selection is read from them);
# --help asks the terminal its width without shutil (which loads bz2, lzma and zlib); adapters
# reads no JSON and writes none without --json.
ALSO_NOT = {
    "status of every running run": {"loope.records.runview", "loope.records.state_file"},
    "status": {"loope.records.runview"},  # a finished run that raced no candidates: nothing its events add
    "help": {"shutil"},
    "adapters": {"json"},
}
STORE = {"sqlite3", "loope.store"}
CATALOG = {"loope.agents", "loope.agents.catalog", "loope.agents.registry", "loope.agents.inspect"}
ALLOWED = {
    "status": STORE,
    "status of every running run": STORE,
    "adapters": CATALOG,
    "doctor": {
        *CATALOG,
        "subprocess",
        "tempfile",
        "loope.sandbox",
        "ctypes",
        "loope.workspace.git",
        "loope.records.model",
        *("inspect", "dataclasses"),  # the overlay check's dataclasses (after its first program)
    },
}
# json is imported only once the command is done: whether the command itself loads it is pinned too.
PROBE = """
import sys
from loope.cli.main import run_cli
try:
    run_cli(sys.argv[1:])
except SystemExit:
    pass
loaded = sorted(name for name, module in sys.modules.items() if type(module).__name__ != "_Deferred")
import json
sys.stderr.write("\\nMODULES " + json.dumps(loaded))
"""


def imported(args: list[str], cwd: Path) -> tuple[str, set[str]]:
    """What ``loope ARGS`` printed (both streams) and the modules it imported, in a fresh interpreter."""
    # No agent CLI on PATH: doctor and adapters get as far as they can without running one.
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    probe = [sys.executable, "-c", PROBE, *args]
    done = subprocess.run(probe, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    said, _, modules_json = done.stderr.rpartition("MODULES ")
    return done.stdout + said, set(json.loads(modules_json))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A project holding one finished run, made by a real ``loope run``."""
    from tests.conftest import make_project

    project = make_project(tmp_path_factory.mktemp("startup") / "proj")
    agent = project.path.parent / "fix.py"
    agent.write_text("import pathlib\n" + FIX)
    args = ["run", "fix add", "--implementer", f"exec:{sys.executable} {agent}", "--no-review", "--verify-cmd", GATE]
    command = [sys.executable, "-m", "loope", *args, "--quiet"]
    done = subprocess.run(command, cwd=project.path, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return project


@pytest.mark.parametrize("name", sorted(LIGHT_COMMANDS))
def test_a_read_only_command_imports_none_of_the_run_machinery(finished, name):
    run = finished.run_json()["run_id"]
    said, modules = imported([a.format(run=run) for a in LIGHT_COMMANDS[name]], finished.path)
    assert SAYS[name].format(run=run) in said
    top = {m.split(".")[0] for m in modules} | modules
    assert sorted((set(HEAVY) - ALLOWED.get(name, set()) | ALSO_NOT.get(name, set())) & top) == [], said
    assert sorted(m for m in modules if m.startswith("loope.agents.") and m not in ALLOWED.get(name, ())) == []
    assert "ctypes.util" not in modules  # find_library runs `ldconfig -p`


def test_status_opens_no_store_in_a_project_without_one(tmp_path):
    from tests.conftest import make_project

    project = make_project(tmp_path / "proj")
    said, modules = imported(["status"], project.path)
    assert "no run is running" in said
    top = {m.split(".")[0] for m in modules} | modules
    assert sorted(set(HEAVY) & top) == []
    assert not (project.path / ".loope").exists()  # nor makes one


# Modules put in place unexecuted (loope.cli.deferred) are not counted until their code has run.
# Exits at the first program the command starts (a check's, or an agent's), saying what was imported by then.
FIRST_PROGRAM = """
import os, sys
def at_first_program(event, args):
    if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork"):
        loaded = sorted(name for name, module in sys.modules.items() if type(module).__name__ != "_Deferred")
        import json
        sys.stderr.write("FIRST " + json.dumps([str(args[0]), loaded]))
        sys.stderr.flush()
        os._exit(0)
sys.addaudithook(at_first_program)
from loope.cli.main import run_cli
run_cli(sys.argv[1:])
"""


def test_doctor_imports_no_adapter_and_no_spec_before_it_runs_its_first_program(finished, tmp_path):
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 2.0.0\n")
    fake.chmod(0o755)
    # An installed agent CLI (asked its version) and a missing one: neither loads its adapter first.
    env = {**os.environ, "PATH": f"{fake.parent}:/usr/bin:/bin"}
    probe = [sys.executable, "-c", FIRST_PROGRAM, "doctor"]
    done = subprocess.run(probe, cwd=finished.path, env=env, capture_output=True, text=True, check=False)
    program, modules = json.loads(done.stderr.rpartition("FIRST ")[2])
    assert program == str(fake)  # the agents are checked first
    heavy = ("pydantic", "yaml", "rich", "sqlite3", "asyncio", "inspect", "ipaddress", "dataclasses", "json")
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []
    assert sorted(m for m in modules if m.startswith(("loope.spec", "loope.engine", "loope.store"))) == []
    assert sorted(m for m in modules if m.startswith("loope.agents.") and m not in CATALOG) == []


def test_doctor_asks_bubblewrap_without_loading_the_sandbox_package(finished):
    # No agent CLI on PATH: the first program is the sandbox's probe (or git, where bubblewrap is missing).
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    probe = [sys.executable, "-c", FIRST_PROGRAM, "doctor"]
    done = subprocess.run(probe, cwd=finished.path, env=env, capture_output=True, text=True, check=False)
    program, modules = json.loads(done.stderr.rpartition("FIRST ")[2])
    assert os.path.basename(program) in ("bwrap", "git")
    assert sorted(m for m in modules if m.startswith(("loope.sandbox", "loope.workspace", "loope.spec"))) == []
    heavy = ("pydantic", "yaml", "sqlite3", "asyncio", "inspect", "dataclasses", "json")  # proc's are no dataclasses
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []
