"""LoopSpec layering (defaults < loope.toml < flags), presets, durations and validation (spec.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loope.errors import LoopeError
from loope.spec import PRESETS, build_spec
from loope.text import parse_duration


def write(root: Path, name: str, text: str) -> None:
    (root / name).write_text(textwrap.dedent(text))


def test_defaults(tmp_path: Path) -> None:
    spec = build_spec({"goal": "  fix it  "}, tmp_path)
    assert spec.goal == "fix it"
    assert spec.workdir == tmp_path.resolve()
    assert spec.max_iters == 3
    assert spec.stall_after == 2
    assert spec.timeout == 1800
    assert spec.implementer == "claude"
    assert spec.reviewers == ["codex"]
    assert spec.workspace is None  # chosen later: worktree in git, copy otherwise
    assert not spec.dry_run
    assert not spec.design


def test_doctor_of_a_project_without_settings_checks_what_a_spec_would_default_to(tmp_path: Path) -> None:
    from loope.cli.adapters import _configured  # builds no spec: it must not drift from the spec's defaults

    names, options, sandbox, workspace = _configured(tmp_path)
    spec = build_spec({"goal": "doctor"}, tmp_path)
    roles = [spec.implementer, *spec.reviewers, spec.designer, spec.verifier, spec.critic]
    assert [n for n in names if n] == [n for n in roles if n]
    assert (dict(options), sandbox, workspace) == (
        {name: spec.agent_options(name) for name in spec.agents},
        spec.sandbox,
        spec.workspace,
    )


def test_loope_toml_overrides_defaults_and_flags_override_loope_toml(tmp_path: Path) -> None:
    write(
        tmp_path,
        "loope.toml",
        """
        goal = "from the file"
        max-iters = 5
        stall_after = 4
        timeout = "30m"
        implementer = "codex"
        reviewers = ["claude"]
        verify_cmd = "make test"
        """,
    )
    from_file = build_spec({}, tmp_path)
    assert (from_file.goal, from_file.max_iters, from_file.stall_after) == ("from the file", 5, 4)
    assert (from_file.timeout, from_file.implementer, from_file.reviewers) == (1800.0, "codex", ["claude"])
    assert from_file.verify_cmd == "make test"

    flags = {"goal": "from a flag", "max_iters": 2, "timeout": "90s", "verify_cmd": None, "reviewers": None}
    layered = build_spec(flags, tmp_path)
    assert (layered.goal, layered.max_iters, layered.timeout) == ("from a flag", 2, 90.0)
    # A flag left unset (None) does not hide the file's setting.
    assert layered.verify_cmd == "make test"
    assert layered.reviewers == ["claude"]
    assert layered.stall_after == 4


def test_pyproject_tool_loope_is_read_when_there_is_no_loope_toml(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n\n[tool.loope]\nmax_iters = 7\ngate = "pytest -q"\n')
    spec = build_spec({"goal": "g"}, tmp_path)
    assert (spec.max_iters, spec.verify_cmd) == (7, "pytest -q")


def test_loope_toml_wins_over_pyproject(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.loope]\nmax_iters = 7\n")
    write(tmp_path, "loope.toml", "max_iters = 4\n")
    assert build_spec({"goal": "g"}, tmp_path).max_iters == 4


def test_aliases_from_the_init_toolkit(tmp_path: Path) -> None:
    toml = 'max_attempts = 6\nmetric = "./score.sh"\ndirection = "lower"\neditable = ["src/**"]\n'
    write(tmp_path, "loope.toml", toml)
    spec = build_spec({"goal": "g"}, tmp_path)
    assert (spec.max_iters, spec.metric_cmd, spec.metric_mode) == (6, "./score.sh", True)


def test_use_config_false_ignores_the_file(tmp_path: Path) -> None:
    write(tmp_path, "loope.toml", "max_iters = 9\n")
    assert build_spec({"goal": "g"}, tmp_path, use_config=False).max_iters == 3


def test_reviewers_given_as_a_comma_list_and_no_review(tmp_path: Path) -> None:
    assert build_spec({"goal": "g", "reviewers": "claude, codex"}, tmp_path).reviewers == ["claude", "codex"]
    assert build_spec({"goal": "g", "no_review": True}, tmp_path).reviewers == []


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_set_the_agents(tmp_path: Path, name: str) -> None:
    spec = build_spec({"goal": "g", "preset": name}, tmp_path)
    assert spec.implementer == PRESETS[name]["implementer"]
    assert spec.reviewers == PRESETS[name]["reviewers"]


def test_flags_override_a_preset(tmp_path: Path) -> None:
    spec = build_spec({"goal": "g", "preset": "claude-codex", "implementer": "gemini"}, tmp_path)
    assert (spec.implementer, spec.reviewers) == ("gemini", ["codex"])


def test_an_unknown_preset_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(LoopeError) as caught:
        build_spec({"goal": "g", "preset": "nope"}, tmp_path)
    assert "unknown preset 'nope'" in str(caught.value)
    assert all(name in str(caught.value) for name in PRESETS)


def test_dry_run_swaps_every_agent_for_the_stub(tmp_path: Path) -> None:
    spec = build_spec(
        {"goal": "g", "dry_run": True, "design": True, "designer": "claude", "verifier": "codex"}, tmp_path
    )
    assert (spec.implementer, spec.reviewers, spec.designer, spec.verifier) == ("stub", ["stub"], "stub", "stub")
    solo = build_spec({"goal": "g", "dry_run": True, "no_review": True}, tmp_path)
    assert solo.reviewers == []


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        (90, 90.0),
        (2.5, 2.5),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
    ],
)
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("10min", 600.0), ("10 minutes", 600.0), ("5sec", 5.0), ("2hours", 7200.0), ("2hr", 7200.0)],
)
def test_durations_with_the_longer_unit_spellings(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5 parsecs", "", "soon", "10x", "h", "-5s", "0", "0s", "1h-30m"])
def test_bad_durations_are_rejected_with_an_example(text: str) -> None:
    with pytest.raises(LoopeError) as caught:
        parse_duration(text, what="--max-time")
    assert str(caught.value).startswith("--max-time: ")


def test_a_bad_duration_flag_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(LoopeError, match=r"--max-time: '5 parsecs' is not a duration; use for example 90s"):
        build_spec({"goal": "g", "max_time": "5 parsecs"}, tmp_path)
    spec = build_spec({"goal": "g", "max_time": "1h30m", "timeout": "2"}, tmp_path)
    assert (spec.max_time, spec.timeout) == (5400.0, 2.0)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"max_iters": 0}, "--max-iters"),
        ({"max_iters": -1}, "--max-iters"),
        ({"stall_after": 0}, "--stall-after"),
        ({"metric_repeat": 0}, "--metric-repeat"),
        ({"max_cost": 0}, "--max-cost"),
        ({"min_improvement": "lots"}, "--min-improvement"),
        ({"metric_cmd": "./score.sh"}, "--direction"),
        ({"workspace": "elsewhere"}, "--workspace"),
    ],
)
def test_invalid_values_are_one_line_naming_the_flag(tmp_path: Path, flags: dict[str, object], expected: str) -> None:
    with pytest.raises(LoopeError) as caught:
        build_spec({"goal": "g", **flags}, tmp_path)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize("goal", ["", "   ", "\n\t"])
def test_an_empty_goal_is_rejected(tmp_path: Path, goal: str) -> None:
    with pytest.raises(LoopeError, match="goal"):
        build_spec({"goal": goal}, tmp_path)


def test_no_goal_anywhere_says_how_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(LoopeError, match="no goal"):
        build_spec({}, tmp_path)


def test_a_missing_workdir_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(LoopeError, match="does not exist"):
        build_spec({"goal": "g"}, tmp_path / "nowhere")


def test_errors_from_loope_toml_name_the_file(tmp_path: Path) -> None:
    write(tmp_path, "loope.toml", "max_iters = 0\n")
    with pytest.raises(LoopeError) as caught:
        build_spec({"goal": "g"}, tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'loope.toml'}: max_iters")
    # ... and a flag that fixes it wins.
    assert build_spec({"goal": "g", "max_iters": 2}, tmp_path).max_iters == 2


def test_an_unknown_setting_in_loope_toml_is_named(tmp_path: Path) -> None:
    write(tmp_path, "loope.toml", "max_iterz = 3\n")
    with pytest.raises(LoopeError, match=r"loope.toml: unknown setting 'max_iterz'"):
        build_spec({"goal": "g"}, tmp_path)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "loope.toml", "max_iters = = 3\n")
    with pytest.raises(LoopeError, match=r"loope.toml: not valid TOML"):
        build_spec({"goal": "g"}, tmp_path)


def test_a_bad_duration_in_loope_toml_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "loope.toml", 'timeout = "5 parsecs"\n')
    with pytest.raises(LoopeError, match=r"loope.toml: .*'5 parsecs' is not a duration"):
        build_spec({"goal": "g"}, tmp_path)


def test_the_spec_is_frozen_and_round_trips_through_json(tmp_path: Path) -> None:
    spec = build_spec({"goal": "g", "verify_cmd": "pytest", "max_iters": 2}, tmp_path)
    with pytest.raises(Exception):  # noqa: B017, PT011 - pydantic's frozen-instance error
        spec.max_iters = 5  # type: ignore[misc]
    again = type(spec).model_validate_json(spec.model_dump_json())
    assert again == spec
