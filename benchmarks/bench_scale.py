"""Size: every analyzer command's peak memory and speed as its input grows (issue 25).

Inputs come from :mod:`scale_inputs` (a real ``launchtrace demo`` run replicated with fresh ids): files of
``--sizes`` MB (default 100 and 400; add 2000 with ``--big``) of many traces, and single traces of ``--wide``
launch children. Each command runs in a fresh process (``python -m launchtrace``); its peak resident memory is
the child's own (``os.wait4``'s ``ru_maxrss``), its time the wall clock from start to exit (imports count), and
spans per second are the file's spans over that time.

Targets (issue 25): peak RSS flat in the input (the 400 MB peak at most 1.25x the 100 MB peak + 40 MB), at
least 100,000 spans/s for ``summary``, ``dataflow`` and ``diff``, and one wide trace's time linear in its spans.
Each row says whether it met them.

``--src DIR`` runs another tree's ``launchtrace`` (its ``src`` folder, with built extensions), so a before/after
pair runs in one session on one machine: e.g. ``git archive <commit> src | tar -x -C /tmp/before`` and copy the
``*.so`` files of a build of that commit next to their sources.

Run: ``python benchmarks/bench_scale.py`` (a few minutes on a loaded 2-core machine; the 400 MB files are
written once to ``$LAUNCHTRACE_SCALE_CACHE``, default ``/tmp/lt-scale``). On a shared machine wall-clock
figures move with the load: note ``uptime`` beside them (printed first).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_inputs import make_input

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "summary": lambda f, tmp: ["summary", str(f)],
    "dataflow": lambda f, tmp: ["dataflow", str(f)],
    "diff": lambda f, tmp: ["diff", str(f), str(f), "--out", str(tmp / "diff.txt")],
    "baseline": lambda f, tmp: ["baseline", "build", "--from", str(f), "--out", str(tmp / "b.pb"), "--quiet"],
    "alert": lambda f, tmp: ["alert", "--from", str(f), "--quiet", "--out", str(tmp / "alert.txt")],
}
FLAT_FACTOR, FLAT_SLACK_MB, MIN_RATE = 1.25, 40.0, 100_000


def cache() -> Path:
    folder = Path(os.environ.get("LAUNCHTRACE_SCALE_CACHE", Path(tempfile.gettempdir()) / "lt-scale"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def input_file(megabytes: float = 0, wide: int = 0) -> tuple[Path, int]:
    """The cached input and its spans (written on first use)."""
    name = f"wide-{wide}.jsonl" if wide else f"traces-{megabytes:g}mb.jsonl"
    path, count = cache() / name, cache() / (name + ".spans")
    if not path.exists() or not count.exists():
        spans = make_input(path, megabytes, "wide", spans=wide) if wide else make_input(path, megabytes)
        count.write_text(str(spans))
    return path, int(count.read_text())


def measure(args: list[str], src: Path, timeout: float) -> tuple[float, float, int]:
    """``(seconds, peak MB, exit status)`` of ``python -m launchtrace ARGS`` run from ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            return float("inf"), usage.ru_maxrss / 1024, -9
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):
        print(f"  {' '.join(args[:2])}: exit {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
    return seconds, usage.ru_maxrss / 1024, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,400", help="input sizes in MB (default 100,400)")
    parser.add_argument("--big", action="store_true", help="also a 2000 MB input")
    parser.add_argument("--wide", default="25000,100000", help="children of the single-trace inputs ('' for none)")
    parser.add_argument("--commands", default=",".join(COMMANDS), help="which commands (default all)")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the launchtrace source tree to run")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command before it is killed")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",") if s] + ([2000.0] if args.big else [])
    wides = [int(w) for w in args.wide.split(",") if w]
    commands = [c for c in args.commands.split(",") if c]
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"source tree: {args.src}")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        inputs = [("traces", s, *input_file(megabytes=s)) for s in sizes]
        inputs += [("wide", w, *input_file(wide=w)) for w in wides]
        for command in commands:
            for shape, size, path, spans in inputs:
                if shape == "wide" and command in ("dataflow", "diff"):
                    continue  # one trace's whole-run view: the rows of the traces shape say it
                seconds, peak, status = measure(COMMANDS[command](path, tmp), args.src, args.timeout)
                row = {
                    "command": command,
                    "shape": shape,
                    "size": size,
                    "mb": round(path.stat().st_size / 1e6, 1),
                    "spans": spans,
                    "seconds": round(seconds, 2),
                    "peak_mb": round(peak, 1),
                    "spans_per_s": round(spans / seconds) if seconds > 0 else 0,
                    "exit": status,
                }
                rows.append(row)
                what = f"{size:g} MB" if shape == "traces" else f"1 trace of {size} children"
                print(
                    f"{command:9s} {what:28s} {row['spans']:>9} spans {row['seconds']:>8.2f} s "
                    f"{row['peak_mb']:>8.1f} MB peak {row['spans_per_s']:>9} spans/s",
                    flush=True,
                )
    print()
    for command in commands:
        mine = [r for r in rows if r["command"] == command and r["shape"] == "traces"]
        if len(mine) >= 2:
            small, large = mine[0], mine[1]
            bound = FLAT_FACTOR * small["peak_mb"] + FLAT_SLACK_MB
            flat = large["peak_mb"] <= bound
            rate = min(r["spans_per_s"] for r in mine)
            print(
                f"{command}: peak {small['peak_mb']:.0f} MB at {small['size']:g} MB, {large['peak_mb']:.0f} MB at "
                f"{large['size']:g} MB (bound {bound:.0f}): {'flat' if flat else 'NOT flat'}; slowest "
                f"{rate} spans/s: {'met' if rate >= MIN_RATE else 'below'} the {MIN_RATE} target"
            )
        wide = [r for r in rows if r["command"] == command and r["shape"] == "wide"]
        if len(wide) >= 2:
            a, b = wide[0], wide[-1]
            ratio = (b["seconds"] / a["seconds"]) / (b["spans"] / a["spans"])
            print(f"{command}: one wide trace, time per span x{ratio:.2f} from {a['size']} to {b['size']} children")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
