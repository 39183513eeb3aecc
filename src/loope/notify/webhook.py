"""``--notify webhook:URL``: every event of the run POSTed as JSON, in order, from a background thread."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from loope import __version__
from loope.events import AgentActivity, Event, RunFinished, RunStarted
from loope.notify.delivery import NotifyLog, Worker

TIMEOUT_S = 5.0
TRIES = 3
BACKOFF_S = 0.5
"""The first retry waits this long, each next one twice as long (0.5 s, 1 s)."""
FAST_FAIL_AFTER = 3
"""After this many events in a row could not be delivered, each gets one try (run_finished: all) until one does."""


def redact(url: str) -> str:
    """``https://host/…``: webhook paths often carry a secret, so logs show only the host."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/…"


@dataclass(frozen=True)
class _Failure:
    text: str
    retry: bool


class WebhookNotifier:
    """POSTs ``event.to_dict()`` for each event; 5xx, 429, refused connections and timeouts are retried."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.log = NotifyLog(f"webhook {redact(url)}")
        self.worker = Worker(self.log, name="webhook")
        self.failed_in_row = 0

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.log.open(event.run_dir)
        body = event.to_json().encode("utf-8")
        last = isinstance(event, RunFinished)
        self.worker.submit(
            event.type, lambda: self._deliver(event.type, body, last=last), droppable=isinstance(event, AgentActivity)
        )

    def _deliver(self, what: str, body: bytes, *, last: bool = False) -> None:
        """POST ``body``, retrying with backoff; one line in notify.log when any try failed.

        The run's last event gets every try even when the endpoint has been failing.
        """
        tries = 1 if self.failed_in_row >= FAST_FAIL_AFTER and not last else TRIES
        failures: list[_Failure] = []
        for attempt in range(tries):
            if attempt:
                time.sleep(BACKOFF_S * 2 ** (attempt - 1))
            failure = self._send(body)
            if failure is None:
                self.failed_in_row = 0
                if failures:
                    self.log.write(f"{what} delivered on try {attempt + 1} (before: {failures[-1].text})")
                return
            failures.append(failure)
            if not failure.retry:
                break
        self.failed_in_row += 1
        tried = f"{len(failures)} tr{'y' if len(failures) == 1 else 'ies'}"
        self.log.write(f"{what} not delivered after {tried}: {failures[-1].text}")

    def _send(self, body: bytes) -> _Failure | None:
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": f"loope/{__version__}"},
        )
        try:
            # The scheme was checked to be http(s) when the spec was parsed.
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            return _Failure(f"HTTP {exc.code} {exc.reason}", retry=exc.code >= 500 or exc.code == 429)
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                return _Failure(f"no answer within {TIMEOUT_S:g}s", retry=True)
            return _Failure(f"cannot connect: {reason}", retry=True)
        except TimeoutError:
            return _Failure(f"no answer within {TIMEOUT_S:g}s", retry=True)
        except OSError as exc:
            return _Failure(f"{type(exc).__name__}: {exc}", retry=True)
        return None
