"""A real Warp program (CPU device) with a cross-thread race, exported with ``launchtrace.start_export``.

A reader thread launches a long kernel that reads ``s.x``; a writer thread starts a moment later and launches a
kernel that writes ``s.x`` while the reader's is still running (Warp releases the GIL while a CPU kernel runs).
Nothing orders the two. Run as ``python race_program.py OUT.jsonl``; the tests analyse the exported file.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import warp as wp

import launchtrace

N = 64


@wp.kernel
def spin(src: wp.array(dtype=float), n: int, dst: wp.array(dtype=float)):
    i = wp.tid()
    acc = src[i]
    for _k in range(n):
        acc = wp.sin(acc) + 1.0
    dst[i] = acc


class State:
    def __init__(self) -> None:
        self.x = wp.array(np.ones(N, dtype=np.float32), dtype=float, device="cpu")
        self.v = wp.array(np.ones(N, dtype=np.float32), dtype=float, device="cpu")
        self.seen = wp.zeros(N, dtype=float, device="cpu")


def main(out: str) -> None:
    wp.config.quiet = True
    launchtrace.start_export(file_path=out, truncate=True, fold=False)
    s = State()
    launchtrace.own(s, "s")
    wp.launch(spin, dim=N, inputs=[s.v, 1], outputs=[s.seen], device="cpu")  # compile before timing matters
    go = threading.Event()

    def reader() -> None:
        go.wait()
        wp.launch(spin, dim=N, inputs=[s.x, 200_000], outputs=[s.seen], device="cpu")  # reads s.x

    def writer() -> None:
        go.wait()
        time.sleep(0.01)  # the reader's kernel is running by now (it runs for far longer)
        wp.launch(spin, dim=N, inputs=[s.v, 20_000], outputs=[s.x], device="cpu")  # writes s.x

    threads = [threading.Thread(target=reader, name="reader"), threading.Thread(target=writer, name="writer")]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    launchtrace.flush()


if __name__ == "__main__":
    main(sys.argv[1])
