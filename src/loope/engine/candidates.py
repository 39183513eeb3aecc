"""Parallel candidates: an iteration raced by N implementers, each in a fork of the kept state.

One round, in order: fork N workspaces at the run's head; run the N implementers at once; guard
each candidate's tree (and, once for the round, the git dirs and run dir every candidate could
reach) and commit what it kept; run the gates and metrics, at most ``--jobs`` at once; rank the
candidates (engine/selection.py); reviewers review the leading passing candidate, and the next
one when they block, up to ``--review-candidates``; the winner's commit becomes the run's next
kept state. Every candidate's change stays under ``refs/loope/<run>/iter-<n>-cand-<i>`` and in
its step directory (``agents/NN-implementer-<adapter>-c<i>``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from loope.agents.base import Agent
from loope.engine import selection
from loope.engine.decide import MetricRules
from loope.engine.metric_search import MetricSearch
from loope.engine.prompts import PromptContext
from loope.engine.results import Attempted
from loope.engine.roster import Agents
from loope.engine.run import Halt, RunState
from loope.engine.sandboxing import run_sandbox
from loope.engine.setup import candidate_guard
from loope.engine.steps import AgentStep, StepRunner
from loope.enums import Role, StopReason
from loope.events import AttemptScored, Selection
from loope.records.model import StepRecord
from loope.records.rounds import CandidateResult, Round
from loope.records.state_file import read
from loope.sandbox import Choice
from loope.verify.metric import Measurement
from loope.verify.report import GateReport
from loope.workspace import fork
from loope.workspace.guard import Guard
from loope.workspace.late import LateWrites
from loope.workspace.loopedir import LOOPE_DIR
from loope.workspace.workspace import Workspace

T = TypeVar("T")


@dataclass
class CandidateRun(RunState):
    """One candidate's view of the run: its own workspace and state file; steps, records and budgets shared."""

    parent: RunState | None = None

    def _root(self) -> RunState:
        assert self.parent is not None, "a candidate's run is made by Race"
        return self.parent

    def new_step(self, role: str, adapter: str) -> tuple[int, Path]:
        return self._root().new_step(role, f"{adapter}-c{self.candidate}")

    def add_step(self, step: StepRecord) -> None:
        self._root().add_step(step)

    def save(self) -> None:
        self._root().save()


@dataclass
class Lane:
    """One candidate while its round runs."""

    index: int
    agent: Agent
    run: CandidateRun
    guard: Guard
    steps: StepRunner
    step: AgentStep | None = None
    gate: GateReport | None = None
    measured: Measurement | None = None
    reviews: list[AgentStep] = field(default_factory=list)

    @property
    def workspace(self) -> Workspace:
        return self.run.workspace

    @property
    def implemented(self) -> AgentStep:
        assert self.step is not None
        return self.step

    def contender(self) -> selection.Contender:
        step = self.implemented
        changes = step.changes
        gate = self.gate
        return selection.Contender(
            index=self.index,
            ok=step.result.ok,
            gate_passed=None if gate is None else gate.passed,
            failing=None if gate is None else (0 if gate.passed else gate.failing or len(gate.failures) or None),
            score=self.measured.score if self.measured else None,
            violations=len(step.record.violations),
            diff_lines=sum((c.added or 0) + (c.removed or 0) for c in changes),
        )


Context = Callable[[int, RunState], PromptContext]
"""The engine's prompt context of an iteration, for one candidate's view of the run (its own state file)."""
Review = Callable[[int, PromptContext, GateReport | None, StepRunner], list[AgentStep]]
"""The engine's review step, on one candidate's workspace."""


class Race:
    """Runs an iteration's candidates; one per agent in ``agents``."""

    def __init__(
        self,
        run: RunState,
        guard: Guard,
        agents: list[Agent],
        metric: MetricRules | None,
        *,
        context: Context,
        review: Review,
    ) -> None:
        self.run = run
        self.guard = guard
        self.agents = agents
        self.metric = metric
        self.context = context
        self.review = review
        spec = run.spec
        self.jobs = spec.jobs or os.cpu_count() or 1
        self.review_candidates = spec.review_candidates

    @classmethod
    def of(
        cls, run: RunState, guard: Guard, agents: Agents, search: MetricSearch, *, context: Context, review: Review
    ) -> Race | None:
        """The run's race, or None when one implementer works each iteration."""
        if not agents.candidates:
            return None
        rules = search.rules() if run.spec.metric_mode else None
        return cls(run, guard, agents.candidates, rules, context=context, review=review)

    def round(self, n: int, context: PromptContext) -> Attempted:
        """Race iteration ``n``; the winner's commit is the run's head afterwards."""
        run = self.run
        prompt = lambda lane: self.context(n, lane).implementer()  # noqa: E731 - each names its own state file
        review = partial(self.review, n, context)
        fork.remove(run.workspace, run.rundir.root)  # what a runner that died mid-round left
        lanes: list[Lane] = []
        try:
            lanes = [self._lane(i, agent) for i, agent in enumerate(self.agents, 1)]
            outside = self._implement(lanes, n, prompt)
            self._check(lanes, n)
            ranked = selection.rank([lane.contender() for lane in lanes], self.metric)
            by_index = {lane.index: lane for lane in lanes}
            winner = self._review(ranked, by_index, review)
            return self._adopt(n, by_index[winner.index], ranked, by_index, outside)
        finally:
            for lane in lanes:
                lane.workspace.stop_watching()
            fork.remove(run.workspace, run.rundir.root)

    # -- the round's parts ---------------------------------------------------------------------

    def _lane(self, index: int, agent: Agent) -> Lane:
        run = self.run
        workspace = fork.fork(run.workspace, run.rundir.root, index)
        state = workspace.path / LOOPE_DIR / "state.md"
        fork.copy_state(run.state_file, state)
        lane_run = CandidateRun(
            spec=run.spec,
            rundir=run.rundir,
            workspace=workspace,
            record=run.record,
            bus=run.bus,
            state_file=state,
            loop=run.loop,
            control=run.control,
            cancel=run.cancel,
            anchor=run.anchor,
            started=run.started,
            candidate=index,
            candidates=len(self.agents),
            parent=run,
        )

        guard = candidate_guard(lane_run, self.guard)
        if run.sandbox.enabled:  # a box of its own: its tree writable; the run's and the others' read-only
            lane_run.sandbox = run_sandbox(lane_run, Choice(True), guard)
        workspace.start_watching()
        return Lane(index, agent, lane_run, guard, StepRunner(lane_run, guard))

    def _implement(self, lanes: list[Lane], n: int, prompt: Callable[[RunState], str]) -> list[str]:
        """Every implementer at once; then each tree guarded and committed. What the round undid outside them."""
        run, share = self.run, len(lanes)
        run.precheck()
        self.guard.before_step(confined=all(lane.steps.confined(lane.agent) for lane in lanes))
        for lane in lanes:
            lane.guard.before_step()
        late = LateWrites({lane.index: lane.workspace for lane in lanes})
        calls = [self._invoker(lane, n, prompt, share, late) for lane in lanes]
        steps = _all_at_once(calls, len(calls), run, on_abort=lambda i, step: lanes[i].steps.record_cut(step))
        outside = self.guard.restore_outside() + self.guard.undo_read_only_changes("a candidate")
        outside += fork.sweep(run.rundir.root, len(lanes))
        undone, blamed = late.undo()
        for lane, step in zip(lanes, steps, strict=True):
            lane.step = lane.steps.settle(step, lane.agent, blamed=blamed.get(lane.index))
        outside += undone
        if run.cancel.is_set() or run.stop_requested():
            raise Halt(StopReason.STOPPED, "stop requested; the candidates in flight were killed")
        if not any(lane.implemented.result.ok for lane in lanes):
            lanes[0].steps.checked(lanes[0].implemented)  # every candidate failed: the run stops as one would
        return outside

    def _invoker(
        self, lane: Lane, n: int, prompt_for: Callable[[RunState], str], share: int, late: LateWrites
    ) -> Callable[[], AgentStep]:
        prompt = prompt_for(lane.run)
        if self.run.spec.diversify:
            tried = [c.summary for r in self.run.record.rounds[-1:] for c in r.candidates if c.summary]
            prompt = diversified(prompt, lane.index, share, tried)
        return lambda: late.ended(lane.index, lane.steps.invoke(lane.agent, Role.IMPLEMENTER, n, prompt, share=share))

    def _check(self, lanes: list[Lane], n: int) -> None:
        """Gate and score each candidate that produced something, at most ``jobs`` at once."""
        run, spec = self.run, self.run.spec
        live = [lane for lane in lanes if lane.implemented.result.ok]
        if spec.dry_run or not (spec.verify_cmd or spec.metric_cmd):
            return
        for lane in live:
            lane.steps.gate_env()  # written once, before the threads (the pytest boundary file is shared)
        self.guard.before_step(confined=run.sandbox.enabled)
        _all_at_once([self._checker(lane, n) for lane in live], self.jobs, run)
        self.guard.restore_outside()
        fork.sweep(run.rundir.root, len(lanes))
        if run.cancel.is_set():
            raise Halt(StopReason.STOPPED, "stop requested during the candidates' checks")

    def _checker(self, lane: Lane, n: int) -> Callable[[], None]:
        def check() -> None:
            spec = self.run.spec
            if spec.verify_cmd:
                _, result = lane.steps.gate(n, spec.verify_cmd)
                lane.gate = result.report()
            if spec.metric_cmd and (lane.gate is None or lane.gate.passed) and not self.run.cancel.is_set():
                measured = lane.steps.metric(n, spec.metric_cmd)
                lane.measured = measured
                best = self.run.record.best_score
                self.run.bus.emit(
                    AttemptScored(
                        iteration=n, score=measured.score, runs=measured.runs, error=measured.error, best=best
                    )
                )

        return check

    def _review(
        self, ranked: list[selection.Contender], lanes: dict[int, Lane], review: Callable[..., list[AgentStep]]
    ) -> selection.Contender:
        """The winner: the first passing candidate the reviewers do not block (the leader when all block)."""
        for contender in [c for c in ranked if c.passed][: self.review_candidates]:
            lane = lanes[contender.index]
            self.guard.before_step(confined=self.run.sandbox.enabled)
            lane.reviews = review(lane.gate, lane.steps)
            self.guard.restore_outside()
            if not any(s.verdict and s.verdict.blocks for s in lane.reviews):
                return contender
        return ranked[0]

    def _adopt(
        self,
        n: int,
        winner: Lane,
        ranked: list[selection.Contender],
        lanes: dict[int, Lane],
        outside: list[str],
    ) -> Attempted:
        """Make the winner the run's kept state; keep every candidate's change under its ref; record the round."""
        run = self.run
        main = run.workspace
        for lane in lanes.values():
            if lane.workspace.head != main.head:
                fork.publish(main, run.rundir.root, lane.index)
                main.keep_ref(_ref_name(run.record.run_id, n, lane.index), lane.workspace.head)
        if winner.workspace.head != main.head:
            main.revert_to(winner.workspace.head)
        fork.copy_state(winner.run.state_file, run.state_file)
        top = next(c for c in ranked if c.index == winner.index)
        order = [top, *[c for c in ranked if c.index != winner.index]]
        results = [self._result(lanes[c.index], rank, n, self._why(c, top, lanes)) for rank, c in enumerate(order, 1)]
        why = results[0].why.removeprefix("won: ")
        record = Round(n, winner.index, why, results, undone=outside, isolated=run.sandbox.enabled)
        run.record.rounds.append(record)
        run.bus.emit(Selection(iteration=n, winner=winner.index, why=why, candidates=results))
        agent_state = read(run.state_file, run.record.run_id)
        notes = tuple(
            f"- Candidate {r.candidate} ({r.agent}) {r.why}: {r.summary or '(no summary)'}" for r in results[1:]
        )
        heading = ("### The other candidates of this iteration (do not repeat what lost)",) if notes else ()
        undone = tuple(f"- {v}" for v in outside)
        return Attempted(
            winner.implemented,
            agent_state,
            winner.gate,
            winner.measured,
            winner.reviews,
            record,
            heading + notes + (("### Changes undone outside each candidate's own tree", *undone) if undone else ()),
        )

    def _why(self, c: selection.Contender, winner: selection.Contender, lanes: dict[int, Lane]) -> str:
        if c is winner:
            return "won: " + selection.strengths(c, self.metric)
        if _blocked(lanes[c.index]):
            return "lost: a reviewer blocked it"
        return "lost: " + selection.why_lost(c, winner, self.metric)

    def _result(self, lane: Lane, rank: int, n: int, why: str) -> CandidateResult:
        step = lane.implemented
        c = lane.contender()
        verdicts = [s.verdict for s in lane.reviews if s.verdict]
        changed = lane.workspace.head != self.run.workspace.base and bool(step.changes)
        summary = next((ln.strip() for ln in step.result.message.splitlines() if ln.strip()), "")
        cost = sum(s.cost_usd for s in self.run.record.steps if s.iteration == n and s.candidate == lane.index)
        return CandidateResult(
            candidate=lane.index,
            agent=step.record.adapter,
            step=step.record.id,
            ok=c.ok,
            gate_passed=c.gate_passed,
            failing=c.failing,
            score=c.score,
            violations=c.violations,
            diff_lines=c.diff_lines,
            verdict=None if not verdicts else ("block" if any(v.blocks for v in verdicts) else "pass"),
            cost_usd=round(cost, 6),
            summary=summary[:200],
            commit=step.record.commit if changed else None,
            ref=f"refs/loope/{_ref_name(self.run.record.run_id, n, lane.index)}" if changed else None,
            rank=rank,
            why=why,
        )


def diversified(prompt: str, index: int, count: int, tried: list[str]) -> str:
    """``prompt`` for candidate ``index`` of ``count`` under ``--diversify``: an approach of its own."""
    lines = [
        "",
        f"## You are candidate {index} of {count}",
        f"{count} agents work on this iteration at once, each in its own copy of the tree; the best result is"
        f" kept. Take an approach the others are unlikely to take (yours is approach {index} of {count}).",
    ]
    if tried:
        lines += ["Try something different from what the last iteration's candidates tried:"]
        lines += [f"- {idea}" for idea in tried]
    return prompt.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _blocked(lane: Lane) -> bool:
    return any(s.verdict and s.verdict.blocks for s in lane.reviews)


def _ref_name(run_id: str, n: int, index: int) -> str:
    return f"{run_id}/iter-{n}-cand-{index}"


def _all_at_once(
    calls: list[Callable[[], T]],
    workers: int,
    run: RunState,
    *,
    on_abort: Callable[[int, T], object] | None = None,
) -> list[T]:
    """Run ``calls`` on up to ``workers`` threads; on Ctrl-C or a crash the run's cancel kills the rest.

    ``on_abort`` records what the calls that did finish produced (what they spent counts).
    """
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="loope-candidate")
    futures: list[Future[T]] = [pool.submit(call) for call in calls]
    try:
        return [f.result() for f in futures]
    except BaseException:
        run.cancel.set()
        pool.shutdown(wait=True)
        if on_abort is not None:
            for i, future in enumerate(futures):
                if not future.cancelled() and future.exception() is None:
                    on_abort(i, future.result())
        raise
    finally:
        pool.shutdown(wait=True)
