"""An ACP agent races loope's fs/* answers: it swaps a directory of its tree for a link to another tree
(a sibling candidate's, the user's home) between loope's check of a path and its read or write.

loope serves fs/read_text_file and fs/write_text_file itself, outside the sandbox, so a path checked
once and opened by name afterwards could be led out of the workspace. The agent keeps flipping
``d`` (a real directory, then a link to ``outside``) while it asks for ``d/secret.txt`` and writes
``d/pwned`` again and again: no answer may hold the secret and nothing may land in ``outside``.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import GATE, Project
from tests.helpers.attacks import BOTH
from tests.integration.test_acp_sandbox import INITIALIZE, REPLAY

TRIES = 300
FLIPPER = """
import os, shutil, sys
target = sys.argv[1]

def reset():  # loope made d again while it was a link's: start over from a real d
    if os.path.islink("d"):
        os.unlink("d")
    if os.path.isdir("d.real"):
        if os.path.isdir("d"):
            shutil.rmtree("d.real")
        else:
            os.rename("d.real", "d")
    os.makedirs("d", exist_ok=True)

reset()
while True:
    try:
        os.rename("d", "d.real")
        os.symlink(target, "d")
        os.unlink("d")
        os.rename("d.real", "d")
    except OSError:
        reset()
"""


@pytest.mark.parametrize("sandbox", BOTH)
def test_an_acp_agent_cannot_lead_loopes_file_answers_out_of_the_workspace(
    project: Project, cli, tmp_path: Path, sandbox: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET-" + "OUTSIDE\n")
    notes = tmp_path / "acp"
    notes.mkdir()
    flipper = tmp_path / "flipper.py"
    flipper.write_text(FLIPPER)
    steps = []
    for _ in range(TRIES):
        steps.append({"request": "fs/read_text_file", "params": {"path": "{cwd}/d/secret.txt"}})
        steps.append({"request": "fs/write_text_file", "params": {"path": "{cwd}/d/pwned", "content": "x"}})
    steps.append({"notify": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}})
    script = tmp_path / "session.json"
    script.write_text(json.dumps({"initialize": INITIALIZE, "steps": steps}))
    answers = notes / "answers.jsonl"
    python = shlex.quote(sys.executable)
    agent = (
        f"{python} {shlex.quote(str(flipper))} {shlex.quote(str(outside))} & exec {python} {REPLAY} {script} {answers}"
    )
    cli(
        "run", "fix add", "--implementer", f"acp:sh -c {shlex.quote(agent)}", "--no-review",
        "--verify-cmd", GATE, "--max-iters", "1", "--plain", "--sandbox", sandbox,
        "--sandbox-writable", str(notes), cwd=project.path,
    )  # fmt: skip
    answered = [json.loads(line) for line in answers.read_text().splitlines()]
    answered = [a for a in answered if a["method"].startswith("fs/")]
    assert len(answered) == 2 * TRIES
    assert not [a for a in answered if "SECRET-OUTSIDE" in json.dumps(a["answer"])]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
