"""The ```console blocks of a Markdown page: commands and the output the page shows for them, compared by shape.

The convention (docs/guide/index.md states it for writers):

- Only fenced blocks tagged ``console`` are run. A line starting with ``$ `` is a command (a trailing ``\\``
  continues it on the next line); the lines after it, up to the next ``$ `` line or the block's end, are the
  output the page shows for it. Other blocks (``text``, ``bash``, ``python``) are never run.
- A command ends with ``# exit code N`` when it is meant to exit with N; otherwise it must exit 0.
- An output line ``...`` says the page shows only part of the output. Without one, the page shows all of it.
- Output is compared by shape, not value: runs of spaces are one space, and numbers, hex ids and paths (a word
  with a ``/`` or a file extension) are placeholders. With ``...`` every shown line must be in the real output;
  without, the shown lines and the real ones are the same multiset. Order is not compared (tables sorted by
  time reorder between runs).
- Only standard output is compared; Warp's own banner and module-load lines are not part of it.

Example::

    for cmd in commands(Path("README.md")):
        problems = shape_mismatch(cmd.expected, run(cmd.command))
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ELLIPSIS = "..."
_EXIT = re.compile(r"#\s*exit code (\d+)")
_FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass
class Command:
    page: Path
    line: int  # 1-based line of the ``$`` in the page
    command: str
    expected: list[str]

    @property
    def exit_code(self) -> int:
        """The exit code the page says the command ends with (``# exit code N``), else 0."""
        m = _EXIT.search(self.command)
        return int(m[1]) if m else 0


def commands(page: Path) -> list[Command]:
    """Every command of ``page``'s ```console blocks, in page order."""
    out: list[Command] = []
    lines = page.read_text().splitlines()
    in_block = False
    current: Command | None = None
    continuing = False
    for number, line in enumerate(lines, 1):
        fence = _FENCE.match(line)
        if fence:
            if in_block:
                in_block, current = False, None
            elif fence[1] == "console":
                in_block = True
            continue
        if not in_block:
            continue
        if continuing and current is not None:
            current.command += "\n" + line
            continuing = line.endswith("\\")
            continue
        if line.startswith("$ "):
            text = line[2:]
            current = Command(page, number, text, [])
            out.append(current)
            continuing = text.endswith("\\")
        elif current is not None:
            current.expected.append(line)
    return out


_WARP_BANNER = re.compile(r"^Warp \d+\.\d+\.\d+ initialized:")
_WARP_LINE = re.compile(r"^Module \S+ \w+ load on device '[^']*' took [\d.]+ ms")


def without_warp_messages(lines: list[str]) -> list[str]:
    """``lines`` without Warp's start-up banner (and its indented lines) and its module-load lines."""
    out, in_banner = [], False
    for line in lines:
        if _WARP_BANNER.match(line):
            in_banner = True
            continue
        if in_banner and line.startswith(" "):
            continue
        in_banner = False
        if _WARP_LINE.match(line):
            continue
        out.append(line)
    return out


_EXTENSIONS = r"(?:jsonl|json|pb|svg|png|dot|html|py|yaml|yml|md|txt)"
_PATH = re.compile(rf"(?:[\w.\-~*]*/[\w.\-/~*]*[\w*]|[\w.\-*]+\.{_EXTENSIONS}\b)(?::\d+)?")
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?\*?")
"""A number, and the ``*`` that may mark it (``summary``'s "from fold summaries" mark on a p50 or max: whether a
folded maximum passes the measured one depends on the run's timing, like the number itself)."""
_SPACES = re.compile(r"\s+")


def shape(line: str) -> str:
    """A line with its values replaced: paths -> ``<path>``, hex ids -> ``<hex>``, numbers -> ``<n>``."""
    line = _PATH.sub("<path>", line)
    line = _HEX.sub("<hex>", line)
    line = _NUMBER.sub("<n>", line)
    return _SPACES.sub(" ", line).strip()


def shape_mismatch(expected: list[str], actual: list[str]) -> list[str]:
    """What differs between the page's output and the real one, by shape (empty: they agree)."""
    partial = any(line.strip() == ELLIPSIS for line in expected)
    want = Counter(shape(x) for x in expected if x.strip() != ELLIPSIS and x.strip())
    have = Counter(shape(x) for x in without_warp_messages(actual) if x.strip())
    missing = want - have
    problems = [f"shown but not printed: {line!r}" for line in missing.elements()]
    if not partial:
        problems += [f"printed but not shown (add the line or a '...'): {line!r}" for line in (have - want).elements()]
    return problems
