"""The closed sets: one enum each, and each member is exactly the string it always was on disk."""

from __future__ import annotations

import json

import pytest

from loope.enums import AttemptVerdict, Direction, ReviewVerdict, Role, StepKind, StopReason, WorkspaceMode


@pytest.mark.parametrize(
    ("enum", "strings"),
    [
        (
            StopReason,
            [
                "converged",
                "max_iters",
                "budget_exceeded",
                "usage_limited",
                "stalled",
                "step_failed",
                "timed_out",
                "stopped",
                "failed",
            ],
        ),
        (Direction, ["lower", "higher"]),
        (Role, ["designer", "implementer", "reviewer", "verifier", "critic"]),
        (ReviewVerdict, ["PASS", "BLOCK"]),
        (AttemptVerdict, ["kept", "reverted", "converged"]),
        (StepKind, ["gate", "metric", "success"]),
        (WorkspaceMode, ["worktree", "copy", "in-place", "overlay", "auto"]),
    ],
)
def test_each_closed_set_serializes_as_its_strings(enum, strings):
    assert [m.value for m in enum] == strings
    for member, text in zip(enum, strings, strict=True):
        assert json.dumps(member) == json.dumps(text)
        assert f"{member}" == text
        assert member == text
        assert enum(text) is member


def test_a_spec_saves_its_direction_and_workspace_as_strings(tmp_path):
    from loope.spec import LoopSpec

    spec = LoopSpec(
        goal="g", workdir=tmp_path, metric_cmd="echo 1", direction="lower", editable=["a.py"], workspace="in-place"
    )
    saved = json.loads(spec.model_dump_json())
    assert (saved["direction"], saved["workspace"]) == ("lower", "in-place")
    assert LoopSpec.model_validate_json(spec.model_dump_json()).direction is Direction.LOWER
