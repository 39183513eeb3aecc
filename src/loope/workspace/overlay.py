"""Overlay workspaces: the project's shared, read-only snapshot under an upper layer of the run's own.

A run starts in the time a mount takes once its snapshot exists (``snapshots.py``), and what it
changed is exactly its upper layer (``upper.py``). In the run dir:

  workspace/     the merged view, mounted while the runner needs it: agents, checks and loope's git work here
  upper/         the run's own entries (the lasting record of what it changed); overlay-work/ is overlayfs' scratch
  shadow.git     the run's commits, borrowing the snapshot store's and the user's objects (theirs stay untouched)
  overlay.json   which snapshot the run stands on, so ``continue`` and ``resume`` can mount it again

Once mounted, the snapshots are hidden from everything the runner starts, sandboxed or not: an
agent can neither reach the lower layer nor write to it.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

from loope import bwrap_probe
from loope.enums import WorkspaceMode
from loope.errors import LoopeError
from loope.proc import run_process
from loope.records.atomic import write_text
from loope.workspace import kept, overlayfs
from loope.workspace.git import Git, toplevel
from loope.workspace.loopedir import LOOPE_DIR, ensure_loope_dir
from loope.workspace.snapshots import SNAPSHOTS_DIR, State, Store
from loope.workspace.upper import UpperFeed

LAYOUT_FILE = "overlay.json"
UPPER_DIR = "upper"
_WORK_DIR = "overlay-work"
_BRANCH = "refs/heads/main"
"""The shadow repository's branch, which loope's commits move."""
_hidden: dict[str, dict[str, int]] = {}
"""Per hidden store (this process's view): an O_PATH descriptor for each layer, opened before it was hidden."""
_standing: dict[str, set[str]] = {}
"""Per hidden store: the workspaces mounted over it in this process (the store is shown again with the last)."""
_early: dict[Path, _Capture] = {}
"""Per workdir: the user's state, captured while the runner was still loading (``capture_early``)."""
_begun: dict[Path, kept.Begun] = {}
"""Per run dir: what its own index begins from (``create`` put its split copy in place as the run's index)."""


def store_of(workdir: Path) -> Store:
    return Store(workdir / LOOPE_DIR / SNAPSHOTS_DIR)


def probe(workdir: Path) -> overlayfs.Probe:
    """Whether overlay workspaces work for ``workdir`` on this machine (asked once, then cached)."""
    return overlayfs.probe(ensure_loope_dir(workdir))


def probe_cache() -> Path:
    """Where the probe's answers are cached (per kernel, user and file system)."""
    return overlayfs.cache_file()


def choose(workdir: Path, top: Path | None) -> tuple[WorkspaceMode | None, str | None]:
    """``--workspace auto``: an overlay where one works here, else the usual default and a line saying why."""
    if top is None:
        return None, None  # not a git repository: a copy, as always
    found = probe(workdir)
    settle()  # before counting threads
    if found.works and overlayfs.can_enter():
        return WorkspaceMode.OVERLAY, None
    reason = found.reason if not found.works else "this process already runs threads"
    return None, f"no overlay workspace here ({reason}); using a worktree"


def resolve(
    workdir: Path, top: Path | None, mode: WorkspaceMode | None, branch: str, *, wants_worktree: bool
) -> tuple[WorkspaceMode | None, str | None, str | None]:
    """A run's workspace mode (None: the usual default), a line on how it was chosen, and the branch
    its end writes if it is an overlay (None: only ``loope branch`` writes one).

    The default in a git repository is ``auto``, an overlay where one works, unless the run names its
    branch or keeps its tree (``wants_worktree``): a worktree's branch and tree are there from the start.
    """
    if mode is None and top is not None and not wants_worktree:
        mode = WorkspaceMode.AUTO
    if mode != WorkspaceMode.AUTO:
        return mode, None, None
    chosen, note = choose(workdir, top)
    return chosen, note, branch


class _Capture:
    """What an overlay's start asks of the user's repository (``Store.state``, the identity), asked on a
    thread of its own; None where it was not asked or failed."""

    def __init__(self, workdir: Path, mode: WorkspaceMode | None, wants_worktree: bool, sandbox: bool) -> None:
        self.workdir, self.mode, self.wants_worktree, self.sandbox = workdir, mode, wants_worktree, sandbox
        self.top: Path | None = None
        self.asked_top = False
        self.state: State | None = None
        self.begun: kept.Begun | None = None
        self.author: dict[str, str] | None = None
        self.thread = threading.Thread(target=self._capture, name="loope-state")  # not a daemon: it cleans up

    def _capture(self) -> None:
        try:
            if self.sandbox:
                bwrap_probe.support()  # asked here first: the runner asks it too, before its workspace
            self.top, self.asked_top = toplevel(self.workdir), True
            if self.top is None:
                return
            mode = WorkspaceMode.AUTO if self.mode is None and not self.wants_worktree else self.mode
            # The probe first, as for a run: it also keeps ``.loope`` (where the store goes) out of the state.
            if mode in (WorkspaceMode.OVERLAY, WorkspaceMode.AUTO) and probe(self.workdir).works:
                store = store_of(self.workdir)
                with store.lock(shared=True):
                    self.state = store.state(self.top)
                    # A checkout where it is missing (the whole of a cold start), and the run's index.
                    self.begun = kept.begin(store.snapshot(self.state).parent)
                self.author = Git(self.top).author()
        except Exception:  # noqa: BLE001 - the run asks again itself, and says what fails then
            self.state = self.author = self.begun = None


def capture_early(workdir: Path, mode: WorkspaceMode | None, *, wants_worktree: bool, sandbox: bool) -> None:
    """Start capturing the user's state, for an overlay run that has yet to load its engine.

    The capture (``git add -A`` into a copy of the user's index: 45 ms at 20,000 files) and the
    snapshot's checkout where it is missing then run while the rest of the runner loads; ``create``
    takes them instead of capturing again. Nothing is captured where the run would not use an
    overlay. A run refused meanwhile still leaves the snapshot, as a later run's. Bubblewrap's
    probe (``sandbox``: the run may use it) is asked on the same thread, first.
    """
    capture = _Capture(workdir.absolute(), mode, wants_worktree, sandbox)
    _early[capture.workdir] = capture
    capture.thread.start()


def settle() -> None:
    """Wait for an early capture still running: entering a mount namespace may want a process of one thread."""
    for capture in list(_early.values()):
        capture.thread.join()


def toplevel_of(workdir: Path) -> Path | None:
    """The top of the git work tree holding ``workdir`` (None outside one): as the early capture found it."""
    settle()
    capture = _early.get(workdir.absolute())
    return capture.top if capture is not None and capture.asked_top else toplevel(workdir)


def _captured(workdir: Path, top: Path) -> _Capture | None:
    settle()
    capture = _early.pop(workdir, None)
    return capture if capture is not None and capture.top == top and capture.state is not None else None


def create(workdir: Path, top: Path, run_dir: Path) -> tuple[Path, Path, str, str]:
    """Make ``run_dir``'s overlay workspace over the user's current state: its tree, git dir, base and base tree."""
    workdir, run_dir = workdir.absolute(), run_dir.absolute()  # recorded, and used from other directories
    found = probe(workdir)
    if not found.works:
        raise LoopeError(f"--workspace overlay does not work here ({found.reason}); use --workspace worktree")
    store = store_of(workdir)
    git_dir, tree = run_dir / "shadow.git", run_dir / "workspace"
    early = _captured(workdir, top)
    with store.lock(shared=True):  # ``gc`` sees this run's layers as used from before they exist
        state = early.state if early and early.state else store.state(top)
        author = early.author if early and early.author is not None else Git(top).author()
        write_text(run_dir / LAYOUT_FILE, json.dumps({"workdir": str(workdir), **vars(state)}, indent=2) + "\n")
        _init_shadow(git_dir, f"{store.objects().absolute()}\n{store.user_objects()}\n", author)
        # The layers' index (split): its stat data matches the merged view, so `git status` there reads no file.
        begun = early.begun if early and early.begun else kept.begin(store.snapshot(state).parent)
        begun.place(git_dir)
        _mount(run_dir, workdir, state)
        _begun[run_dir] = begun
    try:
        git = Git(tree, git_dir)
        if state.head and state.tree == state.head_tree:
            base = state.head  # a clean tree: the run's history starts at the user's commit, as a worktree's does
        else:
            parents = ["-p", state.head] if state.head else []
            base = git.out("commit-tree", state.tree, *parents, "-m", "loope: the workdir as the run started")
        write_text(git_dir / _BRANCH, f"{base}\n")
        write_text(tree / ".git", f"gitdir: {git_dir.absolute()}\n")
    except BaseException:
        unmount(run_dir)
        raise
    return tree, git_dir, base, state.tree


def _init_shadow(git_dir: Path, alternates: str, author: dict[str, str]) -> None:
    """The run's repository, as ``git init`` would leave it but without a process or the user's template.

    Not bare: its work tree is the merged view (named by loope's commands, and by the tree's ``.git`` file).
    Its commits carry the identity the user's repository gives (its own config too), as a worktree's do.
    """
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "logs/refs/heads"):
        (git_dir / sub).mkdir(parents=True, exist_ok=True)
    for log in ("HEAD", _BRANCH):  # its reflogs, empty: loope's first move of HEAD logs itself, as git would
        (git_dir / "logs" / log).touch()
    config = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
    if author:
        name, email = (_quoted(author[f"GIT_AUTHOR_{key}"]) for key in ("NAME", "EMAIL"))
        config += f"[user]\n\tname = {name}\n\temail = {email}\n"
    write_text(git_dir / "config", config)
    write_text(git_dir / "HEAD", f"ref: {_BRANCH}\n")
    write_text(git_dir / "objects" / "info" / "alternates", alternates)


def begun(run_dir: Path) -> kept.Begun | None:
    """What ``run_dir``'s own index begins from, as ``create`` left it (taken once)."""
    return _begun.pop(run_dir.absolute(), None)


def mount(run_dir: Path) -> None:
    """Mount ``run_dir``'s workspace (again): its snapshot, made anew if it was removed, under its upper layer."""
    tree = run_dir / "workspace"
    if overlayfs.is_mounted(tree):
        return
    try:
        layout = json.loads((run_dir / LAYOUT_FILE).read_text(encoding="utf-8"))
        workdir = Path(layout["workdir"])
        state = State(layout["head"], layout["head_tree"], layout["tree"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoopeError(f"{run_dir / LAYOUT_FILE} is missing or damaged ({exc}); the run cannot be mounted") from None
    with store_of(workdir).lock(shared=True):
        _mount(run_dir, workdir, state)


def _mount(run_dir: Path, workdir: Path, state: State) -> None:
    store = store_of(workdir)
    overlayfs.enter()  # first: a layer must be opened from inside the namespace to be mounted there
    held = _hidden.setdefault(str(store.root), {})
    hide = not held
    if hide:
        store.snapshot(state)  # made again if ``gc`` removed it: it is named by its trees
    layers = [_held(store, held, name) for name in state.layers]
    tree, upper, work = run_dir / "workspace", run_dir / UPPER_DIR, run_dir / _WORK_DIR
    for path in (tree, upper, work):
        path.mkdir(exist_ok=True)
    shutil.rmtree(work / "work", ignore_errors=True)  # a killed runner's scratch: overlayfs wants it empty
    overlayfs.mount(layers, upper, work, tree)
    _standing.setdefault(str(store.root), set()).add(os.path.realpath(tree))
    if hide:
        overlayfs.hide(store.root)


def _held(store: Store, held: dict[str, int], name: str) -> Path:
    """A path to the layer ``name`` that still reaches it once the store is hidden from this process."""
    if name not in held:
        if _hidden_here(store):
            raise LoopeError(f"snapshot {name} was made after this process hid the store; mount it from a new process")
        held[name] = os.open(store.layer(name), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return Path(f"/proc/self/fd/{held[name]}")


def _hidden_here(store: Store) -> bool:
    return overlayfs.is_mounted(store.root, fstype="tmpfs")


def _quoted(value: str) -> str:
    """``value`` as a git config value (quoted: spaces, ``#`` and ``;`` stay part of it)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def fork(run_dir: Path, into: Path, git: Git, head: str) -> tuple[Path, Path]:
    """A sibling of ``run_dir``'s overlay at ``into`` (a candidate's): the same snapshot, a copy of its upper layer.

    Costs what the run changed so far, never the tree's size. ``git`` is the run's repository (its
    shadow git dir, without loope's own index): the fork is a worktree of it, so what it commits
    is the run's to take. The fork's merged view and its git dir; ``unmount(into)`` takes it away.
    """
    into.mkdir(parents=True)
    shutil.copyfile(run_dir / LAYOUT_FILE, into / LAYOUT_FILE)
    # cp -a keeps what makes an upper layer: whiteouts (devices), opaque directories (xattrs), modes.
    run_process(["cp", "-a", "--", str(run_dir / UPPER_DIR), str(into / UPPER_DIR)], cwd=into, capture=True)
    tree = into / "workspace"
    git.run("worktree", "add", "-q", "-f", "--detach", "--no-checkout", str(tree), head)
    git_dir = Path(Git(tree).out("rev-parse", "--absolute-git-dir"))
    shutil.copyfile(git.git_dir / "index" if git.git_dir else git_dir / "index", git_dir / "index")
    # Whole again: a split index's shared part is in the run's git dir, which the fork's does not look in.
    git.with_env(GIT_INDEX_FILE=str(git_dir / "index")).run("update-index", "--no-split-index")
    mount(into)
    write_text(tree / ".git", f"gitdir: {git_dir}\n")
    return tree, git_dir


def overlay_needs(git_dir: Path | None) -> list[Path]:
    """What of the user's tree an overlay run's steps still need: the objects its git (``git_dir``) borrows."""
    if git_dir is None:
        return []
    alternates = git_dir / "objects" / "info" / "alternates"
    try:
        return [Path(line) for line in alternates.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError:
        return []


def feed(run_dir: Path) -> UpperFeed:
    """The change feed of ``run_dir``'s workspace: its upper layer."""
    return UpperFeed(run_dir / UPPER_DIR, overlayfs.enter().xattr_prefix, run_dir / "workspace")


def unmount(run_dir: Path) -> None:
    """Take ``run_dir``'s mount away; with the last one, the store is shown again (to a later run here)."""
    tree = run_dir / "workspace"
    overlayfs.unmount(tree)
    for root, held in list(_hidden.items()):
        standing = _standing.get(root, set())
        standing.discard(os.path.realpath(tree))
        if not standing & set(overlayfs.mounted_overlays()):  # no workspace of this process stands on it
            overlayfs.unmount(Path(root), fstype="tmpfs")
            for fd in held.values():
                os.close(fd)
            del _hidden[root]
            _standing.pop(root, None)


def prune(workdir: Path, *, dry_run: bool) -> list[str]:
    """Remove the snapshots no run under ``workdir`` stands on; their names."""
    store = store_of(workdir)
    if not store.root.is_dir():
        return []
    with store.lock(shared=False):
        used = _in_use(workdir / LOOPE_DIR / "runs")
        unused = [name for name in store.names() if name not in used]
        if not dry_run:
            for name in unused:
                store.remove(name)
    return unused


def _in_use(runs_root: Path) -> set[str]:
    used: set[str] = set()
    for layout in runs_root.glob(f"*/{LAYOUT_FILE}"):
        try:
            data = json.loads(layout.read_text(encoding="utf-8"))
            used.update(State(data["head"], data["head_tree"], data["tree"]).layers)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return used
