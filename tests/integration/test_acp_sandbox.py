"""An ACP agent and the commands it runs through loope's terminal, attacked from inside a real run.

The agent is the stand-in of tests/helpers/acp_replay.py behind a shell that first tries a write of
its own; its session asks loope to write the workspace's ``.git``, then asks loope's terminal to run
a shell that writes into the user's repository, the run directory and a directory beside them, and
leaves processes behind with ``setsid`` and a double fork. Inside the sandbox none of those writes
land; sandbox or not, nothing outlives the step and loope writes no git dir.
"""

from __future__ import annotations

import json
import secrets
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import GATE, Project, in_workspace, run_file
from tests.helpers.attacks import BOTH
from tests.helpers.tree_snapshot import repo_changes, snapshot

REPLAY = Path(__file__).resolve().parents[1] / "helpers" / "acp_replay.py"
INITIALIZE = {"protocolVersion": 1, "agentCapabilities": {"loadSession": False}, "authMethods": []}


def leftovers(tag: str) -> list[int]:
    """Live processes whose command line carries ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and tag.encode() in cmdline:
            found.append(int(entry.name))
    return found


def terminal_steps(command: str) -> list[dict]:
    """The session's steps: ``command`` through loope's terminal, waited for and read back, then a reply."""
    return [
        # loope itself writes what the agent asks of fs/*, outside the sandbox: never into a git dir.
        {"request": "fs/write_text_file", "params": {"path": "{cwd}/.git", "content": "gitdir: /elsewhere\n"}},
        {"request": "terminal/create", "params": {"command": "sh", "args": ["-c", command], "cwd": "{cwd}"}},
        {"request": "terminal/wait_for_exit", "params": {"terminalId": "{terminal}"}},
        {"request": "terminal/output", "params": {"terminalId": "{terminal}"}},
        {"notify": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ran it"}}},
    ]


@pytest.mark.parametrize("sandbox", BOTH)
def test_an_acp_agent_and_its_terminal_cannot_write_outside_the_workspace_or_leave_a_process(
    project: Project, cli, tmp_path: Path, sandbox: str
) -> None:
    cli = in_workspace(cli, "worktree")  # whose project the step sees read-only (an overlay's step sees none of it)
    beside = tmp_path / "beside"
    beside.mkdir()
    notes = tmp_path / "acp"  # the stand-in's record of loope's answers: the one place it may write
    notes.mkdir()
    tag = str(10**6 + secrets.randbelow(10**6))  # a sleep length no other test uses, to find what is left
    command = (
        f"echo evil > {project.path}/calc.py && echo 'wrote: the repository'; "
        f"echo evil > {project.path}/.git/hooks/pre-commit && echo 'wrote: a hook'; "
        'echo {} > "$LOOPE_RUN_DIR/run.json" && echo "wrote: run.json"; '
        f"echo x > {beside}/terminal && echo 'wrote: beside'; "
        f"setsid sleep {tag} >/dev/null 2>&1 & (sleep {tag}1 >/dev/null 2>&1 &); "
        "sed -i 's/a - b/a + b/' calc.py; echo done"
    )
    script = tmp_path / "session.json"
    script.write_text(json.dumps({"initialize": INITIALIZE, "steps": terminal_steps(command)}))
    answers = notes / "answers.jsonl"
    agent = f"echo x > {beside}/agent || true; exec {shlex.quote(sys.executable)} {REPLAY} {script} {answers}"
    before = snapshot(project.path, skip=(".loope",))

    result = cli(
        "run", "fix add", "--implementer", f"acp:sh -c {shlex.quote(agent)}", "--no-review",
        "--verify-cmd", GATE, "--max-iters", "1", "--plain", "--sandbox", sandbox,
        "--sandbox-writable", str(notes), cwd=project.path,
    )  # fmt: skip

    answered = [json.loads(line) for line in answers.read_text().splitlines()]
    (to_git,) = [a["answer"] for a in answered if a["method"] == "fs/write_text_file"]
    assert ".git belongs to git" in to_git["error"]["data"]["reason"]
    (said,) = [a["answer"]["result"]["output"] for a in answered if a["method"] == "terminal/output"]
    assert "done" in said, said
    assert leftovers(f"sleep {tag}") == []  # the setsid one and the double-forked one
    run = project.run_json()
    assert run["steps"][0]["ok"], run["steps"][0]["error"]
    assert run_file(run, "calc.py") == "def add(a, b):\n    return a + b\n"
    if sandbox == "on":
        assert "wrote:" not in said, said
        assert sorted(p.name for p in beside.iterdir()) == []
        assert repo_changes(before, snapshot(project.path, skip=(".loope",))) == []
        assert result.exit_code == 0, result.out + result.err
