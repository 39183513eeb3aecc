"""What ``loope adapters`` and ``loope doctor`` find out about the installed agent CLIs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from loope.agents import catalog, registry
from loope.agents.catalog import AdapterInfo
from loope.errors import LoopeError

T = TypeVar("T")
R = TypeVar("R")


class Survey(NamedTuple):
    name: str
    installed: bool
    binary: str | None
    version: str | None
    read_only: str
    cost_source: str
    install: str

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


def binary_for(info: AdapterInfo, options: Mapping[str, Any], workdir: Path) -> str | None:
    """The program an adapter would run (loope.toml's ``bin`` and ``LOOPE_<NAME>_BIN`` honoured), or None."""
    if info.binary is None:  # built in, or the user's own command
        return None
    program = catalog.program(info, options)
    if os.sep in program:
        path = Path(program).expanduser()
        path = path if path.is_absolute() else workdir / path
        return str(path) if path.exists() else None
    return shutil.which(program)


def version_of(binary: str, args: tuple[str, ...]) -> str | None:
    from loope.proc import run_process  # loads subprocess: only once there is a program to ask

    result = run_process([binary, *args], cwd=Path.cwd(), capture=True, timeout=15, term_grace_s=1)
    if not result.ok:
        return None
    lines = [ln.strip() for ln in (result.text or result.stderr_tail).splitlines() if ln.strip()]
    return lines[0][:80] if lines else None


def survey() -> list[Survey]:
    """Every adapter: its binary found, and the versions of those found asked in parallel."""
    infos = [registry.info(name) for name in registry.known()]
    binaries = [binary_for(info, {}, Path.cwd()) for info in infos]
    asked = sorted({(b, info.version_args) for b, info in zip(binaries, infos, strict=True) if b})
    versions = dict(zip(asked, in_parallel(lambda pair: version_of(*pair), asked), strict=True))
    return [
        Survey(
            name=info.name,
            installed=info.binary is None or binary is not None,
            binary=binary,
            version=versions[binary, info.version_args] if binary else ("built in" if info.binary is None else None),
            read_only=info.read_only,
            cost_source=info.cost_source,
            install=info.install,
        )
        for info, binary in zip(infos, binaries, strict=True)
    ]


def in_parallel(work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``work`` done on each item, eight at a time; no thread at all when there is nothing to do."""
    todo = list(items)
    if not todo:
        return []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(work, todo))


class Check(NamedTuple):
    agent: str
    ok: bool
    summary: str
    fixes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


class _Installed(NamedTuple):
    """An agent whose program is there: what is left to check runs it."""

    text: str
    spec: registry.AgentSpec
    info: AdapterInfo
    settings: Mapping[str, Any]
    binary: str


def _look(text: str, options: Mapping[str, Any], workdir: Path) -> Check | _Installed:
    """What can be said of an agent without running anything; an installed CLI is left to ``_ask``."""
    try:
        spec = registry.parse(text)
    except LoopeError as exc:
        return Check(text, False, "unknown agent", (exc.message,))
    info, settings = registry.info(spec.name), options.get(spec.name, {})
    if spec.command is None and info.binary is not None:  # a CLI: found or not without loading its adapter
        problem = catalog.program_problem(info, catalog.program(info, settings), workdir)
    else:
        problem = registry.create(spec, settings).preflight(workdir)
    if problem:
        # Each hint once: the problem may already say how to install it.
        install = info.binary and info.install not in problem
        return Check(text, False, problem, (f"install it: {info.install}",) if install else ())
    if spec.command is not None:
        return Check(text, True, "your own command; found")
    binary = binary_for(info, settings, workdir)
    if binary is None:
        return Check(text, True, "built in")
    return _Installed(text, spec, info, settings, binary)


def _ask(found: _Installed, workdir: Path, sandbox: str) -> Check:
    """An installed CLI checked: it runs, its adapter finds its set-up fine, it has credentials."""
    text, info, binary = found.text, found.info, found.binary
    version = version_of(binary, info.version_args)
    if version is None:
        return Check(
            text,
            False,
            f"{binary} does not run (`{binary} {' '.join(info.version_args)}` failed)",
            (f"reinstall it: {info.install}",),
        )
    trouble = _adapter_problem(registry.create(found.spec, found.settings), workdir, sandbox)
    if trouble:
        return Check(text, False, f"{version}; {trouble}")
    home = Path.home()
    has_key = [v for v in info.auth_env if os.environ.get(v)]
    has_login = [f for f in info.login_files if _login_path(home, f).exists()]
    if info.auth_env or info.login_files:
        if not (has_key or has_login):
            wanted = " or ".join(info.auth_env) or "a login"
            return Check(
                text,
                False,
                f"{version}; no credentials found",
                (f"log in with `{info.binary}` (interactive) or set {wanted}",),
            )
        how = has_key[0] if has_key else f"~/{has_login[0]}"
        return Check(text, True, f"{version}; credentials from {how}")
    return Check(text, True, version)


def _login_path(home: Path, entry: str) -> Path:
    """A login file: relative to the home directory, or under a variable (``$CLAUDE_CONFIG_DIR/...``)."""
    if entry.startswith("$"):
        expanded = os.path.expandvars(entry)
        return Path(expanded) if not expanded.startswith("$") else home / ".loope-unset-variable"
    return home / entry


def _adapter_problem(agent: Any, workdir: Path, sandbox: str) -> str | None:
    """What an installed CLI's adapter finds wrong with its set-up (for the run's ``--sandbox`` mode), or None."""
    from loope import bwrap_probe
    from loope.agents.process import ProcessAgent

    if not isinstance(agent, ProcessAgent):
        return None
    return agent.doctor_problem(workdir, sandboxed=sandbox != "off" and bwrap_probe.support().works)


def diagnose(specs: list[str], options: Mapping[str, Any], workdir: Path, *, sandbox: str) -> list[Check]:
    """Each agent checked as a run from ``workdir`` would use it (``options``: per-adapter loope.toml
    settings; ``sandbox``: the run's ``--sandbox`` mode); the installed ones in parallel."""
    looked = [_look(text, options, workdir) for text in specs]
    asked = iter(
        in_parallel(lambda found: _ask(found, workdir, sandbox), [f for f in looked if isinstance(f, _Installed)])
    )
    return [found if isinstance(found, Check) else next(asked) for found in looked]
