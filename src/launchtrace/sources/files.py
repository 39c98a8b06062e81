"""Span files: OTLP JSON Lines, one JSON document, OTLP protobuf (plain or length-prefixed), gzip of any.

The format is sniffed from the bytes, never from the extension:

- gzip magic ``1f 8b``: decompressed on the fly and sniffed again;
- ``{`` first: JSON. If the first line is a whole JSON value the file is JSON Lines (our sink, the Collector's
  file exporter: one ``TracesData`` per line), read line by line; otherwise one document (OTLP/JSON, a Jaeger
  api_v3 / classic answer, a Tempo answer: see :mod:`launchtrace.sources.documents`);
- ``0a`` first: one protobuf ``TracesData`` (what Tempo answers with ``Accept: application/protobuf``);
- anything else: the Collector's ``format: proto`` form, messages each behind a 4-byte big-endian length.

:class:`SpanFile` streams: it holds one line or message at a time, so memory stays flat on a file of millions
of spans, and reports per-line problems (``file:line``) while reading on. :func:`read_spans` collects all
spans and adds the whole-trace checks of :mod:`launchtrace.sources.structure`.

Example::

    from launchtrace.sources.files import SpanFile, read_spans
    result = read_spans("spans.jsonl.gz")
    print(len(result.spans), result.errors, result.skipped_spans)
    with SpanFile("huge.jsonl") as f:          # streaming
        for span in f:
            ...
"""

from __future__ import annotations

import bisect
import gzip
import io
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from launchtrace._lazy import lazy_module
from launchtrace.errors import UserError
from launchtrace.gcpause import collector_paused
from launchtrace.otlp.json_fast import FastLineDecoder
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.sources.report import ProblemLog, ReadResult
from launchtrace.spans import SpanData

# imported on first use: a file of OTLP JSON Lines, what the fleet commands read, needs none of them
_proto = lazy_module("launchtrace.otlp.proto_decode")  # protobuf files
_documents = lazy_module("launchtrace.sources.documents")  # whole JSON documents, and lines the fast reader refuses
_structure = lazy_module("launchtrace.sources.structure")  # read_file(check=True)
orjson = lazy_module("orjson")  # documents, and lines the compiled reader has no answer for

__all__ = ["MAX_JSON_BYTES", "SpanFile", "read_spans"]

MAX_JSON_BYTES = 64 << 20
"""A line, or a whole-file document, is read only up to this size: orjson builds the whole value before it can
say it is broken (a 100 MiB line of small numbers cost 1.35 GB), so a longer one is refused, named, unread. The
compiled reader is not asked either, so that a file reads the same with and without it (no writer we know
writes such lines: our sink's 512 spans are about 650 KB, the Collector's default batch of 8,192 about 10 MB)."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, for _empty_objects
_GZIP_MAGIC = b"\x1f\x8b"
MAX_EMPTY_OBJECTS = 100_000
"""Empty JSON objects as array elements (``[{},{}``: empty spans, events, scope or resource entries, values) a
line of 1 MiB or more may hold before it is skipped unread, the same with and without the compiled reader (which
counts the same elements and answers no such line). Our sink and the Collector write none: an empty
``"status":{}`` is a field's value, not counted."""
_BOM = b"\xef\xbb\xbf"
_BUFFER_BYTES = 1 << 18
_OTHER_ENCODINGS = (  # byte order marks of text that is not UTF-8, longest first
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)


def _not_utf8(head: bytes) -> str | None:
    """The encoding of text that is UTF-16 or UTF-32 (by its byte order mark, or JSON's ASCII with NULs between)."""
    for bom, name in _OTHER_ENCODINGS:
        if head.startswith(bom):
            return name
    if len(head) >= 8 and head[:1] in (b"{", b"["):
        if head[1:4] == b"\0\0\0" and not any(head[5:8]):
            return "UTF-32LE"
        if not any(head[1:8:2]) and all(head[0:8:2]):
            return "UTF-16LE"
    if len(head) >= 8 and not any(head[0:8:2]) and all(head[1:8:2]) and head[1:2] in (b"{", b"["):
        return "UTF-16BE"  # never a length prefix: that is followed by 0x0a (a TracesData field), not a NUL
    return None


def _refuse_non_trace(name: str, head: bytes) -> None:
    """``UserError`` for a file that is plainly no span file: zeros (``/dev/zero``), UTF-16 or UTF-32 text."""
    if head and not any(head):
        raise UserError(f"{name}: starts with zero bytes (NUL), not spans: not a trace file")
    encoding = _not_utf8(head)
    if encoding is not None:
        raise UserError(
            f"{name}: the file is {encoding[:-2]} text ({encoding}); span files are UTF-8: convert it first "
            f"(iconv -f {encoding} -t UTF-8)"
        )


def _open_sniffed(path: Path) -> tuple[BinaryIO, bool]:
    """The file opened for reading bytes (decompressed when gzip), and whether it was gzip."""
    # a 256 KiB buffer, not the default 8 KiB: lines of 512 spans are read faster, and a fixed MiB would be too
    # much of a small file's streaming peak (measured: docs/sources.md#speed)
    raw = open(path, "rb", buffering=_BUFFER_BYTES)  # noqa: SIM115 (closed by SpanFile.close)
    if raw.peek(2)[:2] == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb"), True
    return raw, False


class SpanFile:
    """The spans of one file, streamed; ``log`` has the problems (``strict=True``: ``UserError`` at the first).

    Iterating yields :class:`SpanData`; :meth:`chunks` yields ``(where, spans)`` per line or message. After
    the iteration, ``format`` says how the file was read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        strict: bool = False,
        id_encoding: str = "auto",
        log: ProblemLog | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = str(path)
        self.id_encoding = id_encoding
        self.log = log if log is not None else ProblemLog(strict=strict)
        self.format = ""
        self._fast = FastLineDecoder(id_encoding)  # common OTLP JSON lines; None sends a line the general way
        try:
            self._stream, self._gzip = _open_sniffed(self.path)
        except OSError as exc:
            raise UserError(f"{self.name}: cannot open: {exc.strerror or exc}") from None

    # -- context manager / cleanup
    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> SpanFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[SpanData]:
        for _, spans in self.chunks():
            yield from spans

    # -- reading
    def chunks(self) -> Iterator[tuple[str, list[SpanData]]]:
        """``(where, spans)`` for each line (JSON Lines), message (protobuf) or the one document."""
        try:
            yield from self._chunks()
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            what = "gzip data" if self._gzip else "file"
            self.log.add(Problem(self.name, f"reading stopped, {what} is damaged: {exc}"), skipped_lines=1)

    def _chunks(self) -> Iterator[tuple[str, list[SpanData]]]:
        raw_head = self._stream.peek(64)[:64] if hasattr(self._stream, "peek") else b""
        _refuse_non_trace(self.name, raw_head)
        head = raw_head.removeprefix(_BOM).lstrip(b" \t\r\n")
        suffix = "+gzip" if self._gzip else ""
        if not head:
            self.format = "empty" + suffix
            self.log.add(Problem(self.name, "file is empty", Severity.WARNING))
            return
        if head[:1] in (b"{", b"["):
            # a protobuf message starts with 0x0a ("\n"), so "\n{" may be protobuf: _json falls back to it
            yield from self._json(suffix, maybe_proto=raw_head[:1] == b"\x0a")
        elif raw_head[:1] == b"\x0a":
            self.format = "otlp-proto" + suffix
            body = self._stream.read(_proto.MAX_MESSAGE_BYTES + 1)
            if len(body) > _proto.MAX_MESSAGE_BYTES:
                self.log.add(
                    Problem(self.name, f"one protobuf message over {_proto.MAX_MESSAGE_BYTES} bytes; not read")
                )
                return
            yield self._decoded(self.name, _proto.decode_traces_bytes(body, where=self.name))
        else:
            self.format = "otlp-proto-delimited" + suffix
            for offset, body in _proto.iter_length_prefixed(self._stream, name=self.name):
                if isinstance(body, Problem):
                    self.log.add(body, skipped_lines=1)
                    return
                where = f"{self.name}:byte {offset}"
                yield self._decoded(where, _proto.decode_traces_bytes(body, where=where))

    def _decode_line(self, line: bytes | memoryview) -> tuple[list[SpanData] | None, int]:
        """The compiled reader's answer for a line (``None``: read it the general way), and, when it has none, the
        number of empty objects the line holds as array elements when past :data:`MAX_EMPTY_OBJECTS` (then the
        line is skipped unread: ``orjson`` would build every one of them, 2.7 GB for 10,000,000 empty spans,
        before the general decoder says they are no spans)."""
        if len(line) > MAX_JSON_BYTES:
            return None, 0
        spans = self._fast.decode(line)
        if spans is not None:
            return spans, 0
        return None, _empty_objects(line)

    def _decoded(self, where: str, result: tuple[list[SpanData], list[Problem]]) -> tuple[str, list[SpanData]]:
        spans, problems = result
        for p in problems:
            self.log.add(p, skipped_lines=0 if spans or p.skipped or p.severity is Severity.WARNING else 1)
        return where, spans

    def _json(self, suffix: str, maybe_proto: bool) -> Iterator[tuple[str, list[SpanData]]]:
        first = self._stream.readline().removeprefix(_BOM)  # a UTF-8 byte order mark says nothing more
        with collector_paused():
            spans, empty = self._decode_line(first)
        if spans is not None:  # an OTLP TracesData line and nothing else: what the general path calls otlp-jsonl
            self.format = "otlp-jsonl" + suffix
            yield f"{self.name}:1", spans
            yield from self._lines(_read_lines(self._stream), 2)
            return
        if empty:  # no objects built for them: the line is skipped, the next lines are read
            self.format = "otlp-jsonl" + suffix
            problem = Problem(f"{self.name}:1", f"{empty} empty objects in one line: not spans, skipped")
            self.log.add(problem, skipped_lines=1)
            yield from self._lines(_read_lines(self._stream), 2)
            return
        first_obj = _loads_or_none(first)
        if first_obj is None:  # not a whole value on line 1: one (pretty-printed) document?
            rest = self._stream.read()
            whole = first + rest if rest else first  # no copy of a file that is one line
            del first, rest
            with collector_paused():
                spans = self._fast.decode(whole) if len(whole) <= MAX_JSON_BYTES else None
            if spans is not None:
                self.format = "otlp-json" + suffix
                yield self.name, spans
                return
            doc = _loads_or_none(whole)
            if doc is None:
                if maybe_proto:
                    spans, problems = _proto.decode_traces_bytes(whole, where=self.name)
                    if not problems:
                        self.format = "otlp-proto" + suffix
                        yield self.name, spans
                        return
                # neither: read it as JSON Lines, so each bad line is named and good lines still count
                self.format = "otlp-jsonl" + suffix
                one_line = whole.find(b"\n", 0, len(whole) - 1) < 0
                yield from self._lines([whole] if one_line else io.BytesIO(whole), 1)
                return
            self.format = _document_format(doc) + suffix
            yield self._decoded(
                self.name, _documents.spans_from_document(doc, where=self.name, id_encoding=self.id_encoding)
            )
            return
        kind = _document_format(first_obj)
        self.format = ("otlp-jsonl" if kind == "otlp-json" else f"{kind}-lines") + suffix
        yield self._decoded(
            f"{self.name}:1",
            _documents.spans_from_document(first_obj, where=f"{self.name}:1", id_encoding=self.id_encoding),
        )
        yield from self._lines(_read_lines(self._stream), 2)

    def _lines(self, stream: Iterable[bytes | memoryview], start: int) -> Iterator[tuple[str, list[SpanData]]]:
        for lineno, line in enumerate(stream, start):
            where = f"{self.name}:{lineno}"
            with collector_paused():
                spans, empty = self._decode_line(line)  # a view of _read_lines' buffer is read in place
                if spans is None:
                    line = bytes(line)
                    if not line or line.isspace():  # as `not line.strip()`, without copying a line of megabytes
                        continue
                    if len(line) > MAX_JSON_BYTES:  # orjson would build objects several times its size first
                        obj, problem = None, Problem(where, _too_long(len(line)))
                    elif empty:  # 10,000,000 empty spans: a cap before any object is built
                        obj, problem = None, Problem(where, f"{empty} empty objects in one line: not spans, skipped")
                    else:
                        try:
                            obj = orjson.loads(line)
                        except orjson.JSONDecodeError as exc:
                            obj, problem = None, Problem(where, _json_error(line, exc))
                        else:
                            result = _documents.spans_from_document(obj, where=where, id_encoding=self.id_encoding)
            if spans is not None:
                yield where, spans
                continue
            if obj is None:
                self.log.add(problem, skipped_lines=1)
                continue
            del obj
            yield self._decoded(where, result)


_READ_BYTES = _BUFFER_BYTES
_KEEP_BYTES = 1 << 24  # a buffer grown past this (by a line of over 8 MiB) goes back to _READ_BYTES after it


def _read_lines(stream: BinaryIO) -> Iterator[memoryview]:
    """The lines of the rest of ``stream`` (each with its ``\n``, the last one without when the file has none),
    read into one buffer of :data:`_READ_BYTES`, doubled while a line does not fit.

    Each line is a view of that buffer, released when the next one is asked for (``bytes(line)`` keeps one):
    the compiled reader reads it in place. ``readline`` on a buffered file copies a long line three times (its
    256 KiB chunks, their join, the result): for lines of megabytes, a third of the reader's time, and copying
    each line out of the buffer once more cost a tenth of ``baseline build``'s reading
    (``benchmarks/bench_baseline.py``).
    """
    buf = bytearray(_READ_BYTES)
    view = memoryview(buf)
    have = 0
    try:
        while True:
            if have == len(buf):  # a line longer than the buffer: grow it
                view.release()
                buf.extend(bytes(len(buf)))
                view = memoryview(buf)
            got = stream.readinto(view[have:])
            if not got:
                if have:
                    line = view[:have]
                    yield line
                    line.release()
                return
            end = have + got
            start = 0
            find = buf.find
            i = find(b"\n", have, end)  # the bytes kept from the last read hold no newline: not searched again
            while i >= 0:
                line = view[start : i + 1]
                yield line
                line.release()  # before the buffer is written again; a caller that kept it gets an error, not data
                start = i + 1
                i = find(b"\n", start, end)
            have = end - start
            if start:
                view[:have] = view[start:end]
            if have < _READ_BYTES and len(buf) > _KEEP_BYTES:  # after a very long line: back to the usual size
                view.release()
                del buf[max(have, _READ_BYTES) :]
                view = memoryview(buf)
    finally:
        view.release()


def _empty_objects(line: bytes | memoryview) -> int:
    """How many empty JSON objects a line of 1 MiB or more holds as array elements (``[{}`` or ``,{}`` outside
    strings, whitespace aside) when that is past :data:`MAX_EMPTY_OBJECTS`, else 0.

    The compiled reader counts the same elements of a line it reads and answers no line past the bound, so this
    rule alone decides, with and without it.
    """
    if len(line) < 1 << 20:
        return 0
    text = bytes(line)
    if text.count(b"}") <= MAX_EMPTY_OBJECTS:  # each one has its "}": most lines stop here
        return 0
    bare = _STRING.sub(b'""', text).translate(None, b" \t\r\n")
    n = bare.count(b",{}") + bare.count(b"[{}")
    return n if n > MAX_EMPTY_OBJECTS else 0


def _too_long(size: int) -> str:
    limit = MAX_JSON_BYTES >> 20
    return f"a JSON value of {size / 2**20:.0f} MiB, over the {limit} MiB that one is read up to; not read"


def _loads_or_none(text: bytes) -> object | None:
    """``text`` parsed, or ``None`` when it is not one JSON value or longer than :data:`MAX_JSON_BYTES`."""
    if len(text) > MAX_JSON_BYTES:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _json_error(line: bytes, exc: orjson.JSONDecodeError) -> str:
    """Why a line is not JSON; a line that stops mid-value (the newline counted out) is called truncated."""
    try:
        orjson.loads(line.rstrip())
    except orjson.JSONDecodeError as bare:
        if str(bare).startswith("unexpected end of data"):
            return f"truncated line: {bare}"
        return f"not JSON: {bare}"
    return f"not JSON: {exc}"  # pragma: no cover (only the trailing whitespace differs)


def _document_format(doc: object) -> str:
    if type(doc) is dict:
        if "result" in doc:
            return "jaeger-apiv3-json"
        if "trace" in doc:
            return "tempo-v2-json"
        if "data" in doc or "processes" in doc:
            return "jaeger-classic-json"
        if "batches" in doc:
            return "tempo-v1-json"
    return "otlp-json"


def read_spans(
    path: str | os.PathLike[str], *, strict: bool = False, check: bool = True, id_encoding: str = "auto"
) -> ReadResult:
    """All spans of ``path`` with the problems found, whole-trace checks included unless ``check=False``.

    Raises :class:`UserError` when the file cannot be opened, and in strict mode at the first problem.
    """
    log = ProblemLog(strict=strict)
    spans: list[SpanData] = []
    starts: list[int] = []  # index of the first span of each chunk
    places: list[str] = []
    with SpanFile(path, id_encoding=id_encoding, log=log) as f:
        for where, chunk in f.chunks():
            if chunk:
                starts.append(len(spans))
                places.append(where)
                spans.extend(chunk)
        fmt = f.format
    if check:

        def where_of(i: int) -> str:
            return places[bisect.bisect_right(starts, i) - 1]

        spans, problems = _structure.check_structure(spans, where_of)
        log.extend(problems)
    return ReadResult.from_log(spans, log, source=str(path), format=fmt)
