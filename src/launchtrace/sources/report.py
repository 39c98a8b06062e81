"""Collects the problems of one read: counts everything, keeps the first few, raises at once in strict mode.

A file of millions of bad spans must not keep millions of messages, so only the first ``keep`` problems are
kept; the counts (errors, warnings, spans skipped) are always exact.

Example::

    from launchtrace.sources.report import ProblemLog
    log = ProblemLog(strict=False)
    log.add(Problem("spans.jsonl:3", "not JSON: unexpected end of data"), skipped_lines=1)
    print(log.summary())   # "1 error, 0 warnings; skipped 0 spans, 1 line"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from launchtrace.errors import UserError
from launchtrace.otlp.problems import Problem, Severity
from launchtrace.spans import SpanData

__all__ = ["ProblemLog", "ReadResult", "fetch_each", "plural"]


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _debug(problem: Problem) -> None:
    """Each problem on the ``launchtrace.sources.report`` logger, at debug level; ``logging`` is imported on the
    first problem, not at start-up (a clean read never needs it)."""
    import logging

    logging.getLogger(__name__).debug("%s", problem)


def fetch_each(
    trace_ids: Iterable[str],
    fetch: Callable[[str, ProblemLog], list[SpanData]],
    log: ProblemLog,
    progress: Callable[[int, int], None] | None = None,
) -> list[SpanData]:
    """The spans of every trace in ``trace_ids``, fetched one by one by a backend's ``fetch(id, log)``;
    ``progress(done, total)`` after each. The remote sources' one loop over ids (each id fetched once)."""
    ids = list(dict.fromkeys(trace_ids))
    spans: list[SpanData] = []
    for i, trace_id in enumerate(ids, 1):
        spans.extend(fetch(trace_id, log))
        if progress:
            progress(i, len(ids))
    return spans


class ProblemLog:
    """Problems of one read. With ``strict=True`` the first problem (error or warning) raises ``UserError``."""

    def __init__(self, *, strict: bool = False, keep: int = 100) -> None:
        self.strict = strict
        self.keep = keep
        self.problems: list[Problem] = []
        self.errors = 0
        self.warnings = 0
        self.skipped_spans = 0
        self.skipped_lines = 0

    def add(self, problem: Problem, *, skipped_lines: int = 0) -> None:
        """Record ``problem``; ``skipped_lines`` counts input lines (or messages) that gave no spans at all."""
        if self.strict:
            raise UserError(str(problem))
        if problem.severity is Severity.ERROR:
            self.errors += 1
        else:
            self.warnings += 1
        self.skipped_spans += problem.skipped
        self.skipped_lines += skipped_lines
        if len(self.problems) < self.keep:
            self.problems.append(problem)
        _debug(problem)

    def extend(self, problems: list[Problem]) -> None:
        for p in problems:
            self.add(p)

    @property
    def count(self) -> int:
        return self.errors + self.warnings

    def summary(self) -> str:
        """One line: how many errors and warnings, and what was skipped."""
        return ReadResult.from_log([], self).summary()


@dataclasses.dataclass(frozen=True)
class ReadResult:
    """The spans of one read and what was wrong with the input.

    ``problems`` holds the first problems (see :class:`ProblemLog`); ``errors``, ``warnings``,
    ``skipped_spans`` and ``skipped_lines`` are exact. ``source`` names what was read (a path or a URL) and
    ``format`` how it was read (``"otlp-jsonl"``, ``"jaeger-classic-json+gzip"``, ...).
    """

    spans: list[SpanData]
    problems: tuple[Problem, ...] = ()
    errors: int = 0
    warnings: int = 0
    skipped_spans: int = 0
    skipped_lines: int = 0
    source: str = ""
    format: str = ""

    @classmethod
    def from_log(cls, spans: list[SpanData], log: ProblemLog, *, source: str = "", format: str = "") -> ReadResult:
        return cls(
            spans,
            tuple(log.problems),
            log.errors,
            log.warnings,
            log.skipped_spans,
            log.skipped_lines,
            source,
            format,
        )

    @classmethod
    def checked(cls, spans: list[SpanData], log: ProblemLog, *, source: str, format: str) -> ReadResult:
        """The result of a backend read: whole-trace checks (duplicates, cycles, missing parents) first."""
        from launchtrace.sources.structure import check_structure

        kept, problems = check_structure(spans)
        log.extend(problems)
        return cls.from_log(kept, log, source=source, format=format)

    def summary(self) -> str:
        """One line: errors, warnings, and what was skipped."""
        text = f"{plural(self.errors, 'error')}, {plural(self.warnings, 'warning')}"
        text += f"; skipped {plural(self.skipped_spans, 'span')}"
        if self.skipped_lines:
            text += f", {plural(self.skipped_lines, 'line')}"
        return text

    def traces(self) -> dict[bytes, list[SpanData]]:
        """The spans grouped by trace id, in first-seen order (backends merge several traces in one answer)."""
        out: dict[bytes, list[SpanData]] = {}
        for s in self.spans:
            out.setdefault(s.trace_id, []).append(s)
        return out
