"""A scripted model server: real agent CLIs talk to it instead of a model provider.

``ModelServer`` is a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) that hands each request to
the API mounted for its method and path, and records every request, answered or not. An API is any
object with a ``name`` and ``routes()`` (``{(method, path): handler}``); a handler gets an
``Exchange`` (the parsed request, and the means to answer it in JSON or server-sent events).

``AnthropicMessages`` serves Claude Code: the Messages API, streaming (SSE: text and tool_use
blocks, usage) and not (``stream: false``, the CLI's fallback when streams keep failing). A script,
any callable ``(MessagesRequest) -> Turn | Fail``, decides every answer from the request alone
(which turn this is, the prompt, the last tool results), so retries get the same answer.
``OpenAIResponses`` serves codex: the Responses API, always streamed (SSE: message, function_call
and custom_tool_call items with their deltas, then ``response.completed`` with the usage). Its
script, ``(ResponsesRequest) -> Response | Fail``, decides from the request alone too: codex keeps
no server-side state and re-sends every earlier call and its output, so the number of tool outputs
says which step of the script this is.
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

# -- the generic server ---------------------------------------------------------------------------


@dataclass
class Recorded:
    """One request the server received, and how it was answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any
    """The parsed JSON body (None when empty; the raw text when not JSON)."""
    api: str | None = None
    """The name of the API that answered (None: no route matched, 404)."""
    status: int | None = None
    reply: Any = None
    """What the API chose to answer (its own summary, for assertions)."""
    error: str | None = None
    """The traceback when the API (or its script) raised; the client got a 500."""


class Exchange:
    """One HTTP request being answered."""

    def __init__(self, handler: _Handler, record: Recorded) -> None:
        self._handler = handler
        self.record = record
        self.streaming = False

    @property
    def body(self) -> Any:
        return self.record.body

    @property
    def headers(self) -> dict[str, str]:
        return self.record.headers

    def send_json(self, status: int, payload: object, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        h = self._handler
        self.record.status = status
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.send_header("request-id", "req_" + uuid.uuid4().hex[:16])
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    def start_stream(self, content_type: str = "text/event-stream; charset=utf-8") -> None:
        """Send the headers of a streamed answer; the connection closes when it ends."""
        h = self._handler
        self.record.status = 200
        h.send_response(200)
        h.send_header("content-type", content_type)
        h.send_header("cache-control", "no-cache")
        h.send_header("request-id", "req_" + uuid.uuid4().hex[:16])
        h.send_header("connection", "close")
        h.end_headers()
        h.close_connection = True
        self.streaming = True

    def sse(self, data: Mapping[str, Any], event: str | None = "") -> None:
        """One server-sent event; its ``event:`` line is ``data["type"]`` unless given (None: no such line)."""
        assert self.streaming, "call start_stream() first"
        name = data.get("type") if event == "" else event
        head = f"event: {name}\n" if name else ""
        self._handler.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self._handler.wfile.flush()


Route = Callable[[Exchange], None]


class API(Protocol):
    """Something the server can mount: a name for the records, and its routes."""

    name: str

    def routes(self) -> Mapping[tuple[str, str], Route]: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "loope-model-server/1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # the tests' output stays clean
        return None

    def _serve(self) -> None:
        split = urlsplit(self.path)
        record = Recorded(
            method=self.command,
            path=split.path,
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=self._body(),
        )
        model = self.server.model
        model.record(record)
        found = model.route(self.command, split.path)
        exchange = Exchange(self, record)
        if found is None:
            exchange.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": split.path}})
            return
        record.api, handler = found
        try:
            handler(exchange)
        except Exception:  # noqa: BLE001 - a script's bug is kept for the test to report, not swallowed
            record.error = traceback.format_exc()
            if not exchange.streaming:
                exchange.send_json(500, {"type": "error", "error": {"type": "api_error", "message": "script failed"}})

    def _body(self) -> Any:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve


class ModelServer:
    """The scripted server: mount APIs, start it, point the CLIs at ``url``, read ``requests``."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], tuple[str, Route]] = {}
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def mount(self, api: API) -> API:
        for (method, path), handler in api.routes().items():
            self._routes[(method.upper(), path)] = (api.name, handler)
        return api

    def route(self, method: str, path: str) -> tuple[str, Route] | None:
        return self._routes.get((method.upper(), path.rstrip("/") or "/"))

    def record(self, request: Recorded) -> None:
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, api: str) -> list[Recorded]:
        return [r for r in self.requests if r.api == api]

    @property
    def errors(self) -> list[str]:
        """Tracebacks of the handlers and scripts that raised."""
        return [r.error for r in self.requests if r.error]

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ModelServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.model = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = self._thread = None


@contextmanager
def running(*apis: API) -> Iterator[ModelServer]:
    """A started server with ``apis`` mounted, stopped on exit."""
    server = ModelServer()
    for api in apis:
        server.mount(api)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -- the Anthropic Messages API -------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Token counts one reply reports; claude prices them itself (``total_cost_usd``)."""

    input_tokens: int = 100
    output_tokens: int = 20
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Turn:
    """One assistant reply: content blocks (``text()``, ``tool_use()``) and its usage."""

    blocks: tuple[dict[str, Any], ...]
    usage: Usage = Usage()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(b["type"] == "tool_use" for b in self.blocks) else "end_turn"


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Fail:
    """An HTTP error instead of a reply (401, 429, 500, 529 ...)."""

    status: int
    message: str = ""
    retry_after: float | None = None
    headers: tuple[tuple[str, str], ...] = ()
    """More response headers (a plan limit's ``anthropic-ratelimit-unified-*``)."""
    error: tuple[tuple[str, Any], ...] = ()
    """More members of the error object (codex's ``usage_limit_reached`` carries ``resets_at``)."""

    @property
    def error_type(self) -> str:
        return dict(self.error).get("type") or _ERROR_TYPES.get(self.status, "api_error")


def plan_limit(reset_at: float, window: str = "five_hour") -> Fail:
    """Claude's subscription limit as the API reports it: a 429 whose unified headers say rejected until ``reset_at``.

    Claude Code reads these headers only when it is logged in with a subscription (an OAuth
    token), and then prints a ``rate_limit_event`` with ``resetsAt`` and "You've hit your limit".
    """
    reset = str(int(reset_at))
    short = {"five_hour": "5h", "seven_day": "7d"}.get(window, window)
    headers = (
        ("anthropic-ratelimit-unified-status", "rejected"),
        ("anthropic-ratelimit-unified-reset", reset),
        ("anthropic-ratelimit-unified-representative-claim", window),
        (f"anthropic-ratelimit-unified-{short}-status", "rejected"),
        (f"anthropic-ratelimit-unified-{short}-reset", reset),
    )
    return Fail(429, "This request would exceed your account's rate limit. Please try again later.", headers=headers)


def codex_usage_limit(reset_at: float) -> Fail:
    """ChatGPT's plan limit as the Responses API reports it to codex: a 429 ``usage_limit_reached``."""
    seconds = max(0, int(reset_at - time.time()))
    extra = (
        ("type", "usage_limit_reached"),
        ("plan_type", "plus"),
        ("resets_at", int(reset_at)),
        ("resets_in_seconds", seconds),
    )
    return Fail(429, "The usage limit has been reached", error=extra)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": name, "input": tool_input}


def reply(*blocks: dict[str, Any], usage: Usage | None = None) -> Turn:
    return Turn(tuple(blocks), usage or Usage())


_CWD = re.compile(r"Primary working directory:\s*(\S+)")


class MessagesRequest:
    """A read-only view of one Messages API request, for scripts to decide on."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [m for m in self.body.get("messages") or [] if isinstance(m, dict)]

    @property
    def main(self) -> bool:
        """The agent's own conversation (it offers tools), not a side request such as a title."""
        return bool(self.body.get("tools"))

    @property
    def turn(self) -> int:
        """How many replies the conversation already holds: 0 for the first request."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def prompt(self) -> str:
        """The user's prompt: the first user message without the CLI's ``<system-reminder>`` blocks."""
        for message in self.messages:
            if message.get("role") == "user":
                return "\n".join(t for t in _texts(message) if not t.lstrip().startswith("<system-reminder>"))
        return ""

    @property
    def cwd(self) -> str | None:
        """The working directory the CLI announces in its environment section."""
        system = self.body.get("system")
        sources = [system] if isinstance(system, str) else _texts({"content": system})
        for message in self.messages:
            sources += _texts(message)
        for source in sources:
            found = _CWD.search(source)
            if found:
                return found.group(1)
        return None

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results in the latest user message: ``{"content": str, "is_error": bool}``."""
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            blocks = [b for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_result"]
            return [{"content": _result_text(b.get("content")), "is_error": bool(b.get("is_error"))} for b in blocks]
        return []


def _texts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


Script = Callable[[MessagesRequest], "Turn | Fail"]


class Scripted:
    """A script from a list of turns: reply number N answers the request that holds N replies.

    Past the end it answers ``done``; side requests (no tools) get ``side_text``.
    """

    def __init__(self, *turns: Turn | Fail, side_text: str = "Fix the bug") -> None:
        self.turns = turns
        self.side_text = side_text

    def __call__(self, request: MessagesRequest) -> Turn | Fail:
        if not request.main:
            return reply(text(self.side_text))
        if request.turn < len(self.turns):
            return self.turns[request.turn]
        return reply(text("done"))


class AnthropicMessages:
    """``POST /v1/messages`` (SSE or JSON) and ``/v1/messages/count_tokens``, answered by ``script``."""

    name = "anthropic"

    def __init__(self, script: Script) -> None:
        self.script = script

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {("POST", "/v1/messages"): self.messages, ("POST", "/v1/messages/count_tokens"): self.count_tokens}

    def count_tokens(self, exchange: Exchange) -> None:
        exchange.send_json(200, {"input_tokens": len(json.dumps(exchange.body or {})) // 4})

    def messages(self, exchange: Exchange) -> None:
        body = exchange.body if isinstance(exchange.body, dict) else {}
        request = MessagesRequest(body)
        answer = self.script(request)
        if isinstance(answer, Fail):
            exchange.record.reply = {"status": answer.status}
            headers = {"x-should-retry": "false"} if answer.status == 401 else {}
            if answer.retry_after is not None:
                headers["retry-after"] = f"{answer.retry_after:g}"
            headers.update(answer.headers)
            message = answer.message or f"scripted {answer.status}"
            exchange.send_json(
                answer.status, {"type": "error", "error": {"type": answer.error_type, "message": message}}, headers
            )
            return
        exchange.record.reply = [dict(b) for b in answer.blocks]
        message = {
            "id": "msg_" + uuid.uuid4().hex[:20],
            "type": "message",
            "role": "assistant",
            "model": request.model or "claude-scripted",
            "content": list(answer.blocks),
            "stop_reason": answer.stop_reason,
            "stop_sequence": None,
            "usage": answer.usage.to_dict(),
        }
        if body.get("stream"):
            _stream(exchange, message)
        else:
            exchange.send_json(200, message)


def _stream(exchange: Exchange, message: dict[str, Any]) -> None:
    """``message`` as the Messages API streams it: input usage first, output usage and stop reason last."""
    exchange.start_stream()
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    exchange.sse({"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"], 40)]
        else:
            opening = {**block, "input": {}}
            encoded = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in _chunks(encoded, 30)]
        exchange.sse({"type": "content_block_start", "index": index, "content_block": opening})
        for delta in deltas:
            exchange.sse({"type": "content_block_delta", "index": index, "delta": delta})
        exchange.sse({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    exchange.sse({"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage["output_tokens"]}})
    exchange.sse({"type": "message_stop"})


def _chunks(text: str, size: int) -> list[str]:
    return [text[at : at + size] for at in range(0, len(text), size)] or [""]


# -- the OpenAI Responses API ---------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    """Token counts one response reports (codex sums them over the turn, and prices nothing)."""

    input_tokens: int = 100
    """All input, the cached part included (OpenAI counts cached tokens inside input_tokens)."""
    output_tokens: int = 20
    """All output, the reasoning part included."""
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        }


@dataclass(frozen=True)
class Response:
    """One model response: output items (``message()``, ``function_call()``, ...) and its usage."""

    items: tuple[dict[str, Any], ...]
    usage: Tokens = Tokens()


def message(value: str) -> dict[str, Any]:
    """An assistant message item."""
    content = [{"type": "output_text", "text": value, "annotations": []}]
    return {
        "type": "message",
        "id": "msg_" + uuid.uuid4().hex[:16],
        "role": "assistant",
        "status": "completed",
        "content": content,
    }


def function_call(name: str, **arguments: Any) -> dict[str, Any]:
    """A call of the function tool ``name`` (codex answers it with a ``function_call_output`` item)."""
    return {
        "type": "function_call",
        "id": "fc_" + uuid.uuid4().hex[:16],
        "call_id": "call_" + uuid.uuid4().hex[:16],
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def exec_command(cmd: str) -> dict[str, Any]:
    """A shell command through codex's ``exec_command`` tool (run sandboxed, as ``bash -lc``)."""
    return function_call("exec_command", cmd=cmd)


def apply_patch(patch: str) -> dict[str, Any]:
    """A call of codex's freeform ``apply_patch`` tool (offered for the models in codex's catalog)."""
    return {
        "type": "custom_tool_call",
        "id": "ctc_" + uuid.uuid4().hex[:16],
        "call_id": "call_" + uuid.uuid4().hex[:16],
        "name": "apply_patch",
        "input": patch,
        "status": "completed",
    }


def reasoning(summary: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": "rs_" + uuid.uuid4().hex[:16],
        "summary": [{"type": "summary_text", "text": summary}],
    }


def respond(*items: dict[str, Any], usage: Tokens | None = None) -> Response:
    return Response(tuple(items), usage or Tokens())


_TAG = re.compile(r"<(cwd)>([^<]*)</\1>")


class ResponsesRequest:
    """A read-only view of one Responses API request, for scripts to decide on.

    Codex keeps no server-side state (``store: false``): each request re-sends the whole
    conversation, its own earlier calls and their outputs included.
    """

    def __init__(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        self.body = body
        self.headers = dict(headers or {})

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def input(self) -> list[dict[str, Any]]:
        items = self.body.get("input")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name") or t.get("type")) for t in self.body.get("tools") or [] if isinstance(t, dict)]

    def outputs(self) -> list[str]:
        """What the tools answered so far (``function_call_output`` and ``custom_tool_call_output`` items), in order."""
        found = []
        for item in self.input:
            if str(item.get("type", "")).endswith("_call_output"):
                output = item.get("output")
                found.append(output if isinstance(output, str) else json.dumps(output))
        return found

    @property
    def turn(self) -> int:
        """How many tool calls were answered: with one call per response, the responses so far."""
        return len(self.outputs())

    def _user_texts(self) -> list[str]:
        texts = []
        for item in self.input:
            if item.get("type") == "message" and item.get("role") == "user":
                content = item.get("content")
                if isinstance(content, str):
                    texts.append(content)
                else:
                    texts += [str(c.get("text", "")) for c in content or [] if isinstance(c, dict)]
        return texts

    @property
    def prompt(self) -> str:
        """The user's prompt: the last user message that is not one of codex's ``<context>`` blocks."""
        texts = [t for t in self._user_texts() if not t.lstrip().startswith(("<", "# AGENTS.md"))]
        return texts[-1] if texts else ""

    @property
    def cwd(self) -> str | None:
        """The working directory codex announces in its ``<environment_context>``."""
        for value in self._user_texts():
            found = _TAG.search(value)
            if found:
                return found.group(2)
        return None

    @property
    def metadata(self) -> dict[str, Any]:
        """``x-codex-turn-metadata``: the sandbox mode, the model, whether analytics are on, ..."""
        raw = self.headers.get("x-codex-turn-metadata") or (self.body.get("client_metadata") or {}).get(
            "x-codex-turn-metadata"
        )
        try:
            data = json.loads(raw) if isinstance(raw, str) else {}
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def sandbox_mode(self) -> str | None:
        return self.metadata.get("sandbox_mode")


@dataclass(frozen=True)
class Hang:
    """No answer at all: the request is read and left unanswered until ``release`` is set (then dropped)."""

    release: threading.Event


ResponsesScript = Callable[[ResponsesRequest], "Response | Fail | Hang"]


class ScriptedResponses:
    """A script from a list of responses: response N answers the request holding N tool outputs."""

    def __init__(self, *responses: Response | Fail | Hang) -> None:
        self.responses = responses

    def __call__(self, request: ResponsesRequest) -> Response | Fail | Hang:
        if request.turn < len(self.responses):
            return self.responses[request.turn]
        return respond(message("done"))


_OPENAI_ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_denied", None),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


class OpenAIResponses:
    """``POST /v1/responses`` (always streamed, as codex asks) and ``GET /v1/models``, answered by ``script``."""

    name = "openai"

    def __init__(self, script: ResponsesScript) -> None:
        self.script = script

    def routes(self) -> Mapping[tuple[str, str], Route]:
        return {("POST", "/v1/responses"): self.responses, ("GET", "/v1/models"): self.models}

    def models(self, exchange: Exchange) -> None:
        exchange.send_json(200, {"object": "list", "data": [], "models": []})

    def responses(self, exchange: Exchange) -> None:
        body = exchange.body if isinstance(exchange.body, dict) else {}
        request = ResponsesRequest(body, exchange.headers)
        answer = self.script(request)
        if isinstance(answer, Hang):
            exchange.record.reply = "hang"
            answer.release.wait()
            exchange._handler.close_connection = True  # drop the connection: it never got an answer
            return
        if isinstance(answer, Fail):
            exchange.record.reply = {"status": answer.status}
            kind, code = _OPENAI_ERRORS.get(answer.status, ("server_error", None))
            headers = {"retry-after": f"{answer.retry_after:g}"} if answer.retry_after is not None else {}
            error = {
                "message": answer.message or f"scripted {answer.status}",
                "type": kind,
                "param": None,
                "code": code,
                **dict(answer.error),
            }
            exchange.send_json(answer.status, {"error": error}, headers)
            return
        exchange.record.reply = [dict(i) for i in answer.items]
        _stream_response(exchange, request.model or "gpt-scripted", answer)


def _stream_response(exchange: Exchange, model: str, answer: Response) -> None:
    """``answer`` as the Responses API streams it: created, each item added/deltas/done, completed with usage."""
    exchange.start_stream()
    sequence = iter(range(1_000_000))

    def send(data: dict[str, Any]) -> None:
        exchange.sse({**data, "sequence_number": next(sequence)})

    base = {"id": "resp_" + uuid.uuid4().hex[:16], "object": "response", "model": model, "status": "in_progress"}
    send({"type": "response.created", "response": {**base, "output": []}})
    send({"type": "response.in_progress", "response": {**base, "output": []}})
    for index, item in enumerate(answer.items):
        at = {"output_index": index}
        send({"type": "response.output_item.added", **at, "item": _opening(item)})
        for event in _item_deltas(item):
            send({**event, **at, "item_id": item["id"]})
        send({"type": "response.output_item.done", **at, "item": item})
    done = {**base, "status": "completed", "output": list(answer.items), "usage": answer.usage.to_dict()}
    send({"type": "response.completed", "response": done})


def _opening(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``output_item.added`` shows it: in progress, its content still empty."""
    empty = {"message": {"content": []}, "function_call": {"arguments": ""}, "custom_tool_call": {"input": ""}}
    return {
        **item,
        "status": "in_progress",
        **empty.get(item["type"], {}),
        **({"summary": []} if item["type"] == "reasoning" else {}),
    }


def _item_deltas(item: dict[str, Any]) -> list[dict[str, Any]]:
    kind = item["type"]
    if kind == "message":
        value = item["content"][0]["text"]
        part = {"content_index": 0}
        return [
            {
                "type": "response.content_part.added",
                **part,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
            *({"type": "response.output_text.delta", **part, "delta": chunk} for chunk in _chunks(value, 40)),
            {"type": "response.output_text.done", **part, "text": value},
            {"type": "response.content_part.done", **part, "part": item["content"][0]},
        ]
    if kind == "function_call":
        arguments = item["arguments"]
        return [
            *({"type": "response.function_call_arguments.delta", "delta": c} for c in _chunks(arguments, 30)),
            {"type": "response.function_call_arguments.done", "arguments": arguments},
        ]
    if kind == "custom_tool_call":
        return [
            {"type": "response.custom_tool_call_input.delta", "delta": item["input"]},
            {"type": "response.custom_tool_call_input.done", "input": item["input"]},
        ]
    if kind == "reasoning":
        summary = item["summary"][0]["text"]
        part = {"summary_index": 0}
        return [
            {"type": "response.reasoning_summary_part.added", **part, "part": {"type": "summary_text", "text": ""}},
            {"type": "response.reasoning_summary_text.delta", **part, "delta": summary},
            {"type": "response.reasoning_summary_text.done", **part, "text": summary},
            {"type": "response.reasoning_summary_part.done", **part, "part": item["summary"][0]},
        ]
    return []
