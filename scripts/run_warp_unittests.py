"""Run Warp's own unit tests (``warp.tests.<module>``, its unittest suites) bare or with launchtrace exporting.

``--instrument`` calls ``launchtrace.start_export(file_path=<temp>, include_internal=True)`` before the tests
are imported (so Warp is patched for every test) and stops it after, so the tests run exactly as under
``launchtrace run``. The outcome of every test is printed as one JSON object ``{test id: outcome}``.

``--compare`` runs the modules twice in fresh processes, bare then instrumented, and prints a Markdown table
per module (tests, passed bare, passed instrumented, outcomes that differ); exit code 1 when any differ.

Example::

    python scripts/run_warp_unittests.py --compare test_launch test_copy test_tape
    python scripts/run_warp_unittests.py --compare --all       # the modules below: ~15 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

MARKER = "LAUNCHTRACE-UNITTEST-RESULT "

# Modules of warp/tests that exercise device work on the CPU (launches, copies, fills, tapes, graphs, the
# primitives, fem and sparse); those that only test codegen, CUDA, interop or packaging are left out.
ALL = [
    "test_launch",
    "test_copy",
    "test_tape",
    "test_indexedarray",
    "test_array_reduce",
    "test_runlength_encode",
    "test_utils",
    "test_sparse",
    "test_adam",
    "test_graph",
    "test_struct",
    "test_fixedarray",
    "test_lerp",
    "test_smoothstep",
    "test_noise",
    "test_rand",
    "test_transient_module",
    "test_vec_assign_copy",
    "test_closest_point_edge_edge",
    "geometry.test_hash_grid",
    "geometry.test_bvh",
    "geometry.test_mesh_query_point",
    "test_generics",
    "test_array",
    "test_grad",
    "test_atomic",
    "matrix.test_mat_linalg",
    "fem.test_fem_linalg",
    "fem.test_fem_field",
    "test_linear_solvers",
]


class Outcomes(unittest.TestResult):
    """Keeps one outcome per test id: pass, fail, error, skip, xfail, xpass."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, str] = {}

    def addSuccess(self, test):
        self.outcomes[test.id()] = "pass"

    def addFailure(self, test, err):
        self.outcomes[test.id()] = "fail"
        super().addFailure(test, err)

    def addError(self, test, err):
        self.outcomes[getattr(test, "id", lambda: str(test))()] = "error"
        super().addError(test, err)

    def addSkip(self, test, reason):
        self.outcomes[test.id()] = "skip"

    def addExpectedFailure(self, test, err):
        self.outcomes[test.id()] = "xfail"

    def addUnexpectedSuccess(self, test):
        self.outcomes[test.id()] = "xpass"


def run_modules(modules: list[str], instrument: bool) -> dict:
    import warp as wp

    wp.config.quiet = True
    stats = None
    trace = None
    if instrument:
        import launchtrace.export as export

        fd, trace = tempfile.mkstemp(prefix="lt-unittest-", suffix=".jsonl")
        os.close(fd)
        export.start_export(file_path=trace, truncate=True, include_internal=True)
    result = Outcomes()
    t0 = time.perf_counter()
    for name in modules:
        try:
            suite = unittest.defaultTestLoader.loadTestsFromName(f"warp.tests.{name}")
        except Exception as exc:  # a module that cannot import here (needs CUDA, a package): reported
            result.outcomes[f"warp.tests.{name}"] = f"import error: {type(exc).__name__}"
            continue
        suite.run(result)
    wall = time.perf_counter() - t0
    spans = 0
    if instrument:
        import launchtrace.export as export

        final = export.stop_export(60)
        stats = {"built": final.built, "exported": final.exported, "dropped": final.dropped}
        with open(trace, "rb") as f:
            spans = sum(1 for _ in f)
        os.unlink(trace)
    return {"outcomes": result.outcomes, "wall_s": round(wall, 2), "export": stats, "lines": spans}


def run_process(modules: list[str], instrument: bool, timeout: float) -> dict:
    cmd = [sys.executable, __file__, *modules] + (["--instrument"] if instrument else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    if not lines:
        raise RuntimeError(f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:300]}")
    return json.loads(lines[-1][len(MARKER) :])


def compare(modules: list[str], timeout: float, progress: str | None = None) -> tuple[str, bool, list[dict]]:
    rows = []
    for module in modules:
        bare = run_process([module], False, timeout)
        inst = run_process([module], True, timeout)
        a, b = bare["outcomes"], inst["outcomes"]
        differ = sorted(t for t in set(a) | set(b) if a.get(t) != b.get(t))
        broken = sorted(v for v in a.values() if v.startswith("import error"))
        rows.append(
            {
                "module": module + (f" ({broken[0]})" if broken else ""),
                "tests": len(a) - len(broken),
                "passed_bare": sum(v == "pass" for v in a.values()),
                "passed_instrumented": sum(v == "pass" for v in b.values()),
                "skipped": sum(v == "skip" for v in a.values()),
                "differ": differ,
                "bare_s": bare["wall_s"],
                "instrumented_s": inst["wall_s"],
                "export": inst["export"],
            }
        )
        print(f"{module}: {len(a)} tests, {len(differ)} differ", file=sys.stderr, flush=True)
        if progress is not None:  # rows so far, so a long sweep stopped early still has its results
            Path(progress).write_text(json.dumps(rows, indent=1))
    head = (
        "| module | tests | passed bare | passed instrumented | skipped | outcomes that differ | spans exported "
        "| dropped | bare s | instrumented s |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['module']} | {r['tests']} | {r['passed_bare']} | {r['passed_instrumented']} | {r['skipped']} | "
        f"{', '.join(r['differ']) or 'none'} | {r['export']['exported'] if r['export'] else '-'} | "
        f"{r['export']['dropped'] if r['export'] else '-'} | {r['bare_s']} | {r['instrumented_s']} |\n"
        for r in rows
    )
    return head + body, all(not r["differ"] for r in rows), rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules of warp.tests (e.g. test_launch)")
    parser.add_argument("--all", action="store_true", help="the CPU-relevant modules listed in this script")
    parser.add_argument("--instrument", action="store_true", help="export while the tests run")
    parser.add_argument("--compare", action="store_true", help="bare vs instrumented, in fresh processes")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    parser.add_argument("--json", help="with --compare: also write the rows here")
    args = parser.parse_args(argv)
    modules = ALL if args.all else args.modules
    if not modules:
        parser.error("name modules of warp.tests or pass --all")
    if args.compare:
        table, same, rows = compare(modules, args.timeout, args.json)
        print(table)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return 0 if same else 1
    result = run_modules(modules, args.instrument)
    sys.stdout.write(MARKER + json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
