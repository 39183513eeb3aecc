"""Attacks through git: the user's .git is put back after every step, and loope's git runs no configured program.

The attacker is a shell script (an ``exec:`` implementer) that configures the repository it can
reach: an fsmonitor, clean/smudge filters, a textconv, an external diff, hooks, and moves branches
and other runs' refs. None of those programs may ever run from loope's own git commands, and the
user's repository must end byte-identical.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest

from loope.workspace.git import Git
from tests.conftest import GATE, Project, git, unsandboxed
from tests.helpers.tree_snapshot import repo_changes, snapshot


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """The guard as the only line (``--sandbox off``): with the sandbox these writes are refused first."""
    return unsandboxed(cli)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """A program that, if anything ever runs it, leaves a line in ``ran.log`` (and passes its input on)."""
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {tmp_path / "ran.log"}\ncat\n')
    script.chmod(0o755)
    return script


def ran(tmp_path: Path) -> str:
    log = tmp_path / "ran.log"
    return log.read_text() if log.exists() else ""


def configure_everything(run_git: str, evil: Path) -> str:
    """Shell lines that make every program git can be configured to run point at ``evil``."""
    e = shlex.quote(str(evil))
    return f"""
{run_git} config core.fsmonitor {e}
{run_git} config filter.evil.clean {e}
{run_git} config filter.evil.smudge {e}
{run_git} config filter.evil.process {e}
{run_git} config diff.evil.textconv {e}
{run_git} config diff.external {e}
{run_git} config core.pager {e}
{run_git} config credential.helper {e}
hooks="$({run_git} rev-parse --path-format=absolute --git-common-dir)/hooks"
for hook in pre-commit post-commit post-checkout pre-auto-gc post-index-change reference-transaction; do
    printf '#!/bin/sh\\n{e} hook\\n' > "$hooks/$hook"; chmod +x "$hooks/$hook"
done
"""


def test_loopes_own_git_commands_run_no_program_a_repository_configures(tmp_path, marker):
    """Every git operation loope uses, against a repository configured to run ``marker`` everywhere."""
    repo = Project(tmp_path / "repo")
    repo.path.mkdir()
    repo.git("init", "-q", "-b", "main")
    repo.write("a.txt", "one\n")
    repo.commit("first")
    os.system(f"cd {shlex.quote(str(repo.path))} && sh -c {shlex.quote(configure_everything('git', marker))}")
    repo.write(".gitattributes", "* filter=evil diff=evil\n")
    assert ran(tmp_path) == ""
    ours = Git(repo.path)
    base = ours.out("rev-parse", "HEAD")
    repo.write("a.txt", "two\n")
    ours.update_index(["a.txt", ".gitattributes"])
    tree = ours.write_tree()
    assert [c.path for c in ours.compare(base, tree).changes] == [".gitattributes", "a.txt"]
    head = ours.commit_tree(tree, base, "second")
    ours.add_all()
    third = ours.commit_staged("third", allow_empty=True)
    assert list(ours.tree_changes(base, third)) == [".gitattributes", "a.txt"]
    assert b"+two" in ours.compare(base, head).patch
    ours.run("checkout", base, "--", "a.txt")
    ours.reset_hard(head)
    sha = ours.entries(head, ["a.txt"])["a.txt"].sha
    ours.blob(sha)
    ours.blobs([sha])
    assert ran(tmp_path) == ""  # not one of them ran
    # The control: the same repository does run them for a plain git command.
    git(repo.path, "status")
    assert ran(tmp_path) != ""


@pytest.mark.parametrize("mode", ["worktree", "in-place", "copy"])
def test_changes_to_the_users_git_dir_are_undone_and_reported(project, tmp_path, marker, cli, mode):
    other = project.git("rev-parse", "HEAD").strip()
    project.git("update-ref", "refs/loope/0000-an-earlier-run/attempt-1", other)
    project.git("branch", "feature")
    project.git("pack-refs", "--all")
    # In place, the agent edits the user's files on purpose: there, only their .git must be untouched.
    watched = project.path / ".git" if mode == "in-place" else project.path
    before = snapshot(watched, skip=(".loope",))
    user_git = f"git -C {shlex.quote(str(project.path))}"
    attack = tmp_path / "attack.sh"
    # Branches and refs first: the hooks installed last would otherwise run from the attacker's own git.
    attack.write_text(
        f"""
{user_git} commit-tree -m forged "$({user_git} rev-parse HEAD^{{tree}})" > /tmp/forged.$$ || true
{user_git} update-ref refs/heads/main "$(cat /tmp/forged.$$)"; rm -f /tmp/forged.$$
{user_git} update-ref -d refs/loope/0000-an-earlier-run/attempt-1
{user_git} update-ref refs/heads/planted HEAD
{user_git} branch -f feature HEAD~0
echo '* filter=evil diff=evil' > .gitattributes
echo 'evil' >> "$({user_git} rev-parse --path-format=absolute --git-common-dir)/info/exclude"
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
"""
        + configure_everything(user_git, marker)
    )
    result = cli(
        "run", "fix add", "--implementer", f"exec:sh {attack}", "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--workspace", mode, "--plain", cwd=project.path,
    )  # fmt: skip
    run = project.run_json()
    violations = [v for s in run["steps"] for v in s.get("violations", [])]
    assert ".git/config is outside the workspace; the step's change to it was undone" in violations, violations
    assert ".git/hooks/pre-commit is outside the workspace; the step's change to it was undone" in violations
    assert ".git/refs/heads/planted is outside the workspace; the step's change to it was undone" in violations
    assert any(v.startswith(".git/packed-refs") or v.startswith(".git/refs/heads/main") for v in violations)
    assert ran(tmp_path) == "", ran(tmp_path)
    after = snapshot(watched, skip=(".loope",))
    if mode == "in-place":
        before, after = ({f".git/{k}": v for k, v in snap.items()} for snap in (before, after))
    assert repo_changes(before, after) == []
    assert project.git("for-each-ref", "--format=%(refname)").split() == sorted(
        ["refs/heads/feature", "refs/heads/main", "refs/loope/0000-an-earlier-run/attempt-1"]
        + ([f"refs/heads/loope/{run['run_id']}", f"refs/loope/{run['run_id']}/head"] if mode == "worktree" else [])
    )
    assert result.exit_code == 0, result.out + result.err  # the honest fix in the same step still counts
    hooks = project.path / ".git" / "hooks"
    assert not any(p.stat().st_mode & stat.S_IXUSR for p in hooks.iterdir() if not p.name.endswith(".sample"))


@pytest.mark.parametrize(
    "move",
    [
        'git update-ref "refs/heads/loope/$LOOPE_RUN_ID" "$forged"',  # the branch pointed at the agent's commit
        'git symbolic-ref HEAD "refs/heads/loope/$LOOPE_RUN_ID"',  # loope's own commits then move the branch
    ],
)
def test_the_run_branch_carries_only_the_runs_commits_whatever_the_agent_does_to_it(project, cli, tmp_path, move):
    start = project.git("rev-parse", "HEAD").strip()
    project.write("untracked.txt", "the user's, as the run starts\n")
    attack = tmp_path / "attack.sh"
    attack.write_text(
        f"""
forged=$(git commit-tree -p HEAD -m "planted: Loope-Run-less" "$(git write-tree)")
{move}
printf 'def add(a, b):\\n    return a + b\\n' > calc.py
echo "fixed add"
"""
    )
    result = cli(
        "run", "fix add", "--implementer", f"exec:sh {attack}", "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    branch = run["workspace"]["branch"]
    assert project.git("log", "--format=%s", f"{start}..{branch}").splitlines() == ["fixed add"]
    assert project.git("rev-parse", f"{branch}~1").strip() == start
    assert project.git("diff", "--name-only", start, branch).split() == ["calc.py"]
    if "update-ref" in move and run["workspace"]["mode"] == "worktree":  # an overlay's agent has its own git dir
        violations = [v for s in run["steps"] for v in s.get("violations", [])]
        assert f".git/refs/heads/{branch} is outside the workspace; the step's change to it was undone" in violations
