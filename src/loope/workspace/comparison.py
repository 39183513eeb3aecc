"""What changed between two trees, as ``git diff-tree -z --raw --numstat -p`` says it (``git.COMPARE``)."""

from __future__ import annotations

from dataclasses import dataclass

from loope.records.model import ChangeStatus, FileChange

_STATUS: dict[str, ChangeStatus] = {"A": "added", "M": "modified", "D": "deleted", "T": "modified"}


@dataclass(frozen=True)
class Comparison:
    """What changed between two trees: the files, and the patch ``git apply`` accepts (binary included)."""

    changes: list[FileChange]
    patch: bytes

    @property
    def text(self) -> str:
        return self.patch.decode("utf-8", "replace")


def comparison(raw: bytes) -> Comparison:
    """What ``COMPARE`` printed: ``--raw --numstat -z`` records, then the patch."""
    changes, patch = _parse_changes(raw)
    return Comparison(changes, patch)


def _parse_changes(raw: bytes) -> tuple[list[FileChange], bytes]:
    """``--raw --numstat -z`` records (and, with ``-p``, the patch after them) as changes and patch."""
    statuses: dict[str, ChangeStatus] = {}
    counts: dict[str, tuple[int | None, int | None]] = {}
    pos, end = 0, len(raw)
    while pos < end:
        if raw[pos] == 0:  # a NUL between the records and the patch
            pos += 1
            break
        stop = raw.find(b"\0", pos)
        stop = end if stop < 0 else stop
        token = raw[pos:stop].decode("utf-8", "surrogateescape")
        pos = stop + 1
        if token.startswith(":"):
            path_end = raw.find(b"\0", pos)
            path_end = end if path_end < 0 else path_end
            path = raw[pos:path_end].decode("utf-8", "surrogateescape")
            pos = path_end + 1
            statuses[path] = _STATUS.get(token.split()[-1][:1], "modified")
        elif token.count("\t") == 2:
            added, removed, path = token.split("\t", 2)
            counts[path] = (_count(added), _count(removed))
    changes = [FileChange(path, status, *counts.get(path, (None, None))) for path, status in statuses.items()]
    return changes, raw[pos:]


def _count(text: str) -> int | None:
    return None if text == "-" else int(text)
