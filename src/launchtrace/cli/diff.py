"""``launchtrace diff A B`` / ``launchtrace diff A1 A2 A3 --against B1 B2 B3``: an aligned topology diff and
timing verdicts over per-step totals (``slower``, ``faster``, ``same`` or ``inconclusive``), and
(``--value-stats`` runs) the launches whose outputs became non-finite in B.

Exit status: 1 when the topology differs, when values became non-finite, or when a timing row's verdict is one
of ``--fail-on`` (none by default: timing alone never fails unless asked, e.g. ``--fail-on slower`` for a CI
gate on timing); 0 otherwise; 2 for bad arguments or input. Run-level drift (a run slower in every kernel)
never changes it.

Memory: one run per side (the usual diff) is streamed, each step diffed as soon as its partner is read
(:mod:`launchtrace.analysis.diff_stream`: a few bytes per step are kept); several runs per side, a backend source
or steps that arrive out of their start order are diffed from the lists (the rebuilt traces of both sides held,
their spans not)."""

from __future__ import annotations

import argparse

from launchtrace.analysis.diff import diff_traces
from launchtrace.analysis.diff_stream import diff_streamed
from launchtrace.analysis.values import BadValues, became_non_finite
from launchtrace.analysis.verdicts import (
    ANSWERS,
    DEFAULT_ALPHA,
    DEFAULT_MIN_CHANGE,
    DEFAULT_MIN_RUNS,
    DEFAULT_MIN_STEPS,
)
from launchtrace.cli._analyzer import add_format, write_json, write_text
from launchtrace.cli._numbers import at_least, fraction, probability
from launchtrace.errors import UserError
from launchtrace.render.diff_text import diff_as_json, diff_as_markdown, diff_as_text
from launchtrace.render.escape import terminal_lines
from launchtrace.sources.each import load_streamed

HELP = "diff two traces (or sets of runs): inserted, removed and changed launches, timing verdicts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "traces",
        nargs="+",
        metavar="A",
        help="the baseline then the trace(s) to compare (A B: a file or folder each); with --against, every "
        "file or folder given here is the baseline",
    )
    parser.add_argument(
        "--against", nargs="+", metavar="B", help="the runs to compare against the baseline (files or folders)"
    )
    parser.add_argument("--scope", help="compare occurrences of this scope only")
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        help="hold every occurrence of the snapshot's scope in the trace(s) A against this topology snapshot "
        "(launchtrace snapshot, or the pytest plugin's files)",
    )
    parser.add_argument("--ignore-scalars", action="store_true", help="do not compare scalar arguments")
    parser.add_argument("--ignore-streams", action="store_true", help="do not compare streams")
    parser.add_argument(
        "--raw-pointers",
        action="store_true",
        help="compare unowned buffers as recorded: by allocation with its slot, else by address (default: by "
        "allocation site and order met, else by the order they first appear in, per segment)",
    )
    parser.add_argument(
        "--alpha", type=probability, default=DEFAULT_ALPHA, help="significance level (default %(default)s)"
    )
    parser.add_argument(
        "--min-change",
        type=fraction,
        default=DEFAULT_MIN_CHANGE,
        help="smallest relative change worth reporting (default %(default)s = 5%%)",
    )
    parser.add_argument(
        "--min-runs",
        type=at_least(2),
        default=DEFAULT_MIN_RUNS,
        help="runs per side before the run-level test (default %(default)s)",
    )
    parser.add_argument(
        "--min-steps",
        "--min-samples",
        dest="min_steps",
        type=at_least(2),
        default=DEFAULT_MIN_STEPS,
        help="steps per side (after warm-up) before any timing verdict (default %(default)s)",
    )
    parser.add_argument(
        "--fail-on",
        type=verdict_list,
        default=(),
        metavar="VERDICTS",
        help="also exit 1 when a timing row says one of these (comma-separated: slower, faster, same, "
        "inconclusive; e.g. slower for a CI gate on timing); default: timing never changes the exit status",
    )
    parser.add_argument(
        "--absolute",
        action="store_true",
        help="judge raw times (default: a run that ran slower or faster in every kernel is divided by its factor "
        "first, so kernels are judged relative to their run)",
    )
    parser.add_argument("--out", help="write here instead of stdout")
    add_format(parser, ("text", "json", "markdown"))


def verdict_list(text: str) -> tuple[str, ...]:
    """``slower,inconclusive`` -> ``("slower", "inconclusive")``; a word outside the four is an error."""
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    bad = [w for w in words if w not in ANSWERS]
    if bad or not words:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {', '.join(ANSWERS)}")
    return words


def run(args: argparse.Namespace) -> int:
    if args.snapshot:
        from launchtrace.cli.snapshot import diff_against_snapshot

        return diff_against_snapshot(args)
    if args.against:
        a_specs, b_specs = args.traces, args.against
    elif len(args.traces) == 2:
        a_specs, b_specs = args.traces[:1], args.traces[1:]
    else:
        raise UserError(f"give A and B, or A1 A2 ... --against B1 B2 ... (got {len(args.traces)} inputs)")
    options = {
        "scope": args.scope,
        "ignore_scalars": args.ignore_scalars,
        "ignore_streams": args.ignore_streams,
        "raw_pointers": args.raw_pointers,
        "alpha": args.alpha,
        "min_change": args.min_change,
        "min_runs": args.min_runs,
        "min_steps": args.min_steps,
        "absolute": args.absolute,
    }
    streamed = diff_streamed(a_specs, b_specs, **options)  # one trace at a time; None: the lists are needed
    if streamed is not None:
        result, bad = streamed
    else:
        a_traces, b_traces = load_streamed(a_specs), load_streamed(b_specs)  # spans one trace at a time
        result = diff_traces(a_traces, b_traces, **options)
        bad = became_non_finite(a_traces, b_traces)
    if args.format == "json":
        out = diff_as_json(result)
        out["became_non_finite"] = [_bad_json(b) for b in bad]
        write_json(out, args.out)
    elif args.format == "markdown":
        write_text(diff_as_markdown(result) + _bad_text(bad, "- "), args.out)
    else:
        write_text(diff_as_text(result) + _bad_text(bad, "  "), args.out)
    failing = any(t.verdict.verdict in args.fail_on for t in result.timing)
    return 0 if result.equal and not bad and not failing else 1


def _bad_text(bad: list[BadValues], bullet: str) -> str:
    if not bad:
        return ""
    lines = ["", f"values: {len(bad)} launch output(s) non-finite in B and not in A:"]
    lines += [f"{bullet}{b.line()}" for b in bad]
    return terminal_lines(lines)


def _bad_json(b: BadValues) -> dict:
    return {"kernel": b.kernel, "array": b.array, "param": b.param, "step": b.step, "site": b.site, "what": b.what}
