"""Trace and span ids from every encoding the backends use, normalised to raw bytes and length-checked.

OTLP/JSON writes ids as hex (any case), Tempo and ``google.protobuf.json_format`` as base64, Jaeger's classic
JSON prints a trace id with a zero high half as 16 hex digits, and Tempo's search strips leading zeros. All of
them end up here as 16-byte trace ids and 8-byte span ids, or as an :class:`IdError` that says what was wrong.

The trap: a 32-character hex string is also valid base64 and decodes to 24 bytes. Hex and base64 forms of a
correct id never have the same length (trace: 32 hex vs 24/22 base64; span: 16 hex vs 12/11 base64), so
``encoding="auto"`` decides by length and alphabet and is never ambiguous; ``encoding="base64"`` (a reader
that knows its producer writes base64) rejects the hex form with an error instead of accepting 24 bytes
silently.

Example::

    from launchtrace.otlp.ids import trace_id_from_text
    trace_id_from_text("W47/95gDgQPSabYzgT/HAA==").hex()   # '5b8efff798038103d269b633813fc700'
    trace_id_from_text("5B8EFFF798038103D269B633813FC700")  # same 16 bytes
"""

from __future__ import annotations

import base64
import binascii
import re

__all__ = [
    "SPAN_ID_BYTES",
    "TRACE_ID_BYTES",
    "IdError",
    "decode_id",
    "padded_hex_trace_id",
    "span_id_from_text",
    "trace_id_from_text",
]

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8

_HEX = re.compile(r"[0-9A-Fa-f]*")
_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2,3})?(?:={0,2})")
_ENCODINGS = ("auto", "hex", "base64")


class IdError(ValueError):
    """An id that cannot be a trace or span id: empty, wrong length, or neither hex nor base64."""


def _what(size: int) -> str:
    return "trace id" if size == TRACE_ID_BYTES else "span id"


def _from_hex(text: str, size: int) -> bytes:
    if len(text) != 2 * size:
        raise IdError(f"{_what(size)} {text!r} has {len(text)} hex digits, expected {2 * size}")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise IdError(f"{_what(size)} {text!r} is not hex") from None


def _from_base64(text: str, size: int) -> bytes:
    try:
        std = text.replace("-", "+").replace("_", "/")  # URL-safe alphabet, as some gateways write it
        raw = base64.b64decode(std + "=" * (-len(std) % 4), validate=True) if _B64.fullmatch(std) else None
    except binascii.Error:
        raw = None
    if raw is None:
        raise IdError(f"{_what(size)} {text!r} is neither hex nor base64")
    if len(raw) != size:
        hint = " (a hex id where base64 was expected?)" if _HEX.fullmatch(text) else ""
        raise IdError(f"{_what(size)} {text!r} read as base64 gives {len(raw)} bytes, expected {size}{hint}")
    return raw


def decode_id(text: str, size: int, encoding: str = "auto") -> bytes:
    """``size`` raw bytes from ``text`` in ``encoding`` (``"auto"``, ``"hex"`` or ``"base64"``).

    Raises :class:`IdError` for an empty id, a wrong length, or text in neither encoding; an all-zero id is
    invalid in OTLP and rejected too.
    """
    if (encoding == "auto" or encoding == "hex") and type(text) is str and len(text) == 2 * size:  # plain hex
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = b""
        if len(raw) == size and any(raw):
            return raw
    if not isinstance(text, str):
        raise IdError(f"{_what(size)} must be a string, got {type(text).__name__} {text!r}")
    if not text:
        raise IdError(f"empty {_what(size)}")
    if encoding == "hex" or (encoding == "auto" and len(text) == 2 * size and _HEX.fullmatch(text)):
        raw = _from_hex(text, size)
    elif encoding in ("base64", "auto"):
        raw = _from_base64(text, size)
    else:
        raise ValueError(f"encoding must be one of {_ENCODINGS}, got {encoding!r}")
    if not any(raw):
        raise IdError(f"{_what(size)} {text!r} is all zeros")
    return raw


def trace_id_from_text(text: str, encoding: str = "auto") -> bytes:
    """A 16-byte trace id from hex or base64 text; see :func:`decode_id`."""
    return decode_id(text, TRACE_ID_BYTES, encoding)


def span_id_from_text(text: str, encoding: str = "auto") -> bytes:
    """An 8-byte span id from hex or base64 text; see :func:`decode_id`."""
    return decode_id(text, SPAN_ID_BYTES, encoding)


def padded_hex_trace_id(text: str) -> bytes:
    """A 16-byte trace id from hex that may have lost its leading zeros.

    Jaeger's classic JSON prints a 64-bit trace id as 16 hex digits and Tempo's search strips leading zeros:
    both are left-padded to 32 digits. Anything longer than 32 digits or not hex is an :class:`IdError`.
    """
    if not isinstance(text, str) or not text:
        raise IdError(f"empty trace id {text!r}" if isinstance(text, str) else f"trace id {text!r} not a string")
    if not _HEX.fullmatch(text):
        raise IdError(f"trace id {text!r} is not hex")
    if len(text) > 2 * TRACE_ID_BYTES:
        raise IdError(f"trace id {text!r} has {len(text)} hex digits, at most {2 * TRACE_ID_BYTES} allowed")
    return decode_id(text.rjust(2 * TRACE_ID_BYTES, "0"), TRACE_ID_BYTES, "hex")
