"""The baseline's fast path (:mod:`launchtrace.analysis.fleet.fast`) gives the very baseline the straightforward
path gives (every trace rebuilt into records), on real exported files of real Warp processes on the CPU
(``tests/fleet_app.py``), folded and unfolded, and on steps altered where only the signature can tell them apart.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.analysis.fleet.baseline import BaselineBuilder
from launchtrace.baselines import read_baseline
from launchtrace.sources.files import SpanFile
from launchtrace.sources.stream import TraceStream
from launchtrace.spans import SpanData

APP = Path(__file__).with_name("fleet_app.py")
GROUP_BY = ("service.version", "host.name")
RUNS = (("clean", "1.0", "h1"), ("clean", "1.0", "h2"), ("dim", "1.1", "h3"), ("alloc", "1.3", "h5"))


@pytest.fixture(scope="module", params=["unfolded", "folded"])
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Path]]:
    folder = tmp_path_factory.mktemp(request.param)
    paths = []
    for variant, version, host in RUNS:
        path = folder / f"{version}-{host}.jsonl"
        env = {**os.environ, "OTEL_SERVICE_NAME": "fleet-sim", "FLEET_SUBSTEPS": "6"}
        env["LAUNCHTRACE_FOLD"] = "off" if request.param == "unfolded" else "always"
        env["OTEL_RESOURCE_ATTRIBUTES"] = f"service.version={version},host.name={host}"
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        subprocess.run([sys.executable, str(APP), variant, "8", str(path)], env=env, check=True, timeout=300)
        paths.append(path)
    return request.param, paths


def build(stream: TraceStream, *, fast: bool, scalars: bool = True) -> tuple[bytes, BaselineBuilder]:
    builder = BaselineBuilder(GROUP_BY, scalars=scalars)
    builder.add_stream(stream, fast=fast)
    builder.add_source(stream.label, "file", stream.traces, stream.spans)
    return builder.to_proto().SerializeToString(deterministic=True), builder


@pytest.mark.parametrize("scalars", [True, False])
def test_fast_path_gives_the_straightforward_baseline(fleet, scalars: bool) -> None:
    kind, paths = fleet
    fast, builder = build(TraceStream.from_paths(paths), fast=True, scalars=scalars)
    slow, _ = build(TraceStream.from_paths(paths), fast=False, scalars=scalars)
    assert fast == slow
    if kind == "unfolded":  # plain steps: most of them must have taken the fast path
        assert builder._signatures.hits > builder._signatures.misses
    else:  # a trace holding a summary span is no plain step: rebuilt, never read fast
        spans = [s for p in paths for s in _spans(p)]
        folded = {s.trace_id for s in spans if "launchtrace.fold.count" in dict(s.attributes)}
        assert folded
        assert builder._signatures.hits + builder._signatures.misses <= len({s.trace_id for s in spans} - folded)
    groups = read_baseline_bytes(fast).groups
    assert {tuple(g.values) for g in groups} == {(v, h) for _, v, h in RUNS}


def read_baseline_bytes(data: bytes):
    from launchtrace.v1 import baseline_pb2 as pb

    msg = pb.Baseline()
    msg.ParseFromString(data)
    return msg


def test_cli_baseline_equals_the_straightforward_one(fleet, tmp_path: Path) -> None:
    _, paths = fleet
    out = tmp_path / "base.pb"
    argv = [sys.executable, "-m", "launchtrace", "baseline", "build", "--from", *map(str, paths), "--out", str(out)]
    subprocess.run([*argv, "--quiet"], check=True, timeout=300, capture_output=True)
    written = read_baseline(out)
    builder = BaselineBuilder(GROUP_BY)
    stream = TraceStream.from_paths(paths)
    builder.add_stream(stream, fast=False)
    builder.add_source(stream.label, written.sources[0].kind, stream.traces, stream.spans)
    expected = builder.to_proto()
    expected.end = written.end  # the file's end marker (write_baseline)
    assert written.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)


def _spans(path: Path) -> list[SpanData]:
    with SpanFile(path) as f:
        return [s for _, chunk in f.chunks() for s in chunk]


def _with(span: SpanData, **changes) -> SpanData:
    attrs = dict(span.attributes)
    attrs.update(changes)
    return dataclasses.replace(span, attributes=tuple(attrs.items()))


def _altered(spans: list[SpanData]) -> list[SpanData]:
    """Steps of one run changed where only pointers, sequence numbers or counters differ: one launch's two
    arrays made to share a pointer (another topology), one array made null, one step's launches issued in
    another order, a sequence number as a string (the rebuild reads it; the fast path must not trust it)."""
    traces: dict[bytes, list[SpanData]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    steps = [members for members in traces.values() if len(members) > 3]
    out = []
    for k, members in enumerate(steps):
        changed = list(members)
        two = (i for i, s in enumerate(changed) if sum(1 for key, _ in s.attributes if key.endswith(".ptr")) >= 2)
        launch = next(two, None)
        if launch is None:
            out.extend(changed)
            continue
        ptrs = [key for key, _ in changed[launch].attributes if key.endswith(".ptr")]
        d = dict(changed[launch].attributes)
        if k % 4 == 1:
            changed[launch] = _with(changed[launch], **{ptrs[1]: d[ptrs[0]]})
        elif k % 4 == 2:
            changed[launch] = _with(changed[launch], **{ptrs[0]: 0})
        elif k % 4 == 3:
            records = [i for i, s in enumerate(changed) if "launchtrace.seq" in dict(s.attributes)]
            a, b = records[0], records[-1]
            sa, sb = dict(changed[a].attributes)["launchtrace.seq"], dict(changed[b].attributes)["launchtrace.seq"]
            changed[a] = _with(changed[a], **{"launchtrace.seq": sb})
            changed[b] = _with(changed[b], **{"launchtrace.seq": str(sa)})
        out.extend(changed)
    return out


def test_fast_path_tells_apart_what_only_pointers_and_order_change(fleet) -> None:
    _, paths = fleet
    spans = [s for p in paths for s in _altered(_spans(p))]

    def stream() -> TraceStream:
        return TraceStream.from_span_batches(lambda log: iter([spans]), "altered")

    fast, builder = build(stream(), fast=True)
    slow, _ = build(stream(), fast=False)
    assert fast == slow
    assert builder._signatures.hits > 0  # the unchanged steps still went the fast way
    topologies = {t.fingerprint for g in read_baseline_bytes(slow).groups for s in g.scopes for t in s.topologies}
    assert len(topologies) >= 4  # the changes made new topologies, and the fast path found each
