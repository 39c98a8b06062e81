"""tinygrad as a second framework: real tinygrad 0.14 programs on its CPU device (clang), through the same records,
spans, rebuild and analyses as Warp. The graph-runner case runs tinygrad's NULL device in a subprocess (its
environment must be set before tinygrad is imported)."""

# ruff: noqa: E402  (tinygrad reads its environment at import: tp.configure_env() runs before the imports below)

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tinygrad_programs as tp

tp.configure_env("CPU")
tinygrad = pytest.importorskip("tinygrad")

import numpy as np
from tinygrad import Tensor, Variable
from tinygrad.engine import realize

import launchtrace
from launchtrace.analysis.dataflow import EdgeKind, build_dataflow
from launchtrace.analysis.static import check_static
from launchtrace.capture import bus, tinygrad_decode
from launchtrace.capture import tinygrad as tg_capture
from launchtrace.capture.materialize import materialize
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.otlp.json_codec import decode_traces_data, encode_line
from launchtrace.sources.rebuild import rebuild
from launchtrace.testing import trace_launches

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()


@pytest.fixture
def instrumented():
    newly = launchtrace.instrument()
    assert tg_capture.is_patched()
    yield
    if newly:
        launchtrace.uninstrument()


def line_of(text: str) -> int:
    """The line of this file holding ``text`` (the expected call site)."""
    for i, line in enumerate(HERE.read_text().splitlines(), 1):
        if text in line and "line_of(" not in line:
            return i
    raise AssertionError(text)


def test_elementwise_reduction_matmul_are_records_with_roles_sizes_and_sites(instrumented):
    with trace_launches(include_warp=True) as trace:
        a = Tensor([1.0, 2.0, 3.0, 4.0]).realize()  # upload: a copy from the PYTHON device
        b = (a * 2 + 1).realize()  # elementwise
        s = b.sum().realize()  # reduction
        m = (Tensor.ones(4, 8).contiguous() @ Tensor.ones(8, 3).contiguous()).realize()  # matmul
    assert b.numpy().tolist() == [3.0, 5.0, 7.0, 9.0] and s.item() == 24.0 and m.numpy()[0, 0] == 8.0
    ops = [(r.op, r.kernel) for r in trace]
    assert ops[0] == ("copy", "tinygrad.copy")
    assert all("\x1b" not in r.kernel for r in trace)
    copy, elem, red = trace.records[0], trace.records[1], trace.records[2]
    # the upload: dest on CPU written, src on PYTHON read, both 16 bytes of float
    assert [(x.name, x.access, x.nbytes, x.dtype) for x in copy.buffers] == [
        ("dest", "w", 16, "float"),
        ("src", "r", 16, "float"),
    ]
    assert dict(copy.scalars)[2] == "CPU" and dict(copy.scalars)[3] == "PYTHON"
    assert elem.op == "launch" and elem.device == "CPU" and elem.api == "tinygrad.realize"
    assert [x.access for x in elem.buffers] == ["w", "r"]
    assert elem.buffers[1].ptr == copy.buffers[0].ptr  # reads what the copy wrote
    assert red.buffers[0].nbytes == 4 and red.buffers[1].ptr == elem.buffers[0].ptr
    matmul = trace.records[-1]
    assert matmul.kernel.startswith("r_") and [x.access for x in matmul.buffers] == ["w", "r", "r"]
    assert matmul.buffers[0].nbytes == 4 * 3 * 4
    assert elem.site.file == str(HERE) and elem.site.line == line_of("b = (a * 2 + 1).realize()")
    assert matmul.site.line == line_of("m = (Tensor.ones(4, 8)")
    assert all(r.start_ns <= r.end_ns and r.duration_ns > 0 for r in trace)
    assert all(not r.internal for r in trace)


def test_copy_to_another_device_and_back_to_numpy(instrumented):
    with trace_launches(include_warp=True) as trace:
        a = (Tensor([1.0, 2.0, 3.0]) + 1).realize()
        b = a.to("PYTHON").realize()  # CPU -> PYTHON: the program's own copy
        out = b.numpy()
    assert out.tolist() == [2.0, 3.0, 4.0]
    copies = [r for r in trace if r.op == "copy"]
    moves = [(dict(r.scalars)[3], dict(r.scalars)[2], r.internal, r.api) for r in copies]
    assert ("CPU", "PYTHON", False, "tinygrad.realize") in moves
    to_python = next(r for r in copies if dict(r.scalars)[2] == "PYTHON")
    kernel = next(r for r in trace if r.op == "launch")
    assert to_python.buffers[1].ptr == kernel.buffers[0].ptr  # the copy reads the kernel's output


def test_numpy_copy_out_is_internal(instrumented):
    """``.numpy()`` of a tensor on a device without zero-copy access copies it out with ``update_stats=False``:
    an internal record, left out of a plain ``trace_launches`` block like Warp's own work."""
    with trace_launches(include_warp=True) as full:
        out = (Tensor([1.0, 2.0]).to("PYTHON") + 1).numpy()
    with trace_launches() as user_only:
        (Tensor([1.0, 2.0]).to("PYTHON") + 1).numpy()
    assert out.tolist() == [2.0, 3.0]
    internal = [r for r in full if r.internal]
    assert internal and all(r.api == "tinygrad.internal" and r.op == "copy" for r in internal)
    assert all(not r.internal for r in user_only) and len(user_only) > 0
    assert len(full) == len(user_only) + len(internal)


def test_symbolic_kernel_records_variable_values_and_resolved_sizes(instrumented):
    t = Tensor.ones(10).contiguous().realize()
    with trace_launches() as trace:
        for n in (3, 7):
            v = Variable("n", 1, 10).bind(n)
            t[:v].contiguous().realize()
    assert len(trace) == 2 and trace[0].kernel == trace[1].kernel
    values = [dict((r.arg_name(k), v) for k, v in r.scalars)["n"] for r in trace]
    assert values == [3, 7]
    assert all(isinstance(d, int) for r in trace for d in r.dim)


def _train(steps: int, n: int = 4) -> tuple[list, list]:
    """``steps`` scoped calls of a jitted MLP step after one warm-up call (the jit's eager call 0, which also
    runs the parameters' init kernels): the scoped calls are the jit's capture and its replays."""
    model, _opt, step = tp.make_training(seed=3)
    x, y = tp.batch(n)
    losses = []
    with launchtrace.scope("warmup"):
        losses.append(step(x, y).numpy().copy())
    for i in range(steps):
        with launchtrace.scope("step", i=i, batch=n):
            losses.append(step(x, y).numpy().copy())
    weights = [p.numpy().copy() for p in tinygrad.nn.state.get_parameters(model)]
    return losses, weights


def test_jitted_training_step_every_kernel_on_every_replay_and_same_numbers(instrumented):
    with trace_launches() as trace:
        losses, weights = _train(5)
    launchtrace.uninstrument()
    try:
        assert not tg_capture.is_patched() and "rewrite" not in realize.pm_exec.__dict__
        bare_losses, bare_weights = _train(5)
    finally:
        launchtrace.instrument()
    assert [a.tolist() for a in losses] == [b.tolist() for b in bare_losses]  # bit for bit
    assert all(np.array_equal(a, b) for a, b in zip(weights, bare_weights))
    steps = [s for s in sorted(trace.scopes.values(), key=lambda s: s.seq) if s.name == "step"]
    per_step = [[r for r in trace if r.scope_id == s.id] for s in steps]
    assert len(per_step) == 5
    assert all(r.api == "tinygrad.TinyJit" for recs in per_step for r in recs)
    shapes = [[(r.kernel, r.dim, tuple((b.nbytes, b.access) for b in r.buffers)) for r in recs] for recs in per_step]
    assert len(shapes[0]) >= 13 and all(s == shapes[0] for s in shapes)  # 9 step kernels + 4 write-backs
    # the jit's intermediates are views of one arena: the same base + offset on every replay
    where = [[(r.scalars, tuple(b.ptr for b in r.buffers)) for r in recs] for recs in per_step]
    assert all(w == where[0] for w in where)
    assert any("view_offset" in str(k) and v > 0 for k, v in per_step[0][0].scalars + per_step[0][1].scalars)
    report = check_static([trace.to_data()], "step")
    assert report.occurrences == 5 and report.static, report.findings


def _export(events: list) -> list:
    builder = SpanBuilder(ExportConfig.resolve(env={}, file_path="x.jsonl"), resource=(("service.name", "t"),))
    return builder.feed(events, now_ns=0) + builder.flush(now_ns=10**19)


def test_exported_spans_rebuild_losslessly(instrumented):
    sub = bus.subscribe(thread=__import__("threading").get_ident())
    try:
        _train(3)
        with launchtrace.scope("misc"):
            (Tensor.ones(10).contiguous()[: Variable("n", 1, 10).bind(4)] * 2).contiguous().realize()
    finally:
        sub.close()
    events = sub.drain()
    records = [item for kind, item in events if kind == "record"]
    assert len(records) > 30
    spans = _export(events)
    decoded, problems = decode_traces_data(json.loads(encode_line(spans)), where="test")
    assert not problems
    result = rebuild(decoded)
    assert result.skipped == 0 and result.warnings == []
    got = sorted(result.records(), key=lambda r: r.seq)
    assert [dataclasses.replace(r, template=None) for r in got] == [
        dataclasses.replace(r, template=None) for r in records
    ]


def test_inplace_assign_dataflow_follows_the_seed_rule(instrumented):
    """The seed orders a kernel that reads a buffer before the later kernel that assigns it (WAR); every edge
    the recorded roles give must be one the rule derives, and the WAR edge must be there."""
    w = Tensor.ones(8).contiguous().realize()
    with trace_launches() as trace:
        r = (w * 3).realize()  # reads w
        w.assign(w + r).realize()  # assigns w: must come after the read
        out = (w * 1).realize()  # reads the new w
    assert out.numpy().tolist() == [4.0] * 8
    recs = trace.records
    flow = build_dataflow(recs)
    edges = {(e.src, e.dst, e.kind) for e in flow.edges}
    # the seed's rule, applied to the recorded roles by buffer identity (address range)
    expected = set()
    for j, later in enumerate(recs):
        for i in range(j):
            earlier = recs[i]
            for bl in later.buffers:
                for be in earlier.buffers:
                    if bl.ptr != be.ptr:
                        continue
                    if "w" in be.access and "r" in bl.access:
                        expected.add((i, j, EdgeKind.RAW))
                    if "r" in be.access and "w" in bl.access:
                        expected.add((i, j, EdgeKind.WAR))
                    if "w" in be.access and "w" in bl.access:
                        expected.add((i, j, EdgeKind.WAW))
    assert (0, 1, EdgeKind.WAR) in edges  # the read of w before its assign
    assert (0, 1, EdgeKind.RAW) in edges  # the assign reads r, which the first kernel wrote
    assert (1, 2, EdgeKind.RAW) in edges
    assert edges <= expected and expected - edges <= {(i, j, k) for i, j, k in expected if j - i > 1}


def test_ownership_labels_model_and_optimizer_buffers_including_lazy_ones(instrumented):
    model, opt, step = tp.make_training(seed=5)
    x, y = tp.batch()
    assert model.l1.weight.uop.base.realized is None  # lazy until the first step
    launchtrace.own(model, "net")
    launchtrace.own(opt, "opt")
    try:
        with trace_launches() as trace:
            for _ in range(3):
                step(x, y)
        owners = {b.owner for r in trace for b in r.buffers if b.owner}
        assert {"net.l1.weight", "net.l1.bias", "net.l2.weight", "net.l2.bias", "opt.lr"} <= owners
        writes = {b.owner for r in trace.records[-13:] for b in r.buffers if b.owner and "w" in b.access}
        assert {"net.l1.weight", "net.l2.weight"} <= writes  # SGD's write-backs on a replay
        assert any(b.foreign for r in trace for b in r.buffers)  # the batch is not owned
    finally:
        launchtrace.disown("net")
        launchtrace.disown("opt")
    with trace_launches() as after:
        step(x, y)
    assert not any(b.owner for r in after for b in r.buffers)


def test_beam_timing_runs_are_left_out_unless_asked(instrumented):
    linear = (Tensor.ones(16).contiguous() + 1).schedule_linear()
    call = next(c for c in linear.src if c.src[0].op.name in ("SINK", "PROGRAM"))
    with trace_launches(include_warp=True) as off:
        next(realize.time_call(call))
    tg_capture.configure(record_beam=True)
    try:
        with trace_launches(include_warp=True) as on:
            next(realize.time_call(call))
    finally:
        tg_capture.configure(record_beam=False)
    assert len(off) == 0
    assert len(on) == 1 and on[0].api == "tinygrad.beam" and on[0].internal


def test_uninstrument_restores_a_wrapper_installed_before_us():
    launchtrace.uninstrument()
    pm = realize.pm_exec
    calls = []
    theirs_inner = pm.rewrite

    def theirs(call, ctx=None):
        calls.append(call)
        return theirs_inner(call, ctx)

    pm.rewrite = theirs
    try:
        launchtrace.instrument()
        assert pm.__dict__["rewrite"] is not theirs
        with trace_launches() as trace:
            (Tensor.ones(4).contiguous() * 5).realize()
        assert len(trace) >= 1 and len(calls) == len(trace)  # both wrappers ran
        launchtrace.uninstrument()
        assert pm.__dict__["rewrite"] is theirs
    finally:
        pm.__dict__.pop("rewrite", None)
    launchtrace.instrument()
    launchtrace.uninstrument()
    assert "rewrite" not in pm.__dict__
    launchtrace.instrument()


def test_every_open_subscription_gets_every_event_as_subscriptions_come_and_go(instrumented):
    """The hook queues straight into the one open subscription's queue and goes through ``bus.offer`` when
    there are several or they change: each subscription sees exactly the events queued while it was open, and a
    full one counts what it refused."""
    step = tp.make_training()[2]
    args = tp.batch()
    for _ in range(3):
        step(*args)  # compiled and captured: every later call is one jit replay of the same kernels
    first = bus.subscribe()
    step(*args)
    second = bus.subscribe()
    step(*args)
    first.close()
    step(*args)
    small = bus.subscribe(capacity=5)
    step(*args)
    second.close()
    small.close()
    per_step = len(first.drain_raw()) // 2
    seqs = [e[1] for e in second.drain_raw()]
    assert per_step >= 13 and len(seqs) == 3 * per_step and seqs == sorted(set(seqs))
    assert len(small.drain_raw()) == 5 and small.dropped == per_step - 5


def test_mixed_warp_and_tinygrad_in_one_scope_give_one_trace(instrumented):
    import warp as wp

    @wp.kernel
    def scale(x: wp.array(dtype=float), s: float):
        i = wp.tid()
        x[i] = x[i] * s

    arr = wp.ones(8, dtype=float, device="cpu")
    sub = bus.subscribe(thread=__import__("threading").get_ident())
    try:
        with launchtrace.scope("mixed"):
            wp.launch(scale, dim=8, inputs=[arr, 2.0], device="cpu")
            (Tensor.ones(8).contiguous() * 2).realize()
            with wp.ScopedTimer("warp-timer", print=False):  # a Warp scope around tinygrad work
                (Tensor.ones(8).contiguous() + 5).realize()
    finally:
        sub.close()
    spans = _export(sub.drain())
    result = rebuild(spans)
    assert len(result.traces) == 1
    (data,) = result.traces.values()
    apis = {r.api for r in data.records}
    assert "wp.launch" in apis and "tinygrad.realize" in apis
    paths = {(r.api, data.scope_path(r.scope_id)) for r in data.records}
    assert ("wp.launch", ("mixed",)) in paths and ("tinygrad.realize", ("mixed",)) in paths
    assert ("tinygrad.realize", ("mixed", "warp-timer")) in paths


GRAPH_PROGRAM = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    import tinygrad_programs as tp
    tp.configure_env("NULL")
    import launchtrace
    from launchtrace.testing import trace_launches
    launchtrace.instrument()
    model, opt, step = tp.make_training()
    x, y = tp.batch()
    with trace_launches() as trace:
        for i in range(4):
            with launchtrace.scope("step", i=i):
                step(x, y)
    graphs = [s for s in trace.scopes.values() if s.kind == "graph"]
    out = {{
        "graphs": [dict(id=s.id, parent=s.parent_id, attrs=dict(s.attributes), start=s.start_ns, end=s.end_ns)
                   for s in graphs],
        "records": [dict(kernel=r.kernel, scope=r.scope_id, api=r.api, start=r.start_ns, end=r.end_ns,
                         device=r.device) for r in trace],
        "steps": {{s.id: s.name for s in trace.scopes.values() if s.name == "step"}},
    }}
    print(json.dumps(out))
    """
)


def test_graph_runner_batch_is_a_scope_holding_its_kernels():
    env = {k: v for k, v in os.environ.items() if k not in ("DEV", "JIT")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", GRAPH_PROGRAM.format(tests=str(REPO / "tests"))],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    graphs = out["graphs"]
    assert graphs, "the NULL device's graph runner batched nothing"
    steps = {int(k) for k in out["steps"]}
    for g in graphs:
        kids = [r for r in out["records"] if r["scope"] == g["id"]]
        assert len(kids) == g["attrs"]["kernels"] >= 2
        assert g["attrs"]["timing"] == "per batch" and g["parent"] in steps
        assert all(r["api"] == "tinygrad.graph" and r["device"] == "NULL" for r in kids)
        assert all(g["start"] <= r["start"] <= r["end"] <= g["end"] for r in kids)


RUN_PROGRAM = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import tinygrad_programs as tp
    tp.configure_env("CPU")
    import launchtrace
    model, opt, step = tp.make_training()
    x, y = tp.batch(int(sys.argv[1]))
    with launchtrace.scope("warmup"):
        step(x, y)
    for i in range(5):
        with launchtrace.scope("step", i=i):
            step(x, y)
    """
)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    env = {k: v for k, v in env.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", *args], capture_output=True, text=True, timeout=600, env=env, cwd=cwd
    )


@pytest.fixture(scope="module")
def run_files(tmp_path_factory) -> dict[int, Path]:
    """``launchtrace run`` of the jitted MLP program with batch 4 and batch 8: two exported files."""
    folder = tmp_path_factory.mktemp("tinygrad_run")
    script = folder / "train.py"
    script.write_text(RUN_PROGRAM.format(tests=str(REPO / "tests")))
    files = {}
    for n in (4, 8):
        out = folder / f"batch{n}.jsonl"
        proc = _cli("run", "--out", str(out), str(script), str(n), cwd=folder)
        assert proc.returncode == 0, proc.stderr[-3000:]
        files[n] = out
    return files


def test_launchtrace_run_exports_every_replay_and_check_static_passes(run_files):
    proc = _cli("check-static", "--scope", "step", str(run_files[4]), cwd=run_files[4].parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5" in proc.stdout
    spans = [json.loads(line) for line in run_files[4].read_text().splitlines() if line.strip()]
    assert spans
    from launchtrace.sources.loading import load_traces

    traces = load_traces(run_files[4])
    records = [r for t in traces for r in t.records]
    steps = [s for t in traces for s in t.scopes.values() if s.name == "step"]
    assert len(steps) == 5
    per_step = {s.id: [r for r in records if r.scope_id == s.id] for s in steps}
    counts = {len(v) for v in per_step.values()}
    assert len(counts) == 1 and counts.pop() >= 13


def test_diff_reports_a_changed_batch_size(run_files):
    proc = _cli("diff", "--scope", "step", "--format", "json", str(run_files[4]), str(run_files[8]), cwd=REPO)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    text = json.dumps(report)
    assert "r_4_16_8" in text and "r_8_16_8" in text
    same = _cli("diff", "--scope", "step", "--format", "json", str(run_files[4]), str(run_files[4]), cwd=REPO)
    assert "r_8_16_8" not in same.stdout


def test_dataflow_cli_reports_edges_on_a_tinygrad_trace(run_files):
    proc = _cli("dataflow", "--format", "json", str(run_files[4]), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    kinds = json.dumps(report)
    assert '"RAW"' in kinds and '"WAR"' in kinds


def test_template_copies_equal_the_full_decode(instrumented):
    """Replays decoded as copies of an earlier record (the fast path) equal a full decode of each event."""
    model, _opt, step = tp.make_training(seed=7)
    x, y = tp.batch()
    launchtrace.own(model, "tnet")
    try:
        sub = bus.subscribe()
        try:
            for _ in range(6):  # eager call, capture, 4 replays: the replays are template copies
                step(x, y)
        finally:
            sub.close()
        raw = sub.drain_raw()
        fast = [item for kind, item in materialize(raw) if kind == "record"]
        slow = []
        for event in raw:
            tinygrad_decode._statics.clear()  # nothing cached: every event decoded in full
            slow.extend(item for kind, item in materialize([event]) if kind == "record")
    finally:
        launchtrace.disown("tnet")
    assert len(fast) == len(slow) > 40
    replays = len(fast) // 2
    assert sum(r.template is not None for r in fast) >= replays  # the fast path did run
    assert [dataclasses.replace(r, template=None) for r in fast] == [
        dataclasses.replace(r, template=None) for r in slow
    ]


def test_queued_events_keep_a_users_buffer_alive_only_until_decoded(instrumented):
    import gc
    import weakref

    sub = bus.subscribe()
    try:
        t = (Tensor.ones(32).contiguous() * 3).realize()
    finally:
        sub.close()
    ref = weakref.ref(t.uop.base.realized)
    del t
    gc.collect()
    assert ref() is not None  # the queued event still refers to the call, so to the buffer: it can be decoded
    records = [item for kind, item in sub.drain() if kind == "record"]
    assert records and records[-1].buffers[0].ptr
    del records
    gc.collect()
    assert ref() is None  # decoded: nothing of ours holds it any more


def test_queued_events_stay_out_of_the_cycle_collector_where_compiled(instrumented):
    """A queued tuple holding the call and its run would be walked by every collection while it waits (most of
    the hook's cost on a jitted step); the compiled ``Event`` is not, and drains to the same tuple."""
    import gc

    from launchtrace import native

    fast = native.load("launchtrace.capture._fastlaunch")
    sub = bus.subscribe()
    try:
        (Tensor.ones(32).contiguous() * 3).realize()
        queued = list(sub.queue)
        records = [item for kind, item in sub.drain() if kind == "record"]
    finally:
        sub.close()
    framework = [e for e in queued if e[0] == bus.FRAMEWORK]
    assert framework and records
    if fast is None:  # no compiler at install, or LAUNCHTRACE_PURE_PYTHON: plain tuples
        assert all(type(e) is tuple for e in framework)
    else:
        assert all(type(e) is fast.Event and not gc.is_tracked(e) for e in framework)


def test_start_export_writes_tinygrad_spans(instrumented, tmp_path):
    from launchtrace.sources.loading import load_traces

    path = tmp_path / "spans.jsonl"
    launchtrace.start_export(file_path=str(path), truncate=True)
    try:
        with launchtrace.scope("export-me"):
            (Tensor.ones(8).contiguous() * 4).sum().realize()
    finally:
        launchtrace.stop_export()
    records = [r for t in load_traces(path) for r in t.records]
    assert len(records) >= 2 and all(r.api == "tinygrad.realize" and r.device == "CPU" for r in records)
    assert {r.op for r in records} == {"launch"}


OTEL_PROGRAM = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import tinygrad_programs as tp
    tp.configure_env("CPU")
    from tinygrad import Tensor
    import launchtrace
    with launchtrace.scope("otel"):
        print((Tensor([1.0, 2.0, 3.0]) * 2).sum().item())
    """
)


def test_opentelemetry_instrument_covers_tinygrad(tmp_path):
    """``opentelemetry-instrument`` loads the ``warp`` instrumentor, which patches tinygrad when the program
    imports it (the file sink: no OTLP endpoint set)."""
    from launchtrace.sources.loading import load_traces

    script = tmp_path / "prog.py"
    script.write_text(OTEL_PROGRAM.format(tests=str(REPO / "tests")))
    out = tmp_path / "otel.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    env.update(
        LAUNCHTRACE_FILE=str(out),
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_TRACES_EXPORTER="none",
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]),
        PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "12.0"
    records = [r for t in load_traces(out) for r in t.records]
    assert any(r.op == "copy" and r.kernel == "tinygrad.copy" for r in records)
    assert any(r.op == "launch" and r.api == "tinygrad.realize" for r in records)


LAZY_PROGRAM = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import tinygrad_programs as tp
    tp.configure_env("CPU")
    import launchtrace
    from launchtrace.capture import tinygrad as frontend
    launchtrace.instrument()
    print("imported after instrument:", "tinygrad" in sys.modules, frontend.is_patched())
    from tinygrad import Tensor
    from tinygrad.engine import realize
    print("patched on import:", frontend.is_patched())
    print("hook gone, loader intact:", not any(type(f).__module__.startswith("launchtrace") for f in sys.meta_path),
          type(realize.__loader__).__name__, "def run_linear" in realize.__loader__.get_source(realize.__name__))
    launchtrace.uninstrument()
    print("restored:", "rewrite" not in realize.pm_exec.__dict__, frontend.is_patched())
    """
)


def test_instrument_never_imports_tinygrad_and_patches_it_when_the_program_does():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", LAZY_PROGRAM.format(tests=str(REPO / "tests"))],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if ":" in line]
    assert lines[-4:] == [
        "imported after instrument: False False",
        "patched on import: True",
        "hook gone, loader intact: True SourceFileLoader True",
        "restored: True False",
    ]


def _frames_of_a_nested_call() -> list:
    """The frames of a call stopped inside a multi-line call expression, two functions deep (as the hook sees)."""

    def inner(*labels: str) -> list:
        frames, f = [], sys._getframe()
        while f is not None:
            frames.append(f)
            f = f.f_back
        return frames

    return inner(
        "a",
        "b",
    )


def test_line_at_gives_what_f_lineno_says() -> None:
    """The hook records a frame's instruction offset; the decoder's line for it is the frame's own line."""
    frames = _frames_of_a_nested_call()
    assert len(frames) > 3
    for frame in frames:
        assert tinygrad_decode.line_at(frame.f_code, frame.f_lasti) == frame.f_lineno, frame
    assert tinygrad_decode.line_at(frames[1].f_code, frames[1].f_lasti) in range(
        line_of("    return inner("), line_of('        "b",') + 1
    )
