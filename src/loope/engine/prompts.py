"""The prompts each role receives, from the templates in ``prompts/``."""

from __future__ import annotations

import os
from dataclasses import field
from functools import cache
from importlib.resources import files
from pathlib import Path
from string import Template

from loope.engine.run import RunState
from loope.record import record
from loope.records import ledger
from loope.records.rundir import LOOPE_DIR
from loope.verify.report import GateReport
from loope.workspace.workspace import Workspace

MAX_DIFF_CHARS = 60_000
MAX_FILE_BYTES = 32_000
"""Bytes of an agent-written file (the state file, program.md) inlined into a prompt at most."""
STATE_RULES = """\
Your memory between sessions is the state file `{path}` (its path is also in $LOOPE_STATE_FILE).
Read it first and update it before you finish:
- frontmatter: keep `loop_id`, set `status` (in-progress, done or blocked), increment `iteration`;
- keep its sections: Goal, Progress, Next Action, Notes;
- do one concrete step per session and record it under Progress, and the next one under Next Action;
- set `status: done` only when the goal is fully met; set `status: blocked`, with the reason under Notes,
  only when you cannot go on without help."""


@cache
def _template(name: str) -> Template:
    return Template(files("loope.engine").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8"))


def render(name: str, **values: object) -> str:
    return _template(name).safe_substitute({k: str(v) for k, v in values.items()})


def section(title: str, body: str | None) -> str:
    return f"\n# {title}\n{body.strip()}\n" if body and body.strip() else ""


def fenced(text: str, lang: str = "") -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


@record()
class PromptContext:
    """What the prompts of one iteration draw on."""

    run_id: str
    goal: str
    iteration: int
    max_iters: int
    contract: str | None = None
    program: str | None = None
    state_path: str | None = None
    state_text: str | None = None
    ledger: str = ""
    feedback: str = ""
    memories: str = ""
    critique: str = ""
    budget: str = ""
    verify_cmd: str | None = None
    metric: str | None = None
    protect: list[str] = field(default_factory=list)
    editable: list[str] = field(default_factory=list)

    def _base(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "goal": self.goal,
            "iteration": self.iteration,
            "max_iters": self.max_iters,
        }

    def _state(self) -> str:
        if not self.state_path:
            return ""
        body = STATE_RULES.format(path=self.state_path)
        if self.state_text:
            body += "\n\nIts current contents:\n" + fenced(self.state_text, "markdown")
        return body

    def _checks(self) -> str:
        lines = []
        if self.verify_cmd:
            lines.append(
                f"- When you finish, loope runs `{self.verify_cmd}` in this directory; it must pass."
                " You cannot change how your work is checked."
            )
        if self.metric:
            lines.append(f"- Then it scores the result with `{self.metric}`; only an improvement is kept.")
        if self.protect:
            lines.append(f"- Protected (changes are undone): {', '.join(self.protect)}")
        if self.editable:
            lines.append(f"- Change only files matching: {', '.join(self.editable)}")
        return "\n".join(lines)

    def implementer(self) -> str:
        sections = "".join(
            [
                section("Design contract", self.contract),
                section("Program", self.program),
                # Lessons of other runs first: this run's own memory and critique, read later, weigh more.
                section("RECALLED MEMORIES (lessons from earlier runs in this project)", self.memories),
                section("State file", self._state()),
                section("Attempts so far", self.ledger),
                section("Feedback from the last iteration", self.feedback),
                section("REVIEWER FEEDBACK", self.critique),
                section("Budget", self.budget),
            ]
        )
        return render("implementer", **self._base(), sections=sections, checks=self._checks())

    def designer(self) -> str:
        return render("designer", **self._base(), sections=section("Program", self.program))

    def reviewer(self, changes: str, gate_summary: str, *, verifier: bool = False) -> str:
        sections = section("Design contract", self.contract) + section("Verification", gate_summary)
        against = " and the acceptance criteria of the design contract (BLOCK when one is not met)"
        return render(
            "verifier" if verifier else "reviewer",
            **self._base(),
            sections=sections,
            changes=changes,
            against_contract=against if self.contract else "",
        )

    def critic(self, summaries: str, state: str, last_response: str) -> str:
        return render(
            "critic",
            **self._base(),
            summaries=summaries or "(none yet)",
            state=fenced(state[:3000], "markdown") if state else "(no state file)",
            last_response=fenced(last_response[:1000]) if last_response else "(none)",
        )


def changes_block(files: list[tuple[str, str]], diff: str) -> str:
    """The changed files with their +/- and the diff, bounded for a prompt."""
    if not files:
        return "No files have changed yet."
    listing = "\n".join(f"- {path} ({stat})" for path, stat in files)
    shown = diff if len(diff) <= MAX_DIFF_CHARS else diff[:MAX_DIFF_CHARS] + "\n… (diff truncated)"
    return f"{listing}\n\n{fenced(shown, 'diff')}"


def read_optional(path: Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """A text file the agent may have broken (deleted, replaced by a directory): None when unreadable.

    Only its first ``limit`` bytes are read and inlined: the agent writes these files, and a prompt
    (each iteration's) must not grow with them. A line after the cut says where the whole file is.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(limit + 1)
            size = os.fstat(handle.fileno()).st_size
    except OSError:
        return None
    text = head[:limit].decode("utf-8", errors="replace")
    if len(head) <= limit:
        return text
    return (
        f"{text.rstrip()}\n\n… (cut: only the first {limit} of its {size} bytes are shown here;"
        f" the whole file is {path})"
    )


def context_for(
    run: RunState, iteration: int, *, contract: str | None, memories: str, protect: list[str]
) -> PromptContext:
    """What an iteration's prompts draw on: the goal, the state file, the ledger, the feedback, the budget."""
    spec, loop = run.spec, run.loop
    return PromptContext(
        run_id=run.record.run_id,
        goal=spec.goal,
        iteration=iteration,
        max_iters=spec.max_iters,
        contract=contract,
        program=read_optional(spec.workdir / LOOPE_DIR / "program.md"),
        state_path=str(run.state_file),
        state_text=read_optional(run.state_file),
        ledger=ledger.compact(run.attempts(), best=run.record.best_score, metric=spec.metric_mode),
        feedback=loop.feedback,
        memories=memories,
        critique=loop.critique,
        budget=budget_text(run, iteration),
        verify_cmd=spec.verify_cmd if not spec.dry_run else None,
        metric=spec.metric_cmd,
        protect=protect,
        editable=list(spec.editable),
    )


def budget_text(run: RunState, iteration: int) -> str:
    spec, totals = run.spec, run.record.totals
    parts = [f"iteration {iteration} of at most {spec.max_iters}"]
    if spec.max_cost is not None:
        parts.append(f"${totals.cost_usd:.2f} of ${spec.max_cost:.2f} spent")
    if spec.max_tokens is not None:
        parts.append(f"{totals.tokens} of {spec.max_tokens} tokens used")
    if spec.max_time is not None:
        parts.append(f"{run.elapsed():.0f}s of {spec.max_time:.0f}s elapsed")
    return "; ".join(parts) + "."


def review_inputs(workspace: Workspace, gate: GateReport | None) -> tuple[str, str]:
    """What reviewers are shown: the changes so far, and how the gate went."""
    changes = changes_block([(c.path, c.stat) for c in workspace.changes()], workspace.diff())
    gate_summary = "No verify command is set."
    if gate is not None:
        gate_summary = f"The verify command `{gate.command}` passed."
        if gate.output.strip():
            gate_summary += f" The last lines of its output:\n{fenced(gate.output, 'text')}"
    return changes, gate_summary
