"""The HTML report, opened in headless Chromium: loads with no console errors, shows every launch, and
renders strings from traces as inert text."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.stats import kernel_stats
from launchtrace.model import ScopeRecord, TraceData
from launchtrace.render.diff_text import diff_as_text
from launchtrace.render.dot import render_dot
from launchtrace.render.escape import json_for_script
from launchtrace.render.graphviz import dot_available, run_dot
from launchtrace.render.html import render_report
from test_analysis_programs import run_program

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
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


def _traces() -> tuple[TraceData, TraceData]:
    before = run_program("base", 3)
    after = run_program("insert", 3)
    evil_scope = next(iter(after.scopes.values()))
    after.scopes[evil_scope.id] = dataclasses.replace(evil_scope, name=EVIL, attributes=(("note", EVIL),))
    after.records[0] = dataclasses.replace(after.records[0], kernel=EVIL)
    return before, after


@needs_chromium
def test_report_loads_cleanly_and_shows_every_launch(tmp_path: Path) -> None:
    before, after = _traces()
    svg = run_dot(render_dot(after, build_dataflow(after)), "svg") if dot_available() else None
    html = render_report(
        [after],
        stats=kernel_stats([after]),
        diff_text=diff_as_text(diff_traces(before, after)),
        graph_svg=svg,
        title=EVIL,
    )
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched at view time
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    dom, stderr = open_in_chromium(page, tmp_path)
    assert _console_lines(stderr) == []
    items = len(after.records) + len(after.scopes)
    assert f'data-rendered="{items}"' in dom
    bars = re.findall(r'<div class="bar (\w+)" data-record="(\d+)"', dom)
    assert sorted(int(i) for _, i in bars) == list(range(len(after.records)))  # every launch, once
    assert {kind for kind, _ in bars} == {"launch", "copy"}
    # the hostile strings are text: escaped in the DOM, no element made from them
    assert "<img src=" not in dom and "<script>alert" not in dom
    assert dom.count("&lt;img src=x onerror=") >= 3  # title, scope bar, kernel bar / stats table
    assert "3 inserted" in dom and "dataflow graph" in dom
    # the diff keeps its lines (identical steps grouped: "scope step 2 occurrences #0-#1: ...")
    assert re.search(r"changed\)\nscope \S+ (#0|\d+ occurrences #0-#\d+): 3 -&gt; 4 records\n", dom)


def test_json_island_cannot_close_its_script_element() -> None:
    text = json_for_script({"k": EVIL})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text


@needs_chromium
def test_a_console_error_would_be_caught(tmp_path: Path) -> None:
    """The check above is only worth something if it sees errors: a page that throws must be flagged."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    _, stderr = open_in_chromium(page, tmp_path)
    assert any("boom" in line for line in _console_lines(stderr))


def test_report_without_traces_or_graph_still_renders() -> None:
    html = render_report([TraceData([], {1: ScopeRecord(1, "s", "user", start_ns=1, end_ns=2)})], graph_note="none")
    assert "launchtrace-data" in html and "none" in html
