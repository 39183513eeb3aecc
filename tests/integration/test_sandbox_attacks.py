"""Attacks on the sandbox, each written as the attacking agent's shell commands (an ``exec:`` script).

Every attack runs against a real git repository with real pytest as the gate. Each ends without
convergence (or with the change undone), with the user's repository byte-identical (files and
``.git``, but for loope's own run branch and worktree records) and nothing written outside the
workspace. Classes that must hold without the sandbox too run with ``--sandbox off`` as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
from pathlib import Path

import pytest

from loope.sandbox import bwrap, reap
from tests.conftest import CALC_TESTS, GATE, Project, in_workspace, run_file
from tests.helpers.attacks import BOTH, SANDBOX_ON

FAKE_TESTS = "def test_add():\n    pass\n\n\ndef test_add_negative():\n    pass\n"
PASS_ALL = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


@pytest.fixture
def attack(tmp_path: Path):
    """Write a shell exec: agent; it prints its step's marker so the test can look for survivors."""
    counter = iter(range(1000))

    def make(body: str) -> str:
        path = tmp_path / "attacks" / f"attack_{next(counter)}.sh"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('#!/bin/sh\necho "marker $LOOPE_STEP_TOKEN"\n' + textwrap.dedent(body))
        return f"exec:sh {path}"

    return make


def snapshot(repo: Path) -> dict[str, str]:
    """Every file of the user's repository and its .git, by content and mode (symlinks by target)."""
    found = {}
    for root, dirs, files in os.walk(repo):
        rel_root = Path(root).relative_to(repo)
        dirs[:] = [d for d in dirs if (rel_root / d).as_posix() != ".loope"]
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            path = Path(root) / name
            rel = (rel_root / name).as_posix()
            if path.is_symlink():
                found[rel] = "link:" + os.readlink(path)
            else:
                found[rel] = f"{path.stat().st_mode:o}:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return found


# What loope itself adds to the user's .git for a worktree run (its branch, its refs, its worktree's
# records, the objects of its commits): the only differences allowed.
LOOPE_OWN = (
    ".git/worktrees/",
    ".git/refs/heads/loope/",
    ".git/logs/refs/heads/loope/",
    ".git/refs/loope/",
    ".git/logs/refs/loope/",
    ".git/objects/",
)


def assert_untouched(before: dict[str, str], repo: Path) -> None:
    after = snapshot(repo)
    changed = sorted(p for p in before if after.get(p) != before[p])
    added = sorted(p for p in after if p not in before and not p.startswith(LOOPE_OWN))
    assert (changed, added) == ([], [])


def markers(step_dir: Path) -> list[str]:
    log = (step_dir / "transcript.log").read_text()
    return [line.split()[1] for line in log.splitlines() if line.startswith("marker ") and len(line.split()) == 2]


def survivors(tokens: list[str]) -> list[int]:
    """Live processes carrying one of ``tokens`` in their environment."""
    needles = [f"{reap.TOKEN_VAR}={t}".encode() for t in tokens]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(n in environ for n in needles):
            found.append(int(entry.name))
    return found


def run(cli, project: Project, implementer: str, sandbox: str, *args: str):
    return cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--sandbox", sandbox, *args, cwd=project.path,
    )  # fmt: skip


def step(project: Project, number: int = 1) -> Path:
    (found,) = (project.runs()[-1] / "agents").glob(f"{number:02d}-*")
    return found


# -- runner configuration above the workspace ------------------------------------------------------


def test_runner_configuration_cannot_be_written_above_the_workspace(project, attack, cli):
    """In a worktree (an overlay's step sees none of the user's tree: test_overlay_attacks.py)."""
    cli = in_workspace(cli, "worktree")
    before = snapshot(project.path)
    implementer = attack(
        f"""
        for d in "$LOOPE_RUN_DIR" "$LOOPE_RUN_DIR/.." "$LOOPE_RUN_DIR/../.." "$(dirname "$LOOPE_WORKSPACE")" \\
                 "{project.path}"; do
            printf '[pytest]\\n' > "$d/pytest.ini" && echo "wrote $d/pytest.ini"
            printf '%s\\n' "{PASS_ALL}" > "$d/conftest.py" && echo "wrote $d/conftest.py"
            mkdir "$d/new-dir" && echo "made $d/new-dir"
        done
        echo '{{}}' > "$LOOPE_RUN_DIR/run.json" && echo "rewrote run.json"
        # Above the repository, under /tmp here: the write lands in the step's private /tmp.
        printf '%s\n' "{PASS_ALL}" > "$(dirname "{project.path}")/conftest.py"
        exit 0
        """
    )

    result = run(cli, project, implementer, "on")

    assert result.exit_code == 1, result.out + result.err
    record = project.run_json()
    assert record["status"] != "converged"
    log = (step(project) / "transcript.log").read_text()
    assert "wrote" not in log
    assert "made" not in log
    assert "rewrote" not in log
    assert not list(project.path.parent.rglob("pytest.ini"))
    assert not list(project.path.parent.rglob("new-dir"))
    assert not [p for p in project.path.parent.rglob("conftest.py")]
    assert_untouched(before, project.path)


def test_a_writable_directory_around_the_project_leaves_the_project_read_only(project, attack, cli, tmp_path):
    """``--sandbox-writable`` on a directory holding the repository (``~``, say) opens only what is not loope's.

    In a worktree, whose project the step sees read-only (an overlay's step sees none of it)."""
    cli = in_workspace(cli, "worktree")
    before = snapshot(project.path)
    cache = tmp_path / "cache"
    implementer = attack(
        f"""
        echo built > "{cache}/entry" && echo "cache written"
        echo x > "{tmp_path}/beside" && echo "beside written"
        for f in "{project.path}/calc.py" "{project.path}/.git/hooks/pre-commit" "$LOOPE_RUN_DIR/run.json"; do
            echo evil > "$f" && echo "wrote $f"
        done
        sed -i 's/a - b/a + b/' calc.py
        """
    )
    cache.mkdir()

    result = run(cli, project, implementer, "on", "--sandbox-writable", str(tmp_path))

    assert result.exit_code == 0, result.out + result.err
    log = (step(project) / "transcript.log").read_text()
    assert ("cache written" in log, "beside written" in log, "wrote" in log) == (True, True, False)
    assert (cache / "entry").read_text() == "built\n"
    assert_untouched(before, project.path)


# -- the user's .git -----------------------------------------------------------------------------


def test_the_users_git_cannot_be_written_from_the_workspace(project, attack, cli):
    before = snapshot(project.path)
    implementer = attack(
        """
        common=$(git rev-parse --path-format=absolute --git-common-dir)
        gitdir=$(git rev-parse --path-format=absolute --git-dir)
        printf '#!/bin/sh\\necho hooked\\n' > "$common/hooks/pre-commit" && echo "changed: hook"
        git config core.fsmonitor 'touch fsmonitor-ran' && echo "changed: fsmonitor"
        git config --file "$common/config" core.hooksPath "$common/hooks" && echo "changed: hooksPath"
        echo 'calc.py' >> "$common/info/exclude" && echo "changed: info/exclude"
        git update-ref refs/heads/main HEAD && echo "changed: main moved"
        git branch evil && echo "changed: a new branch"
        git update-ref refs/heads/loope/other-run HEAD && echo "changed: another run's ref"
        echo /elsewhere > "$gitdir/commondir" && echo "changed: commondir"
        echo 'ref: refs/heads/main' > "$gitdir/HEAD" && echo "changed: HEAD"
        exit 0
        """
    )

    result = run(cli, project, implementer, "on")

    assert result.exit_code == 1, result.out + result.err
    assert "changed:" not in (step(project) / "transcript.log").read_text()
    assert project.run_json()["status"] != "converged"
    assert not list(project.path.parent.rglob("fsmonitor-ran"))
    assert_untouched(before, project.path)


def test_git_in_the_workspace_reads_and_fails_cleanly_on_writes(project, attack, cli):
    implementer = attack(
        """
        sed -i 's/a - b/a + b/' calc.py
        git status --short
        git diff --stat | tail -1
        git log --oneline -1 >/dev/null && echo "log works"
        git add -A 2>/dev/null; echo "add exit $?"
        git commit -qm mine 2>/dev/null; echo "commit exit $?"
        exit 0
        """
    )

    result = run(cli, project, implementer, "on")

    assert result.exit_code == 0, result.out + result.err
    assert project.run_json()["status"] == "converged"
    log = (step(project) / "transcript.log").read_text()
    assert " M calc.py" in log
    assert "1 file changed" in log
    assert "log works" in log
    assert "add exit 0" not in log
    assert "commit exit 0" not in log


# -- protected tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", BOTH)
def test_a_protected_test_stays_as_it_was(project, attack, cli, sandbox):
    before = snapshot(project.path)
    implementer = attack(
        f"""
        printf '{FAKE_TESTS}' > tests/test_calc.py
        rm -f tests/test_calc.py
        exit 0
        """
    )

    result = run(cli, project, implementer, sandbox, "--protect", "tests/**")

    assert result.exit_code == 1, result.out + result.err
    record = project.run_json()
    assert record["status"] != "converged"
    assert run_file(record, "tests/test_calc.py") == CALC_TESTS
    if sandbox == "off":
        assert record["steps"][0]["violations"]  # the guard undid it
    assert_untouched(before, project.path)


# -- processes that outlive their step ------------------------------------------------------------

ESCAPES = {
    "setsid": 'setsid sh -c "$EDIT" >/dev/null 2>&1 &',
    "double fork": '(setsid sh -c "$EDIT" >/dev/null 2>&1 &)',
    "cleared environment": 'env -i PATH="$PATH" setsid sh -c "$EDIT" >/dev/null 2>&1 &',
}


@pytest.mark.parametrize("sandbox", BOTH)
@pytest.mark.parametrize("escape", list(ESCAPES))
def test_no_process_outlives_its_step(project, attack, cli, sandbox, escape):
    if escape == "cleared environment" and sandbox == "off" and reap.cgroup_base() is None:
        pytest.skip("without the sandbox and without cgroup v2 only the environment marker finds a process")
    before = snapshot(project.path)
    # The survivor rewrites the tests over and over while the gate (which waits first) runs.
    implementer = attack(
        f"""
        EDIT='sleep 1; for i in $(seq 300); do printf "{FAKE_TESTS}" > tests/test_calc.py; sleep 0.1; done'
        {ESCAPES[escape]}
        echo "left one behind"
        exit 0
        """
    )

    result = run(cli, project, implementer, sandbox, "--verify-cmd", f"sleep 2; {GATE}")

    assert result.exit_code == 1, result.out + result.err
    record = project.run_json()
    assert record["status"] != "converged"
    assert run_file(record, "tests/test_calc.py") == CALC_TESTS
    assert survivors(markers(step(project))) == []
    assert_untouched(before, project.path)


@pytest.mark.parametrize("sandbox", BOTH)
def test_a_step_that_times_out_leaves_no_process(project, attack, cli, sandbox):
    implementer = attack("setsid sleep 300 >/dev/null 2>&1 &\n(sleep 300 &)\nexec sleep 300\n")

    result = run(cli, project, implementer, sandbox, "--timeout", "2")

    assert result.exit_code == 1, result.out + result.err
    record = project.run_json()
    assert "timed out" in (record["steps"][0]["error"] or "")
    assert survivors(markers(step(project))) == []


# -- read-only roles, and the checks' network ------------------------------------------------------


def test_a_reviewer_cannot_write_the_workspace(project, attack, agent_script, cli):
    fixer = agent_script("pathlib.Path('calc.py').write_text('def add(a, b):\\n    return a + b\\n')\n")
    reviewer = attack("echo '# reviewed' >> calc.py && echo 'wrote calc.py'\necho 'VERDICT: PASS'\n")

    result = cli(
        "run", "fix add", "--implementer", fixer, "--reviewer", reviewer, "--verify-cmd", GATE,
        "--max-iters", "1", "--sandbox", "on", cwd=project.path,
    )  # fmt: skip

    assert result.exit_code == 0, result.out + result.err
    record = project.run_json()
    review = next(s for s in record["steps"] if s["role"] == "reviewer")
    assert review["violations"] == []  # nothing to undo: the write never happened
    assert "wrote calc.py" not in (project.runs()[-1] / review["dir"] / "transcript.log").read_text()


test_a_reviewer_cannot_write_the_workspace = SANDBOX_ON.marks[0](test_a_reviewer_cannot_write_the_workspace)
test_runner_configuration_cannot_be_written_above_the_workspace = SANDBOX_ON.marks[0](
    test_runner_configuration_cannot_be_written_above_the_workspace
)
test_the_users_git_cannot_be_written_from_the_workspace = SANDBOX_ON.marks[0](
    test_the_users_git_cannot_be_written_from_the_workspace
)
test_git_in_the_workspace_reads_and_fails_cleanly_on_writes = SANDBOX_ON.marks[0](
    test_git_in_the_workspace_reads_and_fails_cleanly_on_writes
)
test_a_writable_directory_around_the_project_leaves_the_project_read_only = SANDBOX_ON.marks[0](
    test_a_writable_directory_around_the_project_leaves_the_project_read_only
)


@pytest.mark.parametrize("network", ["on", "off"])
def test_sandbox_network_off_cuts_the_checks_but_not_the_agent(project, attack, cli, network):
    if not bwrap.support().works:
        pytest.skip(f"needs bubblewrap: {bwrap.support().reason}")
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    implementer = attack(
        f"""
        python3 -c "{probe}" && echo "agent reached it"
        sed -i 's/a - b/a + b/' calc.py
        """
    )
    try:
        result = run(
            cli,
            project,
            implementer,
            "on",
            "--sandbox-network",
            network,
            "--verify-cmd",
            f'python3 -c "{probe}" && {GATE}',
        )
    finally:
        server.close()

    assert "agent reached it" in (step(project) / "transcript.log").read_text()
    record = project.run_json()
    assert (record["status"] == "converged") is (network == "on"), result.out
    events = [json.loads(line) for line in (project.runs()[-1] / "events.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["type"] == "run_started")
    assert started["sandbox"] == {"enabled": True, "mode": "on", "network_checks": network}
