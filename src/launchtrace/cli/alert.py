"""``launchtrace alert``: which build or host launches differently or runs slower; exit 1 when an alert of
severity ``warning`` fires (a ``host_slowdown``, severity ``info``, alone exits 0 unless ``--fail-on-info``).

Exit codes: 0 nothing fired, 1 alerts fired, 2 bad input (one line on stderr), 3 alerts fired but
``--alertmanager`` did not take them after ``--retries`` retries with backoff.

Against a baseline (``--baseline base.pb``) or, without one, among the peers of the same window. Output as text,
Markdown or JSON; ``--alertmanager URL`` also posts the alerts to a Prometheus Alertmanager.

Example::

    launchtrace alert --baseline base.pb --from tempo http://tempo:3200 --service sim --since 1h --limit 2000
    launchtrace alert --from today/ --format markdown --alertmanager http://alertmanager:9093
"""

from __future__ import annotations

import argparse
import sys

from launchtrace.cli._numbers import at_least, fraction, probability
from launchtrace.errors import UserError

HELP = "fleet alerts: topology drift, launch counts, foreign buffers, latency, against a baseline or among peers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from launchtrace.analysis.fleet import alerts as A
    from launchtrace.cli._analyzer import add_format
    from launchtrace.cli._fleet import add_source_arguments

    parser.add_argument(
        "--baseline",
        metavar="BASELINE",
        help="a baseline file (from baseline build: .pb, or any name that holds one), or a source of traces to build "
        "it from (files, a folder, jaeger+URL / tempo+URL: docs/sources.md); without it, each group is compared with "
        "its peers",
    )
    add_source_arguments(parser)
    parser.add_argument(
        "--group-by", help="resource attributes of a group (default: the baseline's, else service.version,host.name)"
    )
    parser.add_argument("--scope", action="append", default=[], help="only this scope; repeatable")
    parser.add_argument("--ignore-scalars", action="store_true", help="peer mode: scalars out of the topology")
    parser.add_argument(
        "--alpha",
        type=probability,
        default=A.DEFAULT_ALPHA,
        help="false discovery rate of one group's latency comparisons (Benjamini-Hochberg; default %(default)s)",
    )
    parser.add_argument(
        "--min-change",
        type=fraction,
        default=A.DEFAULT_MIN_CHANGE,
        help="smallest slowdown that fires, as a fraction (default %(default)s)",
    )
    parser.add_argument(
        "--min-runs",
        type=at_least(2),
        default=A.DEFAULT_MIN_RUNS,
        help="runs per side for the run-level test (default %(default)s)",
    )
    parser.add_argument(
        "--min-steps",
        type=at_least(2),
        default=A.DEFAULT_MIN_STEPS,
        help="steps per side before any latency verdict (default %(default)s)",
    )
    parser.add_argument(
        "--absolute",
        action="store_true",
        help="judge raw times (default: a host slower in every kernel is one host_slowdown alert, and its kernels "
        "are judged relative to that factor)",
    )
    parser.add_argument(
        "--fail-on-info", action="store_true", help="exit 1 also when only info alerts (host_slowdown) fire"
    )
    parser.add_argument(
        "--traceql-latency",
        action="store_true",
        help="with --from tempo and no baseline: latency among peers from TraceQL metrics (quantile_over_time) "
        "instead of from the traces read",
    )
    parser.add_argument("--traceql-step", type=int, default=60, help="seconds per TraceQL metrics sample (default 60)")
    parser.add_argument("--alertmanager", metavar="URL", help="post the alerts to this Alertmanager (/api/v2/alerts)")
    parser.add_argument("--generator-url", default="", help="generatorURL of the posted alerts")
    parser.add_argument("--out", help="write here instead of stdout")
    add_format(parser, ("text", "json", "markdown"))


def _options(args: argparse.Namespace):
    from launchtrace.analysis.fleet.alerts import AlertOptions

    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.min_change < 0:
        raise UserError(f"--min-change must be >= 0, got {args.min_change}")
    if args.min_runs < 2 or args.min_steps < 2:
        raise UserError("--min-runs and --min-steps must be at least 2")
    return AlertOptions(
        args.alpha, args.min_change, args.min_runs, args.min_steps, tuple(args.scope), absolute=args.absolute
    )


EXIT_QUIET, EXIT_FIRED, EXIT_BAD_INPUT, EXIT_FIRED_NOT_DELIVERED = 0, 1, 2, 3
"""``alert``'s exit codes: nothing fired; alerts fired (and were delivered, if ``--alertmanager``); bad input or a
source that could not be read; alerts fired but Alertmanager did not take them after every retry."""

RETRY_FIRST_S, RETRY_MAX_S = 0.5, 8.0


class NotDelivered(Exception):
    """Alertmanager did not take the alerts after every try; the message names the URL and the last answer."""


def post_alerts(url: str, payload: list[dict], timeout: float, retries: int = 0) -> int:
    """POST ``payload`` to ``url``/api/v2/alerts, retrying ``retries`` times on no connection, 429 and 5xx with
    exponential backoff (0.5 s doubling to 8 s, or the ``Retry-After`` Alertmanager gives, at most 8 s); the tries
    made. :class:`NotDelivered` when every try failed, or at once for a refusal (4xx) no retry can change."""
    import time

    import requests

    target = url.rstrip("/") + "/api/v2/alerts"
    wait = RETRY_FIRST_S
    for attempt in range(retries + 1):
        try:
            answer = requests.post(target, json=payload, timeout=timeout)
        except requests.RequestException as exc:
            problem = f"cannot post alerts: {type(exc).__name__}: {exc}"
        else:
            if answer.status_code < 300:
                return attempt + 1
            problem = f"Alertmanager answered {answer.status_code}: {answer.text.strip()[:200]}"
            if answer.status_code < 500 and answer.status_code != 429:  # no retry changes a refusal
                raise NotDelivered(f"{target}: {problem}")
            wait = _retry_after(answer.headers.get("Retry-After"), wait)
        if attempt < retries:
            time.sleep(wait)
            wait = min(wait * 2, RETRY_MAX_S)
    raise NotDelivered(f"{target}: {problem} ({retries + 1} {'try' if retries == 0 else 'tries'})")


def _retry_after(header: str | None, default: float) -> float:
    try:
        return min(max(float(header), 0.0), RETRY_MAX_S) if header else default
    except ValueError:
        return default


def _traceql_latency(args: argparse.Namespace, group_by: tuple[str, ...], options) -> list:
    """Latency outliers among peers from Tempo's TraceQL metrics (median launch duration per group and kernel;
    Tempo answers in seconds, the alerts compare nanoseconds as everywhere else)."""
    from launchtrace.analysis.fleet.alerts import peer_latency_from_series
    from launchtrace.cli import pull
    from launchtrace.sources.query import parse_time
    from launchtrace.sources.report import ProblemLog
    from launchtrace.sources.traceql_metrics import KERNEL_LABEL, kernel_latency_query, query_range

    if not args.since:
        raise UserError("--traceql-latency needs a window: --since (and --until)")
    if args.traceql_step < 1:
        raise UserError(f"--traceql-step must be at least 1, got {args.traceql_step}")
    from launchtrace.cli._fleet import source_kind

    args.source = source_kind(args)[1][0]  # the backend's base URL (its options are set on args)
    log = ProblemLog()
    start, end = parse_time(args.since), parse_time(args.until) if args.until else parse_time("now")
    q = kernel_latency_query(args.service, group_by)
    series = query_range(pull._client(args), q, start, end, step_s=args.traceql_step, log=log)
    for problem in log.problems[:5]:
        print(f"warning: {problem}", file=sys.stderr)
    rows = [
        (tuple(s.labels.get(f"resource.{k}", "") for k in group_by), args.service, s.labels.get(KERNEL_LABEL, ""),
         [v * 1e9 for _, v in s.samples])
        for s in series
    ]  # fmt: skip
    return peer_latency_from_series(rows, group_by, options)


def _baseline_from_traces(args: argparse.Namespace):
    """A baseline built on the fly from the traces ``--baseline`` names (as ``baseline build`` would)."""
    from launchtrace.analysis.fleet.baseline import BaselineBuilder
    from launchtrace.cli._fleet import Progress, open_stream
    from launchtrace.cli.baseline import DEFAULT_GROUP_BY, group_keys

    builder = BaselineBuilder(group_keys(args.group_by or DEFAULT_GROUP_BY), scalars=not args.ignore_scalars)
    stream = open_stream(argparse.Namespace(**{**vars(args), "source_spec": [args.baseline]}))
    with Progress(stream, quiet=True):
        builder.add_stream(stream)
    if not stream.traces:
        raise UserError(f"--baseline {args.baseline}: no launchtrace traces to build a baseline from")
    return BaselineBuilder.from_proto(builder.to_proto())  # exactly what baseline build then alert would compare


def run(args: argparse.Namespace) -> int:
    from launchtrace.analysis.fleet.alerts import against_baseline, among_peers
    from launchtrace.analysis.fleet.baseline import BaselineBuilder
    from launchtrace.baselines import is_baseline_file, read_baseline
    from launchtrace.cli._analyzer import write_json, write_text
    from launchtrace.cli._fleet import Progress, open_stream, source_kind
    from launchtrace.cli.baseline import DEFAULT_GROUP_BY, group_keys
    from launchtrace.render import alerts as R

    options = _options(args)
    if args.traceql_latency and (args.baseline or source_kind(args)[0] != "tempo"):
        raise UserError("--traceql-latency needs --from tempo+URL and no --baseline")
    if args.baseline and (args.baseline.endswith(".pb") or is_baseline_file(args.baseline)):
        baseline = BaselineBuilder.from_proto(read_baseline(args.baseline))
    elif args.baseline:
        baseline = _baseline_from_traces(args)
    else:
        baseline = None
    group_by = group_keys(args.group_by) if args.group_by else (baseline.group_by if baseline else None)
    group_by = group_by or group_keys(DEFAULT_GROUP_BY)
    scalars = baseline.scalars if baseline else not args.ignore_scalars
    window = BaselineBuilder(group_by, scalars=scalars)
    stream = open_stream(args, spill=True)
    with Progress(stream, quiet=args.quiet):
        window.add_stream(stream)
    if not stream.traces:
        from launchtrace.cli._fleet import problems_line

        why = problems_line(stream)
        raise UserError(f"{stream.label}: no launchtrace traces in the window" + (f" ({why})" if why else ""))
    if baseline is not None:
        try:
            alerts = against_baseline(baseline, window, options)
        except ValueError as exc:
            raise UserError(f"--group-by: {exc}") from None
        against = f"baseline {args.baseline}"
    elif args.traceql_latency:
        alerts = sorted([*among_peers(window, options, latency=False), *_traceql_latency(args, group_by, options)],
                        key=lambda a: a.sort_key())  # fmt: skip
        against = "peers (no baseline; latency from TraceQL metrics)"
    else:
        alerts = among_peers(window, options)
        against = "peers (no baseline)"
    header = f"window: {stream.traces} traces, {len(window.groups)} groups from {stream.label}; against {against}"
    if args.format == "json":
        info = {
            "traces": stream.traces,
            "spans": stream.spans,
            "groups": len(window.groups),
            "against": against,
            "start_unix_nano": window.start_ns,
            "end_unix_nano": window.end_ns,
        }
        write_json(R.alerts_as_json(alerts, info), args.out)
    elif args.format == "markdown":
        write_text(R.alerts_as_markdown(alerts, header), args.out)
    else:
        write_text(R.alerts_as_text(alerts, header), args.out)
    if args.alertmanager and alerts:
        payload = R.alertmanager_payload(alerts, starts_at_ns=window.end_ns, generator_url=args.generator_url)
        try:
            tries = post_alerts(args.alertmanager, payload, args.timeout, args.retries)
        except NotDelivered as exc:
            print(
                f"launchtrace alert: error: {exc}; the alerts fired (exit {EXIT_FIRED_NOT_DELIVERED})", file=sys.stderr
            )
            return EXIT_FIRED_NOT_DELIVERED
        if not args.quiet:
            print(
                f"posted {len(payload)} alert(s) to {args.alertmanager} ({tries} {'try' if tries == 1 else 'tries'})",
                file=sys.stderr,
            )
    return EXIT_FIRED if any(a.severity == "warning" or args.fail_on_info for a in alerts) else EXIT_QUIET
