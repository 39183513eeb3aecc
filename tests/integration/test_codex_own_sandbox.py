"""Codex's own sandbox: asked before each step outside loope's sandbox, switched off inside it.

A codex whose bubblewrap cannot run a command says nothing about it (no command item, nothing on
stderr), so a reviewer would judge code it never read. These tests run the real Codex CLI where its
behaviour is the point, and stand-ins where the machine cannot produce the failure on demand.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loope.agents.codex import CodexAgent
from loope.agents.codex_sandbox import sandbox_problem
from loope.proc import run_process
from loope.sandbox import bwrap
from tests.e2e.conftest import agents_dir
from tests.unit.adapter_fakes import make_request, sandbox_around

BROKEN = "bwrap: No permissions to create a new namespace, likely because the kernel does not allow it"


def stand_in(tmp_path: Path, *, sandbox_runs: bool) -> Path:
    """A codex that reports a finished turn; its ``codex sandbox -- true`` works or fails as told."""
    path = tmp_path / "codex"
    sandbox = "exit 0" if sandbox_runs else f"echo 'WARNING: something else' >&2; echo '{BROKEN}' >&2; exit 1"
    path.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --version) echo "codex-cli 0.171.0"; exit 0;;\n'
        f"  sandbox) {sandbox};;\n"
        "esac\n"
        'echo ran > "$LOOPE_STEP_DIR/ran"\n'
        """echo '{"type":"item.completed","item":{"id":"0","type":"agent_message","text":"VERDICT: PASS"}}'\n"""
        """echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'\n"""
    )
    path.chmod(0o755)
    return path


def test_a_codex_whose_own_sandbox_cannot_run_fails_the_step_with_the_reason_and_never_starts(tmp_path):
    agent = CodexAgent(options={"bin": str(stand_in(tmp_path, sandbox_runs=False))})
    request = make_request(tmp_path, role="reviewer")
    request.step_dir.mkdir(parents=True)

    result = agent.run(request)

    assert not result.ok
    assert result.error is not None
    assert result.error.startswith(f"codex's own sandbox cannot run a command here ({BROKEN})")
    assert "--sandbox on" in result.error
    assert 'args = ["-s", "danger-full-access"]' in result.error
    assert not (request.step_dir / "ran").exists()  # no verdict from a reviewer that could read nothing


@pytest.mark.parametrize("args", [["-s", "danger-full-access"], ["--dangerously-bypass-approvals-and-sandbox"]])
def test_a_codex_told_to_use_no_sandbox_of_its_own_is_not_asked(tmp_path, args):
    agent = CodexAgent(options={"bin": str(stand_in(tmp_path, sandbox_runs=False)), "args": args})
    request = make_request(tmp_path, role="reviewer")
    request.step_dir.mkdir(parents=True)

    result = agent.run(request)

    assert result.ok, result.error
    assert (request.step_dir / "ran").exists()


def test_inside_loopes_sandbox_codex_runs_without_its_own(tmp_path):
    if not bwrap.support().works:
        pytest.skip(f"needs bubblewrap: {bwrap.support().reason}")
    agent = CodexAgent(options={"bin": str(stand_in(tmp_path, sandbox_runs=False))})
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    sandbox = sandbox_around(workspace, tmp_path)
    for role in ("implementer", "reviewer"):
        request = make_request(tmp_path, role=role, sandbox=sandbox, step_dir=tmp_path / role)
        request.step_dir.mkdir(parents=True)
        argv = agent.argv(request)

        result = agent.run(request)

        assert argv[argv.index("-s") + 1] == "danger-full-access"
        assert result.ok, result.error


def test_doctor_names_a_codex_whose_own_sandbox_cannot_run_when_loopes_is_off(project, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake = stand_in(tmp_path, sandbox_runs=False)
    settings = f'implementer = "codex"\nreviewers = []\nsandbox = "off"\n[agents.codex]\nbin = "{fake}"\n'
    project.write("loope.toml", settings)

    result = cli("doctor", cwd=project.path)

    assert result.exit_code == 1
    (line,) = [ln for ln in result.out.splitlines() if ln.startswith("FIX")]
    assert line.startswith(f"FIX codex: codex-cli 0.171.0; codex's own sandbox cannot run a command here ({BROKEN})")
    assert "install bubblewrap; --sandbox on), or let the container be the sandbox: [agents.codex] args" in line


def test_doctor_does_not_ask_codexs_own_sandbox_when_loopes_will_be_on(project, cli, tmp_path, monkeypatch):
    if not bwrap.support().works:
        pytest.skip(f"needs bubblewrap: {bwrap.support().reason}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake = stand_in(tmp_path, sandbox_runs=False)  # inside loope's sandbox codex runs danger-full-access
    project.write("loope.toml", f'implementer = "codex"\nreviewers = []\n[agents.codex]\nbin = "{fake}"\n')

    result = cli("doctor", cwd=project.path)

    assert result.exit_code == 0, result.out
    assert "ok  codex: codex-cli 0.171.0; credentials from OPENAI_API_KEY" in result.out
    assert "ok  sandbox: bubblewrap at" in result.out


def real_codex() -> Path:
    path = agents_dir() / "node_modules" / ".bin" / "codex"
    if not path.exists():
        pytest.skip(f"the Codex CLI is not installed at {path}: run `make agents`")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (`apt-get install -y bubblewrap`): codex uses its bundled one")
    return path


def test_the_real_codex_under_a_system_bubblewrap_runs_a_command_with_its_home_in_the_temporary_dir(tmp_path):
    codex = str(real_codex())
    home = tmp_path / "codex-home"  # under /tmp, as in these tests (and for a user whose TMPDIR holds it)
    home.mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "CODEX_HOME": str(home)}
    shared = run_process([codex, "sandbox", "--", "true"], cwd=tmp_path, env={**env, "TMPDIR": str(tmp_path)})

    # codex refuses to make its sandbox helper "under the temporary dir", and bubblewrap cannot find it ...
    assert not shared.ok
    assert "codex-linux-sandbox" in shared.stderr_tail
    # ... which a step's private TMPDIR avoids: the probe asks as a step runs codex.
    assert sandbox_problem(codex, {**env, "TMPDIR": str(tmp_path)}, tmp_path) is None
