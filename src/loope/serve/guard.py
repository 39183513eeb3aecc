"""Who may talk to the dashboard: its own host names only, and for anything that acts, its token and origin.

A web page from elsewhere that the user happens to open must not stop their runs: a POST needs the
per-server token (which only the dashboard's own pages carry) and, when the browser names an origin,
that origin must be the dashboard's. The Host header is checked too, so a DNS-rebinding page cannot
pose as the dashboard. Bound beyond loopback, every request needs the token.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

TOKEN_HEADER = "x-loope-token"
TOKEN_COOKIE = "loope_token"
TOKEN_ENV = "LOOPE_SERVE_TOKEN"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """The checks every request passes before it reaches a route."""

    def __init__(self, token: str, host: str, port: int) -> None:
        self.token = token
        self.open_reads = is_loopback(host)
        """On loopback, pages and JSON are readable without the token; actions never are."""
        names = {host, "localhost", "127.0.0.1", "[::1]"} if self.open_reads else {host}
        self.hosts = {f"{name}:{port}" for name in names}
        self.origins = {f"http://{h}" for h in self.hosts}

    def has_token(self, request: Request) -> bool:
        offered = (
            request.headers.get(TOKEN_HEADER)
            or request.cookies.get(TOKEN_COOKIE)
            or request.query_params.get("token")
            or ""
        )
        return hmac.compare_digest(offered.encode(), self.token.encode())

    def refusal(self, request: Request) -> Response | None:
        """Why ``request`` is refused, as the response to send; None when it may go on."""
        host = request.headers.get("host", "")
        if host not in self.hosts:
            return _refuse(421, f"this dashboard answers to {', '.join(sorted(self.hosts))}, not {host or 'no host'}")
        origin = request.headers.get("origin")
        if origin is not None and origin not in self.origins:
            return _refuse(403, f"requests from {urlsplit(origin).netloc or origin} are refused (not this dashboard)")
        acting = request.method not in ("GET", "HEAD")
        if acting and request.headers.get(TOKEN_HEADER) is None:
            return _refuse(403, "an action needs this dashboard's token in the X-Loope-Token header")
        if (acting or not self.open_reads) and not self.has_token(request):
            return _refuse(403, "a missing or wrong token: open the dashboard with ?token=… (printed at its start)")
        return None


def _refuse(status: int, reason: str) -> Response:
    return JSONResponse({"error": reason}, status_code=status)
