"""End-to-end fixtures: the real agent CLIs (installed by ``make agents``) against the scripted model server.

The CLIs come from ``$LOOPE_AGENTS_DIR/node_modules/.bin`` (``make test`` sets it; without it, the
repository's ``.cache/agents``). A test whose CLI is missing is skipped, saying how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from loope.sandbox import bwrap
from tests.conftest import Project
from tests.e2e.model_server import (
    AnthropicMessages,
    ModelServer,
    OpenAIResponses,
    Response,
    ResponsesRequest,
    ResponsesScript,
    Script,
    Tokens,
    exec_command,
    message,
)

REPO = Path(__file__).resolve().parents[2]

# Variables that would send claude to a real account, or change what the scripts expect.
_CLAUDE_LEAKS = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "LOOPE_CLAUDE_BIN",
)
# Variables that would send codex to a real account or config, or bypass loope.toml's settings.
_CODEX_LEAKS = ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME", "LOOPE_CODEX_BIN")
CODEX_KEY_ENV = "LOOPE_TEST_OPENAI_KEY"
"""The variable the scripted provider's key is read from (codex sends it as a bearer token)."""


def agents_dir() -> Path:
    configured = os.environ.get("LOOPE_AGENTS_DIR")
    return Path(configured) if configured else REPO / ".cache" / "agents"


def agent_binary(name: str) -> Path:
    """The installed CLI ``name``, or a skip that says how to get it."""
    path = agents_dir() / "node_modules" / ".bin" / name
    if path.exists():
        return path
    if shutil.which("npm") is None:
        pytest.skip(f"{name} CLI not installed and npm is missing: install Node.js/npm, then `make agents`")
    pytest.skip(f"{name} CLI not found at {path}: run `make agents` (or set LOOPE_AGENTS_DIR to where it is installed)")


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A started scripted model server on 127.0.0.1; mount the APIs a test needs on it.

    A script that raised fails the test at teardown with its traceback (the CLI only saw a 500).
    """
    server = ModelServer().start()
    try:
        yield server
    finally:
        server.stop()
    assert not server.errors, "the model server's script raised:\n" + "\n".join(server.errors)


@pytest.fixture
def claude_bin() -> Path:
    return agent_binary("claude")


@pytest.fixture
def use_claude(model_server: ModelServer, claude_bin: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Point loope's ``claude`` adapter at the real CLI and the CLI at the model server.

    ``use_claude(script)`` mounts the Anthropic API answering with ``script`` and returns it. The
    CLI gets a fake key (``subscription=True``: a fake plan login), a private config dir and no
    retries of its own (a scripted failure fails at once).
    """

    def mount(script: Script, *, retries: int = 0, subscription: bool = False) -> AnthropicMessages:
        for name in _CLAUDE_LEAKS:
            monkeypatch.delenv(name, raising=False)
        config = tmp_path / "claude-config"
        config.mkdir(exist_ok=True)
        monkeypatch.setenv("LOOPE_CLAUDE_BIN", str(claude_bin))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server.url)
        if subscription:  # logged in to a plan: Claude Code then reads the plan-limit headers
            monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
            monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-test")
        else:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", str(retries))
        api = AnthropicMessages(script)
        model_server.mount(api)
        return api

    return mount


@pytest.fixture
def codex_bin() -> Path:
    return agent_binary("codex")


@pytest.fixture
def use_codex(model_server: ModelServer, codex_bin: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project):
    """Point loope's ``codex`` adapter at the real CLI and the CLI at the model server, through loope.toml.

    ``use_codex(script)`` mounts the OpenAI Responses API answering with ``script`` and returns it.
    The provider travels as a user would configure it: ``[agents.codex] args`` in the project's
    loope.toml (``-c model_providers...``), so the adapter's real flag path is exercised. The
    provider gets no retries (a scripted failure fails at once); codex gets a private, empty
    CODEX_HOME (``--isolate-home`` gives each step its own instead) and a fake key.
    """

    def mount(script: ResponsesScript) -> OpenAIResponses:
        for name in _CODEX_LEAKS:
            monkeypatch.delenv(name, raising=False)
        home = tmp_path / "codex-home"
        home.mkdir(exist_ok=True)
        monkeypatch.setenv("CODEX_HOME", str(home))
        monkeypatch.setenv(CODEX_KEY_ENV, "sk-test")
        # --disable plugins: no `git ls-remote` of codex's plugin repository at start-up.
        args = [*codex_provider_args(model_server), "--disable", "plugins"]
        _add_agent_settings(project, "codex", bin=str(codex_bin), args=args)
        api = OpenAIResponses(script)
        model_server.mount(api)
        return api

    return mount


def codex_provider_args(model_server: ModelServer) -> list[str]:
    """``-c`` flags giving codex (or codex-acp) the scripted server as its provider, without retries."""
    provider = (
        f'model_providers.loope_test={{name="loope-test", base_url="{model_server.url}/v1", wire_api="responses",'
        f' env_key="{CODEX_KEY_ENV}", request_max_retries=0, stream_max_retries=0}}'
    )
    return ["-c", provider, "-c", "model_provider=loope_test"]


def _add_agent_settings(project: Project, name: str, **settings: object) -> None:
    """Append an ``[agents.<name>]`` table to the project's loope.toml (JSON strings and lists are TOML)."""
    path = project.path / "loope.toml"
    lines = [f"[agents.{name}]", *(f"{key} = {json.dumps(value)}" for key, value in settings.items())]
    existing = path.read_text() if path.exists() else ""
    path.write_text(existing + ("\n" if existing else "") + "\n".join(lines) + "\n")


FIXED_RETURN = "return a + b"
REVIEW_TOKENS = Tokens(input_tokens=2000, output_tokens=100, cached_tokens=500)
"""What each of the codex reviewer's responses reports (the turn sums its three)."""


def codex_reviewer_script(request: ResponsesRequest) -> Response:
    """A reviewer that reads calc.py, tries to append to it, then judges what it read.

    The append must fail: codex runs readers in its read-only sandbox. (Two calls, not one
    ``cat && echo``: codex 0.171 sometimes reports no command item at all for a command its sandbox
    refused, and the read must show in the step's events.)
    """
    if request.turn == 0:
        return Response((exec_command("cat calc.py"),), REVIEW_TOKENS)
    if request.turn == 1:
        return Response((exec_command("echo '# reviewed' >> calc.py"),), REVIEW_TOKENS)
    if FIXED_RETURN in request.outputs()[0]:
        return Response((message("add() returns the sum now.\n\nVERDICT: PASS"),), REVIEW_TOKENS)
    return Response((message("add() still does not add.\n\nVERDICT: BLOCK"),), REVIEW_TOKENS)


@pytest.fixture
def e2e_reviewer(use_codex) -> list[str]:
    """The reviewer flags of the end-to-end loop test: codex (``gpt-5.5``) reviewing read-only.

    It runs ``codex_reviewer_script`` against the model server: a read and a refused write of
    calc.py, then ``VERDICT: PASS`` when the fix is in, ``VERDICT: BLOCK`` otherwise.
    """
    use_codex(codex_reviewer_script)
    return ["--reviewer", "codex:gpt-5.5"]


def codex_sandbox(own: str) -> str:
    """The ``-s`` codex runs with: inside loope's sandbox (wherever bubblewrap works) none of its own."""
    return "danger-full-access" if bwrap.support().works else own


def ran_sandboxed(project: Project) -> bool:
    """Whether the project's last run ran its steps inside loope's sandbox (as it does wherever bubblewrap works)."""
    events = (project.runs()[-1] / "events.jsonl").read_text().splitlines()
    started = next(e for e in map(json.loads, events) if e["type"] == "run_started")
    return bool(started["sandbox"]["enabled"])
