"""The engine: the only place that decides. It runs a LoopSpec and reports through events."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from loope.agents.base import Agent
from loope.agents.verdict import finding_lines
from loope.engine import decide as decisions
from loope.engine.baseline import check_commands, gate_baseline, needs_baseline
from loope.engine.bus import EventBus
from loope.engine.feedback import Findings, GateReport, compose, failure_signature, feedback_key
from loope.engine.metric import MetricSearch
from loope.engine.prompts import PromptContext, changes_block, fenced, read_optional
from loope.engine.recorders import EventsFile, ReportWriter
from loope.engine.resume import abandon, rewind
from loope.engine.retry import limit_detail
from loope.engine.roster import NO_SERVICES, Agents, Services
from loope.engine.sandboxing import run_sandbox
from loope.engine.segments import MoreBudget, extend, reopen_state
from loope.engine.state import Halt, RunnerLock, RunState
from loope.engine.steps import AgentStep, StepRunner
from loope.enums import AttemptVerdict, Role, StepKind, StopReason
from loope.errors import LoopeError
from loope.events import (
    Budgets,
    Critique,
    Decision,
    IterationFinished,
    IterationStarted,
    ReviewerVerdict,
    ReviewFinished,
    RunFinished,
    RunStarted,
    SandboxInfo,
)
from loope.records import ledger
from loope.records import state as state_file
from loope.records.anchor import RunDirAnchor
from loope.records.atomic import append_line, write_bytes, write_text
from loope.records.model import (
    Changes,
    FileChange,
    LoopState,
    MetricSettings,
    RunRecord,
    WorkspaceInfo,
    json_safe,
    now_iso,
)
from loope.records.rundir import RunDir
from loope.records.space import Reserve, append_quietly, disk_full, failure_detail, full_disk_detail
from loope.sandbox import choose
from loope.spec import LoopSpec
from loope.termination import Terminated, terminated_as_interrupt
from loope.workspace import safefs
from loope.workspace.branch import publish_run
from loope.workspace.git import toplevel
from loope.workspace.guard import Guard
from loope.workspace.loopedir import LOOPE_DIR
from loope.workspace.retire import retire
from loope.workspace.workspace import Workspace


class Engine:
    def __init__(self, spec: LoopSpec, services: Services = NO_SERVICES) -> None:
        self.spec = spec
        self.bus = EventBus(services.observers)
        self.control = services.control
        self.memory = services.memory
        self.agents = Agents.from_spec(spec)
        check_commands(spec)
        self.usage_error = False  # bad input found only once the run ran (a gate whose program is missing)
        self.sandbox = choose(spec.sandbox)
        self.interrupted: KeyboardInterrupt | None = None
        self.loop = LoopState()
        self.contract: str | None = None
        self.memories = ""
        self._run: RunState | None = None
        self.guard: Guard | None = None
        self.metric = MetricSearch(self)

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
        try:
            return self._prepare(rundir)
        except BaseException as exc:
            abandon(rundir, self._run.workspace if self._run else None, getattr(self, "lock", None))
            self._run = None
            if disk_full(exc):
                raise LoopeError(full_disk_detail(exc)) from None
            raise

    def _prepare(self, rundir: RunDir) -> RunState:
        spec = self.spec
        self._lock(rundir)
        self.reserve.hold()
        write_text(rundir / "spec.json", spec.model_dump_json(indent=2) + "\n")
        workspace = Workspace.create(spec.workdir, rundir.root, rundir.run_id, spec.workspace, spec.branch)
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
                start=workspace.start,
            ),
            max_iters=spec.max_iters,
            implementer=spec.implementer,
            reviewers=list(spec.reviewers),
            verify_cmd=spec.verify_cmd,
            metric=MetricSettings(spec.metric_cmd, spec.direction, spec.target) if spec.metric_cmd else None,
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
        services: Callable[[LoopSpec], Services],
        *,
        more: MoreBudget | None = None,
        on_locked: Callable[[], None] | None = None,
        lock_fd: int | None = None,
    ) -> Engine:
        """Pick up a prepared or interrupted run after its last completed iteration.

        The cut-short iteration's changes are discarded and its steps set aside under
        ``agents/discarded/``; counters and budgets carry over from the completed ones.
        ``services`` builds what the run is wired to from its saved spec. With ``more``
        (``loope continue``), a finished run goes on with those budgets added; ``on_locked`` runs
        once the run's lock is held, before anything watches it. ``lock_fd`` is the run's lock,
        held and passed on by the process that prepared the run (``run --detach``).
        """
        spec = rundir.saved_spec()
        engine = cls(spec, services(spec))
        if more is None:
            _refuse_finished(rundir.record())
        engine._lock(rundir, lock_fd)
        engine.reserve.hold()
        try:
            record = rundir.record()  # again, under the lock: a runner that held it may have moved the run on
            if more is None:
                _refuse_finished(record)
            else:
                engine.spec = extend(rundir, record, spec, more)
                if on_locked is not None:
                    on_locked()
        except BaseException:
            engine.lock.release()
            raise
        workspace = rewind(rundir, record)
        engine.loop = record.loop
        engine._attach(rundir, workspace, record)
        if more is not None:
            reopen_state(engine.run_state.state_file)
        engine.run_state.next_step = max((s.id for s in record.steps), default=0) + 1
        engine.run_state.save()
        engine._emit_started()
        return engine

    def _lock(self, rundir: RunDir, passed_fd: int | None = None) -> None:
        self.lock = RunnerLock(rundir / "runner.lock")
        self.reserve = Reserve(rundir.root)
        if not (passed_fd is not None and self.lock.adopt(passed_fd)) and not self.lock.acquire():
            raise LoopeError(
                f"run {rundir.run_id} is being run by another process (pid {self.lock.holder()});"
                f" stop it first with `loope stop {rundir.run_id}`"
            )

    def _attach(self, rundir: RunDir, workspace: Workspace, record: RunRecord) -> None:
        spec = self.spec
        self.bus.run_id = rundir.run_id
        self.bus.error_log = rundir / "observer-errors.log"
        events = EventsFile(rundir / "events.jsonl")
        self.bus.observers[:0] = [events, ReportWriter(rundir)]
        state_path = workspace.path / LOOPE_DIR / "state.md"
        workspace.start_watching()
        record.pid = os.getpid()
        self.guard = Guard(
            workspace,
            protect=spec.protect,
            editable=spec.editable,
            commands=[spec.verify_cmd],
            metric=spec.metric_cmd,
            state_file=state_path,
            user_repo=toplevel(spec.workdir),
            run_id=rundir.run_id,
            gate=spec.verify_cmd or spec.metric_cmd,
            run_dir=rundir.root,
        )
        sandbox = run_sandbox(
            spec, self.sandbox, workspace=workspace, rundir=rundir, state_file=state_path, guard=self.guard
        )
        self._run = RunState(spec, rundir, workspace, record, self.bus, state_path, sandbox=sandbox)
        self._run.anchor = RunDirAnchor(rundir.root, rundir.root.parents[2])
        if self.control is not None:
            self.control.watch(rundir.run_id, self._run.cancel)
        self.guard.seal(rundir / "spec.json", (rundir / "spec.json").read_bytes())
        self.guard.logs.append(events.log)
        for name in ("ledger.jsonl", "score.log", "best", "design-contract.md"):
            path = rundir / name
            self.guard.seal(path, path.read_bytes() if path.exists() else None)
        self.steps = StepRunner(
            self._run, self.guard, lambda: self.control is not None and self.control.stop_requested()
        )
        contract = rundir / "design-contract.md"
        self.contract = contract.read_text(encoding="utf-8") if contract.exists() else None

    def _emit_started(self) -> None:
        spec, record = self.spec, self.run_state.record
        user_globs = spec.editable or spec.protect
        warnings = self.guard.patterns_matching_nothing(self._tracked_files()) if self.guard and user_globs else []
        self.bus.emit(
            RunStarted(
                goal=spec.goal,
                workdir=str(spec.workdir),
                run_dir=str(self.run_state.rundir.root),
                state_file=str(self.run_state.state_file),
                success_cmd=spec.success_cmd,
                pid=record.pid,
                started_at=record.started_at,
                workspace=replace(record.workspace),
                implementer=spec.implementer,
                reviewers=list(spec.reviewers),
                verify_cmd=spec.verify_cmd,
                metric_cmd=spec.metric_cmd,
                max_iters=spec.max_iters,
                budgets=Budgets(spec.max_cost, spec.max_tokens, spec.max_time),
                dry_run=spec.dry_run,
                sandbox=SandboxInfo(self.sandbox.enabled, spec.sandbox, spec.sandbox_network),
                warnings=[f"--editable/--protect {p!r} matches no file" for p in warnings]
                + ([self.sandbox.warning] if self.sandbox.warning else [])
                + ([self.run_state.workspace.note] if self.run_state.workspace.note else [])
                + (
                    [f"--max-cost cannot see what {', '.join(blind)} spend (their CLIs report no cost)"]
                    if spec.max_cost is not None and (blind := self.agents.cost_blind())
                    else []
                ),
                resumed_at=record.completed + 1 if record.completed else None,
            )
        )

    def _tracked_files(self) -> list[str]:
        ws = self.run_state.workspace
        return [p for p in ws.git.out("ls-files", "-z").split("\0") if p]

    def drive(self, *, first: int) -> RunRecord:
        """Iterate from ``first`` until something stops the loop; always finalizes the record."""
        with terminated_as_interrupt():  # SIGTERM and SIGHUP stop the run as Ctrl-C does
            return self._drive(first)

    def _drive(self, first: int) -> RunRecord:
        run, spec = self.run_state, self.spec
        reason, detail = StopReason.FAILED, "the loop ended unexpectedly"
        try:
            if self.memory is not None and not self.memories:
                self.memories = self._recall()
            if not self.steps.attempts.wait_again():
                raise Halt(StopReason.STOPPED, "stop requested while waiting for the usage limit")
            if first == 1 and needs_baseline(self):
                gate_baseline(self)
            if first == 1 and spec.design and self.contract is None:
                self._design()
            if (
                first == 1
                and spec.metric_mode
                and not any(s.iteration == 0 and s.role == Role.VERIFIER for s in run.record.steps)
            ):
                self.metric.baseline()
            for iteration in range(first, spec.max_iters + 1):
                self._iteration(iteration)
            raise Halt(StopReason.MAX_ITERS, f"reached --max-iters {spec.max_iters}")
        except Halt as halt:
            reason, detail = halt.reason, halt.detail
        except KeyboardInterrupt as exc:
            run.cancel.set()
            self.interrupted = exc
            detail = f"stopped by {exc.name}" if isinstance(exc, Terminated) else "interrupted with Ctrl-C"
            reason = StopReason.STOPPED
        except LoopeError as exc:
            reason, detail = StopReason.FAILED, str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded as the run's failure; the traceback is kept in error.log
            reason, detail = StopReason.FAILED, failure_detail(exc, run.rundir / "error.log")
        try:
            self._finalize(reason, detail)
        finally:
            run.workspace.stop_watching()
            run.release()
            if self.control is not None:
                self.control.close()
            self.lock.release()
        return run.record

    # -- one iteration ------------------------------------------------------------------------

    def precheck(self) -> None:
        run = self.run_state
        if run.cancel.is_set() or (self.control is not None and self.control.stop_requested()):
            raise Halt(StopReason.STOPPED, "stop requested")
        spent = run.budget_left()
        if spent:
            raise Halt(StopReason.BUDGET_EXCEEDED, spent)

    def _checked(self, step: AgentStep) -> AgentStep:
        """Halt on a failed step, or when the step crossed a budget (after it was recorded)."""
        result, record = step.result, step.record
        who = f"{record.role} {record.adapter}"
        spent = self.run_state.budget_left()
        if not result.ok and (spent or result.budget_exhausted) and not result.cancelled:
            detail = f"{who}: {result.error}"
            raise Halt(StopReason.BUDGET_EXCEEDED, f"{spent}; {detail}" if spent else detail)
        if not result.ok:
            if result.timed_out:
                raise Halt(StopReason.TIMED_OUT, f"{who} {result.error}")
            if result.cancelled:
                raise Halt(
                    StopReason.STOPPED,
                    (result.setback and result.error) or "stop requested; the step in flight was killed",
                )
            if result.setback and result.setback.kind == "limit":
                raise Halt(StopReason.USAGE_LIMITED, limit_detail(who, result))
            raise Halt(StopReason.STEP_FAILED, f"{who}: {result.error}")
        if spent:
            raise Halt(StopReason.BUDGET_EXCEEDED, spent)
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
            program=read_optional(program),
            state_path=str(state_path),
            state_text=read_optional(state_path),
            ledger=ledger.compact(
                ledger.load(run.rundir / "ledger.jsonl"),
                best=run.record.best_score,
                metric=spec.metric_mode,
            ),
            feedback=self.loop.feedback,
            memories=self.memories,
            critique=self.loop.critique,
            budget=self._budget_text(iteration),
            verify_cmd=spec.verify_cmd if not spec.dry_run else None,
            metric=spec.metric_cmd,
            protect=self.guard.protected_patterns if self.guard else [],
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
        self.precheck()
        run.record.iterations = n
        run.save()
        self.bus.emit(IterationStarted(iteration=n, max_iters=spec.max_iters))
        context = self._context(n)
        self.loop.critique = ""  # a critique goes into the next iteration's prompt only
        impl = self._checked(self.steps.agent(self.agents.implementer, Role.IMPLEMENTER, n, context.implementer()))
        agent_state = state_file.read(run.state_file, run.record.run_id)
        run.record.state = json_safe(agent_state.frontmatter)
        gate_report = self._gate(n)
        passed = gate_report is None or gate_report.passed
        measured = self.metric.score(n) if spec.metric_mode and passed else None
        score = measured.score if measured else None
        reviews = self._review(n, context, gate_report) if passed else []
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
        key = feedback_key(findings)
        if spec.metric_mode:
            problem = measured.error if measured else None
            stop, why, verdict, findings = self.metric.decide(n, score, passed and not blockers, findings, problem)
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
                fresh_feedback=bool(key) and key != self.loop.feedback_key,
            )
            stop, why, verdict = self._decide(outcome)
        self.loop.feedback = compose(findings)
        self.loop.feedback_key = key
        self._record_attempt(
            n, impl=impl, gate=gate_report, score=score, verdict=verdict, violations=violations, reviews=reviews
        )
        self.bus.emit(Decision(iteration=n, stop=stop, verdict=verdict, why=why, blockers=len(blockers)))
        if stop is None and spec.critic and spec.checkpoint_every and n % spec.checkpoint_every == 0:
            self._critique(n)
        run.record.completed = n
        run.record.completed_head = run.workspace.head
        run.record.loop = replace(self.loop)
        run.save()
        self.bus.emit(IterationFinished(iteration=n, stop=stop, totals=replace(run.record.totals)))
        if stop is not None:
            raise Halt(stop, why)

    # -- parts of an iteration ----------------------------------------------------------------

    def _gate(self, n: int) -> GateReport | None:
        """Run the verify command (None when there is none, or in a dry run)."""
        spec = self.spec
        if not spec.verify_cmd or spec.dry_run:
            return None
        self.precheck()
        _, gate = self.steps.gate(n, spec.verify_cmd)
        if gate.proc.cancelled:
            raise Halt(StopReason.STOPPED, "stop requested during the verify command")
        return gate.report()

    def _decide(self, outcome: decisions.Outcome) -> tuple[StopReason | None, str, AttemptVerdict]:
        """Gate mode: (stop reason or None, why, ledger verdict)."""
        previous = tuple(self.loop.previous_failures) if self.loop.previous_failures is not None else None
        decision = decisions.decide(
            outcome, previous_failures=previous, streak=self.loop.streak, stall_after=self.spec.stall_after
        )
        self.loop.streak = decision.streak
        self.loop.previous_failures = list(outcome.failures)
        return decision.stop, decision.why, AttemptVerdict.CONVERGED if decision.converged else AttemptVerdict.KEPT

    def _design(self) -> None:
        assert self.agents.designer is not None
        self.precheck()
        run = self.run_state
        step = self._checked(self.steps.agent(self.agents.designer, Role.DESIGNER, 0, self._context(0).designer()))
        # Read and written without following a link: the designer could point the file anywhere.
        written = safefs.read_bytes(run.workspace.path, "DESIGN_CONTRACT.md")
        contract = written.decode("utf-8", errors="replace") if written is not None else step.result.message
        if not contract.strip():
            raise Halt(StopReason.STEP_FAILED, "the designer returned no contract")
        self.contract = contract
        assert self.guard is not None
        self.guard.write_sealed(run.rundir / "design-contract.md", contract.encode("utf-8"))
        if written is None:
            safefs.write_bytes(run.workspace.path, "DESIGN_CONTRACT.md", contract.encode("utf-8"))
            run.workspace.commit(f"loope {run.record.run_id}: design contract")

    def _review(self, n: int, context: PromptContext, gate: GateReport | None) -> list[AgentStep]:
        agents: list[tuple[Agent, Role]] = [(a, Role.REVIEWER) for a in self.agents.reviewers]
        if self.agents.verifier is not None:
            agents.append((self.agents.verifier, Role.VERIFIER))
        if not agents:
            return []
        self.precheck()
        ws = self.run_state.workspace
        changes = changes_block([(c.path, c.stat) for c in ws.changes()], ws.diff())
        gate_summary = "No verify command is set."
        if gate is not None:
            gate_summary = f"The verify command `{gate.command}` passed."
            if gate.output.strip():
                gate_summary += f" The last lines of its output:\n{fenced(gate.output, 'text')}"
        prompts = [context.reviewer(changes, gate_summary, verifier=role == Role.VERIFIER) for _, role in agents]
        steps = self.steps.reviews(agents, n, prompts)
        for step in steps:
            self._checked(step)
        verdicts = [
            ReviewerVerdict(
                s.record.id,
                s.record.adapter,
                s.record.verdict,
                s.record.verdict_inferred,
                findings=finding_lines(s.verdict.findings) if s.verdict and s.verdict.blocks else [],
            )
            for s in steps
        ]
        self.bus.emit(ReviewFinished(iteration=n, verdicts=verdicts))
        return steps

    def _success(self, n: int) -> GateReport:
        from loope.verify.success import success_env

        run = self.run_state
        assert self.spec.success_cmd is not None
        self.precheck()
        env = success_env(run.record.run_id, run.workspace.path)
        _, result = self.steps.shell(n, StepKind.SUCCESS, self.spec.success_cmd, env, self.spec.success_timeout)
        return result.report()

    def _critique(self, n: int) -> None:
        assert self.agents.critic is not None
        self.precheck()
        run = self.run_state
        state_text = read_optional(run.state_file) or ""
        prompt = self._context(n).critic("\n".join(self.loop.summaries[-10:]), state_text, self.loop.last_response)
        step = self.steps.agent(self.agents.critic, Role.CRITIC, n, prompt)
        result = step.result
        if not result.ok and not (result.cancelled or result.budget_exhausted or run.budget_left()):
            # Advisory, like a notifier: a critic that fails or times out is noted and the loop goes on.
            append_line(run.rundir / "observer-errors.log", f"{now_iso()} critic skipped: {result.error}")
            return
        self._checked(step)
        self.loop.critique = step.result.message.strip()
        self.bus.emit(Critique(iteration=n, step=step.record.id, text=self.loop.critique[:2000]))

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
            else ledger.GateSummary(gate.passed, gate.exit_code, [t for t, _ in gate.failures]),
            score=score,
            best=run.record.best_score,
            verdict=verdict,
            violations=violations,
            reviews={s.record.adapter: s.record.verdict or "failed" for s in reviews},
            cost_usd=round(sum(s.cost_usd for s in steps), 6),
            tokens=sum(s.input_tokens + s.output_tokens for s in steps),
            duration_s=round(sum(s.duration_s for s in steps), 3),
        )
        path = run.rundir / "ledger.jsonl"
        assert self.guard is not None
        previous = self.guard.sealed.get(path) or b""
        self.guard.write_sealed(path, previous + ledger.line(attempt).encode("utf-8"))

    # -- metric mode --------------------------------------------------------------------------

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
        self.reserve.release()  # the space the last records are written in, should the disk be full
        record = run.record
        record.stop_reason = reason
        record.stop_detail = detail
        record.status = reason
        record.converged = reason == StopReason.CONVERGED
        record.finished_at = now_iso()
        changes: list[FileChange] = []
        finished = False  # the final diff is written: the worktree may go
        try:
            final = run.workspace.compare()
            changes = final.changes
            record.changes = Changes(list(changes))
            write_bytes(run.rundir / "changes.diff", final.patch)
            write_text(run.rundir / "changed-files.txt", "".join(f"{c.path}\n" for c in changes))
            finished = True
        except (LoopeError, OSError) as exc:
            record.stop_detail = f"{detail}; the final diff could not be computed: {exc}"
            if disk_full(exc) and reason != StopReason.FAILED:
                record.status = record.stop_reason = StopReason.FAILED
                record.stop_detail = f"{full_disk_detail(exc, ' while finalizing')}; before that: {reason}: {detail}"
        try:
            if kept := publish_run(run.workspace, record.run_id):
                record.stop_detail = f"{record.stop_detail}; {kept}"
        except (LoopeError, OSError) as exc:
            record.stop_detail = f"{record.stop_detail}; the run's branch could not be updated: {exc}"
        if finished and not self.spec.keep_workspace:  # the result is on the run branch and in the run dir now
            retired = retire(run.workspace, run.rundir.root)
            record.workspace.removed, record.workspace.note = retired.removed, retired.note
        run.save_if_possible()
        if self.memory is not None and not self.spec.dry_run:  # a dry run teaches nothing
            try:
                self.memory.remember(record, run.rundir)
            except Exception as exc:  # noqa: BLE001 - a lesson that cannot be stored never changes the run
                append_quietly(run.rundir / "observer-errors.log", f"{now_iso()} remember failed: {exc!r}")
        self.bus.emit(
            RunFinished(
                status=record.status,
                stop_reason=record.stop_reason,
                stop_detail=record.stop_detail,
                converged=record.converged,
                iterations=record.iterations,
                totals=replace(record.totals),
                best=record.best,
                baseline=record.baseline,
                changes=changes,
                workspace=replace(record.workspace),
            )
        )

    def exit_code(self) -> int:
        from loope.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

        record = self.run_state.record
        if isinstance(self.interrupted, Terminated):
            return self.interrupted.exit_code
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.usage_error:
            return EXIT_USAGE
        if record.converged:
            return EXIT_OK
        if self.spec.metric_mode and record.best is not None and record.best.iteration > 0:
            return EXIT_OK
        return EXIT_FAILED


def _refuse_finished(record: RunRecord) -> None:
    """``resume`` is for a run whose runner died: a finished run goes on with ``continue``."""
    if record.status != "running":
        more_flag = " --goal TEXT" if record.status == "converged" else ""
        raise LoopeError(
            f"run {record.run_id} already finished ({record.status}); go on with `loope continue"
            f" {record.run_id}{more_flag}`, or start a new one with `loope run`"
        )
