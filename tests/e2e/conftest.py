"""End-to-end fixtures: the real agent CLIs (installed by ``make agents``) against the scripted model server.

The CLIs come from ``$LOOPE_AGENTS_DIR/node_modules/.bin`` (``make test`` sets it; without it, the
repository's ``.cache/agents``). A test whose CLI is missing is skipped, saying how to install it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.model_server import AnthropicMessages, ModelServer, Script

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
    CLI gets a fake key, a private config dir and no retries (a scripted failure fails at once).
    """

    def mount(script: Script, *, retries: int = 0) -> AnthropicMessages:
        for name in _CLAUDE_LEAKS:
            monkeypatch.delenv(name, raising=False)
        config = tmp_path / "claude-config"
        config.mkdir(exist_ok=True)
        monkeypatch.setenv("LOOPE_CLAUDE_BIN", str(claude_bin))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
        monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", str(retries))
        api = AnthropicMessages(script)
        model_server.mount(api)
        return api

    return mount


@pytest.fixture
def e2e_reviewer() -> list[str]:
    """The reviewer flags of the end-to-end loop test (``--no-review`` for now).

    Hook for the codex adapter: mount the OpenAI Responses API on ``model_server`` with a script
    that answers ``VERDICT: PASS``, point codex at it, and return ``["--reviewer", "codex"]``.
    """
    return ["--no-review"]
