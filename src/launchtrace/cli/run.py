"""``launchtrace run``: run a Python program with Warp instrumented and its device work exported as spans.

Like ``opentelemetry-instrument``: the program runs in this process (``runpy``) with ``sys.argv`` set to the
script and its arguments, its exit code is preserved, and pending spans are flushed at the end. Spans go to
``--out`` (emptied first, locked against a second run given the same file; only its last folder level is
created; refused when it is a script or any file that is not spans), else to ``LAUNCHTRACE_FILE`` or
``launchtrace-<date>-<time>-<pid>.jsonl`` in the working directory; when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
the traces one) is set, over OTLP instead. ``service.name`` is the script's (or module's) name unless
``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name one. Python processes the program starts (``spawn``
/ ``forkserver`` workers, ``subprocess``) export the same way (:mod:`launchtrace.autorun`).

Example::

    launchtrace run --out spans.jsonl sim.py --steps 100
    launchtrace run -m mypackage.train --epochs 2
"""

from __future__ import annotations

import argparse
import atexit
import importlib.machinery
import importlib.util
import logging
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Mapping
from typing import Any, TextIO

from launchtrace.cli._output import make_parent
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
    try:  # as Python prints it; a program that closed its stderr does not get a new error from us
        print(code, file=sys.stderr)
    except (OSError, ValueError, AttributeError, RuntimeError):
        pass
    return 1


def default_service_name(target: str, *, as_module: bool, environ: Mapping[str, str] | None = None) -> str | None:
    """The script's name without ``.py`` (or the module's name), unless the environment names the service:
    ``OTEL_SERVICE_NAME``, ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``, or ``LAUNCHTRACE_SERVICE_NAME``."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SERVICE_NAME", "").strip() or env.get("LAUNCHTRACE_SERVICE_NAME", "").strip():
        return None
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == "service.name" and value.strip():
            return None
    if as_module:
        return target
    name = os.path.basename(target)
    return name[:-3] if name.endswith(".py") and len(name) > 3 else name


def _check_module(name: str) -> None:
    """``-m name`` must exist before anything starts (no banner, no empty file). Only the top-level package is
    looked up here: importing a parent package before Warp is instrumented would let it keep unpatched names."""
    top = name.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None or _find_in_cwd(top)
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UserError(f"-m {name}: no module named {top!r}")


def _find_in_cwd(top: str) -> bool:
    """``python -m`` looks in the working directory first; the ``launchtrace`` script's ``sys.path`` may not."""
    return importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) is not None


def _submodule_found(name: str) -> bool:
    """Whether ``pkg.mod`` exists: its parent packages are imported (Warp instrumented by then, as runpy would
    import them), the module itself is not run."""
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False
    finally:
        sys.path.remove(os.getcwd())


def run(args: argparse.Namespace) -> int:
    from launchtrace import autorun
    from launchtrace.export import exit_timeout, start_export, stop_export

    if args.module is None and args.script is None:
        raise UserError("give a script to run (launchtrace run script.py [args]) or -m module")
    if args.module is not None:
        _check_module(args.module)
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
    claimed = None
    if args.out:
        settings["file_path"] = make_parent("--out", args.out)
        claimed = _claim_output(settings["file_path"])
    service = default_service_name(target, as_module=args.module is not None)
    if service:
        settings["service_name"] = service
    messages = _own_stderr()  # the program may close or reuse fd 2: our messages must not go into its data
    _log_to(messages)
    try:
        pipeline = start_export(**settings)
    except (ValueError, OSError) as exc:
        _release(claimed)
        raise UserError(str(exc)) from None
    if args.module is not None and "." in args.module and not _submodule_found(args.module):
        stop_export()
        _release(claimed)
        if args.out and os.path.exists(settings["file_path"]) and os.path.getsize(settings["file_path"]) == 0:
            os.remove(settings["file_path"])
        raise UserError(f"-m {args.module}: no module named {args.module!r}")
    autorun.export_to_children(pipeline.config, settings)
    code = _run_program(target, program_args, as_module=args.module is not None)
    stats = stop_export(exit_timeout())
    _release(claimed)
    _say(
        messages,
        f"launchtrace: {stats.exported} spans -> {pipeline.sink.description} ({stats.folded_records} records folded "
        f"into {stats.summary_spans} summary spans, {stats.dropped} dropped){_children_note(pipeline.sink)}"
        + _raised_note(stats.raised),
    )
    if code is _INTERRUPTED:
        _die_of_sigint()
        return 130
    return code


def _children_note(sink: Any) -> str:
    """A clause for the closing line when the program's child processes appended their own spans to the file
    (a pool of workers: the parent itself may have launched nothing, and "0 spans" alone reads as a failure)."""
    path, written = getattr(sink, "path", None), getattr(sink, "bytes_written", None)
    try:
        others = os.path.getsize(path) - written if path is not None and written is not None else 0
    except OSError:
        return ""
    return f"; child processes wrote {others:,} more bytes of spans to it" if others > 0 else ""


_INTERRUPTED: Any = object()
"""What :func:`_run_program` returns for a program ended by Ctrl-C (``KeyboardInterrupt``): not an int, so that
a program's own ``sys.exit(-2)`` is never taken for one."""


def _claim_output(path: str) -> int:
    """Lock and empty ``--out`` for this run: a second run given the same file is refused, not let truncate it."""
    from launchtrace.export.fileopen import OutputBusy, claim

    try:
        return claim(path)
    except OutputBusy as exc:
        raise UserError(f"--out {exc.strerror}; give each run its own file") from None
    except OSError as exc:
        raise UserError(f"--out {path}: {exc.strerror or exc}") from None


def _release(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _own_stderr() -> TextIO | None:
    """A private handle on the stderr launchtrace was started with (``None`` if there was none)."""
    try:
        return os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace", closefd=True)
    except OSError:
        return None


class _OwnStderrHandler(logging.Handler):
    """launchtrace's warnings to the stderr ``run`` started with, where Python's last-resort handler would have
    written them to whatever fd 2 is by then; where the program configured logging (root has handlers), the
    records go there instead, as they always did."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.WARNING)
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        try:
            self.stream.write(self.format(record) + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _log_to(stream: TextIO | None) -> None:
    """One such handler at a time: a second ``run`` in the same process (tests, notebooks) replaces the first's."""
    logger = logging.getLogger("launchtrace")
    for old in [h for h in logger.handlers if isinstance(h, _OwnStderrHandler)]:
        logger.removeHandler(old)
    if stream is not None:
        logger.addHandler(_OwnStderrHandler(stream))


def _say(stream: TextIO | None, line: str) -> None:
    """Our own message, never an error of the program's: a closed or full stderr just loses the line."""
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except (OSError, ValueError):
            pass


def _die_of_sigint() -> None:
    """End as Python does after an unhandled ``KeyboardInterrupt``: ``atexit`` handlers, buffered output, then
    death by SIGINT itself (exit status -2 to a parent, 130 in a shell), which shell loops test for."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except (OSError, ValueError):  # not the main thread, or no signals here: the 130 exit code then
        pass


_OUR_FILES = (os.path.dirname(os.path.abspath(__file__)), os.path.abspath(runpy.__file__), "<frozen runpy>")


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _without_passthrough(te: traceback.TracebackException, seen: set[int]) -> None:
    """Leave out launchtrace's frames that an exception only passed through (the launch wrapper between the
    program's ``wp.launch`` call and Warp): the program's traceback reads as it would bare. Frames where the
    exception arose in launchtrace itself (nothing but launchtrace after them) stay."""
    if id(te) in seen:
        return
    seen.add(id(te))
    frames = list(te.stack)
    keep = [
        f
        for i, f in enumerate(frames)
        if not f.filename.startswith(_PACKAGE) or all(g.filename.startswith(_PACKAGE) for g in frames[i + 1 :])
    ]
    if len(keep) != len(frames):
        te.stack = traceback.StackSummary.from_list(keep)
    for other in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or ())):
        if other is not None:
            _without_passthrough(other, seen)


def _raised_note(raised: int) -> str:
    """Calls that raised, which a program that catches the error never shows (``summary`` lists them)."""
    if not raised:
        return ""
    return f"; {raised} {'call or scope' if raised == 1 else 'calls or scopes'} raised (launchtrace summary lists them)"


def _print_program_traceback() -> None:
    """The traceback Python would print: the program's frames, without runpy's and this module's, nor
    launchtrace's frames the exception only passed through."""
    etype, exc, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_OUR_FILES):
        tb = tb.tb_next
    try:
        te = traceback.TracebackException(etype, exc, tb)
        _without_passthrough(te, set())
        sys.stderr.write("".join(te.format()))
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError, RuntimeError):  # the program closed its stderr
        pass


def _run_program(target: str, program_args: list[str], *, as_module: bool) -> int:
    """Run the program as ``python script.py args`` would; its exit status (1 with a traceback if it raised), or
    :data:`_INTERRUPTED` when Ctrl-C ended it."""
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [target, *program_args]
    if as_module:
        sys.path.insert(0, os.getcwd())
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(os.path.abspath(target), run_name="__main__")  # absolute, as Python names __main__
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt:
        _print_program_traceback()
        return _INTERRUPTED
    except BaseException:  # the program's own error: report it as Python would, then still flush spans
        _print_program_traceback()
        return 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
