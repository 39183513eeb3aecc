"""A fake Slack Web API on 127.0.0.1: records every call and answers like Slack (or fails on purpose).

Point loope at it with ``LOOPE_SLACK_API_URL=<fake.url>``. ``fail(method, mode, times)`` makes the
next ``times`` calls of ``method`` (``"*"`` for any) fail with one of:
``ratelimited`` (HTTP 429, Retry-After: 1), ``invalid_auth`` (200, ok: false), ``http500``, ``hang``
(no answer until the fake is closed or ``HANG_S`` passes — past any client timeout).
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from tests.helpers import eventually

CHANNEL_ID = "C0LOOPS"
HANG_S = 60.0


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    token: str | None


@dataclass
class _Failure:
    mode: str
    times: int | None


@dataclass
class FakeSlack:
    server: ThreadingHTTPServer
    calls: list[Call] = field(default_factory=list)
    failures: dict[str, _Failure] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/api/"

    def fail(self, method: str, mode: str, times: int | None = 1) -> None:
        assert mode in ("ratelimited", "invalid_auth", "http500", "hang"), mode
        with self.lock:
            self.failures[method] = _Failure(mode, times)

    def methods(self) -> list[str]:
        with self.lock:
            return [c.method for c in self.calls]

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, predicate: Any, timeout: float = 60.0) -> bool:
        """Wait until ``predicate(self)`` holds (a deadline, not a timing assertion)."""
        return eventually(lambda: predicate(self), timeout)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    # -- the server side ----------------------------------------------------------------------

    def _failure_for(self, method: str) -> str | None:
        with self.lock:
            for key in (method, "*"):
                failure = self.failures.get(key)
                if failure is None:
                    continue
                if failure.times is not None:
                    failure.times -= 1
                    if failure.times <= 0:
                        del self.failures[key]
                return failure.mode
        return None

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "chat.postMessage":
            ts = f"1700000000.{next(self._ts):06d}"
            return {"ok": True, "channel": CHANNEL_ID, "ts": ts, "message": {"text": params.get("text"), "ts": ts}}
        if method == "chat.update":
            return {"ok": True, "channel": params.get("channel"), "ts": params.get("ts"), "text": params.get("text")}
        return {"ok": True}


def _handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            method = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
            if "json" in (self.headers.get("Content-Type") or ""):
                params = json.loads(raw or "{}")
            else:
                params = dict(parse_qsl(raw))
            auth = self.headers.get("Authorization") or ""
            with fake.lock:
                fake.calls.append(Call(method, params, auth.removeprefix("Bearer ") or None))
            mode = fake._failure_for(method)
            if mode == "hang":
                fake.release.wait(HANG_S)
                return self._send(200, {"ok": False, "error": "too_late"})
            if mode == "ratelimited":
                return self._send(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"})
            if mode == "invalid_auth":
                return self._send(200, {"ok": False, "error": "invalid_auth"})
            if mode == "http500":
                return self._send(500, None)
            return self._send(200, fake._answer(method, params))

        def _send(self, status: int, body: dict[str, Any] | None, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b"Internal Server Error"
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if body is not None else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                return  # the client gave up (a hang past its timeout)

    return Handler


def start() -> FakeSlack:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    fake = FakeSlack(server)
    server.RequestHandlerClass = _handler(fake)
    threading.Thread(target=server.serve_forever, name="fake-slack", daemon=True).start()
    return fake
