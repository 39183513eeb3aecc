"""Services a run started from the CLI (or the MCP tool) is wired to: the project's store, memory, notifiers."""

from __future__ import annotations

from typing import Any


def attach(engine: Any, spec: Any) -> None:
    """Index the run in the project's store, take stop requests from it, recall and keep lessons."""
    from loope.memory import Lessons
    from loope.store.db import Store
    from loope.store.observer import StoreControl, StoreObserver

    store = Store.for_project(spec.workdir)
    engine.bus.add(StoreObserver(store))
    control = StoreControl(store, engine)
    engine.bus.add(control)
    engine.control = control
    engine.memory = Lessons(store)
    if spec.notify:
        from loope.notify import build_notifiers

        for notifier in build_notifiers(spec.notify, store=store):
            engine.bus.add(notifier)
