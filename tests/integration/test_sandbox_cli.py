"""``--sandbox`` where bubblewrap cannot work: ``on`` refuses in one line, ``auto`` says so and runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loope import bwrap_probe
from tests.conftest import FIX, GATE, no_loope_runs, one_error_line

BROKEN = "bwrap: No permissions to create a new namespace, likely because the kernel does not allow it"


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A bubblewrap first on PATH that cannot make namespaces (a locked-down container)."""
    bin_dir = tmp_path / "broken-bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{BROKEN}' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    bwrap_probe.forget()
    yield
    bwrap_probe.forget()


def test_sandbox_on_without_a_working_bubblewrap_is_a_usage_error(project, agent_script, cli, broken_bwrap):
    result = cli(
        "run", "fix add", "--implementer", agent_script(FIX), "--no-review", "--sandbox", "on", cwd=project.path
    )

    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "--sandbox on: bubblewrap cannot make a sandbox here" in line
    assert "--sandbox off" in line
    assert no_loope_runs(project.path)


def test_sandbox_auto_without_a_working_bubblewrap_runs_and_says_so(project, agent_script, cli, broken_bwrap):
    result = cli(
        "run",
        "fix add",
        "--implementer",
        agent_script(FIX),
        "--no-review",
        "--verify-cmd",
        GATE,
        cwd=project.path,
    )

    assert result.exit_code == 0, result.out + result.err
    assert "sandbox off: bubblewrap cannot make a sandbox here" in result.out
    events = [json.loads(line) for line in (project.runs()[-1] / "events.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["type"] == "run_started")
    assert started["sandbox"] == {"enabled": False, "mode": "auto", "network_checks": "on"}
    assert any(w.startswith("sandbox off: bubblewrap cannot make a sandbox here") for w in started["warnings"])

    doctor = cli("doctor", cwd=project.path)
    assert "ok  sandbox: bubblewrap cannot make a sandbox here" in doctor.out
