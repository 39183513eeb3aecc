"""``loope mcp``: serve loope's tools over stdio, or print the config that adds them to a client."""

from __future__ import annotations

from pathlib import Path

import click

from loope.cli.options import project_dir, workdir_option
from loope.mcp.clients import snippet


@click.command(short_help="Serve loope as an MCP tool over stdio.")
@workdir_option
@click.option(
    "--print-config",
    "client",
    type=click.Choice(["claude", "codex", "cursor"]),
    help="Print the snippet that adds this server to Claude Code, Codex or Cursor, and how to allow its tools.",
)
def mcp(workdir: Path | None, client: str | None) -> int:
    """Serve loope as an MCP server over stdio: loope_start, loope_status (with wait_s), loope_list,
    loope_show, loope_stop and loope_apply.

    Loops start in the project this server runs in (the current directory or --workdir) unless a
    call names another workspace.
    """
    root = project_dir(workdir)
    if client is not None:
        found = snippet(client, root)
        click.echo(found.hint, err=True)
        click.echo(found.text, nl=False)
        return 0
    # The SDK (and anyio, starlette, ...) load only here: every other command starts without them.
    import anyio

    from loope.mcp.server import serve

    anyio.run(serve, root)
    return 0
