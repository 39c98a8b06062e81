"""Nothing from a trace is executed or interpolated unescaped, and attribute values are bounded in size.

Traces are other people's data. Here a real Warp run (CPU) is exported with hostile scope names, scope
attributes and owner labels, and its file is further edited to give kernels, modules and source paths
hostile names (HTML and script injection, DOT quoting and HTML labels, shell substitutions, path traversal).
Then every renderer runs on it through the real commands:

- ``report``: the page is loaded in headless Chromium (``--dump-dom``); no injected script or handler runs
  and the page has exactly the script elements of a benign report;
- ``graph``: Graphviz ``dot`` parses the DOT and renders SVG with exactly the nodes of the benign trace;
- ``chrome-trace``: valid JSON, hostile names kept verbatim as data;
- no shell substitution runs (no file appears), and output files stay inside the output folder.
"""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

import launchtrace
import launchtrace.capture as capture
import launchtrace.export as export
from launchtrace import conventions as C
from launchtrace.cli import main

PWN = "document.title='PWNED'"
HOSTILE = (
    f'</script><script>{PWN}</script><img src=x onerror="{PWN}">'
    '"]; injected [label="x"]; <<b>b</b>> \\" '
    "$(touch PWNED_SUBST) `touch PWNED_TICK` ; touch PWNED_SEMI ../../escape"
)
EDITED = {C.KERNEL, C.MODULE, C.CODE_FILEPATH, C.CODE_FILE_PATH, C.CODE_FUNCTION, C.CODE_FUNCTION_NAME}


def export_run(path: Path, hostile: bool) -> None:
    import warp_programs

    sim = warp_programs.Sim(seed=5)
    sim.step()
    name = HOSTILE if hostile else "step"
    export.start_export(file_path=str(path), truncate=True, fold=False)
    try:
        launchtrace.own(sim, HOSTILE if hostile else "sim")
        for i in range(3):
            with launchtrace.scope(name, note=HOSTILE if hostile else "plain", i=i):
                sim.step()
        export.stop_export(20)
    finally:
        capture.uninstrument()
    if hostile:  # kernels, modules and sources with hostile names: as another writer's trace could have
        lines = []
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            for rs in doc["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        for attr in span.get("attributes", []):
                            if attr["key"] in EDITED and "stringValue" in attr["value"]:
                                attr["value"]["stringValue"] = HOSTILE + attr["value"]["stringValue"]
            lines.append(orjson.dumps(doc))
        path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.fixture(scope="module")
def traces(warp_cpu, tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("content")
    out = {"benign": d / "benign.jsonl", "hostile": d / "hostile.jsonl"}
    export_run(out["benign"], hostile=False)
    export_run(out["hostile"], hostile=True)
    assert HOSTILE.encode() in out["hostile"].read_bytes() or b"PWNED" in out["hostile"].read_bytes()
    return out


@pytest.fixture
def in_tmp_cwd(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def no_substitution_ran(*folders: Path) -> None:
    for folder in folders:
        found = [p for p in folder.rglob("PWNED*")]
        assert not found, found


class Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(text: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(text)
    return parser.tags


# -- report (HTML) -------------------------------------------------------------------------------------------
def render_report(trace: Path, out: Path, capsys) -> str:
    assert main(["report", str(trace), "--out", str(out), "--title", HOSTILE]) == 0, capsys.readouterr().err
    return out.read_text(encoding="utf-8")


def test_report_escapes_everything_and_no_injected_script_runs_in_chromium(traces, in_tmp_cwd, capsys):
    benign = render_report(traces["benign"], in_tmp_cwd / "benign.html", capsys)
    hostile = render_report(traces["hostile"], in_tmp_cwd / "hostile.html", capsys)
    b_tags, h_tags = tags_of(benign), tags_of(hostile)
    assert [t for t, _ in h_tags if t == "script"] == [t for t, _ in b_tags if t == "script"]
    assert [t for t, _ in h_tags if t == "img"] == [t for t, _ in b_tags if t == "img"]  # the report's own graph
    assert not [t for t, a in h_tags if any(k.startswith("on") for k in a)]  # no event handler anywhere
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (the static checks above ran)")

    def dump(page: Path) -> str:
        return subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000", "--dump-dom",
             page.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        ).stdout  # fmt: skip

    control = in_tmp_cwd / "control.html"  # the same payload unescaped: proves the harness sees scripts run
    control.write_text(f"<html><head><title>x</title></head><body>{HOSTILE}</body></html>")
    assert "<title>PWNED</title>" in dump(control)
    dom = dump(in_tmp_cwd / "hostile.html")
    assert "<html" in dom.lower()
    title = dom.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title != "PWNED" and title.startswith("&lt;/script&gt;")  # still our escaped title: nothing ran
    assert not [t for t, a in tags_of(dom) if any(k.startswith("on") for k in a)]
    no_substitution_ran(in_tmp_cwd)


# -- graph (DOT, SVG) ---------------------------------------------------------------------------------------
def test_graph_dot_parses_and_draws_exactly_the_benign_nodes(traces, in_tmp_cwd, capsys):
    if shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed")
    counts = {}
    for kind in ("benign", "hostile"):
        out = in_tmp_cwd / f"graphs-{kind}"
        rc = main(["graph", str(traces[kind]), "--out", str(out), "--formats", "svg"])
        assert rc == 0, capsys.readouterr().err
        svgs = sorted(out.glob("*.svg"))
        assert svgs and all(p.parent == out for p in out.rglob("*"))  # nothing outside the folder
        assert all(p.name.startswith("run0-") for p in out.iterdir())
        text = "".join(p.read_text() for p in svgs)
        assert not [t for t, a in tags_of(text) if t in ("script", "img") or any(k.startswith("on") for k in a)]
        counts[kind] = (text.count('class="node"'), text.count('class="edge"'))
        if kind == "hostile":
            assert "injected" not in [a.get("id") for _, a in tags_of(text)]
    assert counts["hostile"] == counts["benign"]
    no_substitution_ran(in_tmp_cwd)


# -- chrome trace (JSON) ------------------------------------------------------------------------------------
def test_chrome_trace_keeps_hostile_names_as_data(traces, in_tmp_cwd, capsys):
    out = in_tmp_cwd / "chrome.json"
    assert main(["chrome-trace", str(traces["hostile"]), "--out", str(out)]) == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e.get("name") for e in events}
    assert any(HOSTILE in (n or "") for n in names)  # verbatim, as data
    no_substitution_ran(in_tmp_cwd)


def test_text_commands_print_hostile_names_on_one_line_each(traces, in_tmp_cwd, capsys):
    for argv in (["summary", str(traces["hostile"])], ["dataflow", str(traces["hostile"])],
                 ["diff", str(traces["benign"]), str(traces["hostile"])],
                 ["check-static", str(traces["hostile"]), "--scope", HOSTILE]):  # fmt: skip
        rc = main(argv)
        captured = capsys.readouterr()
        assert rc in (0, 1), (argv[0], captured.err[-300:])
        assert "Traceback" not in captured.err
    no_substitution_ran(in_tmp_cwd)


# -- output paths ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../escape.dot", "/etc/passwd", "a/../../b.svg", "..", "x/../../../y", "\x00z"])
def test_output_names_cannot_leave_the_output_folder(name, tmp_path):
    from launchtrace.cli._analyzer import safe_child
    from launchtrace.errors import UserError

    folder = tmp_path / "out"
    folder.mkdir()
    try:
        path = safe_child(folder, name)
    except UserError:
        return
    assert path.parent == folder.resolve() and "\x00" not in str(path)


# -- bounded attribute values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [None, 64])
def test_attribute_values_are_bounded_in_size(limit, warp_cpu, tmp_path, monkeypatch):
    import warp_programs

    if limit is not None:
        monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", str(limit))
    bound = limit or 2048  # ExportConfig.max_attribute_length's default
    path = tmp_path / "big.jsonl"
    sim = warp_programs.Sim(seed=6)
    sim.step()
    export.start_export(file_path=str(path), truncate=True, fold=False)
    try:
        launchtrace.own(sim, "o" * 100_000)
        with launchtrace.scope("s" * 100_000, note="n" * 1_000_000, items="x" * 50_000):
            sim.step()
        final = export.stop_export(20)
    finally:
        capture.uninstrument()
    assert final.dropped == 0 and final.exported > 0
    assert os.path.getsize(path) < 200_000  # a megabyte of attributes did not reach the file
    longest = 0
    for line in path.read_bytes().splitlines():
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for attr in span.get("attributes", []):
                        value = attr["value"].get("stringValue", "")
                        longest = max(longest, len(value))
    assert 0 < longest <= bound
