"""Shared pieces of the fleet commands (``baseline build``, ``alert``): where traces come from, and progress.

``--from`` takes sources as every reading command names them (docs/sources.md): files and folders
(``--from spans/``), or one backend URL (``--from 'jaeger+http://jaeger:16686?service=sim'``) with the search
options of ``launchtrace pull``; the earlier ``--from jaeger URL`` still works, with a warning.

Example::

    stream = open_stream(args)
    with Progress(stream, quiet=args.quiet):
        for trace in stream: ...
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator

from launchtrace.errors import UserError
from launchtrace.sources.report import ProblemLog
from launchtrace.sources.stream import TraceStream
from launchtrace.spans import SpanData

__all__ = ["Progress", "add_source_arguments", "open_stream", "source_kind"]


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    from launchtrace.cli._query import add_query_arguments

    parser.add_argument(
        "--from",
        dest="source_spec",
        nargs="+",
        required=True,
        metavar="SOURCE",
        help="trace files or folders, or one jaeger+URL / tempo+URL (docs/sources.md)",
    )
    add_query_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress and no speed line on stderr")


def source_kind(args: argparse.Namespace) -> tuple[str, list[str]]:
    """``("file", paths)`` or ``("jaeger" | "tempo", [url])``; a backend URL's options are set on ``args``."""
    from launchtrace.cli._sources import backend_args, old_kind_spelling
    from launchtrace.sources.named import parse_backend

    spec = args.source_spec = old_kind_spelling(list(args.source_spec))
    named = [b for b in map(parse_backend, spec) if b is not None]
    if not named:
        return "file", spec
    if len(spec) != 1:
        raise UserError("--from: one backend URL, or files and folders (not both)")
    vars(args).update(vars(backend_args(named[0], args)))  # the URL's options over the command line's
    return named[0].kind, [named[0].url]


def open_stream(args: argparse.Namespace, *, spill: bool = False) -> TraceStream:
    """The traces ``--from`` names, streamed; ``spill``: a wide trace's records go to a temporary file, for a
    reader that reads its steps and never holds them (``baseline build``, ``alert``: issue 25)."""
    stream = _open_stream(args)
    stream.spill = spill
    return stream


def _open_stream(args: argparse.Namespace) -> TraceStream:
    from launchtrace.cli import pull

    kind, where = source_kind(args)
    if kind == "file":
        if args.service or args.operation or args.query or args.attribute or args.since or args.until:
            raise UserError("--service/--operation/--query/--attribute/--since/--until are for jaeger and tempo")
        return TraceStream.from_paths(where)
    args.source = where[0]
    client = pull._client(args)
    if kind == "tempo":
        from launchtrace.sources.tempo import TempoSource

        tempo = TempoSource(client, api=args.api or ("v1" if args.protobuf else "v2"), protobuf=args.protobuf)

        def tempo_batches(log: ProblemLog) -> Iterator[list[SpanData]]:
            ids = args.trace_id or tempo.search_ids(pull._search_query(args), log)
            for trace_id in ids:
                yield tempo.fetch_trace(trace_id, log)

        return TraceStream.from_span_batches(tempo_batches, where[0])
    from launchtrace.sources.jaeger import JaegerSource

    jaeger = JaegerSource(client, api=args.api or "v3")

    def jaeger_batches(log: ProblemLog) -> Iterator[list[SpanData]]:
        if args.trace_id:
            for trace_id in args.trace_id:
                yield jaeger.fetch_trace(trace_id, log)
            return
        yield jaeger.fetch_search(pull._search_query(args), log)

    return TraceStream.from_span_batches(jaeger_batches, where[0])


class Progress:
    """A progress line on stderr while reading (only on a terminal), and the speed at the end (unless quiet)."""

    def __init__(self, stream: TraceStream, *, quiet: bool = False, verb: str = "read") -> None:
        self.stream = stream
        self.quiet = quiet
        self.verb = verb
        self.tty = sys.stderr.isatty() and not quiet
        self._start = 0.0
        self._shown = 0.0

    def __enter__(self) -> Progress:
        self._start = self._shown = time.perf_counter()
        if self.tty:
            self.stream.on_trace = self._tick
        return self

    def _tick(self, stream: TraceStream) -> None:
        now = time.perf_counter()
        if now - self._shown >= 0.25:
            self._shown = now
            rate = stream.traces / max(now - self._start, 1e-9)
            print(f"\r{stream.traces} traces, {stream.spans} spans ({rate:,.0f} traces/s)", end="", file=sys.stderr)

    def __exit__(self, *exc: object) -> None:
        if self.tty:
            print("\r\033[K", end="", file=sys.stderr)
        if exc[0] is not None:
            return
        s = self.stream
        if not self.quiet:
            seconds = max(time.perf_counter() - self._start, 1e-9)
            print(
                f"{self.verb} {s.traces} traces ({s.spans} spans) in {seconds:.2f} s: "
                f"{s.traces / seconds:,.0f} traces/s, {s.spans / seconds:,.0f} spans/s",
                file=sys.stderr,
            )
        if s.log.errors or s.log.warnings:  # problems in the input are no progress report: said even with --quiet
            print(f"  {problems_line(s)}", file=sys.stderr)
        if s.late_spans:
            print(f"  {s.late_spans} spans arrived after their trace's root and were left out", file=sys.stderr)


def problems_line(stream: TraceStream) -> str:
    """The read's problem counts and the first problem, or ``""`` when there were none."""
    if not (stream.log.errors or stream.log.warnings):
        return ""
    first = stream.log.problems[0] if stream.log.problems else ""
    return f"{stream.log.summary()}; first: {first}"
