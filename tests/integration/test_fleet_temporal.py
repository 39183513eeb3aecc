"""Fleets on Temporal: a real dev server, a bare repository as the remote, real `loope worker` processes.

Each worker has a root of its own, standing in for a machine; the agents are exec: scripts, the
gate is real pytest. Stopping, killing and waiting are observed through the runs' records and the
workflows' own history and status query, never through the clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio.client import Client

from tests.conftest import GATE, PYTHON
from tests.integration.test_control import DEADLINE_S, loope, wait_for
from tests.integration.test_fleet import FIXER, fleet_dir, marks, run_record, write_fleet

HEARTBEAT_S = "2"
__all__ = ["fleet_dir", "marks"]  # fixtures shared with the local fleet's tests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Temporal dev server (``loope temporal dev``) on a free port with a fresh SQLite file."""
    where = tmp_path_factory.mktemp("temporal")
    port = free_port()
    log = (where / "server.log").open("w")
    argv = [sys.executable, "-m", "loope", "temporal", "dev", "--port", str(port), "--db", str(where / "dev.db")]
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    def serving() -> bool:  # listening is not yet serving: its frontend answers once its store is up
        async def health() -> bool:
            client = await Client.connect(f"127.0.0.1:{port}")
            return await asyncio.wait_for(client.service_client.check_health(), 10)

        try:
            return asyncio.run(health())
        except Exception:  # noqa: BLE001 - any failure to answer means: not yet
            return False

    try:
        wait_for(listening, "the Temporal dev server to listen")
        wait_for(serving, "the Temporal dev server to answer")
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        log.close()


class Workers:
    """``loope worker`` processes, each with its own root (its own "machine")."""

    def __init__(self, tmp_path: Path, address: str, queue: str) -> None:
        self.tmp_path, self.address, self.queue = tmp_path, address, queue
        self.procs: list[subprocess.Popen[bytes]] = []
        self.remote = tmp_path / "remote.git"
        """The bare repository every "machine" reaches."""
        subprocess.run(["git", "init", "-q", "--bare", str(self.remote)], check=True)

    def start(self, name: str, *, slots: int = 1, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"worker-{name}.log"
        argv = [sys.executable, "-m", "loope", "worker", "--temporal", self.address, "--task-queue", self.queue]
        argv += ["--slots", str(slots), "--root", str(self.tmp_path / f"machine-{name}")]
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, start_new_session=True
            )
        self.procs.append(proc)
        connected = lambda: "loope worker: task queue" in log.read_text()  # noqa: E731
        wait_for(lambda: connected() or proc.poll() is not None, f"worker {name} to connect")
        assert connected(), log.read_text()  # a worker that gave up says why, at once
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


@pytest.fixture
def workers(tmp_path: Path, temporal: str, request: pytest.FixtureRequest) -> Iterator[Workers]:
    pool = Workers(tmp_path, temporal, f"q-{request.node.name}-{os.getpid()}"[:200])
    yield pool
    pool.close()


def submit_argv(path: Path, remote: Path, workers: Workers) -> list[str]:
    return [
        sys.executable,
        "-m",
        "loope",
        "fleet",
        str(path),
        "--plain",
        "--temporal",
        workers.address,
        "--remote",
        str(remote),
        "--task-queue",
        workers.queue,
        "--heartbeat",
        HEARTBEAT_S,
    ]


def submit(fleet_dir: Path, path: Path, remote: Path, workers: Workers) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        submit_argv(path, remote, workers),
        cwd=fleet_dir,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S * 2,
        check=False,
    )


def submit_in_background(fleet_dir: Path, path: Path, remote: Path, workers: Workers) -> subprocess.Popen[str]:
    return subprocess.Popen(
        submit_argv(path, remote, workers),
        cwd=fleet_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def workflow(address: str, fleet_dir: Path, task: str) -> tuple[dict, list[str]]:
    """The loop's workflow: its status query (a worker answers it) and the types of its history's events."""
    from temporalio.client import Client

    from loope.fleet.temporal.submit import workflow_key

    async def ask() -> dict:
        client = await Client.connect(address)
        status: dict = await client.get_workflow_handle(workflow_key(fleet_dir, "0001-fleet", task)).query("status")
        return status

    return asyncio.run(ask()), history(address, fleet_dir, task)


def fleet_workflow(fleet_dir: Path) -> dict | None:
    """The fleet's first loop as `loope fleet status` reports its workflow's status query (None: not yet)."""
    done = loope(fleet_dir, "fleet", "status", "0001", "--json")
    if done.returncode != 0:  # the fleet is not recorded yet
        return None
    return json.loads(done.stdout)["tasks"][0].get("workflow")


def history(address: str, fleet_dir: Path, task: str) -> list[str]:
    """The types of the events in the loop's workflow history (the server's, no worker needed)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    from loope.fleet.temporal.submit import workflow_key

    async def ask() -> list[str]:
        client = await Client.connect(address)
        handle = client.get_workflow_handle(workflow_key(fleet_dir, "0001-fleet", task))
        return [EventType.Name(e.event_type) for e in (await handle.fetch_history()).events]

    return asyncio.run(ask())


def implementer_iterations(record: dict) -> list[int]:
    return [s["iteration"] for s in record["steps"] if s["role"] == "implementer"]


def test_a_fleet_converges_on_two_workers(fleet_dir, agent_script, workers):
    remote = workers.remote
    agent = agent_script(FIXER.replace("COST", "0.01"))
    needs = {"alpha": 2, "beta": 2, "gamma": 1}
    path = write_fleet(fleet_dir, agent, needs, marks=True)
    workers.start("one")
    workers.start("two")

    done = submit(fleet_dir, path, remote, workers)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 3 loop(s) converged" in done.stdout
    for name, need in needs.items():
        record = run_record(fleet_dir, name)
        assert record["status"] == "converged", (name, record["stop_detail"])
        assert record["iterations"] == need
        assert implementer_iterations(record) == list(range(1, need + 1))
        assert record["totals"]["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in record["steps"]))
        repo = fleet_dir / "repos" / name
        branch = record["workspace"]["branch"]
        shown = subprocess.run(
            ["git", "show", f"{branch}:calc.py"], cwd=repo, capture_output=True, text=True, check=False
        )
        assert "return a + b" in shown.stdout  # the run's branch came home
        pushed = subprocess.run(
            ["git", "for-each-ref", "refs/loope/"], cwd=remote, capture_output=True, text=True, check=False
        )
        assert pushed.stdout.count("refs/loope/") == len(needs)
        show = loope(repo, "show", record["run_id"])
        assert show.returncode == 0, show.stderr
        ledger = (repo / ".loope" / "runs" / record["run_id"] / "ledger.jsonl").read_text().splitlines()
        assert [json.loads(line)["iteration"] for line in ledger] == list(range(1, need + 1))
    status, _ = workflow(workers.address, fleet_dir, "beta")
    assert status["state"] == "converged"
    assert status["completed"] == 2
    from loope.mcp.actions import list_loops

    (fleet,) = list_loops(fleet_dir, every=False)["fleets"]  # what the MCP tool loope_list answers
    assert (fleet["status"], fleet["on"]) == ("converged", workers.address)
    assert [(loop["task"], loop["status"]) for loop in fleet["loops"]] == [(n, "converged") for n in needs]


HELD_GATE = """
import os, pathlib, time
marks = pathlib.Path(MARKS)
if "a * b + 1" in pathlib.Path("calc.py").read_text():  # iteration 1's attempt (not the baseline's check)
    (marks / f"gate-{os.getpid()}").write_text(str(os.getpid()))
    while (marks / "hold").exists():
        time.sleep(0.05)
"""


def heartbeat(address: str, key: str) -> float | None:
    """What the loop's iteration in flight last said it had spent (None: no iteration in flight)."""
    from temporalio.client import Client

    async def ask() -> float | None:
        client = await Client.connect(address)
        described = await client.get_workflow_handle(key).describe()
        pending = described.raw_description.pending_activities
        if not pending or not pending[0].heartbeat_details.payloads:
            return None
        return float(json.loads(pending[0].heartbeat_details.payloads[0].data))

    return asyncio.run(ask())


def test_a_dead_worker_and_coordinator_lose_nothing(fleet_dir, agent_script, workers, marks):
    from loope.fleet.temporal.submit import workflow_key

    remote = workers.remote
    gate = marks.parent / "held_gate.py"
    gate.write_text(HELD_GATE.replace("MARKS", repr(str(marks))))
    path = write_fleet(fleet_dir, agent_script(FIXER.replace("COST", "0.01")), {"solo": 2}, marks=True)
    held = f"{PYTHON} {gate} && {GATE}"  # the gate waits for the test's word before running pytest
    path.write_text(path.read_text().replace(f"verify_cmd = {json.dumps(GATE)}", f"verify_cmd = {json.dumps(held)}"))
    first = workers.start("one")
    coordinator = submit_in_background(fleet_dir, path, remote, workers)
    key = workflow_key(fleet_dir, "0001-fleet", "solo")
    wait_for(lambda: list(marks.glob("gate-*")), "iteration 1's gate to start on the first worker")
    # Iteration 1's implementer finished (and was paid for); its worker says so in a heartbeat.
    wait_for(lambda: (heartbeat(workers.address, key) or 0) >= 0.01, "a heartbeat reporting the step's cost")
    # The machine dies mid-iteration: the worker, its gate, and the coordinator with them.
    os.killpg(first.pid, signal.SIGKILL)
    (gate_mark,) = marks.glob("gate-*")
    os.killpg(os.getpgid(int(gate_mark.read_text())), signal.SIGKILL)
    os.killpg(coordinator.pid, signal.SIGKILL)
    coordinator.communicate(timeout=DEADLINE_S)
    (marks / "hold").unlink()
    refused = loope(fleet_dir / "repos" / "solo", "resume", run_record(fleet_dir, "solo")["run_id"])
    assert refused.returncode == 2  # a local runner would run it a second time, beside its workflow
    assert "runs on Temporal" in refused.stderr
    workers.start("two")

    again = submit(fleet_dir, path, remote, workers)  # the same file: the same fleet, the same workflow

    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith("fleet 0001-fleet:"), again.stdout
    record = run_record(fleet_dir, "solo")
    assert record["status"] == "converged", record["stop_detail"]
    assert record["iterations"] == 2
    assert implementer_iterations(record) == [1, 2]  # the cut iteration ran again, counted once
    assert record["totals"]["cost_usd"] == pytest.approx(0.02)
    assert record["temporal"]["lost_cost_usd"] == pytest.approx(0.01)  # the lost attempt's step, still spent
    assert record["temporal"]["retried"] >= 1
    assert len(record["temporal"]["workers"]) == 1  # only the second worker finished iterations
    status, events = workflow(workers.address, fleet_dir, "solo")
    assert status["retried"] == record["temporal"]["retried"]
    assert events.count("EVENT_TYPE_WORKFLOW_EXECUTION_STARTED") == 1
    fleets = json.loads(loope(fleet_dir, "fleet", "status", "--json").stdout)
    assert len(fleets) == 1
    assert fleets[0]["cost_usd"] == pytest.approx(0.03)  # the fleet's budget counts the lost spend


@pytest.mark.parametrize("how", ["fleet stop", "stop RUN"])
def test_a_stop_signals_the_loop(fleet_dir, agent_script, workers, marks, how):
    remote = workers.remote
    agent = agent_script(FIXER.replace("COST", "0.01"))
    path = write_fleet(fleet_dir, agent, {"long": 3}, marks=True)
    workers.start("one", env={"FLEET_MARKS": str(marks)})
    coordinator = submit_in_background(fleet_dir, path, remote, workers)
    try:
        wait_for((marks / "long-1").exists, "iteration 1's agent to start")
        if how == "fleet stop":
            stopped = loope(fleet_dir, "fleet", "stop", "0001", "--now")
            assert stopped.returncode == 0, stopped.stderr
            assert "stop signalled to 1 loop(s)" in stopped.stdout, stopped.stderr
        else:  # as the dashboard's Stop and the MCP tool ask: through the run's own store
            run_id = run_record(fleet_dir, "long")["run_id"]
            stopped = loope(fleet_dir / "repos" / "long", "stop", run_id, "--now")
            assert stopped.returncode == 0, stopped.stderr
        out, _ = coordinator.communicate(timeout=DEADLINE_S)
    finally:
        if coordinator.poll() is None:
            os.killpg(coordinator.pid, signal.SIGKILL)
    assert coordinator.returncode == 1, out
    record = run_record(fleet_dir, "long")
    assert record["status"] == "stopped", record["stop_detail"]
    assert record["completed"] == 0
    status, events = workflow(workers.address, fleet_dir, "long")
    assert status["state"] == "stopped"
    assert "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED" in events
    assert "EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED" in events


LIMITED = """
marker = pathlib.Path("../limited-once")
if not marker.exists():
    marker.write_text("")
    print(json.dumps({"type": "limit", "reset_at": int(__import__("time").time()) + 8}))
    sys.exit(1)
pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
print("fixed")
"""


def test_a_usage_limit_is_a_durable_timer_that_survives_a_worker_restart(fleet_dir, agent_script, workers):
    path = write_fleet(fleet_dir, agent_script(LIMITED), {"quota": 1}, marks=True)
    first = workers.start("one")
    coordinator = submit_in_background(fleet_dir, path, workers.remote, workers)
    seen: list[dict] = []

    def waiting() -> bool:
        state = fleet_workflow(fleet_dir)
        if state and state["state"] == "waiting":
            seen.append(state)
        return bool(seen)

    try:
        wait_for(waiting, "the loop to wait for the limit's reset")
        os.killpg(first.pid, signal.SIGKILL)  # no worker while the quota resets
        first.wait(30)
        assert seen[0]["waiting_until"] is not None
        events = history(workers.address, fleet_dir, "quota")
        assert "EVENT_TYPE_TIMER_STARTED" in events  # a durable timer, not an activity holding a slot
        assert events.count("EVENT_TYPE_ACTIVITY_TASK_COMPLETED") == 1
        workers.start("two")
        out, _ = coordinator.communicate(timeout=DEADLINE_S)
    finally:
        if coordinator.poll() is None:
            os.killpg(coordinator.pid, signal.SIGKILL)
    assert coordinator.returncode == 0, out
    record = run_record(fleet_dir, "quota")
    assert record["status"] == "converged", record["stop_detail"]
    assert record["iterations"] == 1
    assert len(record["discarded_steps"]) == 1  # the limited attempt: set aside, its spend kept
    events = history(workers.address, fleet_dir, "quota")
    assert "EVENT_TYPE_TIMER_FIRED" in events


def test_temporal_options_without_temporal_are_refused(fleet_dir, agent_script):
    remote = fleet_dir / "remote.git"  # never reached: the options are refused first
    path = write_fleet(fleet_dir, agent_script("print('x')"), {"a": 1})
    done = loope(fleet_dir, "fleet", str(path), "--remote", str(remote))
    assert done.returncode == 2
    assert "--remote needs --temporal" in done.stderr
    missing = loope(fleet_dir, "fleet", str(path), "--temporal", "127.0.0.1:1")
    assert missing.returncode == 2
    assert "--temporal needs --remote" in missing.stderr


def test_an_unreachable_server_is_one_clear_line(fleet_dir, agent_script):
    remote = fleet_dir / "remote.git"
    path = write_fleet(fleet_dir, agent_script("print('x')"), {"a": 1})
    done = loope(fleet_dir, "fleet", str(path), "--temporal", f"127.0.0.1:{free_port()}", "--remote", str(remote))
    assert done.returncode == 2, done.stderr
    assert "cannot reach Temporal at" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (fleet_dir / "repos" / "a" / ".loope" / "runs").exists()


def test_a_workflow_temporal_refuses_fails_its_task_in_one_line(fleet_dir, agent_script, workers):
    path = write_fleet(fleet_dir, agent_script("print('x')"), {"a": 1})
    argv = submit_argv(path, workers.remote, workers)[3:]  # after `python -m loope`
    done = loope(fleet_dir, *argv, "--namespace", "no-such-namespace")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (task,) = json.loads(loope(fleet_dir, "fleet", "status", "0001", "--json").stdout)["tasks"]
    assert task["status"] == "failed"
    assert "Temporal refused to start the loop's workflow" in task["error"]
