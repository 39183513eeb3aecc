"""Settings that would be silently ignored, or that cannot work, are refused: one line, exit 2, no run.

The checks live in the spec, so flags, loope.toml and library callers (the MCP tool among them)
get the same answer; the error names the setting as it was spelled where it came from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loope.errors import LoopeError
from loope.spec import build_spec
from tests.conftest import FIX, no_loope_runs, one_error_line

METRIC_ONLY = [
    (["--direction", "lower"], "--direction only applies to a metric search; add --metric-cmd"),
    (["--target", "0.5"], "--target only applies to a metric search"),
    (["--patience", "2"], "--patience only applies to a metric search"),
    (["--metric-repeat", "3"], "--metric-repeat only applies to a metric search"),
    (["--min-improvement", "2%"], "--min-improvement only applies to a metric search"),
    (["--direction", "higher", "--patience", "2"], "--direction, --patience only applies"),
]
CANNOT_WORK = [
    (["--verify-cmd", ""], "--verify-cmd: the command is empty; give --verify-cmd a command"),
    (["--verify-cmd", "   "], "--verify-cmd: the command is empty"),
    (["--success-cmd", ""], "--success-cmd: the command is empty"),
    (["--checkpoint-every", "2"], "--checkpoint-every needs a critic to run; add --critic"),
    (["--editable", "src\\"], "--editable: 'src\\\\' is not a valid glob"),
    (["--protect", "!"], "--protect: '!' is not a valid glob"),
    (["--editable", ""], "--editable: an empty glob matches nothing"),
    (["--metric-cmd", "echo 1", "--direction", "lower", "--target", "nan"], "--target: must be a finite number"),
    (["--metric-cmd", "echo 1", "--direction", "lower", "--target", "inf"], "--target: must be a finite number"),
    (["--metric-cmd", "echo 1", "--direction", "lower", "--target", "-inf"], "--target: must be a finite number"),
    (["--max-cost", "nan"], "--max-cost"),
    (["--sandbox-writable", "cache"], "--sandbox-writable: 'cache' is not an absolute path"),
    (["--sandbox-writable", "/no/such/loope-dir"], "--sandbox-writable: /no/such/loope-dir is not a directory"),
]


@pytest.mark.parametrize(("args", "expected"), METRIC_ONLY + CANNOT_WORK)
def test_a_flag_that_cannot_take_effect_is_refused(project, agent_script, cli, args, expected):
    result = cli("run", "fix add", "--implementer", agent_script(FIX), "--no-review", *args, cwd=project.path)
    assert result.exit_code == 2, result.out + result.err
    assert expected in one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_a_writable_directory_inside_the_project_is_refused(project, agent_script, cli):
    (project.path / "cache").mkdir()
    args = ("--sandbox-writable", str(project.path / "cache"))
    result = cli("run", "fix add", "--implementer", agent_script(FIX), "--no-review", *args, cwd=project.path)
    assert result.exit_code == 2, result.out + result.err
    assert "is inside the project, which the sandbox keeps read-only" in one_error_line(result.err)
    assert no_loope_runs(project.path)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('direction = "lower"\n', "loope.toml: direction only applies to a metric search; add metric_cmd"),
        ("patience = 3\ntarget = 1.0\n", "loope.toml: target, patience only applies to a metric search"),
        ('verify_cmd = ""\n', "loope.toml: verify_cmd: the command is empty; give verify_cmd a command"),
        ("checkpoint_every = 2\n", "loope.toml: checkpoint_every needs a critic to run; add critic"),
        ('editable = ["a\\\\"]\n', "loope.toml: editable: 'a\\\\' is not a valid glob"),
        ('metric_cmd = "echo 1"\ndirection = "lower"\ntarget = nan\n', "loope.toml: target: must be a finite"),
        ('metric_cmd = "echo 1"\ndirection = "lower"\ntarget = inf\n', "loope.toml: target: must be a finite"),
    ],
)
def test_the_same_settings_in_loope_toml_are_named_as_the_file_spells_them(project, agent_script, cli, toml, expected):
    project.write("loope.toml", toml)
    result = cli("run", "fix add", "--implementer", agent_script(FIX), "--no-review", cwd=project.path)
    assert result.exit_code == 2, result.out + result.err
    assert expected in one_error_line(result.err)
    assert no_loope_runs(project.path)


@pytest.mark.parametrize(
    "settings",
    [
        {"direction": "lower"},
        {"verify_cmd": ""},
        {"checkpoint_every": 3},
        {"protect": ["docs\\"]},
        {"metric_cmd": "echo 1", "direction": "lower", "target": float("nan")},
    ],
)
def test_library_callers_get_the_same_checks(tmp_path: Path, settings):
    with pytest.raises(LoopeError) as refused:
        build_spec({"goal": "g", **settings}, tmp_path)
    assert "\n" not in str(refused.value)
    assert "--" in str(refused.value)


def test_settings_that_do_apply_are_accepted(tmp_path: Path):
    spec = build_spec(
        {
            "goal": "g",
            "metric_cmd": "echo 1",
            "direction": "lower",
            "target": 0.5,
            "patience": 2,
            "metric_repeat": 3,
            "min_improvement": "1%",
            "critic": "stub",
            "checkpoint_every": 2,
            "editable": ["src/**", "!src/vendor/**"],
        },
        tmp_path,
    )
    # spec.json is read back by `loope resume`: every field is set there, and it must still load.
    assert type(spec).model_validate_json(spec.model_dump_json()) == spec


# -- bounded messages -------------------------------------------------------------------------


def test_a_huge_goal_is_not_echoed_back(project, agent_script, cli, tmp_path):
    goal = tmp_path / "goal.md"
    goal.write_text("fix add " + "x" * 1_000_000)
    result = cli("run", "--goal-file", str(goal), "--implementer", agent_script(FIX), "--no-review", cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "more than 100000" in line
    assert len(line) < 2_500
    assert no_loope_runs(project.path)


def test_a_huge_value_in_any_error_is_cut(project, cli):
    result = cli("run", "g", "--implementer", "y" * 1_000_000, cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "unknown agent" in line
    assert line.endswith(" characters)")
    assert len(line) < 2_500


def test_a_huge_click_usage_error_is_cut(project, cli):
    result = cli("run", "g", "--direction", "z" * 1_000_000, cwd=project.path)
    assert result.exit_code == 2
    line = one_error_line(result.err)
    assert "--direction" in line
    assert len(line) < 2_500
