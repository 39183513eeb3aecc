"""The dashboard's routes: two pages, their JSON, server-sent events, and the stop action."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from loope.control import stop_run
from loope.errors import LoopeError
from loope.records.rundir import RunDir
from loope.serve import data
from loope.serve.guard import TOKEN_COOKIE, Guard
from loope.serve.stream import run_events, runs_events

STATIC = Path(__file__).parent / "static"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="loope-token" content="{token}"><title>{title}</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body data-page="{page}" data-project="{project}" data-run="{run}">
<header class="top"><a href="/" class="brand">loope</a><span id="conn" class="conn">connecting…</span></header>
<main id="app"><p class="muted">loading…</p></main>
<script src="/static/app.js"></script></body></html>
"""


class Dashboard:
    """The app's state: the projects it shows and the guard in front of every route."""

    def __init__(self, roots: list[Path], guard: Guard) -> None:
        self.projects = data.projects(roots)
        self.guard = guard

    def _run(self, request: Request) -> tuple[data.Project, RunDir] | None:
        key, run_id = request.path_params["project"], request.path_params["run_id"]
        project = next((p for p in self.projects if p.key == key), None)
        rundir = project.run(run_id) if project else None
        return (project, rundir) if project and rundir else None

    def page(self, request: Request) -> Response:
        project = request.path_params.get("project", "")
        run = request.path_params.get("run_id", "")
        if run and self._run(request) is None:
            return PlainTextResponse(f"no run {run} in project {project}", status_code=404)
        body = PAGE.format(
            token=html.escape(self.guard.token),
            title=html.escape(f"loope · {run}" if run else "loope runs"),
            page="run" if run else "runs",
            project=html.escape(project),
            run=html.escape(run),
        )
        response = HTMLResponse(body, headers={"cache-control": "no-store"})
        if request.query_params.get("token") and self.guard.has_token(request):
            response.set_cookie(TOKEN_COOKIE, self.guard.token, httponly=True, samesite="strict")
        return response

    def list_runs(self, request: Request) -> Response:
        return JSONResponse(
            {
                "runs": data.runs(self.projects),
                "fleets": data.fleets(self.projects),
                "projects": [str(p.root) for p in self.projects],
            }
        )

    def run(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return _missing(request)
        return JSONResponse(json.loads(json.dumps(data.run_detail(*found), default=str)))

    def diff(self, request: Request) -> Response:
        found = self._run(request)
        return PlainTextResponse(data.diff(found[1])) if found else _missing(request)

    def step(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return _missing(request)
        step_dir = request.path_params["step"]
        name = request.path_params.get("name")
        if name is None:
            return JSONResponse({"step": step_dir, "files": data.step_files(found[1], step_dir)})
        offset = _int(request.query_params.get("offset"), 0)
        page = data.step_file(found[1], step_dir, name, offset)
        return JSONResponse(page) if page else _missing(request)

    def events(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return _missing(request)
        start = _int(request.headers.get("last-event-id") or request.query_params.get("offset"), 0)
        return _sse(run_events(request, found[1], start))

    def runs_stream(self, request: Request) -> Response:
        return _sse(runs_events(request, self.projects))

    async def stop(self, request: Request) -> Response:
        found = self._run(request)
        if found is None:
            return _missing(request)
        try:
            body: Any = await request.json()
        except ValueError:
            body = {}

        project, rundir = found
        try:
            requested, detail = stop_run(
                project.root, rundir.run_id, now=bool(isinstance(body, dict) and body.get("now"))
            )
        except LoopeError as exc:
            return JSONResponse({"requested": False, "detail": exc.message}, status_code=409)
        return JSONResponse({"requested": requested, "detail": detail}, status_code=200 if requested else 409)


def _int(value: str | None, default: int) -> int:
    try:
        return max(0, int(value)) if value is not None else default
    except ValueError:
        return default


def _missing(request: Request) -> Response:
    return JSONResponse({"error": f"nothing at {request.url.path}"}, status_code=404)


def _sse(stream: Any) -> Response:
    headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


class Guarded:
    """Runs every HTTP request past the guard before the app sees it."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.guard.refusal(Request(scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(roots: list[Path], guard: Guard) -> ASGIApp:
    """The dashboard for the runs of ``roots`` (project directories)."""
    board = Dashboard(roots, guard)
    run = "/api/runs/{project}/{run_id}"
    routes = [
        Route("/", board.page),
        Route("/runs/{project}/{run_id}", board.page),
        Route("/api/runs", board.list_runs),
        Route("/api/events", board.runs_stream),
        Route(run, board.run),
        Route(f"{run}/diff", board.diff),
        Route(f"{run}/events", board.events),
        Route(f"{run}/steps/{{step}}", board.step),
        Route(f"{run}/steps/{{step}}/{{name}}", board.step),
        Route(f"{run}/stop", board.stop, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    return Guarded(Starlette(routes=routes), guard)
