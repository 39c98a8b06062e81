"""The baseline's fast path (:mod:`launchtrace.analysis.fleet.fast`) gives the very baseline the straightforward
path gives (every trace rebuilt into records), byte for byte, on real exported files of real Warp processes on the
CPU (``tests/fleet_app.py``), folded and unfolded, on steps altered where only the signature can tell them apart,
and on damaged files; and the line reader it reads through splits as ``readline`` does.
"""

from __future__ import annotations

import dataclasses
import io
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.analysis.fleet.baseline import BaselineBuilder
from launchtrace.analysis.fleet.fast import Signatures
from launchtrace.baselines import read_baseline
from launchtrace.sources import files
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
    hits, misses = builder.fast_counts()
    if kind == "unfolded":  # plain steps: many take the fast path (not all: a group's first step of each
        # signature, and a step whose random trace id sorts first, becoming the representative, are rebuilt;
        # with 8 steps a run that is about half of them)
        assert hits > 0 and hits + misses >= 30
    else:  # a trace holding a summary span is no plain step: rebuilt, never read fast
        spans = [s for p in paths for s in _spans(p)]
        folded = {s.trace_id for s in spans if "launchtrace.fold.count" in dict(s.attributes)}
        assert folded
        assert hits + misses <= len({s.trace_id for s in spans} - folded)
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
    kind, paths = fleet
    spans = [s for p in paths for s in _altered(_spans(p))]

    def stream() -> TraceStream:
        return TraceStream.from_span_batches(lambda log: iter([spans]), "altered")

    fast, builder = build(stream(), fast=True)
    slow, _ = build(stream(), fast=False)
    assert fast == slow
    if kind == "unfolded":  # (folded: the plain steps are each run's first, which the fast path never takes)
        assert builder.fast_counts()[0] > 0  # the unchanged steps still went the fast way
    topologies = {t.fingerprint for g in read_baseline_bytes(slow).groups for s in g.scopes for t in s.topologies}
    assert len(topologies) >= 4  # the changes made new topologies, and the fast path found each


def test_damaged_files_give_the_straightforward_baseline(fleet, tmp_path: Path) -> None:
    """Real files with damaged lines mixed in: truncated copies of real lines, a pointer and a sequence number
    past 64 bits, wrong types, a key twice, a line of another shape. Every way reads the same spans and builds
    the same bytes, and nothing crashes."""
    _, paths = fleet
    damaged = []
    for i, p in enumerate(paths):
        lines = p.read_bytes().splitlines(keepends=True)
        bad = [
            lines[0][: len(lines[0]) // 2] + b"\n",
            lines[-1].replace(
                b'"launchtrace.seq","value":{"intValue":"', b'"launchtrace.seq","value":{"intValue":"' + b"9" * 21, 1
            ),
            lines[-1].replace(b'.ptr","value":{"intValue":"', b'.ptr","value":{"intValue":"1844674407370955161600', 1),
            lines[-1].replace(b'"startTimeUnixNano":"', b'"startTimeUnixNano":true,"x":"', 1),
            lines[-1].replace(b'"spanId":', b'"spanId":"0000000000000001","spanId":', 1),
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":1}]}]}]}\n',
            b"[1,2,3]\n",
        ]
        out = tmp_path / f"damaged-{i}.jsonl"
        out.write_bytes(b"".join(lines[:2] + bad + lines[2:]))
        damaged.append(out)
    fast, _ = build(TraceStream.from_paths(damaged), fast=True)
    slow, _ = build(TraceStream.from_paths(damaged), fast=False)
    assert fast == slow


def test_signatures_forgotten_when_full_still_give_the_straightforward_baseline(fleet) -> None:
    """With room for one signature (forgotten whenever another comes), the fast path still gives the same bytes."""
    _, paths = fleet
    slow, _ = build(TraceStream.from_paths(paths), fast=False)
    builder = BaselineBuilder(GROUP_BY)
    builder._signatures = Signatures(max_size=1)
    stream = TraceStream.from_paths(paths)
    builder.add_stream(stream, fast=True)
    builder.add_source(stream.label, "file", stream.traces, stream.spans)
    assert builder.to_proto().SerializeToString(deterministic=True) == slow


def test_line_reader_splits_as_readline(monkeypatch) -> None:
    rng = random.Random(2)
    for _ in range(400):
        monkeypatch.setattr(files, "_READ_BYTES", rng.choice([1, 2, 3, 5, 8, 64]))
        monkeypatch.setattr(files, "_KEEP_BYTES", rng.choice([1, 4, 100, 1 << 24]))
        parts = [b"\n", b"a", b"bb", b"\r\n", b"x" * rng.randrange(0, 200)]
        data = b"".join(rng.choice(parts) for _ in range(rng.randrange(0, 80)))
        kept = []
        lines = []
        for line in files._read_lines(io.BytesIO(data)):
            lines.append(bytes(line))
            kept.append(line)
        assert lines == list(io.BytesIO(data))
        for line in kept:  # each view is released before the buffer is written again: no stale bytes to read
            with pytest.raises(ValueError):
                bytes(line)
