"""The Stop button of a run's Slack message: what a click does, and the Socket Mode listener.

A click arrives as a ``block_actions`` payload. :func:`handle_action` turns it into a stop request
(``loope.control.request_stop``) and the reply to post in the message's thread; it touches no
socket, so it is tested with a payload alone. :func:`listen` is the thin Socket Mode glue around it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loope.control import request_stop
from loope.errors import LoopeError
from loope.notify.slack_text import STOP_ACTION, excerpt
from loope.records.rundir import RUNS

if TYPE_CHECKING:
    from slack_sdk.web import WebClient

APP_TOKEN_ENV = "SLACK_APP_TOKEN"
_RUN_ID = re.compile(r"^\d{4,}-[a-z0-9-]*$")


@dataclass(frozen=True)
class Reply:
    """What to say in the thread of the message whose button was clicked."""

    channel: str | None
    thread_ts: str | None
    text: str
    stopped: str | None = None
    """The run asked to stop, when one was."""


def handle_action(payload: Mapping[str, Any], *, workdir: Path) -> Reply | None:
    """Act on one interaction payload; None when it is not a click on a loope Stop button.

    Only runs of ``workdir`` are stopped: the button's value names its project, and a listener
    serves one project, so a message cannot reach into other directories on this machine.
    """
    if payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions") or []
    action = next((a for a in actions if isinstance(a, dict) and a.get("action_id") == STOP_ACTION), None)
    if action is None:
        return None
    container = payload.get("container") or {}
    message = payload.get("message") or {}
    channel = (payload.get("channel") or {}).get("id") or container.get("channel_id")
    thread_ts = message.get("thread_ts") or message.get("ts") or container.get("message_ts")
    user = (payload.get("user") or {}).get("id")
    text, stopped = _stop(action.get("value"), workdir, f"<@{user}>" if user else "Someone")
    return Reply(channel, thread_ts, text, stopped)


def _stop(value: Any, workdir: Path, who: str) -> tuple[str, str | None]:

    try:
        target = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        target = None
    if not isinstance(target, dict) or not isinstance(target.get("run_id"), str):
        return "This Stop button names no run; it was not made by loope.", None
    run_id = target["run_id"]
    if not _RUN_ID.match(run_id):
        return f"This Stop button names no loope run ({run_id[:60]!r}).", None
    home = Path(str(target.get("workdir") or "")).expanduser()
    if not _same_dir(home, workdir):
        return (
            f"Run `{run_id}` belongs to `{home}`, not to `{workdir}` which this listener serves;"
            f" run `loope slack-listen --workdir {home}` to stop it from Slack.",
            None,
        )
    if not (workdir / RUNS / run_id / "run.json").is_file():
        return f"Run `{run_id}` is not in `{workdir}`.", None
    try:
        asked = request_stop(workdir, run_id)
    except (LoopeError, OSError, ValueError) as exc:
        return f"Could not stop run `{run_id}`: {exc}", None
    if not asked:
        return f"Run `{run_id}` has already finished; nothing to stop.", None
    return f":octagonal_sign: {who} asked run `{run_id}` to stop; it stops before its next step.", run_id


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def post_reply(web: WebClient, reply: Reply) -> None:
    """Post ``reply`` in its thread (nowhere, when the payload named no message)."""
    if reply.channel and reply.thread_ts:
        web.chat_postMessage(channel=reply.channel, thread_ts=reply.thread_ts, text=reply.text)


def listen(workdir: Path, *, app_token: str, web: WebClient, report: Callable[[str], None]) -> None:
    """Answer Stop buttons over Socket Mode until Ctrl-C: ack, stop the run, confirm in the thread."""

    from slack_sdk.errors import SlackApiError, SlackClientError
    from slack_sdk.socket_mode import SocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest
    from slack_sdk.socket_mode.response import SocketModeResponse

    def process(client: Any, request: SocketModeRequest) -> None:
        # Slack wants every envelope acknowledged within 3 seconds, whatever it holds.
        client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        if request.type != "interactive" or not isinstance(request.payload, dict):
            return
        reply = handle_action(request.payload, workdir=workdir)
        if reply is None:
            return
        report(reply.text)
        try:
            post_reply(web, reply)
        except (SlackClientError, OSError) as exc:
            report(f"could not post the confirmation in Slack: {exc}")

    client = SocketModeClient(app_token=app_token, web_client=web, logger=_one_line_logger(report))
    client.socket_mode_request_listeners.append(process)
    try:
        try:
            client.connect()
        except SlackApiError as exc:
            error = exc.response.get("error") if isinstance(exc.response.data, dict) else exc.response.status_code
            raise LoopeError(
                f"Slack refused the Socket Mode connection ({error}): {APP_TOKEN_ENV} must be an app-level token"
                " (xapp-…) with connections:write, and Socket Mode must be on for the app"
            ) from None
        except (SlackClientError, OSError) as exc:
            raise LoopeError(f"cannot reach Slack for Socket Mode: {exc}") from None
        threading.Event().wait()
    finally:
        client.close()  # its threads run from the moment it is made


def _one_line_logger(report: Callable[[str], None]) -> logging.Logger:
    """The Socket Mode client's logger: its warnings as one line each through ``report``, no tracebacks."""

    class OneLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            report("slack: " + excerpt(record.getMessage(), 300))

    logger = logging.getLogger("loope.slack_listen")
    logger.propagate = False
    logger.handlers = [OneLine(logging.WARNING)]
    return logger
