"""``inspect`` deferred by the CLI: the same module, the same answers, loaded by its first real use."""

from __future__ import annotations

import json
import subprocess
import sys

# Help texts as click cleans them, and as docstrings come: one line, indented, tabs, blank, not a string.
DOCS = ["One line.", "  leading space", "tab\there", "Two\n    lines\n", "", " ", "\n\nx\n", "trailing  "]
PROBE = """
import json, sys, threading, types
import loope.cli  # defers inspect
import inspect
deferred = type(inspect).__name__
before = [inspect.cleandoc(doc) for doc in json.loads(sys.argv[1])[:1]]
loaded_by_one_line = "ast" in sys.modules
errors = []
def use():  # eight threads make the first real use at once
    try:
        inspect.signature(use)
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=use) for _ in range(8)]
for thread in threads: thread.start()
for thread in threads: thread.join()
cleaned = [inspect.cleandoc(doc) for doc in json.loads(sys.argv[1])]
from inspect import Parameter
print(json.dumps({
    "deferred": deferred, "before": before, "loaded_by_one_line": loaded_by_one_line, "cleaned": cleaned,
    "real": [inspect.cleandoc(doc) for doc in json.loads(sys.argv[1])], "same": sys.modules["inspect"] is inspect,
    "plain": type(inspect) is types.ModuleType, "file": inspect.__file__, "errors": errors,
    "parameter": Parameter.__module__, "signature": str(inspect.signature(lambda a, b=1: None)),
}))
"""


def probe(*code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, *code], capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_inspect_is_deferred_and_then_the_real_module_with_the_same_answers() -> None:
    seen = probe("-c", PROBE, json.dumps(DOCS))
    assert seen["deferred"] == "_Deferred"
    assert seen["loaded_by_one_line"] is False  # a one-line help text needs none of it
    assert seen["before"] == ["One line."]
    assert seen["cleaned"] == seen["real"]  # what the deferred module answered is what inspect answers
    assert seen["same"] is True  # one module object, before and after
    assert seen["plain"] is True
    assert seen["file"] == probe("-c", "import inspect, json; print(json.dumps({'f': inspect.__file__}))")["f"]
    assert seen["errors"] == []
    assert seen["parameter"] == "inspect"
    assert seen["signature"] == "(a, b=1)"


def test_an_imported_inspect_is_left_alone() -> None:
    import inspect

    from loope.cli.deferred import defer_inspect

    defer_inspect()
    assert sys.modules["inspect"] is inspect
    assert type(inspect).__name__ == "module"
