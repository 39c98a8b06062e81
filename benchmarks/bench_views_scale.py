"""``report`` and ``chrome-trace`` as the input grows: peak resident memory, seconds and spans per second.

Inputs are ``benchmarks/scale_inputs.py`` files (a real ``launchtrace demo`` run replicated with fresh ids and
shifted times, one run) of ``--sizes`` MB, 100 and 400 by default (``--big`` adds 2,000). Each command runs in a
fresh process (``python -m launchtrace``, imports included) and its peak resident set is the kernel's
``ru_maxrss`` of that process (``os.wait4``). ``--before SRC`` also runs the same commands on an earlier
``src`` folder (``PYTHONPATH``), for before/after figures from one run on one machine; make one with::

    git archive 033109c src | tar -x -C /tmp/before
    (cd src && find . -name '*.so' -exec cp --parents {} /tmp/before/src \\;)   # its C parts, built here

The targets (issue 25): peak RSS flat in the input size (the 400 MB peak <= 1.25 x the 100 MB peak + 40 MB)
and ``report`` at >= 100,000 spans/s. Spans/s is printed two ways: over the whole run (the detail's fixed cost
included) and at the margin between the two largest sizes (what each further span costs). The machine's load
(``uptime``) is printed first: on a shared machine wall-clock figures move with it.

Run: ``python benchmarks/bench_views_scale.py [--sizes 100 400] [--big] [--before /tmp/before/src]
[--before-up-to 400] [--folder /tmp/lt-views]`` (inputs are kept in the folder for the next run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_inputs import make_input

COMMANDS = {
    "report": lambda src, out: ["report", str(src), "--out", str(out / "r.html")],
    "chrome-trace": lambda src, out: ["chrome-trace", str(src), "--out", str(out / "c.json")],
}


def measure(argv: list[str], pythonpath: str | None) -> tuple[float, float, int]:
    """``(seconds, peak RSS MB, output bytes)`` of ``python -m launchtrace argv`` in a fresh process."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out_dir = Path(argv[argv.index("--out") + 1]).parent
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {os.waitstatus_to_exitcode(status)}: {err[-400:]}")
    size = sum(p.stat().st_size for p in out_dir.iterdir() if p.is_file())
    for p in out_dir.iterdir():
        p.unlink()
    return seconds, usage.ru_maxrss / 1024, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[100.0, 400.0], help="input sizes in MB")
    parser.add_argument("--big", action="store_true", help="add a 2,000 MB input")
    parser.add_argument("--before", help="an earlier src folder to run the same commands on (PYTHONPATH)")
    parser.add_argument(
        "--before-up-to", type=float, default=400.0, metavar="MB", help="run --before on inputs up to this size"
    )
    parser.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "lt-views")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes + ([2000.0] if args.big else [])))
    args.folder.mkdir(parents=True, exist_ok=True)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    inputs = {}
    for mb in sizes:
        path = args.folder / f"views-{mb:g}mb.jsonl"
        count = args.folder / f"views-{mb:g}mb.spans"
        if not path.exists() or not count.exists():
            count.write_text(str(make_input(path, mb)))
        inputs[mb] = (path, int(count.read_text()))
        print(f"input {mb:g} MB: {path.stat().st_size / 1e6:.1f} MB, {inputs[mb][1]:,} spans")
    sides = [("after", None)] + ([("before", args.before)] if args.before else [])
    results: dict[tuple[str, str, float], tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        out = Path(tmp)
        head = ("command", "side", "MB in", "spans", "s", "peak MB", "spans/s", "out MB")
        print("{:13} {:7} {:>6} {:>9} {:>7} {:>8} {:>9} {:>8}".format(*head))
        for command in args.commands:
            for side, pythonpath in sides:
                for mb in sizes:
                    if side == "before" and mb > args.before_up_to:
                        continue  # the earlier code on a 2 GB input: minutes and gigabytes (issue 25 measured it)
                    path, spans = inputs[mb]
                    s, peak, size = measure(COMMANDS[command](path, out), pythonpath)
                    results[(command, side, mb)] = (s, peak, size)
                    print(
                        f"{command:13} {side:7} {mb:6g} {spans:9,} {s:7.1f} {peak:8.0f} {spans / s:9,.0f} "
                        f"{size / 1e6:8.1f}",
                        flush=True,
                    )
    if len(sizes) >= 2:
        for command in args.commands:
            for side, _ in sides:
                runs = sorted(mb for c, sd, mb in results if c == command and sd == side)
                if len(runs) < 2:
                    continue
                small = runs[0]
                for large in runs[1:]:
                    (s0, p0, _), (s1, p1, _) = results[(command, side, small)], results[(command, side, large)]
                    bound = 1.25 * p0 + 40  # the rule, for 100 -> 400 MB
                    extra = inputs[large][1] - inputs[small][1]
                    margin = f"{extra / (s1 - s0):,.0f} spans/s" if s1 > s0 else "no slower (within noise)"
                    print(
                        f"{command} {side} {small:g} -> {large:g} MB in: peak {p0:.0f} -> {p1:.0f} MB "
                        f"({p1 / p0:.2f}x; target <= {bound:.0f} MB: {'met' if p1 <= bound else 'NOT met'}); "
                        f"at the margin {margin}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
