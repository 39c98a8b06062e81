"""The first hour with your own program (issue 23): ``docs/guide/examples/springs.py`` (classes owning arrays, a
``wp.Tape``, ScopedTimers, no launchtrace call) run under ``launchtrace run`` as real subprocesses on the CPU
device, then read by the analyzer commands.

- with a cold kernel cache (``WARP_CACHE_PATH`` in a temporary folder) Warp's compile is a
  ``warp.module.load`` span of its own, outside every launch span;
- forward and adjoint launches are rows of their own in ``summary``; the Tape passes become scope spans where
  no timer covers them;
- ``--value-stats`` and a NaN written at step 3: ``summary`` names the kernel, the step and the array, and
  ``diff`` against a clean run reports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchtrace import conventions as C
from launchtrace.capture.tapeload import module_load_of
from test_pipeline import file_spans

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "docs" / "guide" / "examples" / "springs.py"
LAUNCHTRACE = [sys.executable, "-m", "launchtrace"]
ITERATIONS, SUBSTEPS = 6, 4


def _run(out: Path, *args: str, cache: Path | None = None, value_stats: bool = True) -> None:
    env = dict(os.environ)
    if cache is not None:
        env["WARP_CACHE_PATH"] = str(cache)
    flags = ["--value-stats"] if value_stats else []
    done = subprocess.run(
        [*LAUNCHTRACE, "run", "--out", str(out), *flags, str(PROGRAM), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LAUNCHTRACE, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A cold-cache run writing a NaN at step 3, a clean warm run, and a run without timers."""
    tmp = tmp_path_factory.mktemp("first_hour")
    paths = {"nan": tmp / "nan.jsonl", "clean": tmp / "clean.jsonl", "bare": tmp / "bare.jsonl"}
    _run(paths["nan"], "3", cache=tmp / "kernel-cache")
    _run(paths["clean"], cache=tmp / "kernel-cache")
    _run(paths["bare"], "--bare", value_stats=False)
    return paths


def test_a_cold_compile_is_a_load_span_outside_every_launch(runs):
    spans = file_spans(runs["nan"])
    loads = [s for s in spans if s.name == "warp.module.load"]
    compiled = [s for s in loads if s.attribute(C.LOAD_RESULT) == "compiled"]
    assert [s.attribute(C.LOAD_MODULE) for s in compiled] == ["__main__"]
    assert compiled[0].attribute(C.LOAD_DEVICE) == "cpu"
    assert compiled[0].attribute(C.SCOPE_KIND) == "load"
    launches = [s for s in spans if s.attribute(C.OP) == "launch"]
    assert launches
    for load in loads:  # no launch span holds (any part of) a load
        for launch in launches:
            assert launch.end_ns <= load.start_ns or launch.start_ns >= load.end_ns, (launch.name, load.name)
    # the compile is in the load span: longer than any launch of these small kernels (ratio, not wall clock)
    load_ns = compiled[0].end_ns - compiled[0].start_ns
    assert max(s.end_ns - s.start_ns for s in launches) * 10 < load_ns


def test_the_warm_run_loads_from_the_kernel_cache(runs):
    loads = [s for s in file_spans(runs["clean"]) if s.name == "warp.module.load"]
    assert loads and {s.attribute(C.LOAD_RESULT) for s in loads} == {"cached"}


def _rows(summary: str) -> dict[str, int]:
    rows = {}
    for line in summary.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[0].startswith("__main__.") and parts[-5] == "|":
            name = " ".join(parts[: parts.index("launch")])
            rows[name] = int(parts[parts.index("launch") + 1])
    return rows


def test_summary_shows_adjoint_rows_apart_and_compile_on_its_own_line(runs):
    done = _cli("summary", str(runs["nan"]))
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    per_run = ITERATIONS * SUBSTEPS
    for kernel in ("spring_forces", "repulsion", "integrate"):
        assert rows[f"__main__.{kernel}"] == per_run
        assert rows[f"__main__.{kernel} (adjoint)"] == per_run
    assert rows["__main__.sgd"] == ITERATIONS and "__main__.sgd (adjoint)" not in rows
    assert "compile/load: " in done.stdout and "1 module (1 compiled" in done.stdout
    warm = [line for line in done.stdout.splitlines() if line.startswith("warm-up: ") and "'forward'" in line]
    assert warm and "of it compile/load" in warm[0]  # the scope that paid for the compile is named
    scope_table = done.stdout.split("time per scope")[1]
    assert "warp.module.load" not in scope_table.split("warm-up")[0]


def test_adjoint_span_names(runs):
    names = {s.name for s in file_spans(runs["nan"]) if s.attribute(C.OP) == "launch"}
    assert "__main__.repulsion (adjoint)" in names and "__main__.repulsion" in names
    for s in file_spans(runs["nan"]):
        if s.attribute(C.OP) == "launch":
            assert s.name.endswith(" (adjoint)") == bool(s.attribute(C.ADJOINT)), s.name


def test_summary_names_the_kernel_step_and_array_of_the_first_nan(runs):
    done = _cli("summary", str(runs["nan"]))
    values = done.stdout.split("values (--value-stats):")[1]
    first = values.strip().splitlines()[0]
    assert "NaN first written by __main__.blowup at step 3" in first
    assert "array State.x#" in first and "(parameter x)" in first and "springs.py:" in first  # allocation label
    as_json = json.loads(_cli("summary", "--format", "json", str(runs["nan"])).stdout)
    bad = as_json["non_finite"][0]
    assert (bad["kernel"], bad["step"], bad["param"], bad["what"]) == ("__main__.blowup", 3, "x", "NaN")
    clean = _cli("summary", str(runs["clean"])).stdout
    assert "values (--value-stats)" not in clean


def test_diff_reports_outputs_that_became_non_finite(runs):
    done = _cli("diff", str(runs["clean"]), str(runs["nan"]))
    assert done.returncode == 1
    assert "warp.module.load" not in done.stdout  # compile (B) against cache (A) is no timing group
    tail = done.stdout.split("non-finite in B and not in A:")[1].splitlines()
    assert "NaN first written by __main__.blowup at step 3" in tail[1]
    back = _cli("diff", str(runs["nan"]), str(runs["nan"]))
    assert "non-finite in B" not in back.stdout


def test_tape_passes_become_scopes_where_no_timer_covers_them(runs):
    spans = file_spans(runs["bare"])
    scopes = [s for s in spans if s.attribute(C.SCOPE_KIND) == "tape"]
    names = [s.name for s in scopes]
    assert names.count("tape.forward") == ITERATIONS and names.count("tape.backward") == ITERATIONS
    by_id = {s.span_id: s for s in spans}
    adjoint = [s for s in spans if s.attribute(C.ADJOINT)]
    assert adjoint and all(by_id[s.parent_span_id].name == "tape.backward" for s in adjoint)
    timed = file_spans(runs["clean"])  # with the timers: the timers say it, no tape span of ours
    assert not [s for s in timed if s.name in ("tape.forward", "tape.backward")]


@pytest.mark.parametrize(
    ("name", "module", "device"),
    [
        ("Module __main__ 20c0135 load on device 'cpu'", "__main__", "cpu"),
        ("Module warp.fem.utils load on device 'cuda:0'", "warp.fem.utils", "cuda:0"),
        ("Module __main__ 20c0135 load on device 'cpu' (block_dim=256)", "__main__", "cpu"),
    ],
)
def test_module_load_timer_names(name, module, device):
    assert module_load_of(name) == ((C.LOAD_MODULE, module), (C.LOAD_DEVICE, device))


@pytest.mark.parametrize("name", ["forward", "Compile x86", "Module load", "Modules loaded"])
def test_other_timers_are_not_loads(name):
    assert module_load_of(name) is None


def test_graph_draws_one_picture_per_distinct_topology_of_a_scope(runs, tmp_path):
    done = _cli("graph", str(runs["clean"]), "--scope", "forward", "--out", str(tmp_path / "g"), "--formats", "svg")
    assert done.returncode == 0, done.stderr
    pictures = sorted(p.name for p in (tmp_path / "g").glob("*.svg"))
    assert len(pictures) == 1, pictures  # six identical occurrences (the first one's compile is no record)
    dot = next((tmp_path / "g").glob("*.dot")).read_text(encoding="utf-8")
    assert f"forward: {ITERATIONS} occurrences" in dot


def test_graph_caps_its_size_and_lists_the_rest(runs, tmp_path):
    done = _cli("graph", str(runs["clean"]), "--scope", "backward", "--max-nodes", "5", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    dot = next(tmp_path.glob("*.dot")).read_text(encoding="utf-8")
    assert dot.count('<TABLE BORDER="0" CELLBORDER="1"') == 5  # record nodes drawn
    assert "more records not drawn (cap: 5 nodes)" in dot and "(adjoint) x" in dot
    assert 'size="80,80"' in dot
    png = next(tmp_path.glob("*.png")).read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert max(width, height) <= 80 * 96


def test_report_keeps_the_catch_all_root_off_the_step_chart_and_shows_values(runs, tmp_path):
    page = tmp_path / "report.html"
    done = _cli("report", str(runs["nan"]), "--out", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    data = json.loads(html.split('id="launchtrace-data">')[1].split("</script>")[0])
    names = {s["n"] for s in data["steps"]}  # the repeating timers are inferred steps; no catch-all plotted
    assert names == {"forward+backward+update"} and len(data["steps"]) == ITERATIONS
    assert 'id="steps-apart"' in html and "&lt;no scope&gt; step(s)" in html
    first = next(s for s in data["steps"] if s["i"] == 0)  # holds the cold compile
    assert first["ld"] > 10 * first["d"] and 'id="steps-loads"' in html  # the point is the step without it
    assert all(s["ld"] == 0 for s in data["steps"] if s is not first)
    assert "compile/load</dt><dd>" in html and "1 compiled" in html
    values = html.split('<section id="values"')[1].split("</section>")[0]
    assert "NaN first written by __main__.blowup at step 3" in values and "(parameter x)" in values
    assert any(row["k"].endswith(" (adjoint)") for row in data["kernels"]["all"])
    bars = [item for view in data["views"] for item in view["items"] if item["k"] == "launch"]
    assert any(b["n"] == "__main__.repulsion (adjoint)" for b in bars) and any(
        b["n"] == "__main__.repulsion" for b in bars
    )


def test_the_package_docstring_example_exports(tmp_path):
    """``help(launchtrace)``'s example, run as written (with a kernel and arrays defined first), writes spans."""
    import launchtrace

    doc = launchtrace.__doc__ or ""
    example = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    code = "\n".join(line[4:] for line in example.splitlines())
    assert "start_export(" in code
    preamble = (
        "import warp as wp\n"
        "wp.config.quiet = True\n"
        "@wp.kernel\n"
        "def integrate(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float):\n"
        "    i = wp.tid()\n"
        "    x[i] = x[i] + v[i] * dt\n"
        "n = 8\n"
        "x, v, dt = wp.zeros(n, dtype=float), wp.ones(n, dtype=float), 0.1\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    program = tmp_path / "example.py"  # a file: Warp reads a kernel's source
    program.write_text(preamble + code + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    spans = file_spans(tmp_path / "launches.jsonl")
    assert [s.name for s in spans if s.attribute(C.OP) == "launch"] == ["__main__.integrate"]
    assert any(s.name == "step" for s in spans)


def _rec(thread: int, start: int, end: int):
    from launchtrace.model import UNKNOWN_SITE, LaunchRecord

    return LaunchRecord("launch", "m.k", (1,), None, (), (), UNKNOWN_SITE, thread=thread, start_ns=start, end_ns=end)


def test_the_launch_that_held_a_load_starts_where_the_load_ended_even_a_drain_later():
    from launchtrace.capture.materialize import _start_after_loads
    from launchtrace.model import ScopeRecord

    pending: dict[int, list[int]] = {}
    load = ScopeRecord(id=1, name="warp.module.load", kind="load", thread=1, start_ns=60, end_ns=100)
    first = [("record", _rec(1, 10, 20)), ("scope_end", load), ("record", _rec(2, 50, 200))]
    _start_after_loads(first, pending)
    assert [item.start_ns for kind, item in first if kind == "record"] == [10, 50]  # before it; another thread
    assert list(pending) == [1] and pending[1][0] == 100
    later = [("record", _rec(1, 50, 250)), ("record", _rec(1, 300, 310))]  # the next drain
    _start_after_loads(later, pending)
    assert [(item.start_ns, item.end_ns) for _, item in later] == [(100, 250), (300, 310)]
    assert pending == {}
    alone = [("scope_end", load), ("record", _rec(1, 150, 160))]  # a load outside any launch (wp.load_module)
    _start_after_loads(alone, pending)
    assert alone[1][1].start_ns == 150 and pending == {}
    orphan = [("scope_end", load)]  # a load no launch follows (its thread ended): forgotten after a few drains
    _start_after_loads(orphan, pending)
    for _ in range(8):
        _start_after_loads([("record", _rec(2, 400, 410))], pending)
    assert pending == {}


def test_the_report_page_in_chromium_elides_from_the_left_and_fits_the_graph_on_click(runs, tmp_path):
    """Real headless Chromium (tests/chromium_cdp.py): zoomed out, a short bar keeps the end of its kernel's
    name ('...repulsion (adjoint)'); zoomed in, tick labels are distinct; a click fits the graph to the width."""
    from chromium_cdp import CHROMIUM, Page

    if CHROMIUM is None:  # CI installs it (README's test command)
        pytest.fail("chromium is not installed")
    page_path = tmp_path / "report.html"
    assert _cli("report", str(runs["nan"]), "--out", str(page_path)).returncode == 0
    with Page.open(page_path, tmp_path) as page:
        box = page.eval(
            "(() => { document.querySelector('.timeline').scrollIntoView(); "
            "const s = document.querySelector('.timeline .tl-body').getBoundingClientRect(); "
            "return [s.left, s.top, s.width, s.height]; })()"
        )
        seen: list = []
        for _ in range(12):  # zoom in step by step: bars go from empty, to elided, to whole names
            page.wheel(box[0] + box[2] * 0.3, box[1] + box[3] / 2, -250)
            seen += page.eval(
                "[...document.querySelectorAll('.timeline .bar.launch')].filter(b => b.style.display !== 'none')"
                ".map(b => [b.textContent, b.dataset.label, b.getBoundingClientRect().width])"
            )
        elided = [(text, full) for text, full, _ in seen if text.startswith("...")]
        assert elided, sorted({(text, round(w)) for text, _, w in seen})[:20]
        assert all(full.endswith(text[3:]) and len(text) >= 8 for text, full in elided), elided
        assert all(text in ("", full) or text.startswith("...") for text, full, _ in seen)
        ticks = page.eval("[...document.querySelector('.timeline .axis').children].map(t => t.textContent)")
        assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks
        graph = "document.querySelector('#dataflow .graph')"
        natural = page.eval(f"{graph}.querySelector('img').getBoundingClientRect().width")
        page.eval(f"{graph}.scrollIntoView(); {graph}.click()")
        fitted = page.eval(f"{graph}.querySelector('img').getBoundingClientRect().width")
        assert page.eval(f"{graph}.classList.contains('fit')") and fitted < natural
        assert not page.errors


def test_a_failed_module_load_is_counted_as_failed_not_cached():
    from launchtrace.analysis.loads import module_loads
    from launchtrace.model import ScopeRecord, TraceData

    def load(i: int, result: str) -> ScopeRecord:
        attrs = ((C.LOAD_MODULE, f"m{i}"), (C.LOAD_DEVICE, "cpu"), (C.LOAD_RESULT, result))
        return ScopeRecord(
            id=i, name="warp.module.load", kind="load", thread=1, start_ns=0, end_ns=10, attributes=attrs
        )

    trace = TraceData(records=(), scopes={i: load(i, r) for i, r in enumerate(("compiled", "cached", "error"), 1)})
    line = module_loads([trace]).line()
    assert "3 modules (1 compiled, 1 cached, 1 failed;" in line, line
    assert "failed" not in module_loads([TraceData(records=(), scopes={1: load(1, "cached")})]).line()
