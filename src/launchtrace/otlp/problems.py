"""What a reader found wrong in its input, said so that a user can find the place.

Decoders never raise on bad data: they return the valid spans with a list of :class:`Problem` s, each naming
the place (``file:line``, a URL, a trace or span id). ``ERROR`` means something was skipped; ``WARNING`` means
everything was kept but the data is suspect (a parent that is missing, a trace the backend says is partial).

Example::

    from launchtrace.otlp.problems import Problem, Severity
    p = Problem("spans.jsonl:3", "span 'eee19b7ec3c1b174': unknown kind 9")
    str(p)   # "spans.jsonl:3: span 'eee19b7ec3c1b174': unknown kind 9"
"""

from __future__ import annotations

import dataclasses

from launchtrace.model import TextEnum

__all__ = ["Problem", "Severity", "one_line"]


def one_line(text: str) -> str:
    """``text`` with control and separator characters escaped (``"a\\nb"`` for a newline), so that text
    quoted from someone else's trace can never break a one-line message or forge a log line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


class Severity(TextEnum):
    ERROR = "error"  # something was skipped
    WARNING = "warning"  # everything was kept, but the data is suspect


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: ``where`` (file:line, URL, trace id) and a one-line ``message``.

    ``skipped`` is how many spans were dropped because of it (0 for a warning, or a line that held no spans).
    """

    where: str
    message: str
    severity: Severity = Severity.ERROR
    skipped: int = 0

    def __post_init__(self) -> None:
        # messages quote the input (keys, names, values): a newline in it must not break the one line
        object.__setattr__(self, "where", one_line(self.where))
        object.__setattr__(self, "message", one_line(self.message))

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message
