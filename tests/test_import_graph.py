"""Imports point down: no circle among launchtrace's modules (issue 26's "no import circles").

The graph is read from the source with :mod:`ast`, the way Python runs it at import time: module-level
``import`` and ``from ... import`` statements (inside ``try``/``if`` too), not those under ``if TYPE_CHECKING:``
(never run) nor those inside functions (run later, when every module is loaded). ``from pkg import sub`` where
``sub`` is a module is an edge to ``pkg.sub`` only: the package's ``__init__`` runs first for any submodule,
which is no circle of ours.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "src" / "launchtrace"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The launchtrace modules that ``path`` (module ``name``) imports when it is imported."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                submodules = [f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in modules]
                found.update(submodules)
                if len(submodules) < len(node.names):
                    found.add(module)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {m for m in found if m in modules and m != name}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's circles: its strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_circles(graph) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_module_imports_reads_relative_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    source = pkg / "one.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from pkg import two\n"
        "from . import three\n"
        "if TYPE_CHECKING:\n    from pkg import four\n"
        "def later():\n    from pkg import five\n"
    )
    modules = {f"pkg.{n}": pkg / f"{n}.py" for n in ("one", "two", "three", "four", "five")}
    assert module_imports(source, "pkg.one", modules) == {"pkg.two", "pkg.three"}


def test_launchtrace_has_no_import_circle():
    modules = _module_names()
    assert len(modules) > 100
    graph = {name: module_imports(path, name, modules) for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 200  # the graph was read, not empty
    assert import_circles(graph) == []
