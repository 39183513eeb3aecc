"""Running one step: a numbered directory, its records, its events, and what it changed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from loope.agents.base import Agent, AgentEvent, AgentRequest, AgentResult, mode_for
from loope.agents.verdict import Verdict, parse_verdict
from loope.engine.cutshort import Tally, why_cut
from loope.engine.retry import Attempts, limit_detail
from loope.engine.run import Halt, RunState
from loope.engine.step_fields import adapter_name, candidate_env, commit_message, finished_fields, repeat_indexes
from loope.enums import Role, StepKind, StopReason
from loope.events import (
    AgentActivity,
    AgentStepFinished,
    Failure,
    GuardViolations,
    MetricStepFinished,
    StepStarted,
    SuccessFinished,
    VerifyFinished,
)
from loope.records.atomic import append_line, write_bytes, write_text
from loope.records.model import FileChange, StepRecord, now_iso
from loope.records.sealed import SealedLog
from loope.records.space import unless_disk_full
from loope.verify.confine import BOUNDARY, BOUNDARY_NAME, pytest_addopts
from loope.verify.gate import GateResult, check_env, pid_recorder, read_output, run_gate, run_shell
from loope.verify.metric import Measurement, measure
from loope.verify.report import tail
from loope.workspace.guard import Guard

T = TypeVar("T")
OUTPUT_TAIL_LINES = 12  # of a failed gate's output, in its event: what the views show
SUMMARY_CHARS = 200  # of an agent's final message, in its step_finished event


@dataclass
class AgentStep:
    record: StepRecord
    result: AgentResult
    dir: Path
    changes: list[FileChange] = field(default_factory=list)
    verdict: Verdict | None = None


class StepRunner:
    """Runs agent and command steps for the engine and records each one as it ends."""

    def __init__(self, run: RunState, guard: Guard) -> None:
        self.run = run
        self.guard = guard
        self.attempts = Attempts(run, run.stop_requested)
        self._tracked: list[str] | None = None

    # -- agents -------------------------------------------------------------------------------

    def agent(self, agent: Agent, role: Role, iteration: int, prompt: str) -> AgentStep:
        """Run one agent step; a writing step's changes are guarded and committed."""
        self.guard.before_step(confined=self.confined(agent))
        return self.settle(self.invoke(agent, role, iteration, prompt), agent)

    def settle(self, step: AgentStep, agent: Agent, *, blamed: list[str] | None = None) -> AgentStep:
        """Guard what an agent step left; a writing step's changes are committed; record the step.

        ``blamed``: violations found elsewhere (a race candidate's writes into another's tree).
        """
        role, workspace, record = Role(step.record.role), self.run.workspace, step.record
        writes, trailers = mode_for(role) == "write", f"Loope-Run: {self.run.record.run_id}\nLoope-Step: {record.id}"
        message = commit_message(step.result.message, f"iteration {record.iteration}: {role} {agent.label}", trailers)
        with workspace.early.expecting(message if writes else None):  # begun while the guard compares the changes
            violations, kept = self.guard.enforce()
        violations += [*(blamed or []), *step.result.undone]
        if writes:
            old = workspace.head
            step.changes = workspace.commit(message, staged=kept)
            if step.changes:
                write_bytes(step.dir / "changes.diff", workspace.compare(old, workspace.head).patch)
                step.record.commit = workspace.head
        else:
            violations += self.guard.undo_read_only_changes(agent.label)
        self._finish(step, violations)
        return step

    def reviews(self, agents: list[tuple[Agent, Role]], iteration: int, prompts: list[str]) -> list[AgentStep]:
        """Run read-only agents in parallel; each result carries its parsed verdict."""
        if not agents:
            return []
        self.guard.before_step(confined=all(self.confined(agent) for agent, _ in agents))
        with ThreadPoolExecutor(max_workers=len(agents), thread_name_prefix="loope-review") as pool:
            futures = [
                pool.submit(self.invoke, agent, role, iteration, prompt, share=len(agents), index=index)
                for (agent, role), prompt, index in zip(agents, prompts, repeat_indexes(agents), strict=True)
            ]
            try:
                steps = [f.result() for f in futures]
            except BaseException:
                self.run.cancel.set()  # Ctrl-C or a crash: stop the other reviewers' processes too
                for future in futures:  # the stopped reviewers' steps, with what they spent
                    if not future.cancelled() and future.exception() is None:
                        self._record_quietly(future.result().record)
                raise
        violations, _ = self.guard.enforce()
        violations += self.guard.undo_read_only_changes("a reviewer")
        for index, step in enumerate(steps):
            if step.result.ok:
                step.verdict = parse_verdict(step.result.message)
                step.record.verdict = step.verdict.value
                step.record.verdict_inferred = step.verdict.inferred
            self._finish(step, [*(violations if index == 0 else []), *step.result.undone])
        return steps

    def invoke(
        self, agent: Agent, role: Role, iteration: int, prompt: str, *, share: int = 1, index: int | None = None
    ) -> AgentStep:
        """Run one agent, not yet guarded nor recorded (:meth:`settle` does both for a writer).

        ``share``: how many run at once, splitting the remaining budget between them.

        ``index`` tells apart agents of one role that share an adapter (two ``exec`` reviewers).
        """
        run = self.run
        remaining = run.remaining_usd()
        number, step_dir = run.new_step(role, agent.label)
        self.guard.own(step_dir)
        write_text(step_dir / "prompt.md", prompt)
        events = step_dir / "events.jsonl"
        rel = str(step_dir.relative_to(run.rundir.root))
        run.bus.emit(
            StepStarted(
                step=number,
                iteration=iteration,
                role=role,
                adapter=agent.label,
                dir=rel,
                model=agent.model,
                index=index,
                candidate=run.candidate,
            )
        )

        tally = Tally()
        log = SealedLog(events)
        log.open()  # held before the agent runs: what it does to the directories above changes nothing here
        self.guard.step_logs.append(log)

        def on_event(event: AgentEvent) -> None:
            tally.add(event)
            log.append(event.to_dict())
            run.bus.emit(AgentActivity(step=number, role=role, event=event))

        request = AgentRequest(
            role=role,
            prompt=prompt,
            workspace=run.workspace.path,
            step_dir=step_dir,
            run_id=run.record.run_id,
            run_dir=run.rundir.root,
            iteration=iteration,
            state_file=run.state_file,
            timeout_s=run.step_timeout(),
            max_budget_usd=None if remaining is None else remaining / share,
            isolate_home=run.spec.isolate_home,
            sandbox=run.sandbox,
            env=candidate_env(run.candidate, run.candidates),
            cancel=run.cancel,
            on_event=on_event,
            on_spawn=pid_recorder(step_dir),
            may_write=self.guard.refusal,
        )
        started = time.monotonic()
        record = StepRecord(
            id=number, iteration=iteration, role=role, adapter=adapter_name(agent), dir=rel, candidate=run.candidate
        )
        record.started_at = now_iso()
        result: AgentResult | None = None
        try:
            result = self.attempts.run_agent(agent, request, step=number, adapter=agent.label)
            self.halt_if_moved(f"step {number} ({role} {agent.label})")
            write_text(step_dir / "result.md", result.message if result.ok else f"{result.error}\n\n{result.message}")
        except BaseException as exc:
            # Ctrl-C, a full disk, a crash: what the agent reported spending still counts.
            spent = tally if result is None else Tally.of(result)
            record.duration_s = round(time.monotonic() - started, 3)
            self._record_quietly(spent.record(record, why_cut(exc)))
            raise
        record.ok, record.error, record.finished_at = result.ok, result.error, now_iso()
        record.duration_s = round(time.monotonic() - started, 3)
        record.cost_usd, record.cost_estimated, record.cost_known = (
            result.cost_usd,
            result.cost_estimated,
            result.cost_known,
        )
        record.input_tokens, record.output_tokens = result.input_tokens, result.output_tokens
        record.model = result.model or agent.model
        record.attempts = result.attempts
        return AgentStep(record, result, step_dir)

    def confined(self, agent: Agent) -> bool:
        """Whether ``agent``'s step runs in loope's sandbox (an adapter may start its processes outside it)."""
        return self.run.sandbox.enabled and bool(getattr(agent, "runs_in_sandbox", True))

    def halt_if_moved(self, who: str) -> None:
        """End the run when a step moved the run directory away (put back by now), before loope writes there."""
        moved = self.run.anchor.check(who) if self.run.anchor is not None else None
        if moved is not None:
            for log in self.guard.logs:
                log.verify()  # back in its place (or made again): the run's events go on there
            raise Halt(StopReason.STEP_FAILED, moved)

    def record_cut(self, step: AgentStep) -> None:
        """Record an agent step that ran but is not settled: its round was cut short."""
        self._record_quietly(step.record)

    def _record_quietly(self, record: StepRecord) -> None:
        """Record a step cut short; a disk too full to save it now leaves it for the run's last save."""
        with unless_disk_full():
            self.run.add_step(record)
        self.run.bus.emit(AgentStepFinished(**finished_fields(record), verdict=None, verdict_inferred=False))

    def _finish(self, step: AgentStep, violations: list[str]) -> None:
        record = step.record
        if violations:
            self.run.bus.emit(GuardViolations(step=record.id, iteration=record.iteration, violations=violations))
        record.changed_files = [c.path for c in step.changes]
        record.files = list(step.changes)
        record.violations = violations
        self.run.add_step(record)
        summary = next((line.strip() for line in step.result.message.splitlines() if line.strip()), "")
        self.run.bus.emit(
            AgentStepFinished(
                **finished_fields(record, step.changes),
                verdict=record.verdict,
                verdict_inferred=record.verdict_inferred,
                summary=summary[:SUMMARY_CHARS],
            )
        )

    def checked(self, step: AgentStep) -> AgentStep:
        """``step``, unless it failed or crossed a budget (after it was recorded): then the loop halts, and why."""
        result, record = step.result, step.record
        who = f"{record.role} {record.adapter}"
        spent = self.run.budget_left()
        if not result.ok and (spent or result.budget_exhausted) and not result.cancelled:
            detail = f"{who}: {result.error}"
            raise Halt(StopReason.BUDGET_EXCEEDED, f"{spent}; {detail}" if spent else detail)
        if not result.ok:
            if result.timed_out:
                raise Halt(StopReason.TIMED_OUT, f"{who} {result.error}")
            if result.cancelled:
                why = (result.setback and result.error) or "stop requested; the step in flight was killed"
                raise Halt(StopReason.STOPPED, why)
            if result.setback and result.setback.kind == "limit":
                raise Halt(StopReason.USAGE_LIMITED, limit_detail(who, result))
            raise Halt(StopReason.STEP_FAILED, f"{who}: {result.error}")
        if spent:
            raise Halt(StopReason.BUDGET_EXCEEDED, spent)
        return step

    def skipped(self, step: AgentStep) -> bool:
        """Whether an advisory step (the critic) failed on its own, not for a stop or a spent budget: noted, skipped."""
        result = step.result
        if result.ok or result.cancelled or result.budget_exhausted or self.run.budget_left():
            return False
        append_line(self.run.rundir / "observer-errors.log", f"{now_iso()} {step.record.role} skipped: {result.error}")
        return True

    # -- commands -----------------------------------------------------------------------------

    def _command_step(
        self, iteration: int, kind: str, command: str, execute: Callable[[Path], T]
    ) -> tuple[StepRecord, T]:
        """Run a check as a step of its own; any change it leaves in the tree is undone.

        The returned record is not yet saved: the caller fills in the verdict, saves it and emits its event.
        """
        number, step_dir = self.run.new_step(Role.VERIFIER, kind)
        self.guard.own(step_dir)
        rel = str(step_dir.relative_to(self.run.rundir.root))
        candidate = self.run.candidate
        self.run.bus.emit(
            StepStarted(
                step=number, iteration=iteration, role=Role.VERIFIER, adapter=kind, dir=rel, candidate=candidate
            )
        )
        write_text(step_dir / "command.txt", command + "\n")
        self.guard.before_step(confined=self.run.sandbox.enabled)
        outcome = execute(step_dir)
        self.halt_if_moved(f"step {number} ({kind} command)")
        self.guard.undo_all()  # a check must not leave changes that would count as the agent's
        record = StepRecord(
            id=number, iteration=iteration, role=Role.VERIFIER, adapter=kind, dir=rel, candidate=candidate
        )
        return record, outcome

    def gate_env(self) -> dict[str, str]:
        """The gate's environment: the user's, with pytest's config search kept inside the workspace."""
        if self._tracked is None:
            self._tracked = self.run.workspace.tracked_files()
        boundary = self.run.rundir / BOUNDARY_NAME
        ws = self.run.workspace
        addopts = pytest_addopts(ws.path, ws.git.work_tree, self._tracked, boundary)
        if addopts is None:
            return check_env()
        if self.guard.sealed.get(boundary) != BOUNDARY:
            self.guard.write_sealed(boundary, BOUNDARY)
        user = os.environ.get("PYTEST_ADDOPTS", "")
        return check_env({"PYTEST_ADDOPTS": f"{addopts} {user}".strip()})

    def gate(self, iteration: int, command: str) -> tuple[StepRecord, GateResult]:
        """Run the verify command as a step of its own."""
        env = self.gate_env()
        record, result = self._command_step(
            iteration,
            StepKind.GATE,
            command,
            lambda step_dir: run_gate(
                command,
                cwd=self.run.workspace.path,
                log=step_dir / "output.log",
                timeout=self.run.step_timeout(),
                cancel=self.run.cancel,
                env=env,
                sandbox=self.run.sandbox,
            ),
        )
        record.ok, record.error = result.proc.start_error is None, result.proc.start_error
        record.gate_passed, record.duration_s = result.passed, round(result.proc.duration_s, 3)
        record.failing = 0 if result.passed else len(result.failures) or None
        self.run.add_step(record)
        self.run.bus.emit(
            VerifyFinished(
                step=record.id,
                iteration=iteration,
                command=command,
                passed=result.passed,
                exit_code=result.proc.exit_code,
                timed_out=result.proc.timed_out,
                failures=[Failure(t, m) for t, m in result.failures],
                duration_s=record.duration_s,
                failing=result.failing,
                summary=result.summary,
                output_tail=[] if result.passed else tail(result.output, lines=OUTPUT_TAIL_LINES).splitlines(),
                candidate=record.candidate,
            )
        )
        return record, result

    def shell(
        self, iteration: int, kind: str, command: str, env: dict[str, str], timeout: float
    ) -> tuple[StepRecord, GateResult]:
        """Run a command step (the success command) with exactly ``env``."""

        def execute(step_dir: Path) -> GateResult:
            log = step_dir / "output.log"
            proc = run_shell(
                command,
                cwd=self.run.workspace.path,
                log=log,
                timeout=timeout,
                cancel=self.run.cancel,
                env=env,
                sandbox=self.run.sandbox,
            )
            return GateResult(command, proc, read_output(log), ())

        record, result = self._command_step(iteration, kind, command, execute)
        record.ok, record.error = result.proc.start_error is None, result.proc.start_error
        record.gate_passed, record.duration_s = result.passed, round(result.proc.duration_s, 3)
        self.run.add_step(record)
        self.run.bus.emit(SuccessFinished(**finished_fields(record), passed=result.passed))
        return record, result

    def metric(self, iteration: int, command: str) -> Measurement:
        """Score the workspace with the metric command (the median of ``metric_repeat`` runs)."""
        record, result = self._command_step(
            iteration,
            StepKind.METRIC,
            command,
            lambda step_dir: measure(
                command,
                cwd=self.run.workspace.path,
                log_dir=step_dir,
                repeat=self.run.spec.metric_repeat,
                timeout=self.run.step_timeout(),
                cancel=self.run.cancel,
                sandbox=self.run.sandbox,
            ),
        )
        record.error, record.score, record.duration_s = result.error, result.score, round(result.duration_s, 3)
        self.run.add_step(record)
        self.run.bus.emit(MetricStepFinished(**finished_fields(record), score=result.score, runs=result.runs))
        return result
