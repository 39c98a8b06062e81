"""One way to name a source in every reading command: a file, a folder, or ``jaeger+URL`` / ``tempo+URL``.

The grammar (docs/sources.md) is parsed by :mod:`launchtrace.sources.named`; this module gives every reading
command ``launchtrace pull``'s search and connection options, reads a backend with them (an option in the
URL's query wins over the same option on the command line), and turns the earlier spellings
(``pull --from jaeger URL``, ``baseline build --from tempo URL``) into the new one with a warning.

Example::

    with backend_reading(args, pullers):  # pullers: () -> launchtrace.cli.pull.PULLERS
        traces = load_traces(args.traces)  # files, folders and backend URLs alike
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping

from launchtrace.errors import UserError
from launchtrace.sources.named import BACKENDS, BackendName, parse_backend, reading_backends
from launchtrace.sources.report import ReadResult

__all__ = ["backend_args", "backend_reading", "deprecated", "old_kind_spelling"]
_REPEATED = {"trace-id": "trace_id", "attribute": "attribute"}


def deprecated(old: str, new: str) -> None:
    """One warning line on stderr for an earlier spelling that still works (for one release)."""
    print(f"launchtrace: warning: {old} is deprecated; write {new} (docs/sources.md)", file=sys.stderr)


def old_kind_spelling(words: list[str], option: str = "--from") -> list[str]:
    """``[KIND, URL]`` (the earlier ``--from jaeger URL``) as ``["jaeger+URL"]``, with the warning; else as is."""
    if len(words) >= 1 and words[0] in BACKENDS:
        if len(words) != 2:
            raise UserError(f"{option} {words[0]}: expected one URL after it")
        deprecated(f"{option} {words[0]} {words[1]}", f"{option} {words[0]}+{words[1]}")
        return [f"{words[0]}+{words[1]}"]
    return words


def backend_args(name: BackendName, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with ``source``/``kind`` set to the backend and the URL's options over the command line's."""
    merged = argparse.Namespace(**vars(args))
    merged.kind, merged.source = name.kind, name.url
    repeated: dict[str, list[str]] = {}
    for key, value in name.options:
        if key in _REPEATED:
            repeated.setdefault(_REPEATED[key], []).append(value)
        elif key == "limit":
            try:
                merged.limit = int(value)
            except ValueError:
                raise UserError(f"{name}: limit={value!r} is not a number") from None
        elif key == "protobuf":
            merged.protobuf = value.lower() not in ("0", "false", "no", "off")
        else:
            setattr(merged, key, value)
    for dest, values in repeated.items():
        setattr(merged, dest, values)
    return merged


def _defaults() -> argparse.Namespace:
    from launchtrace.cli._query import add_query_arguments

    parser = argparse.ArgumentParser(add_help=False)
    add_query_arguments(parser)
    defaults = parser.parse_args([])
    defaults.strict = False
    defaults.quiet = True
    return defaults


def limit_note(result: ReadResult, args: argparse.Namespace) -> str | None:
    """A search that came back with ``--limit`` traces may have left some out: say so (Jaeger and Tempo answer
    no more than asked, silently)."""
    if args.kind == "file" or args.trace_id or len(result.traces()) < args.limit:
        return None
    return f"  the search stopped at --limit {args.limit} traces: there may be more (raise --limit, or narrow --since)"


Pullers = Callable[[], Mapping[str, Callable[[argparse.Namespace], ReadResult]]]
"""What gives ``pull``'s reader per backend kind (``launchtrace.cli.pull.PULLERS``), handed in by the command
dispatcher so that this module, which ``pull`` imports, does not import ``pull``."""


def read(name: BackendName, args: argparse.Namespace, pullers: Pullers) -> ReadResult:
    """The spans the backend ``name`` selects, with ``args``'s connection and search options."""
    base = _defaults()
    for key, value in vars(args).items():
        if hasattr(base, key):
            setattr(base, key, value)
    merged = backend_args(name, base)
    result = pullers()[name.kind](merged)
    note = limit_note(result, merged)
    if note:
        print(f"launchtrace: warning: {name}: {note.lstrip()}", file=sys.stderr)
    return result


@contextlib.contextmanager
def backend_reading(args: argparse.Namespace, pullers: Pullers) -> Iterator[None]:
    """While the command runs, backend sources are read with its options (see :func:`read`)."""
    with reading_backends(lambda name: read(name, args, pullers)):
        yield


def backend_of(text: str) -> BackendName | None:
    """:func:`launchtrace.sources.named.parse_backend` (here so that commands import one module)."""
    return parse_backend(text)
