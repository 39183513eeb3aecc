"""What a fleet costs against its floor: loops whose agent sleeps a fixed time, on this machine and on Temporal.

Eight loops of three iterations each; the agent sleeps ``--sleep`` seconds and the gate is a grep,
so the floor of a fleet is the agents' sleep divided by how many run at once. Every row is measured
in this one run (a Temporal dev server started for it, workers with roots of their own):

  local, --jobs 1       the fleet one loop at a time vs 8 x 3 x sleep
  local, --jobs 4       four at a time vs 8 x 3 x sleep / 4
  Temporal, 1 worker    one `loope worker --slots 4` vs the same floor
  Temporal, 2 workers   two `loope worker --slots 2` vs the same floor
  Temporal vs local     Temporal with one worker vs local --jobs 4: the overhead of a workflow per loop,
                        an activity per iteration and the run travelling through a git remote

Usage: python benchmarks/fleet.py [--loops 8] [--iters 3] [--sleep 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from costs import ENV, LOOPE, Table, sh, timed

AGENT = """#!/bin/sh
sleep {sleep}
if [ "$LOOPE_ITERATION" -ge {iters} ]; then touch fixed; else echo "try $LOOPE_ITERATION" > notes.txt; fi
echo done
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fleet_file(root: Path, loops: int, iters: int, agent: Path) -> Path:
    """``loops`` small repositories under ``root`` and a fleet file naming them."""
    root.mkdir(parents=True)
    lines = ["[defaults]", 'sandbox = "off"', f'implementer = "exec:{agent}"', "reviewers = []"]
    # The gate names no file: a file a gate names is protected from the agent.
    lines += ['verify_cmd = "ls | grep -qx fixed"', f"max_iters = {iters + 1}", "stall_after = 9", ""]
    for i in range(loops):
        repo = root / f"loop{i}"
        repo.mkdir()
        sh(["git", "init", "-q", "-b", "main"], repo)
        (repo / "README.md").write_text(f"loop {i}\n")
        sh(["git", "add", "-A"], repo)
        sh(["git", "commit", "-qm", "initial"], repo)
        lines += ["[[task]]", f'name = "loop{i}"', f'workdir = "loop{i}"', 'goal = "write fixed"', ""]
    path = root / "fleet.toml"
    path.write_text("\n".join(lines))
    return path


def converged(root: Path, loops: int) -> None:
    for i in range(loops):
        (run,) = (root / f"loop{i}" / ".loope" / "runs").iterdir()
        record = json.loads((run / "run.json").read_text())
        if record["status"] != "converged":
            raise SystemExit(f"loop{i} ended {record['status']}: {record.get('stop_detail')}")


def local(root: Path, loops: int, iters: int, agent: Path, jobs: int) -> float:
    path = fleet_file(root, loops, iters, agent)
    elapsed = timed([*LOOPE, "fleet", str(path), "--plain", "--jobs", str(jobs)], root)
    converged(root, loops)
    return elapsed


def on_temporal(root: Path, loops: int, iters: int, agent: Path, *, address: str, slots: list[int]) -> float:
    path = fleet_file(root, loops, iters, agent)
    remote = root / "remote.git"
    sh(["git", "init", "-q", "--bare", str(remote)], root)
    queue = f"bench-{root.name}"
    workers = [
        subprocess.Popen(
            [
                *LOOPE,
                "worker",
                "--temporal",
                address,
                "--task-queue",
                queue,
                "--slots",
                str(n),
                "--root",
                str(root / f"m{i}"),
            ],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for i, n in enumerate(slots)
    ]
    try:
        time.sleep(3)  # the workers connect (outside the measured time)
        argv = [*LOOPE, "fleet", str(path), "--plain", "--temporal", address, "--remote", str(remote)]
        elapsed = timed([*argv, "--task-queue", queue], root)
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(30)
    converged(root, loops)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loops", type=int, default=8)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=2.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="loope-bench-fleet-"))
    agent = root / "agent.sh"
    agent.write_text(AGENT.format(sleep=args.sleep, iters=args.iters))
    agent.chmod(0o755)
    port = free_port()
    server = subprocess.Popen(
        [*LOOPE, "temporal", "dev", "--port", str(port), "--db", str(root / "temporal.db")],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    table = Table()
    sleeps = args.loops * args.iters * args.sleep
    n = f"{args.loops} loops x {args.iters} iterations, {args.sleep:g}s agent"
    try:
        time.sleep(4)
        address = f"127.0.0.1:{port}"
        one = local(root / "jobs1", args.loops, args.iters, agent, 1)
        table.add(f"{n}, local --jobs 1", f"{one:.1f} s", f"{sleeps:.1f} s (agents' sleep)", one / sleeps, "< 1.5x")
        four = local(root / "jobs4", args.loops, args.iters, agent, 4)
        floor4 = sleeps / 4
        table.add(f"{n}, local --jobs 4", f"{four:.1f} s", f"{floor4:.1f} s (sleep / 4)", four / floor4, "< 2x")
        table.add("--jobs 1 vs --jobs 4", f"{one:.1f} s", f"{four:.1f} s", one / four, "> 2.5x")
        t1 = on_temporal(root / "temporal1", args.loops, args.iters, agent, address=address, slots=[4])
        table.add(f"{n}, Temporal, 1 worker x 4 slots", f"{t1:.1f} s", f"{floor4:.1f} s", t1 / floor4, "< 2.5x")
        t2 = on_temporal(root / "temporal2", args.loops, args.iters, agent, address=address, slots=[2, 2])
        table.add(f"{n}, Temporal, 2 workers x 2 slots", f"{t2:.1f} s", f"{floor4:.1f} s", t2 / floor4, "< 2.5x")
        per = (t1 - four) * 4 / (args.loops * args.iters)
        table.add(
            f"Temporal vs local, 4 at once ({per:+.2f} s per iteration)",
            f"{t1:.1f} s",
            f"{four:.1f} s",
            t1 / four,
            "< 1.5x",
        )
        print("\n" + table.render())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
