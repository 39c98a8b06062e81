"""Live against the real Jaeger v2: one step with 10,000 and with 50,000 launches, folding off and auto.

What Jaeger stores (every span, in one trace: its memory store has no per-trace cap), what ``pull`` returns
(the same spans), and what the rebuild makes of it (every launch, folded ones counted by their summaries). The
50,000-launch program runs once for the module. Speed and memory of ``pull`` are measured by
``benchmarks/bench_jaeger_pull.py`` (docs/send-to-jaeger.md), not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import launchtrace
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.pipeline import ExportPipeline
from launchtrace.sources.loading import load_traces

SIZES = (10_000, 50_000)


def one_big_step(x, launches: int) -> None:
    import warp as wp

    import warp_programs

    with launchtrace.scope("step", launches=launches):
        for _ in range(launches):
            wp.launch(warp_programs.scale, dim=1, inputs=[x, x, 1.0], device="cpu")


@pytest.fixture(scope="module")
def big(jaeger, warp_cpu):
    """Service and export stats per (launches, fold): each size runs once, exported by two pipelines at once
    (folding off, with a span budget above the size; and auto, with the default budget) over OTLP/gRPC."""
    import warp as wp

    import launchtrace.capture as capture

    out = {}
    capture.instrument()
    try:
        x = wp.zeros(1, dtype=float, device="cpu")
        one_big_step(x, 1)  # compile outside the traces
        for launches in SIZES:
            pipelines = {}
            for fold in ("off", "auto"):
                service = f"big-{launches}-{fold}"
                budget = {"span_budget": launches + 10} if fold == "off" else {}
                cfg = ExportConfig.resolve(
                    endpoint=jaeger.otlp_grpc, protocol="grpc", service_name=service, fold=fold, **budget
                )
                pipelines[fold] = (service, ExportPipeline(cfg).start())
            one_big_step(x, launches)
            for fold, (service, pipeline) in pipelines.items():
                stats = pipeline.stop(120)
                assert stats.dropped == 0, stats
                out[(launches, fold)] = (service, stats)
    finally:
        capture.uninstrument()
    return out


@pytest.mark.parametrize("fold", ["off", "auto"])
@pytest.mark.parametrize("launches", SIZES)
def test_a_big_step_comes_back_whole(big, jaeger, tmp_path: Path, capsys, launches: int, fold: str) -> None:
    service, stats = big[(launches, fold)]
    pulled = tmp_path / "big.jsonl"
    source = f"jaeger+{jaeger.query_url}?service={service}&since=1h&limit=5"
    jaeger.wait_stored()
    # 2.4 KB of api_v3 JSON per span: 50,000 spans are 119 MB, past pull's default limit of 64M
    limits = ["--timeout", "300", "--max-answer-bytes", "256M"]
    assert main(["pull", source, "--out", str(pulled), "--quiet", *limits]) == 0
    # every span Jaeger acknowledged, in one trace (the count from pull's summary: the file is read once, below)
    assert capsys.readouterr().err.startswith(f"pulled {stats.exported} spans in 1 trace from ")
    if fold == "off":
        assert stats.exported == launches + 1  # the step and each launch
    else:
        assert stats.exported < 2000  # the default span budget: repeats became summary spans
    (trace,) = [t for t in load_traces(pulled) if any(s.name == "step" for s in t.scopes.values())]
    assert sum(r.repeat for r in trace.records) == launches  # every launch, folded ones by their count
