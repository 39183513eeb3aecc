"""Services a run started from the CLI (or the MCP tool) is wired to: the project's store, memory, notifiers."""

from __future__ import annotations

from collections.abc import Sequence

from loope.engine.roster import Services
from loope.events import Observer
from loope.notify import build_notifiers
from loope.spec import LoopSpec


def for_project(spec: LoopSpec, views: Sequence[Observer] = ()) -> Services:
    """``views``, then the project's store as index, stop control and memory, then ``--notify``'s notifiers."""
    from loope.memory import Lessons
    from loope.store.db import Store
    from loope.store.observer import StoreControl, StoreObserver

    store = Store.for_project(spec.workdir)
    observers: list[Observer] = [*views, StoreObserver(store)]
    if spec.notify:
        observers += build_notifiers(spec.notify, store=store)
    return Services(observers=observers, control=StoreControl(store), memory=Lessons(store))
