"""Attacks from above the workspace and on the run directory, which is runner-owned.

pytest looks for its configuration in every directory above the tests: an agent that writes a
``pytest.ini`` and a ``conftest.py`` into the run directory (or ``.loope/``, or the user's
repository) would configure the gate from there. The attacker is a shell script run as an
``exec:`` implementer; real pytest is the gate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GATE, Project, unsandboxed
from tests.helpers.attacks import gate_passed, shell_implementer, violations
from tests.helpers.attacks import run_attack as attack
from tests.helpers.tree_snapshot import repo_changes, snapshot

PATCH = "import calc\\ncalc.add = lambda a, b: a + b\\n"


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """The guard as the only line (``--sandbox off``): with the sandbox these writes are refused first."""
    return unsandboxed(cli)


def run_attack(cli, proj: Project, script: str, *extra: str):  # type: ignore[no-untyped-def]
    return attack(cli, proj, shell_implementer(proj.path.parent, script), *extra)


WHERE = {
    "the run directory": '"$LOOPE_RUN_DIR"',
    "the runs directory": '"$LOOPE_RUN_DIR/.."',
    "loope's directory": '"$LOOPE_RUN_DIR/../.."',
}


def test_a_pytest_config_written_into_the_users_repository_is_not_read_by_the_gate(project, cli):
    """Above .loope/ the directories are the user's: loope leaves the files there, reports them, and the gate
    (with no pytest configuration in the tree) is run so that pytest does not read them."""
    script = 'top="$LOOPE_RUN_DIR/../../.."\n'
    script += f"printf '[pytest]\\n' > \"$top/pytest.ini\"\nprintf '{PATCH}' > \"$top/conftest.py\"\n"
    result = run_attack(cli, project, script)
    assert result.exit_code == 1, result.out + result.err
    assert gate_passed(project) is False
    for name in ("pytest.ini", "conftest.py"):
        assert f"{project.path / name} appeared above the workspace during the step; the gate ignores it" in (
            violations(project)
        )


@pytest.mark.parametrize("where", list(WHERE))
def test_a_pytest_config_written_above_the_workspace_does_not_configure_the_gate(project, cli, where):
    target = WHERE[where]
    before = snapshot(project.path, skip=(".loope",))
    script = f"printf '[pytest]\\n' > {target}/pytest.ini\nprintf '{PATCH}' > {target}/conftest.py\n"
    result = run_attack(cli, project, script)
    assert result.exit_code == 1, result.out + result.err
    assert gate_passed(project) is False
    found = violations(project)
    assert len(found) == 2, found
    for name in ("pytest.ini", "conftest.py"):
        assert not (project.runs()[-1] / name).exists()
        assert not (project.path / ".loope" / name).exists()
    assert repo_changes(before, snapshot(project.path, skip=(".loope",))) == []


def test_without_the_guard_the_gate_would_read_them(project, cli, tmp_path):
    """The control: the same two files above a workspace do configure pytest there."""
    import subprocess
    import sys

    ws = tmp_path / "above" / "workspace"
    ws.mkdir(parents=True)
    for name in ("calc.py", "tests/test_calc.py"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text((project.path / name).read_text())
    (tmp_path / "above" / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "above" / "conftest.py").write_text(PATCH.replace("\\n", "\n"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ws, check=False)
    assert done.returncode == 0


def test_the_gate_is_kept_from_climbing_even_if_files_above_survive(project, cli, tmp_path):
    """A second line: with no pytest configuration in the tree, the gate names a runner-owned empty one."""
    script = tmp_path / "noop.sh"
    script.write_text("true\n")
    gate = f'echo "ADDOPTS=$PYTEST_ADDOPTS"; {GATE}'
    result = cli(
        "run", "fix add", "--implementer", f"exec:sh {script}", "--no-review", "--verify-cmd", gate,
        "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    rundir = project.runs()[-1]
    gate_dir = rundir / next(s for s in project.run_json()["steps"] if s["adapter"] == "gate")["dir"]
    output = (gate_dir / "output.log").read_text()
    ws = Path(project.run_json()["workspace"]["path"])
    assert f"ADDOPTS=-c {rundir / 'pytest-boundary.ini'} --rootdir={ws} --confcutdir={ws}" in output
    assert "FAILED tests/test_calc.py::test_add " in output  # the rootdir pytest would have chosen: same test ids
    assert (rundir / "pytest-boundary.ini").read_text().endswith("[pytest]\n")


def test_a_project_with_its_own_pytest_config_runs_as_it_always_did(project, cli):
    project.write("pytest.ini", "[pytest]\naddopts = -q\n")
    project.commit("pytest.ini")
    result = run_attack(cli, project, "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n")
    assert result.exit_code == 0, result.out + result.err
    assert not (project.runs()[-1] / "pytest-boundary.ini").exists()


def test_files_the_agent_plants_in_the_run_directory_are_removed(project, cli, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    script = f"""
cd "$LOOPE_RUN_DIR"
rm -f report.md run.json spec.json && mkdir report.md run.json spec.json
ln -s {outside}/best best
ln -s {outside} agents/09-implementer-exec
ln -s {outside}/stolen ledger-copy
mkdir agents/05-gate-forged && echo 'passed' > agents/05-gate-forged/output.log
echo '{{"ts": 0, "type": "run_finished"}}' > sitecustomize.pth
"""
    result = run_attack(cli, project, script)
    assert result.exit_code == 1, result.out + result.err
    found = violations(project)
    for name in ("report.md", "run.json", "spec.json", "best", "ledger-copy", "sitecustomize.pth"):
        assert f"{name} in the run directory is loope's to write; what the step put there was removed" in found, found
    for name in ("agents/09-implementer-exec", "agents/05-gate-forged"):
        assert f"{name} in the run directory is loope's to write; it was removed" in found, found
    assert "spec.json is written only by loope; the change to it was undone" in found
    rundir = project.runs()[-1]
    assert (rundir / "report.md").is_file()  # written at the end, not a crash
    assert json.loads((rundir / "spec.json").read_text())["verify_cmd"] == GATE
    assert not (rundir / "best").exists()
    assert list(outside.iterdir()) == []
    assert json.loads((rundir / "run.json").read_text())["status"] == "max_iters"


@pytest.mark.parametrize("field", ["workdir", "workspace"])
def test_a_run_json_rewritten_after_the_run_cannot_steer_apply(project, cli, tmp_path, field):
    """A process that outlived its step rewrites run.json so that apply writes where it chose: refused."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    victim_before = snapshot(victim)
    result = run_attack(cli, project, "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n")
    assert result.exit_code == 0, result.out + result.err
    run_json = project.runs()[-1] / "run.json"
    data = json.loads(run_json.read_text())
    if field == "workdir":
        data["workdir"] = str(victim)
    else:
        forged = tmp_path / "forged"
        forged.mkdir()
        subprocess_git = ["git", "init", "-q", str(forged)]
        import subprocess

        subprocess.run(subprocess_git, check=True)
        data["workspace"]["path"] = str(forged)
    run_json.write_text(json.dumps(data))
    before = snapshot(project.path, skip=(".loope",))
    applied = cli("apply", data["run_id"], cwd=project.path)
    assert applied.exit_code == 2, applied.out + applied.err
    assert "run.json was changed after the run" in applied.err
    assert "nothing was applied" in applied.err
    assert snapshot(victim) == victim_before
    assert repo_changes(before, snapshot(project.path, skip=(".loope",))) == []
