"""The SQLite control plane and index (``.loope/loope.db``): runs, steps, lessons, stop flags.

The run directory stays the record; the store answers "what is running", carries stop requests
between processes, and keeps lessons for later runs. Each thread keeps one connection of its
own (WAL mode), so the engine's threads and other loope processes never share one, and a write
costs no reopening (closing the last connection checkpoints the log to disk, every time).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loope.errors import LoopeError
from loope.records.rundir import DB_NAME
from loope.store.migrations import migrate
from loope.workspace.loopedir import ensure_loope_dir

BUSY_TIMEOUT_S = 5.0


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._home = _identity(path.parent)
        """The directory holding the database: a connection is never opened in another one put in its place."""
        with self._connect() as conn:
            migrate(conn)

    @classmethod
    def for_project(cls, workdir: Path) -> Store:

        return cls(ensure_loope_dir(workdir) / DB_NAME)

    def _reusable(self) -> sqlite3.Connection | None:
        """This thread's open connection, unless the database file was replaced or removed since."""
        held: tuple[sqlite3.Connection, int] | None = getattr(self._local, "held", None)
        if held is None:
            return None
        try:
            same = os.stat(self.path).st_ino == held[1]
        except OSError:
            same = False
        if not same:
            self.close()
            return None
        return held[0]

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        held = getattr(self._local, "held", None)
        if held is not None:
            self._local.held = None
            held[0].close()

    def _locked(self) -> LoopeError:
        return LoopeError(f"the run database {self.path} is locked by another process; retry in a moment")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = self._reusable()
        fresh = conn is None
        if conn is None:
            if _identity(self.path.parent) != self._home:
                raise LoopeError(
                    f"{self.path.parent} was moved or replaced since the run database was opened;"
                    " loope does not open it again through what stands there now"
                )
            try:
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            except sqlite3.Error as exc:
                raise LoopeError(f"cannot open the run database {self.path}: {exc}") from None
        try:
            if fresh:
                conn.row_factory = sqlite3.Row
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # kept by the file once set
                    conn.execute("PRAGMA journal_mode=WAL")
                # No fsync per write: the store indexes runs whose truth is run.json; WAL keeps it consistent.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
                self._local.held = (conn, os.stat(self.path).st_ino)
            yield conn
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise self._locked() from None
            if "disk is full" in str(exc):
                raise LoopeError(
                    f"the disk is full: the run database {self.path} cannot grow; free some space, then start again"
                ) from None
            raise LoopeError(f"the run database {self.path} failed: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise LoopeError(
                f"the run database {self.path} is unreadable ({exc}); move it aside and loope starts a new one"
                " (run directories are kept)"
            ) from None
        finally:
            if fresh and getattr(self._local, "held", None) is None:
                conn.close()  # it failed before it was kept

    # -- runs ---------------------------------------------------------------------------------

    def add_run(self, row: dict[str, Any]) -> None:
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._connect() as conn:
            conn.execute(f"INSERT OR REPLACE INTO runs ({columns}) VALUES ({marks})", tuple(row.values()))

    def restore_run(self, row: dict[str, Any]) -> bool:
        """Add ``row`` unless the run is already there (the runner may have added it meanwhile); whether it was."""
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._connect() as conn:
            cursor = conn.execute(f"INSERT OR IGNORE INTO runs ({columns}) VALUES ({marks})", tuple(row.values()))
            return cursor.rowcount > 0

    def update_run(self, run_id: str, **fields: Any) -> int:
        """Set ``fields`` on the run's row; how many rows changed (0: the store has no such run)."""
        if not fields:
            return 0
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as conn:
            cursor = conn.execute(f"UPDATE runs SET {sets} WHERE id = ?", (*fields.values(), run_id))
            return cursor.rowcount

    def add_step(self, run_id: str, step: dict[str, Any]) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO steps (run_id, step, iteration, role, adapter, ok, verdict, cost_usd,"
                " duration_s, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    step["step"],
                    step["iteration"],
                    step["role"],
                    step["adapter"],
                    int(bool(step.get("ok", True))),
                    step.get("verdict"),
                    step.get("cost_usd") or 0.0,
                    step.get("duration_s") or 0.0,
                    step.get("error"),
                ),
            )

    def drop_steps_after(self, run_id: str, iteration: int) -> None:
        with self._connect() as conn:
            conn.execute("DELETE FROM steps WHERE run_id = ? AND iteration > ?", (run_id, iteration))

    def delete_run(self, run_id: str) -> None:
        """Forget a removed run (its steps go with it; its lesson stays)."""
        with self._connect() as conn:
            conn.execute("DELETE FROM steps WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def get(self, run_id: str) -> dict[str, Any] | None:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _row(row) if row else None

    def running(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM runs WHERE status = 'running' ORDER BY started_at").fetchall()
        return [_row(r) for r in rows]

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM runs ORDER BY started_at DESC, id DESC LIMIT ?", (limit,)).fetchall()
        return [_row(r) for r in rows]

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,)).fetchall()
        return [dict(r) for r in rows]

    # -- stop requests ------------------------------------------------------------------------

    def request_stop(self, run_id: str, *, now: bool = False) -> bool:
        """Set the run's stop flags; False when the store has no row for it (nobody would see them)."""
        return self.update_run(run_id, interrupt=1, interrupt_now=int(now)) > 0

    def stop_flags(self, run_id: str) -> tuple[bool, bool]:
        """(stop before the next step, also kill the step in flight)."""
        with self._connect() as conn:
            row = conn.execute("SELECT interrupt, interrupt_now FROM runs WHERE id = ?", (run_id,)).fetchone()
        return (bool(row[0]), bool(row[1])) if row else (False, False)

    # -- notifications ------------------------------------------------------------------------

    def notification_ids(self, run_id: str) -> dict[str, Any]:
        run = self.get(run_id)
        return dict(run["notification_ids"]) if run else {}

    def set_notification_id(self, run_id: str, key: str, value: Any) -> bool:
        """Set one notifier's entry (``key``) of the run's notification ids, leaving the others as they are.

        Read and written in one write transaction, so two notifiers (two Slack channels) saving at
        once cannot overwrite each other's entry. False when the store has no row for the run.
        """
        with self._connect() as conn, _transaction(conn):
            row = conn.execute("SELECT notification_ids FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                return False
            ids = _ids(row[0])
            ids[key] = value
            conn.execute("UPDATE runs SET notification_ids = ? WHERE id = ?", (json.dumps(ids), run_id))
        return True

    # -- lessons ------------------------------------------------------------------------------

    def add_lesson(self, lesson: dict[str, Any]) -> None:
        columns = ", ".join(lesson)
        marks = ", ".join("?" for _ in lesson)
        with self._connect() as conn:
            conn.execute("DELETE FROM lessons WHERE run_id = ?", (lesson["run_id"],))
            conn.execute(f"INSERT INTO lessons ({columns}) VALUES ({marks})", tuple(lesson.values()))

    def search_lessons(self, query: str, *, exclude: str | None = None, limit: int = 3) -> list[dict[str, Any]]:
        """The lessons best matching ``query`` (an FTS5 expression), best first."""
        if not query:
            return []
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT *, bm25(lessons) AS rank FROM lessons WHERE lessons MATCH ? AND run_id != ?"
                " ORDER BY rank LIMIT ?",
                (query, exclude or "", limit),
            ).fetchall()
        return [dict(r) for r in rows]

    def lessons(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM lessons ORDER BY created_at DESC").fetchall()
        return [dict(r) for r in rows]


def _busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (taken at once, so a read in it sees what the write will change)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _ids(text: str | None) -> dict[str, Any]:
    try:
        ids = json.loads(text or "{}")
    except ValueError:
        return {}
    return ids if isinstance(ids, dict) else {}


def _row(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["notification_ids"] = _ids(data.get("notification_ids"))
    return data


def _identity(directory: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    return info.st_dev, info.st_ino
