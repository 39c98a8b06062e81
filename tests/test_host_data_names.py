"""The program's own NumPy memory and its unowned Warp arrays read as the code does in every view, never as an
address: a real Warp program (CPU) run under ``launchtrace run`` uploads with ``wp.array(numpy_array)`` inside
``wp.ScopedTimer("step")`` each step, works on temporaries and reads back with ``array.numpy()``.

Before, ``report`` showed the upload's source as ``arg src 0x5610f015ec30``, ``graph`` drew it as an ellipse
labelled with that address, ``dataflow --format json`` and ``chrome-trace`` printed it too, while ``diff``
already called it ``<host data>``. Now every view calls it ``<host data> (prog.py:<line>)`` (diff's name with
the copy's call site) through :meth:`launchtrace.model.LaunchRecord.buffer_label`."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from launchtrace.analysis.dataflow import build_dataflow
from launchtrace.analysis.segments import HOST_DATA
from launchtrace.cli import main
from launchtrace.model import Fold, TraceData
from launchtrace.render.timeline import timeline_items
from launchtrace.sources.loading import load_traces

PROGRAM = textwrap.dedent(
    """
    import numpy as np
    import warp as wp
    import launchtrace

    wp.config.quiet = True

    @wp.kernel
    def scale(x: wp.array(dtype=float), y: wp.array(dtype=float), s: float):
        i = wp.tid()
        y[i] = x[i] * s

    @wp.kernel
    def add(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = a[i] + b[i]

    n = 16
    state = wp.zeros(n, dtype=float, device="cpu")
    launchtrace.own(state, "state")  # the program labels a buffer: the others are foreign
    for step in range(4):
        with wp.ScopedTimer("step", print=False):
            forces = wp.array(np.full(n, float(step), dtype=np.float32), device="cpu")  # UPLOAD
            tmp = wp.empty(n, dtype=float, device="cpu")
            wp.launch(scale, dim=n, inputs=[forces, tmp, 0.5], device="cpu")
            wp.launch(add, dim=n, inputs=[state, tmp, state], device="cpu")
            result = state.numpy()
    print(result[:3])
    """
)
UPLOAD_LINE = next(i for i, line in enumerate(PROGRAM.splitlines(), 1) if line.endswith("# UPLOAD"))
HOST = f"{HOST_DATA} (prog.py:{UPLOAD_LINE})"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hostdata")
    script, out = tmp / "prog.py", tmp / "a.jsonl"
    script.write_text(PROGRAM)
    cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return out


def _host_pointers(path: Path) -> set[str]:
    """The addresses of the NumPy buffers the uploads copied from, as the old views printed them."""
    uploads = [r for t in load_traces([path]) for r in t.records if r.api == "wp.array"]
    assert len(uploads) == 4 and all(r.op == "copy" for r in uploads)
    return {f"0x{b.ptr:x}" for r in uploads for b in r.buffers if b.key == 1}


def _no_pointer(text: str, pointers: set[str]) -> None:
    assert not [p for p in pointers if p in text], pointers
    assert not re.findall(r"0x[0-9a-f]{9,}", text)  # nor any other heap address


def test_report_names_the_host_data_and_the_temporaries(run: Path, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    assert main(["report", str(run), "--out", str(page)]) == 0
    html = page.read_text()
    _no_pointer(html, _host_pointers(run))
    assert f'"arg src","\\u003chost data\\u003e (prog.py:{UPLOAD_LINE}) float32[16] r"' in html
    assert '"arg dest","forces' in html and '"arg y","tmp' in html  # temporaries by their allocation


def test_graph_draws_the_host_data_as_a_named_node(run: Path, tmp_path: Path) -> None:
    assert main(["graph", str(run), "--out", str(tmp_path), "--formats", ""]) == 0
    dot = (tmp_path / "run0-1-step.dot").read_text()
    _no_pointer(dot, _host_pointers(run))
    assert f'[label="{HOST}", shape=ellipse' in dot  # the input node
    assert f"&lt;host data&gt; (prog.py:{UPLOAD_LINE}) (r)" in dot  # the copy's src port


def test_dataflow_json_and_chrome_trace_name_it_too(run: Path, tmp_path: Path, capsys) -> None:
    assert main(["dataflow", str(run), "--format", "json"]) == 0
    text = capsys.readouterr().out
    _no_pointer(text, _host_pointers(run))
    buffers = {a["buffer"] for view in json.loads(text) for a in view["accesses"]}
    assert HOST in buffers and "state" in buffers  # an owned buffer keeps its owner; no "(foreign)" on host data
    out = tmp_path / "t.json"
    assert main(["chrome-trace", str(run), "--out", str(out)]) == 0
    events = json.loads(out.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    srcs = {
        e["args"]["arg src"] for e in events if e.get("name", "").endswith("wp.copy") and "arg src" in e.get("args", {})
    }
    assert srcs == {f"{HOST} float32[16] r"}
    _no_pointer(out.read_text(), _host_pointers(run))


def test_a_folded_upload_names_its_host_data(run: Path) -> None:
    """A fold's hover lists each position's arguments: the upload's source by the same name."""
    trace = next(t for t in load_traces([run]) if any(r.api == "wp.array" for r in t.records))
    recs = trace.records[:3]  # one step: the upload, the scale, the add
    fold = Fold("00ff", count=4, period=3, position=0, start_ns=recs[0].start_ns, end_ns=recs[-1].end_ns)
    folded = [dataclasses.replace(r, fold=dataclasses.replace(fold, position=i % 3)) for i, r in enumerate(recs)]
    items = timeline_items([TraceData(folded, trace.scopes, trace.attributes)])
    rows = [value for it in items if it.kind == "fold" for _, value in it.details]
    assert any(f"src={HOST}" in v for v in rows), rows


def test_other_unowned_buffers_keep_their_allocation_name(run: Path) -> None:
    """One naming function: a dataflow region, the report's row and the graph use ``buffer_label``."""
    trace = next(t for t in load_traces([run]) if any(r.api == "wp.array" for r in t.records))
    flow = build_dataflow(trace)
    labels = {a.region.label for a in flow.accesses}
    assert HOST in labels
    assert {lab.split(" (")[0].split("#")[0] for lab in labels} == {HOST_DATA, "state", "forces", "tmp"}


def test_check_static_names_a_foreign_buffer_instead_of_its_address(run: Path, capsys) -> None:
    """The program labels ``state``: the upload's two sides and the temporary are foreign, a warning each, that
    named them by address (``foreign buffer (warning): #0 wp.copy src: 0x55f1f8a86fc0``)."""
    assert main(["check-static", str(run), "--scope", "step"]) == 0
    text = capsys.readouterr().out
    _no_pointer(text, _host_pointers(run))
    assert f"#0 wp.copy src: {HOST} [4 occurrences]" in text
    assert "#0 wp.copy dest: forces (prog.py:" in text and "#1 __main__.scale y: tmp (prog.py:" in text


TWO_UPLOADS = textwrap.dedent(
    """
    import sys
    import numpy as np
    import warp as wp

    wp.config.quiet = True
    keep = sys.argv[1] == "keep"
    held = []
    for step in range(3):
        with wp.ScopedTimer("step", print=False):
            a = np.full(8, 1.0, dtype=np.float32)
            x = wp.array(a, device="cpu")
            if keep:
                held.append(a)  # the next temporary cannot take this address
            del a
            y = wp.array(np.full(8, 2.0, dtype=np.float32), device="cpu")
    """
)


@pytest.fixture(scope="module")
def two_uploads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``TWO_UPLOADS`` run with its NumPy temporaries kept alive (each at a new address) and freed."""
    tmp = tmp_path_factory.mktemp("twouploads")
    script = tmp / "two.py"
    script.write_text(TWO_UPLOADS)
    runs = {}
    for how in ("keep", "free"):
        runs[how] = tmp / f"{how}.jsonl"
        cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(runs[how]), str(script), how]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp)
        assert proc.returncode == 0, proc.stderr
    return runs


def test_snapshot_names_host_data_as_diff_does_whatever_the_allocator_did(two_uploads, tmp_path: Path) -> None:
    """A snapshot called the NumPy source of an upload ``<unowned #k>``, numbered by address: two uploads in a
    step were ``#0`` and ``#1`` where the C allocator gave the second temporary another address and ``#0``
    twice where it reused the first's, so a committed snapshot could fail on an unchanged program. It is
    ``<host data>``, as in ``diff``."""
    docs = []
    for how, trace in two_uploads.items():
        out = tmp_path / f"{how}.json"
        assert main(["snapshot", str(trace), "--scope", "step", "--out", str(out)]) == 0
        docs.append(json.loads(out.read_text())["launches"])
    assert [e["buffers"]["src"] for e in docs[0]] == [HOST_DATA, HOST_DATA]
    assert docs[0] == docs[1]


def test_check_static_says_whose_addresses_changed(two_uploads, capsys) -> None:
    """Host data kept alive is at a new address every step: check-static says so, naming it, where it printed
    only ``#0 wp.copy src: 0x55db14003390 -> 0x55db13ff21a0``."""
    assert main(["check-static", str(two_uploads["keep"]), "--scope", "step"]) == 1
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "buffer allocated per call: #0 wp.copy src:" in x)
    assert re.search(r"src: <host data> \(two\.py:\d+\) at 0x[0-9a-f]+ -> 0x[0-9a-f]+ \[2 occurrences\]", line), line
