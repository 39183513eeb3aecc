"""``loope logs RUN [-f]``: a run's events as the live view or plain lines; ``-f`` follows it to its end."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loope.cli.options import output_options, project_dir, workdir_option
from loope.cli.options import view as make_view

# A detached run is prepared by one process and driven by another that starts a moment later: a
# runner not (yet) alive is taken as gone only after this long without a new event.
GONE_AFTER_S = 15.0


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.option("-f", "--follow", "follow_", is_flag=True, help="Follow a running run until it ends.")
@workdir_option
@output_options
def logs(run_ref: str, follow_: bool, workdir: Path | None, **output: Any) -> int:
    """RUN's events as the live view (or plain lines); with -f, follow it until it ends."""
    from loope.records.rundir import find_run
    from loope.ui.follow import EventTail, OutputTail, follow

    rundir = find_run(project_dir(workdir), run_ref)
    view = make_view(**output)
    source = EventTail(rundir / "events.jsonl")
    view.replaying = True  # the events so far are drawn at their own time, not now
    ended = False
    for event in source.read():
        view.show(event)
        ended = ended or event.get("type") == "run_finished"
    view.replaying = False
    if follow_ and not ended:
        output_tail = OutputTail(rundir.root)

        def new_output() -> None:
            """Lines of a running check's output as they arrive."""
            if lines := output_tail.read(list(view.view.running.values())):
                view.output(lines)

        view.resume()
        for event in follow(source, alive=_alive(rundir.root), on_idle=new_output):
            view.show(event)
    view.close()
    return 0


def _alive(root: Path) -> Callable[[], bool]:
    """Whether the run can still write events: marked running, and its runner alive.

    A runner seen alive and then gone is gone at once; one never seen yet (a detached run whose
    background runner is still starting) is given ``GONE_AFTER_S`` to appear.
    """
    import json

    from loope.runners import runner_alive

    since = time.monotonic()
    seen: set[object] = set()

    def alive() -> bool:
        try:
            record = json.loads((root / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(record, dict) or record.get("status") != "running":
            return False
        pid = record.get("pid")
        if runner_alive(pid):
            seen.add(pid)
            return True
        return pid not in seen and time.monotonic() - since < GONE_AFTER_S

    return alive
