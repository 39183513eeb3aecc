"""The ``loope`` command. Subcommands load lazily: ``loope --version`` imports click and nothing else."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from loope import __version__
from loope.errors import EXIT_INTERRUPTED, EXIT_USAGE, MESSAGE_LIMIT, LoopeError, clip

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("loope.cli.run:run", "Run a loop: implement, verify, review, repeat."),
    "runs": ("loope.cli.runs:runs", "List runs: id, status, iterations, cost, age."),
    "status": ("loope.cli.status:status", "Show one run, or every running one."),
    "show": ("loope.cli.show:show", "Show a run's report, diff, run.json or one step."),
    "logs": ("loope.cli.logs:logs", "A run's events as the live view; -f follows a running one."),
    "apply": ("loope.cli.apply:apply", "Land a run's changes in the workdir (or another checkout)."),
    "branch": ("loope.cli.branch:branch", "Put a run's commits on branch loope/<run> in your repository."),
    "stop": ("loope.cli.control:stop", "Ask a run to stop before its next step."),
    "resume": ("loope.cli.control:resume", "Continue a run whose runner died."),
    "continue": ("loope.cli.control:continue_", "Continue a finished run with more budget (or a new goal)."),
    "rm": ("loope.cli.gc:rm", "Remove finished runs: records, worktrees, branches, refs."),
    "gc": ("loope.cli.gc:gc", "Remove finished runs in bulk (--older-than, --keep, --status)."),
    "init": ("loope.cli.init:init", "Set up loope.toml and a program for verified loops."),
    "verify": ("loope.cli.verify:verify", "Run the configured gate (and metric) once."),
    "adapters": ("loope.cli.adapters:adapters", "List agent adapters: installed, version, safety, cost."),
    "doctor": ("loope.cli.adapters:doctor", "Check the configured agents and say what to fix."),
    "lessons": ("loope.cli.control:lessons", "List lessons remembered from earlier runs."),
    "fleet": ("loope.cli.fleet:fleet", "Run many loops from a fleet file, up to --jobs at once."),
    "worker": ("loope.cli.temporal:worker", "Run the iterations of fleets on Temporal on this machine."),
    "temporal": ("loope.cli.temporal:temporal", "Temporal for fleets: `loope temporal dev` starts a local server."),
    "serve": ("loope.cli.serve:serve", "A local web dashboard of the runs (live, with Stop)."),
    "mcp": ("loope.cli.mcp:mcp", "Serve loope as an MCP tool over stdio."),
    "slack-listen": ("loope.cli.slack:slack_listen", "Stop runs from the Stop buttons of --notify slack: messages."),
    "demo": ("loope.cli.demo:demo", "Run a real loop on a bundled example, offline."),
}


class HelpContext(click.Context):
    """click's context, but for the width of ``loope --help``: click asks ``shutil`` for the terminal's
    width, and importing shutil (bz2, lzma, zlib with it) was a third of what the help cost beyond click."""

    def make_formatter(self) -> click.HelpFormatter:
        width = self.terminal_width
        if width is None:  # click's own rule: the terminal's columns, at most max_width, less 2, at least 50
            width = max(min(_terminal_columns(), self.max_content_width or 80) - 2, 50)
        return self.formatter_class(width=width, max_width=self.max_content_width)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: COLUMNS when it is a positive number, else the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stream = sys.__stdout__
        try:
            columns = os.get_terminal_size(stream.fileno()).columns if stream is not None else 0
        except (ValueError, OSError):  # closed, detached, or not a terminal
            columns = 0
    return columns or 80


class LazyGroup(click.Group):
    context_class = HelpContext

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, _, attr = entry[0].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_) for name, (_, help_) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="loope", message="%(prog)s %(version)s")
def cli() -> None:
    """loope runs AI coding agents in loops until a verifier you trust agrees the goal is met."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: one clear line for any error, a documented exit code, traceback only with LOOPE_DEBUG=1."""
    code = run_cli(argv)
    if "temporalio" in sys.modules:
        # Temporal's core keeps threads of its own that may call into Python while the interpreter shuts
        # down, which aborts the process (a fatal error, exit 134) after the command's work is done. Once
        # everything is written, leave without that shutdown; loope registers no exit handlers.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def run_cli(argv: list[str] | None = None) -> int:

    try:
        result: Any = cli.main(args=argv, prog_name="loope", standalone_mode=False)
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "loope"
        _fail(f"{exc.format_message()} (see `{where} --help`)")
        return EXIT_USAGE
    except click.ClickException as exc:
        _fail(exc.format_message())
        return exc.exit_code
    except click.Abort:
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except LoopeError as exc:
        if os.environ.get("LOOPE_DEBUG"):
            raise
        _fail(exc.message)
        return exc.exit_code
    except Exception as exc:
        from loope.records.space import disk_full, full_disk_detail  # loads tempfile and traceback: failures only

        if os.environ.get("LOOPE_DEBUG") or not disk_full(exc):
            raise
        _fail(full_disk_detail(exc))  # wherever it struck (a command's own writes, the database)
        return EXIT_USAGE
    return int(result or 0)


def _fail(message: str) -> None:

    text = clip(" ".join(message.split()), MESSAGE_LIMIT)
    click.echo(f"loope: error: {text}", err=True)
