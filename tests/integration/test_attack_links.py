"""Attacks through symlinks: the guard never follows one, and loope never writes or deletes outside the workspace.

Each attacker is a shell script run as an ``exec:`` implementer against a real repository, with
real pytest as the gate. Every test proves the user's repository (files and ``.git``) and a
victim directory outside the workspace are byte-identical afterwards.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import CALC_TESTS, GATE, Project, unsandboxed
from tests.helpers.attacks import run_attack, sandboxed_too, shell_implementer, violations
from tests.helpers.tree_snapshot import changed, repo_changes, snapshot

PASSING_TESTS = "def test_add():\n    assert True\n"


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """The guard as the only line (``--sandbox off``): with the sandbox these writes are refused first."""
    return unsandboxed(cli)


@pytest.fixture
def shell_agent(tmp_path: Path):
    """An ``exec:`` implementer running ``script`` with sh (``$LOOPE_ITERATION`` tells the attempt)."""
    return lambda script: shell_implementer(tmp_path / "agents", "set -u\n" + script)


@pytest.fixture
def victim(tmp_path: Path, project: Project) -> Path:
    """A copy of the user's repository outside the workspace: what a link would point an attack at."""
    target = tmp_path / "victim"
    shutil.copytree(project.path, target, symlinks=True)
    return target


def untouched(proj: Project, before: dict[str, str], victim: Path, victim_before: dict[str, str]) -> None:
    assert repo_changes(before, snapshot(proj.path, skip=(".loope",))) == []
    assert changed(victim_before, snapshot(victim)) == []


# In place, .loope/ holds the run directory itself: moving it away takes the run with it (not covered here).
@pytest.mark.parametrize(("mode", "sandbox"), sandboxed_too(["worktree", "copy"], "worktree"))
def test_loope_dir_replaced_by_a_link_to_the_users_repository(project, victim, shell_agent, cli, *, mode, sandbox):
    """The 0.1 data loss: the guard walked the link, deleted the target's files and wrote .gitignore there."""
    before, victim_before = snapshot(project.path, skip=(".loope",)), snapshot(victim)
    attack = shell_agent(f"mv .loope ../moved-loope-$$ 2>/dev/null || rm -rf .loope\nln -s {victim} .loope\n")
    result = run_attack(cli, project, attack, "--workspace", mode, "--sandbox", sandbox)
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert run["stop_reason"] == "max_iters"
    if sandbox == "off":  # inside the sandbox .loope/.gitignore is a read-only mount: the directory stays
        assert any(v.startswith(".loope belongs to loope and was replaced") for v in violations(project))
    ws = Path(run["workspace"]["path"])
    assert (ws / ".loope").is_dir()
    assert not (ws / ".loope").is_symlink()
    assert (ws / ".loope" / ".gitignore").exists()
    assert run["changes"]["files"] == []
    untouched(project, before, victim, victim_before)


def test_a_link_inside_loope_dir_and_a_linked_state_file_are_removed(project, victim, shell_agent, cli):
    before, victim_before = snapshot(project.path, skip=(".loope",)), snapshot(victim)
    attack = shell_agent(
        f'ln -s {victim} .loope/evil\nrm "$LOOPE_STATE_FILE"\nln -s {victim}/calc.py "$LOOPE_STATE_FILE"\n'
    )
    result = run_attack(cli, project, attack)
    assert result.exit_code == 1, result.out + result.err
    found = violations(project)
    assert ".loope/evil is a link or a special file inside loope's own directory; it was removed" in found
    assert ".loope/state.md is a link or a special file inside loope's own directory; it was removed" in found
    ws = Path(project.run_json()["workspace"]["path"])
    assert not (ws / ".loope/evil").is_symlink()
    state = ws / ".loope/state.md"
    assert not state.is_symlink()
    assert state.read_text().startswith("---\nloop_id: ")
    untouched(project, before, victim, victim_before)


def test_a_protected_directory_replaced_by_a_link_is_restored(project, tmp_path, shell_agent, cli):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "test_calc.py").write_text(PASSING_TESTS)
    elsewhere_before = snapshot(elsewhere)
    before = snapshot(project.path, skip=(".loope",))
    attack = shell_agent(f"rm -rf tests\nln -s {elsewhere} tests\n")
    result = run_attack(cli, project, attack, "--protect", "tests/**")
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    gate = next(s for s in run["steps"] if s["adapter"] == "gate")
    assert gate["gate_passed"] is False  # the passing tests behind the link never ran
    assert "tests was a directory and became a link; the link was removed and the directory restored" in violations(
        project
    )
    ws = Path(run["workspace"]["path"])
    assert not (ws / "tests").is_symlink()
    assert (ws / "tests/test_calc.py").read_text() == CALC_TESTS
    assert changed(elsewhere_before, snapshot(elsewhere)) == []
    assert repo_changes(before, snapshot(project.path, skip=(".loope",))) == []


def test_undoing_a_new_path_never_deletes_through_a_link(project, victim, shell_agent, cli):
    """A link made outside the editable globs is removed as a link: what it points to stays."""
    before, victim_before = snapshot(project.path, skip=(".loope",)), snapshot(victim)
    attack = shell_agent(f"ln -s {victim} mirror\nln -s {victim}/calc.py calc_link.py\n")
    result = run_attack(cli, project, attack, "--editable", "calc.py")
    assert result.exit_code == 1, result.out + result.err
    found = violations(project)
    assert "mirror is outside the editable paths (calc.py); your change to it was undone" in found
    assert "calc_link.py is outside the editable paths (calc.py); your change to it was undone" in found
    ws = Path(project.run_json()["workspace"]["path"])
    assert not (ws / "mirror").is_symlink()
    assert not (ws / "calc_link.py").is_symlink()
    untouched(project, before, victim, victim_before)


def test_a_design_contract_link_is_not_followed(project, tmp_path, shell_agent, cli):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-TOKEN\n")
    attack = shell_agent(
        f'if [ "$LOOPE_ROLE" = designer ]; then ln -s {secret} DESIGN_CONTRACT.md; echo contract; fi\n'
    )
    result = cli(
        "run", "fix add", "--implementer", attack, "--design", "--no-review", "--verify-cmd", GATE,
        "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    contract = (project.runs()[-1] / "design-contract.md").read_text()
    assert "TOP-SECRET-TOKEN" not in contract
    assert secret.read_text() == "TOP-SECRET-TOKEN\n"
    assert json.loads((project.runs()[-1] / "run.json").read_text())["status"] == "max_iters"
