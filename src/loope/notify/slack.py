"""``--notify slack:CHANNEL``: one message per run, edited as it goes, with a reaction for its state.

run_started posts the message (goal, budget, a Stop button) and reacts ``hourglass``; each
iteration_finished edits it with a progress bar and swaps the reaction for
``arrows_counterclockwise``; run_finished edits it a last time with the outcome, sets the outcome's
reaction (see ``slack_text.OUTCOMES``) and posts the agent's state file in the thread. Every call
runs on the notifier's worker thread; problems go to ``notify.log`` and never reach the run.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from loope.events import Event, IterationFinished, RunFinished, RunStarted
from loope.notify import slack_text as fmt
from loope.notify.delivery import NotifyLog, Worker
from loope.records import state_file
from loope.records.model import Totals
from loope.records.rundir import STATE_COPY

if TYPE_CHECKING:
    from slack_sdk.http_retry import HttpRequest, HttpResponse, RetryState
    from slack_sdk.web import WebClient
    from slack_sdk.web.slack_response import SlackResponse

    from loope.store.db import Store

API_URL_ENV = "LOOPE_SLACK_API_URL"
TOKEN_ENV = "SLACK_BOT_TOKEN"
TIMEOUT_S = 10
RATE_LIMIT_RETRIES = 2
MAX_RETRY_AFTER_S = 30
"""A longer Retry-After is not waited for: the call is given up and logged."""

# Errors after which no call of this run can succeed: say so once, then stay quiet.
FATAL = {
    "invalid_auth": f"check {TOKEN_ENV}",
    "not_authed": f"set {TOKEN_ENV}",
    "account_inactive": f"{TOKEN_ENV} belongs to a deactivated account",
    "token_revoked": f"{TOKEN_ENV} was revoked; install the app again",
    "token_expired": f"{TOKEN_ENV} expired",
    "channel_not_found": "check the channel name, and invite the bot to it",
    "not_in_channel": "invite the bot to the channel (/invite @your-bot)",
    "is_archived": "the channel is archived",
}
# Harmless answers to reaction calls (the reaction was already there, or already gone).
BENIGN = {"already_reacted", "no_reaction"}


def web_client(token: str, *, log: NotifyLog | None = None) -> WebClient:
    """A WebClient for ``token`` on ``$LOOPE_SLACK_API_URL`` (or Slack), with bounded retries."""

    from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, ServerErrorRetryHandler
    from slack_sdk.web import WebClient

    logger = logging.getLogger("loope.notify.slack_sdk")
    if not logger.handlers:  # slack_sdk logs its errors; they belong in notify.log, not on the terminal
        logger.addHandler(logging.NullHandler())
    return WebClient(
        token=token,
        base_url=os.environ.get(API_URL_ENV) or WebClient.BASE_URL,
        timeout=TIMEOUT_S,
        logger=logger,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=1),
            ServerErrorRetryHandler(max_retry_count=1),
            _rate_limit_handler(log),
        ],
    )


def _rate_limit_handler(log: NotifyLog | None) -> Any:
    from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

    class BoundedRateLimit(RateLimitErrorRetryHandler):
        """Honours Retry-After on HTTP 429, at most ``RATE_LIMIT_RETRIES`` times and ``MAX_RETRY_AFTER_S`` each."""

        def _can_retry(
            self,
            *,
            state: RetryState,
            request: HttpRequest,
            response: HttpResponse | None = None,
            error: Exception | None = None,
        ) -> bool:
            if response is None or response.status_code != 429:
                return False
            wait = _retry_after(response)
            if wait > MAX_RETRY_AFTER_S:
                if log is not None:
                    log.write(f"{_method(request)} rate limited for {wait}s (HTTP 429); not retried")
                return False
            return True

        def prepare_for_next_attempt(
            self,
            *,
            state: RetryState,
            request: HttpRequest,
            response: HttpResponse | None = None,
            error: Exception | None = None,
        ) -> None:
            wait = _retry_after(response) if response is not None else 1
            if log is not None:
                log.write(f"{_method(request)} rate limited (HTTP 429); retrying in {wait}s as Slack asks")
            state.next_attempt_requested = True
            time.sleep(wait)
            state.increment_current_attempt()

    return BoundedRateLimit(max_retry_count=RATE_LIMIT_RETRIES)


def _retry_after(response: HttpResponse) -> int:
    for name, values in response.headers.items():
        if name.lower() == "retry-after":
            value = values[0] if isinstance(values, list) else values
            try:
                return max(0, int(float(value)))
            except ValueError:
                return 1
    return 1


def _method(request: HttpRequest) -> str:
    return request.url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


class SlackNotifier:
    """Reports one run in one Slack channel (see the module docstring)."""

    def __init__(self, channel: str, *, token: str, store: Store | None = None) -> None:
        self.channel = channel
        self.key = f"slack:{channel}"
        self.store = store
        self.log = NotifyLog(self.key)
        self.client = web_client(token, log=self.log)
        self.worker = Worker(self.log, name="slack")
        # What the run said when it started (written by the engine's thread before any task).
        self.run_id = ""
        self.goal = ""
        self.workdir = ""
        self.budget = ""
        self.max_iters = 1
        self.max_cost: float | None = None
        self.state_path: Path | None = None
        self.run_dir: Path | None = None
        # The message and its reaction (touched only by the worker thread).
        self.channel_id: str | None = None
        self.ts: str | None = None
        self.reaction: str | None = None
        self.disabled = False

    # -- events (the engine's thread: read what is needed now, queue the calls) ---------------

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._started(event)
        elif isinstance(event, IterationFinished):
            progress = self._progress(event.iteration, event.totals)
            self.worker.submit(
                f"update for iteration {progress.iteration}", lambda: self._tick(fmt.progress_line(progress))
            )
        elif isinstance(event, RunFinished):
            self._finished(event)

    def _started(self, event: RunStarted) -> None:
        self.log.open(event.run_dir)
        self.run_id = event.run_id
        self.goal = event.goal
        self.workdir = event.workdir
        self.max_iters = event.max_iters or 1
        self.max_cost = event.budgets.cost_usd
        self.budget = fmt.budget_line(self.max_iters, event.budgets)
        self.state_path = Path(event.state_file) if event.state_file else None
        self.run_dir = Path(event.run_dir)
        resumed_at = event.resumed_at
        done = int(resumed_at) - 1 if resumed_at else 0
        line = fmt.progress_line(fmt.Progress(done, self.max_iters, 0.0, self.max_cost, "starting"))
        if resumed_at:
            line = f"{line} (resumed)"
        self.worker.submit("the start message", lambda: self._start(line, resumed_at))

    def _state(self) -> state_file.State | None:
        path = self.state_path
        if path is None:
            return None
        if not path.exists() and self.run_dir is not None and (self.run_dir / STATE_COPY).exists():
            path = self.run_dir / STATE_COPY  # the worktree was removed when the run ended
        return state_file.read(path)

    def _progress(self, iteration: int, totals: Totals) -> fmt.Progress:
        state = self._state()
        status = state.status if state is not None else "in-progress"
        return fmt.Progress(iteration, self.max_iters, totals.cost_usd, self.max_cost, status)

    def _finished(self, event: RunFinished) -> None:
        reason = event.stop_reason or event.status
        iterations = event.iterations
        final = "\n".join(
            [
                fmt.outcome_line(reason, event.stop_detail, iterations),
                fmt.progress_line(self._progress(iterations, event.totals)),
            ]
        )
        body = ""
        state = self._state()
        if state is not None:
            # Escaped: the agent wrote it, and an unescaped <!channel> would page the whole channel.
            body = fmt.escape(state.body)
        reaction = fmt.outcome(reason)[0]
        self.worker.submit("the final message", lambda: self._finish(final, reaction, body))

    # -- deliveries (the worker thread) -------------------------------------------------------

    def _message(self, status_line: str, *, running: bool) -> fmt.Message:
        stop = fmt.stop_value(self.workdir, self.run_id) if running else None
        return fmt.run_message(
            run_id=self.run_id, goal=self.goal, budget=self.budget, status_line=status_line, stop=stop
        )

    def _start(self, line: str, resumed_at: int | None) -> None:
        known = self._known() if resumed_at else {}
        if known.get("ts") and known.get("channel"):
            self.channel_id, self.ts, self.reaction = known["channel"], known["ts"], known.get("reaction")
            self._update(self._message(line, running=True))
            self._thread_post(f"Resumed at iteration {resumed_at}.")
            return
        self._post(self._message(line, running=True))
        if self.ts is not None:
            self._react(fmt.STARTING)

    def _tick(self, line: str) -> None:
        if self._show(self._message(line, running=True)):
            self._react(fmt.RUNNING)

    def _finish(self, final: str, reaction: str, body: str) -> None:
        if not self._show(self._message(final, running=False)):
            return
        self._react(reaction)
        for piece in fmt.chunks(body):
            self._thread_post(piece)

    def _show(self, message: fmt.Message) -> bool:
        """Edit the run's message (post it, when the start message never went out); whether there is one."""
        if self.ts is None:
            self._post(message)
        else:
            self._update(message)
        return self.ts is not None

    def _post(self, message: fmt.Message) -> None:
        response = self._call(
            "chat.postMessage",
            self.client.chat_postMessage,
            channel=self.channel,
            text=message.text,
            blocks=message.blocks,
            unfurl_links=False,
            unfurl_media=False,
        )
        if response is not None:
            self.channel_id, self.ts = str(response["channel"]), str(response["ts"])
            self._remember()

    def _update(self, message: fmt.Message) -> None:
        self._call(
            "chat.update",
            self.client.chat_update,
            channel=self.channel_id,
            ts=self.ts,
            text=message.text,
            blocks=message.blocks,
        )

    def _thread_post(self, text: str) -> None:
        self._call(
            "chat.postMessage",
            self.client.chat_postMessage,
            channel=self.channel_id,
            thread_ts=self.ts,
            text=text,
            unfurl_links=False,
            unfurl_media=False,
        )

    def _react(self, name: str) -> None:
        """Make ``name`` the message's one loope reaction."""
        if self.reaction == name:
            return
        if self.reaction is not None:
            self._call(
                "reactions.remove",
                self.client.reactions_remove,
                channel=self.channel_id,
                timestamp=self.ts,
                name=self.reaction,
            )
        added = self._call(
            "reactions.add", self.client.reactions_add, channel=self.channel_id, timestamp=self.ts, name=name
        )
        self.reaction = name if added is not None else None
        self._remember()

    def _call(self, method: str, call: Any, **params: Any) -> SlackResponse | None:
        """``call(**params)``; None (and one line in notify.log) when it fails."""
        from slack_sdk.errors import SlackApiError, SlackClientError

        if self.disabled:
            return None
        try:
            response: SlackResponse = call(**params)
        except SlackApiError as exc:
            return self._api_error(method, exc.response)
        except (SlackClientError, OSError) as exc:
            self.log.write(f"{method} failed: {_describe(exc)}")
            return None
        return response

    def _api_error(self, method: str, response: Any) -> SlackResponse | None:
        data = response.data if isinstance(response.data, dict) else {}
        error = str(data.get("error") or "")
        if error in BENIGN:
            return cast("SlackResponse", response)  # the SDK's responses are untyped (Any) where they arrive
        if error in FATAL:
            self.disabled = True
            self.log.write(f"{method} failed: {error} ({FATAL[error]}); no more Slack messages for this run")
            return None
        status = getattr(response, "status_code", None)
        self.log.write(f"{method} failed: HTTP {status}" + (f", {fmt.excerpt(error, 200)}" if error else ""))
        return None

    # -- the store keeps the message, so a resumed run edits it instead of posting a new one --

    def _known(self) -> dict[str, Any]:
        if self.store is None:
            return {}
        try:
            known = self.store.notification_ids(self.run_id).get(self.key)
        except Exception as exc:  # noqa: BLE001 - a busy or broken store only costs a fresh message
            self.log.write(f"cannot read the stored Slack message: {exc}")
            return {}
        return dict(known) if isinstance(known, dict) else {}

    def _remember(self) -> None:
        if self.store is None or self.ts is None:
            return
        try:
            entry = {"channel": self.channel_id, "ts": self.ts, "reaction": self.reaction}
            self.store.set_notification_id(self.run_id, self.key, entry)  # this channel's entry only
        except Exception as exc:  # noqa: BLE001 - the message still went out; only a resume would post anew
            self.log.write(f"cannot store the Slack message id: {exc}")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_S}s"
    reason = getattr(exc, "reason", None)
    return f"{type(exc).__name__}: {reason if reason is not None else exc}"
