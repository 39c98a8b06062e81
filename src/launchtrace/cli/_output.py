"""The one rule every command follows for the files it writes: a missing parent folder is created.

Example::

    from launchtrace.cli._output import make_parent
    path = make_parent("--out", "runs/today/spans.jsonl")  # runs/today/ now exists
"""

from __future__ import annotations

import os

from launchtrace.errors import UserError

__all__ = ["make_parent"]


def make_parent(option: str, path: str) -> str:
    """Create ``path``'s folder when missing; returns ``path`` made absolute. A folder that cannot be made (a
    file in the way, no permission) is a :class:`UserError` naming ``option``."""
    absolute = os.path.abspath(path)
    folder = os.path.dirname(absolute)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create folder {folder}: {exc.strerror or exc}") from None
    return absolute
