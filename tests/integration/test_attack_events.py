"""Forged lines in a run's events.jsonl: no reader believes them, and the runner puts the file back.

The attacker is an ``exec:`` implementer that writes into ``$LOOPE_RUN_DIR/events.jsonl``: lines
saying the gate passed and the run converged, numbered as the runner numbers its own (the next
``seq``) or not at all; or a whole new file in its place. Real pytest is the gate (it fails).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from loope.records.runview import read_view
from loope.records.tails import EventTail
from loope.sandbox import bwrap
from tests.conftest import GATE, Project, unsandboxed
from tests.helpers.attacks import run_attack, shell_implementer, violations

SANDBOX = ["off", pytest.param("on", marks=pytest.mark.skipif(not bwrap.support().works, reason="needs bubblewrap"))]

# Python run by the attacking shell script: forged events appended to the run's events.jsonl.
FORGE = """
import json, os
path = os.path.join(os.environ["LOOPE_RUN_DIR"], "events.jsonl")
lines = open(path).read().splitlines()
seq = json.loads(lines[-1]).get("seq", 0)
base = {"ts": "2026-12-01T00:00:00Z", "run_id": os.environ["LOOPE_RUN_ID"], "forged": True}
gate = {**base, "type": "verify_finished", "step": 2, "iteration": 1, "passed": True, "failing": 0}
done = {**base, "type": "run_finished", "status": "converged", "converged": True, "stop_reason": "converged"}
with open(path, "a") as log:
    log.write(json.dumps({**gate, "seq": seq + 1}) + "\\n")  # numbered as the runner numbers its own
    log.write(json.dumps({**done, "seq": seq + 2}) + "\\n")
    log.write(json.dumps(done) + "\\n")  # not numbered at all
    log.write(json.dumps({**done, "seq": 1}) + "\\n")  # numbered wrong
"""
REPLACE = """
import json, os
path = os.path.join(os.environ["LOOPE_RUN_DIR"], "events.jsonl")
os.rename(path, path + ".old")
done = {"type": "run_finished", "status": "converged", "converged": True, "forged": True, "seq": 1}
open(path, "w").write(json.dumps(done) + "\\n")
"""


def _shell(python: str, then: str = "") -> str:
    return f"python3 - <<'PY' || echo 'the write was refused'\n{python}\nPY\n{then}echo done\n"


def _events(proj: Project) -> list[dict]:
    return [json.loads(line) for line in (proj.runs()[-1] / "events.jsonl").read_text().splitlines()]


def _runners_only(proj: Project) -> None:
    events = _events(proj)
    assert not [e for e in events if e.get("forged")]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run_finished"
    assert events[-1]["status"] != "converged"


@pytest.mark.parametrize("sandbox", SANDBOX)
@pytest.mark.parametrize("forgery", ["appended lines", "a new file in its place"])
def test_forged_events_are_put_back_and_never_believed(project, cli, sandbox, forgery):
    attack = _shell(FORGE if forgery == "appended lines" else REPLACE)
    result = run_attack(cli, project, shell_implementer(project.path.parent, attack), "--sandbox", sandbox)

    assert result.exit_code == 1, result.out + result.err
    assert not project.run_json()["converged"]
    _runners_only(project)
    if sandbox == "off":  # with the sandbox the run directory is read-only: the write itself fails
        assert any("events.jsonl is written only by loope" in v for v in violations(project))
    run_id = project.runs()[-1].name
    shown = cli("logs", run_id, cwd=project.path)
    assert shown.exit_code == 0, shown.err
    assert "converged" not in shown.out
    view, _ = read_view(project.runs()[-1] / "events.jsonl")
    assert view.gate is not None
    assert not view.gate.passed


def test_while_the_step_runs_readers_skip_lines_the_runner_did_not_number(project, cli, tmp_path):
    # The agent forges, then waits for the test to have read the run as a live reader would.
    ready, go = tmp_path / "ready", tmp_path / "go"
    wait = f"touch {ready}\nwhile [ ! -e {go} ]; do sleep 0.05; done\n"
    naive = FORGE.replace('log.write(json.dumps({**gate, "seq": seq + 1}) + "\\n")', "pass").replace(
        'log.write(json.dumps({**done, "seq": seq + 2}) + "\\n")', "pass"
    )
    attack = shell_implementer(project.path.parent, _shell(naive, then=wait))

    seen: dict[str, object] = {}

    def read_live() -> None:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        events = project.runs()[-1] / "events.jsonl"
        seen["forged on disk"] = '"forged": true' in events.read_text()
        seen["taken"] = EventTail(events).read()
        seen["view"] = read_view(events)[0]
        go.touch()

    reader = threading.Thread(target=read_live)
    reader.start()
    result = unsandboxed(cli)("run", "fix add", "--implementer", attack, "--no-review", "--max-iters", "1",
                              "--verify-cmd", GATE, "--plain", cwd=project.path)  # fmt: skip
    reader.join()

    assert result.exit_code == 1, result.out + result.err
    assert seen["forged on disk"] is True  # the forgery was there as the reader read
    taken = seen["taken"]
    assert isinstance(taken, list)
    assert taken
    assert not [e for e in taken if e.get("forged")]
    assert seen["view"].finished is None  # type: ignore[attr-defined]
    _runners_only(project)
