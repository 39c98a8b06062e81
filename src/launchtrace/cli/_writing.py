"""Output written piece by piece, so a command never holds its whole output in memory.

:func:`write_chunks` writes an iterable of strings to ``--out`` through a temporary file beside it that
replaces the file only when every piece is written (a failed run leaves the earlier file as it was), or to
stdout for ``-``.

Example::

    write_chunks(("line %d\\n" % i for i in range(10**6)), "out.txt")
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from launchtrace.errors import UserError

__all__ = ["write_chunks"]


def write_chunks(chunks: Iterable[str], out: str | None) -> None:
    """Each string of ``chunks`` in turn to the file ``out`` (UTF-8), or to stdout when ``out`` is None or ``-``."""
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
