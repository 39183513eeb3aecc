"""What ``loope adapters`` and ``loope doctor`` find out about the installed agent CLIs."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loope.agents import registry
from loope.agents.base import AdapterInfo
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


def binary_for(name: str) -> str | None:
    """The program an adapter would run (``LOOPE_<NAME>_BIN`` honoured), resolved on PATH, or None."""
    cls = registry.adapter_class(name)
    info: AdapterInfo = cls.info
    if info.binary is None:
        return None
    configured = os.environ.get(cls.binary_env_var()) if hasattr(cls, "binary_env_var") else None
    candidates = [configured] if configured else [info.binary, *getattr(cls, "alternate_binaries", ())]
    for candidate in candidates:
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    return None


def version_of(binary: str, args: tuple[str, ...]) -> str | None:
    result = run_process([binary, *args], cwd=Path.cwd(), capture=True, timeout=15, term_grace_s=1)
    if not result.ok:
        return None
    lines = [ln.strip() for ln in (result.text or result.stderr_tail).splitlines() if ln.strip()]
    return lines[0][:80] if lines else None


def _survey_one(name: str) -> Survey:
    info: AdapterInfo = registry.info(name)
    binary = binary_for(name)
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


def _check(spec_text: str) -> Check:
    from loope.errors import LoopeError

    try:
        spec = registry.parse(spec_text)
    except LoopeError as exc:
        return Check(spec_text, False, "unknown agent", [exc.message])
    if spec.command is not None:
        from loope.agents.exec import ExecAgent

        problem = ExecAgent(spec.command).preflight(Path.cwd())
        return Check(spec_text, problem is None, problem or "your own command; found", [problem] if problem else [])
    info = registry.info(spec.name)
    if info.binary is None:
        return Check(spec_text, True, "built in")
    binary = binary_for(spec.name)
    if binary is None:
        return Check(spec_text, False, f"{info.binary} is not installed", [f"install it: {info.install}"])
    version = version_of(binary, info.version_args)
    if version is None:
        return Check(
            spec_text,
            False,
            f"{binary} does not run (`{binary} --version` failed)",
            [f"reinstall it: {info.install}"],
        )
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


def diagnose(specs: list[str]) -> list[Check]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(_check, specs))
