"""File operations under a root that never follow a symlink, in any component of the path.

An agent with a shell can replace any directory of its workspace with a link to somewhere else
(``rm -rf .loope && ln -s ~/project .loope``). Every write, removal and read loope does on the
agent's behalf therefore walks the path one directory at a time from a trusted root with
``O_NOFOLLOW | O_DIRECTORY`` and acts through the last directory's descriptor (openat-style),
so it lands inside the root or not at all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A component of the path is a symlink, or not a directory where one is needed."""


def _parts(rel: str | Path) -> list[str]:
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or Path(rel).is_absolute():
        raise UnsafePath(f"{rel}: not a path inside the root")
    return parts


@contextlib.contextmanager
def _parent_fd(root: Path, parts: list[str], *, create: bool) -> Iterator[int]:
    """A descriptor of the directory holding ``parts[-1]``, reached without following a link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # ELOOP (a link) or ENOTDIR
                raise UnsafePath(f"{'/'.join(parts)}: {name} is a symlink or not a directory") from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def lstat(root: Path, rel: str | Path) -> os.stat_result | None:
    """``lstat`` of ``root/rel``; None when it does not exist or a directory on the way is not a real one."""
    parts = _parts(rel)
    try:
        with _parent_fd(root, parts, create=False) as fd:
            return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, UnsafePath, NotADirectoryError):
        return None


def read_bytes(root: Path, rel: str | Path) -> bytes | None:
    """The content of a regular file ``root/rel``; None when it is missing, a link, or not a file."""
    parts = _parts(rel)
    try:
        with _parent_fd(root, parts, create=False) as parent:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=parent)
    except (OSError, UnsafePath):
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def remove(root: Path, rel: str | Path) -> bool:
    """Remove ``root/rel`` (a file, a link, or a whole directory), never anything a link points to."""
    parts = _parts(rel)
    try:
        with _parent_fd(root, parts, create=False) as fd:
            info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(parts[-1], dir_fd=fd)  # fd-based on Linux: never follows a link inside
            else:
                os.unlink(parts[-1], dir_fd=fd)
            return True
    except (FileNotFoundError, UnsafePath, NotADirectoryError):
        return False


def write_bytes(root: Path, rel: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``root/rel`` atomically (a temporary file and a rename in its directory).

    Missing directories are created; whatever stands at ``rel`` (a link, a directory) is replaced.
    A link on the way is removed and replaced by a real directory.
    """
    parts = _parts(rel)
    for depth in range(1, len(parts)):
        info = lstat(root, Path(*parts[:depth]))
        if info is not None and not stat.S_ISDIR(info.st_mode):
            remove(root, Path(*parts[:depth]))
    with _parent_fd(root, parts, create=True) as fd:
        name = parts[-1]
        tmp = f".{name}.{os.getpid()}.loope-tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=fd)
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(data)
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(name, dir_fd=fd)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise


def is_real_dir(path: Path) -> bool:
    """``path`` is a directory and not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def walk_files(root: Path, rel: str, skip: frozenset[str] = frozenset()) -> tuple[dict[str, bytes], list[str]]:
    """The regular files under ``root/rel`` (relative to ``root``) and every other entry found (links, fifos…).

    Nothing is followed; when ``root/rel`` itself is a link or not a directory, it is the one odd entry.
    ``skip`` names entries directly under ``rel`` to leave out.
    """
    files: dict[str, bytes] = {}
    odd: list[str] = []
    top = lstat(root, rel)
    if top is None:
        return files, odd
    if not stat.S_ISDIR(top.st_mode):
        return files, [rel]
    for current, dirs, found in os.walk(root / rel, followlinks=False):
        base = Path(current).relative_to(root)
        names = found
        if base == Path(rel):
            dirs[:] = [d for d in dirs if d not in skip]
            names = [n for n in found if n not in skip]
        for name in list(dirs):
            if os.path.islink(os.path.join(current, name)):
                odd.append((base / name).as_posix())
                dirs.remove(name)
        for name in names:
            entry = (base / name).as_posix()
            data = read_bytes(root, entry)
            if data is None:
                odd.append(entry)
            else:
                files[entry] = data
    return files, odd
