"""``apply`` never writes into a .git directory, lands mode changes, and changes.diff is byte-exact."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import GIT_ENV, Project, git, one_error_line, run_git, unsandboxed
from tests.helpers.attacks import BOTH


@pytest.fixture
def cli(cli):  # type: ignore[no-untyped-def]
    """apply is the only line here (``--sandbox off``); where a run can make the attack inside the sandbox too, both."""
    return unsandboxed(cli)


def shell_agent(tmp_path: Path, body: str) -> str:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nset -e\n" + body + "echo done\n")
    script.chmod(0o755)
    return f"exec:{script}"


def run(cli, proj: Project, agent: str, *extra: str):  # type: ignore[no-untyped-def]
    result = cli(
        "run", "edit", "--implementer", agent, "--no-review", "--no-baseline", "--verify-cmd", "true", *extra,
        cwd=proj.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    return result


def git_dir_digest(proj: Project) -> dict[str, str]:
    root = proj.path / ".git"
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("sandbox", BOTH)
def test_a_symlink_the_run_adds_into_git_is_refused_and_nothing_lands(project, cli, tmp_path, sandbox) -> None:
    run(cli, project, shell_agent(tmp_path, "ln -s .git/hooks x\necho fixed > calc.py\n"), "--sandbox", sandbox)
    before = git_dir_digest(project)
    refused = cli("apply", "0001", "--force", cwd=project.path)
    assert refused.exit_code == 2
    assert ".git" in one_error_line(refused.err)
    assert not os.path.lexists(project.path / "x")
    assert project.read("calc.py") != "fixed\n"
    assert git_dir_digest(project) == before


def test_a_symlink_in_the_target_never_leads_a_file_into_git(project, cli, tmp_path) -> None:
    """The target has ``hooks -> .git/hooks``; the run writes ``hooks/pre-commit`` as a real directory's file."""
    project.write("hooks/README", "hooks\n")
    project.commit("hooks dir")
    run(cli, project, shell_agent(tmp_path, "printf '#!/bin/sh\\necho pwned\\n' > hooks/pre-commit\n"))
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(project.path), str(other))
    (other / "hooks" / "README").unlink()
    (other / "hooks").rmdir()
    (other / "hooks").symlink_to(".git/hooks", target_is_directory=True)
    refused = cli("apply", "0001", "--workdir", str(other), "--force", cwd=project.path)
    assert refused.exit_code == 2
    assert ".git" in one_error_line(refused.err)
    assert not (other / ".git" / "hooks" / "pre-commit").exists()


def test_a_mode_change_lands(project, cli, tmp_path) -> None:
    project.write("tool.sh", "#!/bin/sh\necho hi\n")
    project.commit("a script")
    run(cli, project, shell_agent(tmp_path, "chmod +x tool.sh\n"))
    files = project.run_json()["changes"]["files"]
    assert [f["path"] for f in files] == ["tool.sh"]
    applied = cli("apply", "0001", cwd=project.path)
    assert applied.exit_code == 0, applied.err
    assert os.access(project.path / "tool.sh", os.X_OK)


def test_changes_diff_is_accepted_by_git_apply(project, cli, tmp_path) -> None:
    project.write("data.bin", "")
    (project.path / "data.bin").write_bytes(bytes(range(256)))
    project.write("latin1.txt", "")
    (project.path / "latin1.txt").write_bytes(b"caf\xe9\n")
    project.write("tool.sh", "#!/bin/sh\n")
    project.commit("files")
    body = (
        "printf '\\001\\002\\000\\377' > data.bin\n"
        "printf 'na\\357ve \\351\\n' > latin1.txt\n"
        "chmod +x tool.sh\n"
        "printf 'new\\n' > added.txt\n"
    )
    run(cli, project, shell_agent(tmp_path, body))
    record = project.run_json()
    head = record["workspace"]["head"]
    patch = project.runs()[-1] / "changes.diff"
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(project.path), str(other))
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", "apply", str(patch)], check=False, cwd=other, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    for name in ("data.bin", "latin1.txt", "added.txt"):
        assert git(other, "hash-object", name) == run_git(record, "rev-parse", f"{head}:{name}")  # the same bytes
    assert os.access(other / "tool.sh", os.X_OK)


def test_a_file_hard_linked_outside_the_target_is_replaced_not_written_through(project, cli, tmp_path) -> None:
    run(cli, project, shell_agent(tmp_path, "echo fixed > calc.py\n"))
    outside = tmp_path / "outside.py"
    os.link(project.path / "calc.py", outside)
    before = outside.read_bytes()
    applied = cli("apply", "0001", cwd=project.path)
    assert applied.exit_code == 0, applied.err
    assert project.read("calc.py") == "fixed\n"
    assert outside.read_bytes() == before


def test_a_fifo_where_the_run_writes_a_file_is_a_conflict_and_never_read(project, cli, tmp_path) -> None:
    """Reading a fifo would block apply forever: it is planned as a conflict unread, and --force replaces it."""
    run(cli, project, shell_agent(tmp_path, "echo fixed > calc.py\n"))
    (project.path / "calc.py").unlink()
    os.mkfifo(project.path / "calc.py")
    refused = cli("apply", "0001", cwd=project.path)
    assert refused.exit_code == 1
    assert "M calc.py  (conflict: changed since the run started)" in refused.out
    assert (project.path / "calc.py").is_fifo()
    forced = cli("apply", "0001", "--force", cwd=project.path)
    assert forced.exit_code == 0, forced.err
    assert project.read("calc.py") == "fixed\n"


def test_many_files_land_and_each_plan_line_is_printed(project, cli, tmp_path) -> None:
    """Files in new and existing directories, one printed line each, in one apply."""
    body = "".join(f"mkdir -p new{d}; for i in 1 2 3; do echo $i > new{d}/f$i.txt; done\n" for d in range(3))
    run(cli, project, shell_agent(tmp_path, body + "echo fixed > calc.py\n"))
    applied = cli("apply", "0001", cwd=project.path)
    assert applied.exit_code == 0, applied.err
    lines = [line for line in applied.out.splitlines() if line[:2] in ("A ", "M ")]
    assert sorted(lines) == sorted(["M calc.py", *(f"A new{d}/f{i}.txt" for d in range(3) for i in (1, 2, 3))])
    assert all(project.read(f"new{d}/f{i}.txt") == f"{i}\n" for d in range(3) for i in (1, 2, 3))
