"""Running Graphviz's ``dot`` on DOT text, when it is installed.

Example::

    from launchtrace.render.graphviz import dot_available, run_dot
    if dot_available():
        svg = run_dot(text, "svg")
"""

from __future__ import annotations

import shutil
import subprocess

__all__ = ["GraphvizError", "dot_available", "run_dot"]


class GraphvizError(RuntimeError):
    """``dot`` rejected the input or failed; the message carries its first line of stderr."""


def dot_available() -> bool:
    """Whether a ``dot`` executable is on ``PATH``."""
    return shutil.which("dot") is not None


def run_dot(text: str, fmt: str, timeout: float = 120.0) -> bytes:
    """``dot -T<fmt>`` of ``text`` as bytes; :class:`GraphvizError` when ``dot`` fails or is missing."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizError("Graphviz 'dot' is not installed")
    try:
        proc = subprocess.run(
            [exe, f"-T{fmt}"], input=text.encode("utf-8"), capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise GraphvizError(f"dot -T{fmt} took longer than {timeout:.0f} s") from exc
    if proc.returncode != 0:
        first = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[0]
        raise GraphvizError(f"dot -T{fmt} failed (exit {proc.returncode}): {first}")
    return proc.stdout
