"""Which array parameters a Warp kernel reads and writes, from the kernel's own syntax tree.

Warp's ``inputs=`` / ``outputs=`` split says little in practice: most programs pass the arrays a kernel writes in
``inputs``. Warp's code generator does track reads and writes per argument, but only when
``wp.config.verify_autograd_array_access`` is on when the kernel is built. So the materializer asks this module:
it walks ``kernel.adj.tree`` (the AST Warp already parsed) once per kernel and classifies each array parameter
(or struct field, ``"p.pos"``) as read (``"r"``), written (``"w"``), both (``"rw"``) or untouched (absent).

An array handed to a user function (``@wp.func``) takes the access that function's own body makes of the
parameter it lands in (every overload that takes that many arguments, combined; followed up to
``MAX_CALL_DEPTH`` calls deep), so ``bsr_mv``'s ``A_offsets``, only read by ``_bsr_row_end``, stays ``"r"``.
Conservative where it cannot know: an array handed to a function it cannot see into (a builtin it does not
know, a function it cannot resolve, a recursion) is ``"rw"``; atomics are ``"rw"``. A plain local alias
(``a = x``) follows ``x``.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["MAX_CALL_DEPTH", "kernel_access"]

MAX_CALL_DEPTH = 8
_METADATA = frozenset(("shape", "strides", "ndim", "size"))

_READ_CALLS = frozenset(
    ("len", "tile_load", "tile_load_indexed", "array_load", "load", "address", "view", "bvh_query_aabb", "lower_bound")
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


def _func_path(node: ast.AST) -> list[str]:
    """``["wp", "sparse", "f"]`` for a call's ``wp.sparse.f``; empty when it is not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    return [node.id, *reversed(parts)]


def _resolve(adj: Any, path: list[str]) -> Any:
    """The object a dotted name in ``adj``'s function refers to (closure, then globals), or ``None``."""
    func = getattr(adj, "func", None)
    if not path or func is None:
        return None
    closure = getattr(func, "__closure__", None) or ()
    names = getattr(getattr(func, "__code__", None), "co_freevars", ())
    scope: dict[str, Any] = dict(getattr(func, "__globals__", {}))
    for name, cell in zip(names, closure):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    obj = scope.get(path[0])
    for part in path[1:]:
        obj = getattr(obj, part, None)
    return obj


def _user_overloads(func: Any) -> list[Any]:
    """The adjoints of a ``@wp.func`` (one per overload); empty for builtins and anything else."""
    if type(func).__name__ != "Function" or getattr(func, "func", None) is None:
        return []
    overloads = [*getattr(func, "user_overloads", {}).values(), *getattr(func, "user_templates", {}).values()]
    adjs = [getattr(f, "adj", None) for f in overloads or [func]]
    return [a for a in adjs if a is not None and getattr(a, "tree", None) is not None]


class _Walker(ast.NodeVisitor):
    def __init__(self, params: set[str], adj: Any = None, stack: tuple[int, ...] = ()) -> None:
        self.params = params
        self.adj = adj
        self.stack = stack  # ids of the adjoints being walked, outermost first: guards recursion
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
        path = self._path(node.value)
        if path is not None and path.rsplit(".", 1)[-1] not in _METADATA:  # x.shape[1] reads no memory
            self._mark(path, "r")
        self.visit(node.slice)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        write = _is_write_call(name)
        callee = self._callee(node) if write is None and name not in _READ_CALLS else None
        for i, arg in enumerate([*node.args, *(k.value for k in node.keywords)]):
            path = self._path(arg)
            if path is None:
                self.visit(arg)
            elif write is not None and i == 0:
                self._mark(path, write)
            elif name in _READ_CALLS or write is not None:
                self._mark(path, "r")
            elif callee is not None:
                param = node.keywords[i - len(node.args)].arg if i >= len(node.args) else i
                self._mark_through(path, param, callee)
            else:
                self._mark(path, "rw")  # handed to a function we cannot see into

    def _callee(self, node: ast.Call) -> list[tuple[list[str], dict[str, str]]] | None:
        """``[(parameter labels, their access)]`` per overload of the ``@wp.func`` called, or ``None``."""
        if len(self.stack) >= MAX_CALL_DEPTH:
            return None
        adjs = _user_overloads(_resolve(self.adj, _func_path(node.func)))
        n_args = len(node.args) + len(node.keywords)
        out = []
        for adj in adjs:
            labels = [str(getattr(a, "label", "")) for a in getattr(adj, "args", ())]
            if len(labels) < n_args or id(adj) in self.stack:
                continue
            modes = _adjoint_access(adj, self.stack)
            if modes is None:
                return None
            out.append((labels, modes))
        return out or None

    def _mark_through(self, path: str, param: int | str | None, callee: list) -> None:
        """Mark ``path`` with what each overload does to the parameter it is passed as (and its fields)."""
        for labels, modes in callee:
            label = labels[param] if isinstance(param, int) else param
            if label not in labels:
                self._mark(path, "rw")
                continue
            for key, mode in modes.items():
                if key == label or key.startswith(label + "."):
                    self._mark(path + key[len(label) :], mode)

    def visit_Attribute(self, node: ast.Attribute) -> None:  # x.shape, p.mass: metadata reads, not memory
        if self._path(node) is None:
            self.generic_visit(node)


def kernel_access(kernel: Any) -> dict[str, str] | None:
    """``{"x": "r", "y": "w", "p.pos": "rw"}`` for the array parameters ``kernel`` touches; ``None`` if unknown."""
    return _adjoint_access(getattr(kernel, "adj", None), ())


def _adjoint_access(adj: Any, stack: tuple[int, ...]) -> dict[str, str] | None:
    """:func:`kernel_access` of one ``Adjoint`` (a kernel's, or a ``@wp.func``'s when followed into)."""
    tree = getattr(adj, "tree", None)
    args = getattr(adj, "args", None)
    if tree is None or args is None:
        return None
    params = {str(getattr(a, "label", "")) for a in args}
    walker = _Walker(params, adj, (*stack, id(adj)))
    try:
        body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else tree.body
        for statement in body:
            walker.visit(statement)
    except (AttributeError, TypeError, RecursionError):
        return None
    return {path: ("r" if modes == {"r"} else "w" if modes == {"w"} else "rw") for path, modes in walker.modes.items()}
