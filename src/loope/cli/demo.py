"""``loope demo``: a real loop on a bundled example, offline, in under a minute."""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import sys
import tempfile
from importlib.resources import as_file, files
from pathlib import Path

import click

from loope.cli.options import output_options, views
from loope.records.report import render
from loope.workspace.git import Git

GOAL = "Fix calc.add so that every test in tests/ passes."


def prepare_example(root: Path) -> Path:
    """Copy the bundled example into ``root/calc`` and commit it, as a user's repository would be."""
    project = root / "calc"
    with as_file(files("loope.demo").joinpath("example")) as example:
        shutil.copytree(example, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "gitignore").rename(project / ".gitignore")
    git = Git(project)
    git.run("init", "-q", "-b", "main")
    git.commit_all("the calc example")
    return project


def agent_command(name: str) -> str:
    with as_file(files("loope.demo").joinpath("agents", f"{name}.py")) as script:
        return f"exec:{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def gate_command() -> str:
    python = shlex.quote(sys.executable)
    if importlib.util.find_spec("pytest") is not None:
        return f"{python} -m pytest -q -p no:cacheprovider"
    return f"{python} -m unittest"


@click.command(short_help="Run a real loop on a bundled example, offline.")
@click.option("--keep", is_flag=True, help="Keep the example project afterwards (its path is printed).")
@output_options
def demo(keep: bool, json_: bool, plain: bool, quiet: bool, color: str) -> int:
    """Copy a small Python package with a failing test to a temporary directory and loop on it.

    The bundled implementer's first attempt fails the tests; the failure is fed back; the second
    attempt fixes it and the bundled reviewer passes it.
    """
    from loope.engine.loop import Engine
    from loope.engine.roster import Services
    from loope.spec import build_spec

    root = Path(tempfile.mkdtemp(prefix="loope-demo-"))
    try:
        project = prepare_example(root)
        spec = build_spec(
            {
                "goal": GOAL,
                "implementer": agent_command("implementer"),
                "reviewers": [agent_command("reviewer")],
                "verify_cmd": gate_command(),
                "max_iters": 3,
                "timeout": 120,
            },
            project,
            use_config=False,
        )
        engine = Engine(spec, Services(observers=views(json_, plain, quiet, color)))
        record = engine.run()
        if not json_:
            rundir = engine.run_state.rundir
            click.echo("")
            report = render(rundir.read_json("run.json")).rstrip()
            if not keep:  # its "Next" commands need the example project, which goes away now
                report = (
                    report.split("\n## Next")[0] + "\n\n(the example project is removed; `loope demo --keep` keeps it)"
                )
            click.echo(report)
            click.echo("")
            click.echo((rundir / "changes.diff").read_text(encoding="utf-8").rstrip())
            if keep:
                click.echo(f"\nthe example project is kept at {project} (run `loope runs` there)")
        del record
        return engine.exit_code()
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
