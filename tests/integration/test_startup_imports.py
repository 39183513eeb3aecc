"""Read-only commands start light: which modules they import, in a fresh interpreter (no timing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import FIX, GATE

# Imported by a run, never by a command that only reads one.
HEAVY = ("pydantic", "yaml", "rich", "asyncio", "mcp", "loope.spec", "loope.sandbox", "loope.engine.loop")
LIGHT_COMMANDS = {
    "runs": ["runs"],
    "show": ["show", "{run}"],
    "logs": ["logs", "{run}"],
    "status": ["status", "{run}"],
    "adapters": ["adapters"],
}
# What a command may still need: the state file's frontmatter is YAML.
ALLOWED = {"status": {"yaml"}}
PROBE = """
import json, sys
from loope.cli.main import run_cli
try:
    run_cli(json.loads(sys.argv[1]))
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


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
    args = [a.format(run=run) for a in LIGHT_COMMANDS[name]]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)], cwd=finished.path, capture_output=True, text=True, check=False
    )
    modules = set(json.loads(done.stderr.rsplit("MODULES ", 1)[1]))
    assert "loope.cli.main" in modules  # the probe ran the command
    top = {m.split(".")[0] for m in modules} | modules
    assert sorted(set(HEAVY) - ALLOWED.get(name, set()) & top) == [], done.stdout
