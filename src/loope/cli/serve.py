"""``loope serve``: the local web dashboard of this project's runs (and of other projects')."""

from __future__ import annotations

import os
import secrets
import socket
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.errors import LoopeError

if TYPE_CHECKING:
    from loope.serve.guard import Guard


@click.command(short_help="A local web dashboard of the runs (live, with Stop).")
@click.option("--port", type=int, default=8321, show_default=True, help="The port (0: any free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--token", metavar="T", help="The token actions need (default: a new one; or LOOPE_SERVE_TOKEN).")
@click.option(
    "--project", "projects", multiple=True, type=click.Path(path_type=Path), help="Another project (repeatable)."
)
@click.option("--open", "open_", is_flag=True, help="Open the dashboard in a browser.")
@workdir_option
def serve(port: int, host: str, token: str | None, open_: bool, **where: Any) -> int:
    """Serve a dashboard of the runs: live updates, each step's records, the diff, the score chart, Stop."""

    from loope.serve.guard import TOKEN_ENV, Guard, is_loopback  # loads starlette

    token = token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(host) and not token:
        raise LoopeError(
            f"--host {host} lets other machines reach the dashboard: pass --token T (or set {TOKEN_ENV}),"
            " which every request must then carry"
        )
    roots = _roots(project_dir(where["workdir"]), where["projects"])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # listening before the address is printed: a browser opened at once gets through
    except OSError as exc:
        sock.close()
        raise LoopeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another --port") from None
    bound = sock.getsockname()[1]
    guard = Guard(token or secrets.token_urlsafe(24), host, bound)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    click.echo(f"loope dashboard: {url} · {len(roots)} project(s): {', '.join(str(r) for r in roots)}")
    if is_loopback(host):
        click.echo("listening on this machine only; actions need the page's token")
    else:
        url += f"?token={guard.token}"
        click.echo(f"listening beyond this machine: every request needs the token; open {url}")
    if open_:
        webbrowser.open(url)
    _run(roots, guard, sock)
    return 0


def _roots(here: Path, extra: tuple[Path, ...]) -> list[Path]:

    roots = [here]
    for path in extra:
        resolved = path.expanduser().resolve()
        if not resolved.is_dir():
            raise LoopeError(f"--project {path} is not a directory; pass a project directory")
        if resolved not in roots:
            roots.append(resolved)
    return roots


def _run(roots: list[Path], guard: Guard, sock: socket.socket) -> None:
    import uvicorn

    from loope.serve.app import create_app  # loads starlette

    config = uvicorn.Config(
        create_app(roots, guard),
        log_level="warning",
        timeout_graceful_shutdown=1,
        lifespan="off",
    )
    uvicorn.Server(config).run(sockets=[sock])
