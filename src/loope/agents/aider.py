"""``aider``: Aider (``aider-chat``) with one ``--message``.

Aider prints no event stream. Three things it writes say what happened:

- stdout, read line by line: ``Added <file> to the chat.`` (a read), ``Applied edit to <file>``
  (an edit), ``litellm.<Kind>Error: ...`` when a model call failed (wrapped over lines), and
  "No LLM model was specified ..." before aider waits for a browser login;
- ``--analytics-log`` (JSON lines in the step directory): a ``message_send`` event per model call
  with its tokens and cost in USD (0 when aider does not know the price); a
  ``message_send_starting`` with no ``message_send`` after it is a call that failed;
- ``--chat-history-file`` (markdown in the step directory): the reply with its blank lines, which
  stdout loses (the final message), and the error lines unwrapped.

Aider exits 0 after a failed model call, so those decide. It never runs the shell commands a
reply suggests (``--yes-always`` answers no to them), and runs with its commits, .gitignore edits
and history files kept out of the workspace; the repo-map cache it leaves in the workspace root
(``.aider.tags.cache.v*``) is removed when it exits. Read roles run with ``--chat-mode ask --dry-run``:
aider answers without edit blocks, and would not write a file if it gave one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from loope.agents.base import Action, AgentEvent, AgentRequest
from loope.agents.catalog import INFO, AdapterInfo
from loope.agents.jsonl import as_dict, json_object, reported_cost
from loope.agents.message import bounded
from loope.agents.process import ProcessAgent, Session
from loope.proc import ProcResult
from loope.text import count as as_int
from loope.text import one_line

ANALYTICS_FILE = "aider-analytics.jsonl"
HISTORY_FILE = "aider-chat-history.md"
HISTORY_TAIL_BYTES = 4 << 20
_ERROR = re.compile(r"^litellm\.\w+Error: .*")
_TAGS_CACHE = ".aider.tags.cache.v*"
_NO_MODEL = "No LLM model was specified and no API keys were provided"
_ACTIONS: tuple[tuple[re.Pattern[str], Action], ...] = (
    (re.compile(r"^Applied edit to (.+)$"), "edit"),
    (re.compile(r"^Added (.+) to the chat\.$"), "read"),
)


@dataclass
class AiderSession(Session):
    step_dir: Path | None = None
    workspace: Path | None = None
    caches_before: frozenset[Path] = frozenset()
    """Aider's repo-map caches that were in the workspace before it ran (the user's own)."""
    no_model: bool = False
    """Aider said it had no model and no key (and is waiting for a browser login)."""
    calls: int = 0
    """Model calls that completed, per the analytics log."""


class AiderAgent(ProcessAgent[AiderSession]):
    session_type = AiderSession
    name = "aider"
    home_state = (".aider", ".aider.chat.history.md", ".aider.input.history", ".cache/aider")
    transcript_name = "transcript.log"
    prompt_on_stdin = False
    info: ClassVar[AdapterInfo] = INFO["aider"]

    def argv(self, request: AgentRequest) -> list[str]:
        step = request.step_dir
        # --message=<text> keeps a prompt that starts with "-" from being read as a flag.
        argv = [self.binary(), f"--message={request.prompt}", "--yes-always", "--no-pretty", "--no-fancy-input"]
        argv += ["--no-auto-commits", "--no-dirty-commits", "--no-gitignore", "--no-suggest-shell-commands"]
        argv += ["--no-detect-urls", "--no-check-update", "--no-show-release-notes", "--no-show-model-warnings"]
        argv += ["--no-analytics", "--analytics-log", str(step / ANALYTICS_FILE)]
        argv += ["--chat-history-file", str(step / HISTORY_FILE), "--input-history-file", str(step / "aider-input")]
        if request.mode == "read":
            argv += ["--chat-mode", "ask", "--dry-run"]
        if self.model:
            argv += ["--model", self.model]
        return argv + self.extra_args()

    def new_session(self, request: AgentRequest) -> AiderSession:
        caches = frozenset(request.workspace.glob(_TAGS_CACHE))
        return AiderSession(
            model=self.model, step_dir=request.step_dir, workspace=request.workspace, caches_before=caches
        )

    def parse_line(self, line: str, session: AiderSession) -> Iterable[AgentEvent]:
        text = line.strip()
        if text.startswith(_NO_MODEL):
            session.no_model = True
        for pattern, action in _ACTIONS:
            match = pattern.match(text)
            if match:
                return (AgentEvent.act(action, match.group(1)),)
        return ()

    def finish(self, proc: ProcResult, session: AiderSession) -> Iterable[AgentEvent]:
        if session.workspace is not None:
            # Aider's repo-map cache (sqlite) is its own scratch, not work: it must not reach the diff.
            for cache in set(session.workspace.glob(_TAGS_CACHE)) - session.caches_before:
                shutil.rmtree(cache, ignore_errors=True)
        if session.step_dir is None:
            return ()
        reply, errors = _history(session.step_dir / HISTORY_FILE)
        session.errors += errors
        # With no history the message is what stdout last showed.
        session.final = reply if reply is not None else proc.stdout_tail.strip()
        events: list[AgentEvent] = [AgentEvent.say(bounded(reply))] if reply else []
        calls = _analytics(session.step_dir / ANALYTICS_FILE)
        sent = [c for c in calls if c.get("event") == "message_send"]
        session.calls = len(sent)
        if len(sent) < sum(1 for c in calls if c.get("event") == "message_send_starting") and not session.errors:
            session.errors.append("aider's model call did not complete")
        for call in sent:
            props = as_dict(call.get("properties"))
            model = props.get("main_model")
            if isinstance(model, str) and "REDACTED" not in model:
                session.model = model
            tokens = (as_int(props.get("prompt_tokens")), as_int(props.get("completion_tokens")))
            events.append(AgentEvent.usage(*tokens, reported_cost(props.get("cost"))))
        return events

    def judge(self, proc: ProcResult, session: AiderSession) -> str | None:
        if session.no_model:
            return (
                "aider found no model and no API key and waited for an OpenRouter login;"
                " name a model (aider:<model>) and set its provider's API key"
            )
        if proc.exit_code != 0 or session.errors:
            return super().judge(proc, session)
        error = _stdout_error(proc.stdout_tail)
        if error:
            return error
        if session.calls == 0:
            last = next((ln.strip() for ln in reversed(proc.stdout_tail.splitlines()) if ln.strip()), "")
            reason = "aider exited without calling its model (no message_send in its analytics log)"
            return f"{reason}: {last[:200]}" if last else reason
        return None


def _history(path: Path) -> tuple[str | None, list[str]]:
    """The last reply in aider's chat history (None with no history), and the model errors logged after the last prompt.

    The history is markdown: the prompt's lines start with ``#### ``, aider's own lines with ``> ``
    (``> Tokens: ...`` closes each reply), and the replies are the other lines between (an edit
    block's ``>>>>>>> REPLACE`` included).
    """
    try:
        with path.open("rb") as handle:
            # Only the end matters (the last prompt and what followed): the history grows with every reply.
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - HISTORY_TAIL_BYTES))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None, []
    last_prompt = max((i for i, ln in enumerate(lines) if ln.startswith("#### ")), default=-1)
    after = lines[last_prompt + 1 :]
    errors = [one_line(ln[2:]) for ln in after if ln.startswith("> ") and _ERROR.match(ln[2:].strip())]
    replies: list[str] = []
    current: list[str] = []
    for ln in after:
        if ln.startswith("> Tokens:"):
            replies.append("\n".join(current).strip())
            current = []
        elif not (ln.startswith("> ") or ln == ">"):
            current.append(ln.rstrip())
    replies = [r for r in replies if r]
    return (replies[-1] if replies else "\n".join(current).strip()), errors


def _analytics(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [data for data in map(json_object, text.splitlines()) if data is not None]


def _stdout_error(stdout: str) -> str | None:
    """A ``litellm.*Error`` in aider's stdout, its wrapped lines joined (for when no history file says so)."""
    lines = stdout.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        if _ERROR.match(lines[index].strip()):
            rest = []
            for more in lines[index + 1 :]:
                if not more.strip():
                    break
                rest.append(more.strip())
            return one_line(" ".join([lines[index].strip(), *rest]))
    return None
