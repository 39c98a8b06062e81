"""A launchtrace scope opened inside the application's own OpenTelemetry span (real SDK ``TracerProvider``)
becomes that span's child, in its trace; ``join_active_span=False`` (or ``LAUNCHTRACE_JOIN_ACTIVE_SPAN=0``)
keeps it a trace of its own. ``WarpInstrumentor().instrument(tracer_provider=...)`` uses the provider's
resource and sampler, and refuses what is not an SDK provider.

Real Warp kernels on the CPU, the real export pipeline writing the JSON Lines file, read back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.export.config import ExportConfig
from launchtrace.sources.rebuild import rebuild
from test_pipeline import file_spans


def _app_tracing(sampler=ALWAYS_ON):
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, resource=Resource.create({"service.name": "app"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def _run_step_inside_app_span(tmp_path: Path, provider: TracerProvider, **settings) -> tuple[list, object]:
    """One ``launchtrace.scope`` (with two launches) inside the app's ``handle-request`` span; the spans read
    back from the file, and the app's span context."""
    import warp_programs

    path = tmp_path / "spans.jsonl"
    export.start_export(file_path=str(path), truncate=True, **settings)
    try:
        sim = warp_programs.Sim()
        tracer = provider.get_tracer("app")
        with tracer.start_as_current_span("handle-request") as request:
            with launchtrace.scope("step"):
                sim.step()
        with launchtrace.scope("outside"):  # no active span here: a trace of its own
            sim.step()
        export.stop_export(30)
    finally:
        capture.uninstrument()
    return file_spans(path), request.get_span_context()


def test_a_scope_opened_in_an_active_sdk_span_is_its_child_in_its_trace(warp_cpu, tmp_path: Path) -> None:
    provider, memory = _app_tracing()
    spans, request = _run_step_inside_app_span(tmp_path, provider)
    (step,) = [s for s in spans if s.name == "step"]
    assert step.trace_id == request.trace_id.to_bytes(16, "big")
    assert step.parent_span_id == request.span_id.to_bytes(8, "big")
    launches = [s for s in spans if s.parent_span_id == step.span_id and s.attribute(C.OP)]
    assert len(launches) == 5 and {s.trace_id for s in launches} == {step.trace_id}
    (outside,) = [s for s in spans if s.name == "outside"]
    assert outside.parent_span_id is None and outside.trace_id != step.trace_id
    assert step.attribute(C.SCOPE_JOINED) is True and outside.attribute(C.SCOPE_JOINED) is None
    rebuilt = rebuild(spans)  # the application's span is not in the file: not a missing parent of ours
    assert not rebuilt.warnings
    (joined,) = [t for tid, t in rebuilt.traces.items() if tid == step.trace_id.hex()]
    # the module's load is a scope of its own where this test is the first to launch the kernel (alone, or first)
    assert [s.name for s in joined.scopes.values() if not s.internal and s.kind != "load"] == ["step"]
    assert sum(1 for r in joined.records if r.scope_id is not None) == 5
    (app_span,) = memory.get_finished_spans()  # the app's own span is exported by the app, not by launchtrace
    assert app_span.name == "handle-request" and not [s for s in spans if s.name == "handle-request"]


@pytest.mark.parametrize("how", ["keyword", "environment"])
def test_join_active_span_off_keeps_the_scope_a_trace_of_its_own(
    warp_cpu, tmp_path: Path, how: str, monkeypatch
) -> None:
    provider, _ = _app_tracing()
    if how == "environment":
        monkeypatch.setenv("LAUNCHTRACE_JOIN_ACTIVE_SPAN", "0")
        settings = {}
    else:
        settings = {"join_active_span": False}
    spans, request = _run_step_inside_app_span(tmp_path, provider, **settings)
    (step,) = [s for s in spans if s.name == "step"]
    assert step.parent_span_id is None
    assert step.trace_id != request.trace_id.to_bytes(16, "big")


def test_a_scope_in_an_unsampled_app_span_follows_its_decision(warp_cpu, tmp_path: Path) -> None:
    """The default sampler is parent-based: the application dropped its trace, so the joined scope is too."""
    provider, memory = _app_tracing(ALWAYS_OFF)
    spans, _ = _run_step_inside_app_span(tmp_path, provider)
    assert not memory.get_finished_spans()
    assert not [s for s in spans if s.name == "step"]
    assert [s.name for s in spans if s.attribute(C.SCOPE_KIND) == "user"] == ["outside"]


def test_instrumentor_uses_the_tracer_providers_resource_and_sampler(warp_cpu, tmp_path: Path) -> None:
    import warp_programs
    from launchtrace.instrumentor import WarpInstrumentor

    path = tmp_path / "spans.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "trainer", "team": "sim"}))
    inst = WarpInstrumentor()
    inst.instrument(tracer_provider=provider, file_path=str(path))
    try:
        with launchtrace.scope("step"):
            warp_programs.Sim().step()
    finally:
        inst.uninstrument()
    spans = file_spans(path)
    assert spans
    resources = {(dict(s.resource)["service.name"], dict(s.resource)["team"]) for s in spans}
    assert resources == {("trainer", "sim")}
    assert all(C.RESOURCE_LAUNCHTRACE_VERSION in dict(s.resource) for s in spans)

    off = tmp_path / "off.jsonl"
    inst.instrument(tracer_provider=TracerProvider(sampler=ALWAYS_OFF), file_path=str(off))
    try:
        with launchtrace.scope("step"):
            warp_programs.Sim().step()
        assert export.flush(30)
        stats = export.stats()
    finally:
        inst.uninstrument()
    assert stats.unsampled > 0 and stats.exported == 0


def test_instrumentor_refuses_a_provider_it_cannot_use(warp_cpu) -> None:
    from opentelemetry.trace import NoOpTracerProvider

    from launchtrace.instrumentor import WarpInstrumentor

    inst = WarpInstrumentor()
    with pytest.raises(ValueError, match=r"tracer_provider must be an opentelemetry\.sdk\.trace\.TracerProvider"):
        inst.instrument(tracer_provider=NoOpTracerProvider())
    assert not capture.is_instrumented() and export._pipeline is None
    inst.uninstrument()


def test_join_active_span_setting_resolves_like_the_others(monkeypatch) -> None:
    assert ExportConfig.resolve().join_active_span is True
    monkeypatch.setenv("LAUNCHTRACE_JOIN_ACTIVE_SPAN", "off")
    assert ExportConfig.resolve().join_active_span is False
    assert ExportConfig.resolve(join_active_span=True).join_active_span is True
    with pytest.raises(ValueError, match="join_active_span"):
        ExportConfig.resolve(join_active_span="yes")


def test_launches_outside_scopes_join_the_active_span_through_their_step_root(warp_cpu, tmp_path: Path) -> None:
    """No scope at all: each request's launches get a ``launchtrace.step`` root that is the request span's
    child; the launches after the last request get a step root of their own."""
    import warp_programs

    provider, _ = _app_tracing()
    tracer = provider.get_tracer("app")
    path = tmp_path / "spans.jsonl"
    export.start_export(file_path=str(path), truncate=True, step_window_s=60.0)
    try:
        sim = warp_programs.Sim()
        requests = []
        for i in range(2):  # two requests within one step window: still two step roots, one per request
            with tracer.start_as_current_span(f"request-{i}") as request:
                sim.step()
            requests.append(request.get_span_context())
        sim.step()
        export.stop_export(30)
    finally:
        capture.uninstrument()
    spans = file_spans(path)
    steps = {s.span_id: s for s in spans if s.name == "launchtrace.step"}
    for request in requests:
        trace_id, span_id = request.trace_id.to_bytes(16, "big"), request.span_id.to_bytes(8, "big")
        (step,) = [s for s in steps.values() if s.parent_span_id == span_id]
        assert step.trace_id == trace_id
        under = [s for s in spans if s.parent_span_id == step.span_id and s.attribute(C.OP)]
        assert len(under) == 5 and {s.trace_id for s in under} == {trace_id}
        assert step.attribute(C.SCOPE_JOINED) is True
    assert not rebuild(spans).warnings
    request_traces = {r.trace_id.to_bytes(16, "big") for r in requests}
    after = [s for s in steps.values() if s.trace_id not in request_traces]
    assert after and all(s.parent_span_id is None for s in after)  # the Sim() setup and the last step


def test_instrumenting_wraps_and_restores_opentelemetrys_runtime_context(warp_cpu) -> None:
    import opentelemetry.context as otel_context

    original = otel_context._RUNTIME_CONTEXT
    capture.instrument()
    try:
        assert otel_context._RUNTIME_CONTEXT is not original
        assert otel_context._RUNTIME_CONTEXT._inner is original
    finally:
        capture.uninstrument()
    assert otel_context._RUNTIME_CONTEXT is original


def test_join_off_leaves_opentelemetrys_runtime_context_alone(warp_cpu, tmp_path: Path) -> None:
    import opentelemetry.context as otel_context

    original = otel_context._RUNTIME_CONTEXT
    export.start_export(file_path=str(tmp_path / "s.jsonl"), join_active_span=False)
    try:
        assert otel_context._RUNTIME_CONTEXT is original
    finally:
        export.stop_export(30)
        capture.uninstrument()
