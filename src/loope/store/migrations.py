"""The store's schema, as an ordered list of migrations; each applied one is recorded in a table."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple


class Migration(NamedTuple):
    """One step of the schema: its version (recorded once applied), a name, and its SQL."""

    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs and steps",
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            goal TEXT NOT NULL,
            workdir TEXT NOT NULL,
            run_dir TEXT NOT NULL,
            workspace TEXT,
            state_file TEXT,
            success_cmd TEXT,
            max_iters INTEGER,
            max_cost REAL,
            max_tokens INTEGER,
            max_time REAL,
            status TEXT NOT NULL DEFAULT 'running',
            iterations INTEGER NOT NULL DEFAULT 0,
            total_cost REAL NOT NULL DEFAULT 0,
            total_tokens INTEGER NOT NULL DEFAULT 0,
            interrupt INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            started_at TEXT NOT NULL,
            last_tick_at TEXT,
            finished_at TEXT,
            runner_pid INTEGER
        );
        CREATE INDEX runs_status ON runs(status);
        CREATE TABLE steps (
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            step INTEGER NOT NULL,
            iteration INTEGER NOT NULL,
            role TEXT NOT NULL,
            adapter TEXT NOT NULL,
            ok INTEGER NOT NULL,
            verdict TEXT,
            cost_usd REAL NOT NULL DEFAULT 0,
            duration_s REAL NOT NULL DEFAULT 0,
            error TEXT,
            PRIMARY KEY (run_id, step)
        );
        """,
    ),
    Migration(
        2,
        "stop now, and notification ids",
        """
        ALTER TABLE runs ADD COLUMN interrupt_now INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE runs ADD COLUMN notification_ids TEXT NOT NULL DEFAULT '{}';
        """,
    ),
    Migration(
        3,
        "lessons with full-text search",
        """
        CREATE VIRTUAL TABLE lessons USING fts5(
            run_id UNINDEXED,
            goal,
            outcome,
            stop_reason,
            iterations UNINDEXED,
            failed,
            worked,
            diffstat,
            created_at UNINDEXED
        );
        """,
    ),
    Migration(
        4,
        "fleets and their tasks",
        """
        CREATE TABLE fleets (
            id TEXT PRIMARY KEY,
            file TEXT NOT NULL,
            digest TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'running',
            jobs INTEGER NOT NULL,
            max_cost REAL,
            max_time REAL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            coordinator_pid INTEGER,
            interrupt INTEGER NOT NULL DEFAULT 0,
            interrupt_now INTEGER NOT NULL DEFAULT 0,
            stop_detail TEXT
        );
        CREATE TABLE fleet_tasks (
            fleet_id TEXT NOT NULL REFERENCES fleets(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            name TEXT NOT NULL,
            workdir TEXT NOT NULL,
            spec TEXT NOT NULL,
            run_id TEXT,
            status TEXT NOT NULL DEFAULT 'pending',
            error TEXT,
            PRIMARY KEY (fleet_id, name)
        );
        """,
    ),
    Migration(
        5,
        "fleets on Temporal: where their workflows run",
        """
        ALTER TABLE fleets ADD COLUMN temporal TEXT;
        """,
    ),
)

LATEST = MIGRATIONS[-1].version


def current_version(conn: sqlite3.Connection) -> int:
    table = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchone()
    if table is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, *, upto: int = LATEST) -> int:
    """Apply every migration after the database's version (up to ``upto``); the version reached.

    ``conn`` must be in autocommit mode (``isolation_level=None``): each migration is its own
    explicit transaction, so a failed one leaves the schema as it was.
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations"
        " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    )
    version = current_version(conn)
    for migration in MIGRATIONS:
        if not version < migration.version <= upto:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while this one waited for the write lock.
            version = current_version(conn)
            if version < migration.version:
                for statement in _statements(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (migration.version, migration.name)
                )
                version = migration.version
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return version


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";") if s.strip()]
