"""Errors a user can act on. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """Bad input, an unreachable backend or a wrong argument: the message is the whole story.

    The message should name the file and line, the URL, or the trace / span id concerned, so the one line the
    CLI prints is enough to act on.
    """
