"""What ``loope adapters`` and ``loope doctor`` find out about the installed agent CLIs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loope.agents import registry
from loope.agents.base import AdapterInfo, Agent
from loope.agents.process import ProcessAgent
from loope.errors import LoopeError
from loope.proc import run_process


@dataclass(frozen=True)
class Survey:
    name: str
    installed: bool
    binary: str | None
    version: str | None
    read_only: str
    cost_source: str
    install: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def binary_for(agent: Agent, workdir: Path) -> str | None:
    """The program ``agent`` would run (loope.toml's ``bin`` and ``LOOPE_<NAME>_BIN`` honoured), or None."""
    locate = getattr(agent, "binary", None)  # ProcessAgent and the ACP presets say which program they run
    if agent.info.binary is None or not callable(locate):
        return None
    program = str(locate())
    if os.sep in program:
        path = Path(program).expanduser()
        path = path if path.is_absolute() else workdir / path
        return str(path) if path.exists() else None
    return shutil.which(program)


def version_of(binary: str, args: tuple[str, ...]) -> str | None:
    result = run_process([binary, *args], cwd=Path.cwd(), capture=True, timeout=15, term_grace_s=1)
    if not result.ok:
        return None
    lines = [ln.strip() for ln in (result.text or result.stderr_tail).splitlines() if ln.strip()]
    return lines[0][:80] if lines else None


def _survey_one(name: str) -> Survey:
    info: AdapterInfo = registry.info(name)
    binary = None if name == "exec" else binary_for(registry.create(registry.AgentSpec(name)), Path.cwd())
    builtin = info.binary is None
    version = version_of(binary, info.version_args) if binary else None
    return Survey(
        name=name,
        installed=builtin or binary is not None,
        binary=binary,
        version=version if binary else ("built in" if builtin else None),
        read_only=info.read_only,
        cost_source=info.cost_source,
        install=info.install,
    )


def survey() -> list[Survey]:
    """Every adapter, its binary and version probed in parallel."""
    names = registry.known()
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(_survey_one, names))


@dataclass(frozen=True)
class Check:
    agent: str
    ok: bool
    summary: str
    fixes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _check(spec_text: str, options: Mapping[str, Any], workdir: Path, sandboxed: bool) -> Check:

    try:
        spec = registry.parse(spec_text)
    except LoopeError as exc:
        return Check(spec_text, False, "unknown agent", [exc.message])
    agent = registry.create(spec, options.get(spec.name, {}))
    problem = agent.preflight(workdir)
    if problem:
        # Each hint once: the problem may already say how to install it.
        install = agent.info.binary and agent.info.install not in problem
        return Check(spec_text, False, problem, [f"install it: {agent.info.install}"] if install else [])
    info = agent.info
    if spec.command is not None:
        return Check(spec_text, True, "your own command; found")
    binary = binary_for(agent, workdir)
    if binary is None:
        return Check(spec_text, True, "built in")
    version = version_of(binary, info.version_args)
    if version is None:
        return Check(
            spec_text,
            False,
            f"{binary} does not run (`{binary} {' '.join(info.version_args)}` failed)",
            [f"reinstall it: {info.install}"],
        )
    trouble = agent.doctor_problem(workdir, sandboxed=sandboxed) if isinstance(agent, ProcessAgent) else None
    if trouble:
        return Check(spec_text, False, f"{version}; {trouble}")
    home = Path.home()
    has_key = [v for v in info.auth_env if os.environ.get(v)]
    has_login = [f for f in info.login_files if _login_path(home, f).exists()]
    if info.auth_env or info.login_files:
        if not (has_key or has_login):
            wanted = " or ".join(info.auth_env) or "a login"
            return Check(
                spec_text,
                False,
                f"{version}; no credentials found",
                [f"log in with `{info.binary}` (interactive) or set {wanted}"],
            )
        how = has_key[0] if has_key else f"~/{has_login[0]}"
        return Check(spec_text, True, f"{version}; credentials from {how}")
    return Check(spec_text, True, version)


def _login_path(home: Path, entry: str) -> Path:
    """A login file: relative to the home directory, or under a variable (``$CLAUDE_CONFIG_DIR/...``)."""
    if entry.startswith("$"):
        expanded = os.path.expandvars(entry)
        return Path(expanded) if not expanded.startswith("$") else home / ".loope-unset-variable"
    return home / entry


def diagnose(specs: list[str], options: Mapping[str, Any], workdir: Path, *, sandbox: str) -> list[Check]:
    """Each agent checked as a run from ``workdir`` would use it (``options``: per-adapter loope.toml
    settings; ``sandbox``: the run's ``--sandbox`` mode)."""
    from loope.sandbox import bwrap

    sandboxed = sandbox != "off" and bwrap.support().works
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda text: _check(text, options, workdir, sandboxed), specs))
