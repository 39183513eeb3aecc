"""Metric mode end to end: a protected scorer, scripted exec: agents, real git and real pytest as the gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GATE, PYTHON, Project, in_workspace, run_file, run_git


@pytest.fixture
def cli(cli, workspace_mode):  # type: ignore[no-untyped-def]
    """Each test runs in the default workspace and in an overlay."""
    return in_workspace(cli, workspace_mode)


MEASURE = """\
import solution

print("measuring solution.py")
print("SCORE", solution.SCORE)
"""

SOLUTION_TESTS = """\
import solution


def test_score_is_a_number():
    assert isinstance(solution.SCORE, int | float)
"""

METRIC = f"{PYTHON} measure.py"
CHEAP_GATE = f'{PYTHON} -c "import solution"'


@pytest.fixture
def scored(tmp_path: Path) -> Project:
    """A git repository whose solution.py scores 10 by a protected measure.py; pytest checks it is a number."""
    proj = Project(tmp_path / "scored")
    proj.path.mkdir()
    proj.git("init", "-q", "-b", "main")
    proj.write("solution.py", "SCORE = 10\n")
    proj.write("measure.py", MEASURE)
    proj.write("tests/test_solution.py", SOLUTION_TESTS)
    proj.write(".gitignore", "__pycache__/\n.pytest_cache/\n")
    proj.commit("initial")
    return proj


def scoring_agent(agent_script, scores: dict[int, object]) -> str:  # type: ignore[no-untyped-def]
    """An implementer that writes ``SCORE = scores[$LOOPE_ITERATION]`` into solution.py."""
    return agent_script(
        f"""
        scores = {scores!r}
        n = int(os.environ["LOOPE_ITERATION"])
        pathlib.Path("solution.py").write_text(f"SCORE = {{scores[n]}}\\n")
        print(f"set SCORE to {{scores[n]}} in attempt {{n}}")
        """
    )


def run_dir(proj: Project) -> Path:
    return proj.runs()[-1]


def ledger_of(proj: Project) -> list[dict]:
    return [json.loads(line) for line in (run_dir(proj) / "ledger.jsonl").read_text().splitlines()]


def score_log(proj: Project) -> list[list[str]]:
    return [line.split("\t") for line in (run_dir(proj) / "score.log").read_text().splitlines()]


def prompt_of(proj: Project, iteration: int) -> str:
    run = proj.run_json()
    [step] = [s for s in run["steps"] if s["role"] == "implementer" and s["iteration"] == iteration]
    return (run_dir(proj) / step["dir"] / "prompt.md").read_text()


def workspace_file(proj: Project, rel: str) -> str:
    return run_file(proj.run_json(), rel)


def metric_run(cli, proj: Project, implementer: str, *extra: str, gate: str = GATE):  # type: ignore[no-untyped-def]
    return cli(
        "run", "lower the score", "--implementer", implementer, "--no-review", "--verify-cmd", gate,
        "--metric-cmd", METRIC, "--direction", "lower", "--editable", "solution.py", "--plain", *extra, cwd=proj.path,
    )  # fmt: skip


# -- keep the improvements, revert the rest --------------------------------------------------------


def test_scores_5_3_9_keep_the_best_3_and_revert_the_third_attempt(scored, agent_script, cli):
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 5, 2: 3, 3: 9}), "--max-iters", "3")
    assert result.exit_code == 0, result.out + result.err  # improved on the baseline (10)
    run = scored.run_json()
    rundir = run_dir(scored)
    assert run["stop_reason"] == "max_iters"
    assert run["baseline"] == 10
    assert run["best"]["score"] == 3
    assert run["best"]["iteration"] == 2
    # The third attempt was reverted: the workspace is back at the best kept state.
    assert workspace_file(scored, "solution.py") == "SCORE = 3\n"
    assert (rundir / "best").read_text().strip() == "3"
    # ... and its diff is kept, in its step directory and under a ref.
    [third] = [s for s in run["steps"] if s["role"] == "implementer" and s["iteration"] == 3]
    diff = (rundir / third["dir"] / "changes.diff").read_text()
    assert "-SCORE = 3" in diff
    assert "+SCORE = 9" in diff
    ref = f"refs/loope/{run['run_id']}/attempt-3"
    assert run_git(run, "show", f"{ref}:solution.py") == "SCORE = 9\n"
    # The run's history holds the kept states only: the reverted attempt is not among its commits.
    base, head = run["workspace"]["base"], run["workspace"]["head"]
    assert run_git(run, "show", f"{head}:solution.py") == "SCORE = 3\n"
    assert len(run_git(run, "rev-list", f"{base}..{head}").split()) == 2
    assert not run_git(run, "for-each-ref", f"refs/loope/{run['run_id']}/attempt-1")
    # The score log starts with the first attempt (all of it: see the test below).
    assert score_log(scored)[0][1:] == ["1", "5", "kept"]
    # The ledger: one line per attempt with every documented field.
    ledger = ledger_of(scored)
    assert [a["iteration"] for a in ledger] == [1, 2, 3]
    fields = "iteration summary changed_files diffstat gate score best verdict violations cost_usd tokens duration_s"
    for attempt in ledger:
        assert set(fields.split()) <= set(attempt), attempt
        assert attempt["changed_files"] == ["solution.py"]
        assert attempt["gate"]["passed"] is True
        assert attempt["gate"]["exit_code"] == 0
        assert attempt["gate"]["failures"] == []
        assert attempt["violations"] == []
    assert [(a["score"], a["best"], a["verdict"]) for a in ledger] == [
        (5, 5, "kept"),
        (3, 3, "kept"),
        (9, 3, "reverted"),
    ]
    assert ledger[1]["summary"] == "set SCORE to 3 in attempt 2"
    # The baseline is scored on the original tree before any attempt.
    iteration0 = [(s["role"], s["adapter"], s.get("score")) for s in run["steps"] if s["iteration"] == 0]
    assert iteration0 == [("verifier", "gate", None), ("verifier", "metric", 10)]
    assert [s["score"] for s in run["steps"] if s["adapter"] == "metric"] == [10, 5, 3, 9]


def test_the_score_log_holds_a_line_per_attempt(scored, agent_script, cli):
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 5, 2: 3, 3: 9}), "--max-iters", "3")
    assert result.exit_code == 0, result.out + result.err
    lines = score_log(scored)
    assert [line[1:] for line in lines] == [["1", "5", "kept"], ["2", "3", "kept"], ["3", "9", "reverted"]]
    assert all(line[0].startswith("20") and "T" in line[0] for line in lines)  # an ISO time


def test_the_next_prompt_carries_the_compact_ledger(scored, agent_script, cli):
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 5, 2: 3, 3: 9, 4: 4}), "--max-iters", "4")
    assert result.exit_code == 0, result.out + result.err
    first = prompt_of(scored, 1)
    assert "Attempts so far" not in first
    fourth = prompt_of(scored, 4)
    attempts = fourth.split("# Attempts so far", 1)[1].split("\n# ", 1)[0]
    assert "Best score so far: 3" in attempts
    assert "iteration 1: kept, score 5, gate passed" in attempts
    assert "iteration 2: kept, score 3" in attempts
    assert "iteration 3: reverted, score 9" in attempts
    assert "set SCORE to 9 in attempt 3" in attempts
    # What the last attempt scored, and what became of it, is in the feedback as well.
    assert "Attempt 3: score 9" in fourth
    assert "reverted" in fourth.split("# Feedback from the last iteration", 1)[1]
    # The prompt names the metric and the gate, never the transcript.
    assert METRIC in fourth


def test_dead_ends_older_than_the_recent_attempts_are_listed(scored, agent_script, cli):
    scores = {1: 12, 2: 9, 3: 8, 4: 7, 5: 6, 6: 5, 7: 4}
    result = metric_run(cli, scored, scoring_agent(agent_script, scores), "--max-iters", "7", gate=CHEAP_GATE)
    assert result.exit_code == 0, result.out + result.err
    seventh = prompt_of(scored, 7)
    attempts = seventh.split("# Attempts so far", 1)[1].split("\n# ", 1)[0]
    recent, dead = attempts.split("Dead ends", 1)
    assert "Best score so far: 5" in recent
    assert "iteration 1:" not in recent  # only the last five attempts are recent
    assert "iteration 2: kept, score 9" in recent
    assert "iteration 1: reverted, score 12" in dead
    assert "set SCORE to 12 in attempt 1" in dead
    assert scored.run_json()["best"]["score"] == 4


# -- the baseline ---------------------------------------------------------------------------------


def test_a_metric_that_fails_on_the_original_tree_is_not_an_error(scored, agent_script, cli):
    scored.write("solution.py", "RESULT = 'not scored yet'\n")
    scored.commit("no score yet")
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 5, 2: 3}), "--max-iters", "2")
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    assert run["stop_reason"] == "max_iters"
    # The original tree fails the gate (no SCORE), so it is not scored and sets no baseline ...
    iteration0 = [(s["adapter"], s["gate_passed"]) for s in run["steps"] if s["iteration"] == 0]
    assert iteration0 == [("gate", False)]
    # ... and the first passing attempt's score is the one to beat.
    ledger = ledger_of(scored)
    assert [(a["score"], a["best"], a["verdict"]) for a in ledger] == [(5, 5, "kept"), (3, 3, "kept")]
    assert run["best"] == {"score": 3, "iteration": 2, "commit": run["best"]["commit"]}
    assert (run_dir(scored) / "best").read_text().strip() == "3"
    assert "first passing score" in prompt_of(scored, 2)


def test_the_first_passing_attempt_is_recorded_as_the_baseline(scored, agent_script, cli):
    scored.write("solution.py", "RESULT = 'not scored yet'\n")
    scored.commit("no score yet")
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 5, 2: 3}), "--max-iters", "2")
    assert result.exit_code == 0, result.out + result.err
    assert scored.run_json()["baseline"] == 5
    assert "(baseline 5" in result.out


def test_a_metric_command_that_fails_on_the_original_tree_is_not_an_error(scored, agent_script, cli):
    """The gate passes on the original tree, but the metric crashes there: the run still goes on."""
    scored.write("solution.py", "SCORE = 'ten'\nimport sys\n")
    scored.write("measure.py", "import solution\nprint('SCORE', float(solution.SCORE))\n")
    scored.commit("the score is not a number yet")
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 7, 2: 8}), "--max-iters", "2", gate=CHEAP_GATE)
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    [baseline] = [s for s in run["steps"] if s["iteration"] == 0 and s["adapter"] == "metric"]
    assert baseline["score"] is None
    assert "the metric command failed" in baseline["error"]
    assert run["baseline"] == 7  # the first passing attempt's score
    assert [(a["score"], a["verdict"]) for a in ledger_of(scored)] == [(7, "kept"), (8, "reverted")]
    assert run["best"]["score"] == 7
    assert workspace_file(scored, "solution.py") == "SCORE = 7\n"


def test_no_improvement_on_the_baseline_exits_1(scored, agent_script, cli):
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 11, 2: 10}), "--max-iters", "2")
    assert result.exit_code == 1, result.out + result.err
    run = scored.run_json()
    assert run["best"] == {"score": 10, "iteration": 0, "commit": run["workspace"]["base"]}
    assert [a["verdict"] for a in ledger_of(scored)] == ["reverted", "reverted"]
    assert workspace_file(scored, "solution.py") == "SCORE = 10\n"
    assert run["changes"]["files"] == []


# -- stopping ----------------------------------------------------------------------------------------


def test_target_converges(scored, agent_script, cli):
    result = metric_run(
        cli, scored, scoring_agent(agent_script, {1: 5, 2: 3, 3: 1}), "--max-iters", "5", "--target", "3"
    )
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    assert (run["stop_reason"], run["converged"], run["iterations"]) == ("converged", True, 2)
    assert run["best"]["score"] == 3
    assert [a["verdict"] for a in ledger_of(scored)] == ["kept", "converged"]


def test_a_converged_attempt_is_logged_as_converged(scored, agent_script, cli):
    result = metric_run(cli, scored, scoring_agent(agent_script, {1: 5, 2: 3}), "--max-iters", "5", "--target", "3")
    assert result.exit_code == 0, result.out + result.err
    assert [line[1:] for line in score_log(scored)] == [["1", "5", "kept"], ["2", "3", "converged"]]


def test_a_baseline_that_already_reaches_the_target_converges_without_an_attempt(scored, agent_script, cli):
    result = metric_run(
        cli, scored, scoring_agent(agent_script, {1: 12}), "--max-iters", "3", "--target", "11", gate=CHEAP_GATE
    )
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    assert run["stop_reason"] == "converged"
    assert [s for s in run["steps"] if s["role"] == "implementer"] == []


def test_higher_is_better_with_a_target(scored, agent_script, cli):
    result = cli(
        "run", "raise the score", "--implementer", scoring_agent(agent_script, {1: 15, 2: 12, 3: 20}),
        "--no-review", "--verify-cmd", CHEAP_GATE, "--metric-cmd", METRIC, "--direction", "higher",
        "--editable", "solution.py", "--target", "20", "--max-iters", "5", "--plain", cwd=scored.path,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    assert (run["stop_reason"], run["iterations"], run["best"]["score"]) == ("converged", 3, 20)
    assert [a["verdict"] for a in ledger_of(scored)] == ["kept", "reverted", "converged"]
    assert workspace_file(scored, "solution.py") == "SCORE = 20\n"


def test_patience_stops_as_stalled(scored, agent_script, cli):
    result = metric_run(
        cli, scored, scoring_agent(agent_script, {1: 8, 2: 9, 3: 8, 4: 1}), "--max-iters", "5", "--patience", "2",
        gate=CHEAP_GATE,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err  # 8 improved on the baseline 10
    run = scored.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("stalled", 3)
    assert "2 attempt(s) without improvement" in run["stop_detail"]
    assert [a["verdict"] for a in ledger_of(scored)] == ["kept", "reverted", "reverted"]
    assert run["best"]["score"] == 8


def test_patience_without_any_improvement_exits_1(scored, agent_script, cli):
    result = metric_run(
        cli, scored, scoring_agent(agent_script, {1: 12, 2: 11, 3: 1}), "--max-iters", "5", "--patience", "2",
        gate=CHEAP_GATE,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    assert (scored.run_json()["stop_reason"], scored.run_json()["iterations"]) == ("stalled", 2)


def test_min_improvement_absolute(scored, agent_script, cli):
    result = metric_run(
        cli, scored, scoring_agent(agent_script, {1: 9.8, 2: 9.5, 3: 9.2}), "--max-iters", "3",
        "--min-improvement", "0.5", gate=CHEAP_GATE,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert [(a["score"], a["verdict"]) for a in ledger_of(scored)] == [
        (9.8, "reverted"),
        (9.5, "kept"),
        (9.2, "reverted"),
    ]
    assert scored.run_json()["best"]["score"] == 9.5
    assert workspace_file(scored, "solution.py") == "SCORE = 9.5\n"


def test_min_improvement_percentage(scored, agent_script, cli):
    result = metric_run(
        cli, scored, scoring_agent(agent_script, {1: 9.6, 2: 9.5, 3: 9.1}), "--max-iters", "3",
        "--min-improvement", "5%", gate=CHEAP_GATE,
    )  # fmt: skip
    assert result.exit_code == 0, result.out + result.err
    assert [(a["score"], a["verdict"]) for a in ledger_of(scored)] == [
        (9.6, "reverted"),  # 4% of 10
        (9.5, "kept"),  # 5% of 10
        (9.1, "reverted"),  # 4.2% of 9.5
    ]
    assert (run_dir(scored) / "best").read_text().strip() == "9.5"


def test_metric_repeat_takes_the_median(scored, agent_script, cli, tmp_path):
    counter = tmp_path / "metric-calls"
    noisy = tmp_path / "noisy_measure.py"
    noisy.write_text(
        "import pathlib\n"
        f"counter = pathlib.Path({str(counter)!r})\n"
        "n = int(counter.read_text()) if counter.exists() else 0\n"
        "counter.write_text(str(n + 1))\n"
        "print('score', [10, 30, 20, 5, 1, 9][n])\n"
    )
    events_out = cli(
        "run", "lower the score", "--implementer", scoring_agent(agent_script, {1: 1}), "--no-review",
        "--verify-cmd", CHEAP_GATE, "--metric-cmd", f"{PYTHON} {noisy}", "--direction", "lower",
        "--editable", "solution.py", "--metric-repeat", "3", "--max-iters", "1", "--json",
        "--sandbox-writable", str(tmp_path), cwd=scored.path,  # the metric counts its runs there
    )  # fmt: skip
    assert events_out.exit_code == 0, events_out.out + events_out.err
    assert counter.read_text() == "6"  # three runs for the baseline, three for the attempt
    run = scored.run_json()
    assert run["baseline"] == 20  # the median of 10, 30, 20
    assert run["best"]["score"] == 5  # the median of 5, 1, 9
    events = [json.loads(line) for line in events_out.out.splitlines()]
    metric_steps = [e for e in events if e["type"] == "step_finished" and e["adapter"] == "metric"]
    assert [e["runs"] for e in metric_steps] == [[10, 30, 20], [5, 1, 9]]
    [attempt_metric] = [s for s in run["steps"] if s["iteration"] == 1 and s["adapter"] == "metric"]
    logs = sorted(p.name for p in (run_dir(scored) / attempt_metric["dir"]).glob("metric-*.log"))
    assert logs == ["metric-1.log", "metric-2.log", "metric-3.log"]


# -- bad input ---------------------------------------------------------------------------------------


def test_a_metric_that_prints_no_number_is_reported_and_the_attempt_reverted(scored, agent_script, cli):
    implementer = agent_script(
        """
        n = os.environ["LOOPE_ITERATION"]
        text = "SCORE = 'unknown'\\n" if n == "1" else "SCORE = 4\\n"
        pathlib.Path("solution.py").write_text(text)
        print("attempt", n)
        """
    )
    scored.write("measure.py", "import solution\nprint('SCORE is', solution.SCORE)\n")
    scored.commit("a scorer that may print a word")
    result = metric_run(cli, scored, implementer, "--max-iters", "2", gate=CHEAP_GATE)
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    [metric1] = [s for s in run["steps"] if s["iteration"] == 1 and s["adapter"] == "metric"]
    assert metric1["score"] is None
    assert "printed no number" in metric1["error"]
    assert "SCORE is unknown" in metric1["error"]
    ledger = ledger_of(scored)
    assert [(a["score"], a["verdict"]) for a in ledger] == [(None, "reverted"), (4, "kept")]
    assert score_log(scored)[0][1:] == ["1", "", "reverted"]
    feedback = prompt_of(scored, 2).split("# Feedback from the last iteration", 1)[1]
    assert "printed no number" in feedback
    assert "reverted" in feedback
    assert run_git(run, "show", f"refs/loope/{run['run_id']}/attempt-1:solution.py") == "SCORE = 'unknown'\n"
    assert workspace_file(scored, "solution.py") == "SCORE = 4\n"


def test_a_failing_gate_is_never_scored_and_is_reverted(scored, agent_script, cli):
    implementer = agent_script(
        """
        n = os.environ["LOOPE_ITERATION"]
        text = "SCORE = 1\\nraise SystemExit('broken')\\n" if n == "1" else "SCORE = 6\\n"
        pathlib.Path("solution.py").write_text(text)
        """
    )
    result = metric_run(cli, scored, implementer, "--max-iters", "2")
    assert result.exit_code == 0, result.out + result.err
    run = scored.run_json()
    assert [s["adapter"] for s in run["steps"] if s["iteration"] == 1] == ["exec", "gate"]
    assert [(a["gate"]["passed"], a["score"], a["verdict"]) for a in ledger_of(scored)] == [
        (False, None, "reverted"),
        (True, 6, "kept"),
    ]
    assert run["best"]["score"] == 6


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--metric-cmd", METRIC, "--direction", "sideways"), "sideways"),
        (("--metric-cmd", METRIC), "--direction"),
        (("--metric-cmd", METRIC, "--direction", "lower", "--min-improvement", "lots"), "min-improvement"),
        (("--metric-cmd", METRIC, "--direction", "lower", "--metric-repeat", "0"), "metric-repeat"),
        (("--metric-cmd", METRIC, "--direction", "lower"), "metric mode needs --editable GLOB"),
    ],
)
def test_bad_metric_flags_are_one_line_and_exit_2(scored, agent_script, cli, args, fragment):
    from tests.conftest import no_loope_runs, one_error_line

    result = cli("run", "lower the score", "--implementer", agent_script("pass"), "--no-review", *args,
                 cwd=scored.path)  # fmt: skip
    assert result.exit_code == 2, result.out + result.err
    assert fragment in one_error_line(result.err)
    assert no_loope_runs(scored.path)


def test_a_bad_direction_in_loope_toml_names_the_file(scored, agent_script, cli):
    from tests.conftest import no_loope_runs, one_error_line

    scored.write("loope.toml", f'metric_cmd = {json.dumps(METRIC)}\ndirection = "sideways"\n')
    result = cli("run", "lower the score", "--implementer", agent_script("pass"), "--no-review", cwd=scored.path)
    assert result.exit_code == 2, result.out + result.err
    line = one_error_line(result.err)
    assert "loope.toml" in line
    assert "direction" in line
    assert "sideways" in line
    assert no_loope_runs(scored.path)
