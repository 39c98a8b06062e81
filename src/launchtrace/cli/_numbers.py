"""Argument types for numbers: a bad value is one line naming the option, never a traceback or a silent
acceptance (``--top -3``, ``--alpha 2``, ``--min-steps -1``).

:func:`checked` wraps plain ``int`` / ``float`` option types of every command (done once in
:func:`launchtrace.cli.build_parser`): no numeric option of ours takes a negative, NaN or infinite value.

Example::

    parser.add_argument("--alpha", type=probability, default=0.01)
    parser.add_argument("--min-runs", type=at_least(2), default=3)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["at_least", "checked", "fraction", "probability"]


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def checked(kind: type) -> Callable[[str], float]:
    """``kind`` (``int`` or ``float``) refusing negative and non-finite values."""

    def parse(text: str) -> float:
        value = _number(text, kind)
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: must not be negative")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def at_least(low: int) -> Callable[[str], int]:
    """An integer of at least ``low``."""

    def parse(text: str) -> int:
        value = int(_number(text, int))
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at least {low}")
        return value

    parse.__name__ = "int"
    return parse


def probability(text: str) -> float:
    """A number strictly between 0 and 1 (a significance level)."""
    value = float(_number(text, float))
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be between 0 and 1 (exclusive)")
    return value


def fraction(text: str) -> float:
    """A relative change: a finite number >= 0 (``0.05`` = 5 %)."""
    value = float(_number(text, float))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must not be negative")
    return value
