"""state.md: the file loope creates, and the tolerant reading of what agents leave in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from loope.records import state_file


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "state.md"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def test_the_initial_file_has_the_frontmatter_and_the_four_sections(tmp_path):
    path = tmp_path / ".loope" / "state.md"
    state_file.create(path, "0003-fix-add", "  fix add\n")
    text = path.read_text()
    assert text.startswith("---\nloop_id: 0003-fix-add\nstatus: in-progress\niteration: 0\n---\n")
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["# Goal", "# Progress", "# Next Action", "# Notes"]
    assert state_file.section(text, "goal") == "fix add"
    state = state_file.read(path)
    assert (state.status, state.iteration, state.loop_id, state.problem) == ("in-progress", 0, "0003-fix-add", None)
    assert state.frontmatter == {"loop_id": "0003-fix-add", "status": "in-progress", "iteration": 0}
    assert state.text == text


def test_create_keeps_an_existing_file(tmp_path):
    path = write(tmp_path, "---\nstatus: blocked\n---\n# Notes\nkept\n")
    state_file.create(path, "0001-x", "another goal")
    assert path.read_text() == "---\nstatus: blocked\n---\n# Notes\nkept\n"


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("status: done", "done"),
        ("status: done   # finished the goal", "done"),
        ('status: "done"', "done"),
        ("status: 'blocked'", "blocked"),
        ("status: DONE", "done"),
        ("status: Blocked", "blocked"),
        ("status: in_progress", "in-progress"),
        ("status: In Progress", "in-progress"),
        ("status:   done   ", "done"),
    ],
)
def test_the_status_is_read_tolerantly(tmp_path, line, status):
    state = state_file.read(write(tmp_path, f"---\nloop_id: 0001-x\n{line}\niteration: 2\n---\n# Notes\n"))
    assert (state.status, state.iteration, state.problem) == (status, 2, None)


@pytest.mark.parametrize(
    "text",
    [
        "\ufeff---\nstatus: done\n---\n# Goal\n",  # a byte-order mark
        "---\r\nloop_id: 0001-x\r\nstatus: done\r\n---\r\n# Goal\r\n",  # Windows line endings
        "\n\n---\nstatus: done\n---\n",  # blank lines first
        "---  \nstatus: done\n---\t\n# Goal\n",  # spaces after the fences
        "---\nstatus: done\n---",  # nothing after the closing fence
    ],
)
def test_the_frontmatter_fences_are_found_tolerantly(tmp_path, text):
    state = state_file.read(write(tmp_path, text))
    assert (state.status, state.problem) == ("done", None)


def test_a_capitalised_key_still_counts(tmp_path):
    state = state_file.read(write(tmp_path, "---\nLoop_ID: 0001-x\nStatus: done\nIteration: 4\n---\n"))
    assert (state.status, state.iteration, state.loop_id, state.problem) == ("done", 4, "0001-x", None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# Goal\nno frontmatter at all\n", "no --- frontmatter ---"),
        ("---\nstatus: done\n# Goal\nthe closing fence is missing\n", "no --- frontmatter ---"),
        ("---\nstatus: [done\niteration: 1\n---\n", "invalid frontmatter"),
        ("---\nstatus: done\n  iteration: : 1\n---\n", "invalid frontmatter"),
        ("---\n- done\n- 2\n---\n", "not a mapping"),
        ("---\njust words\n---\n", "not a mapping"),
        ("---\nstatus: finished\n---\n", "unknown status 'finished'"),
        ("---\nloop_id: 0001-x\niteration: 1\n---\n", "unknown status"),
    ],
)
def test_an_invalid_frontmatter_counts_as_in_progress_and_says_why(tmp_path, text, problem):
    state = state_file.read(write(tmp_path, text))
    assert state.status == "in-progress"
    assert state.problem is not None
    assert problem in state.problem
    assert "\n" not in state.problem  # it goes into the next prompt as one line


def test_an_unknown_status_keeps_the_rest_of_the_frontmatter(tmp_path):
    state = state_file.read(write(tmp_path, "---\nloop_id: 0001-x\nstatus: finished\niteration: 3\nowner: me\n---\n"))
    assert state.status == "in-progress"
    assert (state.iteration, state.loop_id) == (3, "0001-x")
    assert state.frontmatter["owner"] == "me"
    assert "expected in-progress, done, blocked" in (state.problem or "")


@pytest.mark.parametrize("value", ["three", "true", "2.5", "[1]"])
def test_an_iteration_that_is_not_a_whole_number_is_not_trusted(tmp_path, value):
    state = state_file.read(write(tmp_path, f"---\nloop_id: 42\nstatus: done\niteration: {value}\n---\n"))
    assert (state.status, state.iteration, state.loop_id) == ("done", None, "42")


def test_a_missing_file_is_in_progress(tmp_path):
    state = state_file.read(tmp_path / "nowhere" / "state.md")
    assert (state.status, state.iteration, state.loop_id, state.frontmatter, state.text) == (
        "in-progress",
        None,
        None,
        {},
        "",
    )
    assert state.problem == "the state file is missing"


def test_an_unreadable_path_is_in_progress(tmp_path):
    path = tmp_path / "state.md"
    path.mkdir()
    state = state_file.read(path)
    assert state.status == "in-progress"
    assert "cannot be read" in (state.problem or "")


def test_binary_garbage_is_in_progress(tmp_path):
    state = state_file.read(write(tmp_path, b"\xff\xfe\x00\x01garbage\x80\n---\nstatus: done\n---\n"))
    assert state.status == "in-progress"
    assert "no --- frontmatter ---" in (state.problem or "")


def test_invalid_utf8_inside_the_frontmatter_is_replaced_not_raised(tmp_path):
    state = state_file.read(write(tmp_path, b"---\nstatus: done\nnote: caf\xe9\n---\n"))
    assert (state.status, state.problem) == ("done", None)
    assert state.frontmatter["note"] == "caf\ufffd"


def test_sections_are_found_by_name_whatever_the_level_or_case(tmp_path):
    text = (
        "---\nstatus: blocked\n---\n# Goal\nship it\n\n## progress\n- step one\n\n"
        "### NOTES\nneed the API key\nfrom ops\n\n# Next Action\nwait\n"
    )
    state = state_file.read(write(tmp_path, text))
    assert state.status == "blocked"
    assert state.notes == "need the API key\nfrom ops"
    assert state_file.section(text, "Progress") == "- step one"
    assert state_file.section(text, "next action") == "wait"
    assert state_file.section(text, "Missing") == ""


@pytest.mark.parametrize(
    ("frontmatter", "problem"),
    [
        ("loop_id: 0002-other\nstatus: done\niteration: 3", "loop_id is '0002-other', this run is '0001-x'"),
        ("status: done\niteration: 3", "loop_id is None, this run is '0001-x'"),
        ("loop_id: 0001-x\nstatus: done\niteration: '3'", "iteration should be a number (got '3')"),
        ("loop_id: 0001-x\nstatus: done\niteration: true", "iteration should be a number (got True)"),
        ("loop_id: 0001-x\nstatus: done", "iteration should be a number (got None)"),
    ],
)
def test_done_counts_only_in_this_runs_frontmatter(tmp_path, frontmatter, problem):
    path = write(tmp_path, f"---\n{frontmatter}\n---\n# Notes\n")
    state = state_file.read(path, "0001-x")
    assert (state.status, state.problem) == ("in-progress", f"status done ignored: {problem}")
    assert state_file.read(path).status == "done"  # without a run to check against, it reads as written


def test_this_runs_done_is_done(tmp_path):
    path = write(tmp_path, "---\nloop_id: 0001-x\nstatus: done\niteration: 2\n---\n")
    state = state_file.read(path, "0001-x")
    assert (state.status, state.problem, state.iteration) == ("done", None, 2)


WORDS = [
    *("done", "in-progress", "blocked", "Done", "0001-fix-add", "fix_add", "abc123", "a-b_c", "x"),
    *("0", "7", "42", "007", "0012", "1_000", "12-34", "2026-12-01", "0x1f", "0X1F", "0o17", "0b101", "1e5", "1E5"),
    *("yes", "No", "TRUE", "false", "On", "OFF", "null", "NULL", "Null", "y", "n", "Y", "tRue", "nan", "inf"),
]


@pytest.mark.parametrize("word", WORDS)
@pytest.mark.parametrize("key", ["status", "iteration", "Loop_ID", "yes", "on", "null", "x1"])
def test_the_plain_frontmatter_reader_agrees_with_yaml_or_leaves_it_to_yaml(key: str, word: str) -> None:
    import yaml

    for text in (f"{key}: {word}", f"{key}: {word}  \nother: 3", f"# a note\n{key}:  {word}\n\nloop_id: 0002-x"):
        plain = state_file.plain_mapping(text)
        assert plain is None or plain == yaml.safe_load(text), text


@pytest.mark.parametrize(
    "text",
    [
        "status: done # finished",
        "status: 'done'",
        "status:\tdone",
        "  status: done",
        "status: done\n  nested: 1",
        "status: [a, b]",
        "status:",
        "- done",
        "status: done\n...",
        "status: ~",
        "status: <<",
    ],
)
def test_anything_but_plain_key_word_lines_is_left_to_yaml(text: str) -> None:
    assert state_file.plain_mapping(text) is None


def test_the_frontmatter_loope_writes_is_read_without_yaml() -> None:
    text = state_file.initial("0003-fix-add", "fix add").split("---\n")[1]
    assert state_file.plain_mapping(text) == {"loop_id": "0003-fix-add", "status": "in-progress", "iteration": 0}
