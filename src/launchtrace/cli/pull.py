"""``launchtrace pull``: bring spans back from a file, Jaeger or Tempo and write them as OTLP JSON Lines.

Every later command reads one format, so whatever the source (OTLP JSON Lines or document, protobuf, gzip,
Jaeger api_v3 or classic JSON, Tempo JSON or protobuf), the output is OTLP JSON Lines, one trace per line.
Problems in the input are listed on stderr with where they are (file:line, URL, trace / span id); the valid
rest is still written, and the exit code is 2 when anything had to be skipped.

Example::

    launchtrace pull tempo+http://tempo:3200 --query '{ resource.service.name = "sim" }' \\
        --since 1h --limit 50 --header X-Scope-OrgID=team-a --out sim.jsonl
    launchtrace pull 'jaeger+http://127.0.0.1:16686?service=sim&since=1h' --out sim.jsonl

A source is named as in every reading command (docs/sources.md); the earlier ``--from jaeger URL`` still works,
with a warning.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from launchtrace.cli._output import make_parent
from launchtrace.cli._query import BASIC_AUTH_ENV, TOKEN_ENV, add_query_arguments
from launchtrace.cli._sources import limit_note
from launchtrace.errors import UserError
from launchtrace.otlp.problems import Severity
from launchtrace.sources.report import ReadResult, plural

HELP = "pull spans from an OTLP file, Jaeger or Tempo and write them as OTLP JSON Lines"

SPANS_PER_LINE = 2000
SHOWN_PROBLEMS = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        nargs="?",
        help="a file, a folder, or jaeger+URL / tempo+URL (jaeger+http://127.0.0.1:16686?service=sim&since=1h)",
    )
    parser.add_argument(
        "--from", dest="kind", metavar="SOURCE", help="the source, as an option (the earlier '--from KIND URL' warns)"
    )
    parser.add_argument("--out", required=True, help="OTLP JSON Lines file to write ('-' for stdout)")
    add_query_arguments(parser)
    parser.add_argument("--strict", action="store_true", help="stop at the first problem (exit 2)")
    parser.add_argument("--quiet", action="store_true", help="no progress, only the summary")


def _seconds(value: float, option: str) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"{option} {value}: expected a positive, finite number of seconds")
    return value


def _pairs(values: list[str], option: str) -> tuple[tuple[str, str], ...]:
    out = []
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{option} {v!r}: expected KEY=VALUE")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def _progress(quiet: bool) -> Callable[[int, int], None] | None:
    if quiet:
        return None
    tty = sys.stderr.isatty()

    def report(done: int, total: int) -> None:
        if total < 2:
            return
        if tty:
            end = "\n" if done == total else ""
            print(f"\rfetched {done}/{total} traces", end=end, file=sys.stderr, flush=True)
        elif done == total or done % max(1, total // 10) == 0:
            print(f"fetched {done}/{total} traces", file=sys.stderr, flush=True)

    return report


def _client(args: argparse.Namespace):
    from launchtrace.sources.http import HttpClient, HttpOptions, parse_size

    basic = args.basic_auth or os.environ.get(BASIC_AUTH_ENV)
    auth = None
    if basic:
        user, sep, password = basic.partition(":")
        if not sep:
            raise UserError("--basic-auth: expected USER:PASSWORD")
        auth = (user, password)
    options = HttpOptions(
        args.source,
        token=args.token or os.environ.get(TOKEN_ENV) or None,
        basic_auth=auth,
        headers=_pairs(args.header, "--header"),
        verify=not args.insecure,
        ca_file=args.ca_file,
        timeout=_seconds(args.timeout, "--timeout"),
        retries=args.retries,
        max_answer_bytes=parse_size(args.max_answer_bytes, "--max-answer-bytes"),
    )
    return HttpClient(options)


def _search_query(args: argparse.Namespace):
    from launchtrace.sources.query import SearchQuery, parse_time

    if args.limit < 1:
        raise UserError(f"--limit must be at least 1, got {args.limit}")
    start = parse_time(args.since) if args.since else None
    end = parse_time(args.until) if args.until else None
    return SearchQuery(
        service=args.service,
        operation=args.operation,
        traceql=args.query,
        attributes=_pairs(args.attribute, "--attribute"),
        start_ns=start,
        end_ns=end,
        limit=args.limit,
    )


def _pull_file(args: argparse.Namespace) -> ReadResult:
    from launchtrace.sources.files import read_spans
    from launchtrace.sources.query import parse_trace_id

    if args.service or args.operation or args.query or args.attribute or args.since or args.until:
        raise UserError("--service/--operation/--query/--attribute/--since/--until are for jaeger and tempo")
    if args.api or args.protobuf:
        raise UserError("--api and --protobuf are for jaeger and tempo")
    result = read_spans(args.source, strict=args.strict)
    if args.trace_id:
        wanted = {parse_trace_id(t) for t in args.trace_id}
        kept = [s for s in result.spans if s.trace_id in wanted]
        result = dataclasses.replace(result, spans=kept)
    return result


def _pull_jaeger(args: argparse.Namespace) -> ReadResult:
    from launchtrace.sources.jaeger import JaegerSource

    if args.query:
        raise UserError("--query is TraceQL, for tempo; for jaeger use --service/--operation/--attribute")
    if args.protobuf:
        raise UserError("--protobuf is for tempo (its v1 API)")
    source = JaegerSource(_client(args), api=args.api or "v3")
    if args.trace_id:
        return source.traces(args.trace_id, strict=args.strict, progress=_progress(args.quiet))
    return source.search(_search_query(args), strict=args.strict)


def _pull_tempo(args: argparse.Namespace) -> ReadResult:
    from launchtrace.sources.tempo import TempoSource

    source = TempoSource(_client(args), api=args.api or ("v1" if args.protobuf else "v2"), protobuf=args.protobuf)
    if args.trace_id:
        return source.traces(args.trace_id, strict=args.strict, progress=_progress(args.quiet))
    return source.search(_search_query(args), strict=args.strict, progress=_progress(args.quiet))


PULLERS: dict[str, Callable[[argparse.Namespace], ReadResult]] = {
    "file": _pull_file,
    "jaeger": _pull_jaeger,
    "tempo": _pull_tempo,
}


def write_jsonl(result: ReadResult, out: str) -> int:
    """Write the spans as OTLP JSON Lines, one trace per line (split past ``SPANS_PER_LINE``); lines written.

    The file is written beside its target and renamed into place, so a failure leaves the old file intact.
    """
    from launchtrace.otlp.json_codec import encode_line  # here: baseline build and alert share pull's options only

    lines = []
    for spans in result.traces().values():
        for i in range(0, len(spans), SPANS_PER_LINE):
            lines.append(encode_line(spans[i : i + SPANS_PER_LINE]))
    if out == "-":
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return len(lines)
    target = Path(make_parent("--out", out))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
        with os.fdopen(fd, "wb") as raw:
            # a name ending in .gz is written compressed (what `run --out x.jsonl.gz` and `collect` do too)
            f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if out.endswith(".gz") else raw
            with f:
                for line in lines:
                    f.write(line.encode("utf-8"))
                    f.write(b"\n")
        os.replace(tmp, target)
    except OSError as exc:
        raise UserError(f"{out}: cannot write: {exc.strerror or exc}") from None
    return len(lines)


def _summary(result: ReadResult, out: str) -> None:
    traces = len(result.traces())
    fmt = f" ({result.format})" if result.format else ""
    spans = plural(len(result.spans), "span")
    print(f"pulled {spans} in {plural(traces, 'trace')} from {result.source}{fmt} -> {out}", file=sys.stderr)
    if result.errors or result.warnings:
        print(result.summary(), file=sys.stderr)
    for p in result.problems[:SHOWN_PROBLEMS]:
        print(f"  {'error' if p.severity is Severity.ERROR else 'warning'}: {p}", file=sys.stderr)
    hidden = result.errors + result.warnings - min(len(result.problems), SHOWN_PROBLEMS)
    if hidden > 0:
        print(f"  ... and {hidden} more", file=sys.stderr)


def _made_writable(result: ReadResult, strict: bool) -> ReadResult:
    """The spans with what OTLP JSON cannot write as it is changed (nesting cut, see writable), each said."""
    from launchtrace.sources.writable import writable

    spans, notes = writable(result.spans, where=result.source)
    if not notes:
        return result
    if strict:
        raise UserError(str(notes[0]))
    return dataclasses.replace(
        result, spans=spans, problems=result.problems + tuple(notes), warnings=result.warnings + len(notes)
    )


def _named_source(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with ``kind`` and ``source`` set from the source's name (or the earlier ``--from KIND``)."""
    from launchtrace.cli._sources import backend_args, deprecated
    from launchtrace.sources.named import BACKENDS, parse_backend

    if args.kind in ("file", *BACKENDS):  # the earlier spelling: --from KIND SOURCE
        if not args.source:
            raise UserError(f"--from {args.kind}: expected the source after it")
        new = args.source if args.kind == "file" else f"{args.kind}+{args.source}"
        deprecated(f"--from {args.kind} {args.source}", new)
        return args
    if args.kind and args.source:
        raise UserError(f"two sources: --from {args.kind} and {args.source}; name one")
    text = args.kind or args.source
    if not text:
        raise UserError("name a source: a file, a folder, or jaeger+URL / tempo+URL")
    backend = parse_backend(text)
    if backend is None:
        args.kind, args.source = "file", text
        return args
    return backend_args(backend, args)


def _check_found(result: ReadResult, asked: list[str]) -> None:
    """Trace ids were asked for and none came back: one error line (exit 2), not an empty file. Some missing
    among others found are warnings, listed with the rest."""
    if asked and not result.spans:
        more = f" (nor the {len(asked) - 1} other ids asked)" if len(asked) > 1 else ""
        raise UserError(f"{result.source}: trace {asked[0]} not found{more}")


def run(args: argparse.Namespace) -> int:
    args = _named_source(args)
    result = _made_writable(PULLERS[args.kind](args), args.strict)
    _check_found(result, args.trace_id)
    write_jsonl(result, args.out)
    _summary(result, args.out)
    note = limit_note(result, args)
    if note:
        print(note, file=sys.stderr)
    return 2 if result.errors else 0
