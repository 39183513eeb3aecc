"""Startup stays light: the quick commands load none of the heavy modules (DESIGN.md, Performance)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("rich", "pydantic", "mcp", "slack_sdk", "sqlite3", "_sqlite3", "starlette", "uvicorn", "temporalio", "yaml")
SQLITE_LAYERS = ("loope.store", "loope.memory")

# Run loope's entry point in a fresh interpreter, then report every module it had loaded.
PROBE = """
import json, sys
sys.argv = ["loope", *sys.argv[1:]]
from loope.cli.main import main
try:
    main()
except SystemExit:
    pass
print("MODULES " + json.dumps(sorted(sys.modules)))
"""


def loaded_by(args: list[str], cwd: Path) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    out, _, modules = done.stdout.rpartition("MODULES ")
    assert modules, done.stdout + done.stderr
    return out, json.loads(modules)


def heavy(modules: list[str]) -> list[str]:
    return [
        m
        for m in modules
        if m.split(".")[0] in HEAVY or any(m == layer or m.startswith(layer + ".") for layer in SQLITE_LAYERS)
    ]


@pytest.mark.parametrize("args", [["--version"], ["runs"], ["runs", "--json"]])
def test_quick_commands_load_no_heavy_module(args: list[str], project, agent_script, cli) -> None:
    done = cli("run", "a goal", "--implementer", agent_script("print('done')"), "--no-review", cwd=project.path)
    assert done.exit_code in (0, 1), done.out + done.err  # a recorded run, so `loope runs` has one to list
    out, modules = loaded_by(args, project.path)
    assert "loope.cli.main" in modules  # the probe ran loope
    if args[0] == "runs":
        assert "0001-a-goal" in out
    assert heavy(modules) == []


def test_the_probe_sees_a_heavy_module_when_one_is_loaded(project) -> None:
    _, modules = loaded_by(["lessons"], project.path)  # lessons live in the store
    assert {"sqlite3", "loope.store.db"} <= set(heavy(modules))
