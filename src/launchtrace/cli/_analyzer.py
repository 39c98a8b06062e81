"""Shared pieces of the analyzer commands: input arguments, output files (written whole or piece by piece), safe
names.

Example::

    from launchtrace.cli._analyzer import safe_child
    path = safe_child(out_dir, "trace-" + trace_id + ".dot")
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from launchtrace.cli._numbers import at_least
from launchtrace.errors import UserError
from launchtrace.sources.named import parse_backend

__all__ = [
    "LazyList",
    "add_bounded_input",
    "add_format",
    "add_selection",
    "chose_steps",
    "loads_whole",
    "safe_child",
    "safe_name",
    "selected_views",
    "write_chunks",
    "write_json",
    "write_json_streamed",
    "write_text",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str, limit: int = 80) -> str:
    """A file name made from trace content: only ``[A-Za-z0-9._-]``, no leading dot, never empty."""
    name = _UNSAFE.sub("_", text).strip("._")[:limit]
    return name or "trace"


def safe_child(folder: Path, name: str) -> Path:
    """``folder / safe_name(name)``, checked to stay inside ``folder``."""
    path = (folder / safe_name(name)).resolve()
    if path.parent != folder.resolve():
        raise UserError(f"{name!r}: refusing a file name outside {folder}")
    return path


def add_format(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("--format", choices=choices, default=choices[0], help="output format (default: %(default)s)")


def add_selection(parser: argparse.ArgumentParser) -> None:
    """``--scope``, ``--trace`` and ``--occurrence``: what to look at (see :mod:`launchtrace.analysis.runs`)."""
    group = parser.add_argument_group("choose what to look at (default: the whole run, every thread)")
    group.add_argument("--scope", metavar="NAME", help="occurrences of this scope (e.g. step)")
    group.add_argument("--trace", metavar="ID", help="only this trace (its id, or a unique prefix)")
    group.add_argument(
        "--occurrence",
        metavar="N|median|slowest",
        type=_occurrence,
        help="one occurrence: its number, the median-duration one, or the slowest",
    )


def _occurrence(text: str) -> str | int:
    if text in ("median", "slowest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, 'median' or 'slowest', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def selected_views(traces: list, args: argparse.Namespace) -> list:
    """The :class:`~launchtrace.analysis.runs.View` s ``args`` (from :func:`add_selection`) choose."""
    from launchtrace.analysis.runs import views

    return views(traces, scope=args.scope, trace=args.trace, occurrence=args.occurrence)


def chose_steps(args: argparse.Namespace) -> bool:
    """Whether ``--scope``, ``--trace`` or ``--occurrence`` (:func:`add_selection`) chose anything."""
    return args.scope is not None or args.trace is not None or args.occurrence is not None


def add_bounded_input(parser: argparse.ArgumentParser, limit: str, default: int, kept: str) -> None:
    """The input of a command that reads files one trace at a time, keeps the first ``limit`` (at least 1,
    ``default`` unless given) of something in full and counts the rest: the trace files or folders, the limit,
    and :func:`add_selection` (with which the input is loaded whole: :func:`loads_whole`). ``kept`` says what
    the limit keeps."""
    parser.add_argument("traces", nargs="+", help="trace files or folders")
    parser.add_argument(limit, type=at_least(1), default=default, metavar="N", help=f"{kept} (default: %(default)s)")
    add_selection(parser)


def loads_whole(args: argparse.Namespace) -> bool:
    """Whether a command of :func:`add_bounded_input` loads its input whole instead of one trace at a time:
    steps were chosen (they are picked from the whole run), or an input names a backend (its answer arrives
    whole)."""
    return chose_steps(args) or any(parse_backend(t) is not None for t in args.traces)


def write_chunks(chunks: Iterable[str], out: str | None) -> None:
    """Each string of ``chunks`` in turn to the file ``out`` (UTF-8), or to stdout when ``out`` is None or ``-``,
    so a command never holds its whole output. A file is written beside ``out`` and replaces it only when every
    piece is written: a failed run leaves the earlier file as it was."""
    if out in (None, "-"):
        for chunk in chunks:
            sys.stdout.write(chunk)
        return
    from launchtrace.cli._output import make_parent  # only the last missing folder level, as every command

    path = Path(make_parent("--out", out))
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(text: str, out: str | None) -> None:
    """``text`` to the file ``out``, or to stdout when ``out`` is None or ``-``."""
    write_chunks((text,), out)


def write_json(data: Any, out: str | None) -> None:
    write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n", out)


class LazyList(list):
    """A JSON array whose items are made while it is written (:func:`write_json_streamed`), so a list of a
    million rows is never built: ``make()`` gives an iterator of the items, ``size`` how many there are."""

    def __init__(self, make: Callable[[], Iterable[Any]], size: int) -> None:
        super().__init__()
        self._make = make
        self._size = size

    def __iter__(self) -> Iterator[Any]:
        return iter(self._make())

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0


def write_json_streamed(data: Any, out: str | None) -> None:
    """:func:`write_json`'s bytes, written piece by piece as the encoder makes them (with ``indent`` the
    encoder is the pure-Python one, which walks :class:`LazyList` s as it goes) instead of one string."""
    chunks = json.JSONEncoder(indent=1, ensure_ascii=False, allow_nan=False).iterencode(data)
    write_chunks(itertools.chain(chunks, ("\n",)), out)
