"""Escaping for every string that comes from a trace, per output context.

Kernel names, scope names and attribute values are written by other people's programs: in DOT and HTML
they must render as inert text. Control characters (which Graphviz rejects or interprets) become spaces.

Example::

    from launchtrace.render.escape import dot_quoted, dot_html, json_for_script
    dot_quoted('say "hi" & bye')  # '"say \\\\"hi\\\\" &amp; bye"'
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

__all__ = [
    "columns",
    "dot_html",
    "dot_quoted",
    "html_text",
    "json_for_script",
    "json_text",
    "pad",
    "plain",
    "script_safe",
    "terminal",
    "terminal_lines",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def plain(text: object, limit: int = 400) -> str:
    """``text`` as one line without control characters, cut to ``limit`` characters."""
    s = _CONTROL.sub(" ", str(text))
    return s if len(s) <= limit else s[: limit - 1] + "\u2026"


def terminal(text: object) -> str:
    """``text`` safe for a terminal line: control and separator characters escaped as the problem messages
    escape them (``"a\\nb"``, ``"\\x1b[2J"``), so a name from someone else's trace can neither forge a line
    (``FORGED: 0 problems``) nor send escape sequences (screen clear, window title) to the terminal."""
    from launchtrace.otlp.problems import one_line

    return one_line(str(text))


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes (``wcwidth``: East Asian wide characters such as ``模拟`` and most
    emoji two, combining marks none), so a table of scope and kernel names lines up; its length where ``wcwidth``
    finds a character it cannot place (``terminal`` has escaped control characters already)."""
    if text.isascii():
        return len(text)
    from wcwidth import wcswidth

    width = wcswidth(text)
    return width if width >= 0 else len(text)


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (:func:`columns`)."""
    return text + " " * max(0, width - columns(text))


def terminal_lines(lines: list[str] | tuple[str, ...]) -> str:
    """``lines`` joined for a terminal, each escaped with :func:`terminal`, with a final newline."""
    return "".join(terminal(line) + "\n" for line in lines)


def dot_quoted(text: object, limit: int = 400) -> str:
    """A DOT double-quoted string (with its quotes) that Graphviz shows literally: Graphviz decodes entities
    and escape sequences (``\\N``, ``\\l``) in quoted labels too, so ``&`` and ``\\`` are escaped."""
    s = plain(text, limit).replace("&", "&amp;").replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def dot_html(text: object, limit: int = 200) -> str:
    """Text for inside a Graphviz HTML-like label (``<...>``): entities for markup characters and for the
    backslash (Graphviz expands ``\\N`` even there)."""
    return html.escape(plain(text, limit), quote=True).replace("\\", "&#92;")


def html_text(text: object, limit: int = 10_000) -> str:
    """Text for an HTML element or attribute."""
    return html.escape(plain(text, limit), quote=True)


def json_text(data: Any) -> str:
    """Compact JSON of ``data`` (not yet safe for a script element: see :func:`script_safe`)."""
    return _encode(data)


def script_safe(text: str) -> str:
    """JSON text made safe for a ``<script type="application/json">`` element: ``<``, ``>``, ``&`` and the JS
    line separators escaped as ``\\uXXXX``, so no string in it can close the element or start markup. Each
    character is replaced on its own, so pieces made safe one by one and joined are the whole made safe."""
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def json_for_script(data: Any) -> str:
    """JSON for a ``<script type="application/json">`` element (:func:`json_text` made :func:`script_safe`)."""
    return script_safe(_encode(data))


# json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str), made once; no check for circular
# containers (the data is trees of tuples, lists and dicts made here): the same text, a fifth less time
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False).encode
