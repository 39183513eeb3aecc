"""What a shell command line will run, checked before it runs: the program its first word names."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

# Words the shell resolves itself: a command starting with one needs no program on PATH.
_SHELL_WORDS = frozenset(
    {
        "!",
        ".",
        ":",
        "[",
        "[[",
        "{",
        "(",
        "alias",
        "bg",
        "break",
        "case",
        "cd",
        "command",
        "continue",
        "echo",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fg",
        "for",
        "function",
        "getopts",
        "hash",
        "if",
        "kill",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "test",
        "times",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unset",
        "until",
        "wait",
        "while",
    }
)


def missing_program(command: str, cwd: Path) -> str | None:
    """Why ``command`` (a shell command line run from ``cwd``) cannot start its program, or None.

    Only the first word is checked: a shell word, an assignment or an expansion is given the
    benefit of the doubt (the shell decides), and so is whatever follows ``&&``.
    """
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"cannot parse the command ({exc}); check its quotes"
    if not words or not words[0]:
        return None
    program = words[0]
    if program in _SHELL_WORDS or "=" in program or program[0] in "({$`":
        return None
    if "/" in program:
        path = Path(program).expanduser()
        if (path if path.is_absolute() else cwd / path).exists():
            return None
    elif shutil.which(program):
        return None
    return f"command not found: {program}; give a path that exists from the workdir or a program on PATH"
