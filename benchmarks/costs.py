"""What loope's work costs against the floor: the same work done directly with git or the shell.

Every row is measured in this one run, loope and floor samples interleaved (so the machine's mood
weighs on both alike), on generated repositories whose files all have distinct contents. Ratios,
not absolute times, are what to compare across machines.

  dry-run             `loope run --dry-run` on the big repo vs `git worktree add` + `git worktree remove`
  iteration           one iteration (trivial exec agent, small repo) vs a shell loop: agent, add, write-tree,
                      commit-tree, update-ref
  repo size           one iteration on the big repo vs one on the small repo
  run length          iterations 91-100 vs iterations 1-10 of one 100-iteration run
  apply               `loope apply` of a run that changed 2,000 files vs `git diff | git apply`
  200 MB of output    the implementer step of an agent printing 200 MB vs the same agent `> file`; peak RSS
  startup             each read-only command vs `python -c pass`; doctor also until the first program it runs

Usage: python benchmarks/costs.py [--files 20000] [--small 2000] [--iterations 100] [--repeat 3]
                                 [--rows dry-run,iterations,apply,output,startup]
                                 [--startup-samples 10] [--startup-before SRC]

How the iteration rows are measured, alike for loope and the floor: each starts in a tree just checked
out (loope's worktree, the floor's clone), whose 2,000+ freshly written files the kernel still has to write
back. That writeback is a cost of the checkout, not of an iteration, yet it slows whatever touches the disk
in the next seconds: the first ~10 iterations of a run cost 2-3x the rest. So iteration 0, a warm-up of
both, runs the same agent, which also syncs the disk (`sync`); the samples are iterations 1..N after it.
An iteration's cost is the time from its start to the next one's (loope: `iteration_started` events; the
floor: a timestamp at the top of its loop), so what happens between iterations counts too; both sides take
the median of their samples. On a shared machine the load swings by 3x within seconds; so a ratio is
taken within each repeat, between runs made back to back (the small repo's between the floor and the big
repo's, the order alternating), and the row gives the median of those ratios, each of them printed.

--startup-before SRC also measures the startup row with the loope package under SRC (another checkout's
src/ directory, e.g. main's), its samples interleaved with the others: a before/after table from one run.
--startup-instructions adds the startup row counted in instructions (valgrind's callgrind, the loope
process alone): not the target's measure, but one that a loaded machine does not move.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
# The agent of the iteration rows: one small edit, with contents that differ every time. In the warm-up
# iteration (the first) it also writes back what the checkout before it left dirty (see the docstring).
EDIT_AGENT = """#!/bin/sh
[ "$LOOPE_ITERATION" = 1 ] && sync
echo "iteration $LOOPE_ITERATION $$" >> bench-notes.txt
echo done
"""
REWRITE_AGENT = '#!/bin/sh\nfor f in d*/f*.txt; do echo "rewritten $f" >> "$f"; done\necho ok\n'
LOUD_AGENT = "#!/bin/sh\nyes 'a line of agent output, as long as a log line would be' | head -c {n}\necho\necho done\n"
# The floor of one iteration: the same agent, then the git plumbing that records its change.
# bash for $EPOCHREALTIME: a timestamp without a process.
FLOOR_LOOP = """#!/bin/bash
set -e
i=0
while [ $i -lt {n} ]; do
  echo "$EPOCHREALTIME" >> {times}
  i=$((i + 1))
  LOOPE_ITERATION=$i sh {agent} > /dev/null
  git add -A
  tree=$(git write-tree)
  commit=$(git commit-tree "$tree" -p HEAD -m "iteration $i")
  git update-ref HEAD "$commit"
done
echo "$EPOCHREALTIME" >> {times}
"""
ROWS = ("dry-run", "iterations", "apply", "output", "startup")
MEASURE_RSS = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def sh(args: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, cwd=cwd, env=ENV, check=True, capture_output=True, **kw)  # type: ignore[call-overload, no-any-return]


def timed(args: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=env or ENV, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.decode()[-800:]}")
    return elapsed


def make_repo(root: Path, files: int) -> Path:
    """A committed repository of ``files`` files of ~1 KB, no two alike."""
    repo = root / f"repo-{files}"
    for i in range(files):
        path = repo / f"d{i // 500:03d}" / f"f{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"file {i} line {j}: {'x' * 40}\n" for j in range(16)))
    sh(["git", "init", "-q", "-b", "main"], repo)
    sh(["git", "add", "-A"], repo)
    # Packed here, before any sample: at 20,000 loose objects the commit would start `gc --auto` in the
    # background, repacking while the first samples run (and writing into a repository being removed).
    sh(["git", "-c", "gc.auto=0", "commit", "-qm", "generated"], repo)
    sh(["git", "gc", "-q"], repo)
    return repo


def script(root: Path, name: str, body: str) -> Path:
    path = root / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def last_run(repo: Path) -> Path:
    return sorted((repo / ".loope" / "runs").iterdir())[-1]


def events(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def ts(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def after_warm_up(starts: list[float]) -> list[float]:
    """Each iteration's cost from its start to the next one's, without the warm-up (the first)."""
    return [b - a for a, b in itertools.pairwise(starts[1:])]


def iteration_costs(run: Path) -> list[float]:
    """The costs of a run's iterations after its warm-up, from its own events."""
    return after_warm_up([ts(event) for event in events(run) if event["type"] == "iteration_started"])


def step_time(run: Path, role: str) -> float:
    started = next(ts(e) for e in events(run) if e["type"] == "step_started" and e.get("role") == role)
    finished = next(ts(e) for e in events(run) if e["type"] == "step_finished" and e.get("role") == role)
    return finished - started


def remove_workspace(repo: Path, run: Path) -> None:
    if (run / "workspace" / ".git").exists():  # a kept worktree (an overlay's mount point stays, empty)
        sh(["git", "worktree", "remove", "--force", str(run / "workspace")], repo)


def loop_run(repo: Path, agent: Path, iterations: int) -> Path:
    """A run of the warm-up and ``iterations`` more, in a worktree (overlay iterations are benchmarks/overlay.py's).

    One more iteration follows, so that the last one measured has an end (the next one's start).
    """
    iterations += 2
    args = [*LOOPE, "run", "bench", "--implementer", f"exec:{agent}", "--no-review", "--quiet"]
    args += ["--workspace", "worktree"]
    timed([*args, "--max-iters", str(iterations), "--stall-after", str(iterations + 1)], repo, ok=(0, 1))
    run = last_run(repo)
    remove_workspace(repo, run)
    return run


def floor_iterations(repo: Path, agent: Path, n: int) -> list[float]:
    """The shell floor's ``n`` iteration costs after its warm-up, in a fresh scratch clone of ``repo``."""
    clone, times = repo.parent / f"floor-{repo.name}", repo.parent / "floor-times.txt"
    shutil.rmtree(clone, ignore_errors=True)
    times.unlink(missing_ok=True)
    sh(["git", "clone", "-q", "--shared", str(repo), str(clone)], repo.parent)
    loop = script(repo.parent, "floor.sh", FLOOR_LOOP.format(n=n + 1, agent=agent, times=times))
    timed(["bash", str(loop)], clone)
    shutil.rmtree(clone, ignore_errors=True)
    return after_warm_up([float(line) for line in times.read_text().split()])


def median(samples: list[float]) -> float:
    return statistics.median(samples)


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, float, str]] = []

    def add(self, work: str, loope: str, floor: str, ratio: float, target: str) -> None:
        self.rows.append((work, loope, floor, ratio, target))
        print(f"  {work}: {loope} vs {floor} = {ratio:.2f}x (target {target})", flush=True)

    def render(self) -> str:
        lines = ["| work | loope | floor | ratio | target |", "| --- | --- | --- | --- | --- |"]
        cell = lambda text: text.replace("|", "\\|")  # noqa: E731 - a pipe in a cell would split it
        lines += [f"| {cell(w)} | {cell(lo)} | {cell(fl)} | {r:.2f}x | {t} |" for w, lo, fl, r, t in self.rows]
        return "\n".join(lines)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def bench_dry_run(table: Table, big: Path, files: int, repeat: int) -> None:
    agent = script(big.parent, "noop.sh", "#!/bin/sh\necho done\n")  # a dry run checks the real agent exists
    floors, loopes = [], []
    for i in range(repeat):
        target = big.parent / f"wt-{i}"
        started = time.perf_counter()
        sh(["git", "worktree", "add", "-q", "--detach", str(target), "HEAD"], big)
        sh(["git", "worktree", "remove", "--force", str(target)], big)
        floors.append(time.perf_counter() - started)
        started = time.perf_counter()
        timed([*LOOPE, "run", "bench", "--dry-run", "--implementer", f"exec:{agent}", "--no-review", "--quiet"], big)
        remove_workspace(big, last_run(big))  # a no-op once loope removes a finished run's worktree itself
        loopes.append(time.perf_counter() - started)
    f, d = median(floors), median(loopes)
    table.add(f"dry-run, {files} files", ms(d), f"worktree add + remove {ms(f)}", d / f, "≤ 1.2x")


def bench_iterations(table: Table, repos: tuple[Path, Path], sizes: tuple[int, int], n: int, repeat: int) -> None:
    small, big = repos
    agent = script(small.parent, "edit.sh", EDIT_AGENT)
    floors, per_small, per_big = [], [], []
    long_run: list[float] = []
    for i in range(repeat):
        # The small repo's run sits between the floor and the big repo's run, in alternating order: each
        # ratio is taken within one repeat, from samples a few seconds apart (see the docstring).
        if i % 2 == 0:
            floors.append(median(floor_iterations(small, agent, 20)))
        else:
            per_big.append(median(iteration_costs(loop_run(big, agent, 20))))
        times = iteration_costs(loop_run(small, agent, n if i == 0 else 20))
        if i == 0:
            long_run = times
        per_small.append(median(times[:20]))
        if i % 2 == 0:
            per_big.append(median(iteration_costs(loop_run(big, agent, 20))))
        else:
            floors.append(median(floor_iterations(small, agent, 20)))
    one, floor, large = median(per_small), median(floors), median(per_big)
    table.add(
        f"one iteration, {sizes[0]} files", ms(one), f"shell loop {ms(floor)}", paired(per_small, floors), "≤ 1.3x"
    )
    table.add(
        f"one iteration, {sizes[1]} vs {sizes[0]} files", ms(large), ms(one), paired(per_big, per_small), "≤ 1.15x"
    )
    first, last = statistics.mean(long_run[:10]), statistics.mean(long_run[n - 10 : n])
    table.add(f"iterations {n - 9}-{n} vs 1-10", ms(last), ms(first), last / first, "≤ 1.1x")


def paired(loope: list[float], floor: list[float]) -> float:
    """The median of the ratios of samples taken side by side (printed with their spread)."""
    ratios = [a / b for a, b in zip(loope, floor, strict=True)]
    print(f"    ratios, repeat by repeat: {' '.join(f'{r:.2f}' for r in ratios)}", flush=True)
    return median(ratios)


def bench_apply(table: Table, root: Path, changed: int, repeat: int) -> None:
    repo = make_repo(root, changed)
    agent = script(root, "rewrite.sh", REWRITE_AGENT)
    timed([*LOOPE, "run", "rewrite", "--implementer", f"exec:{agent}", "--no-review", "--quiet"], repo, ok=(0, 1))
    run = last_run(repo)
    record = json.loads((run / "run.json").read_text())
    base, head = record["workspace"]["base"], record["workspace"]["head"]
    floor_cmd = f"git diff --binary {base} {head} | git apply"
    floors, loopes = [], []
    for _ in range(repeat):
        floors.append(timed(["sh", "-c", floor_cmd], repo))
        sh(["git", "checkout", "-q", "--", "."], repo)
        loopes.append(timed([*LOOPE, "apply", run.name], repo))
        sh(["git", "checkout", "-q", "--", "."], repo)
    f, a = median(floors), median(loopes)
    table.add(f"apply, {changed} changed files", ms(a), f"git diff | git apply {ms(f)}", a / f, "≤ 1.5x")


def bench_output(table: Table, root: Path, size: int, repeat: int) -> None:
    repo = make_repo(root / "loud", 10)
    agent = script(root, "loud.sh", LOUD_AGENT.format(n=size))
    sink = root / "loud.out"
    floors, steps, peaks = [], [], []
    for _ in range(repeat):
        floors.append(timed(["sh", "-c", f"{agent} > {sink}"], repo))
        sink.unlink()
        loope = [*LOOPE, "run", "loud", "--implementer", f"exec:{agent}", "--no-review", "--max-iters", "1"]
        done = sh([sys.executable, "-c", MEASURE_RSS, *loope, "--quiet"], repo)
        peaks.append(int(done.stdout.split()[-1]))
        run = last_run(repo)
        steps.append(step_time(run, "implementer"))
        remove_workspace(repo, run)
        for transcript in (run / "agents").glob("*/transcript.log"):
            transcript.unlink()  # 200 MB each; the run itself stays (its id and branch are taken)
    f, s = median(floors), median(steps)
    peak = max(peaks) / 1024
    table.add(f"agent printing {size // 1_000_000} MB", f"{ms(s)}, {peak:.0f} MB peak RSS", f"`> file` {ms(f)}", s / f,
              "≤ 3x, < 100 MB")  # fmt: skip


# `loope doctor` as the console script runs it, ended at the first program it starts (the sandbox probe, git,
# or an agent CLI asked its version): loope's own start, apart from what the programs it checks cost.
UNTIL_FIRST_PROGRAM = """
import os, sys
def at_first_program(event, args):
    if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork"):
        os._exit(0)
sys.addaudithook(at_first_program)
from loope.cli.main import main
sys.argv[0] = "loope"
main()
"""


def instructions(args: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None) -> float:
    """The instructions ``args`` ran (valgrind's callgrind; the processes it starts are not counted)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *args],
        cwd=cwd, env=env or ENV, capture_output=True, check=False,
    )  # fmt: skip
    found = re.search(rb"Collected : (\d+)", done.stderr)
    if done.returncode not in ok or found is None:
        raise SystemExit(f"{' '.join(args)} failed under valgrind ({done.returncode}): {done.stderr.decode()[-800:]}")
    return float(found.group(1))


def bench_startup(
    table: Table, big: Path, samples: int, before: Path | None, measure: Callable[..., float] = timed
) -> None:
    shown = ms if measure is timed else (lambda n: f"{n / 1e6:.0f} M instructions")
    unit = "" if measure is timed else " (instructions)"
    run_id = last_run(big).name.split("-", 1)[0]
    bare_env = {**ENV, "PATH": "/usr/bin:/bin"}  # doctor and adapters find no agent binary to run
    trees = {"": bare_env}
    if before is not None:
        trees[f" before ({before})"] = {**bare_env, "PYTHONPATH": str(before)}
    commands = {
        "--help": ["--help"],
        "runs": ["runs"],
        "status": ["status"],
        "status RUN": ["status", run_id],
        "show RUN": ["show", run_id],
        "show (no such run)": ["show", "9999"],
        "logs RUN": ["logs", run_id],
        "adapters": ["adapters"],
        "doctor": ["doctor"],
    }
    until_program = [sys.executable, "-c", UNTIL_FIRST_PROGRAM, "doctor"]
    doctor_starts: dict[str, list[float]] = {tree: [] for tree in trees}
    bare: list[float] = []
    found: dict[tuple[str, str], list[float]] = {(name, tree): [] for name in commands for tree in trees}
    missing = [name for name, args in commands.items() if _unknown_command(big, args[0])]
    for name in missing:
        print(f"  `loope {name}`: no such command here; skipped", flush=True)
        del commands[name]
    click_alone: list[float] = []  # the CLI library every command loads: what no command can start under
    for round_ in range(samples):
        bare.append(measure([sys.executable, "-c", "pass"], big))
        click_alone.append(measure([sys.executable, "-c", "import click"], big))
        order = list(trees.items())
        for tree, env in order if round_ % 2 == 0 else order[::-1]:  # which tree goes first alternates
            for name, args in commands.items():
                found[name, tree].append(measure([*LOOPE, *args], big, ok=(0, 1, 2), env=env))
            doctor_starts[tree].append(measure(until_program, big, ok=(0, 1, 2), env=env))
    b = median(bare)
    c = median(click_alone)
    table.add(f"`python -c 'import click'` (for reference){unit}", shown(c), f"`python -c pass` {shown(b)}", c / b, "-")
    rows: dict[str, tuple[list[float], str]] = {}
    for name in commands:
        for tree in trees:
            if name == "doctor":  # in full it also runs bubblewrap and git to check the sandbox and the overlay
                rows[f"`loope doctor` start{tree}"] = (doctor_starts[tree], "≤ 4x")
                checks = "its bwrap and git checks too" if measure is timed else "its own process only"
                rows[f"`loope doctor` in full ({checks}){tree}"] = (found[name, tree], "-")
            else:
                rows[f"`loope {name}` start{tree}"] = (found[name, tree], "≤ 4x")
    for work, (times, target) in rows.items():
        t = median(times)
        table.add(work + unit, shown(t), f"`python -c pass` {shown(b)}", t / b, target if measure is timed else "-")


def loope_package() -> str:
    done = sh([sys.executable, "-c", "import loope; print(loope.__file__)"], Path.cwd())
    return done.stdout.decode().strip()


def _unknown_command(cwd: Path, name: str) -> bool:
    done = subprocess.run([*LOOPE, name, "--help"], cwd=cwd, env=ENV, capture_output=True, check=False)
    return done.returncode == 2 and b"No such command" in done.stderr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output-mb", type=int, default=200)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"some of: {', '.join(ROWS)}")
    parser.add_argument("--startup-samples", type=int, default=10, help="rounds of the startup row (medians)")
    parser.add_argument("--startup-before", type=Path, help="a loope src/ directory to measure startup against")
    parser.add_argument("--startup-instructions", action="store_true", help="also count startup in instructions")
    args = parser.parse_args()
    rows = set(args.rows.split(","))
    if unknown := rows - set(ROWS):
        parser.error(f"unknown rows {', '.join(sorted(unknown))}; pick from {', '.join(ROWS)}")
    if args.startup_instructions and shutil.which("valgrind") is None:
        parser.error("--startup-instructions counts with valgrind, which is not installed (apt-get install valgrind)")
    root = Path(tempfile.mkdtemp(prefix="loope-bench-"))
    table = Table()
    # An installed package starts from compiled bytecode (pip compiles it); with PYTHONDONTWRITEBYTECODE
    # set, an editable install would compile every module it imports on every start instead.
    sh([sys.executable, "-m", "compileall", "-q", str(Path(loope_package()).parent)], root)
    if args.startup_before:
        sh([sys.executable, "-m", "compileall", "-q", str(args.startup_before.resolve())], root)
    try:
        print(f"generating repositories of {args.files} and {args.small} files …", flush=True)
        big, small = make_repo(root, args.files), make_repo(root, args.small)
        if "dry-run" in rows:
            bench_dry_run(table, big, args.files, args.repeat)
        elif "startup" in rows:  # the startup row shows the run a dry run makes
            bench_dry_run(Table(), big, args.files, 1)
        if "iterations" in rows:
            bench_iterations(table, (small, big), (args.small, args.files), args.iterations, args.repeat)
        if "apply" in rows:
            bench_apply(table, root / "apply", 2000, args.repeat)
        if "output" in rows:
            bench_output(table, root, args.output_mb * 1_000_000, args.repeat)
        if "startup" in rows:
            before = args.startup_before and args.startup_before.resolve()
            bench_startup(table, big, args.startup_samples, before)
            if args.startup_instructions:
                bench_startup(table, big, 1, before, measure=instructions)
        print("\n" + table.render())
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
