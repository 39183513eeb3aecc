"""The SQLite store: migrations from a blank database and from every older schema, WAL, locks, corruption."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from loope.errors import LoopeError
from loope.store import db as store_db
from loope.store.db import Store
from loope.store.migrations import LATEST, MIGRATIONS, current_version, migrate
from tests.conftest import no_loope_runs, one_error_line

RUN_V1 = {
    "id": "0001-fix-add",
    "goal": "fix add",
    "workdir": "/tmp/proj",
    "run_dir": "/tmp/proj/.loope/runs/0001-fix-add",
    "workspace": "/tmp/proj/.loope/runs/0001-fix-add/workspace",
    "state_file": "/tmp/proj/.loope/runs/0001-fix-add/workspace/.loope/state.md",
    "success_cmd": "test -f done",
    "max_iters": 5,
    "max_cost": 2.5,
    "status": "max_iters",
    "iterations": 5,
    "total_cost": 1.25,
    "total_tokens": 900,
    "interrupt": 1,
    "last_error": "gate failed",
    "started_at": "2024-05-01T10:00:00.000Z",
    "finished_at": "2024-05-01T10:05:00.000Z",
    "runner_pid": 4242,
}
STEP_V1 = {
    "run_id": "0001-fix-add",
    "step": 1,
    "iteration": 1,
    "role": "implementer",
    "adapter": "exec",
    "ok": 1,
    "verdict": None,
    "cost_usd": 0.25,
    "duration_s": 1.5,
    "error": None,
}
LESSON = {
    "run_id": "0001-fix-add",
    "goal": "fix the add function",
    "outcome": "not converged (max_iters)",
    "stop_reason": "max_iters",
    "iterations": 5,
    "failed": "iteration 1: gate failed (tests/test_calc.py::test_add)",
    "worked": "",
    "diffstat": "calc.py +1 −1",
    "created_at": "2024-05-01T10:05:00.000Z",
}


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def insert(conn: sqlite3.Connection, table: str, row: dict) -> None:
    conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def test_the_migrations_are_numbered_one_by_one():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert LATEST == MIGRATIONS[-1].version == 5
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def test_a_blank_database_is_migrated_to_the_latest_schema(tmp_path):
    path = tmp_path / "loope.db"
    Store(path)
    conn = connect(path)
    assert current_version(conn) == LATEST
    assert {"runs", "steps", "lessons", "fleets", "fleet_tasks", "schema_migrations"} <= tables(conn)
    assert {"interrupt", "interrupt_now", "notification_ids", "runner_pid", "last_error"} <= columns(conn, "runs")
    assert "temporal" in columns(conn, "fleets")
    rows = [tuple(r) for r in conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")]
    assert rows == [(m.version, m.name) for m in MIGRATIONS]
    assert all(r[0] for r in conn.execute("SELECT applied_at FROM schema_migrations"))


def test_migrating_again_changes_nothing(tmp_path):
    path = tmp_path / "loope.db"
    Store(path).add_run(RUN_V1 | {"status": "running"})
    Store(path)  # every process opens the store, and so migrates it
    conn = connect(path)
    assert migrate(conn) == LATEST
    assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == LATEST
    assert conn.execute("SELECT status FROM runs").fetchone()[0] == "running"


def test_the_database_is_in_wal_mode(tmp_path):
    path = tmp_path / "loope.db"
    Store(path).add_run(RUN_V1)
    # The journal mode is persistent: any new connection sees it.
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("version", range(LATEST))
def test_an_older_schema_is_migrated_with_its_data_kept(tmp_path, version):
    path = tmp_path / "loope.db"
    conn = connect(path)
    assert migrate(conn, upto=version) == version
    assert current_version(conn) == version
    run = dict(RUN_V1)
    if version >= 1:
        if version >= 2:
            run |= {"interrupt_now": 1, "notification_ids": '{"slack": "1714557600.000100"}'}
        insert(conn, "runs", run)
        insert(conn, "steps", STEP_V1)
    if version >= 3:
        insert(conn, "lessons", LESSON)
    conn.close()

    store = Store(path)

    conn = connect(path)
    assert current_version(conn) == LATEST
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == list(
        range(1, LATEST + 1)
    )
    if version >= 1:
        row = store.get(RUN_V1["id"])
        assert row is not None
        assert {k: row[k] for k in RUN_V1} == RUN_V1
        if version >= 2:
            assert (row["interrupt_now"], row["notification_ids"]) == (1, {"slack": "1714557600.000100"})
            assert store.stop_flags(RUN_V1["id"]) == (True, True)
        else:  # the columns migration 2 added, with their defaults
            assert (row["interrupt_now"], row["notification_ids"]) == (0, {})
            assert store.stop_flags(RUN_V1["id"]) == (True, False)
        assert store.steps(RUN_V1["id"]) == [STEP_V1]
    else:
        assert store.recent() == []
    # The newest table works on every migrated database.
    if version < 3:
        store.add_lesson(LESSON)
    found = store.search_lessons('"add"')
    assert [(r["run_id"], r["stop_reason"]) for r in found] == [("0001-fix-add", "max_iters")]


def test_a_failed_migration_leaves_the_schema_as_it_was(tmp_path):
    path = tmp_path / "loope.db"
    conn = connect(path)
    migrate(conn, upto=1)
    # A hand-made column that migration 2 also adds: its ALTER TABLE fails half-way.
    conn.execute("ALTER TABLE runs ADD COLUMN notification_ids TEXT")
    conn.close()
    with pytest.raises(LoopeError, match="duplicate column name: notification_ids"):
        Store(path)
    conn = connect(path)
    assert current_version(conn) == 1
    assert "interrupt_now" not in columns(conn, "runs")  # the first statement of migration 2 was rolled back
    assert "lessons" not in tables(conn)


def test_store_operations_round_trip(tmp_path):
    store = Store(tmp_path / "loope.db")
    store.add_run(RUN_V1 | {"status": "running", "interrupt": 0})
    store.add_run(RUN_V1 | {"id": "0002-other", "status": "converged", "started_at": "2024-05-02T00:00:00.000Z"})
    assert [r["id"] for r in store.running()] == ["0001-fix-add"]
    assert [r["id"] for r in store.recent()] == ["0002-other", "0001-fix-add"]
    store.request_stop("0001-fix-add", now=True)
    assert store.stop_flags("0001-fix-add") == (True, True)
    assert store.stop_flags("9999-unknown") == (False, False)
    for n in (1, 2, 3):
        step = {"step": n, "iteration": n, "role": "implementer", "adapter": "exec", "ok": n != 2, "cost_usd": 0.5}
        store.add_step("0001-fix-add", step)
    store.drop_steps_after("0001-fix-add", 1)
    assert [(s["step"], s["ok"], s["cost_usd"]) for s in store.steps("0001-fix-add")] == [(1, 1, 0.5)]
    store.add_lesson(LESSON)
    store.add_lesson(LESSON | {"outcome": "converged"})  # one lesson a run: the last one wins
    assert [r["outcome"] for r in store.lessons()] == ["converged"]
    assert store.search_lessons('"add"', exclude="0001-fix-add") == []
    assert store.search_lessons("") == []


def test_a_locked_database_says_so_in_one_clear_message(tmp_path, monkeypatch):
    path = tmp_path / "loope.db"
    store = Store(path)
    store.add_run(RUN_V1 | {"status": "running", "interrupt": 0})
    monkeypatch.setattr(store_db, "BUSY_TIMEOUT_S", 0.2)  # only to fail fast instead of after 5 s
    holder = connect(path)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LoopeError) as raised:
            store.request_stop(RUN_V1["id"])
        message = str(raised.value)
        assert "locked" in message
        assert str(path) in message
        assert "retry" in message
        assert "\n" not in message
        assert store.get(RUN_V1["id"])["interrupt"] == 0  # WAL: readers still read while a writer holds the lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.request_stop(RUN_V1["id"])
    assert store.stop_flags(RUN_V1["id"]) == (True, False)


def test_a_lock_held_briefly_is_waited_for(tmp_path):
    path = tmp_path / "loope.db"
    store = Store(path)
    store.add_run(RUN_V1 | {"status": "running", "interrupt": 0})
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    locked = threading.Event()
    release = threading.Timer(0.3, lambda: (holder.execute("ROLLBACK"), locked.set()))
    release.start()
    try:
        store.request_stop(RUN_V1["id"])  # blocks until the other connection lets go, well within the timeout
    finally:
        release.join()
        holder.close()
    assert locked.is_set()
    assert store.stop_flags(RUN_V1["id"]) == (True, False)


def test_a_new_database_locked_before_it_is_set_up_says_so(tmp_path, monkeypatch):
    path = tmp_path / "loope.db"
    holder = connect(path)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(store_db, "BUSY_TIMEOUT_S", 0.2)  # only to fail fast instead of after 5 s
    try:
        with pytest.raises(LoopeError, match="is locked by another process; retry in a moment"):
            Store(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize(
    "content",
    [
        b"this is not a database, it is a text file someone saved here\n" * 40,
        b"SQLite format 3\x00" + b"\xff" * 4000,  # the right magic, garbage after it
    ],
)
def test_a_corrupt_database_gets_a_clear_message(tmp_path, content):
    path = tmp_path / "loope.db"
    path.write_bytes(content)
    with pytest.raises(LoopeError) as raised:
        Store(path)
    message = str(raised.value)
    assert str(path) in message
    assert "unreadable" in message or "failed" in message
    assert "Traceback" not in message
    assert path.read_bytes() == content  # never overwritten: the user decides what to do with it


def test_a_database_path_that_is_a_directory_gets_a_clear_message(tmp_path):
    path = tmp_path / "loope.db"
    path.mkdir()
    with pytest.raises(LoopeError, match="cannot open the run database"):
        Store(path)


def test_the_cli_reports_a_corrupt_database_on_one_line_and_starts_no_run(project, cli):
    db = project.path / ".loope" / "loope.db"
    db.parent.mkdir()
    db.write_bytes(b"garbage " * 500)
    result = cli("lessons", cwd=project.path)
    assert result.exit_code == 2
    assert "is unreadable (file is not a database); move it aside" in one_error_line(result.err)
    result = cli("run", "fix add", "--implementer", "exec:true", "--no-review", cwd=project.path)
    assert result.exit_code == 2
    assert "loope.db is unreadable" in one_error_line(result.err)
    assert no_loope_runs(project.path)


def test_updates_say_whether_the_store_has_the_run(tmp_path):
    store = Store(tmp_path / "loope.db")
    assert store.update_run(RUN_V1["id"], status="failed") == 0
    assert store.request_stop(RUN_V1["id"]) is False  # nobody would ever see this stop request
    assert store.get(RUN_V1["id"]) is None
    store.add_run(RUN_V1 | {"interrupt": 0})
    assert store.update_run(RUN_V1["id"], status="failed") == 1
    assert store.request_stop(RUN_V1["id"], now=True) is True
    assert store.stop_flags(RUN_V1["id"]) == (True, True)
    assert store.restore_run(RUN_V1 | {"status": "running"}) is False  # there already: left as it is
    assert store.get(RUN_V1["id"])["status"] == "failed"


def test_two_processes_migrating_a_new_database_at_once_apply_each_migration_once(tmp_path):
    path = tmp_path / "loope.db"
    both_read_version_0 = threading.Barrier(2, timeout=60)
    reached: dict[str, int] = {}
    errors: list[BaseException] = []

    def open_and_migrate(name: str) -> None:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        paused: list[bool] = []

        def before_the_write_lock(statement: str) -> None:
            if statement == "BEGIN IMMEDIATE" and not paused:
                paused.append(True)
                both_read_version_0.wait()  # neither takes the lock before both have read the version

        conn.set_trace_callback(before_the_write_lock)
        try:
            reached[name] = migrate(conn)
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=open_and_migrate, args=(name,)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert reached == {"first": LATEST, "second": LATEST}
    conn = connect(path)
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == list(
        range(1, LATEST + 1)
    )
    Store(path).add_run(RUN_V1)  # and the schema works


def test_notification_ids_are_set_one_key_at_a_time(tmp_path):
    path = tmp_path / "loope.db"
    Store(path).add_run(RUN_V1 | {"status": "running"})
    assert Store(path).set_notification_id("9999-unknown", "slack:#a", {"ts": "1"}) is False
    writers, writes = 6, 20
    start = threading.Barrier(writers, timeout=60)
    errors: list[BaseException] = []

    def write(key: str) -> None:
        store = Store(path)  # one store per notifier, as two notifiers of one run would have
        start.wait()
        try:
            for n in range(writes):
                store.set_notification_id(RUN_V1["id"], key, {"ts": f"1700000000.{n:06d}"})
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(f"slack:#c{i}",)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    last = {"ts": f"1700000000.{writes - 1:06d}"}
    assert Store(path).notification_ids(RUN_V1["id"]) == {f"slack:#c{i}": last for i in range(writers)}


def test_damaged_notification_ids_are_started_afresh(tmp_path):
    store = Store(tmp_path / "loope.db")
    store.add_run(RUN_V1 | {"notification_ids": "not json"})
    assert store.notification_ids(RUN_V1["id"]) == {}
    assert store.set_notification_id(RUN_V1["id"], "slack:#a", {"ts": "1"}) is True
    assert store.notification_ids(RUN_V1["id"]) == {"slack:#a": {"ts": "1"}}
