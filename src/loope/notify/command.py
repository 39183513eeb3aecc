"""``--notify cmd:COMMAND``: the user's own command, run once when the run finishes."""

from __future__ import annotations

import os
from pathlib import Path

from loope.events import Event, RunFinished, RunStarted
from loope.notify.delivery import NotifyLog
from loope.proc import run_process

TIMEOUT_S = 60.0
OUTPUT_LOG = "notify-cmd.log"


class CommandNotifier:
    """Runs COMMAND through the shell in the workdir at run_finished.

    It gets the user's environment plus ``LOOPE_RUN_JSON`` (the run's run.json), ``LOOPE_RUN_ID``,
    ``LOOPE_STATUS``, ``LOOPE_STOP_REASON`` and ``LOOPE_RUN_DIR``; its output goes to
    ``<run_dir>/notify-cmd.log``. It runs on the engine's thread (at most ``TIMEOUT_S``) while the
    queued notifiers deliver in the background.
    """

    def __init__(self, command: str) -> None:
        self.command = command
        self.log = NotifyLog("cmd")
        self.run_dir: Path | None = None
        self.workdir: Path | None = None

    def on_event(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.run_dir = Path(event.run_dir)
            self.workdir = Path(event.workdir)
            self.log.open(self.run_dir)
        elif isinstance(event, RunFinished) and self.run_dir is not None:
            self._run(event)

    def _run(self, event: RunFinished) -> None:

        assert self.run_dir is not None
        env = {
            **os.environ,
            "LOOPE_RUN_JSON": str(self.run_dir / "run.json"),
            "LOOPE_RUN_ID": event.run_id,
            "LOOPE_STATUS": event.status,
            "LOOPE_STOP_REASON": event.stop_reason,
            "LOOPE_RUN_DIR": str(self.run_dir),
        }
        try:
            result = run_process(
                ["/bin/sh", "-c", self.command],
                cwd=self.workdir or self.run_dir,
                env=env,
                timeout=TIMEOUT_S,
                stdout_path=self.run_dir / OUTPUT_LOG,
                merge_stderr=True,
                term_grace_s=5.0,
            )
        except KeyboardInterrupt:  # Ctrl-C during the hook: the run is already recorded, so only the hook ends
            self.log.write(f"`{self.command}` interrupted")
            return
        if not result.ok:
            self.log.write(f"`{self.command}` failed: {result.describe()} (its output is in {OUTPUT_LOG})")
