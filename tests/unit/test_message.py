"""Bounded output: lines cut from chunks in memory, and a message that keeps its beginning and end."""

from __future__ import annotations

from loope.agents.message import MessageText, bounded
from loope.streams import LineSplitter, split_lines


def test_lines_split_across_chunks_come_out_whole_and_in_order() -> None:
    splitter = LineSplitter(limit=100)
    blocks = [splitter.feed(chunk) for chunk in (b"on", b"e\ntw", b"o\nthree\nfo", b"ur")]
    blocks.append(splitter.rest())
    assert [line for block in blocks for line in split_lines(block)] == ["one", "two", "three", "four"]


def test_a_line_longer_than_the_limit_is_cut_not_kept_whole() -> None:
    splitter = LineSplitter(limit=10)
    out = splitter.feed(b"x" * 25) + splitter.feed(b"x" * 25 + b"\nshort\n" + b"y" * 30 + b"\nz")
    out += splitter.rest()
    assert split_lines(out) == ["x" * 10, "short", "y" * 10, "z"]


def test_crlf_and_bad_bytes_become_clean_text() -> None:
    assert split_lines(b"a\r\nb \xff\n") == ["a", "b \ufffd"]


def test_a_short_message_is_kept_whole() -> None:
    text = MessageText(head=50, tail=50)
    text.append("first")
    text.extend("second\nthird\n")
    assert text.text() == "first\nsecond\nthird\n"
    assert text.last == "third"


def test_a_long_message_keeps_its_first_and_last_lines_and_says_what_was_cut() -> None:
    text = MessageText(head=100, tail=100)
    for i in range(10_000):
        text.append(f"line {i}")
    out = text.text()
    assert out.startswith("line 0\nline 1\n")
    assert out.endswith("line 9999\n")
    assert "characters cut here" in out
    assert len(out) < 300
    assert text.last == "line 9999"


def test_one_huge_line_keeps_its_end() -> None:
    text = MessageText(head=100, tail=100)
    text.extend("x" * 100_000 + "\nVERDICT: PASS\n")
    out = text.text()
    assert out.endswith("VERDICT: PASS\n")
    assert len(out) < 400


def test_bounded_leaves_short_text_alone() -> None:
    assert bounded("abc", 2, 2) == "abc"
    assert bounded("a" * 10 + "b" * 10, 2, 2).startswith("aa\n[… 16 characters cut")
