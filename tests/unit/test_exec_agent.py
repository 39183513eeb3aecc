"""``exec:`` agents: a program named by its path runs in place of the shell; anything else runs through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from loope.agents.exec import ExecAgent
from tests.unit.adapter_fakes import make_request

# Prints the name of the process that started it: the runner itself, or a shell between them.
PARENT = "#!/bin/sh\ncat /proc/$PPID/comm\n"


@pytest.mark.parametrize(
    ("command", "parent"),
    [
        ("{script}", "runner"),  # the shell is replaced: one process less per step
        ("{script} --flag word", "runner"),
        ("{script} | cat", "sh"),  # a pipeline is the shell's to run
        ("X=1 {script}", "sh"),  # so is an assignment
        ("{script} $HOME", "sh"),  # and a variable
    ],
)
def test_a_plain_command_replaces_the_shell_and_anything_else_runs_through_it(tmp_path, command, parent):
    script = tmp_path / "parent.sh"
    script.write_text(PARENT)
    script.chmod(0o755)
    result = ExecAgent(command.format(script=script)).run(make_request(tmp_path))
    assert result.ok, result.error
    runner = Path("/proc/self/comm").read_text().strip()
    assert result.message.strip() == (runner if parent == "runner" else "sh")
