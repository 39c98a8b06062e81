"""Is this one JSON value? Said without building it, so a long broken line costs no more than its bytes.

orjson builds its whole document before it can report that a line is broken: a 50 MB line of small numbers
with a stray ``}`` at its end cost 450 MB to be told so. The readers check lines of :data:`CHECK_FROM_BYTES`
or more with :func:`check` first and parse only the valid ones. The compiled check (``_jsoncheck.c``, about
0.15-0.6 GB/s, nothing allocated) is used where built; this module's Python scanner is its reference (the
same verdicts, tested against it and orjson); without the compiled module lines are not checked first.

Example::

    from launchtrace.otlp.jsoncheck import check
    check(b'{"a": [1, 2]}')       # None: valid
    check(b'{"a": [1, 2}')        # (11, "expected ',' or ']'", False)
"""

from __future__ import annotations

import re

from launchtrace import native

__all__ = ["CHECK_FROM_BYTES", "MAX_DEPTH", "check", "check_python", "duplicate_key", "fault_text"]

CHECK_FROM_BYTES = 1 << 20
"""Lines (or bodies) this long or longer are checked before they are parsed."""

MAX_DEPTH = 1024  # orjson's limit

_WS = re.compile(rb"[ \t\r\n]*")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')
_ESCAPE = re.compile(rb'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')


def _string_end(data: bytes, i: int) -> tuple[int, str | None]:
    """(end, None) for the string starting at the quote at ``i``, or (offset, fault)."""
    i += 1
    n = len(data)
    while True:
        i = _PLAIN.match(data, i).end()
        if i >= n:
            return n, "unexpected end of data in a string"
        ch = data[i]
        if ch == 0x22:
            return i + 1, None
        if ch < 0x20:
            return i, "control character in a string"
        m = _ESCAPE.match(data, i)
        if m is None:
            if i + 1 >= n or (data[i + 1 : i + 2] == b"u" and len(data) - i < 6):
                return n, "unexpected end of data in a string"
            return i + 1, "invalid escape in a string"
        if data[i + 1] == 0x75:  # \u: surrogates come in pairs
            v = int(data[i + 2 : i + 6], 16)
            if 0xDC00 <= v <= 0xDFFF:
                return m.end(), "lone trailing surrogate in a \\u escape"
            if 0xD800 <= v <= 0xDBFF:
                m2 = _ESCAPE.match(data, m.end())
                if (
                    m2 is None
                    or data[m.end() + 1] != 0x75
                    or not 0xDC00 <= int(data[m.end() + 2 : m2.end()], 16) <= 0xDFFF
                ):
                    return m.end(), "lone leading surrogate in a \\u escape"
                m = m2
        i = m.end()


def check_python(data: bytes) -> tuple[int, str, bool] | None:
    """The reference of the compiled :func:`check`: ``None`` when valid, else (offset, message, truncated)."""
    n = len(data)

    def fault(at: int, message: str) -> tuple[int, str, bool]:
        return at, message, at >= n

    stack: list[bool] = []  # True: object
    i = _WS.match(data, 0).end()
    expect_key = False
    while True:
        i = _WS.match(data, i).end()
        if i >= n:
            return fault(n, "unexpected end of data")
        if expect_key:
            if data[i] != 0x22:
                return fault(i, "expected a key (a string)")
            i, bad = _string_end(data, i)
            if bad:
                return fault(i, bad)
            i = _WS.match(data, i).end()
            if i >= n:
                return fault(n, "unexpected end of data")
            if data[i] != 0x3A:
                return fault(i, "expected ':'")
            i = _WS.match(data, i + 1).end()
            if i >= n:
                return fault(n, "unexpected end of data")
            expect_key = False
        ch = data[i]
        if ch in (0x7B, 0x5B):  # { [
            if len(stack) == MAX_DEPTH:
                return fault(i, "nested deeper than 1024 levels")
            stack.append(ch == 0x7B)
            i = _WS.match(data, i + 1).end()
            if i >= n:
                return fault(n, "unexpected end of data")
            if data[i] == (0x7D if ch == 0x7B else 0x5D):
                stack.pop()
                i += 1
            elif ch == 0x7B:
                expect_key = True
                continue
            else:
                continue
        elif ch == 0x22:
            i, bad = _string_end(data, i)
            if bad:
                return fault(i, bad)
        elif ch == 0x2D or 0x30 <= ch <= 0x39:
            m = _NUMBER.match(data, i)
            if m is None:
                return fault(min(i + 1, n), "unexpected end of data in a number" if i + 1 >= n else "invalid number")
            i = m.end()
            if i < n and data[i] in b".eE":  # a fraction or exponent without digits
                j = i + 1 + (data[i] in b"eE" and data[i + 1 : i + 2] in (b"+", b"-"))
                return fault(j, "unexpected end of data in a number" if j >= n else "invalid number")
        else:
            for word in (b"true", b"false", b"null"):
                if ch == word[0]:
                    if data[i : i + len(word)] == word:
                        i += len(word)
                        break
                    if word.startswith(data[i:]):
                        return fault(n, "unexpected end of data")
                    return fault(i, "unexpected character")
            else:
                return fault(i, "unexpected character")
        # after a value: close containers, or a comma
        while True:
            if not stack:
                i = _WS.match(data, i).end()
                if i < n:
                    return fault(i, "trailing data after the value")
                return _utf8_fault(data)
            i = _WS.match(data, i).end()
            if i >= n:
                return fault(n, "unexpected end of data")
            is_obj = stack[-1]
            if data[i] == 0x2C:
                i += 1
                expect_key = is_obj
                break
            if data[i] == (0x7D if is_obj else 0x5D):
                stack.pop()
                i += 1
                continue
            return fault(i, "expected ',' or '}'" if is_obj else "expected ',' or ']'")


def _utf8_fault(data: bytes) -> tuple[int, str, bool] | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start, "invalid UTF-8", False
    return None


def check(data: bytes) -> tuple[int, str, bool] | None:
    """``None`` when ``data`` is one JSON value, else (byte offset, what is wrong, whether the data ends early).

    Without the compiled module this says ``None`` (not checked): the Python scanner takes seconds per MB on
    lines of small values, more than the memory it would save is worth; the parse then says what is wrong.
    """
    compiled = native.load("launchtrace.otlp._jsoncheck")
    if compiled is not None:
        return compiled.check(data)
    return None


def duplicate_key(data: bytes) -> tuple[int, str] | None:
    """The first key given twice in one object, ``(byte offset, key)``; ``None`` when none (or not compiled).

    orjson keeps the last of duplicate keys without a word; the readers say so in a warning. Keys are compared
    as written (escapes not undone), each with the 32 before it in its object (bounded time on hostile input).
    """
    compiled = native.load("launchtrace.otlp._jsoncheck")
    if compiled is None:
        return None
    found = compiled.duplicate_key(data)
    if found is None:
        return None
    return found[0], found[1].decode("utf-8", "replace")


def fault_text(fault: tuple[int, str, bool]) -> str:
    """One line for a fault, as the readers report it."""
    offset, message, truncated = fault
    return f"{'truncated line' if truncated else 'not JSON'}: {message} at byte {offset}"
