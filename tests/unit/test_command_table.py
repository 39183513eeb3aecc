"""The table ``loope --help`` is drawn from (without importing a command) says what the commands say."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from loope.cli.main import COMMANDS, cli


def command(name: str) -> click.Command:
    module, _, attr = COMMANDS[name][0].partition(":")
    found = getattr(importlib.import_module(module), attr)
    assert isinstance(found, click.Command)
    return found


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_tables_help_is_the_commands_own_short_help(name: str) -> None:
    real = command(name)
    assert real.name == name
    assert COMMANDS[name][1] == real.get_short_help_str(limit=1000)


def test_help_lists_every_command_with_its_short_help() -> None:
    result = CliRunner().invoke(cli, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    listed = [line.split(None, 1) for line in result.output.split("Commands:", 1)[1].strip().splitlines()]
    assert listed == [[name, COMMANDS[name][1]] for name in COMMANDS]


def test_a_commands_own_help_is_its_full_docstring() -> None:
    result = CliRunner().invoke(cli, ["show", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert " ".join((command("show").help or "").split()) in " ".join(result.output.split())


def test_help_and_an_unknown_command_import_no_command_module() -> None:
    probe = (
        "import json, sys\nfrom loope.cli.main import run_cli\n"
        "codes = [run_cli(['--help']), run_cli(['no-such-command'])]\n"
        "sys.stderr.write('\\nRESULT ' + json.dumps([codes, sorted(m for m in sys.modules if m.startswith('loope.'))]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    codes, modules = json.loads(done.stderr.rsplit("RESULT ", 1)[1])
    assert codes == [0, 2]
    assert "No such command 'no-such-command'" in done.stderr
    assert [
        m for m in modules if m.startswith("loope.cli.") and m not in ("loope.cli.main", "loope.cli.deferred")
    ] == []


@pytest.mark.parametrize("columns", ["40", "100", "200", "0", "wide", None])
def test_loope_help_is_as_wide_as_clicks_own_would_be(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ours = cli.make_context("loope", ["--version"], resilient_parsing=True).make_formatter()
    assert ours.width == click.HelpFormatter().width  # click's own asks shutil.get_terminal_size
