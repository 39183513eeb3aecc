"""``loope slack-listen``: answer the Stop buttons of this project's Slack messages."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from loope.cli.options import project_dir, workdir_option
from loope.cli.slack_actions import APP_TOKEN_ENV, listen
from loope.errors import LoopeError
from loope.notify.slack import TOKEN_ENV, web_client


@click.command("slack-listen", short_help="Stop runs from the Stop buttons of --notify slack: messages.")
@workdir_option
def slack_listen(workdir: Path | None) -> int:
    """Stop runs from Slack: listen (Socket Mode) for clicks on the Stop button of --notify slack: messages.

    Needs SLACK_APP_TOKEN (an app-level xapp- token with connections:write, Socket Mode and
    Interactivity on) and SLACK_BOT_TOKEN (to confirm in the thread). Ctrl-C quits.
    """
    root = project_dir(workdir)
    app_token = os.environ.get(APP_TOKEN_ENV, "").strip()
    bot_token = os.environ.get(TOKEN_ENV, "").strip()
    if not app_token:
        raise LoopeError(
            f"set {APP_TOKEN_ENV} to an app-level token (xapp-…, scope connections:write) with Socket Mode on"
        )
    if not bot_token:
        raise LoopeError(f"set {TOKEN_ENV} (xoxb-…, scope chat:write) so the stop can be confirmed in Slack")

    def report(text: str) -> None:
        click.echo(f"{time.strftime('%H:%M:%S')} {text}")

    click.echo(f"listening for Stop buttons of runs in {root} (Ctrl-C to quit)")
    try:
        listen(root, app_token=app_token, web=web_client(bot_token), report=report)
    except KeyboardInterrupt:
        click.echo("stopped listening")
    return 0
