"""``launchtrace run``: run a Python program with Warp instrumented and its device work exported as spans.

Like ``opentelemetry-instrument``: the program runs in this process (``runpy``) with ``sys.argv`` set to the
script and its arguments, its exit code is preserved, and pending spans are flushed at the end. Spans go to
``--out`` (emptied first), else to ``LAUNCHTRACE_FILE`` or ``launchtrace-<date>-<time>-<pid>.jsonl`` in the
working directory; when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces one) is set, over OTLP instead.

Example::

    launchtrace run --out spans.jsonl sim.py --steps 100
    launchtrace run -m mypackage.train --epochs 2
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback

from launchtrace.errors import UserError
from launchtrace.export.config import FOLD_MODES

HELP = "run a Python program with Warp instrumented, exporting every launch as a span"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", "-o", metavar="FILE", help="the OTLP JSON Lines file to write (emptied first)")
    parser.add_argument(
        "--fold",
        choices=FOLD_MODES,
        help="when repeated launches become summary spans: auto (the default: only a trace that would pass its "
        "span budget), always (from the first repeat), off (never; a trace past its budget is cut)",
    )
    parser.add_argument("--no-fold", action="store_true", help="the same as --fold off")
    parser.add_argument(
        "--value-stats", action="store_true", help="add mean/std/min/max of every array a launch writes (slower)"
    )
    parser.add_argument(
        "--device-timing", action="store_true", help="add CUDA event times of each launch (CUDA devices only)"
    )
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module (as python -m) instead of a script")
    parser.add_argument("script", nargs="?", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the program")


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    from launchtrace.export import start_export, stop_export

    if args.module is None and args.script is None:
        raise UserError("give a script to run (launchtrace run script.py [args]) or -m module")
    if args.module is not None:
        program_args = [args.script, *args.args] if args.script is not None else list(args.args)
        target = args.module
    else:
        if not os.path.isfile(args.script):
            raise UserError(f"{args.script}: no such file")
        program_args = list(args.args)
        target = args.script
    settings: dict = {"fold": "off"} if args.no_fold else {"fold": args.fold} if args.fold else {}
    if args.value_stats:
        settings["value_stats"] = True
    if args.device_timing:
        settings["device_timing"] = True
    if args.out:
        settings["file_path"] = os.path.abspath(args.out)
        folder = os.path.dirname(settings["file_path"])
        if not os.path.isdir(folder):
            raise UserError(f"--out {args.out}: folder {folder} does not exist")
    try:
        pipeline = start_export(truncate=bool(args.out), **settings)
    except (ValueError, OSError) as exc:
        raise UserError(str(exc)) from None
    code = _run_program(target, program_args, as_module=args.module is not None)
    stats = stop_export()
    print(
        f"launchtrace: {stats.exported} spans -> {pipeline.sink.description} ({stats.folded_records} records folded "
        f"into {stats.summary_spans} summary spans, {stats.dropped} dropped)",
        file=sys.stderr,
    )
    return code


_OUR_FILES = (os.path.dirname(os.path.abspath(__file__)), os.path.abspath(runpy.__file__), "<frozen runpy>")


def _print_program_traceback() -> None:
    """The traceback Python would print: the program's frames, without runpy's and this module's."""
    etype, exc, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OUR_FILES):
        tb = tb.tb_next
    traceback.print_exception(etype, exc, tb)


def _run_program(target: str, program_args: list[str], *, as_module: bool) -> int:
    """Run the program as ``python script.py args`` would; its exit status (1 with a traceback if it raised)."""
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    if as_module:
        sys.argv = [target, *program_args]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [target, *program_args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt:
        _print_program_traceback()
        return 130
    except BaseException:  # the program's own error: report it as Python would, then still flush spans
        _print_program_traceback()
        return 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
