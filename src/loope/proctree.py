"""Killing a process and everything it started, including what left its process group.

Agents run shell tools in a session of their own (``setsid``), so killing the agent's process
group misses them. While the agent is alive its descendants are still its descendants in
``/proc``: they are found there, stopped (so none forks away meanwhile), then killed with their
groups. Linux only; elsewhere only the group is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal

from loope.proc import kill_group


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # it ended meanwhile
        # ``pid (comm) state ppid ...``: comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant with its own group or session."""
    below = descendants(pid)
    for child in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGSTOP)
    below += [p for p in descendants(pid) if p not in below]  # forked before the stop reached its parent
    groups = {pid}
    for child in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            groups.add(os.getpgid(child))
    groups.discard(os.getpgrp())  # never loope's own group, whatever a child did
    for group in groups:
        kill_group(group)
    for child in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGKILL)
