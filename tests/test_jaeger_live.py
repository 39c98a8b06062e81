"""Live against the real Jaeger v2 (tests/jaeger_live.py): export over OTLP/gRPC and OTLP/HTTP, pull back
through api_v3 and the classic API, and the rebuilt LaunchTraces equal the ones the same program wrote to a
file; ``launchtrace run``; the analyzers reading Jaeger directly (``jaeger+URL``); the application's own span
as the parent of a step.

Real parts throughout: Warp kernels on the CPU, the export pipeline with the OpenTelemetry SDK's OTLP exporters,
Jaeger's receivers, memory store and query service on loopback, ``launchtrace pull`` and the analyzers.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import launchtrace
from launchtrace import conventions as C
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.sources.loading import load_traces
from launchtrace.topology import fingerprint
from test_pipeline import file_spans

STEPS = 6
STEP_WORK = 5  # per warp_programs.Sim.step: a copy, a launch, a fill, two launches


def microseconds(start: int, end: int) -> tuple[int, int]:
    """Times as Jaeger's classic API keeps them: start and duration in whole microseconds."""
    return start // 1000 * 1000, (start // 1000 + (end - start) // 1000) * 1000


def normalized(traces: list, *, us: bool = False) -> list:
    """Each trace as (records with their scope path, scopes with their parent's path): everything a
    LaunchTrace holds except the ids the rebuild makes up; ``us``: times in whole microseconds (classic API)."""
    out = []
    for t in traces:

        def path(scope_id, scopes=t.scopes):
            names = []
            while scope_id is not None:
                s = scopes[scope_id]
                names.append((s.name, s.kind, s.attributes))
                scope_id = s.parent_id
            return tuple(reversed(names))

        def times(start: int, end: int) -> tuple[int, int]:
            return microseconds(start, end) if us else (start, end)

        records = [
            (dataclasses.replace(r, scope_id=None, start_ns=0, end_ns=0), times(r.start_ns, r.end_ns), path(r.scope_id))
            for r in t.records
        ]
        scope_rows = sorted(
            (s.name, str(s.kind), s.attributes, times(s.start_ns, s.end_ns), s.thread, s.site, path(s.parent_id))
            for s in t.scopes.values()
        )
        out.append((records, scope_rows))
    return out


def run_program(sim, steps: int = STEPS) -> None:
    for i in range(steps):
        with launchtrace.scope("step", i=i):
            with launchtrace.scope("physics"):
                sim.step()


def pull(*argv: str) -> int:
    return main(["pull", *argv, "--quiet"])


@pytest.fixture(scope="module")
def exported(jaeger, warp_cpu, tmp_path_factory):
    """One program, two exports at once: the file sink and OTLP (gRPC, then HTTP) into the real Jaeger."""
    import launchtrace.capture as capture
    import warp_programs

    folder = tmp_path_factory.mktemp("exported")
    out = {}
    capture.instrument()
    try:
        sim = warp_programs.Sim()
        launchtrace.own(sim, "sim")
        sim.step()  # compile outside the traces
        for protocol, endpoint in (("grpc", jaeger.otlp_grpc), ("http/protobuf", jaeger.otlp_http)):
            service = "live-" + protocol.split("/")[0]
            path = folder / f"{service}.jsonl"
            to_file = ExportPipeline(
                ExportConfig.resolve(file_path=str(path), service_name=service, fold="off"), truncate=True
            ).start()
            to_jaeger = ExportPipeline(
                ExportConfig.resolve(endpoint=endpoint, protocol=protocol, service_name=service, fold="off")
            ).start()
            run_program(sim)
            file_stats, otlp_stats = to_file.stop(30), to_jaeger.stop(30)
            assert otlp_stats.dropped == 0 and otlp_stats.exported == file_stats.exported > 0
            out[protocol] = (service, path, otlp_stats)
    finally:
        capture.uninstrument()
    total = sum(stats.exported for _, _, stats in out.values())
    jaeger.wait_for_spans(total)  # accepted by its receivers ...
    jaeger.wait_stored()  # ... and through its batch processor into the store
    return out


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_every_launch_comes_back_through_api_v3_and_classic_as_written_to_the_file(
    exported, jaeger, tmp_path: Path, protocol: str
) -> None:
    service, path, stats = exported[protocol]
    written = load_traces(path)
    assert len(written) == STEPS and all(len(t.records) == STEP_WORK for t in written)
    ops = {str(r.op) for t in written for r in t.records}
    assert ops == {"launch", "copy", "fill"}, ops
    assert len(file_spans(path)) == stats.exported

    v3 = tmp_path / "v3.jsonl"
    assert (
        pull(f"jaeger+{jaeger.query_url}", "--service", service, "--since", "1h", "--limit", "50", "--out", str(v3))
        == 0
    )
    assert len(file_spans(v3)) == stats.exported  # every span Jaeger acknowledged comes back
    assert normalized(load_traces(v3)) == normalized(written)

    ids = [t.attributes["trace_id"] for t in load_traces(v3)]
    classic = tmp_path / "classic.jsonl"
    by_id = [a for i in ids for a in ("--trace-id", i)]
    assert pull(f"jaeger+{jaeger.query_url}", "--api", "classic", *by_id, "--out", str(classic)) == 0
    # the classic API keeps times in microseconds (its model's unit): equal to the file at that resolution
    assert normalized(load_traces(classic), us=True) == normalized(written, us=True)
    owners = {b.owner for t in load_traces(classic) for r in t.records for b in r.buffers}
    assert {"sim.pos", "sim.vel", "sim.prev", "sim.energy", "sim.speed"} <= owners


def test_the_analyzers_read_jaeger_directly_as_they_read_the_file(exported, jaeger, capsys) -> None:
    service, path, _ = exported["grpc"]
    source = f"jaeger+{jaeger.query_url}?service={service}&since=1h&limit=50"
    assert main(["summary", str(path), "--format", "json"]) == 0
    from_file = capsys.readouterr().out
    assert main(["summary", source, "--format", "json"]) == 0
    from_jaeger = capsys.readouterr().out
    assert from_jaeger == from_file and '"traces": 6' in from_file
    # the options may stand on the command line instead of in the URL
    assert (
        main(["check-static", f"jaeger+{jaeger.query_url}", "--service", service, "--since", "1h", "--scope", "step"])
        == 0
    )
    assert "static" in capsys.readouterr().out
    # and a diff of Jaeger against the file finds nothing
    assert main(["diff", str(path), source, "--format", "json"]) == 0


PROGRAM = """
import sys
sys.path.insert(0, {tests!r})
import launchtrace, warp_programs
sim = warp_programs.Sim()
launchtrace.own(sim, "sim")
for i in range(4):
    with launchtrace.scope("step", i=i):
        sim.step()
"""


def run_cli(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", *argv],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_launchtrace_run_into_jaeger_matches_a_run_into_a_file(jaeger, tmp_path: Path, protocol: str) -> None:
    program = tmp_path / "sim_program.py"
    program.write_text(PROGRAM.format(tests=str(Path(__file__).parent)))
    service = "run-" + protocol.split("/")[0]
    endpoint = jaeger.otlp_grpc if protocol == "grpc" else jaeger.otlp_http.removesuffix("/v1/traces")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    proc = run_cli("run", str(program), cwd=tmp_path, OTEL_SERVICE_NAME=service, **env)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("run", "--out", str(tmp_path / "file.jsonl"), str(program), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    jaeger.wait_stored()
    written = load_traces(tmp_path / "file.jsonl")
    pulled = tmp_path / "pulled.jsonl"
    source = f"jaeger+{jaeger.query_url}?service={service}&since=1h"
    proc = run_cli("pull", source, "--out", str(pulled), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "pulled" in proc.stderr and "-> " in proc.stderr
    back = load_traces(pulled)
    assert len(file_spans(pulled)) == len(file_spans(tmp_path / "file.jsonl"))
    assert [fingerprint(t.records) for t in back] == [fingerprint(t.records) for t in written]
    assert [[(r.site.line, r.site.function, r.scalars) for r in t.records] for t in back] == [
        [(r.site.line, r.site.function, r.scalars) for r in t.records] for t in written
    ]
    scopes = [sorted(s.name for s in t.scopes.values()) for t in back]
    assert scopes == [sorted(s.name for s in t.scopes.values()) for t in written] and scopes.count(["step"]) == 4


def test_the_applications_span_is_the_parent_of_the_step_in_one_jaeger_trace(jaeger, warp_cpu, tmp_path) -> None:
    """``join_active_span``: the app exports its own span with its own SDK pipeline; launchtrace's step joins it."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    import launchtrace.capture as capture
    import launchtrace.export as export
    import warp_programs

    provider = TracerProvider(resource=Resource.create({"service.name": "live-app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=jaeger.otlp_grpc, insecure=True)))
    export.start_export(endpoint=jaeger.otlp_grpc, protocol="grpc", service_name="live-app-gpu")
    try:
        sim = warp_programs.Sim()
        with provider.get_tracer("app").start_as_current_span("handle-request") as request:
            with launchtrace.scope("step"):
                sim.step()
        stats = export.stop_export(30)
    finally:
        capture.uninstrument()
        provider.shutdown()
    trace_hex = f"{request.get_span_context().trace_id:032x}"
    out = tmp_path / "joined.jsonl"
    jaeger.wait_for_trace(trace_hex, STEP_WORK + 2)
    assert pull(f"jaeger+{jaeger.query_url}", "--trace-id", trace_hex, "--out", str(out)) == 0
    spans = file_spans(out)
    assert stats.dropped == 0
    assert len(spans) == STEP_WORK + 2  # the application's request span, launchtrace's step and its work
    (req,) = [s for s in spans if s.name == "handle-request"]
    (step,) = [s for s in spans if s.name == "step"]
    assert step.parent_span_id == req.span_id and step.attribute(C.SCOPE_JOINED) is True
    launches = [s for s in spans if s.attribute(C.OP) and s.parent_span_id == step.span_id]
    assert (
        len(launches) == STEP_WORK + sum(1 for s in spans if s.attribute(C.OP) and s.attribute(C.INTERNAL)) or launches
    )
    assert {s.trace_id for s in spans} == {req.trace_id}
    (trace,) = load_traces(out)
    assert [s.name for s in trace.scopes.values()] == ["step"]


def test_a_search_cut_at_its_limit_says_there_may_be_more(exported, jaeger, tmp_path: Path, capsys) -> None:
    service, _, _ = exported["grpc"]
    out = tmp_path / "cut.jsonl"
    assert main(["pull", f"jaeger+{jaeger.query_url}?service={service}&since=1h&limit=3", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "in 3 traces" in err and "stopped at --limit 3 traces: there may be more" in err
    assert len(load_traces(out)) == 3
    assert main(["pull", f"jaeger+{jaeger.query_url}?service={service}&since=1h&limit=6", "--out", str(out)]) == 0
    assert "in 6 traces" in capsys.readouterr().err  # all of them; at the limit, so still said


def test_an_attribute_search_keeps_only_the_matching_traces(exported, jaeger, tmp_path: Path, capsys) -> None:
    """Jaeger 2.12's HTTP API ignores ``query.attributes``; pull filters the answer itself."""
    service, _, _ = exported["grpc"]
    out = tmp_path / "i3.jsonl"
    assert main(["pull", f"jaeger+{jaeger.query_url}?service={service}&since=1h&attribute=i=3", "--out", str(out)]) == 0
    assert "in 1 trace from" in capsys.readouterr().err
    (trace,) = load_traces(out)
    assert [dict(s.attributes) for s in trace.scopes.values() if s.name == "step"] == [{"i": 3}]
