"""Records that only grow: the ledger read a line at a time as it grows, and appends that never follow a link."""

from __future__ import annotations

import os
from pathlib import Path

from loope.records import ledger
from loope.records.atomic import append_at, write_bytes


def attempt(n: int, verdict: str = "kept") -> ledger.Attempt:
    return ledger.Attempt(iteration=n, summary=f"attempt {n}", verdict=verdict)


def test_the_reader_sees_each_appended_line_and_parses_it_once(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ledger.jsonl"
    reader = ledger.Reader(path)
    assert reader.attempts() == []
    parsed: list[bytes] = []
    real_parse = ledger._parse
    monkeypatch.setattr(ledger, "_parse", lambda data: parsed.append(data) or real_parse(data))
    path.write_text(ledger.line(attempt(1)))
    assert reader.attempts() == [attempt(1)]
    with path.open("a") as handle:
        handle.write(ledger.line(attempt(2, "reverted")))
    assert reader.attempts() == [attempt(1), attempt(2, "reverted")]
    assert reader.attempts() == [attempt(1), attempt(2, "reverted")]
    assert [p.count(b"\n") for p in parsed] == [1, 1]  # every line read once, none twice
    assert reader.attempts() == ledger.load(path)


def test_a_line_still_being_written_is_read_once_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    line = ledger.line(attempt(1))
    path.write_text(line[:10])
    reader = ledger.Reader(path)
    assert reader.attempts() == []
    with path.open("a") as handle:
        handle.write(line[10:])
    assert reader.attempts() == [attempt(1)]


def test_a_replaced_or_shortened_ledger_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(ledger.line(attempt(1)) + ledger.line(attempt(2)))
    reader = ledger.Reader(path)
    assert len(reader.attempts()) == 2
    write_bytes(path, ledger.line(attempt(1)).encode())  # a resumed run's ledger, cut back (a new file)
    assert reader.attempts() == [attempt(1)]
    with path.open("r+") as handle:  # the same file, cut short in place
        handle.truncate(0)
    assert reader.attempts() == []
    path.unlink()
    assert reader.attempts() == []


def test_append_at_appends_only_to_the_file_of_the_size_it_was_left(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"one\n")
    assert append_at(path, b"two\n", size=4)
    assert path.read_bytes() == b"one\ntwo\n"
    assert not append_at(path, b"three\n", size=4)  # someone else wrote since: the caller rewrites it whole
    assert path.read_bytes() == b"one\ntwo\n"
    assert not append_at(tmp_path / "missing", b"x", size=0)
    assert not (tmp_path / "missing").exists()


def test_append_at_never_writes_through_a_link_or_into_a_directory(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"one\n")
    link = tmp_path / "ledger.jsonl"
    os.symlink(outside, link)
    assert not append_at(link, b"planted\n", size=4)
    assert outside.read_bytes() == b"one\n"
    (tmp_path / "dir").mkdir()
    assert not append_at(tmp_path / "dir", b"x", size=4096)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not append_at(fifo, b"x", size=0)  # no reader: not opened, never blocks
