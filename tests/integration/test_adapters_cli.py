"""`loope adapters` and `loope doctor` against fake agent binaries on PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from loope.agents import registry


def fake_binary(bin_dir: Path, name: str, version: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\nexit 3\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only the fake binaries and the basic tools (no real agent CLI)."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    monkeypatch.setenv("PATH", f"{fakes}:/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    for name in registry.known():
        monkeypatch.delenv(f"LOOPE_{name.upper()}_BIN", raising=False)
    return fakes


def test_adapters_lists_every_adapter_with_its_install_state(bin_dir, tmp_path, cli, monkeypatch):
    fake_binary(bin_dir, "gemini", "0.61.0")
    claude = fake_binary(tmp_path / "elsewhere", "my-claude", "2.1.332 (Claude Code)")
    monkeypatch.setenv("LOOPE_CLAUDE_BIN", str(claude))

    result = cli("adapters", "--json", cwd=tmp_path)

    assert result.exit_code == 0, result.err
    rows = {row["name"]: row for row in json.loads(result.out)}
    assert set(rows) == set(registry.known())
    assert (rows["gemini"]["installed"], rows["gemini"]["version"]) == (True, "0.61.0")
    assert rows["gemini"]["binary"] == str(bin_dir / "gemini")
    assert (rows["claude"]["installed"], rows["claude"]["version"]) == (True, "2.1.332 (Claude Code)")
    assert rows["codex"]["installed"] is False
    assert rows["codex"]["version"] is None
    assert "npm install" in rows["codex"]["install"]
    assert rows["exec"]["installed"] is True
    for row in rows.values():
        assert row["read_only"]
        assert row["cost_source"]


def test_adapters_plain_output_says_how_to_install_what_is_missing(bin_dir, tmp_path, cli):
    result = cli("adapters", cwd=tmp_path)

    assert result.exit_code == 0
    block = result.out.split("codex", 1)[1].split("\n\n")[0]
    assert "not installed" in block
    assert "install:   npm install -g @openai/codex" in block


def test_doctor_names_the_missing_credential_and_passes_once_it_is_set(bin_dir, project, cli, monkeypatch):
    fake_binary(bin_dir, "gemini", "0.61.0")
    project.write("loope.toml", 'implementer = "gemini"\nreviewers = ["exec:true"]\n')

    missing = cli("doctor", cwd=project.path)

    assert missing.exit_code == 1
    lines = missing.out.splitlines()
    assert lines[0].startswith("FIX gemini: 0.61.0; no credentials found")
    assert "GEMINI_API_KEY" in lines[1]
    assert "ok  exec:true" in missing.out

    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    fixed = cli("doctor", "--json", cwd=project.path)

    assert fixed.exit_code == 0, fixed.out
    checks = {c["agent"]: c for c in json.loads(fixed.out)}
    assert checks["gemini"]["ok"] is True
    assert "GEMINI_API_KEY" in checks["gemini"]["summary"]


def test_doctor_reports_an_agent_that_is_not_installed(bin_dir, project, cli):
    project.write("loope.toml", 'implementer = "opencode"\nreviewers = []\n')

    result = cli("doctor", cwd=project.path)

    assert result.exit_code == 1
    assert "FIX opencode: opencode is not installed" in result.out
    assert result.out.count("npm install -g opencode-ai") == 1  # the install hint, once
    assert os.environ["PATH"].startswith(str(bin_dir))


def test_doctor_finds_an_agent_where_loope_toml_points(bin_dir, project, cli, tmp_path, monkeypatch):
    fake = fake_binary(tmp_path / "tools", "gem", "0.61.0")
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    project.write("loope.toml", f'implementer = "gemini"\nreviewers = []\n[agents.gemini]\nbin = "{fake}"\n')

    result = cli("doctor", cwd=project.path)

    assert result.exit_code == 0, result.out
    assert result.out.startswith("ok  gemini: 0.61.0; credentials from GEMINI_API_KEY")


def test_an_empty_exec_command_is_one_clear_error(project, cli):
    result = cli("run", "fix add", "--implementer", 'exec:""', "--no-review", cwd=project.path)

    assert result.exit_code == 2
    assert result.err.startswith("loope: error: exec: needs a command")
    assert project.runs() == []


def test_adapters_lists_the_acp_presets_with_their_install_lines(bin_dir, tmp_path, cli):
    fake_binary(bin_dir, "gemini", "0.61.0")

    result = cli("adapters", "--json", cwd=tmp_path)

    rows = {row["name"]: row for row in json.loads(result.out)}
    assert (rows["gemini-acp"]["installed"], rows["gemini-acp"]["binary"]) == (True, str(bin_dir / "gemini"))
    assert rows["claude-acp"]["installed"] is False
    assert rows["claude-acp"]["install"] == "npm install -g @zed-industries/claude-agent-acp"
    assert rows["codex-acp"]["install"] == "npm install -g @zed-industries/codex-acp"
    assert "permission requests" in rows["acp"]["read_only"]


def test_an_acp_agent_that_is_not_installed_is_one_clear_error_before_the_run(bin_dir, project, cli):
    result = cli("run", "fix add", "--implementer", "acp:no-such-acp-agent --stdio", "--no-review", cwd=project.path)

    assert result.exit_code == 2, result.out + result.err
    assert "no-such-acp-agent not found on PATH" in result.err
    assert "\n" not in result.err.strip()
    assert project.runs() == []
