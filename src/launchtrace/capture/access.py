"""Which array parameters a Warp kernel reads and writes, from the kernel's own syntax tree.

Warp's ``inputs=`` / ``outputs=`` split says little in practice: most programs pass the arrays a kernel writes in
``inputs``. Warp's code generator does track reads and writes per argument, but only when
``wp.config.verify_autograd_array_access`` is on when the kernel is built. So the materializer asks this module:
it walks ``kernel.adj.tree`` (the AST Warp already parsed) once per kernel and classifies each array parameter
(or struct field, ``"p.pos"``) as read (``"r"``), written (``"w"``), both (``"rw"``) or untouched (absent).

Conservative where it cannot know: an array handed to a function (a ``@wp.func``, a builtin it does not know)
is ``"rw"``; atomics are ``"rw"``. A plain local alias (``a = x``) follows ``x``.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["kernel_access"]

_READ_CALLS = frozenset(
    ("len", "tile_load", "tile_load_indexed", "array_load", "load", "address", "view", "bvh_query_aabb")
)


def _is_write_call(name: str) -> str | None:
    if "atomic" in name or "scatter" in name:
        return "rw"
    if name in ("tile_store", "array_store", "store", "tile_store_indexed"):
        return "w"
    return None


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


class _Walker(ast.NodeVisitor):
    def __init__(self, params: set[str]) -> None:
        self.params = params
        self.aliases: dict[str, str] = {}
        self.modes: dict[str, set[str]] = {}

    def _path(self, node: ast.AST) -> str | None:
        """``x`` / ``p.pos`` when ``node`` names a parameter (or a field of one), else ``None``."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id, node.id)
        if root.split(".")[0] not in self.params:
            return None
        return ".".join([root, *reversed(parts)])

    def _mark(self, path: str | None, mode: str) -> None:
        if path is not None:
            self.modes.setdefault(path, set()).update(mode)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._store(target)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            source = self._path(node.value)
            if source is not None:
                self.aliases[node.targets[0].id] = source
                return
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._element_write(node.target, "rw")
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._store(node.target)
        if node.value is not None:
            self.visit(node.value)

    def _store(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._store(element)
        else:
            self._element_write(target, "w")

    def _element_write(self, target: ast.AST, mode: str) -> None:
        """Mark the array parameter an assignment target writes into: ``x[i]``, and also a part of an element,
        ``p[i].mass``, ``v[i][0]``, ``p.pos[i].x`` (the innermost subscript of a parameter path); the indices
        on the way are reads (``x[idx[i]] = ...`` reads ``idx``)."""
        node = target
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Subscript):
                self.visit(node.slice)
                path = self._path(node.value)
                if path is not None:
                    self._mark(path, mode)
                    return
            node = node.value

    def visit_Subscript(self, node: ast.Subscript) -> None:  # a load (stores are handled above)
        self._mark(self._path(node.value), "r")
        self.visit(node.slice)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        write = _is_write_call(name)
        for i, arg in enumerate([*node.args, *(k.value for k in node.keywords)]):
            path = self._path(arg)
            if path is None:
                self.visit(arg)
            elif write is not None and i == 0:
                self._mark(path, write)
            elif name in _READ_CALLS or write is not None:
                self._mark(path, "r")
            else:
                self._mark(path, "rw")  # handed to a function we cannot see into

    def visit_Attribute(self, node: ast.Attribute) -> None:  # x.shape, p.mass: metadata reads, not memory
        if self._path(node) is None:
            self.generic_visit(node)


def kernel_access(kernel: Any) -> dict[str, str] | None:
    """``{"x": "r", "y": "w", "p.pos": "rw"}`` for the array parameters ``kernel`` touches; ``None`` if unknown."""
    adj = getattr(kernel, "adj", None)
    tree = getattr(adj, "tree", None)
    args = getattr(adj, "args", None)
    if tree is None or args is None:
        return None
    params = {str(getattr(a, "label", "")) for a in args}
    walker = _Walker(params)
    try:
        body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else tree.body
        for statement in body:
            walker.visit(statement)
    except (AttributeError, TypeError, RecursionError):
        return None
    return {path: ("r" if modes == {"r"} else "w" if modes == {"w"} else "rw") for path, modes in walker.modes.items()}
