"""The baseline's fast paths give the very baseline the straightforward path gives (every trace rebuilt into
records), byte for byte, on real exported files of real Warp processes on the CPU (``tests/fleet_app.py``),
folded and unfolded, and on steps altered where only the signature can tell them apart. Each fast path is
checked: the compiled scanner with blocks folded in C (:mod:`launchtrace.analysis.fleet.stepscan`, where built),
the same design with the Python references of both, and the Python fast path (:mod:`launchtrace.analysis.fleet.fast`:
what runs with ``LAUNCHTRACE_PURE_PYTHON=1``).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace.analysis.fleet import blocks, stepscan
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


PATHS = ["compiled", "reference", "python"]


def builder_for(path: str, scalars: bool = True) -> BaselineBuilder:
    """A builder whose fast path is ``path`` (see the module docstring)."""
    builder = BaselineBuilder(GROUP_BY, scalars=scalars)
    if path == "compiled":
        if not stepscan.native_fast_path():
            pytest.skip("the compiled scanner is not built here (LAUNCHTRACE_PURE_PYTHON, or no compiler)")
        builder.use_scanner(stepscan.scanner_for(), stepscan.fold_for())
    elif path == "reference":
        builder.use_scanner(stepscan.scanner_for(python=True), stepscan.fold_for(python=True))
    else:
        builder.use_scanner(None, stepscan.fold)
    return builder


def build(
    stream: TraceStream, *, fast: bool, scalars: bool = True, path: str = "compiled"
) -> tuple[bytes, BaselineBuilder]:
    builder = builder_for(path, scalars) if fast else BaselineBuilder(GROUP_BY, scalars=scalars)
    builder.add_stream(stream, fast=fast)
    builder.add_source(stream.label, "file", stream.traces, stream.spans)
    return builder.to_proto().SerializeToString(deterministic=True), builder


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scalars", [True, False])
def test_fast_path_gives_the_straightforward_baseline(fleet, scalars: bool, path: str) -> None:
    kind, paths = fleet
    fast, builder = build(TraceStream.from_paths(paths), fast=True, scalars=scalars, path=path)
    slow, _ = build(TraceStream.from_paths(paths), fast=False, scalars=scalars)
    assert fast == slow
    hits, misses = builder.fast_counts()
    if kind == "unfolded":  # plain steps: many take the fast path (not all: a group's first step of each
        # signature, and a step whose random trace id sorts first, becoming the representative, are rebuilt;
        # with 8 steps a run that is about half of them)
        assert hits > 0 and hits + misses >= 30
        if path != "python":
            assert builder._blocks.folded == builder.scanned_hits > 0  # folded in blocks, none one by one
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


@pytest.mark.parametrize("path", PATHS)
def test_fast_path_tells_apart_what_only_pointers_and_order_change(fleet, path: str) -> None:
    kind, paths = fleet
    spans = [s for p in paths for s in _altered(_spans(p))]

    def stream() -> TraceStream:
        return TraceStream.from_span_batches(lambda log: iter([spans]), "altered")

    fast, builder = build(stream(), fast=True, path=path)
    slow, _ = build(stream(), fast=False)
    assert fast == slow
    if kind == "unfolded":  # (folded: the plain steps are each run's first, which the fast path never takes)
        assert builder.fast_counts()[0] > 0  # the unchanged steps still went the fast way
    topologies = {t.fingerprint for g in read_baseline_bytes(slow).groups for s in g.scopes for t in s.topologies}
    assert len(topologies) >= 4  # the changes made new topologies, and the fast path found each


@pytest.mark.parametrize("path", ["compiled", "reference"])
def test_blocks_folded_small_and_one_by_one_give_the_same_baseline(fleet, monkeypatch, path: str) -> None:
    """Blocks of one step, every block folded as soon as it has anything, and blocks that the fold declines
    (then added step by step): the same bytes as the straightforward path."""
    kind, paths = fleet
    slow, _ = build(TraceStream.from_paths(paths), fast=False)
    monkeypatch.setattr(blocks, "BLOCK_STEPS", 1)
    small, _ = build(TraceStream.from_paths(paths), fast=True, path=path)
    monkeypatch.setattr(blocks, "BLOCK_STEPS", 1024)
    monkeypatch.setattr(blocks, "BUFFER_BYTES", 1)
    tiny_buffer, _ = build(TraceStream.from_paths(paths), fast=True, path=path)
    builder = builder_for(path)
    builder._blocks.fold = lambda *args: None  # as for a launch without an end time
    stream = TraceStream.from_paths(paths)
    builder.add_stream(stream, fast=True)
    builder.add_source(stream.label, "file", stream.traces, stream.spans)
    declined = builder.to_proto().SerializeToString(deterministic=True)
    assert small == tiny_buffer == declined == slow
    if kind == "unfolded":  # (folded: no step is taken fast, see above)
        assert builder._blocks.one_by_one > 0


@pytest.mark.parametrize("path", PATHS)
def test_damaged_files_give_the_straightforward_baseline(fleet, tmp_path: Path, path: str) -> None:
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
    fast, _ = build(TraceStream.from_paths(damaged), fast=True, path=path)
    slow, _ = build(TraceStream.from_paths(damaged), fast=False)
    assert fast == slow


def test_signatures_forgotten_when_full_still_give_the_straightforward_baseline(fleet, monkeypatch) -> None:
    """With room for one signature (forgotten whenever another comes), and an interner that starts afresh
    every few values (so ids change under the builder), the compiled path still gives the same bytes."""
    from launchtrace.analysis.fleet import baseline as B

    if not stepscan.native_fast_path():
        pytest.skip("the compiled scanner is not built here (LAUNCHTRACE_PURE_PYTHON, or no compiler)")
    _, paths = fleet
    slow, _ = build(TraceStream.from_paths(paths), fast=False)
    monkeypatch.setattr(B, "MAX_SIGNATURES", 1)
    builder = BaselineBuilder(GROUP_BY)
    builder.use_scanner(stepscan.scanner_for(intern=stepscan.Interner(limit=50)), stepscan.fold_for())
    stream = TraceStream.from_paths(paths)
    builder.add_stream(stream, fast=True)
    builder.add_source(stream.label, "file", stream.traces, stream.spans)
    assert builder.to_proto().SerializeToString(deterministic=True) == slow
