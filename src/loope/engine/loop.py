"""The engine: the only place that decides. It runs a LoopSpec and reports through events.

A run reads top to bottom: :meth:`Engine.run` prepares it, :meth:`Engine.drive` runs the iterations and
always finalizes; each iteration is implement (then guard) → gate → metric → review → decide → record.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from loope.agents.base import Agent
from loope.engine import finish, setup
from loope.engine.baseline import check_commands, gate_baseline, needs_baseline
from loope.engine.bus import EventBus
from loope.engine.decide import IterationDecision, Rules, decide
from loope.engine.feedback import compose, feedback_key
from loope.engine.metric_search import MetricSearch
from loope.engine.prompts import PromptContext, context_for, read_optional
from loope.engine.recorders import EventsFile, ReportWriter
from loope.engine.results import Attempted, IterationResults
from loope.engine.resume import rewind
from loope.engine.reviews import review
from loope.engine.roster import NO_SERVICES, Agents, Services
from loope.engine.run import BadInput, Halt, RunnerLock, RunState
from loope.engine.sandboxing import run_sandbox
from loope.engine.segments import MoreBudget, reopen_state
from loope.engine.steps import AgentStep, StepRunner
from loope.enums import Role, StepKind, StopReason
from loope.errors import LoopeError
from loope.events import Critique, IterationFinished, IterationStarted
from loope.records import ledger, state_file
from loope.records.anchor import RunDirAnchor
from loope.records.model import RunRecord, json_safe
from loope.records.rundir import RunDir
from loope.records.space import Reserve, failure_detail
from loope.sandbox import choose, tmpdirs
from loope.spec import LoopSpec
from loope.termination import interrupt_detail, terminated_as_interrupt
from loope.verify.report import GateReport
from loope.verify.success import success_env
from loope.workspace import safefs
from loope.workspace.loopedir import LOOPE_DIR
from loope.workspace.workspace import Workspace

if TYPE_CHECKING:
    from loope.engine.candidates import Race


class Engine:
    def __init__(self, spec: LoopSpec, services: Services = NO_SERVICES) -> None:
        self.spec = spec
        self.bus = EventBus(services.observers)
        self.control = services.control
        self.memory = services.memory
        self.agents = Agents.from_spec(spec)
        check_commands(spec)
        self.bad_input = False  # found only once the run ran (a gate whose program is missing)
        self.sandbox = choose(spec.sandbox)
        self.interrupted: KeyboardInterrupt | None = None
        self.contract: str | None = None
        self.memories = ""
        self._run: RunState | None = None

    @property
    def run_state(self) -> RunState:
        assert self._run is not None, "the run has not been prepared"
        return self._run

    # -- the whole run: prepare → iterations → finalize ------------------------------------------

    def run(self) -> RunRecord:
        """Prepare a new run and drive it to a stop; the final record."""
        self.prepare()
        return self.drive(first=1)

    def prepare(self) -> RunState:
        """Create the run dir, workspace and first record of a new run, and announce it; or leave nothing."""
        rundir = RunDir.allocate(self.spec.workdir, self.spec.goal)
        self.reserve = Reserve(rundir.root)
        with setup.nothing_left_on_failure(rundir, lambda: (self._run, getattr(self, "lock", None))):
            run = self._open(rundir, *setup.create(self.spec, rundir, self.reserve))
            state_file.create(run.state_file, rundir.run_id, self.spec.goal)
            run.save()
            self.bus.emit(setup.started_event(run, self.guard, self.agents, self.sandbox))
        return run

    def let_go(self) -> None:
        """Close what this process opened for a prepared run another process drives now (the lock aside)."""
        run = self.run_state
        run.workspace.stop_watching()
        run.release()
        for log in self.guard.logs:
            log.close()
        if self.control is not None:
            self.control.close()

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
        """Pick up a run after its last completed iteration; ``services`` wires it from its saved spec.

        The cut-short iteration is set aside (``agents/discarded/``); with ``more`` (``loope continue``) a
        finished run goes on with those budgets added. ``on_locked``, ``lock_fd``: see ``setup.lock_to_resume``.
        """
        spec = rundir.saved_spec()
        engine = cls(spec, services(spec))
        engine.reserve = Reserve(rundir.root)
        engine.spec, record, held = setup.lock_to_resume(
            rundir, spec, engine.reserve, more=more, on_locked=on_locked, lock_fd=lock_fd
        )
        run = engine._open(rundir, rewind(rundir, record), record, held)
        if more is not None:
            reopen_state(run.state_file)
        run.save()
        engine.bus.emit(setup.started_event(run, engine.guard, engine.agents, engine.sandbox))
        return engine

    def _open(self, rundir: RunDir, workspace: Workspace, record: RunRecord, held: RunnerLock) -> RunState:
        """Wire the run's state, guard, steps and recorders together (the run's lock and reserve are held)."""
        self.lock = held
        self.bus.run_id = rundir.run_id
        self.bus.error_log = rundir / "observer-errors.log"
        events = EventsFile(rundir / "events.jsonl")
        self.bus.observers[:0] = [events, ReportWriter(rundir)]
        workspace.start_watching()
        record.pid = os.getpid()
        state = workspace.path / LOOPE_DIR / "state.md"
        run = self._run = RunState(self.spec, rundir, workspace, record, self.bus, state, record.loop, self.control)
        run.anchor = RunDirAnchor(rundir.root, rundir.root.parents[2])
        if self.control is not None:
            self.control.watch(rundir.run_id, run.cancel)
        self.guard = setup.guard_for(run)
        self.guard.logs.append(events.log)
        run.sandbox = run_sandbox(run, self.sandbox, self.guard)
        self.steps = StepRunner(run, self.guard)
        self.metric = MetricSearch(run, self.steps, self.guard)
        self.race: Race | None = None
        if self.agents.candidates:
            from loope.engine.candidates import Race  # forks, threads and selection: for runs that race candidates

            self.race = Race.of(run, self.guard, self.agents, self.metric, context=self._context, review=self._review)
        self.contract = setup.read_contract(rundir)
        return run

    @terminated_as_interrupt()  # SIGTERM and SIGHUP stop the run as Ctrl-C does
    def drive(self, *, first: int) -> RunRecord:
        """Iterate from ``first`` until something stops the loop; always finalizes the record."""
        run, spec = self.run_state, self.spec
        reason, detail = StopReason.FAILED, "the loop ended unexpectedly"
        try:
            if self.memory is not None and not self.memories:
                self.memories = finish.recall(self.memory, run)
            if not self.steps.attempts.wait_again():
                raise Halt(StopReason.STOPPED, "stop requested while waiting for the usage limit")
            if first == 1 and needs_baseline(run):
                gate_baseline(run, self.steps)
            if first == 1 and spec.design and self.contract is None:
                self._design()
            baseline_done = any(s.iteration == 0 and s.role == Role.VERIFIER for s in run.record.steps)
            if first == 1 and spec.metric_mode and not baseline_done:
                self.metric.baseline()
            for iteration in range(first, spec.max_iters + 1):
                self._iteration(iteration)
            raise Halt(StopReason.MAX_ITERS, f"reached --max-iters {spec.max_iters}")
        except Halt as halt:
            reason, detail = halt.reason, halt.detail
            self.bad_input = isinstance(halt, BadInput)
        except KeyboardInterrupt as exc:
            run.cancel.set()
            self.interrupted = exc
            reason, detail = StopReason.STOPPED, interrupt_detail(exc)
        except LoopeError as exc:
            reason, detail = StopReason.FAILED, str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded as the run's failure; the traceback is kept in error.log
            reason, detail = StopReason.FAILED, failure_detail(exc, run.rundir / "error.log")
        try:
            self._finalize(reason, detail)
        finally:
            run.workspace.stop_watching()
            run.release()
            tmpdirs.wait()  # the steps' private /tmp dirs, removed on a thread: none outlives the run
            if self.control is not None:
                self.control.close()
            self.lock.release()
        return run.record

    # -- one iteration: implement → guard → gate → metric → review → decide → record -------------

    def _iteration(self, n: int) -> None:
        run, spec = self.run_state, self.spec
        run.begin(n)
        self.bus.emit(IterationStarted(iteration=n, max_iters=spec.max_iters))
        context = self._context(n)
        run.loop.critique = ""  # a critique goes into the next iteration's prompt only
        won = self.race.round(n, context) if self.race else self._implement(n, context)
        run.record.state = json_safe(won.agent_state.frontmatter)
        results = won.results(n, self._success(n) if spec.success_cmd and not spec.dry_run else None)
        decision = self._decide(results)
        self._record(results, decision)
        if decision.stop is not None:
            raise Halt(decision.stop, decision.why)

    def _implement(self, n: int, context: PromptContext) -> Attempted:
        """One implementer (guarded by the step runner: protected changes undone, the rest committed), its checks."""
        impl = self._agent(self.agents.implementer, Role.IMPLEMENTER, n, context.implementer())
        agent_state = state_file.read(self.run_state.state_file, self.run_state.record.run_id)
        gate = self._gate(n)
        passed = gate is None or gate.passed
        measured = self.metric.score(n) if self.spec.metric_mode and passed else None
        return Attempted(impl, agent_state, gate, measured, self._review(n, context, gate) if passed else [])

    def _context(self, n: int, run: RunState | None = None) -> PromptContext:
        protect, run = self.guard.protected_patterns, run or self.run_state
        return context_for(run, n, contract=self.contract, memories=self.memories, protect=protect)

    def _agent(self, agent: Agent, role: Role, n: int, prompt: str) -> AgentStep:
        self.run_state.precheck()
        return self.steps.checked(self.steps.agent(agent, role, n, prompt))

    def _gate(self, n: int) -> GateReport | None:
        """Run the verify command (None when there is none, or in a dry run)."""
        if not self.spec.verify_cmd or self.spec.dry_run:
            return None
        self.run_state.precheck()
        _, gate = self.steps.gate(n, self.spec.verify_cmd)
        if gate.proc.cancelled:
            raise Halt(StopReason.STOPPED, "stop requested during the verify command")
        return gate.report()

    def _review(
        self, n: int, context: PromptContext, gate: GateReport | None, runner: StepRunner | None = None
    ) -> list[AgentStep]:
        """The reviewers and the agent verifier, on the run's workspace or (``runner``) a candidate's."""
        return review(runner or self.steps, self.agents.reviewing(), n, context, gate)

    def _success(self, n: int) -> GateReport:
        run, command = self.run_state, self.spec.success_cmd
        assert command is not None
        self.run_state.precheck()
        env = success_env(run.record.run_id, run.workspace.path)
        _, result = self.steps.shell(n, StepKind.SUCCESS, command, env, self.spec.success_timeout)
        return result.report()

    def _decide(self, results: IterationResults) -> IterationDecision:
        """Decide; carry the counters and feedback on; in metric mode, keep or revert the attempt."""
        run, spec = self.run_state, self.spec
        findings = results.findings()
        key = feedback_key(findings)
        outcome = results.outcome(run, fresh_feedback=bool(key) and key != run.loop.feedback_key)
        rules = Rules(spec.stall_after, self.metric.rules() if spec.metric_mode else None)
        decision = decide(outcome, findings, run.loop, rules)
        run.loop = replace(decision.loop, feedback=compose(decision.findings), feedback_key=key)
        if spec.metric_mode:
            self.metric.apply(results.iteration, decision, results.score)
        return decision

    def _record(self, results: IterationResults, decision: IterationDecision) -> None:
        """The ledger line, the decision event, a critique when one is due, and the iteration's record."""
        run, spec, n = self.run_state, self.spec, results.iteration
        ledger.note(run.loop, n, decision.verdict, results.implementer.result.message)
        self.guard.append_sealed(run.rundir / "ledger.jsonl", ledger.line(results.ledger_entry(run, decision)))
        self.bus.emit(results.decision_event(decision))
        if decision.stop is None and spec.critic and spec.checkpoint_every and n % spec.checkpoint_every == 0:
            self._critique(n)
        going_on = decision.stop is None and n < spec.max_iters
        run.complete(n, next_iteration=n + 1 if going_on else None)
        self.bus.emit(IterationFinished(iteration=n, stop=decision.stop, totals=replace(run.record.totals)))

    # -- once a run: the design contract, and a critique every N iterations ----------------------

    def _design(self) -> None:
        assert self.agents.designer is not None
        run = self.run_state
        step = self._agent(self.agents.designer, Role.DESIGNER, 0, self._context(0).designer())
        # Read and written without following a link: the designer could point the file anywhere.
        written = safefs.read_bytes(run.workspace.path, "DESIGN_CONTRACT.md")
        contract = written.decode("utf-8", errors="replace") if written is not None else step.result.message
        if not contract.strip():
            raise Halt(StopReason.STEP_FAILED, "the designer returned no contract")
        self.contract = contract
        self.guard.write_sealed(run.rundir / "design-contract.md", contract.encode("utf-8"))
        if written is None:
            safefs.write_bytes(run.workspace.path, "DESIGN_CONTRACT.md", contract.encode("utf-8"))
            run.workspace.commit(f"loope {run.record.run_id}: design contract")

    def _critique(self, n: int) -> None:
        assert self.agents.critic is not None
        run, loop = self.run_state, self.run_state.loop
        state_text = read_optional(run.state_file) or ""
        prompt = self._context(n).critic("\n".join(loop.summaries[-10:]), state_text, loop.last_response)
        run.precheck()
        step = self.steps.agent(self.agents.critic, Role.CRITIC, n, prompt)
        if self.steps.skipped(step):  # advisory, like a notifier: a critic that fails is noted, the loop goes on
            return
        self.steps.checked(step)
        loop.critique = step.result.message.strip()
        self.bus.emit(Critique(iteration=n, step=step.record.id, text=loop.critique[:2000]))

    # -- the end -------------------------------------------------------------------------------

    def _finalize(self, reason: StopReason, detail: str) -> None:
        self.reserve.release()  # the space the last records are written in, should the disk be full
        self.run_state.unbegin()
        finished = finish.finalize(self.run_state, reason, detail)
        if self.memory is not None and not self.spec.dry_run:  # a dry run teaches nothing
            finish.remember(self.memory, self.run_state)
        self.bus.emit(finished)

    def exit_code(self) -> int:
        return finish.exit_code(self.run_state.record, self.spec, self.interrupted, self.bad_input)
