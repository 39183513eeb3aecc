"""Fleets in the project's store: one row per fleet, one per task, and the fleet's stop flags."""

from __future__ import annotations

import re
from typing import Any

from loope.store.db import Store, _transaction

_NUMBER = re.compile(r"^(\d+)-")


class FleetStore(Store):
    """The project's store, with its fleet tables (added by migration 4)."""

    def add_fleet(self, stem: str, fleet: dict[str, Any], tasks: list[dict[str, Any]]) -> str:
        """Record a new fleet and its tasks in one transaction; the fleet's id (``NNNN-stem``)."""
        with self._connect() as conn, _transaction(conn):
            rows = conn.execute("SELECT id FROM fleets").fetchall()
            number = max((int(m.group(1)) for (i,) in rows if (m := _NUMBER.match(i))), default=0) + 1
            fleet_id = f"{number:04d}-{stem}"
            row = {"id": fleet_id, **fleet}
            conn.execute(
                f"INSERT INTO fleets ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values())
            )
            for task in tasks:
                task_row = {"fleet_id": fleet_id, **task}
                conn.execute(
                    f"INSERT INTO fleet_tasks ({', '.join(task_row)}) VALUES ({', '.join('?' for _ in task_row)})",
                    tuple(task_row.values()),
                )
        return fleet_id

    def get_fleet(self, fleet_id: str) -> dict[str, Any] | None:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM fleets WHERE id = ?", (fleet_id,)).fetchone()
        return dict(row) if row else None

    def fleets(self) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM fleets ORDER BY started_at DESC, id DESC").fetchall()
        return [dict(r) for r in rows]

    def running_fleets_with_digest(self, digest: str) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM fleets WHERE digest = ? AND status = 'running'", (digest,)).fetchall()
        return [dict(r) for r in rows]

    def fleet_tasks(self, fleet_id: str) -> list[dict[str, Any]]:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT * FROM fleet_tasks WHERE fleet_id = ? ORDER BY position", (fleet_id,)
            ).fetchall()
        return [dict(r) for r in rows]

    def update_fleet(self, fleet_id: str, **fields: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as conn:
            conn.execute(f"UPDATE fleets SET {sets} WHERE id = ?", (*fields.values(), fleet_id))

    def update_fleet_task(self, fleet_id: str, name: str, **fields: Any) -> None:
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self._connect() as conn:
            conn.execute(
                f"UPDATE fleet_tasks SET {sets} WHERE fleet_id = ? AND name = ?", (*fields.values(), fleet_id, name)
            )

    def request_fleet_stop(self, fleet_id: str, *, now: bool) -> None:
        self.update_fleet(fleet_id, interrupt=1, interrupt_now=int(now))

    def fleet_stop_flags(self, fleet_id: str) -> tuple[bool, bool]:
        row = self.get_fleet(fleet_id)
        return (bool(row["interrupt"]), bool(row["interrupt_now"])) if row else (False, False)
