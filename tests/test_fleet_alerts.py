"""Fleet alerts on a synthetic fleet of real Warp processes on the CPU (``tests/fleet_app.py``).

Five groups (``service.version``, ``host.name``), each run a real process exporting OTLP JSON Lines with its
group in ``OTEL_RESOURCE_ATTRIBUTES``: two hosts of the clean build 1.0 (six runs each), and three other builds on
their own hosts (three to five runs each): 1.1 launches ``relax`` with other dimensions, 1.2 runs a heavier ``work``
kernel (same topology), 1.3 allocates its scratch buffer on every call. The fleet is made once per module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_gen import Member, make_fleet
from launchtrace.analysis.fleet.alerts import against_baseline, among_peers
from launchtrace.analysis.fleet.baseline import BaselineBuilder, merge
from launchtrace.sources.stream import TraceStream

GROUP_BY = ("service.version", "host.name")
CLEAN = (("1.0", "h1"), ("1.0", "h2"))
DIM, SLOW, ALLOC = ("1.1", "h3"), ("1.2", "h4"), ("1.3", "h5")
MEMBERS = [
    Member("clean", "1.0", "h1", runs=6),
    Member("clean", "1.0", "h2", runs=6),
    Member("dim", *DIM, runs=3),
    Member(
        "slow", *SLOW, runs=5
    ),  # its runs vary most (a long kernel is preempted more): the run-level test needs them
    Member("alloc", *ALLOC, runs=3),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    return make_fleet(tmp_path_factory.mktemp("fleet"), MEMBERS, steps=12)


def clean_runs(fleet: dict[str, list[Path]], runs: tuple[int, ...]) -> list[Path]:
    return [fleet[f"{v}-{h}"][k] for v, h in CLEAN for k in runs]


def bad_runs(fleet: dict[str, list[Path]], *groups: tuple[str, str]) -> list[Path]:
    return [p for v, h in groups for p in fleet[f"{v}-{h}"]]


def built(paths: list[Path]) -> BaselineBuilder:
    builder = BaselineBuilder(GROUP_BY)
    for trace in TraceStream.from_paths(paths):
        builder.add(trace)
    return builder


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launchtrace", *argv], capture_output=True, text=True, timeout=300)


def reasons_by_group(alerts) -> dict[tuple[str, ...], set[str]]:
    out: dict[tuple[str, ...], set[str]] = {}
    for a in alerts:
        out.setdefault(a.group, set()).add(a.reason)
    return out


def test_alert_reports_exactly_the_three_changed_builds(fleet, tmp_path: Path) -> None:
    base = tmp_path / "base.pb"
    proc = cli("baseline", "build", "--from", *map(str, clean_runs(fleet, (0, 1, 2))), "--out", str(base), "--quiet")
    assert proc.returncode == 0, proc.stderr
    window = [*clean_runs(fleet, (3, 4, 5)), *bad_runs(fleet, DIM, SLOW, ALLOC)]
    proc = cli("alert", "--baseline", str(base), "--from", *map(str, window), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    found: dict[tuple[str, ...], set[str]] = {}
    for a in report["alerts"]:
        found.setdefault((a["group"]["service.version"], a["group"]["host.name"]), set()).add(a["reason"])
    assert set(found) == {DIM, SLOW, ALLOC}, report["alerts"]
    assert found[DIM] == {"topology_drift"}
    assert found[SLOW] == {"latency_regression"}
    assert found[ALLOC] == {"new_foreign_buffers"}
    by_reason = {a["reason"]: a for a in report["alerts"]}
    drift = by_reason["topology_drift"]
    assert drift["kernel"].endswith(".relax") and any("dim (2048,) -> (1024,)" in e for e in drift["evidence"])
    foreign = by_reason["new_foreign_buffers"]
    assert any("buffer scratch sim.scratch -> Sim.step.scratch" in e for e in foreign["evidence"])
    slow = [a for a in report["alerts"] if a["reason"] == "latency_regression"]
    assert {a["kernel"] for a in slow} >= {"", "__main__.work"}  # the scope and the heavier kernel
    assert all(
        a["values"]["effect"] > 1.0 and a["values"]["basis"] == "runs"
        for a in slow
        if a["kernel"] in ("", "__main__.work")
    )
    for a in report["alerts"]:
        assert a["exemplar_trace_ids"] and all(len(t) == 32 for t in a["exemplar_trace_ids"])
    again = cli("alert", "--baseline", str(base), "--from", *map(str, window), "--format", "json")
    assert again.stdout == proc.stdout  # same input, same output


@pytest.mark.parametrize(
    ("base_runs", "window_runs"),
    [((0, 1, 2), (3, 4, 5)), ((3, 4, 5), (0, 1, 2)), ((0, 2, 4), (1, 3, 5)), ((1, 3, 5), (0, 2, 4))],
)
def test_clean_fleet_raises_no_false_alarm(fleet, base_runs, window_runs) -> None:
    """Four A/A comparisons of the clean build (other runs of the same hosts): nothing fires."""
    alerts = against_baseline(built(clean_runs(fleet, base_runs)), built(clean_runs(fleet, window_runs)))
    assert alerts == [], [(a.group, a.reason, a.kernel, a.summary) for a in alerts]


def test_clean_text_output_and_exit_code(fleet, tmp_path: Path) -> None:
    base = tmp_path / "base.pb"
    assert (
        cli("baseline", "build", "--from", *map(str, clean_runs(fleet, (0, 1, 2))), "--out", str(base)).returncode == 0
    )
    proc = cli("alert", "--baseline", str(base), "--from", *map(str, clean_runs(fleet, (3, 4, 5))))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no alerts" in proc.stdout
    assert "traces/s" in proc.stderr and "spans/s" in proc.stderr  # the speed line at the end (no tty: no bar)


def test_peers_find_the_slow_host_without_a_baseline(fleet) -> None:
    window = built([*clean_runs(fleet, (0, 1, 2, 3)), *bad_runs(fleet, SLOW)])
    alerts = among_peers(window)
    assert reasons_by_group(alerts) == {SLOW: {"latency_regression"}}, [(a.group, a.reason, a.summary) for a in alerts]
    assert all(a.against == "peers" for a in alerts)


def test_peers_find_each_outlier_in_the_whole_fleet(fleet) -> None:
    window = built([*clean_runs(fleet, (0, 1, 2, 3)), *bad_runs(fleet, DIM, SLOW, ALLOC)])
    found = reasons_by_group(among_peers(window))
    assert set(found) == {DIM, SLOW, ALLOC}
    assert "topology_drift" in found[DIM] and "latency_regression" in found[SLOW]
    assert "new_foreign_buffers" in found[ALLOC]


def test_merge_of_two_halves_equals_the_whole(fleet) -> None:
    files = [*clean_runs(fleet, (0, 1, 2, 3, 4, 5)), *bad_runs(fleet, DIM, ALLOC)]
    whole = built(files).to_proto()
    halves = merge(built(files[::2]).to_proto(), built(files[1::2]).to_proto())
    assert list(halves.groups) == list(whole.groups)  # every count, histogram bucket, run value, representative
    assert (halves.window, halves.group_by, halves.limits) == (whole.window, whole.group_by, whole.limits)


def test_merge_command_writes_the_same_baseline(fleet, tmp_path: Path) -> None:
    files = [str(p) for p in clean_runs(fleet, (0, 1, 2))]
    a, b, c, whole = (tmp_path / n for n in ("a.pb", "b.pb", "c.pb", "whole.pb"))
    assert cli("baseline", "build", "--from", *files[:3], "--out", str(a), "--quiet").returncode == 0
    assert cli("baseline", "build", "--from", *files[3:], "--out", str(b), "--quiet").returncode == 0
    assert cli("baseline", "build", "--from", *files, "--out", str(whole), "--quiet").returncode == 0
    proc = cli("baseline", "merge", str(a), str(b), "--out", str(c))
    assert proc.returncode == 0, proc.stderr
    from launchtrace.baselines import read_baseline

    merged, direct = read_baseline(c), read_baseline(whole)
    assert list(merged.groups) == list(direct.groups) and merged.window == direct.window
    assert [s.traces for s in merged.sources] == [
        s.traces for s in [*read_baseline(a).sources, *read_baseline(b).sources]
    ]


def test_merge_refuses_baselines_grouped_differently(fleet, tmp_path: Path) -> None:
    files = [str(p) for p in clean_runs(fleet, (0,))]
    a, b = tmp_path / "a.pb", tmp_path / "b.pb"
    assert cli("baseline", "build", "--from", *files, "--out", str(a), "--quiet").returncode == 0
    assert (
        cli("baseline", "build", "--from", *files, "--group-by", "host.name", "--out", str(b), "--quiet").returncode
        == 0
    )
    proc = cli("baseline", "merge", str(a), str(b), "--out", str(tmp_path / "c.pb"))
    assert proc.returncode == 2 and "grouped differently" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_alerts_reach_a_real_alertmanager_and_its_webhook(fleet, tmp_path: Path) -> None:
    """Debian's Alertmanager on loopback, its webhook receiver a loopback test server: the version "4" payload
    carries our labels (alertname, service, group, scope, kernel) and annotations (evidence, exemplar traces)."""
    import requests

    from monitoring import Alertmanager, WebhookReceiver

    base = tmp_path / "base.pb"
    assert (
        cli("baseline", "build", "--from", *map(str, clean_runs(fleet, (0, 1, 2))), "--out", str(base)).returncode == 0
    )
    window = [*clean_runs(fleet, (3, 4, 5)), *bad_runs(fleet, DIM)]
    with WebhookReceiver() as hook, Alertmanager(tmp_path, hook.url) as am:
        proc = cli("alert", "--baseline", str(base), "--from", *map(str, window), "--alertmanager", am.url)
        assert proc.returncode == 1, proc.stderr
        assert "posted 1 alert(s)" in proc.stderr
        payload = hook.wait_for(lambda p: p.get("status") == "firing")
        held = requests.get(am.url + "/api/v2/alerts", timeout=5).json()
    assert payload["version"] == "4" and payload["receiver"] == "test"
    assert {"groupKey", "truncatedAlerts", "groupLabels", "commonLabels", "commonAnnotations", "externalURL"} <= set(
        payload
    )
    (alert,) = payload["alerts"]
    labels, notes = alert["labels"], alert["annotations"]
    assert labels["alertname"] == "LaunchtraceTopologyDrift" and labels["service"] == "fleet-sim"
    assert labels["group"] == "service.version=1.1,host.name=h3" and labels["scope"] == "step"
    assert labels["kernel"] == "__main__.relax" and labels["host_name"] == "h3" and labels["service_version"] == "1.1"
    assert "dim (2048,) -> (1024,)" in notes["description"]
    ids = notes["exemplar_trace_ids"].split(",")
    assert len(ids) == 2 and all(len(t) == 32 for t in ids)
    assert alert["status"] == "firing" and alert["fingerprint"]
    assert [a["labels"]["alertname"] for a in held] == ["LaunchtraceTopologyDrift"]


def test_unreachable_alertmanager_is_one_line_exit_3(fleet, tmp_path: Path) -> None:
    """The alerts fired (the report is on stdout) but did not reach Alertmanager after the retries: exit 3, not the
    2 of bad input, so that "fired" stays visible (issue 25)."""
    from loopback_http import free_port

    base = tmp_path / "base.pb"
    assert cli("baseline", "build", "--from", *map(str, clean_runs(fleet, (0,))), "--out", str(base)).returncode == 0
    url = f"http://127.0.0.1:{free_port()}"
    proc = cli(
        "alert", "--baseline", str(base), "--from", *map(str, bad_runs(fleet, DIM)), "--alertmanager", url, "--quiet",
        "--retries", "1",
    )  # fmt: skip
    assert proc.returncode == 3 and url in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "(2 tries)" in proc.stderr and "FIRING" in proc.stdout


def _served_traces(files: list[Path]) -> dict[bytes, list]:
    from launchtrace.sources.files import read_spans

    traces: dict[bytes, list] = {}
    for path in files:
        for trace_id, spans in read_spans(path, check=False).traces().items():
            traces.setdefault(trace_id, []).extend(spans)
    return traces


def test_baseline_from_tempo_equals_the_one_from_files(fleet, tmp_path: Path) -> None:
    """No Tempo can run here: ``tests.loopback_http.Backend`` is a real HTTP server on loopback answering at its
    real endpoints (``/api/search`` + ``/api/v2/traces/{id}``) with the fleet's own spans in Tempo's response
    shapes. The baseline built through it equals the one built from files. (Jaeger runs for real: next test.)"""
    import orjson

    from launchtrace.baselines import read_baseline
    from launchtrace.otlp.json_codec import encode_line
    from loopback_http import Answer, Backend

    files = clean_runs(fleet, (0, 1))
    traces = _served_traces(files)
    direct = tmp_path / "files.pb"
    assert cli("baseline", "build", "--from", *map(str, files), "--out", str(direct), "--quiet").returncode == 0
    with Backend() as tempo:
        hits = [{"traceID": tid.hex().lstrip("0")} for tid in traces]
        tempo.routes["/api/search"] = Answer(200, orjson.dumps({"traces": hits}))
        for tid, spans in traces.items():
            body = b'{"trace":' + encode_line(spans).encode() + b"}"
            tempo.routes[f"/api/v2/traces/{tid.hex()}"] = Answer(200, body)
        via_tempo = tmp_path / "tempo.pb"
        proc = cli("baseline", "build", "--from", "tempo+" + tempo.url, "--since", "1d", "--limit", "500",
                   "--out", str(via_tempo))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert f"read {len(traces)} traces" in proc.stderr
        assert tempo.seen[0].path == "/api/search" and len(tempo.seen) == 1 + len(traces)
    want, got = read_baseline(direct), read_baseline(via_tempo)
    assert list(got.groups) == list(want.groups) and got.window == want.window
    assert got.sources[0].kind == "tempo" and got.sources[0].traces == len(traces)


def test_baseline_from_the_real_jaeger_equals_the_one_from_files(fleet, jaeger, tmp_path: Path) -> None:
    """The fleet's spans posted to the real Jaeger v2 (OTLP/HTTP JSON, tests/jaeger_live.py), read back by
    ``baseline build --from jaeger+URL`` (api_v3 search): the same baseline as from the files."""
    import requests

    from launchtrace.baselines import read_baseline
    from launchtrace.otlp.json_codec import encode_line

    files = clean_runs(fleet, (0, 1))
    traces = _served_traces(files)
    direct = tmp_path / "files.pb"
    assert cli("baseline", "build", "--from", *map(str, files), "--out", str(direct), "--quiet").returncode == 0
    for spans in traces.values():
        answer = requests.post(
            jaeger.otlp_http, data=encode_line(spans), headers={"Content-Type": "application/json"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
    jaeger.wait_stored()
    via_jaeger = tmp_path / "jaeger.pb"
    proc = cli("baseline", "build", "--from", f"jaeger+{jaeger.query_url}?service=fleet-sim&since=1d&limit=500",
               "--out", str(via_jaeger))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"read {len(traces)} traces" in proc.stderr
    want, got = read_baseline(direct), read_baseline(via_jaeger)
    assert list(got.groups) == list(want.groups) and got.window == want.window
    assert got.sources[0].kind == "jaeger" and got.sources[0].traces == len(traces)


def _traceql_answer(files_by_group: dict[tuple[str, str], list[Path]], kernel: str, per_sample: int = 3) -> bytes:
    """What Tempo's ``/api/metrics/query_range`` would answer for the median launch duration of ``kernel`` per
    group: the fleet's own durations, ``per_sample`` steps a sample, in the response shape of Tempo 3.0."""
    import orjson

    from launchtrace.sources.loading import load_traces

    series = []
    for (version, host), files in files_by_group.items():
        durations = sorted(
            (r.start_ns, r.duration_ns) for f in files for t in load_traces(f) for r in t.records if r.kernel == kernel
        )
        samples = []
        for i in range(0, len(durations) - per_sample + 1, per_sample):
            chunk = sorted(d for _, d in durations[i : i + per_sample])
            samples.append({"timestampMs": str(durations[i][0] // 10**6), "value": chunk[len(chunk) // 2] / 1e9})
        labels = [
            {"key": "resource.service.version", "value": {"stringValue": version}},
            {"key": "resource.host.name", "value": {"stringValue": host}},
            {"key": "span.launchtrace.kernel", "value": {"stringValue": kernel}},
        ]
        series.append({"labels": labels, "samples": samples})
    series.append({"labels": [{"key": "resource.host.name"}], "samples": [{"timestampMs": "x", "value": 1}]})  # bad
    return orjson.dumps({"series": series, "status": "PARTIAL"})


def test_peer_latency_from_traceql_metrics_finds_the_slow_host(fleet, tmp_path: Path) -> None:
    """No Tempo can run here: a loopback HTTP server answers ``/api/search``, ``/api/v2/traces/{id}`` and
    ``/api/metrics/query_range`` in Tempo's response shapes (the metrics computed from the fleet's own spans)."""
    import orjson

    from launchtrace.otlp.json_codec import encode_line
    from loopback_http import Answer, Backend

    groups = {
        CLEAN[0]: clean_runs(fleet, (0, 1, 2))[:3],
        CLEAN[1]: clean_runs(fleet, (0, 1, 2))[3:],
        SLOW: bad_runs(fleet, SLOW),
    }
    traces = _served_traces([p for files in groups.values() for p in files])
    with Backend() as tempo:
        tempo.routes["/api/search"] = Answer(200, orjson.dumps({"traces": [{"traceID": t.hex()} for t in traces]}))
        for tid, spans in traces.items():
            tempo.routes[f"/api/v2/traces/{tid.hex()}"] = Answer(200, b'{"trace":' + encode_line(spans).encode() + b"}")
        tempo.routes["/api/metrics/query_range"] = Answer(200, _traceql_answer(groups, "__main__.work"))
        proc = cli("alert", "--from", "tempo+" + tempo.url, "--service", "fleet-sim", "--since", "1d",
                   "--limit", "1000",
                   "--traceql-latency", "--format", "json")  # fmt: skip
        asked = [s for s in tempo.seen if s.path == "/api/metrics/query_range"]
    assert proc.returncode == 1, proc.stderr
    assert "partial" in proc.stderr and "series 3 skipped" in proc.stderr
    (query,) = asked
    assert query.query["q"] == [
        '{ span.launchtrace.op != nil && resource.service.name = "fleet-sim" } | quantile_over_time(duration, 0.5) '
        "by (resource.service.version, resource.host.name, span.launchtrace.kernel)"
    ]
    alerts = json.loads(proc.stdout)["alerts"]
    assert [(a["group"]["host.name"], a["reason"], a["kernel"]) for a in alerts] == [
        ("h4", "latency_regression", "__main__.work")
    ]
    assert alerts[0]["against"] == "peers (TraceQL metrics)"


def test_alert_baseline_may_be_the_traces_themselves(fleet, tmp_path: Path) -> None:
    """``--baseline`` names a .pb or, as every source, traces (here a folder): the same alerts either way."""
    base = tmp_path / "base.pb"
    clean = clean_runs(fleet, (0, 1, 2))
    assert cli("baseline", "build", "--from", *map(str, clean), "--out", str(base), "--quiet").returncode == 0
    folder = tmp_path / "clean"
    folder.mkdir()
    for path in clean:
        (folder / path.name).symlink_to(path)
    window = [*clean_runs(fleet, (3, 4, 5)), *bad_runs(fleet, DIM, SLOW, ALLOC)]
    from_pb = cli("alert", "--baseline", str(base), "--from", *map(str, window), "--format", "json")
    from_traces = cli("alert", "--baseline", str(folder), "--from", *map(str, window), "--format", "json")
    assert from_pb.returncode == from_traces.returncode == 1, from_traces.stderr
    assert json.loads(from_traces.stdout)["alerts"] == json.loads(from_pb.stdout)["alerts"] != []
    renamed = tmp_path / "base.baseline"  # a baseline is told by its marker, not by its name
    renamed.write_bytes(base.read_bytes())
    from_renamed = cli("alert", "--baseline", str(renamed), "--from", *map(str, window), "--format", "json")
    assert from_renamed.returncode == 1, from_renamed.stderr
    assert json.loads(from_renamed.stdout)["alerts"] == json.loads(from_pb.stdout)["alerts"]
