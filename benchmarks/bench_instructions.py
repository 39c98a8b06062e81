"""Per-launch cost in instructions (valgrind's callgrind), with a breakdown by stage: repeatable where the
wall-clock ratios on these shared machines are not (the same code reads 0.84x to 1.43x by time).

What one launch costs, for a trivial 4-element kernel and for a kernel with 8 array and 4 scalar arguments, on
Warp's CPU device, in five modes:

- ``bare``: ``wp.launch`` with launchtrace uninstrumented;
- ``capture``: instrumented, one bus subscriber whose queue is emptied every 64 launches (the hot path alone);
- ``trace``: inside ``launchtrace.testing.trace_launches()`` (hot path, then the records materialized at exit);
- ``file``: under ``start_export()`` to the OTLP JSON Lines file sink, the export worker and final flush
  included (``stop_export()`` inside the counted block);
- ``otlp``: under ``start_export()`` to OTLP/protobuf over HTTP into ``launchtrace collect`` on loopback; the
  collect process runs outside valgrind, so only the program's own process is counted.

Method (shared/notes/measuring.md): one child process under ``valgrind --tool=callgrind`` runs every block
(each mode's first counted block, ``--n2`` launches, is dumped and discarded: the first one after a change of mode
carried 10-20 million instructions of one-time work, and what the export learns once per step position must be
learnt before both counted blocks; the process is down to its main thread before each block);
``os.getpgrp()`` zeroes callgrind's counters and ``os.getsid(0)`` dumps them, so each dump holds exactly one block,
all threads together (the export worker shares the GIL with the program). Each mode runs ``--n1`` and ``--n2``
launches; per-launch instructions are ``(I(n2) - I(n1)) / (n2 - n1)``, so start-up, pipeline start and stop cancel.
Warp's kernel cache is warmed under valgrind (``--tool=none``) first: valgrind's virtual CPU differs from the real
one, and the first run under it recompiles the module. Callgrind counts user-space instructions: the kernel's side
of a system call (the write, the socket send) is not in the figures.

The stage breakdown comes from the same dumps: callgrind's per-function inclusive costs, per launch by the same
difference. A stage's cost is the inclusive cost of the calls that enter its functions from functions of no stage
(so a stage's nested calls, into another stage's functions or the cycle collector, count in the outer stage, once;
callgrind keeps caller-callee pairs, not whole call paths, so a stage entered again through Python code called
from another stage would count in both: the remainder below would then come out low):

- ``hot path``: the ``capture`` mode minus ``bare`` (the compiled wrapper ``_fastlaunch`` calls the original
  ``wp.launch`` inside itself, so its inclusive cost would hold the bare launch too);
- ``materialize``: functions defined in ``launchtrace/capture/_fastmat.c`` (by the source file callgrind reads
  from the debug information, so an extension's PLT stubs, named after the libpython function they jump to,
  are not counted as its own);
- ``record/span objects``: ``launchtrace/_slots.c`` (the compiled ``LaunchRecord``/``SpanData`` constructors, used
  by both materialize and span build), where entered from outside the stages above: from Python code, not through
  ``PyObject_Vectorcall``, the call the compiled stages make (their makers count in their own stage, once);
- ``span build``: ``launchtrace/export/_fastbuild.c``;
- ``encode``: ``launchtrace/otlp/_protoenc.c`` and ``launchtrace/otlp/_jsonenc.c``;
- ``write``: libc's ``write``/``send`` family and CPython's ``_io`` file writes;
- ``GIL handoff``: CPython's ``take_gil``/``drop_gil`` (the worker and the program trading the GIL);
- ``gc``: CPython's cycle collector (``gc_collect_main``);
- ``Python (unattributed)``: the rest of the mode's cost above bare. On CPython 3.11 callgrind sees the
  interpreter, not Python functions: the launchtrace modules' Python code (the worker loop, the Python parts of
  materialize/spanbuilder/sinks) runs inside ``_PyEval_EvalFrameDefault`` and can only be shown as this remainder.

Also printed: the functions with the highest per-launch self cost in each mode (where the instructions actually
execute). ``--wall`` adds wall-clock ratios (mode / bare, alternating pairs) as a second opinion.

    python benchmarks/bench_instructions.py [--n1 2000] [--n2 6000] [--kernels trivial,wide]
        [--modes bare,capture,trace,file,otlp] [--labels] [--json out.json] [--wall] [--pairs 5] [--keep DIR]

A reduced run (``--n1 200 --n2 600``) takes about two minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from collect_process import start_collect

MODES = ("bare", "capture", "trace", "file", "otlp")
KERNELS = ("trivial", "wide")
STAGES = (
    "hot path", "materialize", "record/span objects", "span build", "encode", "write", "GIL handoff", "gc",
    "Python (unattributed)",
)  # fmt: skip
ELEMENTS = 4
DRAIN_EVERY = 64
SETTLE_S = 1.0
WARM_LAUNCHES = 20

# -- the measured program (runs in the child, under valgrind) ---------------------------------------------------


def _kernels() -> dict[str, tuple[Any, list]]:
    import warp as wp

    wp.config.quiet = True

    @wp.kernel
    def trivial(x: wp.array(dtype=float), s: float):
        i = wp.tid()
        x[i] = s

    @wp.kernel
    def wide(
        a0: wp.array(dtype=float),
        a1: wp.array(dtype=float),
        a2: wp.array(dtype=float),
        a3: wp.array(dtype=float),
        a4: wp.array(dtype=float),
        a5: wp.array(dtype=float),
        a6: wp.array(dtype=float),
        a7: wp.array(dtype=float),
        s0: float,
        s1: float,
        s2: float,
        s3: float,
    ):
        i = wp.tid()
        a0[i] = a1[i] * s0 + a2[i] * s1 + a3[i] * s2 + a4[i] * s3 + a5[i] + a6[i] + a7[i]

    trivial_inputs = [wp.zeros(ELEMENTS, dtype=float, device="cpu"), 1.0]
    wide_inputs = [wp.zeros(ELEMENTS, dtype=float, device="cpu") for _ in range(8)] + [1.0, 2.0, 3.0, 4.0]
    return {"trivial": (trivial, trivial_inputs), "wide": (wide, wide_inputs)}


def _kernels_for(args: argparse.Namespace) -> dict[str, tuple[Any, list]]:
    """The kernels and their inputs; with ``--labels`` the arrays are allocated while instrumented, as under
    ``launchtrace run``, so every array argument carries its allocation label (the zero-code buffer names)."""
    import launchtrace

    if args.labels:
        launchtrace.instrument()
    kernels = _kernels()
    if args.labels:
        launchtrace.uninstrument()  # the allocation registry keeps the entries; each block instruments anew
    return kernels


def _loop(kernel: Any, inputs: list, n: int, sub: Any = None) -> None:
    import warp as wp

    launch = wp.launch
    if sub is None:
        for _ in range(n):
            launch(kernel, dim=ELEMENTS, inputs=inputs)
        return
    for i in range(n):
        launch(kernel, dim=ELEMENTS, inputs=inputs)
        if i % DRAIN_EVERY == DRAIN_EVERY - 1:
            sub.drain_raw()
    sub.drain_raw()


def run_block(mode: str, kernel: Any, inputs: list, n: int, folder: str, endpoint: str | None, mark: bool) -> None:
    """One counted block: ``n`` launches in ``mode``, everything the mode does for them inside the markers."""
    import gc

    import launchtrace
    from launchtrace.capture import bus
    from launchtrace.testing import trace_launches

    launchtrace.uninstrument()
    if mark:
        _wait_for_one_thread()
    gc.collect()
    path = os.path.join(folder, f"{mode}-{n}.jsonl")
    zero, dump = (os.getpgrp, lambda: os.getsid(0)) if mark else (lambda: None, lambda: None)
    zero()
    if mode == "bare":
        _loop(kernel, inputs, n)
    elif mode == "capture":
        launchtrace.instrument()
        sub = bus.subscribe(capacity=10 * n + 100)
        _loop(kernel, inputs, n, sub)
        sub.close()
    elif mode == "trace":
        with trace_launches() as trace:
            _loop(kernel, inputs, n)
        got = len(trace.records)
    elif mode in ("file", "otlp"):
        settings = {"file_path": path} if mode == "file" else {"endpoint": endpoint, "protocol": "http/protobuf"}
        launchtrace.start_export(truncate=mode == "file", **settings)
        _loop(kernel, inputs, n)
        stats = launchtrace.stop_export()
    dump()
    launchtrace.uninstrument()
    time.sleep(SETTLE_S)  # threads a block leaves (HTTP connections closing, the worker ending) finish here
    if mode == "trace" and got != n:
        raise SystemExit(f"trace_launches recorded {got} of {n} launches")
    if mode in ("file", "otlp") and (stats.dropped or stats.exported < n):
        raise SystemExit(f"{mode}: exported {stats.exported} of {n} launches, dropped {stats.dropped}")
    if mode == "file":
        os.unlink(path)


def _wait_for_one_thread(limit_s: float = 120.0) -> None:
    """Wait until the main thread is the process's only thread: threads an earlier block left (OTLP senders end
    0.5 s after shutdown, natively; much later under valgrind) would otherwise run, and count, in this block."""
    deadline = time.monotonic() + limit_s
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    if len(os.listdir("/proc/self/task")) > 1:
        names = [t.name for t in threading.enumerate()]
        print(f"bench_instructions: threads still running before a counted block: {names}", file=sys.stderr)


def child(args: argparse.Namespace) -> None:
    """Run under valgrind: every mode warmed up, then the counted blocks (:func:`counted_blocks`)."""
    import warp as wp

    wp.init()
    kernels = _kernels_for(args)
    folder = tempfile.mkdtemp(prefix="bench_instr_child_")
    try:
        counted_blocks(args, kernels, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def counted_blocks(args: argparse.Namespace, kernels: dict[str, tuple[Any, list]], folder: str) -> None:
    """Warm up every mode (kernels compiled, first-use imports and caches), then the counted blocks in the order
    :func:`read_dumps` expects: per kernel and mode, a discarded block, then n1, then n2."""
    for name in args.kernels:
        kernel, inputs = kernels[name]
        for mode in args.modes:
            run_block(mode, kernel, inputs, WARM_LAUNCHES, folder, args.endpoint, mark=False)
    if args.warm_only:
        return
    time.sleep(SETTLE_S)
    for name in args.kernels:
        kernel, inputs = kernels[name]
        for mode in args.modes:
            # a counted block of the same mode first, dumped and discarded: the first counted block after a
            # change of mode carried 10-20 million instructions more than the rest (a thread created and ended in
            # it, one-time work; callgrind's own summary line disagreed with its per-function costs there). It is
            # n2 launches long, so that what the export learns once per step position (the fingerprint memo, for
            # step roots as long as the time window makes them) is learnt before n1 and n2 alike: a 20-launch
            # block left the n1 block hashing a long root's lines that the n2 block then found known (flattering
            # the difference by about 300-550 instructions a launch), and an n1-launch block at --n1 200 left the
            # n2 block the longer roots to hash (the reverse)
            for n in (max(WARM_LAUNCHES, args.n2), args.n1, args.n2):
                run_block(mode, kernel, inputs, n, folder, args.endpoint, mark=True)


# -- reading callgrind's output ------------------------------------------------------------------------------------

_NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")


class Profile:
    """One callgrind dump: total instructions, self cost per function and inclusive cost per call edge, with
    functions named ``object:function`` (the object file's base name without its ABI suffix)."""

    def __init__(self, path: Path) -> None:
        self.total = 0
        self.summary = 0
        self.self_cost: dict[str, int] = defaultdict(int)
        self.edges: dict[tuple[str, str], int] = defaultdict(int)
        self.files: dict[str, str] = {}  # function -> its source file (``???`` for PLT stubs, no debug info)
        names: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
        ob = fn = cob = cfn = fl = ""
        pending_call = False
        for line in path.read_text(errors="replace").splitlines():
            if not line:
                continue
            head = line[0]
            if head.isdigit() or head in "+-*":
                cost = int(line.split()[1]) if len(line.split()) > 1 else 0
                if pending_call:
                    self.edges[(f"{ob}:{fn}", f"{cob}:{cfn}")] += cost
                    pending_call = False
                    cob = ob  # a call's cob= holds for that call only
                else:
                    self.self_cost[f"{ob}:{fn}"] += cost
                continue
            if line.startswith("summary:"):
                self.summary = int(line.split()[1])
                continue
            key, _, value = line.partition("=")
            if key in ("ob", "cob"):
                name = self._name(names["ob"], value)
                if key == "ob":
                    ob = cob = name
                else:
                    cob = name
            elif key in ("fn", "cfn"):
                name = self._name(names["fn"], value)
                if key == "fn":
                    fn = name
                    cob = ob
                    self.files.setdefault(f"{ob}:{fn}", fl)
                else:
                    cfn = name
            elif key in ("fl", "fi", "fe", "cfi", "cfl"):
                name = self._name(names["fl"], value)
                if key == "fl":
                    fl = name
            elif key == "calls":
                pending_call = True
        self.total = sum(self.self_cost.values())

    @staticmethod
    def _name(table: dict[str, str], value: str) -> str:
        m = _NAME.match(value.strip())
        if not m:
            return _short(value.strip())
        if m.group(2) is not None:
            table[m.group(1)] = _short(m.group(2))
        return table.get(m.group(1), value)


def _short(obj_or_fn: str) -> str:
    """``/.../launchtrace/otlp/_protoenc.cpython-311-x86_64-linux-gnu.so`` -> ``launchtrace/otlp/_protoenc``."""
    if "/" not in obj_or_fn:
        return obj_or_fn
    p = obj_or_fn.split(".cpython-")[0]
    parts = p.split("/")
    if "launchtrace" in parts:
        return "/".join(parts[parts.index("launchtrace") :])
    return parts[-1]


_IO_WRITE = {
    "_Py_write", "os_write", "sock_sendall", "sock_send", "sock_sendto", "sock_sendmsg",
    "write", "__write", "__libc_write", "writev", "__writev", "send", "__send", "__libc_send", "sendto",
    "__libc_sendto", "sendmsg", "__libc_sendmsg", "fsync", "fdatasync", "_io_FileIO_write", "_io__Buffered_write",
    "_io_BufferedWriter_write", "_bufferedwriter_flush_unlocked", "_io_TextIOWrapper_write",
}  # fmt: skip


def stage_of(func: str, file: str = "") -> str | None:
    """The stage a function belongs to (``object:function``, defined in source ``file``), or None: the mapping
    the docstring states. launchtrace's functions go by the source file they are defined in, so the PLT stubs
    of an extension (named after the libpython function they jump to, and without a source file) are not its."""
    name = func.partition(":")[2]
    if file.startswith("launchtrace/capture/_fastmat"):
        return "materialize"
    if file.startswith("launchtrace/_slots"):
        return "record/span objects"
    if file.startswith("launchtrace/export/_fastbuild"):
        return "span build"
    if file.startswith(("launchtrace/otlp/_protoenc", "launchtrace/otlp/_jsonenc")):
        return "encode"
    if name in _IO_WRITE:
        return "write"
    if name in ("take_gil", "drop_gil"):
        return "GIL handoff"
    if name in ("gc_collect_main", "gc_collect_with_callback"):
        return "gc"
    return None


# CPython's exported call function, which the compiled stages call the record/span makers through; the
# interpreter's own calls (the Python parts) reach them without it, from _PyEval_EvalFrameDefault
_TRAMPOLINE = re.compile(r"^libpython[^:]*:PyObject_Vectorcall(?:'\d+)?$")


def stage_costs(profile: Profile) -> dict[str, int]:
    """Per stage, the inclusive cost of the calls entering its functions from functions of no stage."""
    out: dict[str, int] = defaultdict(int)
    files = profile.files
    for (caller, callee), cost in profile.edges.items():
        s = stage_of(callee, files.get(callee, ""))
        if s == "record/span objects" and _TRAMPOLINE.match(caller):
            continue  # a compiled stage's call (materialize, span build): already in that stage's cost
        if s is not None and stage_of(caller, files.get(caller, "")) is None:
            out[s] += cost
    return out


# -- the parent --------------------------------------------------------------------------------------------------


def child_cmd(args: argparse.Namespace, endpoint: str | None, extra: list[str]) -> list[str]:
    return [
        sys.executable, __file__, "--child", "--n1", str(args.n1), "--n2", str(args.n2),
        "--kernels", ",".join(args.kernels), "--modes", ",".join(args.modes), "--endpoint", endpoint or "",
        *(["--labels"] if args.labels else []), *extra,
    ]  # fmt: skip


def run_callgrind(args: argparse.Namespace, endpoint: str | None, folder: str) -> list[Profile]:
    # OpenBLAS's threads (numpy is imported) spin after use and would count in whichever block they spin in
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    warm = ["valgrind", "--tool=none", "-q", *child_cmd(args, endpoint, ["--warm-only"])]
    done = subprocess.run(warm, env=env, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(f"warm-up under valgrind failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
    out = os.path.join(folder, "cg.out")
    cmd = [
        "valgrind", "--tool=callgrind", "--zero-before=getpgrp", "--dump-before=getsid",
        "--compress-strings=no", f"--callgrind-out-file={out}", *child_cmd(args, endpoint, []),
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        raise SystemExit(f"callgrind run failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
    return read_dumps(args, folder)


def read_dumps(args: argparse.Namespace, folder: str) -> list[Profile]:
    """The n1 and n2 dumps of one run, in block order, from ``cg.out.1``, ``cg.out.2``, ... (three per mode: a
    discarded first block, n1, n2; a last one, from the end of the last block to the exit, is not a block)."""
    parts = sorted(Path(folder).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
    expected = len(args.kernels) * len(args.modes) * 3
    parts = parts[:expected] if len(parts) in (expected, expected + 1) else parts
    if len(parts) != expected:
        raise SystemExit(f"{folder}: {len(parts)} callgrind dumps, expected {expected} (kernels x modes x 3)")
    return [Profile(p) for i, p in enumerate(parts) if i % 3]  # each mode's first block is discarded


def per_launch(a: Profile, b: Profile, span: int) -> dict:
    """Per-launch figures from the n1 (``a``) and n2 (``b``) blocks of one mode."""
    stages_a, stages_b = stage_costs(a), stage_costs(b)
    stages = {s: (stages_b.get(s, 0) - stages_a.get(s, 0)) / span for s in STAGES if s in stages_a or s in stages_b}
    selfs = {f: (b.self_cost.get(f, 0) - a.self_cost.get(f, 0)) / span for f in set(a.self_cost) | set(b.self_cost)}
    top = sorted(selfs.items(), key=lambda kv: -kv[1])[:12]
    return {
        "total": (b.total - a.total) / span,
        "summary": (b.summary - a.summary) / span,  # callgrind's own summary line: a cross-check of the total
        "blocks": [a.total, b.total],
        "stages": stages,
        "top_self": top,
    }


def wall_ratios(args: argparse.Namespace, endpoint: str | None) -> dict[str, dict[str, list[float]]]:
    """Second opinion by wall clock: in this process, alternating bare and each mode, ``--pairs`` pairs of
    ``n2`` launches."""
    import warp as wp

    wp.init()
    kernels = _kernels_for(args)
    folder = tempfile.mkdtemp(prefix="bench_instr_wall_")
    try:
        return _wall_pairs(args, endpoint, kernels, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wall_pairs(
    args: argparse.Namespace, endpoint: str | None, kernels: dict[str, tuple[Any, list]], folder: str
) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for name in args.kernels:
        kernel, inputs = kernels[name]
        for mode in args.modes:
            run_block(mode, kernel, inputs, 50, folder, endpoint, mark=False)
        for mode in args.modes:
            if mode == "bare":
                continue
            ratios = []
            for _ in range(args.pairs):
                t0 = time.perf_counter()
                run_block("bare", kernel, inputs, args.n2, folder, endpoint, mark=False)
                t1 = time.perf_counter()
                run_block(mode, kernel, inputs, args.n2, folder, endpoint, mark=False)
                t2 = time.perf_counter()
                ratios.append((t2 - t1) / (t1 - t0))
            out.setdefault(name, {})[mode] = ratios
    return out


def report(args: argparse.Namespace, results: dict, wall: dict | None, meta: dict) -> None:
    print(
        f"warp {meta['warp']}, python {meta['python']}, launchtrace commit {meta['commit']}, CPU device, "
        f"{ELEMENTS}-element launches; per launch = (I({args.n2}) - I({args.n1})) / {args.n2 - args.n1}; "
        f"all threads of the program's process; allocation labels {'on' if meta['labels'] else 'off'}; "
        f"load at start: {meta['load']}"
    )
    for name, modes in results.items():
        bare = modes.get("bare", {}).get("total")
        print(f"\n{name} kernel ({'x, s' if name == 'trivial' else '8 arrays, 4 scalars'}):")
        print(f"| per launch | instructions | ratio to bare{' | wall ratio (median, min-max)' if wall else ''} |")
        print(f"| --- | --- | ---{' | ---' if wall else ''} |")
        for mode, fig in modes.items():
            ratio = f"{fig['total'] / bare:.2f}x" if bare else "-"
            w = ""
            if wall:
                r = wall.get(name, {}).get(mode)
                w = f" | {statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})" if r else " | 1.00x"
            print(f"| {mode} | {fig['total']:,.0f} | {ratio}{w} |")
        for mode, fig in modes.items():
            if mode in ("bare", "capture"):
                continue
            print(f"\n  {name} / {mode}: stages, instructions per launch")
            for stage in STAGES:
                if stage in fig["stages"]:
                    print(f"    {stage:24s} {fig['stages'][stage]:>10,.0f}")
            print(f"  {name} / {mode}: top self cost per launch (function: instructions)")
            for func, cost in fig["top_self"][:8]:
                print(f"    {func[:70]:70s} {cost:>10,.0f}")


def add_stages(results: dict) -> None:
    """Fill in the hot path (capture - bare) and the unattributed remainder for the modes above capture."""
    for modes in results.values():
        bare = modes.get("bare", {}).get("total")
        capture = modes.get("capture", {}).get("total")
        for mode, fig in modes.items():
            if mode in ("bare", "capture") or bare is None:
                continue
            stages = fig["stages"]
            if capture is not None:
                stages["hot path"] = capture - bare
            known = sum(v for k, v in stages.items() if k != "Python (unattributed)")
            stages["Python (unattributed)"] = fig["total"] - bare - known
            fig["stages"] = {s: stages[s] for s in STAGES if s in stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n1", type=int, default=2000)
    parser.add_argument("--n2", type=int, default=6000)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument(
        "--labels",
        action="store_true",
        help="the kernels' arrays allocated while instrumented, as under `launchtrace run`: every array argument "
        "carries its allocation label (the zero-code buffer names)",
    )
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--wall", action="store_true", help="also wall-clock ratios (mode / bare), alternating")
    parser.add_argument("--pairs", type=int, default=5, help="pairs for --wall")
    parser.add_argument("--keep", help="keep callgrind's dumps in this folder")
    parser.add_argument(
        "--parse", help="no callgrind run: read the dumps a --keep run left in this folder (same options; --wall runs)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--warm-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.kernels = [k for k in args.kernels.split(",") if k]
    args.modes = [m for m in args.modes.split(",") if m]
    bad = [k for k in args.kernels if k not in KERNELS] + [m for m in args.modes if m not in MODES]
    if bad or args.n2 <= args.n1 or args.n1 < 1:
        parser.error(f"kernels among {KERNELS}, modes among {MODES}, 1 <= n1 < n2 (got {bad or (args.n1, args.n2)})")
    if args.child:
        child(args)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions: valgrind is not on PATH (apt-get install valgrind)")

    import warp as wp

    meta = {
        "warp": wp.__version__,
        "python": platform.python_version(),
        "commit": _commit(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "n1": args.n1,
        "n2": args.n2,
        "labels": args.labels,
    }
    folder = args.parse or args.keep or tempfile.mkdtemp(prefix="bench_instr_")
    os.makedirs(folder, exist_ok=True)
    need_collect = "otlp" in args.modes and (args.wall or not args.parse)
    collect, endpoint = (None, None)
    if need_collect:
        collect, _, endpoint = start_collect(os.path.join(folder, "collected.jsonl"), grpc=False)
    try:
        t0 = time.perf_counter()
        profiles = read_dumps(args, folder) if args.parse else run_callgrind(args, endpoint, folder)
        meta["callgrind_s"] = round(time.perf_counter() - t0, 1)
        results: dict = {}
        it = iter(profiles)
        for name in args.kernels:
            for mode in args.modes:
                a, b = next(it), next(it)
                results.setdefault(name, {})[mode] = per_launch(a, b, args.n2 - args.n1)
        add_stages(results)
        wall = wall_ratios(args, endpoint) if args.wall else None
    finally:
        if collect is not None:
            collect.terminate()
            collect.wait(timeout=30)
        if not (args.keep or args.parse):
            shutil.rmtree(folder, ignore_errors=True)
    report(args, results, wall, meta)
    if not args.parse:
        print(f"\n(callgrind run: {meta['callgrind_s']} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results, "wall": wall}, f, indent=1)


def _commit() -> str:
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
