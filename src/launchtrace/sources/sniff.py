"""What a file holds, judged from its first bytes: spans (in one of the forms launchtrace reads) or something else.

Used where a wrong guess costs the user: a folder given to an analyzer (``summary runs/``) skips, and names, the
files that are plainly no traces (a ``package.json``, notes, a picture) instead of failing on the first one; and
a command that writes spans refuses to empty a file that holds something else (``launchtrace run --out
script.py``).

Example::

    from launchtrace.sources.sniff import span_file_kind, what_it_looks_like
    span_file_kind("spans.jsonl.gz")    # "gzip"
    what_it_looks_like("notes.txt")     # "text starting 'hello world'"
"""

from __future__ import annotations

import zlib

__all__ = ["span_file_kind", "what_it_looks_like"]

HEAD_BYTES = 4096
_GZIP_MAGIC = b"\x1f\x8b"
_SPAN_KEYS = (b'"resourceSpans"', b'"resource_spans"', b'"traceId"', b'"trace_id"', b'"data"', b'"batches"')
_MAGICS = (
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "a program (ELF)"),
    (b"SQLite format 3", "an SQLite database"),
    (b"\xff\xd8\xff", "a JPEG image"),
)


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return b""
    if head.startswith(_GZIP_MAGIC):
        try:
            return _GZIP_MAGIC + zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, HEAD_BYTES)
        except zlib.error:
            return head
    return head


def span_file_kind(path: str) -> str | None:
    """``"empty"``, ``"gzip"`` (compressed spans), ``"json"`` (OTLP, Jaeger or Tempo JSON), ``"protobuf"``, or
    ``None`` for anything else. A gzip file counts as spans when what it holds would."""
    head = _head(path)
    if head.startswith(_GZIP_MAGIC):
        inner = head[2:]
        if not inner:
            return "gzip"  # cut before its first bytes: let the reader say what is wrong
        return "gzip" if _kind(inner) not in (None, "empty") else None
    return _kind(head)


def _kind(head: bytes) -> str | None:
    text = head.lstrip()
    if not text:
        return "empty"
    if text[:1] in (b"{", b"["):
        return "json" if any(key in text for key in _SPAN_KEYS) else None
    # OTLP protobuf: TracesData starts with field 1 (0x0a), or a 4-byte big-endian length (under 256 MiB: the
    # readers' limit) then 0x0a
    if head[:1] == b"\x0a" or (len(head) > 4 and head[0] < 0x10 and head[4:5] == b"\x0a"):
        return "protobuf"
    return None


def what_it_looks_like(path: str) -> str:
    """A few words on what a file that holds no spans holds instead."""
    head = _head(path)
    inner = head[2:] if head.startswith(_GZIP_MAGIC) else head
    prefix = "gzip of " if head.startswith(_GZIP_MAGIC) else ""
    for magic, name in _MAGICS:
        if inner.startswith(magic):
            return prefix + name
    text = inner.lstrip()
    if text[:1] in (b"{", b"["):
        return prefix + "JSON without spans: no resourceSpans, traceId, data or batches key near its start"
    try:
        sample = inner[:40].decode("utf-8")
    except UnicodeDecodeError:
        return prefix + f"binary data starting {inner[:8].hex(' ')}"
    sample = sample.splitlines()[0] if sample.strip() else sample
    return prefix + f"text starting {sample!r}"
