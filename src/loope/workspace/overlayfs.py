"""The kernel's overlayfs, mounted by loope itself in a mount namespace of the runner's own.

Why the kernel's overlay and not fuse-overlayfs (measured on a 20,000-file repository, see the
overlay benchmark): ``git status`` over the merged view costs what it costs on a plain checkout
with the kernel's overlay and about three times that through FUSE; reading every file, twice.
And a mount made inside a namespace of the runner lives exactly as long as the runner: a
killed runner leaves no mount behind, where a FUSE mount sits in the user's namespace until
someone unmounts it. Debian 12's bubblewrap (0.8) has no ``--overlay``, hence this module.

The runner enters the namespace once (``enter``), so every step, check and git command it runs
afterwards sees the mounts: a plain mount namespace for root, a user namespace mapping the user to
themself (and a mount namespace owned by it) otherwise, so nothing here needs root. Mounts never
propagate back to the user's namespace. A mount namespace alone moves only the calling thread (and
the threads and processes it starts afterwards), so with root an overlay works in a process that
already runs threads (a library caller, a test runner, a server); any other thread of it that
mounts later joins that same namespace first (a server runs each call on whichever thread is
free). A user namespace needs a process of one thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
from pathlib import Path

from loope.errors import LoopeError
from loope.proc import run_process
from loope.record import record
from loope.records.atomic import write_text

_CLONE_FS = 0x00000200
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 0x1
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MNT_DETACH = 0x2
_CAP_SYS_ADMIN = 21
_PROBE_VERSION = 1
"""Bumped when the probe checks more, so a cached answer from an older loope is asked again."""


class OverlayUnavailable(LoopeError):
    """This process cannot mount an overlay (the reason says why)."""


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OverlayUnavailable(f"{what} failed: {os.strerror(code)}")


def _has_cap_sys_admin() -> bool:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    return False


@record(frozen=True)
class Namespace:
    """The namespace this process mounts in."""

    user_ns: bool
    """Whether it is a user namespace of its own (then overlay keeps its metadata in user.* xattrs)."""

    @property
    def xattr_prefix(self) -> str:
        return "user.overlay." if self.user_ns else "trusted.overlay."


_ours: set[str] = set()
"""Where this process mounted overlays."""
_entered: list[Namespace] = []
"""This process's namespace once entered (a fact about the process: it cannot be left again)."""
_joined: list[tuple[int, str]] = []
"""The entered mount namespace (a descriptor, its name) for the process's other threads to join."""
_THREAD_NS = "/proc/thread-self/ns/mnt"


def can_enter() -> bool:
    """Whether ``enter`` can work in this process now (it has, or root, or one thread)."""
    return bool(_entered) or _has_cap_sys_admin() or threading.active_count() == 1


def enter() -> Namespace:
    """Move this process into a mount namespace of its own (once); every later child inherits it."""
    if _entered:
        if _joined and os.readlink(_THREAD_NS) != _joined[0][1]:
            _join(_joined[0][0])  # a thread that was not in it: mounts made here must be the runner's too
        return _entered[0]
    user_ns = not _has_cap_sys_admin()
    if user_ns and threading.active_count() > 1:
        # A user namespace can only be entered by a process of one thread.
        raise OverlayUnavailable("the overlay must be set up before loope starts any thread")
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(_CLONE_NEWNS | (_CLONE_NEWUSER if user_ns else 0)), "unshare")
    if user_ns:
        # The user stays themself: files they make keep their owner, and programs run unprivileged.
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    found = Namespace(user_ns)
    if not user_ns:  # only this thread moved: the others join it when they mount
        _joined.append((os.open(_THREAD_NS, os.O_RDONLY | os.O_CLOEXEC), os.readlink(_THREAD_NS)))
    _entered.append(found)
    return found


def _join(namespace: int) -> None:
    """Move the calling thread into the mount namespace ``namespace`` (it must first stop sharing its cwd and root)."""
    libc = _libc()
    _check(libc.unshare(_CLONE_FS), "unshare")
    _check(libc.setns(namespace, _CLONE_NEWNS), "joining the overlay's mount namespace")


def mount(lower: list[Path], upper: Path, work: Path, target: Path) -> None:
    """Mount an overlay of ``lower`` (topmost first) under ``upper`` at ``target``.

    The layers are named through file descriptors, so any path works (a comma or colon in a mount
    option would not), and a lower layer stays reachable to the mount after its path is hidden.
    ``metacopy`` is off: a changed file is all there in the upper layer. Redirects are on where
    overlay keeps its metadata in trusted xattrs (root), so a directory of the lower layer can be
    renamed (``git mv dir``); a user namespace cannot follow them, and such a rename fails with
    EXDEV (``mv`` then copies).
    """
    ns = enter()
    fds = [os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for p in [*lower, upper, work]]
    try:
        names = [f"/proc/self/fd/{fd}" for fd in fds]
        options = f"lowerdir={':'.join(names[:-2])},upperdir={names[-2]},workdir={names[-1]}"
        options += ",metacopy=off,index=off"
        options += ",redirect_dir=nofollow,userxattr" if ns.user_ns else ",redirect_dir=on"
        result = _libc().mount(b"overlay", os.fsencode(target), b"overlay", _MS_NODEV, options.encode())
        _check(result, f"mounting the overlay at {target}")
        _ours.add(os.path.realpath(target))
    finally:
        for fd in fds:
            os.close(fd)


def hide(path: Path) -> None:
    """Cover ``path`` with an empty read-only file system, for everything this process starts from now on."""
    enter()
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    _check(_libc().mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, b"size=4k,mode=0555"), f"hiding {path}")


def unmount(target: Path, fstype: str = "overlay") -> None:
    """Take the mount at ``target`` away (a no-op where nothing is mounted)."""
    if _entered and enter() and is_mounted(target, fstype):  # enter: where the mounts are, from any thread
        _libc().umount2(os.fsencode(target), _MNT_DETACH)


def is_mounted(target: Path, fstype: str = "overlay") -> bool:
    """Whether a file system of ``fstype`` is mounted at ``target`` in this process's view."""
    return os.path.realpath(target) in _mounts(fstype)


def mounted_overlays() -> list[str]:
    """The overlays this process mounted that are still there."""
    return [point for point in _mounts("overlay") if point in _ours]


def _mounts(fstype: str) -> list[str]:
    found = []
    # The calling thread's view: with root, only the threads that entered see the overlays.
    with contextlib.suppress(OSError), open("/proc/thread-self/mountinfo", encoding="utf-8") as info:
        for line in info:
            fields = line.split(" - ", 1)
            if len(fields) == 2 and fields[1].startswith(f"{fstype} "):
                found.append(fields[0].split()[4].replace("\\040", " "))
    return found


# -- the probe --------------------------------------------------------------------------------


@record(frozen=True)
class Probe:
    works: bool
    reason: str = ""


def probe(scratch: Path) -> Probe:
    """Whether an overlay workspace works here, for run dirs on ``scratch``'s file system (cached per machine).

    The check runs in a child process (entering a namespace cannot be undone): mount, write
    through the merged view, delete and replace a directory, and read the upper layer back.
    """
    key = _probe_key(scratch)
    cache = cache_file()
    known = _read_cache(cache)
    if key in known:
        entry = known[key]
        return Probe(bool(entry.get("works")), str(entry.get("reason", "")))
    found = _run_probe(scratch)
    known[key] = {"works": found.works, "reason": found.reason}
    with contextlib.suppress(OSError):
        write_text(cache, json.dumps(known, indent=1, sort_keys=True) + "\n")
    return found


def _probe_key(scratch: Path) -> str:
    release = os.uname().release
    fs = os.statvfs(scratch)
    return f"v{_PROBE_VERSION} {release} uid={os.geteuid()} admin={_has_cap_sys_admin()} fs={fs.f_fsid:x}"


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loope" / "overlay-probe.json"


def _read_cache(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _run_probe(scratch: Path) -> Probe:

    root = Path(tempfile.mkdtemp(prefix=".overlay-probe-", dir=scratch))
    try:
        child = "import sys; from loope.workspace.overlayfs import selftest; selftest(sys.argv[1])"
        argv = [sys.executable, "-c", child, str(root)]
        result = run_process(argv, cwd=root, capture=True, timeout=30, term_grace_s=1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if result.ok and result.text.strip().endswith("overlay ok"):
        return Probe(True)
    lines = [ln.strip() for ln in (result.stderr_tail or result.text).splitlines() if ln.strip()]
    return Probe(False, lines[-1] if lines else result.describe())


def selftest(root: str) -> None:
    """The probe's child: an overlay that behaves as loope relies on, or one line on stderr and exit 1."""

    base = Path(root)
    lower, upper, work, merged = (base / n for n in ("lower", "upper", "work", "merged"))
    for d in (lower / "d", upper, work, merged):
        d.mkdir(parents=True)
    (lower / "d" / "f").write_text("lower\n")
    (lower / "g").write_text("lower\n")
    try:
        ns = enter()
        mount([lower], upper, work, merged)
        (merged / "g").write_text("upper\n")
        (merged / "d" / "f").unlink()
        (merged / "d").rmdir()
        (merged / "d").mkdir()
        opaque = os.getxattr(upper / "d", f"{ns.xattr_prefix}opaque")
        (merged / "d").rmdir()
        gone = os.lstat(upper / "d")
        ok = (
            (lower / "g").read_text() == "lower\n"
            and (upper / "g").read_text() == "upper\n"
            and opaque == b"y"
            and stat.S_ISCHR(gone.st_mode)
            and gone.st_rdev == 0
        )
        unmount(merged)
    except OSError as exc:
        print(f"the overlay does not work here: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except OverlayUnavailable as exc:
        print(f"the overlay does not work here: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    if not ok:
        print("the overlay does not keep its layers as loope needs", file=sys.stderr)
        raise SystemExit(1)
    print("overlay ok")
