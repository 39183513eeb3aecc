"""Parallel candidates: N implementers race in forks of the kept state; the best one is kept.

The agents are exec: scripts that behave by LOOPE_CANDIDATE; the gate is real pytest; every
candidate's change stays under its ref and in its step dir.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from loope.records.runview import read_view
from loope.ui.lines import lane_lines
from tests.conftest import FIXED_CALC, GATE, PYTHON, Project, alive_in_group, git, gone, no_loope_runs, one_error_line
from tests.helpers import interrupt_when
from tests.helpers.overlay import loope as loope_process
from tests.helpers.overlay import our_mounts
from tests.integration.test_control import DEADLINE_S, loope, marks, runners, wait_for

__all__ = ["loope_process", "marks", "runners"]  # fixtures used here

# Candidate 1 fixes add; 2 breaks it another way; 3 cheats by rewriting the protected tests; 4 fixes it
# with a longer change (a tie with 1 on the gate, lost on the diff's size).
RACE = f"""
import time
cand = os.environ["LOOPE_CANDIDATE"]
if cand == "1":
    pathlib.Path("calc.py").write_text({FIXED_CALC!r})
    print("fixed add with a + b")
elif cand == "2":
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a * b\\n")
    print("tried a * b")
elif cand == "3":
    pathlib.Path("tests/test_calc.py").write_text("def test_nothing():\\n    assert True\\n")
    print("made the tests pass")
else:
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    total = a\\n    total += b\\n    return total\\n")
    print("fixed add the long way")
time.sleep(0.3)
"""


def test_four_candidates_race_and_the_passing_smallest_change_wins(project, agent_script, cli):
    agent = agent_script(RACE)
    result = cli(
        "run", "--keep-workspace", "fix add", "--implementer", agent, "--candidates", "4", "--no-review",
        "--verify-cmd", GATE, "--protect", "tests/**", "--max-iters", "1", "--sandbox", "off", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["stop_reason"] == "converged"
    (round_,) = run["rounds"]
    assert round_["winner"] == 1
    ranked = [(c["candidate"], c["rank"]) for c in round_["candidates"]]
    assert ranked == [(1, 1), (4, 2), (2, 3), (3, 4)]
    why = {c["candidate"]: c["why"] for c in round_["candidates"]}
    assert why[4].startswith("lost: a tie, with a larger diff")
    assert why[2].startswith("lost: its gate failed")
    assert why[3].startswith("lost: the guard undid")
    workspace = Path(run["workspace"]["path"])
    assert (workspace / "calc.py").read_text() == FIXED_CALC
    # One commit on the run branch: the winner's.
    log = git(project.path, "log", "--format=%s", f"{run['workspace']['base']}..{run['workspace']['branch']}")
    assert log.splitlines() == ["fixed add with a + b"]
    # Every candidate with a change is kept under its ref, and its diff in its step dir.
    refs = git(project.path, "for-each-ref", "--format=%(refname)", f"refs/loope/{run['run_id']}/")
    kept = sorted(ref for ref in refs.split() if "/iter-" in ref)
    assert kept == [f"refs/loope/{run['run_id']}/iter-1-cand-{i}" for i in (1, 2, 4)]
    impl = [s for s in run["steps"] if s["role"] == "implementer"]
    assert sorted(s["candidate"] for s in impl) == [1, 2, 3, 4]
    for step in impl:
        assert step["dir"].endswith(f"-implementer-exec-c{step['candidate']}")
        prompt = (project.runs()[-1] / step["dir"] / "prompt.md").read_text()  # kept by the run-dir check
        assert "fix add" in prompt
        assert "You are candidate" not in prompt  # only with --diversify
        assert f"candidates/c{step['candidate']}/.loope/state.md" in prompt  # its own state file
    gates = [s for s in run["steps"] if s["role"] == "verifier"]
    assert sorted(s["candidate"] for s in gates if s["iteration"] == 1) == [1, 2, 3, 4]
    loser = project.runs()[-1] / next(s["dir"] for s in impl if s["candidate"] == 2)
    assert "a * b" in (loser / "changes.diff").read_text()
    # The implementers ran at the same time: every span overlaps every other.
    assert max(s["started_at"] for s in impl) < min(s["finished_at"] for s in impl)
    # The views' lanes, folded from events.jsonl: one per candidate, the winner marked.
    view, _ = read_view(project.runs()[-1] / "events.jsonl")
    lanes = lane_lines(view.lanes, clock=0.0)
    assert [line.split("  ")[0] for line in lanes] == ["★ c1 exec", "- c2 exec", "- c3 exec", "- c4 exec"]
    assert [line.rsplit("  ", 1)[-1] for line in lanes] == [
        "gate passed",
        "gate failing 2",
        "gate failing 2",
        "gate passed",
    ]
    # The candidates' trees are gone once the round is over.
    assert not (project.runs()[-1] / "candidates").exists()


REVIEWER_BLOCKS_1 = """
diff = prompt.split("## Changes", 1)[-1] if "## Changes" in prompt else prompt
if "return a + b" in prompt and "total" not in prompt:
    print("calc.py: STYLE-9 spell the sum out")
    print("VERDICT: BLOCK")
else:
    print("VERDICT: PASS")
"""


def test_a_race_of_two_agents_where_the_reviewers_block_the_leader_keeps_the_next(project, agent_script, cli):
    short = agent_script(f"pathlib.Path('calc.py').write_text({FIXED_CALC!r})\nprint('the short fix')\n")
    long = agent_script(
        "pathlib.Path('calc.py').write_text('def add(a, b):\\n    total = a\\n    total += b\\n    return total\\n')\n"
        "print('the long fix')\n"
    )
    reviewer = agent_script(REVIEWER_BLOCKS_1)
    result = cli(
        "run", "--keep-workspace", "fix add", "--implementer", short, "--implementer", long, "--reviewer", reviewer,
        "--review-candidates", "2", "--verify-cmd", GATE, "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    (round_,) = run["rounds"]
    assert round_["winner"] == 2
    by = {c["candidate"]: c for c in round_["candidates"]}
    assert (by[1]["verdict"], by[1]["why"]) == ("block", "lost: a reviewer blocked it")
    assert by[2]["verdict"] == "pass"
    reviews = [s for s in run["steps"] if s["role"] == "reviewer"]
    assert [(s["candidate"], s["verdict"]) for s in reviews] == [(1, "BLOCK"), (2, "PASS")]
    assert "★ candidate 2" in result.out
    assert "c1 exec: lost: a reviewer blocked it" in result.out
    status = cli("status", run["run_id"][:4], cwd=project.path)
    assert "iteration 1: candidate 2 won (gate passed" in status.out
    # Nothing is lost: the blocked candidate is listed and can be landed.
    listed = cli("show", run["run_id"][:4], "--candidates", cwd=project.path)
    assert listed.exit_code == 0, listed.err
    assert "1.1 exec: gate passed, 2 line(s) — lost: a reviewer blocked it" in listed.out
    assert "--candidate 1.1" in listed.out
    report = (project.runs()[-1] / "report.md").read_text()
    assert "| 2 | 1.1 | exec | passed |" in report
    landed = cli("apply", run["run_id"][:4], "--candidate", "1.1", cwd=project.path)
    assert landed.exit_code == 0, landed.out + landed.err
    assert project.read("calc.py") == FIXED_CALC
    missing = cli("apply", run["run_id"][:4], "--candidate", "1.7", cwd=project.path)
    assert missing.exit_code == 2
    assert "has no candidate 1.7" in missing.err


MEASURE = "import solution\nprint('SCORE', solution.SCORE)\n"


def test_metric_mode_ranks_by_score_and_a_difference_inside_the_noise_is_a_tie(tmp_path, agent_script, cli):
    proj = Project(tmp_path / "scored")
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    proj.write("solution.py", "SCORE = 10\n")
    proj.write("measure.py", MEASURE)
    proj.write(".gitignore", "__pycache__/\n")
    proj.commit("initial")
    # 1 scores 5; 2 scores 4.9 (inside --min-improvement 0.5 of 5) with a longer change; 3 scores 8.
    agent = agent_script(
        """
        cand = os.environ["LOOPE_CANDIDATE"]
        text = {"1": "SCORE = 5\\n", "2": "SCORE = 4.9\\n# tuned by hand\\n# twice\\n", "3": "SCORE = 8\\n"}[cand]
        pathlib.Path("solution.py").write_text(text)
        print(f"candidate {cand} set the score")
        """
    )
    result = cli(
        "run", "--keep-workspace", "lower the score", "--implementer", agent, "--candidates", "3", "--no-review",
        "--metric-cmd", f"{PYTHON} measure.py", "--direction", "lower", "--min-improvement", "0.5",
        "--editable", "solution.py", "--max-iters", "1", cwd=proj.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = proj.run_json()
    (round_,) = run["rounds"]
    assert round_["winner"] == 1
    by = {c["candidate"]: c for c in round_["candidates"]}
    assert (by[1]["score"], by[2]["score"], by[3]["score"]) == (5, 4.9, 8)
    assert by[2]["why"].startswith("lost: a tie, with a larger diff")
    assert by[3]["why"] == "lost: score 8 against score 5"
    assert run["best"]["score"] == 5
    assert run["best"]["iteration"] == 1
    assert (Path(run["workspace"]["path"]) / "solution.py").read_text() == "SCORE = 5\n"
    view, _ = read_view(proj.runs()[-1] / "events.jsonl")
    assert [line.rsplit("  ", 1)[-1] for line in lane_lines(view.lanes, clock=0.0)] == [
        "score 5",
        "score 4.9",
        "score 8",
    ]
    ledger = [json.loads(line) for line in (proj.runs()[-1] / "ledger.jsonl").read_text().splitlines()]
    assert ledger[0]["candidate"] == 1
    assert [c["candidate"] for c in ledger[0]["candidates"]] == [1, 2, 3]


SECOND_FIXES = f"""
broken = "def add(a, b):\\n    return 0\\n"
pathlib.Path("calc.py").write_text({FIXED_CALC!r} if os.environ["LOOPE_CANDIDATE"] == "2" else broken)
print("candidate " + os.environ["LOOPE_CANDIDATE"])
"""
"""An exec: agent body: candidate 2 fixes add(), every other one breaks it."""
QUICK_GATE = f"{sys.executable} -c 'import calc; assert calc.add(2, 3) == 5'"


def test_a_candidate_that_times_out_loses_and_the_run_goes_on(project, agent_script, cli):
    agent = agent_script(
        f"""
        import time
        if os.environ["LOOPE_CANDIDATE"] == "2":
            time.sleep(120)
        pathlib.Path("calc.py").write_text({FIXED_CALC!r})
        print("fixed")
        """
    )
    result = cli(
        "run", "--keep-workspace", "fix add", "--implementer", agent, "--candidates", "2", "--no-review",
        "--timeout", "4",
        "--verify-cmd", QUICK_GATE, "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    (round_,) = run["rounds"]
    assert round_["winner"] == 1
    slow = next(c for c in round_["candidates"] if c["candidate"] == 2)
    assert (slow["ok"], slow["why"]) == (False, "lost: its step failed")
    step = next(s for s in run["steps"] if s["role"] == "implementer" and s["candidate"] == 2)
    assert step["ok"] is False
    assert "timed out" in (step["error"] or "")
    assert not [s for s in run["steps"] if s["role"] == "verifier" and s["candidate"] == 2]  # no gate for it


def test_every_candidates_cost_counts_and_a_round_that_crosses_the_budget_ends_the_run(project, agent_script, cli):
    agent = agent_script(
        """
        print(json.dumps({"type": "usage", "input_tokens": 10, "output_tokens": 1, "cost_usd": 0.4}))
        pathlib.Path("notes.txt").write_text(os.environ["LOOPE_CANDIDATE"] + "\\n")
        print("wrote a note")
        """
    )
    result = cli(
        "run", "--keep-workspace", "take notes", "--implementer", agent, "--candidates", "3",
        "--no-review", "--max-cost", "1",
        "--verify-cmd", "false", "--no-baseline", "--max-iters", "3", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert run["stop_reason"] == "budget_exceeded"
    assert run["iterations"] == 1
    assert run["completed"] == 1
    assert run["totals"]["cost_usd"] == pytest.approx(1.2)  # over by less than one round's spend
    (round_,) = run["rounds"]
    assert [c["cost_usd"] for c in sorted(round_["candidates"], key=lambda c: c["candidate"])] == [0.4, 0.4, 0.4]


def test_ctrl_c_during_a_round_kills_every_candidate(project, agent_script, tmp_path):
    pids = [tmp_path / f"pid-{i}" for i in (1, 2, 3)]
    agent = agent_script(
        f"""
        import subprocess, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        mine = pathlib.Path({str(tmp_path)!r}) / ("pid-" + os.environ["LOOPE_CANDIDATE"])
        mine.write_text(json.dumps([os.getpid(), child.pid, os.getpgid(0)]))
        time.sleep(300)
        """
    )
    argv = [
        sys.executable, "-m", "loope", "run", "fix add", "--implementer", agent, "--candidates", "3",
        "--no-review", "--verify-cmd", GATE, "--plain", "--sandbox", "off", "--keep-workspace",
    ]  # fmt: skip
    code, out, err = interrupt_when(pids, argv, project.path)
    assert code == 130, out + err
    run = project.run_json()
    assert (run["status"], run["stop_reason"]) == ("stopped", "stopped")
    assert sorted(s["candidate"] for s in run["steps"] if s["role"] == "implementer") == [1, 2, 3]
    for path in pids:
        agent_pid, child, group = json.loads(path.read_text())
        assert gone(agent_pid)
        assert gone(child)
        assert alive_in_group(group) == []
    assert not (project.runs()[-1] / "candidates").exists()


def test_the_next_prompt_says_what_the_losers_tried_and_diversify_asks_for_distinct_approaches(
    project, agent_script, cli
):
    agent = agent_script(
        """
        cand, n = os.environ["LOOPE_CANDIDATE"], os.environ["LOOPE_ITERATION"]
        pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    return {cand} * {n}\\n")
        print(f"idea {cand}.{n}: a constant")
        """
    )
    plain = agent_script("pathlib.Path('notes.txt').write_text('x\\n')\nprint('plain')\n")
    result = cli(
        "run", "--keep-workspace", "fix add", "--implementer", agent, "--implementer", plain,
        "--diversify", "--no-review",
        "--verify-cmd", GATE, "--max-iters", "2", "--stall-after", "5", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert [r["iteration"] for r in run["rounds"]] == [1, 2]
    prompts = {
        (s["iteration"], s["candidate"]): (project.runs()[-1] / s["dir"] / "prompt.md").read_text()
        for s in run["steps"]
        if s["role"] == "implementer"
    }
    assert "## You are candidate 2 of 2" in prompts[1, 2]
    assert "Try something different" not in prompts[1, 1]
    second = prompts[2, 1]
    assert "Try something different from what the last iteration's candidates tried:\n" in second
    assert "\n- idea 1.1: a constant\n" in second
    assert "\n- plain\n" in second
    loser = next(c for c in run["rounds"][0]["candidates"] if c["rank"] == 2)
    assert f"- Candidate {loser['candidate']} ({loser['agent']}) {loser['why']}: {loser['summary']}" in second
    assert "The other candidates of this iteration" in second


def test_resume_after_the_runner_is_killed_mid_round_discards_the_round_and_runs_it_again(
    project, agent_script, marks, runners
):
    body = f"""
    import time
    cand, n = os.environ["LOOPE_CANDIDATE"], int(os.environ["LOOPE_ITERATION"])
    mark = pathlib.Path({str(marks)!r}) / f"slept-{{cand}}.json"
    pathlib.Path(f"notes-{{cand}}.txt").write_text(f"iteration {{n}}\\n")
    print(json.dumps({{"type": "usage", "input_tokens": 10, "output_tokens": 1, "cost_usd": 0.01}}), flush=True)
    if n == 2 and not mark.exists():
        mark.write_text(json.dumps([os.getpid(), os.getpgid(0)]))
        time.sleep(300)
    print(f"candidate {{cand}} wrote its notes")
    """
    runner = runners.start(
        "run", "--keep-workspace", "take notes", "--implementer", agent_script(body), "--candidates", "2",
        "--no-review",
        "--max-iters", "2", "--plain",
    )  # fmt: skip
    slept = [marks / "slept-1.json", marks / "slept-2.json"]
    wait_for(lambda: all(p.exists() and p.read_text() for p in slept), "both candidates of round 2 to sleep")
    rundir = project.runs()[-1]
    os.kill(runner.pid, signal.SIGKILL)
    assert runner.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    assert (rundir / "candidates").exists()  # the dead runner left its round behind

    resumed = loope(project.path, "resume", rundir.name, "--plain")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # max_iters: nothing says done
    for path in slept:
        pid, group = json.loads(path.read_text())
        assert gone(pid)
        assert alive_in_group(group) == []
    run = json.loads((rundir / "run.json").read_text())
    assert (run["status"], run["completed"]) == ("max_iters", 2)
    assert [r["iteration"] for r in run["rounds"]] == [1, 2]
    assert sorted(s["dir"].rsplit("/", 1)[-1][3:] for s in run["discarded_steps"]) == [
        "implementer-exec-c1",
        "implementer-exec-c2",
    ]
    assert run["totals"]["cost_usd"] == pytest.approx(0.06)  # 2 rounds of 2 candidates, and the cut round
    assert not (rundir / "candidates").exists()
    worktrees = git(project.path, "worktree", "list", "--porcelain")
    assert "/candidates/" not in worktrees


@pytest.mark.parametrize("mode", ["copy", "in-place"])
def test_candidates_fork_copy_and_in_place_runs_from_their_shadow_git(project, agent_script, cli, mode):
    agent = agent_script(SECOND_FIXES)
    result = cli(
        "run", "fix add", "--implementer", agent, "--candidates", "2", "--no-review", "--verify-cmd", QUICK_GATE,
        "--workspace", mode, "--keep-workspace", "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    assert run["rounds"][0]["winner"] == 2
    assert (Path(run["workspace"]["path"]) / "calc.py").read_text() == FIXED_CALC
    assert not (project.runs()[-1] / "candidates").exists()
    if mode == "in-place":
        assert project.read("calc.py") == FIXED_CALC
    else:  # the loser lands from its ref in the copy's shadow git
        landed = cli("apply", run["run_id"][:4], "--candidate", "1.1", "--force", cwd=project.path)
        assert landed.exit_code == 0, landed.out + landed.err
        assert project.read("calc.py") == "def add(a, b):\n    return 0\n"


FORCE_PASS = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def test_a_candidate_that_writes_outside_its_tree_gains_nothing(project, agent_script, cli):
    # Candidate 1 plants a pass-everything conftest.py beside the candidates' trees and the fix in the
    # run's own workspace; both candidates leave add() broken in their own trees.
    agent = agent_script(
        f"""
        run_dir = pathlib.Path(os.environ["LOOPE_RUN_DIR"])
        if os.environ["LOOPE_CANDIDATE"] == "1":
            (run_dir / "candidates" / "conftest.py").write_text({FORCE_PASS!r})
            (run_dir / "workspace" / "calc.py").write_text({FIXED_CALC!r})
        pathlib.Path("calc.py").write_text("def add(a, b):\\n    return 0\\n")
        print("candidate " + os.environ["LOOPE_CANDIDATE"])
        """
    )
    result = cli(
        "run", "--keep-workspace", "fix add", "--implementer", agent, "--candidates", "2", "--no-review",
        "--verify-cmd", GATE,
        "--max-iters", "1", "--sandbox", "off", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert run["stop_reason"] == "max_iters"
    assert [c["gate_passed"] for c in run["rounds"][0]["candidates"]] == [False, False]
    assert (Path(run["workspace"]["path"]) / "calc.py").read_text() == "def add(a, b):\n    return 0\n"
    feedback = run["loop"]["feedback"]
    assert "candidates/conftest.py beside the candidates' trees is loope's to write; it was removed" in feedback
    assert "a candidate may only read, but changed calc.py; the changes were undone" in feedback


def test_under_the_sandbox_a_candidate_writes_only_its_own_tree(project, agent_script, cli):
    from loope.sandbox import bwrap

    if not bwrap.support().works:
        pytest.skip(f"bubblewrap does not work here: {bwrap.support().reason}")
    agent = agent_script(
        f"""
        import errno
        cand = os.environ["LOOPE_CANDIDATE"]
        run_dir = pathlib.Path(os.environ["LOOPE_RUN_DIR"])
        other = run_dir / "candidates" / ("c2" if cand == "1" else "c1") / "calc.py"
        tried = []
        for target in (run_dir / "workspace" / "calc.py", other):
            try:
                target.write_text("def add(a, b):\\n    return 42\\n")
                tried.append("wrote")
            except OSError as exc:
                tried.append(errno.errorcode.get(exc.errno, str(exc.errno)))
        pathlib.Path("calc.py").write_text({FIXED_CALC!r})
        print("the run's tree " + tried[0] + ", the other candidate's " + tried[1])
        """
    )
    result = cli(
        "run", "--keep-workspace", "fix add", "--implementer", agent, "--candidates", "2", "--no-review",
        "--verify-cmd", GATE,
        "--sandbox", "on", "--max-iters", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = project.run_json()
    summaries = {c["candidate"]: c["summary"] for c in run["rounds"][0]["candidates"]}
    assert summaries == {i: "the run's tree ENOENT, the other candidate's ENOENT" for i in (1, 2)}
    assert (Path(run["workspace"]["path"]) / "calc.py").read_text() == FIXED_CALC
    assert not [s for s in run["steps"] if s["violations"]]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--candidates", "0"), "--candidates: Input should be greater than or equal to 1"),
        (("--candidates", "9", "--implementer", "stub"), "18 candidates per iteration is more than 16"),
        (("--jobs", "0"), "--jobs: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_candidates_setting_is_one_clear_line_and_exit_2(project, cli, args, said):
    result = cli("run", "fix add", "--implementer", "stub", *args, cwd=project.path)
    assert result.exit_code == 2, result.out + result.err
    assert said in one_error_line(result.err)
    assert no_loope_runs(project.path)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_an_overlay_run_forks_its_candidates_over_the_same_snapshot(project, agent_script, loope_process):
    result = loope_process(
        "run", "fix add", "--implementer", agent_script(SECOND_FIXES), "--candidates", "2", "--no-review",
        "--verify-cmd", QUICK_GATE, "--workspace", "overlay", "--max-iters", "1", "--plain", cwd=project.path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    run = project.run_json()
    assert run["rounds"][0]["winner"] == 2
    assert run["changes"]["files"][0]["path"] == "calc.py"
    shown = loope_process("show", run["run_id"], "--diff", cwd=project.path)
    assert "+    return a + b" in shown.stdout
    assert not (project.runs()[-1] / "candidates").exists()
    assert our_mounts(project.path) == []
