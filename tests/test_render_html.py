"""The HTML report in real headless Chromium: every section's elements, the timeline's axis ticks, zoom and
pan changing the visible range, hover details, folded runs as one block, no console errors, screenshots; and
strings from traces rendered as inert text.

The interactive checks drive Chromium over the DevTools protocol (``tests/chromium_cdp.py``) with real
mouse-wheel, drag and hover input; the hostile-string check reads the DOM Chromium built (``--dump-dom``).
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from chromium_cdp import CHROMIUM, Page
from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.overview import overview
from launchtrace.cli import main
from launchtrace.model import ScopeRecord, TraceData
from launchtrace.render.dot import render_dot
from launchtrace.render.escape import json_for_script
from launchtrace.render.graphviz import dot_available, run_dot
from launchtrace.render.html import render_report
from test_analysis_programs import run_program, write_substep_file, write_trace_file

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")

EVIL = '<img src=x onerror="document.title=1"></script><script>alert(1)</script> & "q" \u2028'


def open_in_chromium(page: Path, tmp_path: Path) -> tuple[str, str]:
    """``(dom, stderr)`` of ``page`` loaded by headless Chromium with console logging on."""
    profile = tmp_path / "profile"
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
        "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, timeout=120, check=False, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a run with folded substeps (5 steps), diffed against a run without folding."""
    folder = tmp_path_factory.mktemp("report")
    run = write_substep_file(folder / "run.jsonl", fold=True, steps=5)
    base = write_substep_file(folder / "base.jsonl", fold=False, steps=5, substeps=5)
    page = folder / "report.html"
    assert main(["report", str(run), "--baseline", str(base), "--out", str(page), "--title", "nightly"]) == 0
    return page


@needs_chromium
def test_every_section_renders_and_the_timeline_zooms_and_pans(report: Path, tmp_path: Path) -> None:
    with Page.open(report, tmp_path) as page:
        facts = page.eval("Object.fromEntries([...document.querySelectorAll('.fact')].map(f => "
                          "[f.dataset.fact, f.querySelector('dd').textContent]))")  # fmt: skip
        assert facts["devices"] == "cpu" and facts["device operations"] == "90"
        assert facts["folded"].startswith(tuple(str(n) for n in range(1, 91))) and facts["dropped spans"] == "0"
        assert facts["pid"].isdigit() and "warp" in facts["versions"]
        # step durations: one point per occurrence, with ticks on its axis
        assert page.eval("document.querySelectorAll('#steps-chart circle.step-point').length") == 5
        assert page.eval("document.querySelectorAll('#steps-chart .tick-label').length") >= 3
        # kernel time: bars and a table (count, total, p50, p95, share) per scope
        rows = page.eval("[...document.querySelectorAll('#kernel-table tbody tr')].map(r => "
                         "[...r.cells].map(c => c.textContent))")  # fmt: skip
        assert {r[0].rsplit(".", 1)[-1] for r in rows} == {"scale", "add", "copy"}
        assert all(r[2] == "30" for r in rows) and abs(sum(float(r[6][:-1]) for r in rows) - 100) < 0.5
        assert page.eval("document.querySelectorAll('#kernel-chart .kbar').length") == 3
        scopes = page.eval("[...document.querySelectorAll('#kernel-scope option')].map(o => o.value)")
        assert scopes == ["all", "step"]
        # timeline: the median and the slowest step by default, each with an axis with ticks
        views = page.eval("[...document.querySelectorAll('.timeline')].map(t => t.querySelector('h3').textContent)")
        assert views[0].endswith("(median)") and views[1].endswith("(slowest)")
        assert page.eval("document.querySelector('.timeline').dataset.ticks") >= "3"
        assert page.eval("document.querySelectorAll('.timeline')[0].querySelectorAll('.axis .tick').length") >= 3
        first = "document.querySelectorAll('.timeline')[0]"
        lanes = page.eval(f"[...{first}.querySelectorAll('.lane-name')].map(l => l.textContent)")
        assert lanes == ["thread MainThread"]
        # a folded run is one block labelled with its count, never a bar per repetition
        folds = page.eval(f"[...{first}.querySelectorAll('.bar.fold')].map(b => b.textContent)")
        assert folds and all("folded" in f and " x" in f for f in folds)
        bars = page.eval("document.querySelectorAll('.timeline')[0].querySelectorAll('.bar.launch, .bar.copy').length")
        assert bars < 18  # 18 device operations in a step: most are inside the fold

        # zoom with the wheel, pan by dragging, reset
        def rng() -> tuple[float, float]:
            t = page.eval("(() => { const t = document.querySelector('.timeline'); "
                          "return [Number(t.dataset.viewStart), Number(t.dataset.viewEnd)]; })()")  # fmt: skip
            return t[0], t[1]

        box = page.eval("(() => { const r = document.querySelector('.timeline .tl-body').getBoundingClientRect(); "
                        "return [r.left, r.top, r.width, r.height]; })()")  # fmt: skip
        page.eval("document.querySelector('.timeline').scrollIntoView()")
        box = page.eval("(() => { const r = document.querySelector('.timeline .tl-body').getBoundingClientRect(); "
                        "return [r.left, r.top, r.width, r.height]; })()")  # fmt: skip
        x, y = box[0] + 170 + (box[2] - 170) / 2, box[1] + box[3] / 2
        before = rng()
        ticks_before = page.eval("document.querySelector('.timeline .axis').textContent")
        page.wheel(x, y, -600)
        zoomed = rng()
        assert zoomed[1] - zoomed[0] < 0.6 * (before[1] - before[0])  # the visible range shrank
        assert before[0] <= zoomed[0] and zoomed[1] <= before[1]  # around the cursor, inside the old range
        assert page.eval("document.querySelector('.timeline .axis').textContent") != ticks_before  # new ticks
        page.drag(x, y, x + 200, y)
        panned = rng()
        assert panned[0] < zoomed[0] and abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 1e-3 * zoomed[1]
        page.screenshot(tmp_path / "zoomed.png")
        page.eval("document.getElementById('zoom-reset').click()")
        assert rng() == before
        page.hover(x, y)  # the keys act on the timeline under the mouse, as in Perfetto
        page.key("w")
        keyed = rng()
        assert keyed[1] - keyed[0] < before[1] - before[0]
        page.key("d")
        moved = rng()
        assert moved[0] > keyed[0] and abs((moved[1] - moved[0]) - (keyed[1] - keyed[0])) < 1e-3 * keyed[1]
        page.eval("document.getElementById('zoom-reset').click()")
        # hover details: owners, arguments and the call site
        page.eval("document.querySelector('.timeline').scrollIntoView()")
        bar = page.eval("(() => { const b = document.querySelector('.timeline .bar.launch') || "
                        "document.querySelector('.timeline .bar.fold'); const r = b.getBoundingClientRect(); "
                        "return [r.left + Math.min(r.width / 2, 3), r.top + r.height / 2]; })()")  # fmt: skip
        page.hover(*bar)
        tip = page.eval("document.getElementById('tip').textContent")
        assert page.eval("getComputedStyle(document.getElementById('tip')).display") == "block"
        assert "site" in tip and "sim." in tip and "test_analysis_programs.py" in tip
        # choosing another step from the selector
        page.eval("(() => { const s = document.getElementById('view-select'); s.value = 'step#3'; "
                  "s.dispatchEvent(new Event('change')); })()")  # fmt: skip
        (shown,) = page.eval("[...document.querySelectorAll('.timeline h3')].map(h => h.textContent)")
        assert shown.startswith("step #3")  # "step #3 (median)" when it is the median one
        # dataflow of the representative step, hazards; the diff: topology first, then timing verdicts
        assert page.eval("document.querySelector('#dataflow .note').textContent").startswith("The representative step")
        if dot_available():
            assert page.eval("document.querySelector('#dataflow img').naturalWidth") > 100
        assert page.eval("document.getElementById('no-hazards').textContent") == "none found"
        diff = page.eval("document.getElementById('diff').textContent")
        assert diff.index("topology: differs") < diff.index("Timing")
        assert page.eval("document.querySelectorAll('#diff table.timing tbody tr').length") >= 3
        page.screenshot(tmp_path / "report.png", full_page=True)
        assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")
        assert page.errors == [], page.errors


@needs_chromium
def test_zoom_is_seen_by_the_harness_only_when_it_happens(report: Path, tmp_path: Path) -> None:
    """The zoom check above is worth something only if a wheel away from the timeline changes nothing."""
    with Page.open(report, tmp_path) as page:
        get = "document.querySelector('.timeline').dataset.viewEnd"
        before = page.eval(get)
        page.wheel(5, 5, -600)  # over the header, not the timeline
        assert page.eval(get) == before


def _hostile_traces() -> tuple[TraceData, TraceData]:
    before = run_program("base", 3)
    after = run_program("insert", 3)
    evil_scope = next(iter(after.scopes.values()))
    after.scopes[evil_scope.id] = dataclasses.replace(evil_scope, name=EVIL, attributes=(("note", EVIL),))
    after.records[0] = dataclasses.replace(after.records[0], kernel=EVIL)
    return before, after


@needs_chromium
def test_report_loads_cleanly_and_hostile_strings_stay_text(tmp_path: Path) -> None:
    before, after = _hostile_traces()
    svg = run_dot(render_dot(after, build_dataflow(after)), "svg") if dot_available() else None
    html = render_report(
        [after], overview([after]), diff=diff_traces(before, after), graph_svg=svg, hazards=[EVIL], title=EVIL
    )
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched at view time
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    dom, stderr = open_in_chromium(page, tmp_path)
    assert _console_lines(stderr) == []
    assert 'data-ready="1"' in dom
    bars = re.findall(r'<div class="bar (\w+)" data-record="(\d+)"', dom)
    assert {kind for kind, _ in bars} == {"launch", "copy"}
    assert sorted(int(i) for _, i in bars) == sorted([0, 1, 2, 3] * 2)  # the median and slowest step, every launch
    # the hostile strings are text: escaped in the DOM, no element made from them
    assert "<img src=x" not in dom and "<script>alert" not in dom
    assert dom.count("&lt;img src=x onerror=") >= 4  # title, header, scope bar, kernel bar / table, hazard
    assert "3 inserted" in dom and "dataflow graph" in dom


def test_json_island_cannot_close_its_script_element() -> None:
    text = json_for_script({"k": EVIL})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text


@needs_chromium
def test_a_console_error_would_be_caught(tmp_path: Path) -> None:
    """The checks above are only worth something if they see errors: a page that throws must be flagged."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    _, stderr = open_in_chromium(page, tmp_path)
    assert any("boom" in line for line in _console_lines(stderr))
    page.write_text("<html><body><script>document.body.dataset.ready='1'; throw new Error('boom')</script></body>")
    with Page.open(page, tmp_path) as p:
        assert any("boom" in e for e in p.errors)


def test_report_without_records_or_graph_still_renders() -> None:
    traces = [TraceData([], {1: ScopeRecord(1, "s", "user", start_ns=1, end_ns=2)})]
    html = render_report(traces, overview(traces), graph_note="none")
    assert "launchtrace-data" in html and "none" in html


def test_report_of_a_plain_trace_file_from_the_cli(tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    assert main(["report", str(write_trace_file(tmp_path / "t.jsonl", steps=3)), "--out", str(page)]) == 0
    html = page.read_text()
    assert 'id="steps-chart"' in html and 'id="kernel-table"' in html and 'id="timelines"' in html
    assert main(["report", str(tmp_path / "t.jsonl"), "--out", str(page), "--scope", "step", "--occurrence", "2"]) == 0
    assert "step #2" in page.read_text()


def test_streams_get_their_own_rows_and_captured_work_says_so() -> None:
    """A stream and a capture need CUDA: the records of a CPU run are given a stream, and the first one is
    marked captured into graph 5, with a replay after it."""
    import json

    from launchtrace.model import LaunchRecord

    trace = run_program("base", 1)
    recs = [dataclasses.replace(r, stream=0xABC, device="cuda:0") for r in trace.records]
    recs[0] = dataclasses.replace(recs[0], captured=True, graph_id=5)
    replay = dataclasses.replace(
        LaunchRecord("graph_launch", "wp.capture_launch", (), 0xABC, (), (), recs[0].site, device="cuda:0", graph_id=5),
        start_ns=recs[-1].end_ns + 10,
        end_ns=recs[-1].end_ns + 20,
        scope_id=recs[-1].scope_id,
        seq=recs[-1].seq + 1,
    )
    data = TraceData([*recs, replay], trace.scopes, trace.attributes)
    html = render_report([data], overview([data]))
    island = html.split('id="launchtrace-data">', 1)[1].split("</script>", 1)[0]
    view = json.loads(island)["views"][0]
    lanes = {(it["lk"], it["l"]) for it in view["items"]}
    assert lanes == {("thread", "thread MainThread"), ("stream", "cuda:0 stream 0xabc")}
    hovers = {it["n"]: dict(it["h"]) for it in view["items"]}
    assert hovers[recs[0].kernel]["captured"].startswith("into graph 5")
    assert hovers["wp.capture_launch"]["graph"] == "replays graph 5"
    kernels = {row["k"]: row["c"] for row in json.loads(island)["kernels"]["all"]}
    assert kernels[recs[0].kernel] == 1 and kernels["wp.capture_launch"] == 1  # captured once, replayed once
