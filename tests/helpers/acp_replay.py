"""A stand-in ACP agent (stdlib only): it plays an agent's side of a session from a script file.

Usage: ``acp_replay.py SCRIPT ANSWERS``. SCRIPT is JSON: ``initialize`` (the result to answer
with), ``steps`` (what the agent does on ``session/prompt``, in order), ``follow_up`` (what it
does on a later prompt: loope telling it what it refused; the prompt is recorded in ANSWERS) and
``stop_reason``. A step is ``{"notify": <update>}`` (a ``session/update``) or
``{"request": METHOD, "params": {...}}`` (a request to the client, whose answer or error is
appended to ANSWERS as one JSON line). In params and updates, ``{cwd}`` stands for the session's
working directory and ``{terminal}`` for the id of the last terminal the client created. Set
``ACP_REPLAY_HANG=1`` to hang on the prompt instead (ignoring SIGTERM, as a stuck agent might).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, TextIO

SESSION = "replay-1"


class Replay:
    def __init__(self, script: dict[str, Any], answers: TextIO) -> None:
        self.script = script
        self.answers = answers
        self.cwd = ""
        self.terminal = ""
        self.next_id = 1000
        self.prompts = 0

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()

    def fill(self, value: Any) -> Any:
        return json.loads(json.dumps(value).replace("{cwd}", self.cwd).replace("{terminal}", self.terminal))

    def record(self, method: str, params: Any, answer: Any) -> None:
        self.answers.write(json.dumps({"method": method, "params": params, "answer": answer}) + "\n")
        self.answers.flush()

    def answer_to(self, wanted: int) -> dict[str, Any]:
        for line in sys.stdin:
            message = json.loads(line)
            if message.get("id") == wanted and "method" not in message:
                return message
        raise SystemExit(0)

    def prompt(self, message: dict[str, Any]) -> None:
        if os.environ.get("ACP_REPLAY_HANG"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(3600)
        self.prompts += 1
        if self.prompts > 1:
            self.record("session/prompt", message["params"], {})
        for step in self.script["steps"] if self.prompts == 1 else self.script.get("follow_up", []):
            if "notify" in step:
                params = {"sessionId": SESSION, "update": self.fill(step["notify"])}
                self.send({"method": "session/update", "params": params})
                continue
            self.next_id += 1
            params = {"sessionId": SESSION, **self.fill(step["params"])}
            self.send({"id": self.next_id, "method": step["request"], "params": params})
            answer = self.answer_to(self.next_id)
            self.terminal = (answer.get("result") or {}).get("terminalId", self.terminal)
            self.record(step["request"], params, answer)
        result = {"stopReason": self.script.get("stop_reason", "end_turn"), **self.script.get("extra", {})}
        self.send({"id": message["id"], "result": result})

    def serve(self) -> None:
        for line in sys.stdin:
            message = json.loads(line)
            method, ident = message.get("method"), message.get("id")
            if method == "initialize":
                self.send({"id": ident, "result": self.script["initialize"]})
            elif method == "session/new":
                self.cwd = message["params"]["cwd"]
                self.send({"id": ident, "result": {"sessionId": SESSION}})
            elif method == "session/prompt":
                self.prompt(message)
            elif ident is not None and method is not None:
                self.send({"id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    with open(sys.argv[1]) as source, open(sys.argv[2], "a") as out:
        Replay(json.load(source), out).serve()
