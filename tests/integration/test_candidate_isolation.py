"""Attacks of one race candidate on another: candidate 1 tries to read and write candidate 2's work.

The two candidates overlap for real (a file barrier: candidate 1 attacks while candidate 2 is still
running, and candidate 2 ends only once candidate 1 is done). Candidate 2 fixes add() and marks its
work with a secret; candidate 1 hunts for the secret through every route it has (the candidates'
directory, relative paths, a link or a hard link planted in its own tree, the worktrees' git dirs,
its own index and the others', the step dirs, the run's live records, the store, /proc, /tmp, HOME,
the object store) and writes wherever it can reach, first as the implementer, then again from the
code its gate imports. Candidate 2's result must be its own and candidate 1 must have read nothing.
"""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from tests.conftest import FIXED_CALC, GATE, git
from tests.helpers.attacks import NEEDS_BWRAP
from tests.helpers.overlay import loope as loope_process
from tests.integration.test_candidate_budgets import claude_in_place

__all__ = ["loope_process"]  # a fixture used here

# Spelled in two parts wherever it is written in a script, so that no script holds the secret itself.
SECRET_EXPR = '"SECRET-" + "OF-C2"'
C2_CALC = FIXED_CALC + "# SECRET-OF-C2\n"

# Looks for SECRET everywhere a candidate could find it; writes "return 42" wherever it can reach.
# Defined as text: the implementer runs it, and plants it in calc.py for its gate to run again.
HUNT = r"""
import glob, json, os, pathlib, subprocess

def _hunt(report, phase):
    secret = "SECRET-" + "OF-C2"
    here = pathlib.Path.cwd()  # a gate has no LOOPE_RUN_DIR: the run dir holds candidates/c1
    run_dir = next(p.parent for p in [here, *here.parents] if p.name == "candidates")
    loope_dir, project = run_dir.parents[1], run_dir.parents[2]
    found, wrote = [], []

    def look(path):
        try:
            if secret.encode() in pathlib.Path(path).read_bytes()[:1 << 20] and str(path) not in found:
                found.append(str(path))
        except OSError:
            pass

    def walk(root):
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(top, d) != report]  # the test's own channel
            for name in files:
                look(os.path.join(top, name))

    for root in (loope_dir, project, "/tmp", os.environ.get("TMPDIR", "/tmp"), "/var/tmp"):
        walk(root)
    tmp_parent = os.path.dirname(os.environ.get("TMPDIR", "/tmp").rstrip("/"))
    for entry in glob.glob(tmp_parent + "/loope-step-*"):
        walk(entry)
    look(os.path.expanduser("~/.c2-secret"))
    siblings = []
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            environ = pathlib.Path(proc, "environ").read_bytes()
        except OSError:
            continue
        if b"LOOPE_CANDIDATE=2" in environ:
            found.append(proc + "/environ")
            siblings.append(proc + "/cwd")
    for cwd in siblings:
        look(cwd + "/calc.py")
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], capture_output=True)
    if secret.encode() in objects.stdout:
        found.append("git object store")
    other = run_dir / "candidates" / "c2"
    targets = [other / "calc.py", pathlib.Path("../c2/calc.py"), *[pathlib.Path(c) / "calc.py" for c in siblings]]
    try:
        os.symlink(other / "calc.py", "peek.py")
        look("peek.py")
        targets.append(pathlib.Path("peek.py"))
    except OSError:
        pass
    try:
        os.link(other / "calc.py", "hard.py")
        targets.append(pathlib.Path("hard.py"))
    except OSError:
        pass
    for target in targets:
        try:
            with open(target, "w") as handle:
                handle.write("def add(a, b):\n    return 42\n")
            wrote.append(str(target))
        except OSError:
            pass
    for git_file in [*glob.glob(str(project / ".git/worktrees/*/HEAD")),
                     *glob.glob(str(run_dir / "shadow.git/worktrees/*/HEAD")),
                     str(run_dir / "candidates" / "c2.index")]:
        if "/c1" not in git_file:
            try:
                pathlib.Path(git_file).write_text("0" * 40 + "\n")
                wrote.append(git_file)
            except OSError:
                pass
    own = subprocess.run(["git", "show", "HEAD:calc.py"], capture_output=True).returncode == 0
    pathlib.Path(report, phase + ".json").write_text(json.dumps({"found": found, "wrote": wrote, "own": own}))
"""

AGENT = """
import time
HUNT = {hunt!r}
SECRET = {secret}
report = pathlib.Path({report!r})

def wait_for(name):
    for _ in range(600):  # a barrier with a bound: the test fails on what the other side did not do
        if (report / name).exists():
            return
        time.sleep(0.05)

if os.environ["LOOPE_CANDIDATE"] == "2":
    pathlib.Path("calc.py").write_text({fixed!r} + "# " + SECRET + "\\n")
    for secret_file in ("/tmp/c2-secret", os.path.join(os.environ["TMPDIR"], "c2-secret"),
                        os.path.expanduser("~/.c2-secret")):
        try:
            pathlib.Path(secret_file).write_text(SECRET)
        except OSError:
            pass
    print(json.dumps({{"type": "message", "text": "working on it: " + SECRET}}), flush=True)
    (report / "c2.ready").write_text("")
    wait_for("c1.done")
    (report / "c2.after").write_text(pathlib.Path("calc.py").read_text())
    print("fixed add: " + SECRET)
else:
    wait_for("c2.ready")
    namespace = {{}}
    exec(HUNT, namespace)
    namespace["_hunt"](str(report), "implementer")
    # The gate imports calc.py: it hunts again, while the other candidate's commit exists.
    pathlib.Path("calc.py").write_text(
        "import os\\nHUNT = " + repr(HUNT) + "\\nexec(HUNT)\\n"
        + "_hunt(" + repr(str(report)) + ", 'gate')\\n"
        + "def add(a, b):\\n    return 0\\n"
    )
    (report / "c1.done").write_text("")
    print("tried")
"""


@NEEDS_BWRAP
@pytest.mark.parametrize("mode", ["worktree", "copy", "in-place", "overlay"])
def test_under_the_sandbox_a_candidate_neither_sees_nor_writes_another(project, agent_script, cli, loope_process, mode):
    report = project.path.parent / "report"
    report.mkdir()
    agent = agent_script(AGENT.format(hunt=HUNT, secret=SECRET_EXPR, report=str(report), fixed=FIXED_CALC))
    args = (
        "run", "fix add", "--implementer", agent, "--candidates", "2", "--no-review", "--verify-cmd", GATE,
        "--workspace", mode, "--sandbox", "on", "--sandbox-writable", str(report), "--max-iters", "1", "--plain",
    )  # fmt: skip
    if mode == "overlay":  # a process of its own (it enters a mount namespace)
        done = loope_process(*args, cwd=project.path)
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        result = cli(*args, cwd=project.path)
        assert result.exit_code == 0, result.out + result.err
    implementer = json.loads((report / "implementer.json").read_text())
    gate = json.loads((report / "gate.json").read_text())
    assert implementer["found"] == []
    assert gate["found"] == []
    assert gate["own"]  # its own commit is there for its own steps
    # Candidate 2's tree was its own all along, and its change is the one that won.
    assert (report / "c2.after").read_text() == C2_CALC
    run = project.run_json()
    (round_,) = run["rounds"]
    assert round_["winner"] == 2
    ref = next(c["ref"] for c in round_["candidates"] if c["candidate"] == 2)
    repo = project.path if mode == "worktree" else project.runs()[-1] / "shadow.git"
    changed = git(repo, "diff", "--name-only", run["workspace"]["base"], ref).split()
    assert changed == ["calc.py"]
    assert git(repo, "show", f"{ref}:calc.py") == C2_CALC


# Without the sandbox: candidate 2 fixes add (with a comment, a larger diff) and ends; candidate 1 fixes
# it the short way, then, once candidate 2's agent is done, keeps breaking candidate 2's fix for a while.
LATE_WRITER = """
import glob, time
run_dir = pathlib.Path(os.environ["LOOPE_RUN_DIR"])
if os.environ["LOOPE_CANDIDATE"] == "2":
    pathlib.Path("calc.py").write_text({fixed!r} + "# the sum of a and b\\n")
    print("fixed add, with a comment")
else:
    pathlib.Path("calc.py").write_text({fixed!r})
    for _ in range(600):  # until candidate 2's step has written its result (its agent has ended)
        if glob.glob(str(run_dir / "agents" / "*-c2" / "result.md")):
            break
        time.sleep(0.05)
    for _ in range(40):  # a while after that: the writes land once loope has sealed candidate 2's tree
        (run_dir / "candidates" / "c2" / "calc.py").write_text("def add(a, b):\\n    return 42\\n")
        (run_dir / "candidates" / "c2" / "conftest.py").write_text("")
        time.sleep(0.05)
    print("fixed add, the short way")
"""


def race_unsandboxed(project, cli, agent: str):  # type: ignore[no-untyped-def]
    """One round of two ``agent`` candidates without the sandbox, which must converge."""
    result = cli(
        "run", "fix add", "--implementer", agent, "--candidates", "2", "--no-review", "--verify-cmd", GATE,
        "--sandbox", "off", "--workspace", "worktree", "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    return result


def test_without_the_sandbox_a_write_into_a_finished_candidates_tree_is_undone_and_disqualifies(
    project, agent_script, cli
):
    result = race_unsandboxed(project, cli, agent_script(LATE_WRITER.format(fixed=FIXED_CALC)))
    said = "warning: candidates are not isolated from each other without the sandbox"
    assert said in result.out
    run = project.run_json()
    (round_,) = run["rounds"]
    assert round_["isolated"] is False
    assert round_["winner"] == 2  # candidate 1's smaller diff would have won; its writes disqualify it
    why = {c["candidate"]: c["why"] for c in round_["candidates"]}
    assert why[1].startswith("lost: the guard undid")
    ref = next(c["ref"] for c in round_["candidates"] if c["candidate"] == 2)
    assert git(project.path, "show", f"{ref}:calc.py") == FIXED_CALC + "# the sum of a and b\n"
    assert git(project.path, "diff", "--name-only", run["workspace"]["base"], ref).split() == ["calc.py"]
    feedback = run["loop"]["feedback"]
    assert "candidate 2's tree changed after its agent ended (calc.py, conftest.py)" in feedback
    assert "candidate 1, the only one still running, did it" in feedback
    (impl_1,) = [s for s in run["steps"] if s["role"] == "implementer" and s["candidate"] == 1]
    assert any("wrote into candidate 2's tree" in v for v in impl_1["violations"])
    report = (project.runs()[-1] / "report.md").read_text()
    assert "candidates were not isolated from each other (no sandbox)" in report
    (line,) = [json.loads(ln) for ln in (project.runs()[-1] / "ledger.jsonl").read_text().splitlines()]
    assert any(v.startswith("candidate 2's tree changed after its agent ended") for v in line["violations"])
    assert [c["violations"] for c in line["candidates"]] == [0, 1]  # the winner first


# Candidate 2 ends first, leaving a file with two names (inotify reports such a file at every look
# from then on); candidate 1 runs on a while. Nothing changed candidate 2's tree after it ended.
TWO_NAMES = """
import glob, time
run_dir = pathlib.Path(os.environ["LOOPE_RUN_DIR"])
pathlib.Path("calc.py").write_text({fixed!r})
if os.environ["LOOPE_CANDIDATE"] == "2":
    os.link("calc.py", "calc_copy.py")
else:
    for _ in range(600):
        if glob.glob(str(run_dir / "agents" / "*-c2" / "result.md")):
            break
        time.sleep(0.05)
    time.sleep(0.5)
print("fixed add")
"""


def test_a_tree_that_did_not_change_after_its_agent_ended_is_left_alone(project, agent_script, cli):
    race_unsandboxed(project, cli, agent_script(TWO_NAMES.format(fixed=FIXED_CALC)))
    run = project.run_json()
    assert "after its agent ended" not in run["loop"]["feedback"]
    assert not [s for s in run["steps"] if s["violations"]]
    assert run["rounds"][0]["winner"] == 1  # the smaller change (candidate 2 added a file)


# Two claude candidates (a program of the test's in claude's place): candidate 2 keeps its session's
# transcript where Claude Code does (~/.claude/projects/...), with the secret in it; candidate 1 looks
# through claude's state dir while candidate 2 still runs, and leaves a file of its own there.
SESSIONS = """#!{python}
import json, os, pathlib, sys, time
sys.stdin.read()
report = pathlib.Path({report!r})
projects = pathlib.Path(os.environ["HOME"]) / ".claude" / "projects" / "proj"

def wait_for(name):
    for _ in range(600):
        if (report / name).exists():
            return
        time.sleep(0.05)

if os.environ["LOOPE_CANDIDATE"] == "2":
    projects.mkdir(parents=True, exist_ok=True)
    (projects / "session-2.jsonl").write_text({secret} + "\\n")
    (report / "c2.ready").write_text("")
    wait_for("c1.done")
    (report / "c2.saw").write_text(json.dumps(sorted(p.name for p in projects.iterdir())))
else:
    wait_for("c2.ready")
    found = [str(p) for p in (pathlib.Path(os.environ["HOME"]) / ".claude").rglob("*")
             if p.is_file() and ({secret}).encode() in p.read_bytes()]
    projects.mkdir(parents=True, exist_ok=True)
    (projects / "planted-by-1").write_text("")
    (report / "c1.found").write_text(json.dumps(found))
    (report / "c1.done").write_text("")
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "done",
                  "total_cost_usd": 0.01, "usage": {{"input_tokens": 1, "output_tokens": 1}}}}))
"""


@NEEDS_BWRAP
def test_under_the_sandbox_claude_candidates_keep_their_sessions_to_themselves(project, cli, monkeypatch):
    home = project.path.parent / "home"
    home.mkdir()
    script = SESSIONS.replace("{python}", sys.executable).replace("{secret}", SECRET_EXPR)
    report = claude_in_place(project, monkeypatch, script)  # it formats {report!r}
    monkeypatch.setenv("HOME", str(home))
    result = cli(
        "run", "fix add", "--implementer", "claude", "--candidates", "2", "--no-review", "--verify-cmd", GATE,
        "--sandbox", "on", "--sandbox-writable", str(report), "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err  # neither fixed add
    assert json.loads((report / "c1.found").read_text()) == []
    assert json.loads((report / "c2.saw").read_text()) == ["session-2.jsonl"]
    assert not (home / ".claude" / "projects" / "proj").exists()  # each kept its sessions in its own box


@NEEDS_BWRAP
def test_an_acp_candidate_and_its_terminal_see_only_its_own_tree(project, cli, tmp_path):
    from tests.integration.test_acp_sandbox import INITIALIZE, REPLAY

    notes = tmp_path / "acp"
    notes.mkdir()
    steps = [
        {"request": "terminal/create", "params": {"command": "sh", "args": ["-c", "ls -a .."], "cwd": "{cwd}"}},
        {"request": "terminal/wait_for_exit", "params": {"terminalId": "{terminal}"}},
        {"request": "terminal/output", "params": {"terminalId": "{terminal}"}},
        {"request": "fs/read_text_file", "params": {"path": "{cwd}/../c1/calc.py"}},
        {"request": "fs/read_text_file", "params": {"path": "{cwd}/../c2/calc.py"}},
        {"request": "fs/write_text_file", "params": {"path": "{cwd}/../c1/calc.py", "content": "x = 1\n"}},
        {"request": "fs/write_text_file", "params": {"path": "{cwd}/../c2/calc.py", "content": "x = 1\n"}},
        {"notify": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "looked"}}},
    ]
    script = tmp_path / "session.json"
    script.write_text(json.dumps({"initialize": INITIALIZE, "steps": steps}))
    agent = f'exec {shlex.quote(sys.executable)} {REPLAY} {script} "{notes}/answers-$LOOPE_CANDIDATE.jsonl"'
    result = cli(
        "run", "fix add", "--implementer", f"acp:sh -c {shlex.quote(agent)}", "--candidates", "2", "--no-review",
        "--verify-cmd", GATE, "--max-iters", "1", "--plain", "--sandbox", "on", "--sandbox-writable", str(notes),
        "--workspace", "worktree", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err  # neither fixed add
    for mine, theirs in ((1, 2), (2, 1)):
        answered = [json.loads(ln) for ln in (notes / f"answers-{mine}.jsonl").read_text().splitlines()]
        (listed,) = [a["answer"]["result"]["output"] for a in answered if a["method"] == "terminal/output"]
        assert sorted(listed.split()) == [".", "..", f"c{mine}", f"c{mine}.objects"]
        reads = {
            a["params"]["path"].rsplit("/", 2)[-2]: a["answer"] for a in answered if a["method"] == "fs/read_text_file"
        }
        assert reads[f"c{mine}"]["result"]["content"] == project.read("calc.py")
        assert "workspace only" in reads[f"c{theirs}"]["error"]["data"]["reason"]
        writes = {
            a["params"]["path"].rsplit("/", 2)[-2]: a["answer"] for a in answered if a["method"] == "fs/write_text_file"
        }
        assert "outside the workspace" in writes[f"c{theirs}"]["error"]["data"]["reason"]
    # Each wrote only its own calc.py, through loope.
    kept = {c["candidate"]: c["ref"] for c in project.run_json()["rounds"][0]["candidates"]}
    for ref in kept.values():
        assert git(project.path, "show", f"{ref}:calc.py") == "x = 1\n"
