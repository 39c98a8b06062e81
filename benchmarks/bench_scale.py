"""Size: every analyzer command's peak memory and speed as its input grows (issue 25).

Commands: ``summary``, ``dataflow``, ``diff`` (the file against itself), ``report``, ``chrome-trace``, ``baseline
build`` and ``alert``. Inputs come from ``scale_inputs.py``, run in a child process (a real ``launchtrace demo``
run replicated with fresh ids and shifted times, one run): files of ``--sizes`` MB (default 100 and 400; ``--big``
adds 2000) of many traces, and single traces of ``--wide`` launch children. Each command runs in a fresh process
(``python -m launchtrace``); its peak resident memory is the child's own (``os.wait4``'s ``ru_maxrss``), its time
the wall clock from start to exit (imports count), spans per second are the file's spans over that time, and ``out
MB`` is what it wrote to ``--out`` (stdout is thrown away). ``cpu s`` is the child's own CPU time (user + system,
from the same ``os.wait4``), and ``cpu spans/s`` the spans over it: on a shared machine the wall clock also counts
the time the child waited for a core, the CPU time much less so. ``--repeat N`` runs each command N times on each
input (the trees alternating) and gives the median times and the largest peak. The trees are compiled first into
a bytecode cache (``PYTHONPYCACHEPREFIX``), as an installed package is: ``--no-bytecode`` runs without it where
``PYTHONDONTWRITEBYTECODE`` is set (every run then compiles its modules, about 0.05 s of CPU here).

Targets (issue 25): peak RSS flat in the input (the 400 MB peak at most 1.25x the 100 MB peak + 40 MB), at least
100,000 spans/s for ``summary``, ``dataflow``, ``diff`` and ``report``, and one wide trace's time linear in its
spans. The closing lines say whether each command met them, and its spans/s at the margin between the smallest and
each larger size (what each further span costs: ``report``'s detail is a fixed cost); for one wide trace, the peak
memory and time each further child costs between one size and the next (``--wide 50000,100000,200000,1000000``).

Before/after in one run on one machine: ``--src DIR`` is the tree measured (default this checkout's ``src``),
``--before DIR`` an earlier one run right after it on each input (up to ``--before-up-to`` MB). Make one with::

    git archive <commit> src | tar -x -C /tmp/before
    (cd src && find . -name '*.so' -exec cp --parents {} /tmp/before/src \\;)   # its C parts, built here

Run: ``python benchmarks/bench_scale.py [--sizes 100,400] [--big] [--wide 25000,100000] [--commands ...] [--before
/tmp/before/src]`` (a few minutes on a loaded 2-core machine; inputs are written once to
``$LAUNCHTRACE_SCALE_CACHE``, default ``/tmp/lt-scale``). The smallest useful run, 26 s here at load 3 with the
inputs made first: ``--sizes 10,40 --wide 5000,20000``. On a shared machine wall-clock figures move with the load:
``uptime`` is printed first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "summary": lambda f, tmp: ["summary", str(f)],
    "dataflow": lambda f, tmp: ["dataflow", str(f)],
    "diff": lambda f, tmp: ["diff", str(f), str(f), "--out", str(tmp / "diff.txt")],
    "report": lambda f, tmp: ["report", str(f), "--out", str(tmp / "r.html")],
    "chrome-trace": lambda f, tmp: ["chrome-trace", str(f), "--out", str(tmp / "c.json")],
    "baseline": lambda f, tmp: ["baseline", "build", "--from", str(f), "--out", str(tmp / "b.pb"), "--quiet"],
    "alert": lambda f, tmp: ["alert", "--from", str(f), "--quiet", "--out", str(tmp / "alert.txt")],
}
NOT_WIDE = ("dataflow", "diff", "report", "chrome-trace")  # one trace's views: the traces shape's rows say it
RATE_TARGET = ("summary", "dataflow", "diff", "report")
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
        # in a child: a child's ru_maxrss starts from its parent's size at the fork, so this process stays small
        shape = ["--shape", "wide", "--spans", str(wide)] if wide else ["--mb", f"{megabytes:g}"]
        made = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("scale_inputs.py")), str(path), *shape],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        count.write_text(made.stdout.split(": ")[-1].split(" spans")[0])
    return path, int(count.read_text())


_BYTECODE: dict[str, str] = {}


def bytecode_env() -> dict[str, str]:
    """Where the children find the trees' compiled modules (``PYTHONPYCACHEPREFIX``), or nothing with
    ``--no-bytecode``: an installed package has its ``.pyc`` files, and without them (``PYTHONDONTWRITEBYTECODE``
    set, as on this machine) every run compiles some 60 modules first (about 0.05 s of CPU here: ``summary`` of a
    small file took 0.24-0.26 s of CPU without them, 0.19-0.21 s with them)."""
    return dict(_BYTECODE)


def compile_tree(src: Path) -> None:
    """Compile ``src`` into the bytecode cache before it is measured (the first run would else do it; the
    modules from outside it, NumPy's and the standard library's, are compiled by an unmeasured first run)."""
    if _BYTECODE:
        env = {**os.environ, **_BYTECODE}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], env=env, check=True, capture_output=True)


def measure(args: list[str], src: Path, timeout: float, out_dir: Path) -> tuple[float, float, int, int, float]:
    """``(seconds, peak MB, exit status, bytes written to out_dir, CPU seconds)`` of ``python -m launchtrace ARGS``
    run from ``src``; ``out_dir`` is emptied after."""
    env = {**os.environ, "PYTHONPATH": str(src), **bytecode_env()}
    if "PYTHONPYCACHEPREFIX" in env:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
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
            return float("inf"), usage.ru_maxrss / 1024, -9, 0, float("inf")
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in (0, 1):
        print(f"  {' '.join(args[:2])}: exit {proc.returncode}: {err.strip()[-300:]}", file=sys.stderr)
    written = sum(p.stat().st_size for p in out_dir.iterdir() if p.is_file())
    for p in out_dir.iterdir():
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    return seconds, usage.ru_maxrss / 1024, proc.returncode, written, usage.ru_utime + usage.ru_stime


def verdicts(rows: list[dict], commands: list[str], sides: list[str]) -> None:
    """The closing lines: flat, the rate target, spans/s at the margin, and the wide trace's linearity."""
    for command in commands:
        for side in sides:
            mine = [r for r in rows if r["command"] == command and r["side"] == side and r["shape"] == "traces"]
            label = command if len(sides) == 1 else f"{command} ({side})"
            if len(mine) >= 2:
                small, large = mine[0], mine[1]
                bound = FLAT_FACTOR * small["peak_mb"] + FLAT_SLACK_MB
                rate = min(r["spans_per_s"] for r in mine)
                cpu_rate = min(r["cpu_spans_per_s"] for r in mine)
                target = f" ({'met' if rate >= MIN_RATE else 'below'} the {MIN_RATE:,} target)"
                margins = []
                for other in mine[1:]:
                    extra, more = other["spans"] - small["spans"], other["seconds"] - small["seconds"]
                    margins.append(f"{extra / more:,.0f} spans/s" if more > 0 else "no slower")
                print(
                    f"{label}: peak {small['peak_mb']:.0f} MB at {small['size']:g} MB, {large['peak_mb']:.0f} MB at "
                    f"{large['size']:g} MB (bound {bound:.0f}): {'flat' if large['peak_mb'] <= bound else 'NOT flat'}; "
                    f"slowest {rate:,} spans/s{target if command in RATE_TARGET else ''} ({cpu_rate:,} on its CPU "
                    "time); at the margin " + " / ".join(margins)
                )
            wide = [r for r in rows if r["command"] == command and r["side"] == side and r["shape"] == "wide"]
            if len(wide) >= 2:
                a, b = wide[0], wide[-1]
                ratio = (b["seconds"] / a["seconds"]) / (b["spans"] / a["spans"])
                margins = []
                for lo, hi in itertools.pairwise(wide):
                    extra = hi["spans"] - lo["spans"]
                    per_span = (hi["peak_mb"] - lo["peak_mb"]) * 2**20 / extra
                    seconds = (hi["seconds"] - lo["seconds"]) / extra * 1e6
                    margins.append(f"{per_span:,.0f} B and {seconds:.1f} us a span from {lo['size']} to {hi['size']}")
                print(
                    f"{label}: one wide trace, time per span x{ratio:.2f} from {a['size']} to {b['size']} children; "
                    "peak memory and time at the margin: " + "; ".join(margins)
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,400", help="input sizes in MB (default 100,400)")
    parser.add_argument("--big", action="store_true", help="also a 2000 MB input")
    parser.add_argument("--wide", default="25000,100000", help="children of the single-trace inputs ('' for none)")
    parser.add_argument("--commands", default=",".join(COMMANDS), help="which commands (default all)")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the launchtrace source tree to run")
    parser.add_argument("--before", type=Path, help="an earlier source tree, run after --src on each input")
    parser.add_argument("--before-up-to", type=float, default=400.0, metavar="MB", help="--before's largest input")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command before it is killed")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command per input and tree (median)")
    parser.add_argument(
        "--no-bytecode", action="store_true", help="run without compiled modules where PYTHONDONTWRITEBYTECODE is set"
    )
    args = parser.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",") if s] + ([2000.0] if args.big else [])
    wides = [int(w) for w in args.wide.split(",") if w]
    commands = [c for c in args.commands.split(",") if c]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        parser.error(f"unknown commands {sorted(unknown)}; choose from {','.join(COMMANDS)}")
    trees = [("after", args.src)] + ([("before", args.before)] if args.before else [])
    if not args.no_bytecode:
        _BYTECODE["PYTHONPYCACHEPREFIX"] = str(cache() / "pycache")
        for _side, tree in trees:
            compile_tree(tree)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print("source trees: " + ", ".join(f"{side} {tree}" for side, tree in trees))
    print("compiled modules: " + (_BYTECODE.get("PYTHONPYCACHEPREFIX") or "none (--no-bytecode)"))
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        inputs = [("traces", s, *input_file(megabytes=s)) for s in sizes]
        inputs += [("wide", w, *input_file(wide=w)) for w in wides]
        for command in commands:
            if _BYTECODE:  # one run of each tree unmeasured: the modules it imports from outside the trees compiled
                for _side, tree in trees:
                    measure(COMMANDS[command](inputs[0][2], tmp), tree, args.timeout, tmp)
            for shape, size, path, spans in inputs:
                if shape == "wide" and command in NOT_WIDE:
                    continue
                runs: dict[str, list[tuple[float, float, int, int, float]]] = {side: [] for side, _ in trees}
                for _ in range(max(1, args.repeat)):
                    for side, tree in trees:
                        if side == "before" and shape == "traces" and size > args.before_up_to:
                            continue  # the earlier code on a 2 GB input: minutes and gigabytes (issue 25 measured it)
                        runs[side].append(measure(COMMANDS[command](path, tmp), tree, args.timeout, tmp))
                for side, _tree in trees:
                    if not runs[side]:
                        continue
                    seconds = statistics.median(r[0] for r in runs[side])
                    cpu = statistics.median(r[4] for r in runs[side])
                    peak = max(r[1] for r in runs[side])
                    status = max(runs[side], key=lambda r: abs(r[2]))[2]
                    written = runs[side][-1][3]
                    row = {
                        "command": command,
                        "side": side,
                        "shape": shape,
                        "size": size,
                        "mb": round(path.stat().st_size / 1e6, 1),
                        "spans": spans,
                        "seconds": round(seconds, 2),
                        "peak_mb": round(peak, 1),
                        "spans_per_s": round(spans / seconds) if seconds > 0 else 0,
                        "cpu_s": round(cpu, 2),
                        "cpu_spans_per_s": round(spans / cpu) if 0 < cpu < float("inf") else 0,
                        "runs": len(runs[side]),
                        "out_mb": round(written / 1e6, 1),
                        "exit": status,
                    }
                    rows.append(row)
                    what = f"{size:g} MB" if shape == "traces" else f"1 trace of {size} children"
                    print(
                        f"{command:12s} {side:6s} {what:28s} {row['spans']:>9} spans {row['seconds']:>8.2f} s "
                        f"{row['peak_mb']:>8.1f} MB peak {row['spans_per_s']:>9} spans/s {row['out_mb']:>7.1f} MB out "
                        f"{row['cpu_s']:>8.2f} cpu s {row['cpu_spans_per_s']:>9} cpu spans/s",
                        flush=True,
                    )
    print()
    verdicts(rows, commands, [side for side, _ in trees])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
