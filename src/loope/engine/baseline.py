"""The preflight: the gate runs once on the starting tree before any agent is called.

A gate whose program does not exist is a usage error (no agent is paid to fail it); a gate that
already passes, with nothing else to satisfy, is a run that converged with 0 iterations; and the
failures it starts with are recorded, so the report can say "33 failing at the start → 5 → 0".
"""

from __future__ import annotations

import dataclasses
import re

from loope.engine.run import BadInput, Halt, RunState
from loope.engine.steps import StepRunner
from loope.enums import StopReason
from loope.errors import LoopeError
from loope.events import Baseline
from loope.records.atomic import write_text
from loope.records.model import GateBaseline
from loope.shell import missing_program
from loope.spec import LoopSpec
from loope.verify.gate import run_gate

# What sh, bash and dash print for a program they cannot find or run.
_NOT_FOUND = re.compile(r"^(?:/bin/sh: )?(?:\d+: |line \d+: )?\S+: (?:command )?not found$|: Permission denied$", re.M)


def check_commands(spec: LoopSpec) -> None:
    """Refuse, before anything is written, a gate or metric command whose program does not exist."""
    for flag, command in (("--verify-cmd", spec.verify_cmd), ("--metric-cmd", spec.metric_cmd)):
        problem = missing_program(command, spec.workdir) if command else None
        if problem:
            raise LoopeError(f"{flag} {command!r}: {problem}")


def needs_baseline(run: RunState) -> bool:
    spec = run.spec
    done = run.record.gate_baseline is not None
    return bool(spec.verify_cmd) and spec.baseline and not spec.dry_run and not spec.metric_mode and not done


def gate_baseline(run: RunState, steps: StepRunner) -> None:
    """Run the gate on the starting tree; halt when it cannot run or when it leaves nothing to do.

    It is not one of the run's steps (those are the agents' and the iterations' checks): its
    output goes to ``baseline/`` in the run dir, its outcome to run.json's ``gate_baseline`` and
    to a ``baseline`` event.
    """
    spec = run.spec
    assert spec.verify_cmd is not None
    step_dir = run.rundir / "baseline"
    step_dir.mkdir(exist_ok=True)
    write_text(step_dir / "command.txt", spec.verify_cmd + "\n")
    gate = run_gate(
        spec.verify_cmd,
        cwd=run.workspace.path,
        log=step_dir / "output.log",
        timeout=run.step_timeout(),
        cancel=run.cancel,
        env=steps.gate_env(),  # the same environment as every gate of the run
    )
    steps.guard.undo_all()  # a check must not leave changes that would count as the agent's
    if gate.proc.cancelled:
        raise Halt(StopReason.STOPPED, "stop requested during the baseline check")
    report = gate.report()
    run.record.gate_baseline = base = GateBaseline(
        passed=report.passed,
        exit_code=report.exit_code,
        failing=len(report.failures),
        failures=[test for test, _ in report.failures[:20]],
        duration_s=round(gate.proc.duration_s, 3),
        dir=str(step_dir.relative_to(run.rundir.root)),
    )
    run.save()
    run.bus.emit(Baseline(command=spec.verify_cmd, **dataclasses.asdict(base)))
    if gate.proc.exit_code in (126, 127) or gate.proc.start_error or _NOT_FOUND.search(gate.output[-2000:]):
        last = gate.output.strip().splitlines()[-1] if gate.output.strip() else f"exit {gate.proc.exit_code}"
        raise BadInput(
            StopReason.FAILED, f"the verify command {spec.verify_cmd!r} cannot run ({last}); fix --verify-cmd"
        )
    if report.passed and _gate_is_all(spec):
        raise Halt(StopReason.CONVERGED, "the verify command already passes on the starting tree: nothing to do")


def _gate_is_all(spec: LoopSpec) -> bool:
    """Whether the gate is the only thing the run must satisfy (no reviewer, verifier or success command)."""
    return not (spec.reviewers or spec.verifier or spec.success_cmd or spec.design)
