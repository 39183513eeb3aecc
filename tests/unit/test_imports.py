"""The import graph of src/loope, read with ast: no module, and no package, imports itself back."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import loope

SRC = Path(loope.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imported(node: ast.AST, module: str, is_package: bool, modules: dict[str, Path]) -> Iterator[str]:
    """The modules ``node`` imports: ``from pkg import sub`` names the submodule, not the package."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        for alias in node.names:
            yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def import_graph() -> dict[str, set[str]]:
    """module -> the loope modules it imports (at any level, TYPE_CHECKING blocks included)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(node, module, path.name == "__init__.py", modules):
                target = name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_engines_imports():
    graph = import_graph()
    assert "loope.engine.decide" in graph["loope.engine.loop"]
    assert "loope.events" in graph["loope.engine.loop"]


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same graph between ``loope.<package>`` (a top-level module is a package of its own)."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(package(module), set()).update(package(t) for t in targets if package(t) != package(module))
    return packages


def test_no_package_imports_itself_back():
    assert cycles(package_graph(import_graph())) == []


def test_the_package_graph_sees_the_cli_above_the_views():
    packages = package_graph(import_graph())
    assert "loope.ui" in packages["loope.cli"]
    assert "loope.cli" not in packages["loope.ui"]


def test_verify_and_records_sit_below_the_engine():
    packages = package_graph(import_graph())
    assert "loope.engine" not in packages["loope.verify"]
    assert "loope.engine" not in packages["loope.records"]
    assert "loope.workspace" not in packages["loope.records"]


def test_the_run_model_sits_below_every_reader():
    """``status``, the dashboard and the views fold a run's events through one model, below all of them."""
    graph = import_graph()
    readers = [m for m, targets in graph.items() if "loope.records.runview" in targets]
    assert {"loope.control", "loope.serve.data", "loope.ui.base"} <= set(readers)
    assert not [t for t in graph["loope.records.runview"] if not t.startswith(("loope.records.", "loope.text"))]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
