"""Harness overhead, reported as ratios measured in one run.

1. A ``--dry-run`` loop on a generated git repository of N files against the floor, ``git worktree
   add`` of the same repository (target: at most 1.2x).
2. The per-iteration part of a loop at 2,000 and 20,000 files (it must not grow with repo size):
   the median time between iteration starts in the run's own events, with a trivial exec agent.
3. Startup: ``loope --version`` and ``loope runs`` against a bare ``python -c pass`` (target: 5x).

Usage: python benchmarks/overhead.py [--files 20000] [--small 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "loope"
LOOPE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "loope"]  # the console script users run
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
    "NO_COLOR": "1",
}


def sh(args: list[str], cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(args: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def make_repo(root: Path, files: int, size: int = 4096) -> Path:
    repo = root / f"repo-{files}"
    line = b"x" * 63 + b"\n"
    body = line * (size // len(line))
    for i in range(files):
        path = repo / f"d{i // 500:03d}" / f"f{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    sh(["git", "init", "-q", "-b", "main"], repo)
    sh(["git", "add", "-A"], repo)
    sh(["git", "commit", "-qm", "generated"], repo)
    return repo


def floor(repo: Path, n: int) -> float:
    target = repo.parent / f"wt-{repo.name}-{n}"
    elapsed = timed(["git", "worktree", "add", "-q", "-b", f"bench-{n}", str(target), "HEAD"], repo)
    sh(["git", "worktree", "remove", "--force", str(target)], repo)
    sh(["git", "branch", "-D", f"bench-{n}"], repo)
    return elapsed


def dry_run(repo: Path) -> float:
    elapsed = timed([*LOOPE, "run", "bench", "--dry-run", "--no-review", "--quiet"], repo)
    for run in (repo / ".loope" / "runs").iterdir():  # keep the disk from filling with 80 MB workspaces
        if (run / "workspace").exists():
            sh(["git", "worktree", "remove", "--force", str(run / "workspace")], repo)
    return elapsed


def per_iteration(repo: Path, agent: str, iterations: int = 8) -> float:
    """Median wall time between one iteration's start and the next, from the run's own events."""
    args = [*LOOPE, "run", "bench", "--implementer", agent, "--no-review", "--quiet"]
    timed([*args, "--max-iters", str(iterations), "--stall-after", "100"], repo, ok=(0, 1))
    run = sorted((repo / ".loope" / "runs").iterdir())[-1]
    starts = []
    for line in (run / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "iteration_started":
            starts.append(datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp())
    sh(["git", "worktree", "remove", "--force", str(run / "workspace")], repo)
    return median([b - a for a, b in itertools.pairwise(starts)])


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="loope-bench-"))
    try:
        agent_script = root / "agent.sh"
        agent_script.write_text('#!/bin/sh\necho "$LOOPE_ITERATION" >> loope-bench.txt\necho done\n')
        agent_script.chmod(0o755)
        agent = f"exec:{agent_script}"
        print(f"generating repositories of {args.files} and {args.small} files …", flush=True)
        big = make_repo(root, args.files)
        small = make_repo(root, args.small)
        size_mb = sum(p.stat().st_size for p in big.rglob("*.txt")) / 1e6

        floors, dries = [], []
        for i in range(args.repeat):  # interleaved, so the disk's mood weighs on both alike
            floors.append(floor(big, i))
            dries.append(dry_run(big))
        f, d = median(floors), median(dries)
        print(f"\n1. dry-run loop vs git worktree add, {args.files} files ({size_mb:.0f} MB), median of {args.repeat}:")
        print(f"   git worktree add {f:.3f}s · loope run --dry-run {d:.3f}s · ratio {d / f:.2f}x (target ≤ 1.2x)")

        print("\n2. per-iteration cost (median time between iteration starts, 8 iterations, trivial exec agent):")
        per: dict[int, float] = {}
        for repo, files in ((small, args.small), (big, args.files)):
            per[files] = median([per_iteration(repo, agent) for _ in range(3)])
            print(f"   {files:>6} files: {per[files] * 1000:.0f} ms per iteration")
        print(f"   ratio {args.files}/{args.small} files: {per[args.files] / per[args.small]:.2f}x (must stay ≈ 1x)")

        print("\n3. startup, median of 20 (ratio to `python -c pass`):")
        bare = median([timed([sys.executable, "-c", "pass"], root) for _ in range(20)])
        click_only = median([timed([sys.executable, "-c", "import click"], root) for _ in range(20)])
        version = median([timed([*LOOPE, "--version"], root) for _ in range(20)])
        runs = median([timed([*LOOPE, "runs"], big) for _ in range(20)])
        print(f"   python -c pass {bare * 1000:.0f} ms · python -c 'import click' {click_only / bare:.1f}x")
        print(f"   loope --version {version * 1000:.0f} ms · {version / bare:.1f}x (target ≤ 5x)")
        print(
            f"   loope runs ({len(list((big / '.loope' / 'runs').iterdir()))} runs) {runs * 1000:.0f} ms"
            f" · {runs / bare:.1f}x (target ≤ 5x)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
