"""Shared pieces of the analyzer commands: input arguments, output files, safe names.

Example::

    from launchtrace.cli._analyzer import safe_child
    path = safe_child(out_dir, "trace-" + trace_id + ".dot")
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from launchtrace.errors import UserError

__all__ = ["add_format", "safe_child", "safe_name", "write_json", "write_text"]

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


def write_text(text: str, out: str | None) -> None:
    """``text`` to the file ``out``, or to stdout when ``out`` is None or ``-``."""
    if out in (None, "-"):
        sys.stdout.write(text)
        return
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from exc


def write_json(data: Any, out: str | None) -> None:
    write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n", out)
