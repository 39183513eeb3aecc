"""The README's promises: ``make demo`` runs a real loop offline, ``make test`` runs the tests."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_demo_converges_in_two_iterations_and_prints_the_report_and_diff(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the demo's example project lives (and is removed) here
    result = cli("demo", "--plain", cwd=tmp_path)
    assert result.exit_code == 0, result.out + result.err
    out = result.out
    assert "\x1b" not in out
    # progress: the first attempt fails the gate, the second passes it and the reviewer
    assert "iteration 1/3" in out
    assert "iteration 2/3" in out
    assert "iteration 3/3" not in out
    assert "failed (exit 1)" in out
    assert "test_add_negative" in out
    assert "PASS" in out
    # the report, then the cumulative diff
    assert "# loope run 0001-" in out
    assert "**Outcome:** converged in 2 iterations" in out
    assert "## Iteration 2" in out
    assert "--- a/calc/__init__.py" in out
    assert "+    return a + b" in out
    assert out.index("# loope run") < out.index("--- a/calc/__init__.py")
    assert not result.err.strip()
    # Nothing of the example is left behind without --keep.
    assert list(tmp_path.iterdir()) == []


def test_demo_keep_leaves_a_project_with_the_run(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = cli("demo", "--plain", "--keep", cwd=tmp_path)
    assert result.exit_code == 0, result.out + result.err
    kept = re.search(r"the example project is kept at (\S+)", result.out)
    assert kept is not None
    project = Path(kept.group(1))
    assert project.is_relative_to(tmp_path)
    runs = cli("runs", "--json", "--workdir", str(project), cwd=tmp_path)
    assert '"status": "converged"' in runs.out


def test_readme_names_make_demo_and_make_test():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme
    assert "make test" in readme


def test_the_makefile_has_the_demo_and_test_targets():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w.-]*):", makefile, re.M))
    assert {"demo", "test"} <= targets
    demo_recipe = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "loope demo" in demo_recipe
    test_recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "pytest" in test_recipe


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(("target", "command"), [("demo", "loope demo"), ("test", "pytest")])
def test_make_resolves_the_targets(target, command):
    dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=False)
    assert dry.returncode == 0, dry.stderr
    assert command in dry.stdout


def readme_commands() -> dict[str, set[str]]:
    """Each ``loope <command>`` in the README's code blocks, with the flags shown for it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:sh|)\n(.*?)```", readme, re.S)
    found: dict[str, set[str]] = {}
    current: str | None = None
    for line in "\n".join(blocks).splitlines():
        starts = re.findall(r"\bloope ([a-z][a-z-]*)", line)
        if starts:
            for name in starts:
                found.setdefault(name, set())
            current = starts[0] if len(starts) == 1 else None
        elif not line.startswith(" "):
            current = None
        if current is not None:
            code = re.split(r"\s#\s", line, maxsplit=1)[0]  # not the shell comments
            found[current] |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", code))
    return found


README_COMMANDS = readme_commands()


def test_the_readme_shows_the_commands():
    assert {"run", "show", "apply", "runs", "demo"} <= set(README_COMMANDS)
    assert {"--verify-cmd", "--max-iters", "--workspace"} <= README_COMMANDS["run"]


@pytest.mark.parametrize("command", sorted(README_COMMANDS))
def test_every_command_in_the_readme_runs_with_the_flags_it_shows(cli, tmp_path, command):
    result = cli(command, "--help", cwd=tmp_path)
    assert result.exit_code == 0, result.err
    missing = sorted(flag for flag in README_COMMANDS[command] if flag not in result.out)
    assert missing == [], f"`loope {command} --help` lacks {missing} shown in the README"
