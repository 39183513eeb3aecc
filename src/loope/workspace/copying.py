"""What a copy workspace copies: the files the user sees, each as it is (a link stays a link)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from loope.workspace.git import Git
from loope.workspace.loopedir import LOOPE_DIR


def visible_files(workdir: Path, top: Path | None) -> list[str]:
    """Paths (relative to ``workdir``) of what the user sees: in git, tracked and untracked, not ignored."""
    if top is not None:
        listing = Git(workdir).run("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".").text
        return sorted({p for p in listing.split("\0") if p and os.path.lexists(workdir / p)})
    found: list[str] = []
    for root, dirs, files in os.walk(workdir):
        dirs[:] = [d for d in dirs if d not in (LOOPE_DIR, ".git")]
        rel_root = Path(root).relative_to(workdir)
        found.extend(str(rel_root / name) for name in files)
        found.extend(str(rel_root / d) for d in dirs if (Path(root) / d).is_symlink())
    return sorted(found)


def copy_entry(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)
