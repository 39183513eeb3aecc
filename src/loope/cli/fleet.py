"""``loope fleet``: many loops from one file; ``fleet status``, ``fleet stop``, ``fleet continue``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loope.cli.options import project_dir, workdir_option
from loope.control import request_stop
from loope.errors import LoopeError
from loope.fleet.spec import load_fleet
from loope.records.model import now_iso
from loope.records.rundir import slug
from loope.runners import process_alive
from loope.text import local_clock
from loope.workspace.loopedir import ensure_loope_dir

if TYPE_CHECKING:
    from loope.fleet.spec import FleetFile
    from loope.fleet.temporal.submit import TemporalSettings
    from loope.store.fleets import FleetStore

DEFAULT_ADDRESS = "127.0.0.1:7233"

_SUBCOMMANDS = ("status", "stop", "continue")


class FleetGroup(click.Group):
    """``loope fleet FILE`` starts a fleet; a first word naming a subcommand runs that instead."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in (*_SUBCOMMANDS, "start", "-h", "--help"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


@click.group(
    cls=FleetGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    short_help="Run many loops from a fleet file, up to --jobs at once.",
)
def fleet() -> None:
    """Run many loops from a fleet file (TOML), up to --jobs at once, under one budget.

    \b
    loope fleet FILE [--jobs N] [--json] [--plain]   start every [[task]] of FILE
    loope fleet FILE --temporal [HOST:PORT] --remote GIT_URL [--namespace NS] [--task-queue Q] [--heartbeat SECS]
                                                     the same loops on Temporal (`loope worker`s run them)
    loope fleet status [FLEET] [--json]              the fleets, or one fleet's loops
    loope fleet stop FLEET [--now]                   stop every loop of a fleet
    loope fleet continue FLEET                       start what is left, restart dead runners
    """


@fleet.command("start", hidden=True)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--jobs", type=click.IntRange(1, 64), help="Loops at once. [default: [fleet] jobs, else 2]")
@click.option("--json", "json_", is_flag=True, help="The fleet as JSON lines on stdout.")
@click.option("--plain", is_flag=True, help="Plain lines, no live table.")
@click.option(
    "--temporal",
    "address",
    is_flag=False,
    flag_value=DEFAULT_ADDRESS,
    metavar="[HOST:PORT]",
    help=f"Run the loops as Temporal workflows, iterations on `loope worker`s. [default: {DEFAULT_ADDRESS}]",
)
@click.option("--remote", metavar="GIT_URL", help="With --temporal: the git remote every worker can reach.")
@click.option("--namespace", metavar="NS", help="With --temporal: the Temporal namespace. [default: default]")
@click.option("--task-queue", metavar="QUEUE", help="With --temporal: the workers' task queue. [default: loope]")
@click.option(
    "--heartbeat",
    type=click.FloatRange(1, 3600),
    metavar="SECS",
    help="With --temporal: a silent worker is presumed dead after this. [default: 30]",
)
@workdir_option
def start(file: Path, jobs: int | None, json_: bool, plain: bool, workdir: Path | None, **temporal: Any) -> int:
    """Start every task of FILE and drive the fleet until each loop has ended."""
    from loope.fleet.pool import Coordinator, exit_code  # loads the store (sqlite)
    from loope.store.fleets import FleetStore
    from loope.ui.fleet import fleet_display

    home = project_dir(workdir)
    loaded = load_fleet(file.expanduser(), jobs=jobs)
    settings = _temporal_settings(loaded.settings.temporal, temporal)
    store = FleetStore(ensure_loope_dir(home) / "loope.db")
    running = store.running_fleets_with_digest(loaded.digest)
    for row in running:
        if process_alive(row["coordinator_pid"]):
            raise LoopeError(
                f"fleet {row['id']} is already running this file (pid {row['coordinator_pid']});"
                f" follow it with `loope fleet status {row['id']}`"
            )
    if settings is not None:
        from loope.fleet.temporal.client import Bridge
        from loope.fleet.temporal.submit import drive_fleet

        with Bridge(settings.address, settings.namespace) as bridge:  # unreachable: said before anything is kept
            # The same file again, its coordinator gone: follow the same workflows rather than start more.
            again = next((r["id"] for r in running if r["temporal"]), None)
            fleet_id = again or _add(store, file, loaded, temporal=settings.to_json(), jobs=len(loaded.tasks))
            if not json_:
                click.echo(f"fleet {fleet_id}: {len(loaded.tasks)} loop(s) on Temporal at {settings.address}")
            display = fleet_display(json_=json_, plain=plain)
            return exit_code(drive_fleet(store, fleet_id, display, settings, bridge))
    fleet_id = _add(store, file, loaded)
    if not json_:
        click.echo(f"fleet {fleet_id}: {len(loaded.tasks)} loop(s), {loaded.settings.jobs} at once")
    view = Coordinator(store, fleet_id, fleet_display(json_=json_, plain=plain)).drive()
    return exit_code(view)


def _add(store: FleetStore, file: Path, loaded: FleetFile, **extra: Any) -> str:

    return store.add_fleet(
        slug(file.stem, words=4, chars=24),
        {
            "file": str(loaded.path),
            "digest": loaded.digest,
            "jobs": loaded.settings.jobs,
            "max_cost": loaded.settings.max_cost,
            "max_time": loaded.settings.max_time,
            "started_at": now_iso(),
            **extra,
        },
        [
            {"position": i, "name": t.name, "workdir": str(t.workdir), "spec": t.spec.model_dump_json()}
            for i, t in enumerate(loaded.tasks)
        ],
    )


def _temporal_settings(table: dict[str, str], flags: dict[str, Any]) -> TemporalSettings | None:
    """``--temporal`` and its options over the file's ``[fleet]`` keys; None for a local fleet."""

    address = flags["address"] or table.get("temporal")
    if address is None:
        for name in ("remote", "namespace", "task_queue", "heartbeat"):
            if flags[name] is not None:
                raise LoopeError(
                    f"--{name.replace('_', '-')} needs --temporal (a fleet on this machine has no use for it)"
                )
        return None
    try:
        from loope.fleet.temporal.submit import TemporalSettings
    except ImportError:
        raise LoopeError("--temporal needs the Temporal extra: pip install 'loope[temporal]'") from None
    remote = flags["remote"] or table.get("remote")
    if not remote:
        raise LoopeError("--temporal needs --remote GIT_URL (or [fleet] remote): a git remote every worker can reach")
    if "://" not in remote and Path(remote).exists():
        remote = str(Path(remote).resolve())
    return TemporalSettings(
        address=address,
        remote=remote,
        namespace=flags["namespace"] or table.get("namespace") or "default",
        task_queue=flags["task_queue"] or table.get("task_queue") or "loope",
        heartbeat_s=flags["heartbeat"] or 30.0,
    )


@fleet.command()
@click.argument("fleet_ref", metavar="[FLEET]", required=False)
@click.option("--json", "json_", is_flag=True, help="JSON output.")
@workdir_option
def status(fleet_ref: str | None, json_: bool, workdir: Path | None) -> int:
    """Every fleet of the project, or one fleet's loops."""
    from loope.fleet.pool import fleet_view  # loads the store (sqlite)
    from loope.ui.fleet import final_lines, totals_line

    store = _store(workdir)
    if fleet_ref is None:
        views = [fleet_view(store, row["id"]) for row in store.fleets()]
        if json_:
            click.echo(json.dumps([v.to_dict() for v in views], indent=2))
        elif not views:
            click.echo("no fleets yet; start one with `loope fleet FILE`")
        for view in views if not json_ else []:
            click.echo(totals_line(view))
        return 0
    view = fleet_view(store, _find(store, fleet_ref))
    states = _workflow_states(store, view.fleet_id)
    if json_:
        data = view.to_dict()
        if states is not None:
            for task in data["tasks"]:
                task["workflow"] = states.get(task["name"])
        click.echo(json.dumps(data, indent=2))
        return 0
    click.echo("\n".join(final_lines(view)))
    for name, state in (states or {}).items():
        click.echo(f"  {name}: workflow {_workflow_text(state)}")
    return 0


def _workflow_states(store: FleetStore, fleet_id: str) -> dict[str, Any] | None:
    """A fleet on Temporal: each loop's workflow as its status query answers now (None: a local fleet)."""
    row = store.get_fleet(fleet_id) or {}
    if not row.get("temporal"):
        return None
    from loope.fleet.temporal.submit import TemporalSettings, workflow_states

    try:
        return workflow_states(store, fleet_id, TemporalSettings.from_json(row["temporal"]))
    except LoopeError as exc:
        click.echo(f"the workflows cannot be asked: {exc.message}", err=True)
        return {}


def _workflow_text(state: dict[str, Any] | None) -> str:
    if state is None:
        return "not known (no worker answers its query)"

    parts = [f"{state['state']} after {state['completed']} iteration(s)"]
    if state.get("waiting_until"):
        parts.append(f"waiting for the usage limit until {local_clock(state['waiting_until'])}")
    if state.get("retried"):
        parts.append(f"{state['retried']} attempt(s) run again (${state['lost_usd']:.4f} lost)")
    return ", ".join(parts)


@fleet.command()
@click.argument("fleet_ref", metavar="FLEET")
@click.option("--now", is_flag=True, help="Also kill each loop's step in flight.")
@workdir_option
def stop(fleet_ref: str, now: bool, workdir: Path | None) -> int:
    """Stop every loop of FLEET (before its next step; with --now, at once) and start no more."""
    from loope.fleet.pool import fleet_view  # loads the store (sqlite)

    store = _store(workdir)
    fleet_id = _find(store, fleet_ref)
    row = store.get_fleet(fleet_id) or {}
    if row.get("temporal"):
        from loope.fleet.temporal.submit import TemporalSettings, stop_fleet

        # The signals first: the coordinator, once it sees the fleet's flag, signals the loops too.
        asked = stop_fleet(store, fleet_id, TemporalSettings.from_json(row["temporal"]), now=now)
        store.request_fleet_stop(fleet_id, now=now)
        when = "killing the iteration in flight" if now else "after the iteration in flight"
        click.echo(f"stop signalled to {asked} loop(s) of fleet {fleet_id}: they stop {when}")
        return 0
    store.request_fleet_stop(fleet_id, now=now)
    view = fleet_view(store, fleet_id)
    asked = 0
    for task in view.tasks:
        if task.status == "running" and task.run_id:
            asked += int(request_stop(Path(task.workdir), task.run_id, now=now))
    row = store.get_fleet(fleet_id) or {}
    if not process_alive(row.get("coordinator_pid")) and row.get("status") == "running":
        for task in view.tasks:
            if task.status == "pending":
                store.update_fleet_task(fleet_id, task.name, status="skipped")
        store.update_fleet(fleet_id, status="stopped", stop_detail="stop requested", finished_at=now_iso())
    when = "at once" if now else "before their next step"
    click.echo(f"stop requested for fleet {fleet_id}: {asked} running loop(s) stop {when}; no new loop starts")
    return 0


@fleet.command("continue")
@click.argument("fleet_ref", metavar="FLEET")
@click.option("--json", "json_", is_flag=True, help="The fleet as JSON lines on stdout.")
@click.option("--plain", is_flag=True, help="Plain lines, no live table.")
@workdir_option
def continue_(fleet_ref: str, json_: bool, plain: bool, workdir: Path | None) -> int:
    """Pick FLEET up again: restart loops whose runner died, start the tasks not started yet."""
    from loope.fleet.pool import Coordinator, exit_code, resume_dead  # loads the store (sqlite)
    from loope.ui.fleet import fleet_display

    store = _store(workdir)
    fleet_id = _find(store, fleet_ref)
    row = store.get_fleet(fleet_id) or {}
    if row.get("status") == "running" and process_alive(row.get("coordinator_pid")):
        raise LoopeError(f"fleet {fleet_id} is still running (pid {row['coordinator_pid']}); nothing to continue")
    store.update_fleet(fleet_id, interrupt=0, interrupt_now=0, stop_detail=None)
    for task in store.fleet_tasks(fleet_id):
        if task["status"] == "skipped" or (task["status"] == "failed" and not task["run_id"]):
            store.update_fleet_task(fleet_id, task["name"], status="pending", error=None)
    if row.get("temporal"):
        from loope.fleet.temporal.client import Bridge
        from loope.fleet.temporal.submit import TemporalSettings, drive_fleet

        settings = TemporalSettings.from_json(row["temporal"])
        with Bridge(settings.address, settings.namespace) as bridge:
            return exit_code(drive_fleet(store, fleet_id, fleet_display(json_=json_, plain=plain), settings, bridge))
    restarted = resume_dead(store, fleet_id)
    if restarted and not json_:
        click.echo(f"restarted the runner of {', '.join(restarted)}")
    view = Coordinator(store, fleet_id, fleet_display(json_=json_, plain=plain)).drive()
    return exit_code(view)


def _store(workdir: Path | None) -> FleetStore:
    from loope.store.fleets import FleetStore

    return FleetStore(ensure_loope_dir(project_dir(workdir)) / "loope.db")


def _find(store: FleetStore, ref: str) -> str:
    """The fleet whose id starts with ``ref``; exactly one must match."""
    ids = [str(row["id"]) for row in store.fleets()]
    matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if not matches and ref.isdigit():
        matches = [i for i in ids if i.split("-", 1)[0].lstrip("0") == ref.lstrip("0")]
    if not matches:
        raise LoopeError(f"no fleet matches {ref!r}; `loope fleet status` lists them")
    if len(matches) > 1:
        raise LoopeError(f"{ref!r} matches {len(matches)} fleets ({', '.join(matches[:5])}); give more of the id")
    return matches[0]
