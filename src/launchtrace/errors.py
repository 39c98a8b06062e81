"""Errors a user can act on. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations

__all__ = ["BadSpan", "UserError"]


class UserError(Exception):
    """Bad input, an unreachable backend or a wrong argument: the message is the whole story.

    The message should name the file and line, the URL, or the trace / span id concerned, so the one line the
    CLI prints is enough to act on.
    """


class BadSpan(ValueError):
    """A span (or part of one) that a reader cannot read; the message says why. Readers catch it, record it as a
    problem naming the span, and go on: it never reaches the user as an exception."""
