"""Run one of Warp's shipped examples as its own ``__main__`` and print what it computed, as one JSON line.

The sweep (``scripts/sweep_warp_examples.py``) and ``tests/test_warp_examples.py`` run this driver twice per
example, bare and exported, and compare the two JSON lines:

- ``state``: a SHA-256 of every array the example object holds at the end (``wp.array`` and ``numpy`` arrays
  found on ``example`` and its attributes, two levels deep), so "identical results" means bit for bit;
- ``launches``: an independent count of kernel launches executed: the ``kernel: ...`` lines of Warp's own
  ``wp.config.print_launches`` log (one per ``wp.launch`` call), less the calls that only built a ``wp.Launch``
  command (``record_cmd=True``: logged, not run), plus each ``wp.Launch.launch()`` replay (not logged);
  those two are counted by plain wrappers around ``wp.Launch``, installed before anything else;
- ``export``: with ``--trace FILE``, ``launchtrace.start_export(file_path=FILE, include_internal=True)`` runs
  around the example and the final ``ExportStats`` are reported. When the driver itself runs under
  ``launchtrace run`` (export already started), it leaves the export alone and reports its stats.

Example::

    python scripts/run_warp_example.py warp.examples.core.example_fluid --trace /tmp/fluid.jsonl -- \
        --device cpu --num-frames 3 --headless
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import runpy
import sys
import time
from typing import Any

MARKER = "LAUNCHTRACE-EXAMPLE-RESULT "
NOT_STATE = {"id", "ptr", "handle", "device", "stream", "context"}


class LaunchLog:
    """A Warp logger that counts the ``kernel: ...`` lines ``wp.config.print_launches`` emits (one per call)."""

    def __init__(self) -> None:
        self.launches = 0

    def info(self, message: str) -> None:
        if message.startswith("kernel: "):
            self.launches += 1
        else:
            print(message)

    def debug(self, message: str) -> None:
        pass

    def warning(self, message: str, category: Any = None, stacklevel: int = 1) -> None:
        print(f"warning: {message}", file=sys.stderr)

    def error(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)


def count_launch_commands(wp) -> dict[str, int]:
    """Count ``wp.Launch`` objects built and ``wp.Launch.launch`` replays (Warp's log sees neither as a run)."""
    counts = {"built": 0, "replayed": 0}
    init, launch = wp.Launch.__init__, wp.Launch.launch

    def counting_init(self, *args, **kwargs):
        counts["built"] += 1
        return init(self, *args, **kwargs)

    def counting_launch(self, *args, **kwargs):
        counts["replayed"] += 1
        return launch(self, *args, **kwargs)

    wp.Launch.__init__, wp.Launch.launch = counting_init, counting_launch
    return counts


def state_hashes(root: Any, max_depth: int = 2) -> dict[str, str]:
    """``{"example.attr.sub": sha256}`` of every array reachable from ``root`` through attributes, lists and dicts."""
    import numpy as np
    import warp as wp

    out: dict[str, str] = {}
    seen: set[int] = set()

    def digest(a: np.ndarray) -> str:
        a = np.ascontiguousarray(a)
        return hashlib.sha256(f"{a.dtype}{a.shape}".encode() + a.tobytes()).hexdigest()[:16]

    def walk(obj: Any, path: str, depth: int) -> None:
        if id(obj) in seen or depth > max_depth:
            return
        seen.add(id(obj))
        if isinstance(obj, wp.array):
            try:
                out[path] = digest(obj.numpy())
            except (RuntimeError, TypeError, ValueError) as exc:
                out[path] = f"unreadable: {type(exc).__name__}"
            return
        if all(hasattr(obj, a) for a in ("offsets", "columns", "values", "nrow")) and isinstance(obj.values, wp.array):
            # a BSR matrix: its arrays have spare capacity past the last block (uninitialised memory that
            # differs from run to run), so only the nnz blocks the offsets say are in use are compared
            offsets = obj.offsets.numpy()[: obj.nrow + 1]
            nnz = int(offsets[-1]) if offsets.size else 0
            out[path + ".offsets"] = digest(offsets)
            out[path + ".columns"] = digest(obj.columns.numpy()[:nnz])
            out[path + ".values"] = digest(obj.values.numpy()[:nnz])
            return
        if isinstance(obj, np.ndarray):
            if obj.dtype != object:
                out[path] = digest(obj)
            return
        if isinstance(obj, float | int | bool) and not isinstance(obj, type):
            out[path] = repr(obj)
            return
        if isinstance(obj, list | tuple):
            for i, item in enumerate(obj[:64]):
                walk(item, f"{path}[{i}]", depth + 1)
            return
        if isinstance(obj, dict):
            for k, v in list(obj.items())[:64]:
                walk(v, f"{path}[{k!r}]", depth + 1)
            return
        attrs = getattr(obj, "__dict__", None)
        if attrs is None or isinstance(obj, type) or type(obj).__module__.startswith(("builtins", "numpy")):
            return
        for k, v in sorted(attrs.items()):
            if k.startswith("__") or "render" in k or "graph" in k or k in NOT_STATE or k.endswith(("_id", "_ptr")):
                continue  # renderers, graph handles, and native handles / pointers (differ every run)
            walk(v, f"{path}.{k}", depth + 1)

    walk(root, "example", 0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="e.g. warp.examples.core.example_fluid")
    parser.add_argument("--trace", help="export to this OTLP JSON Lines file (launchtrace.start_export)")
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    example_args = argv[split + 1 :]  # everything after -- goes to the example

    import warp as wp

    wp.config.quiet = True
    log = LaunchLog()
    wp.set_logger(log)
    wp.config.print_launches = True
    commands = count_launch_commands(wp)

    import launchtrace.export as export

    outside = export._pipeline is not None  # already exporting: we run under `launchtrace run`
    if args.trace and not outside:
        export.start_export(file_path=args.trace, truncate=True, include_internal=True)
    sys.argv = [args.module.rsplit(".", 1)[-1] + ".py", *example_args]
    printed = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(printed):
        namespace = runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    wall = time.perf_counter() - t0
    wp.config.print_launches = False
    stats = None
    if args.trace or outside:
        stats = export.stop_export(60.0)
    example = namespace.get("example")
    result = {
        "module": args.module,
        "launches": log.launches - commands["built"] + commands["replayed"],
        "logged": log.launches,
        "commands": commands,
        # the example object, or for script-style examples the arrays their __main__ block left behind
        "state": state_hashes(example if example is not None else {k: v for k, v in namespace.items() if k[0] != "_"}),
        "wall_s": round(wall, 3),
        "printed_lines": len(printed.getvalue().splitlines()),
        "export": None if stats is None else {k: getattr(stats, k) for k in ("built", "exported", "dropped")},
        "pid": os.getpid(),
    }
    sys.stdout.write(MARKER + json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
