"""Soak, scaled down for CI: 50,000 real Warp launches (CPU) through the exporter with the OTLP endpoint down
and with ``launchtrace collect`` up, each in a fresh process (``scripts/soak.py``; the full run is a million
launches, its figures are in docs/reliability.md).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOAK = REPO / "scripts" / "soak.py"
LAUNCHES = 50_000


def soak(mode: str, protocol: str = "grpc") -> dict:
    return soak_run(mode, LAUNCHES, steps=50, protocol=protocol)


def soak_run(mode: str, launches: int, *, steps: int, protocol: str = "grpc") -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            str(SOAK),
            "--mode",
            mode,
            "--launches",
            str(launches),
            "--steps",
            str(steps),
            "--protocol",
            protocol,
            "--exporter-timeout",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr[-2000:]
    return json.loads(lines[-1])


def test_soak_with_the_sink_down_memory_stays_bounded_and_every_span_is_counted() -> None:
    r = soak("down")
    assert r["kernel_count_ok"]  # the program's own result: every launch ran
    assert r["rss_growth_mb"] < 64, r
    assert r["exported"] == 0 and r["built"] == r["dropped_sink"] > 0, r
    assert r["dropped_queue"] == 0 and r["dropped_budget"] == 0, r


def test_soak_with_the_sink_up_every_launch_arrives() -> None:
    r = soak("up", "grpc")  # OTLP/HTTP under faults: test_reliability_sinks.py
    assert r["kernel_count_ok"]
    assert r["launches_arrived"] == LAUNCHES, r  # read back from collect's file, folded summaries expanded
    assert r["dropped_sink"] == r["dropped_queue"] == r["dropped_budget"] == 0, r
    assert r["rss_growth_mb"] < 64, r


def test_with_the_sink_up_every_launch_of_a_long_hot_loop_arrives() -> None:
    r = soak_run("up", 250_000, steps=250)
    assert r["kernel_count_ok"]
    assert r["dropped_queue"] == 0 and r["launches_arrived"] == 250_000, r


def test_the_default_queue_bound_fits_the_64_mb_memory_budget(warp_cpu) -> None:
    """However long the sink is down and however fast the program launches, what the exporter holds is bounded
    by ``queue_capacity`` events; measured here with tracemalloc on real launches, that bound must fit 64 MB."""
    sys.path.insert(0, str(REPO / "scripts"))
    import soak as soak_module

    import launchtrace.capture as capture
    from launchtrace.capture import bus
    from launchtrace.export.config import ExportConfig

    run, issued = soak_module.program(5_000, 10)
    capture.instrument()
    try:
        with bus.subscribe(capacity=10 * issued) as sub:
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            run()
            held = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            events = len(sub.queue)
    finally:
        capture.uninstrument()
    assert events >= issued
    per_event = held / events
    assert ExportConfig.resolve().queue_capacity * per_event < 64 << 20, f"{per_event:.0f} B per queued event"
