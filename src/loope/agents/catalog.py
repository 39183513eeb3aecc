"""What each built-in adapter is, as ``loope adapters`` and ``loope doctor`` show it.

The one place this data lives: each adapter class takes its ``info`` from here, and the commands
that only list or check adapters read it without loading any adapter (nor what adapters load).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple


class AdapterInfo(NamedTuple):
    """What ``loope adapters`` shows about an adapter.

    A NamedTuple rather than a frozen dataclass, as the small records of ``adapters`` and ``doctor``
    are: defining one costs a tenth as much, and these are defined at every start of those commands.
    """

    name: str
    binary: str | None
    install: str
    read_only: str
    """How read-only roles are enforced, or why they cannot be."""
    cost_source: str
    """"reported" when the CLI reports USD, "estimated" from token counts, or "none"."""
    summary: str = ""
    auth_env: tuple[str, ...] = ()
    """Environment variables any one of which is a usable credential."""
    login_files: tuple[str, ...] = ()
    """Files (under the home directory) a logged-in CLI keeps its credentials in."""
    version_args: tuple[str, ...] = ("--version",)
    alternate_binaries: tuple[str, ...] = ()
    """Other names the CLI is installed under (cursor: ``cursor-agent`` or ``agent``)."""


KIRO_READ_TOOLS = "read,grep,glob"
"""The only tools kiro's read roles trust (``--trust-tools``)."""
CODEX_DEFAULT_PRICE = "codex"
"""The price-table entry for a model loope cannot name (codex's own default, or one the table lacks)."""
_ACP_READ_ONLY = "loope answers the agent's permission requests: every edit and command refused"

INFO: dict[str, AdapterInfo] = {
    "claude": AdapterInfo(
        name="claude",
        binary="claude",
        install="npm install -g @anthropic-ai/claude-code",
        read_only=(
            "enforced: read roles run with --permission-mode plan (Claude Code refuses edits and"
            " commands that are not read-only); loope also undoes any change a reader leaves"
        ),
        cost_source="reported (total_cost_usd)",
        summary="Claude Code in print mode; stream-json events, reported cost, --max-budget-usd per step",
        auth_env=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        login_files=("$CLAUDE_CONFIG_DIR/.credentials.json", ".claude/.credentials.json", ".claude.json"),
    ),
    "codex": AdapterInfo(
        name="codex",
        binary="codex",
        install="npm install -g @openai/codex",
        read_only=(
            "enforced: --sandbox read-only (codex's sandbox refuses writes by commands and patches) unless"
            " [agents.codex] args choose another sandbox; loope also undoes any change a reader leaves"
        ),
        cost_source=(
            "estimated from tokens (codex reports no USD); a model loope cannot name is priced as"
            f" the {CODEX_DEFAULT_PRICE!r} entry of the price table"
        ),
        summary="Codex CLI's `exec` command; JSON events, --sandbox workspace-write for writers, prompt on stdin",
        auth_env=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_files=(".codex/auth.json",),
    ),
    "gemini": AdapterInfo(
        name="gemini",
        binary="gemini",
        install="npm install -g @google/gemini-cli",
        read_only=(
            "enforced: read roles run with --approval-mode default, where headless gemini is offered only"
            " its read-only tools (no edit, write or shell); loope also undoes any change a reader leaves"
        ),
        cost_source="estimated from the token counts gemini reports (it reports no cost)",
        summary="Gemini CLI in headless mode; stream-json events, --approval-mode yolo for writers",
        auth_env=(
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_GENAI_USE_GCA",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ),
        login_files=(".gemini/oauth_creds.json", ".gemini/.env"),
    ),
    "opencode": AdapterInfo(
        name="opencode",
        binary="opencode",
        install="npm install -g opencode-ai",
        read_only=(
            'enforced: read roles run with OPENCODE_PERMISSION={"edit":"deny","bash":"deny"}, which takes the'
            " edit, write, patch and bash tools away; loope also undoes any change a reader leaves"
        ),
        cost_source="reported (step_finish cost); estimated from tokens when opencode does not know the price",
        summary="OpenCode's `run` command; JSON events, --auto for writers, use opencode:<provider>/<model>",
        auth_env=(
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "OPENROUTER_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_GENERATIVE_AI_API_KEY",
            "GROQ_API_KEY",
            "OPENCODE_API_KEY",
        ),
        login_files=(".local/share/opencode/auth.json",),
    ),
    "cursor": AdapterInfo(
        name="cursor",
        binary="cursor-agent",
        install="curl https://cursor.com/install -fsS | bash",
        read_only=(
            "enforced: read roles run with --mode plan, in which cursor-agent refuses to write files"
            " (Cursor's documented behaviour, not tested here); loope also undoes any change a reader leaves"
        ),
        cost_source="estimated from the token counts cursor-agent reports (it reports no cost)",
        summary="Cursor's CLI agent in print mode; stream-json events, --force for writers",
        auth_env=("CURSOR_API_KEY",),
        alternate_binaries=("agent",),
        login_files=(".cursor/cli-config.json", ".config/cursor/auth.json"),
    ),
    "amp": AdapterInfo(
        name="amp",
        binary="amp",
        install="npm install -g @sourcegraph/amp",
        read_only=(
            "enforced through settings: read roles run with a private AMP_SETTINGS_FILE whose amp.tools.disable"
            " removes edit_file, create_file, undo_edit, Bash and Task; loope also undoes any change a reader leaves"
        ),
        cost_source="none: amp reports tokens but neither cost nor model (`amp usage` shows the credits spent)",
        summary="Amp in execute mode; Claude-style stream-json; amp:<mode> picks the agent mode (low..ultra)",
        auth_env=("AMP_API_KEY",),
        login_files=(".local/share/amp/secrets.json",),
    ),
    "copilot": AdapterInfo(
        name="copilot",
        binary="copilot",
        install="npm install -g @github/copilot",
        read_only=(
            "enforced: read roles run with --deny-tool=write --deny-tool=shell (a denial wins over"
            " --allow-all-tools); loope also undoes any change a reader leaves"
        ),
        cost_source="estimated from the tokens in --usage-output-file (Copilot bills premium requests, not USD)",
        summary="GitHub Copilot CLI in prompt mode; JSONL events, token counts from --usage-output-file",
        auth_env=("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_PROVIDER_BASE_URL"),
        login_files=(".copilot/config.json",),
    ),
    "goose": AdapterInfo(
        name="goose",
        binary="goose",
        install=(
            "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh"
            " | CONFIGURE=false bash  (or: brew install block-goose-cli)"
        ),
        read_only=(
            "enforced: read roles run with GOOSE_MODE=chat, where goose calls no tools at all (it cannot open"
            " files either; it reviews the diff in its prompt)"
        ),
        cost_source="reported (complete.cost_usd) when goose gives it; else estimated from its token counts",
        summary="goose `run` with stream-json events; goose:<provider>/<model> or goose:<model>",
        auth_env=(
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "OPENROUTER_API_KEY",
            "GOOGLE_API_KEY",
            "DATABRICKS_TOKEN",
        ),
        login_files=(".config/goose/config.yaml", ".config/goose/secrets.yaml"),
    ),
    "aider": AdapterInfo(
        name="aider",
        binary="aider",
        install="python -m pip install aider-install && aider-install  (or: uv tool install aider-chat)",
        read_only=(
            "enforced: read roles run with --chat-mode ask --dry-run (no edit blocks, no file writes);"
            " aider never runs shell commands here; loope also undoes any change a reader leaves"
        ),
        cost_source="reported (--analytics-log cost); estimated from its tokens when aider does not know the price",
        summary="Aider with --message; text transcript plus its analytics log; give a model: aider:<litellm model>",
        auth_env=(
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "OPENROUTER_API_KEY",
            "DEEPSEEK_API_KEY",
        ),
        login_files=(".aider.conf.yml",),
    ),
    "qwen": AdapterInfo(
        name="qwen",
        binary="qwen",
        install="npm install -g @qwen-code/qwen-code  (needs node >= 22)",
        read_only=(
            "enforced: read roles run with --approval-mode default, where headless qwen is offered no edit,"
            " write or shell tool; loope also undoes any change a reader leaves"
        ),
        cost_source="estimated from the token counts qwen reports (it reports no cost)",
        summary="Qwen Code in headless mode; Claude-style stream-json, --approval-mode yolo for writers",
        auth_env=("OPENAI_API_KEY", "DASHSCOPE_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"),
        login_files=(".qwen/oauth_creds.json", ".qwen/settings.json"),
    ),
    "kiro": AdapterInfo(
        name="kiro",
        binary="kiro-cli",
        install="curl -fsSL https://cli.kiro.dev/install | bash",
        read_only=(
            f"partly enforced: read roles trust only {KIRO_READ_TOOLS} (--trust-tools); whether headless kiro-cli"
            " denies or waits on an untrusted tool is not established; loope undoes any change a reader leaves"
        ),
        cost_source="none: kiro-cli reports credits (shown as a message), not tokens or USD",
        summary="Kiro CLI non-interactive chat; plain-text transcript, success proven by the credits trailer",
        auth_env=("KIRO_API_KEY",),
        login_files=(".local/share/kiro-cli/data.sqlite3",),
    ),
    "claude-acp": AdapterInfo(
        name="claude-acp",
        binary="claude-agent-acp",
        install="npm install -g @zed-industries/claude-agent-acp",
        read_only=_ACP_READ_ONLY,
        cost_source="reported (usage_update)",
        summary="Claude Code over ACP (Zed's claude-agent-acp)",
        auth_env=("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"),
        login_files=(".claude/.credentials.json",),
    ),
    "codex-acp": AdapterInfo(
        name="codex-acp",
        binary="codex-acp",
        install="npm install -g @zed-industries/codex-acp",
        read_only=_ACP_READ_ONLY,
        cost_source="estimated from tokens",
        summary="Codex over ACP (Zed's codex-acp)",
        auth_env=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_files=(".codex/auth.json",),
    ),
    "gemini-acp": AdapterInfo(
        name="gemini-acp",
        binary="gemini",
        install="npm install -g @google/gemini-cli",
        read_only=_ACP_READ_ONLY,
        cost_source="estimated from tokens",
        summary="Gemini CLI in its ACP mode (gemini --experimental-acp)",
        auth_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        login_files=(".gemini/oauth_creds.json",),
    ),
    "acp": AdapterInfo(
        name="acp",
        binary=None,
        install="any agent that speaks ACP on stdio: --implementer 'acp:gemini --experimental-acp'",
        read_only=_ACP_READ_ONLY,
        cost_source="reported when the agent sends usage_update, else estimated from tokens",
        summary="any Agent Client Protocol agent (acp:<command>)",
    ),
    "exec": AdapterInfo(
        name="exec",
        binary=None,
        install="nothing to install: exec:<command> runs your own program",
        read_only="not enforced: your command receives LOOPE_MODE=read and is trusted to honour it",
        cost_source="reported through usage lines, else none",
        summary="your own command; prompt on stdin, LOOPE_* variables, JSON event lines",
    ),
    "stub": AdapterInfo(
        name="stub",
        binary=None,
        install="built in",
        read_only="enforced: it only writes in write roles",
        cost_source="none (always $0)",
        summary="scripted stand-in used by --dry-run",
    ),
}

_ENV_SAFE = re.compile(r"[^A-Z0-9]+")


def binary_env_var(name: str) -> str:
    """``LOOPE_<NAME>_BIN``: the variable naming the program an adapter runs."""
    return f"LOOPE_{_ENV_SAFE.sub('_', name.upper())}_BIN"


def program(info: AdapterInfo, options: Mapping[str, Any]) -> str:
    """The program to run: loope.toml's ``bin``, else ``LOOPE_<NAME>_BIN``, else the first installed name."""
    configured = str(options.get("bin") or os.environ.get(binary_env_var(info.name)) or "").strip()
    if configured:  # a blank setting (LOOPE_CLAUDE_BIN= ) is no setting
        return configured
    names = [str(info.binary), *info.alternate_binaries]
    return next((name for name in names if shutil.which(name)), names[0])


def program_problem(info: AdapterInfo, program: str, workdir: Path) -> str | None:
    """Why ``program`` (an adapter's, or the one its settings name) cannot run from ``workdir``, or None."""
    if os.sep in program:
        path = Path(program).expanduser()
        if (path if path.is_absolute() else workdir / path).exists():
            return None
        return f"{info.name}: {program} does not exist; fix [agents.{info.name}] bin or {binary_env_var(info.name)}"
    if shutil.which(program):
        return None
    return f"{info.name} is not installed ({program} not found on PATH); install it with: {info.install}"
