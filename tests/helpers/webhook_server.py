"""A local HTTP server receiving webhooks: records each JSON body, or fails on purpose.

``fail("http500", times)`` answers 500; ``fail("hang", times)`` answers nothing until the server is
closed (or ``HANG_S`` passes). :func:`refused_url` is a URL nothing listens on.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import eventually

HANG_S = 60.0


@dataclass
class WebhookServer:
    server: ThreadingHTTPServer
    received: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    mode: str | None = None
    times: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def fail(self, mode: str, times: int | None = None) -> None:
        assert mode in ("http500", "hang"), mode
        with self.lock:
            self.mode, self.times = mode, times

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.received)

    def wait_for(self, predicate: Any, timeout: float = 60.0) -> bool:
        """Wait until ``predicate(self)`` holds (a deadline, not a timing assertion)."""
        return eventually(lambda: predicate(self), timeout)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def _next_failure(self) -> str | None:
        with self.lock:
            self.attempts += 1
            if self.mode is None:
                return None
            mode = self.mode
            if self.times is not None:
                self.times -= 1
                if self.times <= 0:
                    self.mode = None
            return mode


def _handler(hook: WebhookServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            mode = hook._next_failure()
            if mode == "hang":
                hook.release.wait(HANG_S)
                return self._send(200)
            if mode == "http500":
                return self._send(500)
            with hook.lock:
                hook.received.append(json.loads(body))
            return self._send(204)

        def _send(self, status: int) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
            except OSError:
                return

    return Handler


def start() -> WebhookServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    hook = WebhookServer(server)
    server.RequestHandlerClass = _handler(hook)
    threading.Thread(target=server.serve_forever, name="webhook-server", daemon=True).start()
    return hook


def refused_url() -> str:
    """A URL on 127.0.0.1 whose port nothing listens on (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
