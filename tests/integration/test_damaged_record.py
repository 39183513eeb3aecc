"""A damaged run.json (valid JSON of the wrong shape, keys missing, not an object, cut short) is named.

Every command that reads it gives one line naming the run and what is wrong; ``loope runs`` lists
the project's other runs and marks that one damaged, in its table and in ``--json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import FIX, GATE, one_error_line

Damage = Callable[[dict[str, Any], str], str]


def edit(change: Callable[[dict[str, Any]], object]) -> Damage:
    def damage(record: dict[str, Any], _: str) -> str:
        change(record)
        return json.dumps(record)

    return damage


DAMAGES: dict[str, tuple[Damage, str]] = {
    "cost-a-string": (edit(lambda r: r["totals"].update(cost_usd="a lot")), "totals.cost_usd is a string"),
    "steps-a-string": (edit(lambda r: r.update(steps="many")), "steps is a string, not list"),
    "step-id-missing": (edit(lambda r: r["steps"][0].pop("id")), "steps[0].id is missing"),
    "step-not-object": (edit(lambda r: r["steps"].insert(0, 7)), "steps[0] is an integer, not an object"),
    "iterations-a-string": (edit(lambda r: r.update(iterations="3")), "iterations is a string, not integer"),
    "workspace-path-null": (edit(lambda r: r["workspace"].update(path=None)), "workspace.path is a null"),
    "status-a-boolean": (edit(lambda r: r.update(status=True)), "status is a boolean, not string"),
    "files-an-object": (edit(lambda r: r["changes"].update(files={})), "changes.files is not a list"),
    "another-run-id": (edit(lambda r: r.update(run_id="0009-elsewhere")), "its run_id '0009-elsewhere' is not"),
    "a-list": (lambda r, text: json.dumps([r]), "a JSON list, not an object"),
    "a-number": (lambda r, text: "42", "a JSON integer, not an object"),
    "cut-short": (lambda r, text: text[: len(text) // 2], "not valid JSON"),
    "empty": (lambda r, text: "", "not valid JSON"),
}


@pytest.fixture
def two_runs(project, agent_script, cli):  # type: ignore[no-untyped-def]
    for goal in ("first goal", "second goal"):
        done = cli(
            "run", goal, "--implementer", agent_script(FIX), "--no-review", "--verify-cmd", GATE, cwd=project.path
        )
        assert done.exit_code == 0, done.out + done.err
    return project


@pytest.mark.parametrize("name", DAMAGES)
def test_every_reader_names_the_damaged_run_and_runs_lists_the_others(two_runs, cli, name):
    damage, reason = DAMAGES[name]
    good, bad = two_runs.runs()
    path = bad / "run.json"
    text = path.read_text()
    path.write_text(damage(json.loads(text), text))
    for args in (
        ("show", "2"),
        ("show", "2", "--json"),
        ("show", "2", "--diff"),
        ("status", "2"),
        ("status", "2", "--json"),
        ("apply", "2", "--dry-run"),
        ("apply", "2"),
        ("stop", "2"),
        ("resume", "2"),
    ):
        result = cli(*args, cwd=two_runs.path)
        assert result.exit_code == 2, (args, result.out, result.err)
        line = one_error_line(result.err)
        assert f"run {bad.name}: run.json is damaged (" in line, (args, line)
        assert reason in line, (args, line)
        assert "restore it, or move" in line
    assert two_runs.read("calc.py").endswith("return a - b\n")  # apply wrote nothing

    table = cli("runs", cwd=two_runs.path)
    assert table.exit_code == 0, table.err
    lines = table.out.splitlines()
    assert any(line.startswith(good.name) and "converged" in line for line in lines), table.out
    (marked,) = [line for line in lines if line.startswith(bad.name)]
    assert "damaged" in marked
    assert reason in marked
    listed = json.loads(cli("runs", "--json", cwd=two_runs.path).out)
    assert [(r["run_id"], r["status"]) for r in listed] == [(good.name, "converged"), (bad.name, "damaged")]
    assert reason in listed[1]["damaged"]
    # The good run is still fully readable.
    assert cli("show", "1", cwd=two_runs.path).exit_code == 0
    assert cli("status", "1", "--json", cwd=two_runs.path).exit_code == 0


def test_a_record_without_its_workspace_is_shown_but_not_acted_on(two_runs, cli):
    _, bad = two_runs.runs()
    record = json.loads((bad / "run.json").read_text())
    del record["workspace"]
    (bad / "run.json").write_text(json.dumps(record))
    for args in (("show", "2"), ("show", "2", "--diff"), ("status", "2"), ("runs",)):  # what can be shown still is
        assert cli(*args, cwd=two_runs.path).exit_code == 0, args
    for args in (("apply", "2"), ("resume", "2")):
        result = cli(*args, cwd=two_runs.path)
        assert result.exit_code == 2, args
        assert f"run {bad.name}: run.json is damaged (workspace is missing)" in one_error_line(result.err)


def test_a_run_dir_without_run_json_is_listed_as_damaged(two_runs, cli):
    _, bad = two_runs.runs()
    (bad / "run.json").unlink()
    listed = json.loads(cli("runs", "--json", cwd=two_runs.path).out)
    assert listed[1]["status"] == "damaged"
    assert "No such file" in listed[1]["damaged"]
    line = one_error_line(cli("show", "2", cwd=two_runs.path).err)
    assert f"run {bad.name}: run.json is damaged (No such file or directory)" in line


def test_a_record_with_extra_keys_and_nulls_where_allowed_still_reads(two_runs, cli):
    _, run = two_runs.runs()
    record = json.loads((run / "run.json").read_text())
    record.update(a_field_from_a_newer_loope={"x": 1}, best=None, finished_at=None, pid=None)
    (run / "run.json").write_text(json.dumps(record))
    assert cli("show", "2", cwd=two_runs.path).exit_code == 0
    assert json.loads(cli("runs", "--json", cwd=two_runs.path).out)[1]["status"] == "converged"


@pytest.mark.parametrize(("damage", "reason"), [("{cut", "not valid JSON"), ('{"goal": 3}', "goal: Input should be")])
def test_resume_with_a_damaged_spec_json_names_the_run(two_runs, cli, damage, reason):
    _, bad = two_runs.runs()
    (bad / "spec.json").write_text(damage)
    result = cli("resume", "2", cwd=two_runs.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert f"run {bad.name}: spec.json is damaged (" in line
    assert reason in line
