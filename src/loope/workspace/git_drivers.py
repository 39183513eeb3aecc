"""Which git commands may run a program a repository's config names (a clean/smudge filter, a textconv).

loope neutralizes those programs on every git command that could run one (``Git._driver_overrides``),
which costs a ``git config`` read; the commands here certainly run none, so they skip it.
"""

from __future__ import annotations

from collections.abc import Sequence

# Commands that never run a filter or diff program, so the repository's driver names need not be read for
# them (a `git config` process fewer each): they touch refs, objects and the index, never a file's content.
_NO_DRIVERS = frozenset({
    "rev-parse", "config", "commit-tree", "update-ref", "write-tree", "ls-tree", "for-each-ref", "symbolic-ref",
    "check-ref-format", "rev-list", "show-ref", "pack-objects", "index-pack",
})  # fmt: skip
# Per command: the argument sets with which it stays clear of programs (an index-only ``update-index``, say).
_NO_DRIVERS_WITH = {
    "update-index": (
        frozenset({"--split-index", "--no-split-index"}),
        frozenset({"--index-info", "-z"}),
        frozenset({"--force-remove", "--stdin", "-z"}),
    ),
    "ls-files": (frozenset({"-z", "--full-name", "--cached", "-c", "--stage", "-s"}),),
}


def runs_no_driver(args: Sequence[str]) -> bool:
    """Whether ``git ARGS`` certainly runs no clean/smudge filter nor textconv, whatever the config says."""
    if not args:
        return False
    command, rest = args[0], args[1:]
    if command in _NO_DRIVERS:
        return True
    if command in _NO_DRIVERS_WITH:
        given = set(rest)
        if "--stdin" in given and "--force-remove" not in given:
            return False  # paths from stdin are hashed again, through the clean filter
        return any(given <= allowed for allowed in _NO_DRIVERS_WITH[command])
    if command == "read-tree":  # with -u (or a merge) it writes the work tree
        return not any(a.startswith("-") for a in rest)
    if command in ("cat-file", "diff-tree"):  # programs only when asked for (--filters, --textconv, --ext-diff)
        return not any(a.startswith(("--filters", "--textconv", "--ext-diff", "--path")) for a in rest)
    return False
