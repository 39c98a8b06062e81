"""``report`` and ``chrome-trace`` on inputs past their caps: read one trace at a time, the exact totals of the
whole input kept, what was left out said, and the sample the docs promise (issue 25, size).

Real files written by the exporter's span builder from real Warp launches on the CPU, read by the real
commands; the truth the assertions compare with is computed independently from the file's spans.
"""

from __future__ import annotations

import dataclasses
import html.parser
import json
from pathlib import Path

import pytest

from chromium_cdp import CHROMIUM, Page
from launchtrace.analysis.bounded import Step, StepPoints
from launchtrace.cli import main
from launchtrace.otlp.json_codec import encode_line
from launchtrace.sources.files import read_spans
from test_analysis_programs import write_trace_file

STEPS = 40


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace_file(tmp_path_factory.mktemp("scale") / "run.jsonl", steps=STEPS)


def _roots(path: Path) -> list:
    return [s for s in read_spans(path).spans if s.parent_span_id is None]


def test_chrome_trace_past_its_cap_keeps_a_sample_and_the_exact_totals(trace_file: Path, tmp_path: Path) -> None:
    spans = read_spans(trace_file).spans
    roots = _roots(trace_file)
    assert len(roots) == STEPS and {r.name for r in roots} == {"step"}
    out = tmp_path / "c.json"
    assert main(["chrome-trace", str(trace_file), "--out", str(out), "--max-events", "25"]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))  # valid JSON, to the end
    info = data["otherData"]["launchtrace"]
    assert info["complete"] is False and info["max_events"] == 25
    totals = info["totals"]
    assert totals["spans"] == len(spans) and totals["traces"] == STEPS
    durations = [r.end_ns - r.start_ns for r in roots]
    assert totals["steps"]["step"] == {
        "count": STEPS,
        "total_ns": sum(durations),
        "min_ns": min(durations),
        "max_ns": max(durations),
    }
    scopes = [e for e in data["traceEvents"] if e["ph"] == "X" and e["name"] == "step"]
    full = [e for e in scopes if "launchtrace.sample" not in e["args"]]
    sampled = [e for e in scopes if "launchtrace.sample" in e["args"]]
    # traces in full: whole traces, in the order they ran, within the cap
    assert 0 < info["events_in_full"] <= 25
    assert [e["ts"] for e in full] == sorted(r.start_ns / 1000.0 for r in roots)[: len(full)]
    shown = {e["ts"] for e in scopes}
    left = [r for r in roots if r.start_ns / 1000.0 not in shown]
    assert info["left_out"]["traces"] == len(left) == STEPS - len(full) - len(sampled)  # shown: in full or sampled
    assert info["left_out"]["spans"] == len(spans) - sum(
        1 for s in spans if any(s.start_ns >= r.start_ns and s.end_ns <= r.end_ns for r in roots if r not in left)
    )
    # the samples: the slowest left-out step, and the left-out step nearest the median, in full, marked as such
    ordered = sorted(roots, key=lambda r: r.start_ns)
    rest = ordered[len(full) :]  # every trace after those in full was left out, then two came back as samples
    assert info["left_out"]["traces"] == len(rest) - 2
    slowest = max(rest, key=lambda r: r.end_ns - r.start_ns)
    median = sorted(durations)[(STEPS - 1) // 2]
    nearest = min((r for r in rest if r is not slowest), key=lambda r: abs(r.end_ns - r.start_ns - median))
    assert len(sampled) == 2 and [e["ts"] for e in sampled] == [slowest.start_ns / 1000.0, nearest.start_ns / 1000.0]
    assert sampled[0]["args"]["launchtrace.sample"].startswith("slowest left-out occurrence of step")
    assert sampled[1]["args"]["launchtrace.sample"] == (
        f"left-out occurrence of step nearest its median ({median / 1e6:.3f} ms)"
    )
    assert info["samples"]["slowest_left_out"] == [
        {"step": "step", "start_ns": slowest.start_ns, "duration_ns": slowest.end_ns - slowest.start_ns}
    ]
    assert info["samples"]["median_left_out"] == [
        {"step": "step", "start_ns": nearest.start_ns, "duration_ns": nearest.end_ns - nearest.start_ns}
    ]
    records = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] != "scope"]  # 3 launches a step
    assert len(records) == 3 * (len(full) + len(sampled))  # every launch of the traces shown, none invented
    assert info["events_sampled"] == 2 * 4  # each sample: its scope and its three operations
    marker = [e for e in data["traceEvents"] if e["ph"] == "i"]
    assert len(marker) == 1 and f"{len(left):,} traces" in marker[0]["name"] and marker[0]["s"] == "g"


def test_chrome_trace_under_its_cap_is_complete(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert main(["chrome-trace", str(trace_file), "--out", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    info = data["otherData"]["launchtrace"]
    assert info["complete"] is True and info["left_out"] == {"traces": 0, "spans": 0, "device_operations": 0}
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(events) == info["events_in_full"] - sum(1 for e in data["traceEvents"] if e["ph"] == "M")
    assert len(events) == len(read_spans(trace_file).spans) and not any(e["ph"] == "i" for e in data["traceEvents"])


def test_chrome_trace_refuses_a_cap_below_one(trace_file: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["chrome-trace", str(trace_file), "--out", str(tmp_path / "c.json"), "--max-events", "0"])
    assert exc.value.code == 2 and "'0': must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def _traces_in_order(path: Path) -> list[list]:
    """The file's spans grouped by trace, in the order the traces complete (their root read)."""
    groups: dict[bytes, list] = {}
    done = []
    for span in read_spans(path).spans:
        groups.setdefault(span.trace_id, []).append(span)
        if span.parent_span_id is None:
            done.append(groups.pop(span.trace_id))
    return done + list(groups.values())


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")
def test_report_past_its_detail_says_what_it_left_out_and_stays_usable(trace_file: Path, tmp_path: Path) -> None:
    traces = _traces_in_order(trace_file)
    spans = sum(len(t) for t in traces)
    held, detail = 0, 0
    for t in traces:
        if held + len(t) > 40:
            break
        held += len(t)
        detail += 1
    left = traces[detail:]
    assert 0 < detail < STEPS  # the cap falls inside the file
    root = [next(s for s in t if s.parent_span_id is None) for t in traces]
    slowest = max(range(detail, STEPS), key=lambda k: root[k].end_ns - root[k].start_ns)
    page = tmp_path / "r.html"
    assert main(["report", str(trace_file), "--out", str(page), "--detail-spans", "40"]) == 0
    with Page.open(page, tmp_path) as p:
        notice = p.eval("document.getElementById('large-notice').textContent")
        assert f"This input holds {spans:,} spans in {STEPS:,} traces" in notice
        assert f"In detail: the first {held:,} spans ({detail:,} traces)" in notice
        assert f"Left out of the detail: {len(left):,} traces, {sum(len(t) for t in left):,} spans" in notice
        facts = p.eval("Object.fromEntries([...document.querySelectorAll('.fact')].map(f => "
                       "[f.dataset.fact, f.querySelector('dd').textContent]))")  # fmt: skip
        assert facts["spans"] == f"{spans:,}" and facts["traces / threads"] == f"{STEPS} / 1"
        assert facts["devices"] == "cpu" and facts["pid"] == str(dict(traces[-1][0].resource)["process.pid"])
        assert facts["device operations"] == f"{3 * STEPS:,}"  # scale, add and copy in every step
        row = p.eval("[...document.querySelector('#large-steps tbody tr').cells].map(c => c.textContent)")
        total_ms = sum(r.end_ns - r.start_ns for r in root) / 1e6
        assert row[:3] == ["step", f"{STEPS}", f"{total_ms:,.3f}"]
        ops = p.eval("[...document.querySelectorAll('#large-kernels tbody tr')].map(r => r.cells[2].textContent)")
        assert ops == [f"{STEPS}"] * 3
        assert p.eval("document.querySelectorAll('#steps-chart circle.step-point').length") == STEPS
        # the slowest left-out step is in the timeline's selector and draws its three operations
        options = p.eval("[...document.querySelectorAll('#view-select option')].map(o => [o.value, o.textContent])")
        wanted = f"step#{slowest}"
        duration = [r.end_ns - r.start_ns for r in root]
        if duration[slowest] > max(duration[:detail]):  # the input's slowest step: shown by default
            assert [wanted, f"step #{slowest} (slowest; left out of the detail)"] == options[1]
        else:
            assert [wanted, f"step #{slowest} (slowest of those left out of the detail)"] in options
            assert options[1][1].endswith("(slowest)")  # the detail's own slowest, which is slower
        assert ["run", "the spans in detail (every thread)"] in options  # not called the whole run
        p.eval(f"(() => {{ const s = document.getElementById('view-select'); s.value = '{wanted}'; "
               "s.dispatchEvent(new Event('change')); })()")  # fmt: skip
        assert p.eval("document.querySelector('.timeline h3').textContent").startswith(f"step #{slowest}")
        assert p.eval("document.querySelector('.timeline').querySelectorAll('.bar.launch, .bar.copy').length") == 3
        assert p.errors == [], p.errors


def test_report_within_its_detail_has_no_notice(trace_file: Path, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    assert main(["report", str(trace_file), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert 'id="large-notice"' not in html and 'id="steps-chart"' in html and 'id="launchtrace-data"' in html


def test_a_first_trace_larger_than_the_cap_is_shown_cut_and_the_rest_counted(trace_file: Path, tmp_path: Path) -> None:
    traces = _traces_in_order(trace_file)
    spans = sum(len(t) for t in traces)
    first = len(traces[0])
    assert first > 3
    page = tmp_path / "r.html"
    assert main(["report", str(trace_file), "--out", str(page), "--detail-spans", "3"]) == 0
    html = page.read_text(encoding="utf-8")
    assert "In detail: the first 3 spans (1 traces)" in html
    assert f"({first - 3:,} of its spans left out)" in html
    assert f"Left out of the detail: {STEPS - 1} traces, {spans - 3:,} spans" in html
    out = tmp_path / "c.json"
    assert main(["chrome-trace", str(trace_file), "--out", str(out), "--max-events", "2"]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    info = data["otherData"]["launchtrace"]
    shown = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(shown) == 2 and all("cut to 2 of its" in e["args"]["launchtrace.sample"] for e in shown)
    assert info["left_out"]["traces"] == STEPS - 1 and info["left_out"]["spans"] == spans - 2
    assert info["traces_cut"] == 1 and info["complete"] is False
    markers = [e["name"] for e in data["traceEvents"] if e["ph"] == "i"]
    assert len(markers) == 2 and "1 trace(s) too large to show whole" in markers[1]


def test_a_baseline_past_the_detail_is_read_as_the_input_is(trace_file: Path, tmp_path: Path) -> None:
    spans = sum(len(t) for t in _traces_in_order(trace_file))
    page = tmp_path / "r.html"
    argv = ["report", str(trace_file), "--baseline", str(trace_file), "--out", str(page), "--detail-spans", "40"]
    assert main(argv) == 0
    html = page.read_text(encoding="utf-8")
    note = html.split('id="diff-detail">', 1)[1].split("</p>", 1)[0]
    shown = int(note.split("the first ", 1)[1].split(" ", 1)[0])
    assert 0 < shown <= 40
    assert note == (
        f"Of the spans in detail: the first {shown} of the baseline&#x27;s {spans:,} against the first {shown} of "
        f"this input&#x27;s {spans:,} (--detail-spans)."
    )
    assert "topology: equal" in html  # the same detail on both sides


def test_the_step_chart_thins_evenly_and_keeps_the_slowest() -> None:
    points = StepPoints(10)
    for k in range(100):
        points.add(Step("step", 1000 * k, 500 if k != 77 else 9_000, 1, 1))  # the slowest: the 79th step seen
        if k == 3:
            points.add(Step("other", 1000 * k + 1, 100, 1, 1))  # the 5th step seen, its name's only one
    kept = points.result()
    # 101 steps: every 8th would be 13 points, over the cap of 10, so every 16th (7), plus the slowest of each name
    assert points.stride == 16 and points.seen == 101
    assert [p[0] for p in kept] == [0, 4, 16, 32, 48, 64, 78, 80, 96]
    assert [(p[1], p[2], p[4]) for p in kept if p[0] in (4, 78)] == [("other", 0, 100), ("step", 77, 9_000)]


def test_the_inputs_slowest_step_left_out_of_the_detail_is_shown_by_default(trace_file: Path, tmp_path: Path) -> None:
    """The last step made a second slower (its root span ends later): it is past the detail, and it is the
    slowest step of the input, so the timeline shows it by default instead of the detail's slowest."""
    traces = _traces_in_order(trace_file)
    last = traces[-1]
    slow = [dataclasses.replace(s, end_ns=s.end_ns + 10**9) if s.parent_span_id is None else s for s in last]
    path = tmp_path / "slow.jsonl"
    path.write_text(encode_line([s for t in traces[:-1] for s in t] + slow) + "\n", encoding="utf-8")
    page = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(page), "--detail-spans", "40"]) == 0
    island = page.read_text(encoding="utf-8").split('id="launchtrace-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(island)
    wanted = f"step#{STEPS - 1}"
    assert data["defaults"][1] == wanted
    view = next(v for v in data["views"] if v["id"] == wanted)
    assert view["label"] == f"step #{STEPS - 1} (slowest; left out of the detail)"
    assert sum(1 for it in view["items"] if it["k"] in ("launch", "copy")) == 3


def test_the_large_input_section_keeps_hostile_names_as_text(trace_file: Path, tmp_path: Path) -> None:
    """Step and kernel names come from other people's traces: in the exact-totals tables they stay text."""
    evil = '<img src=x onerror="document.title=1"></script><script>alert(1)</script> & "q"'
    spans = [
        dataclasses.replace(
            s,
            name=evil if s.parent_span_id is None else s.name,
            attributes=tuple((k, evil if k == "launchtrace.kernel" else v) for k, v in s.attributes),
        )
        for t in _traces_in_order(trace_file)
        for s in t
    ]
    path = tmp_path / "evil.jsonl"
    path.write_text(encode_line(spans) + "\n", encoding="utf-8")
    page = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(page), "--detail-spans", "40"]) == 0
    text = page.read_text(encoding="utf-8")
    section = text.split('<section id="large-input">', 1)[1].split("</section>", 1)[0]
    escaped = "&lt;img src=x onerror=&quot;document.title=1&quot;&gt;&lt;/script&gt;&lt;script&gt;alert(1)"
    assert section.count(escaped) == 1 + 2  # the step row; one kernel row per op (launch, copy), all one name

    found: list[tuple[str, dict]] = []

    class Tags(html.parser.HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Tags().feed(text)
    assert [t for t, _ in found if t == "script"] == ["script", "script"]  # the page's own two
    images = [a for t, a in found if t == "img"]  # only the report's own graph, as a data: image
    assert all(a.get("alt") == "dataflow graph" and a["src"].startswith("data:image/svg+xml;") for a in images)
    assert not [t for t, a in found if any(k.startswith("on") for k in a)]
