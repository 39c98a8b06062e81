"""Verdict quality on the zoo (``zoo_programs.py``): topology A/A, timing A/A and A/B, fleet alerts, each with
counts and 95 % Wilson intervals, per program and noise condition.

Every run is its own process (``launchtrace run``, CPU device) writing its own trace file; runs are made first
(``--keep DIR``), then judged with the code behind ``launchtrace diff`` and ``launchtrace alert``
(``--analyze DIR`` judges kept runs again without running anything).

**Runs.** Per program and condition, ``--rounds`` rounds, each running A, A' (the same program, another seed),
B (one kernel ``1.5``x as costly) and B' (``2``x), in an order rotated every round, so each compared pair ran
close in time. Conditions:

- ``quiet``: nothing added (the machine is shared: its load is printed with the figures);
- ``noisy``: each run pinned to CPU 0, and in half of the runs (chosen at random) a second process pinned to
  CPU 0 burns it from a random moment for a random time, so some runs (or parts of runs) slow down as a whole.

**Figures** (per program and condition; one run per side ``1v1`` and three ``3v3``, in blocks of three rounds):

- topology A/A: pairs of runs of an unchanged program (every pair among the A and A' runs, among the B runs and
  among the B' runs of one condition: distinct pairs of processes, though not independent ones) whose topology
  differs (``diff`` exit 1);
- timing A/A: pairs with any ``slower`` / ``faster`` row; ``same`` rows whose interval reaches past
  +-``min_change`` (the steps' interval widened by the one-run bound, or Welch's);
- timing A/B at 1.5x and 2x: pairs where the slowed kernel is ``slower`` (found), and pairs where any other
  kernel is ``slower`` / ``faster`` (wrongly flagged). The slowed kernel's adjoint launches (``tape``'s
  ``Tape.backward``: a row ``tape_loss (adjoint)``) run the backward of the same loop and are slowed as much:
  they are counted apart ("target's adjoint found"), never as another kernel. The true cost ratio of the
  slowed kernel (forward and adjoint launches together) is measured from the runs (median of the per-run
  median step time, B over A);
- fleet (``--fleet``, program ``many``: 22 kernels per step, or ``--fleet-programs many,loose,solver``):
  clean windows against a baseline and among peers with 1 and 3 runs per host, and windows where one host runs
  the 1.3x and one the 3x variant (its program's slowed kernel, :data:`TARGET`).

    python benchmarks/zoo_verdicts.py [--rounds 6] [--steps 60] [--programs timers,tape,...] [--keep DIR]
    python benchmarks/zoo_verdicts.py --analyze DIR
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.fleet.alerts import AlertOptions, against_baseline, among_peers
from launchtrace.analysis.fleet.baseline import BaselineBuilder
from launchtrace.analysis.unscoped import LoopIterations
from launchtrace.conventions import ADJOINT_SUFFIX
from launchtrace.sources.loading import load_traces
from launchtrace.sources.stream import TraceStream

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "zoo_programs.py"
PROGRAMS = ("timers", "tape", "bimodal", "temps", "many", "scope", "solver", "loose", "workers")
LOOSE = ("loose_inner", "loose_branch", "loose_setup", "loose_pingpong", "loose_many")
"""Five more timer-less shapes, not in the default list (``--programs loose_inner,...``)."""
CONCURRENT = ("pool_beside", "pool_light", "pool_inside", "prodcons", "workers")
"""Other threads launching while a timed step runs (``docs/diff.md``, concurrent threads): ``--programs
pool_beside,pool_light,pool_inside,prodcons,workers`` (all but ``workers`` not in the default list)."""
TARGET = {
    "timers": "collide", "tape": "tape_loss", "bimodal": "cost", "temps": "blur", "many": "k07", "scope": "shade",
    "solver": "relax", "loose": "drift", "workers": "churn", "loose_inner": "settle", "loose_branch": "bend",
    "loose_setup": "soak", "loose_pingpong": "leap", "loose_many": "stir", "pool_beside": "fill_k",
    "pool_light": "fill_k", "pool_inside": "gather_k", "prodcons": "consume_k",
}  # fmt: skip
VARIANTS = {"A": "1", "A2": "1", "B15": "1.5", "B2": "2"}
FLEET_HOSTS = ("h1", "h2", "h3", "h4")
MIN_CHANGE = 0.05


def wilson(k: int, n: int, z: float = 1.959964) -> str:
    """``k/n (lo-hi %)``: the 95 % Wilson score interval of a proportion."""
    if n == 0:
        return "0/0"
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{k}/{n} ({max(0.0, centre - half) * 100:.0f}-{min(1.0, centre + half) * 100:.0f} %)"


def _median_pct(values: list[float]) -> str:
    return f"{statistics.median(values) * 100:.0f} %" if values else "-"


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# --- running ------------------------------------------------------------------------------------------------


def _burn(seconds: float) -> None:
    subprocess.run(
        [
            "taskset",
            "-c",
            "0",
            sys.executable,
            "-c",
            f"import time\nt=time.time()+{seconds}\nwhile time.time()<t: pass",
        ],
        check=False,
    )


def run_once(out: Path, program: str, steps: int, slow: str, seed: int, noisy: bool, rng: random.Random, host=""):
    """One run of ``program``; with ``noisy``, pinned to CPU 0 and, half the time, a CPU burner beside it."""
    env = dict(os.environ, ZOO_SLOW=slow, ZOO_SEED=str(seed), OTEL_SERVICE_NAME=f"zoo-{program}")
    if host:
        env["OTEL_RESOURCE_ATTRIBUTES"] = f"host.name={host},service.version=1.0"
    cmd = ["nice", "-n", "5", sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(PROGRAM), program]
    cmd.append(str(steps))
    burner = None
    if noisy:
        cmd = ["taskset", "-c", "0", *cmd]
        if rng.random() < 0.5:
            delay, length = rng.uniform(0.0, 3.0), rng.uniform(0.5, 3.0)
            burner = threading.Timer(delay, _burn, (length,))
            burner.start()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    if burner is not None:
        burner.join()


def collect(folder: Path, programs: list[str], conditions: list[str], rounds: int, steps: int, seed: int) -> None:
    rng = random.Random(seed)
    names = list(VARIANTS)
    for program in programs:
        for cond in conditions:
            where = folder / program / cond
            where.mkdir(parents=True, exist_ok=True)
            before = load()
            t0 = time.perf_counter()
            for r in range(rounds):
                order = names[r % 4 :] + names[: r % 4]
                for v in order:
                    out = where / f"r{r:02d}-{v}.jsonl"
                    if not out.exists():
                        run_once(out, program, steps, VARIANTS[v], 1000 * r + names.index(v), cond == "noisy", rng)
            note = {"load_before": before, "load_after": load(), "seconds": round(time.perf_counter() - t0, 1)}
            (where / "conditions.json").write_text(json.dumps(note))
            print(f"ran {program}/{cond}: {rounds} rounds in {note['seconds']} s ({before} -> {note['load_after']})")


def fleet_folder(folder: Path, program: str) -> Path:
    """Where a program's fleet runs are kept (``fleet`` for ``many``, as before there was a choice)."""
    return folder / ("fleet" if program == "many" else f"fleet-{program}")


def collect_fleet(folder: Path, per_host: int, steps: int, seed: int, program: str = "many") -> None:
    """Baseline runs (2 per host), clean runs (``per_host`` per host), slow runs: h3 at 1.3x, h4 at 3x (3 each)."""
    rng = random.Random(seed)
    where = fleet_folder(folder, program)
    where.mkdir(parents=True, exist_ok=True)
    plan = [("base", h, k, "1") for h in FLEET_HOSTS for k in range(2)]
    plan += [("clean", h, k, "1") for k in range(per_host) for h in FLEET_HOSTS]
    plan += [("slow", "h3", k, "1.3") for k in range(3)] + [("slow", "h4", k, "3") for k in range(3)]
    before, t0 = load(), time.perf_counter()
    for i, (kind, host, k, slow) in enumerate(plan):
        out = where / f"{kind}-{host}-{k}.jsonl"
        if not out.exists():
            run_once(out, program, steps, slow, 5000 + i, False, rng, host=host)
    note = {"load_before": before, "load_after": load(), "seconds": round(time.perf_counter() - t0, 1)}
    (where / "conditions.json").write_text(json.dumps(note))
    print(f"ran fleet {program}: {len(plan)} runs in {note['seconds']} s ({before} -> {note['load_after']})")


# --- judging ------------------------------------------------------------------------------------------------


def _rounds(where: Path) -> int:
    return len(list(where.glob("r*-A.jsonl")))


def _load(where: Path, r: int, v: str):
    return load_traces([str(where / f"r{r:02d}-{v}.jsonl")])


class Flags(NamedTuple):
    """What one diff says about the zoo's slowed kernel (``target``) and the rest.

    ``found``: the target's row is ``slower``. ``adjoint``: its adjoint row is (None: no adjoint row). The slowed
    kernel's adjoint launches (``tape``: ``Tape.backward`` launches ``tape_loss`` with ``adjoint=True``, a row
    ``... tape_loss (adjoint)`` of its own) run the generated backward of the same loop, so ``ZOO_SLOW`` slows
    them as much as the forward launches (measured: 1.32x / 1.66x against the forward's 1.33x / 1.66x): they
    are the slowed kernel's, never "other kernels". ``other``: any other kernel row ``slower`` / ``faster``.
    ``bound``: the target's one-run bound (``detectable_change``, None with several runs or no row);
    ``under_bound``: the target was not found and its change is under that bound (one run each cannot tell
    it, as documented: not a miss of the test). ``wide``: ``same`` rows past +-min_change, of ``rows``."""

    found: bool
    adjoint: bool | None
    other: bool
    bound: float | None
    under_bound: bool
    wide: int
    rows: int


def _flags(result, target: str) -> Flags:
    found = other = under = False
    adjoint: bool | None = None
    bound: float | None = None
    wide = 0
    for t in result.timing:
        v = t.verdict
        if t.kind == "kernel" and t.name.endswith("." + target):
            found = v.verdict == "slower"
            bound = v.detectable_change
            under = not found and bound is not None and abs(v.effect) < bound
        elif t.kind == "kernel" and t.name.endswith("." + target + ADJOINT_SUFFIX):
            adjoint = v.verdict == "slower"
        elif t.kind == "kernel" and v.verdict in ("slower", "faster"):
            other = True
        if v.verdict == "same":
            lo, hi = _judged_interval(v)
            wide += lo < -MIN_CHANGE or hi > MIN_CHANGE
    return Flags(found, adjoint, other, bound, under, wide, len(result.timing))


def _judged_interval(v) -> tuple[float, float]:
    if v.basis == "steps-one-run":
        d = v.detectable_change
        return (1 + v.ci_low) / (1 + d) - 1, (1 + v.ci_high) * (1 + d) - 1
    return v.ci_low, v.ci_high


def median_step(traces, target: str) -> float:
    """The target's median time per step in one run (its forward and adjoint launches: ``rec.kernel`` is the
    same). A step is the record's scope; a record under no scope belongs to its loop iteration, as the diff
    cuts it (:class:`LoopIterations`), not to the exporter's root, whose window holds as many iterations as fit
    in a second (fewer of a slowed kernel: per root, ``loose_many``'s "1.5x" read 1.24x, ``loose``'s 1.62x at
    both factors)."""
    per: dict[tuple, float] = {}
    loops = LoopIterations()
    for t in traces:
        loose = [r for r in t.records if r.scope_id is None and r.end_ns > 0]
        loose.sort(key=lambda r: r.start_ns)
        iteration = {id(r): it[:2] for r, it in zip(loose, loops.root(loose))}
        for rec in t.records:
            if rec.kernel.endswith("." + target) and rec.end_ns > 0:
                key = iteration[id(rec)] if rec.scope_id is None else (id(t), rec.scope_id)
                per[key] = per.get(key, 0.0) + rec.duration_ns
    return statistics.median(per.values())


def _true_ratio(where: Path, rounds: int, variant: str, target: str) -> float:
    """B over A of the target's time per step (:func:`median_step`), the median over rounds of each."""
    a = [median_step(_load(where, r, "A"), target) for r in range(rounds)]
    b = [median_step(_load(where, r, variant), target) for r in range(rounds)]
    return statistics.median(b) / statistics.median(a)


class Tally:
    """A/B counts for one factor and one size (1v1 or 3v3)."""

    def __init__(self) -> None:
        self.pairs = self.found = self.other = self.under_bound = 0
        self.adjoint_pairs = self.adjoint_found = 0
        self.bounds: list[float] = []

    def add(self, f: Flags) -> None:
        self.pairs += 1
        self.found += f.found
        self.other += f.other
        self.under_bound += f.under_bound
        if f.adjoint is not None:
            self.adjoint_pairs += 1
            self.adjoint_found += f.adjoint
        if f.bound is not None:
            self.bounds.append(f.bound)


def judge_program(where: Path, program: str, rows: list[dict]) -> None:
    rounds = _rounds(where)
    if rounds == 0:
        return
    target = TARGET[program]
    cond = where.name
    topo = [0, 0]
    aa1, aa3 = [0, 0], [0, 0]
    wide = [0, 0]
    ab = {v: {"1v1": Tally(), "3v3": Tally()} for v in ("B15", "B2")}
    drift_runs = 0
    runs = {(r, v): _load(where, r, v) for r in range(rounds) for v in VARIANTS}
    unchanged = [[runs[(r, v)] for r in range(rounds) for v in ("A", "A2")]]
    unchanged += [[runs[(r, v)] for r in range(rounds)] for v in ("B15", "B2")]
    same_pairs = [pair for group in unchanged for pair in itertools.combinations(group, 2)]
    for a, b in same_pairs:
        topo[0] += not diff_traces(a, b, timing=False).equal
        topo[1] += 1
    for r in range(rounds):
        res = diff_traces(runs[(r, "A")], runs[(r, "A2")])
        f = _flags(res, "\0")
        aa1[0] += f.other or any(t.verdict.verdict in ("slower", "faster") for t in res.timing)
        aa1[1] += 1
        wide[0] += f.wide
        wide[1] += f.rows
        drift_runs += len(res.drift)
        for v in ("B15", "B2"):
            ab[v]["1v1"].add(_flags(diff_traces(runs[(r, "A2")], runs[(r, v)]), target))
    for block in range(rounds // 3):
        rs = range(3 * block, 3 * block + 3)
        a = [t for r in rs for t in runs[(r, "A")]]
        res = diff_traces(a, [t for r in rs for t in runs[(r, "A2")]])
        aa3[0] += any(t.verdict.verdict in ("slower", "faster") for t in res.timing)
        aa3[1] += 1
        f = _flags(res, "\0")
        wide[0] += f.wide
        wide[1] += f.rows
        for v in ("B15", "B2"):
            ab[v]["3v3"].add(_flags(diff_traces(a, [t for r in rs for t in runs[(r, v)]]), target))
    note = json.loads((where / "conditions.json").read_text()) if (where / "conditions.json").exists() else {}
    ratios = {v: _true_ratio(where, rounds, v, target) for v in ("B15", "B2")}
    rows.append(
        {
            "program": program,
            "condition": cond,
            "rounds": rounds,
            "topology A/A exit 1": wilson(*topo),
            "timing A/A 1v1 any slower/faster": wilson(*aa1),
            "timing A/A 3v3 any slower/faster": wilson(*aa3),
            "same rows past +-5%": f"{wide[0]} of {wide[1]} rows",
            "A/A 1v1 runs with drift found": drift_runs,
            "true ratio B15": f"{ratios['B15']:.2f}x",
            "true ratio B2": f"{ratios['B2']:.2f}x",
            **{f"A/B {v} {k} found": wilson(c.found, c.pairs) for v in ("B15", "B2") for k, c in ab[v].items()},
            **{
                f"A/B {v} {k} other kernels flagged": wilson(c.other, c.pairs)
                for v in ("B15", "B2")
                for k, c in ab[v].items()
            },
            **{  # why the 1v1 misses were missed: the target's change under the one-run bound
                f"A/B {v} 1v1 not found, under the one-run bound": f"{ab[v]['1v1'].under_bound} of "
                f"{ab[v]['1v1'].pairs - ab[v]['1v1'].found}"
                for v in ("B15", "B2")
            },
            "A/B 1v1 target's one-run bound (median)": _median_pct([b for v in ab for b in ab[v]["1v1"].bounds]),
            **{  # only where the slowed kernel has adjoint launches (tape)
                f"A/B {v} {k} target's adjoint found": wilson(c.adjoint_found, c.adjoint_pairs)
                for v in ("B15", "B2")
                for k, c in ab[v].items()
                if c.adjoint_pairs
            },
            "load": f"{note.get('load_before', '?')} -> {note.get('load_after', '?')}",
        }
    )


def _builder(paths: list[Path]) -> BaselineBuilder:
    b = BaselineBuilder(("service.version", "host.name"))
    for trace in TraceStream.from_paths([str(p) for p in paths]):
        b.add(trace)
    return b


def _kinds(alerts) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in alerts:
        out[a.reason] = out.get(a.reason, 0) + 1
    return out


def judge_fleet(folder: Path, rows: list[dict], windows: int, program: str = "many") -> None:
    where = fleet_folder(folder, program)
    if not where.exists():
        return
    target = f".{TARGET[program]}"
    base = _builder(sorted(where.glob("base-*.jsonl")))
    clean = {h: sorted(where.glob(f"clean-{h}-*.jsonl")) for h in FLEET_HOSTS}
    slow = {h: sorted(where.glob(f"slow-{h}-*.jsonl")) for h in ("h3", "h4")}
    per_host = min(len(v) for v in clean.values())
    options = AlertOptions()
    for runs in (1, 3):
        if per_host < runs:
            continue
        picks = list(itertools.islice(_windows(per_host, runs, len(FLEET_HOSTS)), windows))
        stats = {"baseline": [0, 0, 0], "peers": [0, 0, 0]}
        for pick in picks:
            files = [clean[h][k] for h, ks in zip(FLEET_HOSTS, pick) for k in ks]
            window = _builder(files)
            for mode, alerts in (
                ("baseline", against_baseline(base, window, options)),
                ("peers", among_peers(window, options)),
            ):
                kinds = _kinds(alerts)
                warn = sum(n for k, n in kinds.items() if k != "host_slowdown")
                stats[mode][0] += warn > 0
                stats[mode][1] += kinds.get("host_slowdown", 0) > 0
                stats[mode][2] += 1
        for mode, (warned, drifted, n) in stats.items():
            rows.append(
                {
                    "fleet": f"{program}: clean windows, {runs} run(s) per host, against {mode}",
                    "windows with any warning alert": wilson(warned, n),
                    "windows with a host_slowdown (info)": wilson(drifted, n),
                }
            )
        # slow hosts: h1, h2 clean; h3 at 1.3x, h4 at 3x
        found = {"h3": [0, 0], "h4": [0, 0], "wrong": [0, 0]}
        for pick in picks[: max(1, len(picks))]:
            files = [clean[h][k] for h, ks in zip(("h1", "h2"), pick[:2]) for k in ks]
            files += slow["h3"][:runs] + slow["h4"][:runs]
            alerts = against_baseline(base, _builder(files), options)
            for host in ("h3", "h4"):
                hit = any(
                    a.reason == "latency_regression" and a.group[1] == host and a.kernel.endswith(target)
                    for a in alerts
                )
                found[host][0] += hit
                found[host][1] += 1
            wrong = any(
                a.reason == "latency_regression"
                and (a.group[1] in ("h1", "h2") or not a.kernel.endswith(target))
                and a.kernel
                for a in alerts
            )
            found["wrong"][0] += wrong
            found["wrong"][1] += 1
        rows.append(
            {
                "fleet": f"{program}: slow hosts, {runs} run(s) per host, against baseline",
                "h4 (3x target) found": wilson(*found["h4"]),
                "h3 (1.3x target) found": wilson(*found["h3"]),
                "windows with a wrong kernel alert": wilson(*found["wrong"]),
                "note": "the slow hosts' runs are the same in every window; only the clean hosts' runs vary",
            }
        )
    note = json.loads((where / "conditions.json").read_text()) if (where / "conditions.json").exists() else {}
    rows.append(
        {"fleet": f"{program}: conditions", "load": f"{note.get('load_before', '?')} -> {note.get('load_after', '?')}"}
    )


def _windows(per_host: int, runs: int, hosts: int):
    """Windows of ``runs`` runs per host: disjoint first, then other combinations (overlapping)."""
    combos = [tuple(c) for c in itertools.combinations(range(per_host), runs)]
    rng = random.Random(7)
    seen = set()
    for i in range(per_host // runs):
        pick = tuple(tuple(range(i * runs, i * runs + runs)) for _ in range(hosts))
        seen.add(pick)
        yield pick
    while True:
        pick = tuple(rng.choice(combos) for _ in range(hosts))
        if pick not in seen:
            seen.add(pick)
            yield pick


def markdown(rows: list[dict]) -> str:
    """The figures as Markdown tables: one for the programs, one for the fleet."""
    programs = [r for r in rows if "program" in r]
    out = []
    if programs:
        cols = [k for k in dict.fromkeys(k for r in programs for k in r) if k not in ("program", "condition", "load")]
        cols.append("load")
        out.append("| program | condition | " + " | ".join(cols) + " |")
        out.append("| --- | --- | " + " | ".join("---" for _ in cols) + " |")
        for r in programs:
            out.append(f"| {r['program']} | {r['condition']} | " + " | ".join(str(r.get(c, "-")) for c in cols) + " |")
    for r in rows:
        if "fleet" in r:
            out.append("- " + "; ".join(f"{k}: {v}" for k, v in r.items()))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument(
        "--programs", default=",".join(PROGRAMS), help=f"comma-separated; also, only when named: {','.join(LOOSE)}"
    )
    parser.add_argument("--conditions", default="quiet,noisy")
    parser.add_argument("--fleet", action="store_true", help="also the fleet part (program many)")
    parser.add_argument("--fleet-programs", default="many", help="the programs the fleet part runs, comma-separated")
    parser.add_argument("--fleet-runs", type=int, default=6, help="clean runs per host for the fleet windows")
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="keep the runs here (and reuse runs already there)")
    parser.add_argument("--analyze", help="judge the runs kept in this folder, run nothing")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument(
        "--count-timed-threads",
        action="store_true",
        help="judge with other threads' launches in their own steps counted as concurrent work too "
        "(launchtrace.analysis.contention.COUNT_TIMED_THREADS, the alternative docs/diff.md measures)",
    )
    parser.add_argument(
        "--step-overlap",
        action="store_true",
        help="judge a kernel's row in a timed step by its step's overlap with other threads, not by its own "
        "launches' waits (launchtrace.analysis.contention.WAITED off: the rule before, docs/diff.md)",
    )
    args = parser.parse_args()
    if args.step_overlap:
        from launchtrace.analysis import contention

        contention.WAITED = False
    if args.count_timed_threads:
        from launchtrace.analysis import contention

        contention.COUNT_TIMED_THREADS = True
    programs = [p for p in args.programs.split(",") if p]
    conditions = [c for c in args.conditions.split(",") if c]
    fleet_programs = [p for p in args.fleet_programs.split(",") if p]
    folder = Path(args.analyze or args.keep or tempfile.mkdtemp(prefix="zoo-"))
    if not args.analyze:
        print(f"runs in {folder}; {load()}", flush=True)
        collect(folder, programs, conditions, args.rounds, args.steps, args.seed)
        for program in fleet_programs if args.fleet else ():
            collect_fleet(folder, args.fleet_runs, args.steps, args.seed, program)
    rows: list[dict] = []
    for program in programs:
        for cond in conditions:
            if (folder / program / cond).exists():
                judge_program(folder / program / cond, program, rows)
    for program in fleet_programs:
        judge_fleet(folder, rows, args.windows, program)
    for row in rows:
        print(json.dumps(row))
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
