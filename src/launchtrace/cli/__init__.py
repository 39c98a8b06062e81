"""The ``launchtrace`` command: a thin dispatcher over one module per subcommand.

Each subcommand lives in ``launchtrace.cli.<module>`` and defines ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int``. Modules are imported lazily, so ``launchtrace pull`` never pays for Warp's import.
Errors a user can fix (bad input, unreachable backend, wrong argument) are raised as
:class:`launchtrace.errors.UserError` and printed as one line with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from launchtrace.errors import UserError

# command name -> module under launchtrace.cli
COMMANDS: dict[str, str] = {
    "demo": "demo",
    "run": "run",
    "collect": "collect",
    "pull": "pull",
    "summary": "summary",
    "diff": "diff",
    "snapshot": "snapshot",
    "check-static": "check_static",
    "dataflow": "dataflow",
    "graph": "graph",
    "report": "report",
    "chrome-trace": "chrome_trace",
    "baseline": "baseline",
    "alert": "alert",
}


_SOURCE_READERS = ("summary", "diff", "check-static", "dataflow", "graph", "report", "chrome-trace")
"""Analyzers whose inputs are sources (files, folders, backend URLs): see launchtrace.cli._sources."""


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line naming the command's own help (``launchtrace diff: error: argument --alpha:
    '2': must be between 0 and 1 (see launchtrace diff --help)``), like every other error of every command,
    instead of argparse's usage text followed by the message."""

    def error(self, message: str):  # type: ignore[override]
        from launchtrace.otlp.problems import one_line

        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def _check_numbers(parser: argparse.ArgumentParser) -> None:
    """Plain ``int`` / ``float`` options refuse negative, NaN and infinite values (see cli._numbers)."""
    from launchtrace.cli._numbers import checked

    for action in parser._actions:
        if action.type in (int, float):
            action.type = checked(action.type)


class _VersionAction(argparse.Action):
    """``--version``, importing the version only when asked (``launchtrace.__version__`` is one of the package's
    lazy attributes), so that no other command pays for it at start-up."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[override]
        from launchtrace import __version__

        sys.stdout.write(f"{parser.prog} {__version__}\n")  # where argparse's own version action writes it
        parser.exit()


def _load(module: str):
    return importlib.import_module(f"launchtrace.cli.{module}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with ``only``, just that subcommand's module is imported."""
    parser = _Parser(
        prog="launchtrace",
        description="OpenTelemetry for GPU compute written in NVIDIA Warp.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, add_help=False)
            continue
        try:
            module = _load(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != f"launchtrace.cli.{module_name}":
                raise
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        if name in _SOURCE_READERS:  # a source may be a backend URL: pull's search and connection options
            from launchtrace.cli._query import add_query_arguments

            add_query_arguments(p, title="when a source is jaeger+URL / tempo+URL (docs/sources.md)")
        _check_numbers(p)
        p.set_defaults(_module=module, _parser=p)
    return parser


def _pullers() -> dict:
    """``pull``'s reader per backend kind, imported when a command first reads a backend URL."""
    from launchtrace.cli import pull

    return pull.PULLERS


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(only)
    args, extras = parser.parse_known_args(argv)
    if extras:  # reported by the subcommand's parser, with its usage, not the top-level one
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extras)}")
    module = getattr(args, "_module", None)
    if module is None:
        parser.print_help()
        return 2
    try:
        from launchtrace.cli._output import guard_output
        from launchtrace.cli._sources import backend_reading

        guard_output(args.command, args)
        with backend_reading(args, _pullers):
            return int(module.run(args) or 0)
    except UserError as exc:
        from launchtrace.otlp.problems import one_line

        print(f"launchtrace {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
