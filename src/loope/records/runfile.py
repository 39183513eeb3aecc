"""Reading run.json: one loader that checks the record's shape before anything uses it.

A run.json can be damaged (a crash mid-write on a filesystem without atomic rename, an edit, a
process that rewrote it): valid JSON with the wrong types or keys missing. Every reader goes
through :func:`load` (or :func:`problem`), so such a run is named as damaged in one line instead
of breaking ``runs``, ``show``, ``status`` or ``apply`` for the whole project.

Kept to ``json`` and ``os``: ``loope runs`` reads every run's file and must start fast.
"""

from __future__ import annotations

import json
import os
from typing import Any

_NUMBER = (int, float)
_NULL = type(None)
Fields = dict[str, tuple[tuple[type, ...], bool]]

# key: (accepted types, required). Schema 1 (DESIGN.md); other keys are allowed and not checked.
_RECORD: Fields = {
    "run_id": ((str,), True),
    "goal": ((str,), True),
    "workdir": ((str,), False),
    "status": ((str,), True),
    "workspace": ((dict,), False),
    "schema": ((int,), False),
    "converged": ((bool,), False),
    "iterations": ((int,), False),
    "completed": ((int,), False),
    "completed_head": ((str, _NULL), False),
    "max_iters": ((int,), False),
    "stop_reason": ((str, _NULL), False),
    "stop_detail": ((str, _NULL), False),
    "started_at": ((str, _NULL), False),
    "finished_at": ((str, _NULL), False),
    "duration_s": (_NUMBER, False),
    "elapsed_before_s": (_NUMBER, False),
    "pid": ((int, _NULL), False),
    "implementer": ((str,), False),
    "reviewers": ((list,), False),
    "verify_cmd": ((str, _NULL), False),
    "metric": ((dict, _NULL), False),
    "totals": ((dict,), False),
    "best": ((dict, _NULL), False),
    "baseline": ((*_NUMBER, _NULL), False),
    "steps": ((list,), False),
    "discarded_steps": ((list,), False),
    "changes": ((dict,), False),
    "state": ((dict, _NULL), False),
    "loop": ((dict,), False),
}
_WORKSPACE: Fields = {
    "mode": ((str,), True),
    "path": ((str,), True),
    "base": ((str,), True),
    "head": ((str,), True),
    "branch": ((str, _NULL), False),
    "git_dir": ((str, _NULL), False),
}
_TOTALS: Fields = {
    "cost_usd": (_NUMBER, False),
    "cost_estimated": ((bool,), False),
    "cost_unknown_steps": ((int,), False),
    "input_tokens": ((int,), False),
    "output_tokens": ((int,), False),
}
_STEP: Fields = {
    "id": ((int,), True),
    "iteration": ((int,), True),
    "role": ((str,), True),
    "adapter": ((str,), True),
    "dir": ((str,), True),
    "ok": ((bool,), False),
    "error": ((str, _NULL), False),
    "gate_passed": ((bool, _NULL), False),
    "verdict": ((str, _NULL), False),
    "verdict_inferred": ((bool,), False),
    "score": ((*_NUMBER, _NULL), False),
    "duration_s": (_NUMBER, False),
    "cost_usd": (_NUMBER, False),
    "cost_estimated": ((bool,), False),
    "cost_known": ((bool,), False),
    "input_tokens": ((int,), False),
    "output_tokens": ((int,), False),
    "changed_files": ((list,), False),
    "files": ((list,), False),
    "violations": ((list,), False),
    "commit": ((str, _NULL), False),
    "model": ((str, _NULL), False),
}
_CHANGE: Fields = {"path": ((str,), True), "status": ((str,), False)}


class DamagedRecord(ValueError):
    """A run.json that is not a run's record; the message says what is wrong with it."""


WHOLE = ("workdir", "workspace")
"""What a record needs beyond its shape to be acted on (resume, apply, a diff); ``status`` does without."""


def problem(data: Any, run_id: str | None = None, *, whole: bool = False) -> str | None:
    """What is wrong with a parsed run.json, or None when it has the shape of a run's record.

    ``whole``: the keys of :data:`WHOLE` must be there too.
    """
    if not isinstance(data, dict):
        return f"a JSON {_name(type(data))}, not an object"
    wrong = _fields(data, _RECORD, "")
    if wrong:
        return wrong
    missing = [key for key in WHOLE if whole and key not in data]
    if missing:
        return f"{missing[0]} is missing"
    if run_id is not None and data["run_id"] != run_id:
        return f"its run_id {str(data['run_id'])[:60]!r} is not the run's ({run_id})"
    parts: list[tuple[Any, Fields, str]] = (
        [(data["workspace"], _WORKSPACE, "workspace.")] if "workspace" in data else []
    )
    if "totals" in data:
        parts.append((data["totals"], _TOTALS, "totals."))
    for key in ("steps", "discarded_steps"):
        parts += [(step, _STEP, f"{key}[{n}].") for n, step in enumerate(data.get(key, []))]
    changes = data.get("changes", {})
    if not isinstance(changes.get("files", []), list):
        return "changes.files is not a list"
    parts += [(item, _CHANGE, f"changes.files[{n}].") for n, item in enumerate(changes.get("files", []))]
    for value, fields, where in parts:
        if not isinstance(value, dict):
            return f"{where.rstrip('.')} is {_kind(value)}, not an object"
        wrong = _fields(value, fields, where)
        if wrong:
            return wrong
    return None


def load(path: str, run_id: str | None = None, *, whole: bool = False) -> dict[str, Any]:
    """The run.json at ``path``, checked; OSError when it cannot be read, DamagedRecord when it is not a record."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        data = json.loads(text)
    except ValueError as exc:  # invalid JSON (cut short, say), or bytes that are not UTF-8
        raise DamagedRecord(f"not valid JSON: {exc}") from None
    wrong = problem(data, run_id, whole=whole)
    if wrong:
        raise DamagedRecord(wrong)
    return dict(data)


def load_dir(run_dir: str, *, whole: bool = False) -> dict[str, Any]:
    """The checked run.json of the run directory ``run_dir`` (its name is the run's id)."""
    return load(os.path.join(run_dir, "run.json"), os.path.basename(os.path.normpath(run_dir)), whole=whole)


def _fields(data: dict[str, Any], fields: Fields, where: str) -> str | None:
    for key, (types, required) in fields.items():
        if key not in data:
            if required:
                return f"{where}{key} is missing"
            continue
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{where}{key} is {_kind(value)}, not {' or '.join(_name(t) for t in types)}"
    return None


def _kind(value: Any) -> str:
    """``a string``, ``an integer``: what ``value`` is, with its article."""
    name = _name(type(value))
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _name(kind: type) -> str:
    return {
        dict: "object",
        list: "list",
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        _NULL: "null",
    }.get(kind, kind.__name__)
