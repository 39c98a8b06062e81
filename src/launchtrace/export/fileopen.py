"""Opening a span file to append to, safely: never through a symbolic link, never someone else's file.

A fixed output name in a shared folder (``/tmp``, a sticky team folder) is a trap: another user can plant a
link there pointing at a file of yours, or own the file already, and a program appending to it would write
sender-controlled bytes where it must not. :func:`open_append` opens with ``O_NOFOLLOW`` (a link as the last
path component is refused) and refuses a regular file owned by another user (root included); a device
such as ``/dev/null`` is taken as asked.

:func:`claim` is for the one writer that empties a file (``launchtrace run --out``): it takes an exclusive
``flock`` first, so a second run given the same file is refused instead of truncating the first run's spans;
the lock is held until the claim is closed (processes the run starts append without it).

Example::

    from launchtrace.export.fileopen import open_append
    fd = open_append("spans.jsonl")   # OSError with a sentence saying why, on a link or a stranger's file
"""

from __future__ import annotations

import errno
import logging
import os
import stat

logger = logging.getLogger(__name__)

__all__ = ["OutputBusy", "claim", "drop_partial_last_line", "open_append", "write_whole"]


class OutputBusy(OSError):
    """Another process holds the file's writer lock (a second ``launchtrace run --out`` on the same file)."""


def open_append(path: str, *, create: bool = True, readable: bool = False) -> int:
    """A descriptor opened ``O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW`` (and ``O_CREAT`` with mode 0644;
    ``O_RDWR`` with ``readable``, for :func:`drop_partial_last_line`).

    Raises ``OSError`` naming the reason for a symbolic link or another user's file."""
    flags = (
        (os.O_RDWR if readable else os.O_WRONLY)
        | os.O_APPEND
        | getattr(os, "O_CLOEXEC", 0)
        | getattr(os, "O_NOFOLLOW", 0)
    )
    if create:
        flags |= os.O_CREAT
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)  # a FIFO must not block the open
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, f"{path} is a symbolic link; refusing to follow it") from None
        raise
    try:
        info = os.fstat(fd)
        # a device (/dev/null, /dev/full) or a pipe is the user's explicit choice; the owner rule is for files
        if stat.S_ISREG(info.st_mode) and hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise OSError(errno.EPERM, f"{path} belongs to another user (uid {info.st_uid}); refusing to write to it")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def claim(path: str) -> int:
    """Open ``path`` as :func:`open_append` does, lock it for this writer alone, then empty it.

    Raises :class:`OutputBusy` when another process holds the lock (its spans are left as they are)."""
    import fcntl

    fd = open_append(path)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        return fd  # /dev/null, a pipe: nothing to lock or empty
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputBusy(errno.EBUSY, f"{path} is being written by another launchtrace run") from None
    except OSError:  # a file system without locks (some network ones): write without the lock
        pass
    try:
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_whole(fd: int, data: bytes) -> None:
    """Write all of ``data`` or nothing: on a failure part way (a full disk), truncate back to the starting size,
    so the file never ends in half a line."""
    start = os.fstat(fd).st_size
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError:
        try:
            os.ftruncate(fd, start)
        except OSError as exc:
            logger.debug("launchtrace: could not roll back a partial line: %s", exc)
        raise


def drop_partial_last_line(fd: int, name: str) -> int:
    """Truncate a JSON Lines file that ends in part of a line (a writer killed or out of space in the middle of
    one, before this rule) back to its last whole line; the bytes dropped, said once in a warning."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return 0
    end = size
    while end > 0:
        start = max(0, end - (1 << 16))
        block = os.pread(fd, end - start, start)
        i = block.rfind(b"\n")
        if i >= 0:
            end = start + i + 1
            break
        end = start
    os.ftruncate(fd, end)
    logger.warning("launchtrace: %s ended in part of a line: dropped its last %d bytes", name, size - end)
    return size - end
