"""Modules deferred by the CLI (inspect, ipaddress, ntpath, fnmatch, and locale by gettext): the same module,
loaded by first use."""

from __future__ import annotations

import json
import os
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

    from loope.cli.deferred import defer_unused

    defer_unused()
    assert sys.modules["inspect"] is inspect
    assert type(inspect).__name__ == "module"


IPADDRESS = """
import json, sys
import loope.cli  # defers ipaddress
import pathlib, urllib.parse
deferred = type(sys.modules["ipaddress"]).__name__
host = urllib.parse.urlsplit("http://[::1]:8080/x").hostname  # checks the IPv6 host with ipaddress
try:
    urllib.parse.urlsplit("http://[not-an-ip]/")
    refused = False
except ValueError:
    refused = True
import ipaddress
print(json.dumps([deferred, host, refused, str(ipaddress.ip_address("10.0.0.1")), type(ipaddress).__name__]))
"""


def test_ipaddress_is_deferred_until_a_url_names_an_ipv6_host() -> None:
    done = subprocess.run([sys.executable, "-c", IPADDRESS], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == ["_Deferred", "::1", True, "10.0.0.1", "module"]


PATHLIB = """
import json, sys
import loope.cli  # defers ntpath and fnmatch
import pathlib
deferred = [type(sys.modules[name]).__name__ for name in ("ntpath", "fnmatch")]
import tempfile
with tempfile.TemporaryDirectory() as root:
    for name in ("a.py", "b.txt", "c.py"):
        (pathlib.Path(root) / name).write_text("")
    found = sorted(p.name for p in pathlib.Path(root).glob("*.py"))
windows = str(pathlib.PureWindowsPath("C:/x") / "y")
print(json.dumps([deferred, found, windows, pathlib.PurePath("a/b.py").match("*.py")]))
"""


def test_pathlibs_globs_and_windows_paths_load_what_they_need() -> None:
    done = subprocess.run([sys.executable, "-c", PATHLIB], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [["_Deferred", "_Deferred"], ["a.py", "c.py"], "C:\\x\\y", True]


UUID = """
import json, sys
import loope.cli  # defers uuid, and imports click meanwhile
import click
deferred = [type(sys.modules[name]).__name__ for name in ("uuid",)] + [str("platform" in sys.modules)]
text = "12345678-1234-5678-1234-567812345678"
converted = click.UUID.convert(text, None, None)  # a UUID option converting: loads uuid
from uuid import UUID
import uuid
same = click.UUID.convert(converted, None, None) is converted
one = str(uuid.UUID(int=1))
print(json.dumps(deferred + [type(converted) is UUID, str(converted), same, one, type(uuid).__name__]))
"""


def test_uuid_is_deferred_until_a_uuid_option_converts() -> None:
    done = subprocess.run([sys.executable, "-c", UUID], capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    assert seen == ["_Deferred", "False", True, "12345678-1234-5678-1234-567812345678", True,
                    "00000000-0000-0000-0000-000000000001", "module"]  # fmt: skip


URLLIB = """
import json, sys
import loope.cli  # defers urllib.parse
import pathlib, urllib
deferred = [type(sys.modules["urllib.parse"]).__name__, urllib.parse is sys.modules["urllib.parse"]]
uri = pathlib.PurePosixPath("/a b/ü").as_uri()  # pathlib's one use: loads urllib.parse
again = pathlib.PurePosixPath("/c%d").as_uri()
from urllib.parse import quote, urlsplit
print(json.dumps(deferred + [uri, again, quote("a b"), urlsplit("http://h/p").netloc, type(urllib.parse).__name__]))
"""


def test_urllib_parse_is_deferred_until_a_path_becomes_a_uri() -> None:
    done = subprocess.run([sys.executable, "-c", URLLIB], capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    assert seen == ["_Deferred", True, "file:///a%20b/%C3%BC", "file:///c%25d", "a%20b", "h", "module"]


# A catalog with no messages, as msgfmt writes one (magic, revision, 0 strings, both tables at 28).
EMPTY_MO = "b'\\xde\\x12\\x04\\x95' + bytes(4) + bytes(4) + (28).to_bytes(4, 'little') * 2 + bytes(8)"
GETTEXT = f"""
import gettext, json, os, sys, tempfile
import loope.cli
gone = tempfile.mkdtemp() + "/no-such-dir"
said = gettext.gettext("Show the version and exit.")  # click's first string
answers = [gettext.find("messages", gone, ["de"]), gettext.find("messages", gone, ["de"], all=True)]
no_locale = "locale" not in sys.modules
here = tempfile.mkdtemp()
os.makedirs(here + "/de/LC_MESSAGES")
with open(here + "/de/LC_MESSAGES/app.mo", "wb") as mo:
    mo.write({EMPTY_MO})
found = gettext.find("app", here, ["de_DE.UTF-8"], all=True)
translated = type(gettext.translation("app", here, ["de"])).__name__
print(json.dumps([said, answers, no_locale, [f[len(here):] for f in found], translated, "locale" in sys.modules]))
"""


def test_gettext_looks_for_no_catalog_where_its_directory_does_not_exist_and_finds_one_where_it_does() -> None:
    done = subprocess.run([sys.executable, "-c", GETTEXT], capture_output=True, text=True, check=True)
    said, answers, no_locale, found, translated, locale_loaded = json.loads(done.stdout)
    assert (said, answers) == ("Show the version and exit.", [None, []])
    import gettext

    if not os.path.isdir(gettext._default_localedir):  # type: ignore[attr-defined]  # where click's strings look
        assert no_locale  # nothing but the answer: no locale module, no look on disk
    assert (found, translated, locale_loaded) == (["/de/LC_MESSAGES/app.mo"], "GNUTranslations", True)
