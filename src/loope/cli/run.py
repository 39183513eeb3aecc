"""``loope run``: build the spec from flags and loope.toml, run the engine, show it, exit with its verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from loope.agents.inspect import diagnose
from loope.cli.options import output_options, views
from loope.enums import SandboxMode
from loope.errors import LoopeError
from loope.records.rundir import NOTIFY_LOG
from loope.root import project_root


@click.command(context_settings={"show_default": True}, short_help="Run a loop: implement, verify, review, repeat.")
@click.argument("goal", required=False)
@click.option("--goal-file", type=click.Path(dir_okay=False, path_type=Path), help="Read the goal from a file.")
@click.option(
    "--dry-run", is_flag=True, default=None, help="Check the real agents and gate, then run stubs: no agent is paid."
)
@click.option("--preset", help="claude-codex, codex-claude, claude-solo, dual-review, opencode-codex, gemini-claude.")
@click.option(
    "--implementer",
    metavar="A",
    multiple=True,
    help="The writing agent: claude, codex:gpt-5, exec:./fix.sh … (repeat it to race agents) [default: claude]",
)
@click.option(
    "--candidates",
    type=int,
    metavar="N",
    help="Candidates per iteration (per raced agent); isolated from each other only in the sandbox. [default: 1]",
)
@click.option("--jobs", type=int, metavar="J", help="Candidates' gates run at once at most. [default: CPUs]")
@click.option("--diversify", is_flag=True, default=None, help="Ask each candidate for an approach of its own.")
@click.option(
    "--review-candidates", type=int, metavar="K", help="Passing candidates reviewed while reviewers block. [default: 1]"
)
@click.option(
    "--reviewer",
    "reviewer",
    multiple=True,
    metavar="A",
    help="A reviewing agent (repeatable). [default: codex]",
)
@click.option("--reviewers", metavar="A,B", help="Reviewing agents, comma-separated.")
@click.option("--no-review", is_flag=True, default=None, help="No reviewers: the gate alone decides.")
@click.option("--design", is_flag=True, default=None, help="Have a designer write a contract first.")
@click.option("--designer", metavar="A", help="The designer agent (default: the implementer).")
@click.option("--verifier", metavar="A", help="An agent that checks the contract after the gate passes.")
@click.option("--critic", metavar="A", help="A read-only agent that critiques progress.")
@click.option("--checkpoint-every", type=int, metavar="N", help="Critique after every N-th iteration.")
@click.option("--verify-cmd", metavar="CMD", help="The gate: a shell command that exits 0 when the work is right.")
@click.option(
    "--metric-cmd", "--metric", "metric_cmd", metavar="CMD", help="A command whose last printed number is the score."
)
@click.option("--direction", type=click.Choice(["lower", "higher"]), help="Which scores are better.")
@click.option("--target", type=float, metavar="X", help="Converge once the score reaches X.")
@click.option("--metric-repeat", type=int, metavar="K", help="Median of K metric runs. [default: 1]")
@click.option("--patience", type=int, metavar="N", help="Stop after N attempts without improvement.")
@click.option("--min-improvement", metavar="X|P%", help="Smallest gain that counts (0.5 or 2%).")
@click.option(
    "--max-iters", "--max-attempts", "max_iters", type=int, metavar="N", help="Iterations at most. [default: 3]"
)
@click.option("--max-cost", type=float, metavar="USD", help="Stop once the run has spent this much.")
@click.option("--max-tokens", type=int, metavar="N", help="Stop once the run has used this many tokens.")
@click.option("--max-time", metavar="DUR", help="Stop after this much wall time (90s, 30m, 2h).")
@click.option("--timeout", metavar="SECS", help="Kill a step after this long. [default: 1800]")
@click.option("--stall-after", type=int, metavar="N", help="Stop after N iterations without progress. [default: 2]")
@click.option("--retries", type=int, metavar="N", help="Retries of a step that failed transiently. [default: 3]")
@click.option("--no-baseline", is_flag=True, default=None, help="Do not run the gate on the starting tree first.")
@click.option("--no-wait", is_flag=True, default=None, help="Stop at a usage limit instead of waiting for its reset.")
@click.option("--editable", multiple=True, metavar="GLOB", help="Only these paths may change (repeatable).")
@click.option("--protect", multiple=True, metavar="GLOB", help="These paths may not change (repeatable).")
@click.option("--success-cmd", metavar="CMD", help="Run after each iteration; exit 0 means done.")
@click.option("--workdir", type=click.Path(path_type=Path), help="The project directory. [default: .]")
@click.option(
    "--workspace",
    type=click.Choice(["worktree", "copy", "in-place", "overlay", "auto"]),
    help="Where agents work. [default: auto in a git repository (an overlay where one works), else copy]",
)
@click.option("--branch", metavar="NAME", help="The run branch. [default: loope/<run-id>]")
@click.option(
    "--keep-workspace",
    is_flag=True,
    default=None,
    help="Keep the worktree when the run ends (by default it is removed; the result is on the run branch).",
)
@click.option("--isolate-home", is_flag=True, default=None, help="A private agent config dir per step.")
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "on", "off"]),
    help="Run every step under bubblewrap: auto (where it works), on (or refuse), off. [default: auto]",
)
@click.option(
    "--sandbox-network",
    type=click.Choice(["on", "off"]),
    help="Whether gate, metric and success commands reach the network in the sandbox. [default: on]",
)
@click.option(
    "--sandbox-writable",
    multiple=True,
    metavar="DIR",
    help="A directory the sandboxed steps may also write, such as a build cache (repeatable).",
)
@click.option("--notify", multiple=True, metavar="SPEC", help="slack:CHANNEL, webhook:URL or cmd:COMMAND.")
@click.option("--detach", is_flag=True, help="Run in the background; print the run id.")
@click.option("--show-diff", is_flag=True, help="Print the cumulative diff at the end.")
@output_options
def run(goal: str | None, goal_file: Path | None, detach: bool, show_diff: bool, **flags: Any) -> int:
    """Run a loop on GOAL: implement, verify, review, repeat until converged or out of budget."""
    from loope.spec import build_spec

    output = {k: flags.pop(k) for k in ("json_", "plain", "quiet", "color")}

    workdir = (flags.pop("workdir") or Path(project_root())).expanduser()
    flags["reviewers"] = _reviewers(flags.pop("reviewer"), flags.pop("reviewers"))
    for key in ("implementer", "editable", "protect", "notify", "sandbox_writable"):
        flags[key] = list(flags[key]) or None
    flags["goal"] = _goal(goal, goal_file)
    spec = build_spec(flags, workdir)
    if not detach:
        from loope.workspace.overlay import capture_early

        # The user's state is captured while the engine loads (its `git add -A` costs as much as a step).
        wants_worktree, sandbox = bool(spec.branch or spec.keep_workspace), spec.sandbox != SandboxMode.OFF
        capture_early(spec.workdir, spec.workspace, wants_worktree=wants_worktree, sandbox=sandbox)
    if spec.dry_run:
        _check_real_setup(spec)
    if detach:
        from loope.cli.control import start_detached  # the control commands: only to detach
        from loope.sandbox import choose

        choose(spec.sandbox)  # --sandbox on where it cannot work: refused here, not in the background
        return start_detached(spec)
    from loope.engine.loop import Engine
    from loope.services import for_project  # loads the spec (pydantic) and the store (sqlite)

    engine = Engine(spec, for_project(spec, views(**output)))
    try:
        record = engine.run()
    except KeyboardInterrupt:
        raise LoopeError("interrupted before the run started; nothing was recorded", exit_code=130) from None
    _say_notify_problems(Path(engine.run_state.rundir.root))
    if show_diff and not output["json_"]:
        diff = (Path(engine.run_state.rundir.root) / "changes.diff").read_text(encoding="utf-8")
        click.echo(diff or "(no changes)")
    del record
    return engine.exit_code()


def _goal(goal: str | None, goal_file: Path | None) -> str | None:

    if goal_file is not None:
        if goal is not None:
            raise LoopeError("give the goal as an argument or with --goal-file, not both")
        try:
            return goal_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise LoopeError(f"cannot read --goal-file {goal_file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise LoopeError(f"--goal-file {goal_file} is not UTF-8 text") from None
    return goal


def _reviewers(repeated: tuple[str, ...], joined: str | None) -> list[str] | None:
    names = list(repeated)
    if joined:
        names += [n.strip() for n in joined.split(",") if n.strip()]
    return names or None


def _check_real_setup(spec: Any) -> None:
    """A dry run first checks what a real run would use: each agent's binary and login or key."""

    options = {name: spec.agent_options(name) for name in spec.agents}
    failing = [c for c in diagnose(list(spec.dry_run_agents), options, spec.workdir, sandbox=spec.sandbox) if not c.ok]
    if failing:
        problems = "; ".join(f"{c.agent}: {c.summary}" + (f" ({c.fixes[0]})" if c.fixes else "") for c in failing)
        raise LoopeError(f"dry run: the real set-up would fail: {problems}")


def _say_notify_problems(rundir: Path) -> None:
    """A notification that failed is said at the end (a notifier never fails the run, but must not fail silently)."""

    log = rundir / NOTIFY_LOG
    if log.exists():
        count = len(log.read_text(encoding="utf-8", errors="replace").splitlines())
        click.echo(f"notifications: {count} problem(s) delivering them; see {log}", err=True)
