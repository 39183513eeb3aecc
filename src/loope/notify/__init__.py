"""Notifications: observers of the engine's events that tell people and systems how a run goes.

``--notify`` takes ``slack:CHANNEL`` (needs ``SLACK_BOT_TOKEN``), ``webhook:URL`` or ``cmd:COMMAND``,
repeatable. Specs are checked before the run is created, so a bad one leaves nothing behind. A
notifier never changes a run: whatever goes wrong is one line in ``<run_dir>/notify.log``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from loope.errors import LoopeError
from loope.record import record

if TYPE_CHECKING:
    from loope.events import Observer
    from loope.notify.delivery import Queued
    from loope.store.db import Store

KINDS = ("slack", "webhook", "cmd")
USAGE = "use slack:CHANNEL, webhook:URL or cmd:COMMAND"


@record(frozen=True)
class NotifySpec:
    kind: str
    value: str


def parse_spec(text: str) -> NotifySpec:
    """One ``--notify`` value, checked; a LoopeError saying what to do when it cannot work."""
    kind, sep, value = text.partition(":")
    kind, value = kind.strip().lower(), value.strip()
    if kind not in KINDS:
        raise LoopeError(f"--notify {text!r}: unknown kind {kind!r}; {USAGE}")
    if not sep or not value:
        raise LoopeError(f"--notify {text!r}: {kind}: needs a value; {USAGE}")
    if kind == "slack":
        _check_slack(text, value)
    elif kind == "webhook":
        _check_url(f"--notify {text!r}", value)
    return NotifySpec(kind, value)


def parse_specs(specs: list[str]) -> list[NotifySpec]:
    """Every ``--notify`` value, checked, duplicates dropped (for callers that validate up front)."""
    parsed: list[NotifySpec] = []
    for text in specs:
        spec = parse_spec(text)
        if spec not in parsed:
            parsed.append(spec)
    return parsed


def _check_slack(text: str, channel: str) -> None:
    from loope.notify.slack import API_URL_ENV, TOKEN_ENV  # the Slack notifier (and logging): only for slack specs

    if any(c.isspace() for c in channel):
        raise LoopeError(f"--notify {text!r}: a Slack channel is a name like #loops or an id like C0123456789")
    if not os.environ.get(TOKEN_ENV, "").strip():
        raise LoopeError(
            f"--notify {text!r} needs a Slack bot token: set {TOKEN_ENV} (xoxb-…, scopes chat:write and"
            f" reactions:write) and invite the bot to {channel}"
        )
    api = os.environ.get(API_URL_ENV)
    if api:
        _check_url(API_URL_ENV, api)


def _check_url(what: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LoopeError(f"{what}: {url!r} is not an http(s) URL; give one like https://example.com/hook")
    try:
        _ = parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        raise LoopeError(
            f"{what}: {url!r} has a port that is not a number from 0 to 65535; give one like"
            " https://example.com:8443/hook, or leave the port out"
        ) from None


def build_notifiers(specs: list[str], *, store: Store) -> list[Observer]:
    """The observers for ``specs`` (``--notify`` values), in order, and a last one that drains them.

    ``store`` keeps the Slack message's id so a resumed run edits the same message.
    """
    # Here, not above: the notifiers load urllib.request and logging, which a run without --notify never needs.
    from loope.notify.command import CommandNotifier
    from loope.notify.delivery import Drain
    from loope.notify.slack import TOKEN_ENV, SlackNotifier
    from loope.notify.webhook import WebhookNotifier

    queued: list[Queued] = []  # deliver on a worker thread
    direct: list[Observer] = []  # run on the engine's thread
    for parsed in parse_specs(specs):
        if parsed.kind == "slack":
            queued.append(SlackNotifier(parsed.value, token=os.environ[TOKEN_ENV].strip(), store=store))
        elif parsed.kind == "webhook":
            queued.append(WebhookNotifier(parsed.value))
        else:
            direct.append(CommandNotifier(parsed.value))
    if not queued:
        return direct
    # At run_finished the queued notifiers hand over their last messages first, the commands run
    # (on the engine's thread) while they deliver, and Drain then waits for what is left.
    return [*queued, *direct, Drain(queued)]
