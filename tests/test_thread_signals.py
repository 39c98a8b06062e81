"""launchtrace's own threads leave the program's signals to the program (``launchtrace.export.threadsignals``).

A signal sent to the process goes to any thread that does not block it; Python runs handlers only in the main
thread, and a main thread waiting in ``time.sleep`` is not woken when the kernel picked another thread. So the
export worker and the OTLP sender threads block the asynchronous signals. Which thread the kernel picks is its
choice (it prefers the main thread), so the test reads the worker's signal mask rather than waiting for the
kernel to choose it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import launchtrace
from launchtrace.export.sinks import EXPORT_THREAD_PREFIX
from launchtrace.export.threadsignals import PROGRAM_SIGNALS


def _blocked(native_id: int) -> set[int]:
    """The signals a thread of this process blocks, from ``/proc/self/task/<tid>/status``."""
    for line in Path(f"/proc/self/task/{native_id}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    raise AssertionError("no SigBlk line")


def test_the_export_worker_and_the_sender_block_the_programs_signals(tmp_path: Path) -> None:
    launchtrace.start_export(file_path=str(tmp_path / "s.jsonl"), truncate=True)
    try:
        workers = [t for t in threading.enumerate() if t.name.startswith(EXPORT_THREAD_PREFIX)]
        assert workers, [t.name for t in threading.enumerate()]
        for worker in workers:
            assert {int(s) for s in PROGRAM_SIGNALS} <= _blocked(worker.native_id)
        assert int(signal.SIGTERM) not in _blocked(threading.main_thread().native_id)
    finally:
        launchtrace.stop_export()
