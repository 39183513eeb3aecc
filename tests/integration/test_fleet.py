"""Fleets on one machine: many loops from one file, --jobs at once, one budget, stop and continue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import CALC, CALC_TESTS, GATE, Project, one_error_line
from tests.integration.test_control import DEADLINE_S, loope, wait_for

FIXED = "def add(a, b):\n    return a + b\n"

# Fixes calc.py in the iteration named by need.txt; before that it writes another wrong version.
FIXER = """
n = int(os.environ["LOOPE_ITERATION"])
need = int(pathlib.Path("need.txt").read_text())
marks = pathlib.Path(os.environ.get("FLEET_MARKS", "/nonexistent"))
if marks.is_dir():
    (marks / f"{pathlib.Path('task.txt').read_text().strip()}-{n}").write_text(str(os.getpid()))
    while (marks / "hold").exists():
        import time
        time.sleep(0.05)
body = "return a + b" if n >= need else f"return a * b + {n}"
pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    {body}\\n")
print(json.dumps({"type": "usage", "input_tokens": 10, "output_tokens": 5, "cost_usd": COST}))
print(f"attempt {n}")
"""


def make_task_repo(path: Path, need: int) -> Project:
    proj = Project(path)
    path.mkdir(parents=True)
    proj.git("init", "-q", "-b", "main")
    proj.write("calc.py", CALC)
    proj.write("tests/test_calc.py", CALC_TESTS)
    proj.write("need.txt", f"{need}\n")
    proj.write("task.txt", f"{path.name}\n")
    proj.write(".gitignore", "__pycache__/\n.pytest_cache/\n")
    proj.commit("initial")
    return proj


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    path = tmp_path / "fleet"
    path.mkdir()
    return path


def write_fleet(fleet_dir: Path, agent: str, tasks: dict[str, int], *, marks: bool = False, **fleet: object) -> Path:
    """A fleet file; with ``marks`` its runs are unsandboxed (the agents signal through files outside it)."""
    lines = ["[fleet]", *(f"{k} = {json.dumps(v)}" for k, v in fleet.items()), ""]
    lines += [
        "[defaults]",
        *(['sandbox = "off"'] if marks else []),
        f"implementer = {json.dumps(agent)}",
        "reviewers = []",
        f"verify_cmd = {json.dumps(GATE)}",
        "max_iters = 4",
        "stall_after = 9",
        "",
    ]
    for name, need in tasks.items():
        make_task_repo(fleet_dir / "repos" / name, need)
        lines += ["[[task]]", f'name = "{name}"', f'workdir = "repos/{name}"', 'goal = "make the tests pass"', ""]
    path = fleet_dir / "fleet.toml"
    path.write_text("\n".join(lines))
    return path


def run_record(fleet_dir: Path, name: str) -> dict:
    runs = sorted((fleet_dir / "repos" / name / ".loope" / "runs").iterdir())
    assert len(runs) == 1, runs
    return json.loads((runs[0] / "run.json").read_text())


def fleet_status(fleet_dir: Path, fleet_id: str = "0001") -> dict:
    done = loope(fleet_dir, "fleet", "status", fleet_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def most_at_once(records: list[dict]) -> int:
    """The largest number of runs whose [started_at, finished_at] spans overlap at one moment."""
    edges = sorted(
        [(epoch(r["started_at"]), 1) for r in records] + [(epoch(r["finished_at"]), -1) for r in records],
        key=lambda e: (e[0], e[1]),
    )
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_four_loops_two_at_a_time_all_converge(fleet_dir, agent_script):
    agent = agent_script(FIXER.replace("COST", "0.01"))
    needs = {"alpha": 2, "beta": 3, "gamma": 2, "delta": 3}
    path = write_fleet(fleet_dir, agent, needs, jobs=2)

    done = loope(fleet_dir, "fleet", str(path), "--plain")

    assert done.returncode == 0, done.stdout + done.stderr
    records = {name: run_record(fleet_dir, name) for name in needs}
    for name, record in records.items():
        assert record["status"] == "converged", (name, record["stop_detail"])
        assert record["iterations"] == needs[name]
        assert (fleet_dir / "repos" / name / "calc.py").read_text() == CALC  # nothing lands before apply
    assert most_at_once(list(records.values())) <= 2
    status = fleet_status(fleet_dir)
    assert status["status"] == "converged"
    assert [t["status"] for t in status["tasks"]] == ["converged"] * 4
    assert {t["run_id"] for t in status["tasks"]} == {r["run_id"] for r in records.values()}
    spent = sum(r["totals"]["cost_usd"] for r in records.values())
    assert status["cost_usd"] == pytest.approx(spent)
    assert spent == pytest.approx(0.01 * sum(needs.values()))
    assert "all 4 loop(s) converged" in done.stdout


def test_the_fleet_budget_stops_the_fleet_and_skips_the_rest(fleet_dir, agent_script):
    agent = agent_script(FIXER.replace("COST", "1.0"))
    path = write_fleet(fleet_dir, agent, {"one": 9, "two": 9, "three": 9}, jobs=1, max_cost=2.5)

    done = loope(fleet_dir, "fleet", str(path), "--plain")

    assert done.returncode == 1, done.stdout + done.stderr
    status = fleet_status(fleet_dir)
    assert status["status"] == "budget_exceeded"
    assert [t["status"] for t in status["tasks"]] == ["budget_exceeded", "skipped", "skipped"]
    # The first loop was given what the fleet had left, so it stopped itself after crossing it.
    first = run_record(fleet_dir, "one")
    assert first["stop_reason"] == "budget_exceeded"
    assert 2.5 <= status["cost_usd"] <= 2.5 + 1.0  # overshoot: at most the one step that crossed it
    assert not (fleet_dir / "repos" / "two" / ".loope" / "runs").exists()


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where the agents say they started; while ``hold`` exists they wait."""
    path = tmp_path / "marks"
    path.mkdir()
    (path / "hold").write_text("")
    return path


def start_fleet(fleet_dir: Path, path: Path, marks: Path) -> subprocess.Popen[str]:
    """``loope fleet FILE`` in the background, its agents reporting to ``marks``."""
    return subprocess.Popen(
        [sys.executable, "-m", "loope", "fleet", str(path), "--plain"],
        cwd=fleet_dir,
        env={**os.environ, "FLEET_MARKS": str(marks)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_fleet_stop_stops_the_running_loop_and_starts_no_more(fleet_dir, agent_script, marks):
    agent = agent_script(FIXER.replace("COST", "0.01"))
    path = write_fleet(fleet_dir, agent, {"first": 2, "second": 2}, marks=True, jobs=1)
    coordinator = start_fleet(fleet_dir, path, marks)
    try:
        wait_for((marks / "first-1").exists, "the first loop's agent to start")
        stopped = loope(fleet_dir, "fleet", "stop", "0001")
        assert stopped.returncode == 0, stopped.stderr
        assert "stop requested for fleet 0001" in stopped.stdout
        (marks / "hold").unlink()
        out, _ = coordinator.communicate(timeout=DEADLINE_S)
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
    assert coordinator.returncode == 1, out
    status = fleet_status(fleet_dir)
    assert status["status"] == "stopped"
    assert [t["status"] for t in status["tasks"]] == ["stopped", "skipped"]
    assert run_record(fleet_dir, "first")["iterations"] == 1
    assert not (marks / "second-1").exists()


def test_continue_restarts_a_dead_runner_and_starts_what_is_left(fleet_dir, agent_script, marks):
    agent = agent_script(FIXER.replace("COST", "0.01"))
    path = write_fleet(fleet_dir, agent, {"first": 2, "second": 1}, marks=True, jobs=1)
    coordinator = start_fleet(fleet_dir, path, marks)
    wait_for((marks / "first-1").exists, "the first loop's agent to start")
    # The machine "dies": the coordinator, the run's runner and its agent, all at once.
    coordinator.kill()
    coordinator.communicate(timeout=DEADLINE_S)
    runner = run_record(fleet_dir, "first")["pid"]
    os.kill(runner, signal.SIGKILL)
    os.kill(int((marks / "first-1").read_text()), signal.SIGKILL)
    wait_for(lambda: fleet_status(fleet_dir)["tasks"][0]["status"] == "dead", "the run to read as dead")
    (marks / "hold").unlink()

    done = subprocess.run(
        [sys.executable, "-m", "loope", "fleet", "continue", "0001", "--plain"],
        cwd=fleet_dir,
        env={**os.environ, "FLEET_MARKS": str(marks)},
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "restarted the runner of first" in done.stdout
    status = fleet_status(fleet_dir)
    assert [t["status"] for t in status["tasks"]] == ["converged", "converged"]
    first = run_record(fleet_dir, "first")
    assert first["iterations"] == 2  # the cut-short iteration 1 ran again, counted once
    assert [s["iteration"] for s in first["steps"] if s["role"] == "implementer"] == [1, 2]


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ('name = "a"\nworkdir = "repos/a"\ngoal = "x"\nbogus = 1', "task 'a': unknown setting 'bogus'"),
        ('name = "a"\nworkdir = "nowhere"\ngoal = "x"', "task 'a': workdir"),
        ('name = "a b"\nworkdir = "repos/a"\ngoal = "x"', "task 1 needs a name"),
        ('name = "a"\nworkdir = "repos/a"\ngoal = "x"\n[[task]]\nname = "a"\ngoal = "y"', "two tasks"),
        ('name = "a"\nworkdir = "repos/a"\nmax_iters = 0\ngoal = "x"', "task 'a': --max-iters"),
    ],
)
def test_a_bad_fleet_file_gets_one_line_and_starts_nothing(fleet_dir, cli, task, message):
    make_task_repo(fleet_dir / "repos" / "a", 1)
    path = fleet_dir / "fleet.toml"
    path.write_text(f"[defaults]\nimplementer = 'stub'\n\n[[task]]\n{task}\n")

    result = cli("fleet", str(path), "--workdir", str(fleet_dir))

    assert result.exit_code == 2
    assert message in one_error_line(result.err)
    assert not (fleet_dir / "repos" / "a" / ".loope" / "runs").exists()


def test_fleet_status_without_fleets_and_with_an_unknown_id(fleet_dir, cli):
    assert "no fleets yet" in cli("fleet", "status", "--workdir", str(fleet_dir)).out
    missing = cli("fleet", "stop", "0042", "--workdir", str(fleet_dir))
    assert missing.exit_code == 2
    assert "no fleet matches '0042'" in one_error_line(missing.err)


def test_a_task_from_a_git_url_is_cloned_once_and_converges(fleet_dir, agent_script):
    agent = agent_script(FIXER.replace("COST", "0.01"))
    origin = make_task_repo(fleet_dir.parent / "origin", 1)
    path = fleet_dir / "fleet.toml"
    path.write_text(
        f"[defaults]\nimplementer = {json.dumps(agent)}\nreviewers = []\nverify_cmd = {json.dumps(GATE)}\n\n"
        f'[[task]]\nname = "remote"\nrepo = {json.dumps(str(origin.path))}\ngoal = "make the tests pass"\n'
    )

    done = loope(fleet_dir, "fleet", str(path), "--plain")

    assert done.returncode == 0, done.stdout + done.stderr
    clone = fleet_dir / ".loope" / "fleet-repos" / "remote"
    assert (clone / "calc.py").read_text() == CALC
    [task] = fleet_status(fleet_dir)["tasks"]
    assert (task["workdir"], task["status"]) == (str(clone), "converged")
