"""Run Warp's shipped examples bare and exported, and check that launchtrace changes nothing and loses nothing.

For each example in :data:`EXAMPLES` (those that run headless on the CPU device in reasonable time, with the
arguments that make them short) the driver ``scripts/run_warp_example.py`` runs twice in fresh processes:

1. bare: Warp's ``print_launches`` log counts the launches; the example's arrays are hashed at the end;
2. exported: the same, with ``launchtrace.start_export`` writing an OTLP JSON Lines file (``--via run`` uses
   ``launchtrace run`` instead, when that command exists).

Verdicts per example: ``same_state`` (every array hash equal, bit for bit), ``same_launches`` (the two
``print_launches`` counts agree), ``all_exported`` (launch records rebuilt from the exported file, folded
summaries expanded, equal Warp's count, and nothing dropped), and ``static`` where the example captures a graph
or repeats a step (``launchtrace.analysis.static.check_static`` over its step scopes, when it has any).

Prints a Markdown table (the one in ``docs/reliability.md``); ``--json`` writes the rows too. Exit code 1 when
any example differs. Example::

    python scripts/sweep_warp_examples.py                 # every example below: ~40 minutes on 2 cores
    python scripts/sweep_warp_examples.py example_fluid example_wave
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "run_warp_example.py"
MARKER = "LAUNCHTRACE-EXAMPLE-RESULT "

# module -> example arguments (CPU, headless, few frames). Left out: those that need CUDA (core/spin_lock,
# core/work_queue, tile/filtering, tile/fft, tile/nbody and tile/mlp hard-code it; mgpu, nccl/mpi/nvshmem),
# an interop framework (cupy, torch, jax, paddle), OpenGL, or minutes per frame on a CPU
# (optim/fluid_checkpoint: over 5 minutes). USD assets and output need ``pip install usd-core`` (mesh,
# raycast, sample_mesh, mesh_intersect, wave, dem, sph) and the optim examples ``pip install pillow``;
# without them those rows say so.
EXAMPLES: dict[str, str] = {
    "warp.examples.core.example_fluid": "--num-frames 5 --headless",
    "warp.examples.core.example_wave": "--num-frames 5 --headless",
    "warp.examples.core.example_graph_capture": "--num-frames 5 --headless",
    "warp.examples.core.example_dem": "--num-frames 2 --headless --stage-path None",
    "warp.examples.core.example_sph": "--num-frames 2 --headless --stage-path None",
    "warp.examples.core.example_mesh": "--num-frames 3 --headless --stage-path None",
    "warp.examples.core.example_raycast": "--width 64 --height 64 --headless",
    "warp.examples.core.example_raymarch": "--width 64 --height 64 --headless",
    "warp.examples.core.example_sample_mesh": "--num-frames 3 --headless",
    "warp.examples.core.example_mesh_intersect": "--headless --stage-path None",
    "warp.examples.core.example_fft_poisson_navier_stokes_2d": "--num-steps 3 --sim-substeps 2 --headless",
    "warp.examples.core.example_fdtd_3d": "--resolution 48 --num-steps 4 --steps-per-frame 2 --headless",
    "warp.examples.fem.example_diffusion": "--resolution 10 --headless --quiet",
    "warp.examples.fem.example_diffusion_3d": "--resolution 6 --headless --quiet",
    "warp.examples.fem.example_deformed_geometry": "--resolution 10 --headless --quiet",
    "warp.examples.fem.example_convection_diffusion": "--resolution 10 --num-frames 3 --headless --quiet",
    "warp.examples.fem.example_convection_diffusion_dg": "--resolution 8 --num-frames 3 --headless --quiet",
    "warp.examples.fem.example_burgers": "--resolution 10 --num-frames 3 --headless --quiet",
    "warp.examples.fem.example_stokes": "--resolution 8 --headless --quiet",
    "warp.examples.fem.example_mixed_elasticity": "--resolution 8 --headless --quiet",
    "warp.examples.fem.example_magnetostatics": "--resolution 8 --headless --quiet",
    "warp.examples.fem.example_navier_stokes": "--resolution 8 --num-frames 2 --headless --quiet",
    "warp.examples.fem.example_streamlines": "--resolution 8 --headless --quiet",
    "warp.examples.fem.example_distortion_energy": "--resolution 8 --headless --quiet",
    "warp.examples.fem.example_taylor_green": "--resolution 8 --num-frames 3 --headless --quiet",
    "warp.examples.fem.example_shallow_water": "--resolution 8 --num-frames 3 --headless --quiet",
    "warp.examples.fem.example_kelvin_helmholtz": "--resolution 8 --num-frames 2 --headless --quiet",
    "warp.examples.fem.example_adaptive_grid": "--resolution 8 --headless --quiet",
    "warp.examples.fem.example_stokes_transfer": "--resolution 8 --headless --quiet",
    "warp.examples.optim.example_particle_repulsion": "--num-frames 3 --headless",
    "warp.examples.optim.example_diffray": "--train-iters 2 --height 32 --headless",
    "warp.examples.tile.example_tile_matmul": "",
    "warp.examples.tile.example_tile_cholesky": "",
}

STATIC_EXPECTED = {"warp.examples.core.example_graph_capture"}
"""Examples whose step Warp itself captures as a graph: their step topology must be static."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One example's verdicts and figures (a row of the table)."""

    example: str
    ok: bool
    same_state: bool | None = None
    arrays: int = 0
    launches: int = 0
    same_launches: bool | None = None
    exported_launches: int = 0
    spans: int = 0
    dropped: int = 0
    static: str = "-"
    bare_s: float = 0.0
    traced_s: float = 0.0
    note: str = ""


def run_driver(module: str, args: list[str], trace: Path | None, via: str, timeout: float) -> dict:
    """One fresh process running the example; its result line as a dict (raises RuntimeError on failure)."""
    cmd = [sys.executable, str(DRIVER), module]
    if trace is not None and via == "run":
        cmd = [sys.executable, "-m", "launchtrace", "run", "--out", str(trace), *cmd[1:]]
    elif trace is not None:
        cmd += ["--trace", str(trace)]
    cmd += ["--", "--device", "cpu", *args]
    env = {**os.environ, "LAUNCHTRACE_INCLUDE_INTERNAL": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"exit {proc.returncode}: {tail[:200]}")
    result = json.loads(lines[-1][len(MARKER) :])
    result["process_s"] = wall
    return result


def exported_launches(path: Path) -> tuple[int, int, list]:
    """(launch records rebuilt from the file with folds expanded, spans in the file, rebuilt traces)."""
    from launchtrace.sources.files import read_spans
    from launchtrace.sources.rebuild import rebuild

    read = read_spans(path)
    rebuilt = rebuild(read.spans)
    launches = sum(1 for r in rebuilt.records() if r.op == "launch")
    return launches, len(read.spans), list(rebuilt.traces.values())


def static_verdict(traces: list) -> str:
    """``check_static`` over the most repeated scope name (two or more instances), else ``-``."""
    from collections import Counter

    from launchtrace.analysis.static import check_static
    from launchtrace.model import TraceData

    # The examples live inside the warp package, so their own ScopedTimers are marked internal; here they
    # are the user's steps, so look at them as user scopes.
    user = [
        TraceData(t.records, {i: dataclasses.replace(s, internal=False) for i, s in t.scopes.items()}, t.attributes)
        for t in traces
    ]
    names = Counter(s.name for t in user for s in t.scopes.values() if s.parent_id is None and t.records)
    repeated = [n for n, c in names.most_common() if c >= 2 and not n.startswith("Module ")]
    if not repeated:
        return "-"
    report = check_static(user, repeated[0])
    if report.occurrences < 2:
        return "-"
    why = "" if report.static else ": " + ", ".join(sorted({f.reason.value for f in report.findings if f.breaks}))
    return f"{'static' if report.static else 'NOT static'} ({repeated[0]} x{report.occurrences}{why})"


def sweep_one(module: str, args: list[str], via: str, timeout: float, keep: Path | None) -> Row:
    name = module.rsplit(".", 2)[-2] + "/" + module.rsplit(".", 1)[-1]
    with tempfile.TemporaryDirectory(prefix="lt-sweep-") as tmp:
        trace = Path(tmp) / "trace.jsonl"
        try:
            warm = run_driver(module, args, None, via, timeout)  # warms the kernel cache: compile time is not ours
            bare = run_driver(module, args, None, via, timeout)
            traced = run_driver(module, args, trace, via, timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            return Row(name, False, note=str(exc).splitlines()[0][:120])
        n, spans, traces = exported_launches(trace)
        if keep is not None:
            shutil.copy(trace, keep / f"{module.rsplit('.', 1)[-1]}.jsonl")
    export = traced.get("export") or {}
    # arrays that differ between two bare runs are the example's own nondeterminism: compared, not judged
    unstable = sorted(k for k in bare["state"] if warm["state"].get(k) != bare["state"][k])
    stable = [k for k in bare["state"] if k not in unstable]
    same_state = bool(stable) and all(bare["state"][k] == traced["state"].get(k) for k in stable)
    note = f"{len(unstable)} arrays differ between two bare runs: {', '.join(unstable)[:80]}" if unstable else ""
    same_launches = bare["launches"] == traced["launches"]
    dropped = int(export.get("dropped", -1))
    static = static_verdict(traces)
    static_ok = not (module in STATIC_EXPECTED and not static.startswith("static"))
    ok = same_state and same_launches and n == traced["launches"] and dropped == 0 and static_ok
    return Row(
        name,
        ok,
        same_state,
        len(stable),
        bare["launches"],
        same_launches,
        n,
        spans,
        dropped,
        static,
        bare["wall_s"],
        traced["wall_s"],
        note,
    )


def table(rows: list[Row]) -> str:
    head = (
        "| example | result | arrays equal (bit for bit) | launches (Warp's log) | exported launches | spans | "
        "dropped | step topology | bare s | exported s | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        if r.same_state is None:
            lines.append(f"| {r.example} | not run | | | | | | | | | {r.note} |")
            continue
        lines.append(
            f"| {r.example} | {'ok' if r.ok else 'DIFFERS'} | {'yes' if r.same_state else 'NO'} ({r.arrays}) | "
            f"{r.launches}{'' if r.same_launches else ' (counts differ)'} | {r.exported_launches} | {r.spans} | "
            f"{r.dropped} | {r.static} | {r.bare_s:.2f} | {r.traced_s:.2f} | {r.note} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="example names to run (default: all)")
    parser.add_argument("--via", choices=("driver", "run"), default="driver", help="how the exported run starts")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--keep", help="copy each exported file into this folder")
    args = parser.parse_args(argv)
    chosen = {m: a for m, a in EXAMPLES.items() if not args.only or m.rsplit(".", 1)[-1] in args.only}
    keep = Path(args.keep) if args.keep else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    rows = []
    for module, ex_args in chosen.items():
        row = sweep_one(module, ex_args.split(), args.via, args.timeout, keep)
        print(f"{row.example}: {'ok' if row.ok else 'FAILED'} {row.note}", file=sys.stderr, flush=True)
        rows.append(row)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    ran = [r for r in rows if r.same_state is not None]
    return 0 if all(r.ok for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
