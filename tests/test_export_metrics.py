"""Launch metrics from the export worker: exact counts whatever the sampler and folding do, scraped over HTTP.

A real Warp process (``tests/fleet_app.py``) serves ``/metrics`` on loopback through the OpenTelemetry
Prometheus exporter; the test scrapes it with ``prometheus_client``'s own text parser.
"""

from __future__ import annotations

import time
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from fleet_gen import Member, metrics_address, start_serving_metrics
from launchtrace.export.metrics import LaunchMetrics, _explicit_point, exporters_from_env
from launchtrace.histogram import ExpHistogram
from launchtrace.sources.files import read_spans


def scrape_while_running(member: Member, out: Path, extra: dict[str, str]) -> dict[str, list]:
    proc, address_file = start_serving_metrics(member, 40, out, extra)
    try:
        address = metrics_address(proc, address_file)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                text = requests.get(f"http://{address}/metrics", timeout=2).text
                families = {f.name: f.samples for f in text_string_to_metric_families(text)}
                steps = sum(s.value for s in families.get("launchtrace_scope_steps", []))
                if steps >= 40:
                    return families
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError("the metrics never showed the 40 steps")
    finally:
        proc.wait(60)


def test_counts_are_exact_when_traces_are_sampled_out_and_folded(tmp_path: Path) -> None:
    extra = {"OTEL_TRACES_SAMPLER": "always_off", "FLEET_LINGER_S": "5", "FLEET_SUBSTEPS": "4"}
    out = tmp_path / "spans.jsonl"
    families = scrape_while_running(Member("clean", "9.9", "metrics-host", 1), out, extra)
    launches = {s.labels["launchtrace_kernel"]: s.value for s in families["launchtrace_launches"]}
    assert launches["__main__.integrate"] == 160 and launches["__main__.work"] == 40
    sample = next(s for s in families["launchtrace_launches"] if s.labels["launchtrace_kernel"] == "__main__.work")
    assert sample.labels["host_name"] == "metrics-host" and sample.labels["service_version"] == "9.9"
    assert sample.labels["service_name"] == "fleet-sim" and sample.labels["launchtrace_scope"] == "step"
    assert not any(k.startswith(("ptr", "trace", "span")) for k in sample.labels)  # nothing of high cardinality
    (steps,) = families["launchtrace_scope_steps"]
    assert steps.value == 40 and len(steps.labels["launchtrace_scope_fingerprint"]) == 16
    hist = families["launchtrace_launch_duration_seconds"]
    count = next(
        s.value for s in hist if s.name.endswith("_count") and s.labels["launchtrace_kernel"] == "__main__.integrate"
    )
    assert count == 160
    assert not out.exists() or len(read_spans(out, check=False).spans) == 0  # every trace was sampled out


def test_folded_and_unfolded_records_count_alike() -> None:
    from launchtrace.model import LaunchRecord, ScopeRecord, Site

    site = Site("a.py", 1, "f")
    m = LaunchMetrics()
    scope = ScopeRecord(1, "step", "user")
    rec = LaunchRecord("launch", "k", (4,), None, (), (), site, start_ns=10, end_ns=1010, scope_id=1)
    folded = LaunchRecord("launch", "k", (4,), None, (), (), site, start_ns=10, end_ns=1010, scope_id=1, repeat=3)
    m.observe([("scope_begin", scope), ("record", rec), ("record", folded), ("scope_end", scope)])
    assert m.counts() == [({"launchtrace.kernel": "k", "launchtrace.op": "launch", "launchtrace.scope": "step"}, 4)]
    ((_, hist),) = m.histograms()
    assert hist.count == 4 and hist.sum == 4000
    ((labels, n),) = m.step_counts()
    assert n == 1 and labels["launchtrace.scope"] == "step"


def test_explicit_buckets_hold_the_exponential_ones_exactly() -> None:
    h = ExpHistogram()
    values = [300, 1000, 1024, 1025, 5000, 70_000, 2**20, 3_000_000]
    for v in values:
        h.add(v)
    point = _explicit_point({}, h, 0, 1)
    bounds_ns = [round(b * 1e9) for b in point.explicit_bounds]
    expected = [0] * (len(bounds_ns) + 1)
    for v in values:
        expected[next((i for i, b in enumerate(bounds_ns) if v <= b), len(bounds_ns))] += 1
    assert list(point.bucket_counts) == expected and point.count == len(values)


def test_metrics_exporter_env() -> None:
    assert exporters_from_env({"OTEL_METRICS_EXPORTER": "otlp, prometheus"}) == ("otlp", "prometheus")
    assert exporters_from_env({"OTEL_METRICS_EXPORTER": "none"}) == ()
    assert exporters_from_env({}) == ()
