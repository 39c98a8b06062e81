"""Readable names for allocations, read from the statement that allocated them.

Off the hot path: :class:`~launchtrace.allocations.AllocationRegistry` asks for a label the first time the
materializer meets an allocation, and each source file is parsed once. What a statement gives:

- ``self.x = wp.zeros(n)`` in a method of ``State`` -> ``State.x`` (also through a comprehension:
  ``self.xs = [wp.zeros(n) for _ in range(k)]`` -> ``State.xs``);
- ``tmp = wp.empty_like(x)`` in ``Trainer.step`` -> ``Trainer.step.tmp``; at module level -> ``tmp``;
- ``self.xs.append(wp.zeros(n))`` -> ``State.xs[]``;
- several allocations on one line, each a single call (``a, b = wp.zeros(n), wp.zeros(n)``, or
  ``a = wp.zeros(n); b = wp.zeros(n)``) -> ``a`` and ``b``, by their order on the line (:func:`line_targets`);
- ``return wp.zeros(n)`` (a factory) -> the target of the statement that called the factory;
- nothing to name it by -> the function and the first kernel parameter it was passed as
  (``Trainer.step:integrate.x``).

A slot above 0 is appended as ``#k`` (:mod:`launchtrace.allocations`), a gradient Warp allocated for an array is
``<array>.grad``, and the label ends with the site: ``"State.x#1 (springs.py:41)"``.

Example::

    label_of(entry, "integrate", "x")  # "State.x (springs.py:41)"
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import threading
from typing import Any

__all__ = ["label_of", "line_targets", "names_itself", "qualified", "statement_target"]

_parsed: dict[str, dict[int, ast.stmt] | None] = {}
_on_line: dict[str, dict[int, list[ast.stmt]]] = {}  # file -> line -> the statements that start there, in order
_lock = threading.Lock()
_RETURN = "<return>"


def _statements(filename: str) -> dict[int, ast.stmt] | None:
    """Line -> innermost statement covering it, for a source file (``None``: no source, or not Python)."""
    with _lock:
        if filename in _parsed:
            return _parsed[filename]
    lines = linecache.getlines(filename)
    table: dict[int, ast.stmt] | None = None
    if lines:
        try:
            tree = ast.parse("".join(lines), filename)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            table = {}
            starts: dict[int, list[ast.stmt]] = {}
            for node in ast.walk(tree):
                if not isinstance(node, ast.stmt):
                    continue
                starts.setdefault(node.lineno, []).append(node)
                end = getattr(node, "end_lineno", None) or node.lineno
                for line in range(node.lineno, end + 1):
                    held = table.get(line)
                    if held is None or held.lineno <= node.lineno:
                        table[line] = node
    with _lock:
        if len(_parsed) > 4096:
            _parsed.clear()
            _on_line.clear()
        _parsed[filename] = table
        if table is not None:
            _on_line[filename] = {line: sorted(nodes, key=lambda n: n.col_offset) for line, nodes in starts.items()}
    return table


def _text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # an AST unparse cannot print: no name rather than a failure
        return ""


def statement_target(filename: str, line: int) -> str | None:
    """What the statement at ``filename:line`` assigns its value to (``"self.x"``, ``"tmp"``, ``"self.xs[]"``
    for an ``append``), ``"<return>"`` for a ``return``, else ``None``."""
    table = _statements(filename)
    stmt = table.get(line) if table else None
    if stmt is None:
        return None
    if isinstance(stmt, ast.Assign) and stmt.targets:
        return _text(stmt.targets[0]) or None
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return _text(stmt.target) or None
    if isinstance(stmt, ast.Return):
        return _RETURN
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert"):
            receiver = _text(func.value)
            return f"{receiver}[]" if receiver else None
    return None


def _one_call(node: ast.AST) -> bool:
    """Whether ``node`` is a single call with no call inside it (one allocation at most, in a known order)."""
    return isinstance(node, ast.Call) and not any(isinstance(n, ast.Call) for n in ast.walk(node) if n is not node)


@functools.lru_cache(maxsize=4096)  # asked again for each new allocation of a line (a temporary every step)
def line_targets(filename: str, line: int) -> tuple[str, ...]:
    """The targets of the allocating calls on ``filename:line``, in the order they run, where the line holds a
    tuple assignment or several assignments (``a, b = f(), g()`` and ``a = f(); b = g()`` -> ``("a", "b")``;
    ``x, y = 5, f()`` -> ``("y",)``), else ``()``: the k-th allocation of the line is the k-th target, as long as
    each is one call with no call in its arguments."""
    if _statements(filename) is None:
        return ()
    stmts = _on_line.get(filename, {}).get(line, [])
    names: list[str] = []
    if len(stmts) == 1 and isinstance(stmts[0], ast.Assign) and len(stmts[0].targets) == 1:
        target, value = stmts[0].targets[0], stmts[0].value
        if not (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))):
            return ()
        if len(target.elts) != len(value.elts):
            return ()
        for t, v in zip(target.elts, value.elts):
            if _one_call(v):
                names.append(_text(t))
            elif any(isinstance(n, ast.Call) for n in ast.walk(v)):
                return ()
    elif len(stmts) > 1:
        for stmt in stmts:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _one_call(stmt.value)):
                return ()
            names.append(_text(stmt.targets[0]))
    return tuple(names) if names and all(names) else ()


def _function_path(code: Any) -> list[str]:
    """The qualified name of ``code``'s function as parts, comprehensions and ``<locals>`` left out
    (``State.__init__.<locals>.<listcomp>`` -> ``["State", "__init__"]``; module level -> ``[]``)."""
    qualname = getattr(code, "co_qualname", None) or getattr(code, "co_name", "")
    return [p for p in str(qualname).split(".") if p and not p.startswith("<")]


def qualified(target: str, code: Any) -> str:
    """``target`` as written in ``code``, made unambiguous: ``self.x`` in a method of ``State`` -> ``State.x``;
    any other target in a function -> ``<function path>.<target>``; at module level as written."""
    path = _function_path(code)
    if target == "self" or target.startswith(("self.", "self[")):
        if len(path) >= 2:
            return path[-2] + target[4:]
        return target
    return ".".join([*path, target]) if path else target


def _site_name(site: Any) -> str:
    """The name a site gives its allocations (cached on the site), ``""`` when its statements name none."""
    name = site.name
    if name is not None:
        return name
    name = ""
    code = site.code
    target = statement_target(code.co_filename, site.line) if code is not None else None
    if target == _RETURN or target is None:
        back = site.back_code
        if target == _RETURN and back is not None:
            outer = statement_target(back.co_filename, site.back_line)
            if outer and outer != _RETURN:
                name = qualified(outer, back)
    else:
        name = qualified(target, code)
    site.name = name
    return name


def label_of(entry: Any, kernel: str = "", param: str = "") -> str:
    """The label of an :class:`~launchtrace.allocations.Allocation` (see the module docstring)."""
    from launchtrace.allocations import identity_of

    parent = entry.parent
    if parent is not None:
        if parent.label_text is None:
            parent.label_text = label_of(parent, kernel, param)
        head, _, site = parent.label_text.rpartition(" (")
        return f"{identity_of(parent.label_text)}.grad ({site}" if head else f"{parent.label_text}.grad"
    site = entry.site
    if site is None:
        name, where = f"{kernel}.{param}" if param else "<array>", "?"
    else:
        code = site.code
        name = _site_name(site)
        targets = line_targets(code.co_filename, site.line) if name and code is not None else ()
        if targets:  # the slot says which of the line's allocations this is (#k: its k-th live copy)
            n = len(targets)
            name = qualified(targets[entry.slot % n], code)
            if entry.slot >= n:
                name = f"{name}#{entry.slot // n}"
            return f"{name} ({os.path.basename(code.co_filename)}:{site.line})"
        if not name:
            function = ".".join(_function_path(code))
            use = f"{kernel}.{param}" if param else "<array>"
            name = f"{function}:{use}" if function else use
        where = f"{os.path.basename(code.co_filename)}:{site.line}"
    if entry.slot:
        name = f"{name}#{entry.slot}"
    return f"{name} ({where})"


def names_itself(entry: Any) -> bool:
    """Whether ``entry``'s label is independent of its use (its statement, or its parent's, names it)."""
    while entry.parent is not None:
        entry = entry.parent
    return entry.site is not None and bool(_site_name(entry.site))
