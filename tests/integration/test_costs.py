"""What a run costs: reported, estimated, unknown, and numbers an agent should not be trusted with."""

from __future__ import annotations

import json

from tests.conftest import GATE

FIX = 'pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")\n'


def usage_line(**fields: object) -> str:
    # Written raw so that NaN and Infinity reach loope exactly as a sloppy agent would print them.
    body = ", ".join(f'"{k}": {v}' for k, v in {"type": '"usage"', **fields}.items())
    return f"print('{{{body}}}')\n"


def run(cli, project, implementer: str):
    return cli("run", "fix add", "--implementer", implementer, "--no-review", "--verify-cmd", GATE, cwd=project.path)


def test_tokens_without_a_price_make_the_cost_unknown_not_zero(project, agent_script, cli):
    implementer = agent_script(usage_line(input_tokens=1200, output_tokens=300) + FIX)

    result = run(cli, project, implementer)

    assert result.exit_code == 0, result.err
    record = project.run_json()
    assert record["steps"][0]["cost_known"] is False
    assert record["totals"]["cost_unknown_steps"] == 1
    assert record["totals"]["input_tokens"] == 1200
    report = (project.runs()[-1] / "report.md").read_text()
    assert "cost unknown for 1 step(s)" in report


def test_an_agent_that_reports_nothing_costs_nothing_known(project, agent_script, cli):
    result = run(cli, project, agent_script(FIX))

    assert result.exit_code == 0, result.err
    totals = project.run_json()["totals"]
    assert (totals["cost_usd"], totals["cost_unknown_steps"], totals["cost_estimated"]) == (0.0, 0, False)


def test_nonsense_numbers_in_usage_lines_count_as_nothing(project, agent_script, cli):
    implementer = agent_script(
        usage_line(input_tokens="1e999", output_tokens=-5, cost_usd="NaN")
        + usage_line(input_tokens=10, output_tokens=2, cost_usd="Infinity")
        + usage_line(input_tokens=7, output_tokens=1, cost_usd=-3)
        + usage_line(input_tokens=3, output_tokens=4, cost_usd=0.25)
        + FIX
    )

    result = run(cli, project, implementer)

    assert result.exit_code == 0, result.err
    raw = (project.runs()[-1] / "run.json").read_text()
    totals = json.loads(raw)["totals"]  # valid JSON: no NaN or Infinity made it in
    assert "NaN" not in raw
    assert "Infinity" not in raw
    assert totals["cost_usd"] == 0.25
    assert (totals["input_tokens"], totals["output_tokens"]) == (20, 7)


def test_max_cost_warns_about_an_agent_whose_cli_reports_no_cost(project, cli, tmp_path, monkeypatch):
    fake = tmp_path / "kiro-cli"
    fake.write_text("#!/bin/sh\necho '▸ Credits: 0.10'  >&2\necho done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LOOPE_KIRO_BIN", str(fake))

    result = cli(
        "run", "fix add", "--implementer", "kiro", "--no-review", "--max-iters", "1", "--max-cost", "1", "--json",
        cwd=project.path,
    )  # fmt: skip

    started = json.loads(result.out.splitlines()[0])
    assert started["type"] == "run_started"
    assert "--max-cost cannot see what kiro spend (their CLIs report no cost)" in started["warnings"]
