"""What to pull from a backend: trace ids and a search (service, operation, TraceQL, attributes, window, limit).

Also the parsing of what users type: trace ids in hex (any case, leading zeros optional) or base64, and times
as RFC 3339, unix seconds, or an age such as ``15m`` / ``2h`` / ``1d`` before now.

Example::

    from launchtrace.sources.query import SearchQuery, parse_time, parse_trace_id
    q = SearchQuery(service="sim", start_ns=parse_time("1h"), end_ns=parse_time("now"), limit=50)
    parse_trace_id("ff").hex()   # '000000000000000000000000000000ff'
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time

from launchtrace.errors import UserError
from launchtrace.otlp.ids import IdError, padded_hex_trace_id, trace_id_from_text

__all__ = ["SearchQuery", "parse_time", "parse_trace_id", "rfc3339_nano"]

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_UNIT_NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9}
_HEX = re.compile(r"[0-9A-Fa-f]{1,32}")


@dataclasses.dataclass(frozen=True)
class SearchQuery:
    """A search. Times are unix nanoseconds; ``attributes`` are exact matches on span or resource attributes.

    ``traceql`` is Tempo's query language; when it is empty one is built from the other fields.
    """

    service: str = ""
    operation: str = ""
    traceql: str = ""
    attributes: tuple[tuple[str, str], ...] = ()
    start_ns: int | None = None
    end_ns: int | None = None
    limit: int = 20


def parse_trace_id(text: str) -> bytes:
    """A trace id typed by a user: hex of up to 32 digits (left-padded) or base64; ``UserError`` otherwise."""
    text = text.strip()
    try:
        if _HEX.fullmatch(text):
            return padded_hex_trace_id(text)
        return trace_id_from_text(text)
    except IdError as exc:
        raise UserError(f"bad trace id: {exc}") from None


def parse_time(text: str, *, now_ns: int | None = None) -> int:
    """Unix nanoseconds from ``now``, an age (``90s``, ``15m``, ``2h``, ``1d``, ``1w``: before now), unix
    seconds (``1700000000`` or with a fraction), or RFC 3339 (``2026-11-30T10:00:00Z``, offsets allowed)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    value = text.strip()
    if value == "now":
        return now_ns
    age = _AGE.fullmatch(value)
    if age:
        return now_ns - int(float(age.group(1)) * _UNIT_NS[age.group(2)])
    try:
        return int(float(value) * 10**9) if "." in value else int(value) * 10**9
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"bad time {text!r}: use now, an age like 15m / 2h / 1d, unix seconds, or RFC 3339") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 10**9 + when.microsecond * 1000


def rfc3339_nano(ns: int) -> str:
    """``2026-11-30T10:00:00.123456789Z`` for unix nanoseconds (Jaeger api_v3's time format)."""
    seconds, frac = divmod(ns, 10**9)
    stamp = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{frac:09d}Z"
