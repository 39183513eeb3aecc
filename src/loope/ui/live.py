"""The live terminal view: what happened scrolls up; a header and the steps in flight are redrawn below.

The redrawn part says where the run stands (id, goal, elapsed, cost against the budget, tokens,
iteration with a bar), who is working (role, agent, elapsed, last action, latest message) and,
while a check runs, the last lines of its output as they arrive.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from loope.records.runview import action_text, now
from loope.records.tails import CHECK_ADAPTERS, check_log, tail_lines
from loope.ui.base import View
from loope.ui.lines import describe, duration, lane_lines, progress_text, summary_lines, wait_text

_STYLES = {"ok": "green", "passed": "green", "failed": "red", "BLOCK": "yellow", "PASS": "green", "kept": "green"}
BAR = 10
TICK_S = 0.125  # redraws a second: 8
OUTPUT_LINES = 5


def bar(done: int, total: int, width: int = BAR) -> str:
    filled = min(width, round(width * done / total)) if total else 0
    return "█" * filled + "░" * (width - filled)


class LiveView(View):
    """Draws from one thread at a time: rich's own refresh thread could render the live region while an
    engine thread prints above it, and the two would disagree on its height (stale lines left behind)."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console()
        self.live = Live(
            Text(""), console=self.console, auto_refresh=False, transient=True, get_renderable=self._render
        )
        self._drawing = threading.RLock()
        self._ticking = threading.Event()
        self._ticker: threading.Thread | None = None

    def _start(self) -> None:
        with self._drawing:
            self.live.start()
            self.live.refresh()
        self._ticking.set()
        self._ticker = threading.Thread(target=self._tick, name="loope-live", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while self._ticking.is_set():
            time.sleep(TICK_S)
            with self._drawing:
                if self._ticking.is_set():
                    self.live.refresh()

    def _stop(self) -> None:
        # No join: the caller may hold the drawing lock the ticker waits for; it sees the flag and ends.
        self._ticking.clear()
        with self._drawing:
            self.live.stop()

    # -- the redrawn part -----------------------------------------------------------------------

    def header(self, at: float | None = None) -> list[Text]:
        """Two lines that never wrap: who and what; where it stands."""
        v = self.view
        goal = " ".join(v.goal.split())
        first = Text.assemble(("loope ", "bold"), (v.run_id, "bold cyan"), " · ", goal)
        progress = progress_text(v, at).split(" · ", 1)
        second = Text.assemble(progress[0] + " ", (bar(v.iteration, v.max_iters), "cyan"), " · " + progress[1])
        for line in (first, second):
            line.no_wrap = True
            line.overflow = "ellipsis"
        return [first, second]

    def _render(self) -> RenderableType:
        v = self.view
        if not v.run_id:
            return Text("")
        rows: list[RenderableType] = [*self.header(v.last_ts if self.replaying else None)]
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, overflow="ellipsis")
        clock = now()
        for step in v.running.values():
            started = f"{duration(clock - step.started)}" if step.started else ""
            table.add_row(Spinner("dots", style="cyan"), Text(f"{step.label}  {started}", style="bold"))
            said = " · ".join(x for x in (step.action, step.message) if x)
            if said:
                table.add_row("", Text(said, style="dim", no_wrap=True, overflow="ellipsis"))
            if step.role == "verifier" and step.adapter in CHECK_ADAPTERS:
                for line in self.check_output(step.dir):
                    table.add_row("", Text(f"| {line}", style="dim", no_wrap=True, overflow="ellipsis"))
        rows.append(table)
        rows += [Text(line, no_wrap=True, overflow="ellipsis") for line in lane_lines(v.lanes, clock)]
        if v.wait:
            rows.append(Text(wait_text(v.wait), style="yellow", no_wrap=True, overflow="ellipsis"))
        return Group(*rows)

    def check_output(self, rel: str) -> list[str]:
        if not self.view.run_dir or not rel:
            return []
        log = check_log(Path(self.view.run_dir) / rel)
        return tail_lines(log, OUTPUT_LINES) if log else []

    # -- the part that scrolls ------------------------------------------------------------------

    def _style(self, line: str) -> Text:
        text = Text(line)
        if line.startswith("iteration "):
            text.stylize("bold cyan")
        for word, style in _STYLES.items():
            text.highlight_words([f" {word} ", f" {word}", f": {word}"], style=style)
        if "⚠" in line or "✗" in line or line.startswith("warning"):
            text.stylize("yellow")
        return text

    def show(self, event: dict[str, Any]) -> None:
        with self._drawing:
            self._show(event)

    def _show(self, event: dict[str, Any]) -> None:
        self.view.apply(event)
        kind = event.get("type")
        if kind == "run_started" and not self.replaying and not self._ticking.is_set():
            self._start()
        if kind == "agent_event":
            text = action_text(event.get("event") or {})
            if text:
                self.console.print(Text(f"     {text}", style="dim"), no_wrap=True, overflow="ellipsis")
        elif kind == "run_finished":
            self._stop()
            lines = summary_lines(event, self.view.run_id, self.view)
            style = "bold green" if event.get("converged") else "bold yellow"
            self.console.print(Text(lines[0], style=style))
            for line in lines[1:]:
                self.console.print(line, highlight=False, markup=False)
            return
        for line in describe(event, self.view):
            self.console.print(self._style(line))
        if not self.replaying:
            self.live.refresh()

    def resume(self) -> None:
        self._start()

    def close(self) -> None:
        self._stop()
