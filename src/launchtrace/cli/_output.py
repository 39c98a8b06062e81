"""The rules every command follows for the files it writes: nothing the user owns is overwritten by mistake.

- :func:`guard_output` (run for every command by the dispatcher): ``--out`` may not be one of the command's
  inputs (``diff a.jsonl b.jsonl --out a.jsonl``, ``run --out victim.py victim.py``), and a command that
  writes spans may not empty an existing file that holds something else (a script, a report): a trace file,
  an empty file or a new name are fine. A command that writes a report (``diff``, ``report``, ``alert``,
  ``chrome-trace``) may not overwrite a span file.
- :func:`make_parent`: only the last missing folder level is created (``runs/today/`` when ``runs/`` exists);
  a deeper missing path (a typo such as ``/nonexistent/dir/``) is refused naming the first missing folder.

Example::

    from launchtrace.cli._output import make_parent
    path = make_parent("--out", "runs/today/spans.jsonl")  # runs/today/ now exists
"""

from __future__ import annotations

import argparse
import os

from launchtrace.errors import UserError
from launchtrace.sources.sniff import span_file_kind

__all__ = ["TRACE_WRITERS", "guard_output", "looks_like_spans", "make_parent", "span_file_kind"]

TRACE_WRITERS = frozenset({"run", "demo", "collect", "pull"})
"""Commands whose ``--out`` is a span file (appended to or emptied first)."""

_INPUT_ATTRIBUTES = ("traces", "against", "inputs", "script", "baseline", "source", "source_spec", "kind")
"""The argument names under which commands take files they read."""

_HEAD_BYTES = 4096


def make_parent(option: str, path: str) -> str:
    """Create ``path``'s folder when only its last level is missing; returns ``path`` made absolute.

    A folder further up that is missing, or one that cannot be made (a file in the way, no permission), is a
    :class:`UserError` naming ``option``."""
    absolute = os.path.abspath(path)
    folder = os.path.dirname(absolute)
    if os.path.isdir(folder):
        return absolute
    above = os.path.dirname(folder)
    if not os.path.isdir(above):
        missing = above
        while not os.path.isdir(os.path.dirname(missing)):
            missing = os.path.dirname(missing)
        raise UserError(f"{option} {path}: folder {missing} does not exist (only the last level is created)")
    try:
        os.mkdir(folder)
    except FileExistsError:
        if not os.path.isdir(folder):
            raise UserError(f"{option} {path}: {folder} is a file, not a folder") from None
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create folder {folder}: {exc.strerror or exc}") from None
    return absolute


def looks_like_spans(path: str) -> bool:
    """Whether a span writer may empty or append to the existing file ``path`` (spans, or nothing)."""
    return span_file_kind(path) is not None


def _inputs(args: argparse.Namespace) -> list[str]:
    found: list[str] = []
    for name in _INPUT_ATTRIBUTES:
        value = getattr(args, name, None)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, str))
    return found


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def guard_output(command: str, args: argparse.Namespace) -> None:
    """Refuse, before anything is read or written, an ``--out`` that would destroy the user's data."""
    out = getattr(args, "out", None)
    if not isinstance(out, str) or out in ("", "-") or command == "graph":  # graph's --out is a folder
        return
    for given in _inputs(args):
        if given not in ("", "-") and os.path.lexists(given) and _same_file(out, given):
            raise UserError(f"--out {out} is also an input ({given}): refusing to overwrite it; pick another file")
    if not os.path.lexists(out):
        return
    if os.path.isdir(out):
        raise UserError(f"--out {out} is a folder; give a file name")
    if not os.path.isfile(out):
        return  # /dev/null, a FIFO: written as asked
    kind = span_file_kind(out)
    if command in TRACE_WRITERS:
        if kind is None:
            action = "append to" if command == "collect" else "empty"
            raise UserError(
                f"--out {out} exists and is not a span file: refusing to {action} it; pick another file or remove it"
            )
        return
    if kind in ("gzip", "json") and (kind == "gzip" or _holds_otlp(out)):
        raise UserError(f"--out {out} holds spans: refusing to overwrite a trace file with the {command} output")


def _holds_otlp(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES)
    return b'"resourceSpans"' in head or b'"resource_spans"' in head
