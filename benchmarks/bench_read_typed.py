"""Would a typed ``msgspec`` decoder read OTLP JSON Lines fast enough to replace the compiled reader?

Issue 17 asked for the least hand-written code that reads files at >= 200,000 spans/s. This decodes
``bench_read.py``'s file (launch spans, 15 attributes, 512 per line) with ``msgspec.json.Decoder(type=...)``
into ``Struct`` types mirroring OTLP JSON, attributes included (``KeyValue`` / ``AnyValue`` structs), then
builds :class:`~launchtrace.spans.SpanData` from them; it checks the spans equal the reader's. Alternating in
the same run: the reader as installed (the compiled ``_jsonread`` where built), the reading without a compiler
(``orjson.loads`` and the general decoder, ``json_codec.decode_traces_data``: issue 26 removed the hand-written
Python fast path that stood there) and the typed decode alone, without building spans (the floor of any
reader built that way). Prints spans/s of each, median of ``--pairs``, and the ratios to the installed reader.

The decoder here handles only what that file holds (no events, links or status): it is a measurement of the
approach, not a reader.

    python benchmarks/bench_read_typed.py [--spans 50000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson
from msgspec import UNSET, UnsetType

sys.path.insert(0, str(Path(__file__).parent))

from bench_read import make_spans, write_file
from launchtrace.otlp.json_codec import _new_span, decode_traces_data
from launchtrace.otlp.json_fast import FastLineDecoder


class AnyValue(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    stringValue: str | UnsetType = UNSET
    intValue: int | str | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    doubleValue: float | str | UnsetType = UNSET
    arrayValue: ArrayValue | UnsetType = UNSET
    bytesValue: str | UnsetType = UNSET


class ArrayValue(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    values: list[AnyValue] = []


class KeyValue(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    key: str
    value: AnyValue


class Span(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    traceId: str = ""
    spanId: str = ""
    traceState: str = ""
    parentSpanId: str = ""
    flags: int = 0
    name: str = ""
    kind: int = 0
    startTimeUnixNano: int | str = 0
    endTimeUnixNano: int | str = 0
    attributes: list[KeyValue] = []


class Scope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    name: str = ""
    version: str = ""
    attributes: list[KeyValue] = []


class ScopeSpans(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    scope: Scope = msgspec.field(default_factory=Scope)
    spans: list[Span] = []
    schemaUrl: str = ""


class Resource(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    attributes: list[KeyValue] = []


class ResourceSpans(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    resource: Resource = msgspec.field(default_factory=Resource)
    scopeSpans: list[ScopeSpans] = []
    schemaUrl: str = ""


class TracesData(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    resourceSpans: list[ResourceSpans]


_decode = msgspec.json.Decoder(TracesData).decode


def _value(v: AnyValue) -> object:
    if v.stringValue is not UNSET:
        return v.stringValue
    if v.intValue is not UNSET:
        return int(v.intValue)
    if v.boolValue is not UNSET:
        return v.boolValue
    if v.doubleValue is not UNSET:
        return float(v.doubleValue)
    if v.arrayValue is not UNSET:
        return tuple(_value(x) for x in v.arrayValue.values)
    raise ValueError("a value kind this measurement does not handle")


def _attrs(kvs: list[KeyValue]) -> tuple:
    return tuple([(kv.key, _value(kv.value)) for kv in kvs])


def typed_spans(line: bytes) -> list:
    """The spans of one line through the typed decoder."""
    out = []
    fromhex = bytes.fromhex
    for rs in _decode(line).resourceSpans:
        resource = _attrs(rs.resource.attributes)
        for ss in rs.scopeSpans:
            scope = ss.scope
            scope_attrs = _attrs(scope.attributes)
            for d in ss.spans:
                parent = fromhex(d.parentSpanId) if d.parentSpanId else None
                out.append(
                    _new_span(
                        fromhex(d.traceId), fromhex(d.spanId), parent, d.name, int(d.startTimeUnixNano),
                        int(d.endTimeUnixNano), _attrs(d.attributes), d.kind, 0, "", (), (), d.traceState, d.flags,
                        0, 0, 0, resource, rs.schemaUrl, scope.name, scope.version, scope_attrs, ss.schemaUrl,
                    )
                )  # fmt: skip
    return out


def _rate(decode: Callable[[bytes], object], lines: list[bytes], spans: int) -> float:
    gc.disable()  # as the reader itself runs (SpanFile pauses the collector)
    try:
        t0 = time.perf_counter()
        for line in lines:
            decode(line)
        return spans / (time.perf_counter() - t0)
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    path = write_file(make_spans(args.spans))
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    finally:
        os.unlink(path)
    installed = FastLineDecoder()

    def general(line: bytes) -> list:
        return decode_traces_data(orjson.loads(line), where="")[0]

    for line in lines:
        assert typed_spans(line) == general(line), "the typed decoder reads other spans"
        assert installed.compiled is None or installed.decode(line) == general(line)
    sides = {
        "installed reader": installed.decode if installed.compiled is not None else general,
        "no compiler: orjson + general": general,
        "typed msgspec -> SpanData": typed_spans,
        "typed msgspec decode only": _decode,
    }
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.pairs):
        for name, decode in sides.items():
            rates[name].append(_rate(decode, lines, args.spans))
    print(f"{args.spans} launch spans, {len(lines)} lines; load average {os.getloadavg()[0]:.1f}")
    print(f"compiled reader built: {installed.compiled is not None}")
    base = statistics.median(rates["installed reader"])
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:28s} median {median:10,.0f} spans/s (min {min(values):,.0f}, max {max(values):,.0f})"
              f"  {median / base:5.2f}x the installed reader")  # fmt: skip


if __name__ == "__main__":
    main()
