"""What racing candidates buys: the share of runs converged within 3 iterations, and their wall time.

A seeded simulation with real loope runs: each scripted agent fixes the task on an attempt with
chance p (decided by a seeded random number per run, iteration and candidate, so every N sees the
same luck for its first candidates) and takes a fixed time. For N = 1, 2, 4 candidates per
iteration it reports the share of runs that converged within 3 iterations, and the median wall
time of a run, all measured in this one run.

Usage: python benchmarks/candidates.py [--runs 10] [--p 0.3] [--seed 7] [--sleep 0.5] [--candidates 1,2,4]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from costs import ENV, LOOPE  # the same console script and identity as the cost benchmark

AGENT = """\
import os, pathlib, random, sys, time
seed, run, p, sleep = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
it, cand = os.environ["LOOPE_ITERATION"], os.environ["LOOPE_CANDIDATE"] if "LOOPE_CANDIDATE" in os.environ else "1"
lucky = random.Random(f"{seed}-{run}-{it}-{cand}").random() < p
time.sleep(sleep)
pathlib.Path("flag.txt").write_text("yes\\n" if lucky else f"no {it}.{cand}\\n")
print("fixed it" if lucky else f"attempt {it}.{cand} did not fix it")
"""
GATE = 'test "$(cat flag.txt)" = yes'


def _repo(root: Path) -> Path:
    repo = root / "project"
    repo.mkdir()
    (repo / "flag.txt").write_text("no\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True)
    return repo


def one_run(root: Path, agent: Path, n: int, run: int, args: argparse.Namespace) -> tuple[bool, float]:
    """Whether run ``run`` with ``n`` candidates converged within 3 iterations, and its wall time."""
    work = root / f"n{n}-run{run}"
    work.mkdir()
    repo = _repo(work)
    command = f"exec:{sys.executable} {agent} {args.seed} {run} {args.p} {args.sleep}"
    argv = [*LOOPE, "run", "make flag.txt say yes", "--implementer", command, "--candidates", str(n)]
    argv += ["--no-review", "--verify-cmd", GATE, "--no-baseline", "--max-iters", "3", "--stall-after", "9", "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=repo, env=ENV, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"loope failed (exit {done.returncode}): {done.stderr.strip()}")
    shutil.rmtree(work, ignore_errors=True)
    return done.returncode == 0, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--p", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--candidates", default="1,2,4")
    args = parser.parse_args()
    counts = [int(x) for x in args.candidates.split(",")]
    with tempfile.TemporaryDirectory(prefix="loope-bench-candidates-") as tmp:
        root = Path(tmp)
        agent = root / "agent.py"
        agent.write_text(AGENT)
        results: dict[int, list[tuple[bool, float]]] = {n: [] for n in counts}
        for run in range(args.runs):  # interleaved: the machine's mood weighs on every N alike
            for n in counts:
                results[n].append(one_run(root, agent, n, run, args))
    print(f"p = {args.p}, {args.runs} runs per row, seed {args.seed}, each attempt {args.sleep}s, at most 3 iterations")
    print()
    print("| candidates | converged within 3 iterations | median wall time | vs 1 candidate |")
    print("|---|---|---|---|")
    base = statistics.median(w for _, w in results[counts[0]])
    for n in counts:
        share = sum(ok for ok, _ in results[n]) / len(results[n])
        median = statistics.median(w for _, w in results[n])
        print(f"| {n} | {share:.0%} | {median:.1f}s | {median / base:.2f}× |")
    expected = ", ".join(f"N={n}: {1 - (1 - args.p) ** (3 * n):.0%}" for n in counts)
    print()
    print(f"(the odds say: {expected})")


if __name__ == "__main__":
    main()
