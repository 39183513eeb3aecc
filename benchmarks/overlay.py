"""Overlay workspaces against the floor: every row measured in this one run, samples interleaved.

  mount methods   over a 20k-file snapshot: the kernel's overlayfs (in a mount namespace, as loope
                  mounts it) vs fuse-overlayfs (when installed) vs a plain checkout; `git status`,
                  and a gate (pytest collecting over the tree, then every file read)
  run start       `loope run --dry-run --workspace overlay` at 2k and 20k files vs `git worktree add`
                  (+ remove) of the same repository: with the snapshot in place, and building it
  iteration       one overlay iteration on the 20k repository vs one on the 2k repository, measured as
                  costs.py measures iterations (after a warm-up that syncs the disk, start to start; the
                  median of the ratios of runs made back to back); both snapshots are built first
  sharing         four runs from one state: how many snapshots they made

Usage: python benchmarks/overlay.py [--files 20000] [--small 2000] [--repeat 3] [--iterations 10]
                                   [--only mounts,start,iterations,sharing] [--start-before SRC]

--start-before SRC also measures the run start rows with the loope package under SRC (another checkout's
src/ directory, e.g. main's), its samples interleaved with the others: a before/after table from one run.

Before every sample the disk is synced (untimed), so no sample pays for the writeback of the one
before it (the floor's 20,000 files, a removed snapshot); each row's spread is printed with it.
The load average is printed with the table: on a shared machine the floor (`git worktree add`,
which writes every file) and loope's start (which writes almost nothing) suffer from load
differently, so compare runs made under similar load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from costs import (
    EDIT_AGENT,
    ENV,
    LOOPE,
    Table,
    iteration_costs,
    last_run,
    loope_package,
    make_repo,
    median,
    ms,
    paired,
    script,
    sh,
    timed,
)

GATE_TEST = "import pathlib\n\n\ndef test_files():\n    assert len(list(pathlib.Path('.').glob('d*/f*.txt'))) > 0\n"
GATE = f"{sys.executable} -m pytest -q -p no:cacheprovider test_gate.py && git ls-files -z | xargs -0 cat > /dev/null"


def materialize(repo: Path, root: Path) -> tuple[Path, Path]:
    """A snapshot of ``repo``'s HEAD as loope makes one: its tree and an index with the tree's stat data."""
    tree, index = root / "tree", root / "index"
    tree.mkdir(parents=True)
    env = {**ENV, "GIT_INDEX_FILE": str(index), "GIT_DIR": str(repo / ".git")}
    subprocess.run(["git", "read-tree", "HEAD"], env=env, check=True)
    subprocess.run(["git", f"--work-tree={tree}", "checkout-index", "-a", "-u", "-q"], env=env, check=True)
    return tree, index


def mounted(method: str, snap: tuple[Path, Path], repo: Path, scratch: Path, command: str) -> float:
    """Mount (``method``), run ``command`` in the merged view, unmount; the whole time."""
    shutil.rmtree(scratch, ignore_errors=True)
    upper, work, merged = (scratch / n for n in ("upper", "work", "merged"))
    for d in (upper, work, merged):
        d.mkdir(parents=True)
    shutil.copy(snap[1], scratch / "index")
    env = {**ENV, "GIT_DIR": str(repo / ".git"), "GIT_INDEX_FILE": str(scratch / "index"), "GIT_WORK_TREE": str(merged)}
    options = f"lowerdir={snap[0]},upperdir={upper},workdir={work}"
    if method == "kernel":
        mount = f"mount -t overlay overlay -o {options},redirect_dir=nofollow,metacopy=off {merged}"
        inner = f"{mount} && cd {merged} && {command}"
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", inner]
    elif method == "fuse":
        inner = f"fuse-overlayfs -o {options} {merged} && (cd {merged} && {command}); fusermount3 -u {merged}"
        argv = ["sh", "-c", inner]
    else:
        env["GIT_WORK_TREE"] = str(snap[0])
        argv = ["sh", "-c", f"cd {snap[0]} && {command}"]
    return timed(argv, scratch, env=env)


def bench_mounts(table: Table, big: Path, root: Path, files: int, repeat: int) -> None:
    (big / "test_gate.py").write_text(GATE_TEST)
    sh(["git", "add", "test_gate.py"], big)
    sh(["git", "commit", "-qm", "gate"], big)
    snap = materialize(big, root / "mount-snapshot")
    methods = ["plain", "kernel"] + (["fuse"] if shutil.which("fuse-overlayfs") else [])
    for what, command in (("git status", "git status --porcelain > /dev/null"), ("gate", GATE)):
        samples: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(repeat):
            for method in methods:
                samples[method].append(mounted(method, snap, big, root / "mount-run", command))
        plain, kernel = median(samples["plain"]), median(samples["kernel"])
        table.add(
            f"{what}, {files} files: kernel overlay", ms(kernel), f"plain checkout {ms(plain)}", kernel / plain, ""
        )
        if "fuse" in samples:
            fuse = median(samples["fuse"])
            table.add(
                f"{what}, {files} files: fuse-overlayfs", ms(fuse), f"kernel overlay {ms(kernel)}", fuse / kernel, ""
            )


def dry_run(repo: Path, agent: Path, env: dict[str, str] | None = None) -> float:
    argv = [*LOOPE, "run", "bench", "--dry-run", "--implementer", f"exec:{agent}", "--no-review", "--quiet"]
    os.sync()  # no sample pays for the writeback of the one before (nor of a removed snapshot)
    return timed([*argv, "--workspace", "overlay"], repo, env=env)


def worktree_floor(repo: Path, target: Path) -> tuple[float, float]:
    """``git worktree add`` of ``repo``'s HEAD, then its ``remove``: how long each took."""
    os.sync()
    started = time.perf_counter()
    sh(["git", "worktree", "add", "-q", "--detach", str(target), "HEAD"], repo)
    added = time.perf_counter()
    sh(["git", "worktree", "remove", "--force", str(target)], repo)
    return added - started, time.perf_counter() - added


def bench_start(table: Table, repos: dict[int, Path], repeat: int, before: Path | None) -> None:
    trees: dict[str, dict[str, str] | None] = {"": None}
    if before is not None:
        trees[f" (before: {before})"] = {**ENV, "PYTHONPATH": str(before)}
    for files, repo in repos.items():
        agent = script(repo.parent, "noop.sh", "#!/bin/sh\necho done\n")
        layers = repo / ".loope" / "snapshots" / "layers"
        floors, adds = [], []
        warm: dict[str, list[float]] = {name: [] for name in trees}
        cold: dict[str, list[float]] = {name: [] for name in trees}
        samples = ["floor", *trees]
        for i in range(repeat):
            # The order turns each round: no side always runs right after another's writes.
            for sample in samples[i % len(samples) :] + samples[: i % len(samples)]:
                if sample == "floor":
                    add, remove = worktree_floor(repo, repo.parent / f"wt-{files}-{i}")
                    floors.append(add + remove)
                    adds.append(add)
                    continue
                shutil.rmtree(layers, ignore_errors=True)
                cold[sample].append(dry_run(repo, agent, trees[sample]))
                warm[sample].append(dry_run(repo, agent, trees[sample]))
        f = median(floors)
        print(f"    {files} files, seconds: floor {_spread(floors)} (of which add {_spread(adds)})")
        for name in trees:
            c, w = median(cold[name]), median(warm[name])
            print(f"    {files} files{name}, seconds: built {_spread(cold[name])}, in place {_spread(warm[name])}")
            floor = f"worktree add + remove {ms(f)}"
            table.add(f"run start, {files} files, snapshot in place{name}", ms(w), floor, w / f, "≤ 0.1x")
            table.add(f"run start, {files} files, snapshot built{name}", ms(c), floor, c / f, "≤ 1.1x")


def _spread(samples: list[float]) -> str:
    return f"{median(samples):.2f} ({min(samples):.2f}–{max(samples):.2f})"


def bench_iterations(table: Table, repos: dict[int, Path], n: int, repeat: int) -> None:
    """Each repeat runs both repositories back to back (the order alternating) and gives one ratio."""
    (small_files, small), (big_files, big) = sorted(repos.items())
    per: dict[int, list[float]] = {small_files: [], big_files: []}
    for repo in (small, big):  # a dry run first: each snapshot is built before any sample
        dry_run(repo, script(repo.parent, "noop.sh", "#!/bin/sh\necho done\n"))
    for i in range(repeat):
        order = ((small_files, small), (big_files, big))
        for files, repo in order if i % 2 == 0 else order[::-1]:
            agent = script(repo.parent, "edit.sh", EDIT_AGENT)
            argv = [*LOOPE, "run", "bench", "--implementer", f"exec:{agent}", "--no-review", "--quiet"]
            argv += ["--workspace", "overlay", "--max-iters", str(n + 2), "--stall-after", str(n + 3)]
            timed(argv, repo, ok=(0, 1))
            per[files].append(median(iteration_costs(last_run(repo))))  # as costs.py measures them
    s, b = median(per[small_files]), median(per[big_files])
    table.add(
        f"one overlay iteration, {big_files} vs {small_files} files",
        ms(b),
        ms(s),
        paired(per[big_files], per[small_files]),
        "≤ 1.1x",
    )


def bench_sharing(table: Table, repo: Path) -> None:
    agent = script(repo.parent, "noop.sh", "#!/bin/sh\necho done\n")
    layers = repo / ".loope" / "snapshots" / "layers"
    shutil.rmtree(layers, ignore_errors=True)
    for _ in range(4):
        dry_run(repo, agent)
    made = len([p for p in layers.iterdir() if not p.name.startswith(".")])
    table.add("four runs from one state", f"{made} snapshot(s)", "1 snapshot", made / 1, "= 1")


SECTIONS = ("mounts", "start", "iterations", "sharing")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"some of {','.join(SECTIONS)}")
    parser.add_argument("--start-before", type=Path, help="a loope src/ directory to measure the start rows against")
    args = parser.parse_args()
    only = set(args.only.split(","))
    root = Path(tempfile.mkdtemp(prefix="loope-overlay-bench-"))
    table = Table()
    try:
        print(f"generating repositories of {args.files} and {args.small} files …", flush=True)
        repos = {args.small: make_repo(root, args.small), args.files: make_repo(root, args.files)}
        # An installed package starts from compiled bytecode (pip compiles it); with PYTHONDONTWRITEBYTECODE
        # set, an editable install would compile every module a start imports, every time.
        for package in (Path(loope_package()).parent, args.start_before):
            if package is not None:
                sh([sys.executable, "-m", "compileall", "-q", str(package.resolve())], root)
        before = os.getloadavg()[0]
        if "mounts" in only:
            bench_mounts(table, repos[args.files], root, args.files, args.repeat)
        if "start" in only:
            bench_start(table, repos, args.repeat, args.start_before and args.start_before.resolve())
        if "iterations" in only:
            bench_iterations(table, repos, args.iterations, args.repeat)
        if "sharing" in only:
            bench_sharing(table, repos[args.files])
        print("\n" + table.render())
        print(f"\nload average (1 min) {before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
