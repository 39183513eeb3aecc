"""Budgets: USD, tokens, wall time and iterations; a critic's spend counts; bad budgets are refused up front."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import GATE, no_loope_runs, one_error_line


def usage(input_tokens: int = 0, output_tokens: int = 0, cost_usd: float | None = None) -> str:
    """An agent body line printing one protocol usage line."""
    data: dict[str, object] = {"type": "usage", "input_tokens": input_tokens, "output_tokens": output_tokens}
    if cost_usd is not None:
        data["cost_usd"] = cost_usd
    return f"print(json.dumps({data!r}), flush=True)\n"


# A different wrong answer every iteration: progress each time (no stall), the gate never passes.
WRONG = "pathlib.Path('calc.py').write_text('def add(a, b):\\n    return ' + os.environ['LOOPE_ITERATION'] + '\\n')\n"


def run_loop(cli, project, implementer: str, *extra: str):  # type: ignore[no-untyped-def]
    return cli(
        "run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, *extra, cwd=project.path
    )


def test_max_cost_stops_after_the_step_that_crossed_it(project, agent_script, cli):
    result = run_loop(
        cli, project, agent_script(usage(1000, 200, 0.1) + WRONG), "--max-iters", "10", "--max-cost", "0.25"
    )
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["converged"], run["iterations"]) == (
        "budget_exceeded",
        "budget_exceeded",
        False,
        3,
    )
    assert run["stop_detail"] == "spent $0.3000 of --max-cost $0.25"
    # The crossing step is recorded (its cost counted), and nothing runs after it.
    assert [(s["iteration"], s["role"]) for s in run["steps"]] == [
        (1, "implementer"),
        (1, "verifier"),
        (2, "implementer"),
        (2, "verifier"),
        (3, "implementer"),
    ]
    assert [s["cost_usd"] for s in run["steps"] if s["role"] == "implementer"] == [0.1, 0.1, 0.1]
    assert run["totals"]["cost_usd"] == pytest.approx(0.3)
    assert (run["totals"]["input_tokens"], run["totals"]["output_tokens"]) == (3000, 600)
    assert run["totals"]["cost_estimated"] is False
    status = json.loads(cli("status", run["run_id"], "--json", cwd=project.path).out)["loop"]
    assert (status["status"], status["cost_usd"], status["max_cost_usd"]) == (
        "budget_exceeded",
        pytest.approx(0.3),
        0.25,
    )


def test_the_budget_is_in_the_prompt(project, agent_script, cli):
    run_loop(
        cli,
        project,
        agent_script(usage(10, 10, 0.1) + WRONG),
        "--max-iters",
        "2",
        "--max-cost",
        "5",
        "--max-tokens",
        "1000",
    )
    rundir = project.runs()[-1]
    second = (rundir / "agents" / "03-implementer-exec" / "prompt.md").read_text()
    assert "iteration 2 of at most 2; $0.10 of $5.00 spent; 20 of 1000 tokens used." in second


def test_max_tokens_stops_after_the_step_that_crossed_it(project, agent_script, cli):
    result = run_loop(cli, project, agent_script(usage(600, 400) + WRONG), "--max-iters", "10", "--max-tokens", "2500")
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"]) == ("budget_exceeded", 3)
    assert run["stop_detail"] == "used 3000 tokens of --max-tokens 2500"
    assert run["steps"][-1]["role"] == "implementer"
    assert (run["totals"]["input_tokens"], run["totals"]["output_tokens"]) == (1800, 1200)
    assert run["totals"]["cost_usd"] == 0.0  # no cost reported: none invented


def test_max_time_stops_a_run_that_outlives_it(project, agent_script, cli):
    sleeper = agent_script("import time\ntime.sleep(60)\n" + WRONG)
    result = run_loop(cli, project, sleeper, "--max-iters", "10", "--max-time", "5s", "--no-baseline")
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    assert (run["status"], run["stop_reason"], run["iterations"]) == ("budget_exceeded", "budget_exceeded", 1)
    # The step was cut at the time --max-time left, not allowed its full --timeout. How much was left
    # depends on how long starting the run took on this machine: between the one-second floor and 5s.
    shape = r"ran \d+s of --max-time 5s; implementer exec: timed out after (\d+(?:\.\d)?)s"
    detail = re.fullmatch(shape, run["stop_detail"])
    assert detail, run["stop_detail"]
    assert 1.0 <= float(detail.group(1)) <= 5.0
    # The gate never ran.
    assert [(s["role"], s["ok"]) for s in run["steps"]] == [("implementer", False)]


def test_max_iters_caps_the_iterations(project, agent_script, cli):
    result = run_loop(cli, project, agent_script(usage(1, 1, 0.01) + WRONG), "--max-iters", "4", "--max-cost", "100")
    assert result.exit_code == 1
    run = project.run_json()
    assert (run["stop_reason"], run["iterations"], run["stop_detail"]) == ("max_iters", 4, "reached --max-iters 4")
    assert sorted({s["iteration"] for s in run["steps"]}) == [1, 2, 3, 4]
    assert run["totals"]["cost_usd"] == pytest.approx(0.04)


def test_a_critics_cost_counts_toward_max_cost(project, agent_script, cli):
    critic = agent_script(usage(5000, 500, 0.4) + "print('Try returning a + b.')\n")
    result = cli(
        "run", "fix add", "--implementer", agent_script(usage(100, 10, 0.05) + WRONG), "--no-review",
        "--verify-cmd", GATE, "--critic", critic, "--checkpoint-every", "1", "--max-iters", "10",
        "--max-cost", "0.5", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1, result.out + result.err
    run = project.run_json()
    # 0.05 (implementer) + 0.4 (critic) = 0.45 after iteration 1; iteration 2's implementer crosses 0.5.
    assert (run["stop_reason"], run["iterations"]) == ("budget_exceeded", 2)
    assert [(s["iteration"], s["role"], s["cost_usd"]) for s in run["steps"]] == [
        (1, "implementer", 0.05),
        (1, "verifier", 0.0),
        (1, "critic", 0.4),
        (2, "implementer", 0.05),
    ]
    assert run["totals"]["cost_usd"] == pytest.approx(0.5)
    assert run["totals"]["input_tokens"] == 5200


def test_a_critic_that_crosses_the_budget_stops_the_run_right_after_it(project, agent_script, cli):
    critic = agent_script(usage(0, 0, 2.0) + "print('Keep going.')\n")
    result = cli(
        "run", "fix add", "--implementer", agent_script(usage(0, 0, 0.01) + WRONG), "--no-review",
        "--verify-cmd", GATE, "--critic", critic, "--checkpoint-every", "1", "--max-iters", "10",
        "--max-cost", "1", cwd=project.path,
    )  # fmt: skip
    assert result.exit_code == 1
    run = project.run_json()
    assert run["stop_reason"] == "budget_exceeded"
    assert run["stop_detail"] == "spent $2.0100 of --max-cost $1"
    assert [s["role"] for s in run["steps"]] == ["implementer", "verifier", "critic"]


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--max-cost", "0", "--max-cost: Input should be greater than 0"),
        ("--max-cost", "-1.5", "--max-cost: Input should be greater than 0"),
        ("--max-tokens", "0", "--max-tokens: Input should be greater than 0"),
        ("--max-tokens", "-100", "--max-tokens: Input should be greater than 0"),
        ("--max-time", "0", "--max-time: must be more than zero"),
        ("--max-time", "0s", "--max-time: must be more than zero"),
        ("--max-time", "-5s", "--max-time: '-5s' is not a duration"),
        ("--max-time", "5 parsecs", "--max-time: '5 parsecs' is not a duration; use for example 90s, 30m, 2h"),
        ("--max-iters", "0", "--max-iters: Input should be greater than or equal to 1"),
        ("--max-iters", "-2", "--max-iters: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_budget_is_one_clear_line_exit_2_and_no_run(project, cli, flag, value, says):
    result = cli("run", "fix add", "--implementer", "exec:true", "--no-review", flag, value, cwd=project.path)
    assert result.exit_code == 2
    assert says in one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_a_bad_budget_in_loope_toml_names_the_file(project, cli):
    project.write("loope.toml", 'max_time = "5 parsecs"\n')
    result = cli("run", "fix add", "--implementer", "exec:true", "--no-review", cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "loope.toml" in line
    assert "'5 parsecs' is not a duration" in line
    assert no_loope_runs(project.path)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("2sec", 2), ("2 seconds", 2), ("1min", 60), ("1hr", 3600), ("2 hours", 7200), ("2500ms", 2.5)],
)
def test_max_time_accepts_the_unit_spellings_the_parser_lists(project, agent_script, cli, value, seconds):
    result = run_loop(cli, project, agent_script(WRONG), "--max-iters", "1", "--max-time", value)
    assert result.exit_code == 1, result.err
    spec = json.loads((project.runs()[-1] / "spec.json").read_text())
    assert spec["max_time"] == seconds
