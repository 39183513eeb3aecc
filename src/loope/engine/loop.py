"""The engine: the only place that decides. It runs a LoopSpec and reports through events."""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loope.agents import registry
from loope.agents.base import Agent, Role
from loope.engine import decide as decisions
from loope.engine.events import EventBus, EventsFile, Observer
from loope.engine.feedback import Findings, GateReport, compose, failure_signature
from loope.engine.prompts import PromptContext, changes_block
from loope.engine.state import Halt, RunnerLock, RunState
from loope.engine.steps import AgentStep, StepRunner
from loope.errors import LoopeError
from loope.records import ledger
from loope.records import state as state_file
from loope.records.atomic import append_line, write_text
from loope.records.model import RunRecord, Totals, WorkspaceInfo, now_iso
from loope.records.report import ReportWriter
from loope.records.rundir import RunDir
from loope.spec import LoopSpec, parse_min_improvement
from loope.verify.metric import Measurement
from loope.workspace.guard import Guard
from loope.workspace.workspace import LOOPE_DIR, Workspace


class Control(Protocol):
    """Asked before every step whether someone (``loope stop``, the MCP tool) wants the run to stop."""

    def stop_requested(self) -> bool: ...


class Memory(Protocol):
    def recall(self, goal: str, *, exclude: str | None = None) -> str: ...

    def remember(self, record: RunRecord, rundir: RunDir) -> None: ...


@dataclass
class Agents:
    implementer: Agent
    reviewers: list[Agent]
    designer: Agent | None
    verifier: Agent | None
    critic: Agent | None

    @classmethod
    def from_spec(cls, spec: LoopSpec) -> Agents:
        """Create every agent of the run, and check each can run before anything is written."""

        def make(text: str | None) -> Agent | None:
            if not text:
                return None
            parsed = registry.parse(text)
            agent = registry.create(parsed, spec.agent_options(parsed.name))
            problem = getattr(agent, "preflight", lambda _: None)(spec.workdir)
            if problem:
                raise LoopeError(problem)
            return agent

        implementer = make(spec.implementer)
        assert implementer is not None
        return cls(
            implementer=implementer,
            reviewers=[a for a in (make(r) for r in spec.reviewers) if a is not None],
            designer=make(spec.designer or spec.implementer) if spec.design else None,
            verifier=make(spec.verifier),
            critic=make(spec.critic),
        )


@dataclass
class LoopState:
    """What one iteration hands the next; saved in run.json so a resumed run picks it up."""

    feedback: str = ""
    feedback_key: list[str] = field(default_factory=list)
    """What the feedback says, without iteration numbers or timings: tells fresh feedback from a repeat."""
    previous_failures: list[str] | None = None
    streak: int = 0
    idle: int = 0
    best_commit: str | None = None
    critique: str = ""
    summaries: list[str] = field(default_factory=list)
    last_response: str = ""


class Engine:
    def __init__(
        self,
        spec: LoopSpec,
        *,
        observers: Iterable[Observer] = (),
        control: Control | None = None,
        memory: Memory | None = None,
    ) -> None:
        self.spec = spec
        self.bus = EventBus(list(observers))
        self.control = control
        self.memory = memory
        self.agents = Agents.from_spec(spec)
        self.interrupted = False
        self.loop = LoopState()
        self.contract: str | None = None
        self.memories = ""
        self._run: RunState | None = None
        self._guard: Guard | None = None

    @property
    def run_state(self) -> RunState:
        assert self._run is not None, "the run has not been prepared"
        return self._run

    # -- the whole run --------------------------------------------------------------------------

    def run(self) -> RunRecord:
        """Prepare a new run and drive it to a stop; the final record."""
        self.prepare()
        return self.drive(first=1)

    def prepare(self) -> RunState:
        spec = self.spec
        rundir = RunDir.allocate(spec.workdir, spec.goal)
        self._lock(rundir)
        try:
            write_text(rundir / "spec.json", spec.model_dump_json(indent=2) + "\n")
            workspace = Workspace.create(spec.workdir, rundir.root, rundir.run_id, spec.workspace, spec.branch)
        except BaseException:
            self.lock.release()
            _discard(rundir)
            raise
        record = RunRecord(
            run_id=rundir.run_id,
            goal=spec.goal,
            workdir=str(spec.workdir),
            workspace=WorkspaceInfo(
                workspace.mode,
                str(workspace.path),
                workspace.branch,
                workspace.base,
                workspace.head,
                str(workspace.git_dir) if workspace.git_dir else None,
            ),
            max_iters=spec.max_iters,
            implementer=spec.implementer,
            reviewers=list(spec.reviewers),
            verify_cmd=spec.verify_cmd,
            metric={"command": spec.metric_cmd, "direction": spec.direction, "target": spec.target}
            if spec.metric_cmd
            else None,
            completed_head=workspace.base,
        )
        self._attach(rundir, workspace, record)
        state_file.create(self.run_state.state_file, rundir.run_id, spec.goal)
        self.run_state.save()
        self._emit_started()
        return self.run_state

    @classmethod
    def resume(
        cls,
        rundir: RunDir,
        *,
        observers: Iterable[Observer] = (),
        control: Control | None = None,
        memory: Memory | None = None,
        services: Any = None,
    ) -> Engine:
        """Pick up a prepared or interrupted run after its last completed iteration.

        The cut-short iteration's changes are discarded and its steps set aside under
        ``agents/discarded/``; counters and budgets carry over from the completed ones.
        """
        spec = LoopSpec.model_validate_json((rundir / "spec.json").read_text(encoding="utf-8"))
        record = RunRecord.from_dict(rundir.read_json("run.json"))
        engine = cls(spec, observers=observers, control=control, memory=memory)
        if record.status != "running":
            raise LoopeError(
                f"run {record.run_id} already finished ({record.status}); start a new one with `loope run`"
            )
        engine._lock(rundir)
        if services is not None:
            services(engine, spec)
        done = record.completed
        workspace = reopen_workspace(record.workspace)
        workspace.reset(record.completed_head or workspace.base)
        kept = [s for s in record.steps if s.iteration <= done]
        _set_aside(rundir, max((s.id for s in kept), default=0))
        _truncate_ledger(rundir, done)
        record.steps = kept
        record.totals = Totals()
        for step in kept:
            record.totals.add(step)
        record.iterations = done
        record.status, record.stop_reason, record.stop_detail, record.finished_at = "running", None, None, None
        record.converged = False
        record.elapsed_before_s = record.duration_s
        engine.loop = LoopState(**record.loop) if record.loop else LoopState()
        engine._attach(rundir, workspace, record)
        engine.run_state.next_step = max((s.id for s in kept), default=0) + 1
        engine.run_state.save()
        engine._emit_started()
        return engine

    def _lock(self, rundir: RunDir) -> None:
        self.lock = RunnerLock(rundir / "runner.lock")
        if not self.lock.acquire():
            raise LoopeError(
                f"run {rundir.run_id} is being run by another process (pid {self.lock.holder()});"
                f" stop it first with `loope stop {rundir.run_id}`"
            )

    def _attach(self, rundir: RunDir, workspace: Workspace, record: RunRecord) -> None:
        spec = self.spec
        self.bus.run_id = rundir.run_id
        self.bus.error_log = rundir / "observer-errors.log"
        self.bus.observers[:0] = [EventsFile(rundir / "events.jsonl"), ReportWriter(rundir)]
        state_path = workspace.path / LOOPE_DIR / "state.md"
        workspace.start_watching()
        record.pid = os.getpid()
        self._run = RunState(spec, rundir, workspace, record, self.bus, state_path)
        self._guard = Guard(
            workspace,
            protect=spec.protect,
            editable=spec.editable,
            commands=[spec.verify_cmd, spec.metric_cmd],
            state_file=state_path,
        )
        self._guard.seal(rundir / "spec.json", (rundir / "spec.json").read_bytes())
        for name in ("ledger.jsonl", "score.log", "best", "design-contract.md"):
            path = rundir / name
            self._guard.seal(path, path.read_bytes() if path.exists() else None)
        self.steps = StepRunner(self._run, self._guard)
        contract = rundir / "design-contract.md"
        self.contract = contract.read_text(encoding="utf-8") if contract.exists() else None

    def _emit_started(self) -> None:
        spec, record = self.spec, self.run_state.record
        warnings = self._guard.patterns_matching_nothing(self._tracked_files()) if self._guard else []
        self.bus.emit(
            "run_started",
            goal=spec.goal,
            workdir=str(spec.workdir),
            run_dir=str(self.run_state.rundir.root),
            state_file=str(self.run_state.state_file),
            success_cmd=spec.success_cmd,
            pid=record.pid,
            started_at=record.started_at,
            workspace=record.to_dict()["workspace"],
            implementer=spec.implementer,
            reviewers=list(spec.reviewers),
            verify_cmd=spec.verify_cmd,
            metric_cmd=spec.metric_cmd,
            max_iters=spec.max_iters,
            budgets={"cost_usd": spec.max_cost, "tokens": spec.max_tokens, "time_s": spec.max_time},
            dry_run=spec.dry_run,
            warnings=[f"--editable/--protect {p!r} matches no file" for p in warnings],
            resumed_at=record.completed + 1 if record.completed else None,
        )

    def _tracked_files(self) -> list[str]:
        ws = self.run_state.workspace
        return [p for p in ws.git.out("ls-files", "-z").split("\0") if p]

    def drive(self, *, first: int) -> RunRecord:
        """Iterate from ``first`` until something stops the loop; always finalizes the record."""
        run, spec = self.run_state, self.spec
        reason, detail = "failed", "the loop ended unexpectedly"
        try:
            if self.memory is not None and not self.memories:
                self.memories = self._recall()
            if first == 1 and spec.design and self.contract is None:
                self._design()
            if (
                first == 1
                and spec.metric_mode
                and not any(s.iteration == 0 and s.role == "verifier" for s in run.record.steps)
            ):
                self._baseline()
            for iteration in range(first, spec.max_iters + 1):
                self._iteration(iteration)
            raise Halt("max_iters", f"reached --max-iters {spec.max_iters}")
        except Halt as halt:
            reason, detail = halt.reason, halt.detail
        except KeyboardInterrupt:
            run.cancel.set()
            self.interrupted = True
            reason, detail = "stopped", "interrupted with Ctrl-C"
        except LoopeError as exc:
            reason, detail = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded as the run's failure; the traceback is kept in error.log
            write_text(run.rundir / "error.log", traceback.format_exc())
            reason, detail = "failed", f"loope failed: {type(exc).__name__}: {exc} (see error.log)"
        try:
            self._finalize(reason, detail)
        finally:
            run.workspace.stop_watching()
            self.lock.release()
        return run.record

    # -- one iteration ------------------------------------------------------------------------

    def _precheck(self) -> None:
        run = self.run_state
        if run.cancel.is_set() or (self.control is not None and self.control.stop_requested()):
            raise Halt("stopped", "stop requested")
        spent = run.budget_left()
        if spent:
            raise Halt("budget_exceeded", spent)

    def _checked(self, step: AgentStep) -> AgentStep:
        """Halt on a failed step, or when the step crossed a budget (after it was recorded)."""
        result, record = step.result, step.record
        who = f"{record.role} {record.adapter}"
        spent = self.run_state.budget_left()
        if not result.ok and (spent or result.budget_exhausted) and not result.cancelled:
            detail = f"{who}: {result.error}"
            raise Halt("budget_exceeded", f"{spent}; {detail}" if spent else detail)
        if not result.ok:
            if result.timed_out:
                raise Halt("timed_out", f"{who} {result.error}")
            if result.cancelled:
                raise Halt("stopped", "stop requested; the step in flight was killed")
            raise Halt("step_failed", f"{who}: {result.error}")
        if spent:
            raise Halt("budget_exceeded", spent)
        return step

    def _context(self, iteration: int) -> PromptContext:
        run, spec = self.run_state, self.spec
        program = spec.workdir / LOOPE_DIR / "program.md"
        state_path = run.state_file
        return PromptContext(
            run_id=run.record.run_id,
            goal=spec.goal,
            iteration=iteration,
            max_iters=spec.max_iters,
            contract=self.contract,
            program=_read_text(program),
            state_path=str(state_path),
            state_text=_read_text(state_path),
            ledger=ledger.compact(
                ledger.load(run.rundir / "ledger.jsonl"),
                best=(run.record.best or {}).get("score"),
                metric=spec.metric_mode,
            ),
            feedback=self.loop.feedback,
            memories=self.memories,
            critique=self.loop.critique,
            budget=self._budget_text(iteration),
            verify_cmd=spec.verify_cmd if not spec.dry_run else None,
            metric=spec.metric_cmd,
            protect=self._guard.protected_patterns if self._guard else [],
            editable=list(spec.editable),
        )

    def _budget_text(self, iteration: int) -> str:
        spec, totals = self.spec, self.run_state.record.totals
        parts = [f"iteration {iteration} of at most {spec.max_iters}"]
        if spec.max_cost is not None:
            parts.append(f"${totals.cost_usd:.2f} of ${spec.max_cost:.2f} spent")
        if spec.max_tokens is not None:
            parts.append(f"{totals.tokens} of {spec.max_tokens} tokens used")
        if spec.max_time is not None:
            parts.append(f"{self.run_state.elapsed():.0f}s of {spec.max_time:.0f}s elapsed")
        return "; ".join(parts) + "."

    def _iteration(self, n: int) -> None:
        run, spec = self.run_state, self.spec
        self._precheck()
        run.record.iterations = n
        run.save()
        self.bus.emit("iteration_started", iteration=n, max_iters=spec.max_iters)
        context = self._context(n)
        self.loop.critique = ""  # a critique goes into the next iteration's prompt only
        impl = self._checked(self.steps.agent(self.agents.implementer, "implementer", n, context.implementer()))
        agent_state = state_file.read(run.state_file)
        run.record.state = _plain(agent_state.frontmatter)
        gate_report = self._gate(n)
        passed = gate_report is None or gate_report.passed
        measured = self._score(n) if spec.metric_mode and passed else None
        score = measured.score if measured else None
        reviews = self._review(n, gate_report) if passed else []
        blockers = [(s.record.adapter, s.verdict.findings) for s in reviews if s.verdict and s.verdict.blocks]
        success = self._success(n) if spec.success_cmd and not spec.dry_run else None
        violations = impl.record.violations + [v for s in reviews for v in s.record.violations]
        findings = Findings(
            iteration=n,
            gate=gate_report,
            blockers=blockers,
            violations=violations,
            success=success,
            notes=[f"Note: {agent_state.problem}; keep the frontmatter valid."] if agent_state.problem else [],
        )
        if spec.metric_mode:
            problem = measured.error if measured else None
            stop, why, verdict, findings = self._decide_metric(n, score, passed and not blockers, findings, problem)
        else:
            outcome = decisions.Outcome(
                iteration=n,
                max_iters=spec.max_iters,
                changed=bool(impl.changes),
                gate_passed=None if gate_report is None else gate_report.passed,
                failures=failure_signature(gate_report.failures) if gate_report else (),
                has_reviewers=bool(reviews),
                blockers=len(blockers),
                state_status=agent_state.status,
                success_passed=None if success is None else success.passed,
                fresh_feedback=bool(compose(findings)) and _feedback_key(findings) != self.loop.feedback_key,
            )
            stop, why, verdict = self._decide(outcome)
        self.loop.feedback = compose(findings)
        self.loop.feedback_key = _feedback_key(findings)
        self._record_attempt(
            n, impl=impl, gate=gate_report, score=score, verdict=verdict, violations=violations, reviews=reviews
        )
        self.bus.emit("decision", iteration=n, stop=stop, verdict=verdict, why=why, blockers=len(blockers))
        if stop is None and spec.critic and spec.checkpoint_every and n % spec.checkpoint_every == 0:
            self._critique(n)
        run.record.completed = n
        run.record.completed_head = run.workspace.head
        run.record.loop = _plain(self.loop.__dict__)
        run.save()
        self.bus.emit("iteration_finished", iteration=n, stop=stop, totals=run.record.to_dict()["totals"])
        if stop is not None:
            raise Halt(stop, why)

    # -- parts of an iteration ----------------------------------------------------------------

    def _gate(self, n: int) -> GateReport | None:
        """Run the verify command (None when there is none, or in a dry run)."""
        spec = self.spec
        if not spec.verify_cmd or spec.dry_run:
            return None
        self._precheck()
        _, gate = self.steps.gate(n, spec.verify_cmd)
        if gate.proc.cancelled:
            raise Halt("stopped", "stop requested during the verify command")
        return gate.report()

    def _decide(self, outcome: decisions.Outcome) -> tuple[str | None, str, str]:
        """Gate mode: (stop reason or None, why, ledger verdict)."""
        previous = tuple(self.loop.previous_failures) if self.loop.previous_failures is not None else None
        decision = decisions.decide(
            outcome, previous_failures=previous, streak=self.loop.streak, stall_after=self.spec.stall_after
        )
        self.loop.streak = decision.streak
        self.loop.previous_failures = list(outcome.failures)
        return decision.stop, decision.why, "converged" if decision.converged else "kept"

    def _design(self) -> None:
        assert self.agents.designer is not None
        self._precheck()
        run = self.run_state
        step = self._checked(self.steps.agent(self.agents.designer, "designer", 0, self._context(0).designer()))
        written = run.workspace.path / "DESIGN_CONTRACT.md"
        contract = written.read_text(encoding="utf-8") if written.exists() else step.result.message
        if not contract.strip():
            raise Halt("step_failed", "the designer returned no contract")
        self.contract = contract
        assert self._guard is not None
        self._guard.write_sealed(run.rundir / "design-contract.md", contract.encode("utf-8"))
        if not written.exists():
            write_text(written, contract)
            run.workspace.commit(f"loope {run.record.run_id}: design contract")

    def _review(self, n: int, gate: GateReport | None) -> list[AgentStep]:
        agents: list[tuple[Agent, Role]] = [(a, "reviewer") for a in self.agents.reviewers]
        if self.agents.verifier is not None:
            agents.append((self.agents.verifier, "verifier"))
        if not agents:
            return []
        self._precheck()
        ws = self.run_state.workspace
        changes = changes_block([(c.path, c.stat) for c in ws.changes()], ws.diff())
        gate_summary = (
            f"The verify command `{gate.command}` passed." if gate and gate.passed else "No verify command is set."
        )
        context = self._context(n)
        prompts = [context.reviewer(changes, gate_summary, verifier=role == "verifier") for _, role in agents]
        steps = self.steps.reviews(agents, n, prompts)
        for step in steps:
            self._checked(step)
        self.bus.emit(
            "review_finished",
            iteration=n,
            verdicts=[
                {
                    "step": s.record.id,
                    "adapter": s.record.adapter,
                    "verdict": s.record.verdict,
                    "inferred": s.record.verdict_inferred,
                }
                for s in steps
            ],
        )
        return steps

    def _success(self, n: int) -> GateReport:
        from loope.verify.success import success_env

        run = self.run_state
        assert self.spec.success_cmd is not None
        self._precheck()
        env = success_env(run.record.run_id, run.workspace.path)
        _, result = self.steps.shell(n, "success", self.spec.success_cmd, env, self.spec.success_timeout)
        return result.report()

    def _critique(self, n: int) -> None:
        assert self.agents.critic is not None
        self._precheck()
        run = self.run_state
        state_text = _read_text(run.state_file) or ""
        prompt = self._context(n).critic("\n".join(self.loop.summaries[-10:]), state_text, self.loop.last_response)
        step = self._checked(self.steps.agent(self.agents.critic, "critic", n, prompt))
        self.loop.critique = step.result.message.strip()
        self.bus.emit("critique", iteration=n, step=step.record.id, text=self.loop.critique[:2000])

    def _record_attempt(
        self,
        n: int,
        *,
        impl: AgentStep,
        gate: GateReport | None,
        score: float | None,
        verdict: str,
        violations: list[str],
        reviews: list[AgentStep],
    ) -> None:
        run = self.run_state
        summary = ledger.summarize(impl.result.message)
        self.loop.summaries = [*self.loop.summaries, f"iteration {n}: {verdict} — {summary}"][-10:]
        self.loop.last_response = impl.result.message[-1000:]
        steps = [s for s in run.record.steps if s.iteration == n]
        added = sum(c.added or 0 for c in impl.changes)
        removed = sum(c.removed or 0 for c in impl.changes)
        attempt = ledger.Attempt(
            iteration=n,
            summary=summary,
            changed_files=[c.path for c in impl.changes],
            diffstat=f"{len(impl.changes)} file(s) +{added} −{removed}" if impl.changes else "no change",
            gate=None
            if gate is None
            else {
                "passed": gate.passed,
                "exit_code": gate.exit_code,
                "failures": [t for t, _ in gate.failures],
            },
            score=score,
            best=(run.record.best or {}).get("score"),
            verdict=verdict,
            violations=violations,
            reviews={s.record.adapter: s.record.verdict or "failed" for s in reviews},
            cost_usd=round(sum(s.cost_usd for s in steps), 6),
            tokens=sum(s.input_tokens + s.output_tokens for s in steps),
            duration_s=round(sum(s.duration_s for s in steps), 3),
        )
        path = run.rundir / "ledger.jsonl"
        assert self._guard is not None
        previous = self._guard.sealed.get(path) or b""
        line = json.dumps(attempt.__dict__, ensure_ascii=False) + "\n"
        self._guard.write_sealed(path, previous + line.encode("utf-8"))

    # -- metric mode --------------------------------------------------------------------------

    def _baseline(self) -> None:
        """Score the original tree; it is the baseline when it passes the gate and yields a number."""
        run, spec = self.run_state, self.spec
        assert spec.metric_cmd is not None
        self.loop.best_commit = run.workspace.base
        if spec.verify_cmd:
            _, gate = self.steps.gate(0, spec.verify_cmd)
            if not gate.passed:
                self.bus.emit(
                    "metric", iteration=0, score=None, baseline=None, error="the original tree fails the gate"
                )
                return
        result = self.steps.metric(0, spec.metric_cmd)
        if result.score is not None:
            run.record.baseline = result.score
            self._set_best(result.score, 0)
        self.bus.emit("metric", iteration=0, score=result.score, baseline=result.score, error=result.error)
        assert spec.direction is not None
        if decisions.reached(result.score, spec.target, spec.direction):
            raise Halt("converged", f"the original tree already reaches the target {spec.target:g}")

    def _score(self, n: int) -> Measurement:
        run, spec = self.run_state, self.spec
        assert spec.metric_cmd is not None
        self._precheck()
        result = self.steps.metric(n, spec.metric_cmd)
        self.bus.emit(
            "metric",
            iteration=n,
            score=result.score,
            runs=result.runs,
            error=result.error,
            best=(run.record.best or {}).get("score"),
        )
        return result

    def _set_best(self, score: float, iteration: int) -> None:
        run = self.run_state
        assert self._guard is not None
        run.record.best = {"score": score, "iteration": iteration, "commit": run.workspace.head}
        self.loop.best_commit = run.workspace.head
        self._guard.write_sealed(run.rundir / "best", f"{score:g}\n".encode())

    def _decide_metric(
        self, n: int, score: float | None, acceptable: bool, findings: Findings, problem: str | None
    ) -> tuple[str | None, str, str, Findings]:
        run, spec = self.run_state, self.spec
        assert spec.direction is not None
        best = (run.record.best or {}).get("score")
        decision = decisions.decide_metric(
            score=score if acceptable else None,
            best=best,
            direction=spec.direction,
            target=spec.target,
            min_improvement=parse_min_improvement(spec.min_improvement or "0"),
            idle=self.loop.idle,
            patience=spec.patience,
            iteration=n,
            max_iters=spec.max_iters,
        )
        self.loop.idle = decision.idle
        if decision.keep and score is not None:
            if best is None:
                run.record.baseline = score  # no score on the original tree: the first passing attempt's
            self._set_best(score, n)
            verdict = "converged" if decision.stop == "converged" else "kept"
        else:
            verdict = "reverted"
            if run.workspace.head != self.loop.best_commit:
                run.workspace.keep_ref(f"{run.record.run_id}/attempt-{n}", run.workspace.head)
                run.workspace.revert_to(self.loop.best_commit or run.workspace.base)
        assert self._guard is not None
        line = f"{now_iso()}\t{n}\t{'' if score is None else f'{score:g}'}\t{verdict}\n"
        log = run.rundir / "score.log"
        self._guard.write_sealed(log, (self._guard.sealed.get(log) or b"") + line.encode())
        note = f"Attempt {n}: score {score if score is not None else 'none'}; {decision.why}; {verdict}."
        if problem:
            note += f"\n{problem}"
        return decision.stop, decision.why, verdict, Findings(**{**findings.__dict__, "metric_note": note})

    # -- the end ------------------------------------------------------------------------------

    def _recall(self) -> str:
        assert self.memory is not None
        try:
            return self.memory.recall(self.spec.goal, exclude=self.run_state.record.run_id)
        except Exception as exc:  # noqa: BLE001 - memory is best effort; the run goes on without it
            append_line(self.run_state.rundir / "observer-errors.log", f"{now_iso()} recall failed: {exc!r}")
            return ""

    def _finalize(self, reason: str, detail: str) -> None:
        run = self.run_state
        record = run.record
        record.stop_reason = reason
        record.stop_detail = detail
        record.status = reason
        record.converged = reason == "converged"
        record.finished_at = now_iso()
        try:
            changes = run.workspace.changes()
            record.changes = {"files": [c.to_dict() for c in changes]}
            write_text(run.rundir / "changes.diff", run.workspace.diff())
            write_text(run.rundir / "changed-files.txt", "".join(f"{c.path}\n" for c in changes))
        except LoopeError as exc:
            record.stop_detail = f"{detail}; the final diff could not be computed: {exc}"
        run.save()
        if self.memory is not None:
            try:
                self.memory.remember(record, run.rundir)
            except Exception as exc:  # noqa: BLE001 - a lesson that cannot be stored never changes the run
                append_line(run.rundir / "observer-errors.log", f"{now_iso()} remember failed: {exc!r}")
        self.bus.emit(
            "run_finished",
            status=record.status,
            stop_reason=reason,
            stop_detail=record.stop_detail,
            converged=record.converged,
            iterations=record.iterations,
            totals=record.to_dict()["totals"],
            best=record.best,
            baseline=record.baseline,
            changes=record.changes["files"],
            workspace=record.to_dict()["workspace"],
        )

    def exit_code(self) -> int:
        from loope.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

        record = self.run_state.record
        if self.interrupted:
            return EXIT_INTERRUPTED
        if record.converged:
            return EXIT_OK
        if self.spec.metric_mode and record.best is not None and record.best.get("iteration", 0) > 0:
            return EXIT_OK
        return EXIT_FAILED


def _read_text(path: Path) -> str | None:
    """A text file the agent may have broken (deleted, replaced by a directory): None when unreadable."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _feedback_key(findings: Findings) -> list[str]:
    key = [f"violation: {v}" for v in findings.violations]
    for report in (findings.gate, findings.success):
        if report is not None and not report.passed:
            key.append(f"{report.command}: exit {report.exit_code}")
            key += list(failure_signature(report.failures))
    key += [f"{who}: {text.strip()}" for who, text in findings.blockers]
    return key


def _plain(value: Any) -> Any:
    """``value`` made JSON-safe (dates and other YAML scalars become strings)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _discard(rundir: RunDir) -> None:
    """Remove a run that could not start, so nothing half-written is left behind."""
    shutil.rmtree(rundir.root, ignore_errors=True)
    from loope.proc import run_process

    run_process(["git", "worktree", "prune"], cwd=rundir.workdir, capture=True)


def _set_aside(rundir: RunDir, last_kept: int) -> None:
    """Kill what the steps after ``last_kept`` left running, and move their directories to ``agents/discarded/``.

    Agents run in their own process groups, so a runner killed with SIGKILL leaves its step's
    processes behind; they must be gone before the workspace is reset, or they write into it.
    """
    from loope.proc import kill_group

    if not rundir.agents.is_dir():
        return
    target = rundir.agents / "discarded" / time.strftime("%Y%m%d-%H%M%S")
    for source in sorted(rundir.agents.iterdir()):
        number = source.name.split("-", 1)[0]
        if not (number.isdigit() and int(number) > last_kept):
            continue
        pid_file = source / "process.pid"
        if pid_file.exists() and pid_file.read_text().strip().isdigit():
            kill_group(int(pid_file.read_text()))
        target.mkdir(parents=True, exist_ok=True)
        source.rename(target / source.name)


def _truncate_ledger(rundir: RunDir, completed: int) -> None:
    """Drop ledger and score lines of iterations after ``completed`` (a cut-short one)."""
    path = rundir / "ledger.jsonl"
    if path.exists():
        kept = [a for a in ledger.load(path) if a.iteration <= completed]
        write_text(path, "".join(json.dumps(a.__dict__, ensure_ascii=False) + "\n" for a in kept))
    log = rundir / "score.log"
    if log.exists():
        lines = [ln for ln in log.read_text(encoding="utf-8").splitlines() if _score_iteration(ln) <= completed]
        write_text(log, "".join(f"{ln}\n" for ln in lines))


def _score_iteration(line: str) -> int:
    parts = line.split("\t")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def reopen_workspace(info: WorkspaceInfo) -> Workspace:
    return Workspace.reopen(
        mode=info.mode,  # type: ignore[arg-type]
        path=Path(info.path),
        base=info.base,
        head=info.head,
        branch=info.branch,
        git_dir=Path(info.git_dir) if info.git_dir else None,
    )
