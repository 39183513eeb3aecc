"""Options and output choices shared by commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loope.errors import LoopeError
from loope.root import project_root

if TYPE_CHECKING:
    from loope.events import Observer
    from loope.ui.base import View

F = Callable[..., Any]


def output_options(func: F) -> F:
    """--json, --plain, --quiet and --color."""
    func = click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        help="Colour and live updates.",
    )(func)
    func = click.option("--quiet", "-q", is_flag=True, help="Only the final summary.")(func)
    func = click.option("--plain", is_flag=True, help="Plain lines, no colour or live updates.")(func)
    func = click.option("--json", "json_", is_flag=True, help="Events as JSON lines on stdout.")(func)
    return func


def views(json_: bool = False, plain: bool = False, quiet: bool = False, color: str = "auto") -> list[Observer]:
    """The observers that show a run: JSON lines, plain lines, or the live view on a terminal."""
    return [view(json_, plain, quiet, color)]


def view(json_: bool = False, plain: bool = False, quiet: bool = False, color: str = "auto") -> View:
    """The view of a run the output options ask for (``loope logs`` feeds it events.jsonl lines)."""
    from loope.ui.plain import JsonLines, PlainView  # loads the records and events layers
    from loope.ui.terminal import fancy_output

    if json_:
        return JsonLines()
    if plain or quiet or not fancy_output(color):
        return PlainView(quiet=quiet)
    from rich.console import Console

    from loope.ui.live import LiveView  # loads rich

    return LiveView(Console(force_terminal=True) if color == "always" else None)


def workdir_option(func: F) -> F:

    return click.option(
        "--workdir", type=click.Path(path_type=Path), default=None, help="The project directory. [default: .]"
    )(func)


def project_dir(workdir: Any) -> Any:
    """The project directory: --workdir, else the one the current directory is in; an error when it does not exist."""
    path = Path(workdir).expanduser() if workdir else Path(project_root())
    if not path.is_dir():
        raise LoopeError(f"workdir {path} does not exist or is not a directory; pass an existing --workdir")
    return path.resolve()
