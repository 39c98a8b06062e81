"""Signals are the program's: the threads launchtrace starts in the program's process block them.

Why: a signal sent to the process (``kill``, a closed terminal, a service manager) goes to any one of its threads
that does not block it. CPython runs Python signal handlers only in the main thread, and when the kernel picks
another thread, a main thread waiting in ``time.sleep`` or a blocking call is not interrupted: the program's
handler, and launchtrace's flush on SIGTERM/SIGHUP, would run only when that wait ended. With these signals
blocked in launchtrace's threads (and in threads they start, such as grpcio's, which inherit the mask), the
kernel delivers them to a thread that takes them: the main thread, as in the program without launchtrace.
Synchronous signals (SIGSEGV, SIGFPE, ...) are left alone: they belong to the thread that caused them.
"""

from __future__ import annotations

import signal

__all__ = ["PROGRAM_SIGNALS", "leave_signals_to_the_program"]

PROGRAM_SIGNALS = frozenset(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH", "SIGCHLD")
    if hasattr(signal, name)
)


def leave_signals_to_the_program() -> None:
    """Block :data:`PROGRAM_SIGNALS` in the calling thread (a thread of launchtrace's own, at its start)."""
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, PROGRAM_SIGNALS)
    except (AttributeError, OSError, ValueError):  # no pthread_sigmask on this platform: nothing to do
        pass
