"""A full disk, for real: a small tmpfs filled when the run starts, during a step, and while finalizing.

Each time: one clear line, no traceback, the run recorded as ``failed`` with the reason wherever a
byte can still be written, and nothing half-made left behind (no empty run dir, no stray branch).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PYTHON, Project, make_project

LOOPE = [sys.executable, "-m", "loope"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 12 MB tmpfs of our own, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("filling a disk needs a tmpfs of its own, and mounting one needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mount)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); it needs root in a VM")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def project_on(small_disk: Path) -> Project:
    return make_project(small_disk / "proj")


def fill(path: Path, leave: int = 0) -> None:
    """Fill the disk ``path`` is on with a file at ``path``, then free ``leave`` bytes of it."""
    with path.open("wb", buffering=0) as handle:  # unbuffered: nothing left to flush on close
        block = b"\0" * 65536
        with contextlib.suppress(OSError):
            while True:
                handle.write(block)
    if leave:
        os.truncate(path, max(0, path.stat().st_size - leave))


def loope(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LOOPE, *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def agent(tmp_path: Path, body: str) -> str:
    script = tmp_path / f"agent_{len(list(tmp_path.glob('agent_*')))}.py"
    script.write_text("import os, pathlib, sys\nsys.stdin.read()\n" + body)
    return f"exec:{PYTHON} {shlex.quote(str(script))}"


def nothing_left_behind(project: Project) -> None:
    runs = project.path / ".loope" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), list(runs.iterdir())
    assert project.git("branch", "--list", "loope/*") == ""
    assert len(project.git("worktree", "list").splitlines()) == 1


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("leave", [0, 200 * 1024], ids=["full", "no-room-for-a-run"])
def test_a_run_that_cannot_start_says_so_in_one_line_and_leaves_nothing(project_on, small_disk, tmp_path, leave):
    fill(small_disk / "filler", leave)
    done = loope(project_on, "run", "fix add", "--implementer", agent(tmp_path, "print('hi')"), "--no-review")
    no_traceback(done)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("loope: error: the disk is full"), lines
    assert "free some space" in lines[0]
    assert done.returncode == 2
    nothing_left_behind(project_on)


def test_a_step_that_fills_the_disk_fails_the_run_with_the_reason_and_keeps_its_cost(project_on, tmp_path):
    fills = agent(
        tmp_path,
        'print(\'{"type": "usage", "input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.25}\', flush=True)\n'
        "with open('big.bin', 'wb', buffering=0) as out:\n"
        "    try:\n"
        "        while True:\n"
        "            out.write(bytes(65536))\n"
        "    except OSError:\n"
        "        pass\n"
        "print('filled the disk')\n",
    )
    done = loope(project_on, "run", "fix add", "--implementer", fills, "--no-review", "--plain", "--max-iters", "2")
    no_traceback(done)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = [line for line in done.stdout.splitlines() if line.startswith("halted after")]
    assert len(summary) == 1, done.stdout
    assert "the disk is full writing" in summary[0]
    run = project_on.run_json()
    assert run["status"] == "failed", done.stdout + done.stderr
    assert run["stop_detail"].startswith("the disk is full writing ")
    assert "free some space" in run["stop_detail"]
    assert run["finished_at"]
    # The step was cut short, but what it reported spending is counted.
    (step,) = run["steps"]
    assert step["ok"] is False
    assert step["error"].startswith("cut short: the disk is full")
    assert (step["cost_usd"], step["input_tokens"], step["output_tokens"]) == (0.25, 1200, 300)
    assert run["totals"]["cost_usd"] == 0.25
    assert run["totals"]["input_tokens"] == 1200
    events = (project_on.runs()[-1] / "events.jsonl").read_text().splitlines()
    assert json.loads(events[-1])["type"] == "run_finished"
    assert json.loads(events[-1])["status"] == "failed"
    assert "failed" in (project_on.runs()[-1] / "report.md").read_text()
    assert not (project_on.runs()[-1] / ".reserve").exists()
    status = loope(project_on, "status", "1", "--json")
    assert json.loads(status.stdout)["loop"]["status"] == "failed"


def test_a_disk_that_fills_while_finalizing_still_records_the_run_as_failed(project_on, tmp_path):
    # Iteration 1 writes 2 MB of text (its own diff fits); iteration 2 fills the disk through the state
    # file (never part of the diff) and leaves 300 kB: enough for its own records, not for the final
    # 2 MB changes.diff, even with the run's reserve freed.
    body = (
        "import base64\n"
        "state = pathlib.Path(os.environ['LOOPE_STATE_FILE'])\n"
        "if os.environ['LOOPE_ITERATION'] == '1':\n"
        "    lines = (base64.b64encode(os.urandom(57)).decode() for _ in range(27_000))\n"
        "    pathlib.Path('data.txt').write_text('\\n'.join(lines) + '\\n')\n"
        "else:\n"
        "    with state.open('ab', buffering=0) as out:\n"
        "        try:\n"
        "            while True:\n"
        "                out.write(b'#' * 65536)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os.truncate(state, state.stat().st_size - 300_000)\n"
        "print('done')\n"
    )
    done = loope(
        project_on, "run", "add data", "--implementer", agent(tmp_path, body), "--no-review", "--plain",
        "--max-iters", "2",
    )  # fmt: skip
    no_traceback(done)
    assert done.returncode == 1, done.stdout + done.stderr
    run = project_on.run_json()
    assert run["status"] == "failed", done.stdout + done.stderr
    assert run["stop_reason"] == "failed"
    assert run["stop_detail"].startswith("the disk is full writing ")
    assert "changes.diff" in run["stop_detail"]
    assert "changes.diff while finalizing (No space left on device); free some space" in run["stop_detail"]
    assert run["stop_detail"].endswith("; before that: max_iters: reached --max-iters 2")
    assert [s["ok"] for s in run["steps"]] == [True, True]
    summary = [line for line in done.stdout.splitlines() if line.startswith("halted after")]
    assert len(summary) == 1, done.stdout
    assert "while finalizing" in summary[0]
    last = json.loads((project_on.runs()[-1] / "events.jsonl").read_text().splitlines()[-1])
    assert (last["type"], last["status"]) == ("run_finished", "failed")
