"""Two builds of the compiled JSON Lines reader (``launchtrace.otlp._jsonread``) against each other, in one process.

For a change to ``_jsonread.c``: build the tree before it to a shared library (``git show REV:...`` and ``gcc``
with the flags ``python -c "import sysconfig; print(sysconfig.get_config_var('CFLAGS'))"`` gives, ``-fPIC
-shared``), then pass its path; the other side is the installed module, or a second path. Both decode the same
lines of ``bench_read.py``'s files (launch spans, and every attribute value new) from memory with the collector
paused, alternating ABBA so that neither side always runs first (the side that runs second, with the first's
spans just freed, measured 18 % slower in an A/A run when it always came second). Their spans are checked equal
first. Prints spans per CPU second of each side and the median of the per-pair time ratios (B over A).

    python benchmarks/bench_jsonread_ab.py OLD.so [NEW.so] [--spans 20000] [--pairs 10]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import time
from types import ModuleType

from bench_read import BATCH, _unique_attributes, make_spans
from launchtrace.otlp.ids import decode_id
from launchtrace.otlp.json_codec import KIND_NAMES, STATUS_NAMES, _dec_bytes, encode_line
from launchtrace.spans import SpanData, SpanEvent, SpanLink

ARGS = (SpanData, SpanEvent, SpanLink, decode_id, _dec_bytes, KIND_NAMES, STATUS_NAMES, "auto")


def load(path: str | None) -> ModuleType:
    """The installed reader, or the one built at ``path`` (its init function is ``PyInit__jsonread``)."""
    if path is None:
        import launchtrace.otlp._jsonread as module

        return module
    spec = importlib.util.spec_from_file_location("_jsonread", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_seconds(module: ModuleType, lines: list[bytes]) -> float:
    """CPU seconds for one fresh decoder to decode every line (the spans dropped after the clock stops)."""
    decoder = module.Decoder(*ARGS)
    gc.disable()
    try:
        t0 = time.process_time()
        out = [decoder.decode(line) for line in lines]
        elapsed = time.process_time() - t0
    finally:
        gc.enable()
    del out
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="a built _jsonread shared library (the tree before)")
    parser.add_argument("b", nargs="?", help="another one (default: the installed module)")
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()
    a, b = load(args.a), load(args.b)
    print(f"A {a.__file__}\nB {b.__file__}")
    for label, attributes in (("launch spans", None), ("every attribute value new", _unique_attributes)):
        spans = make_spans(args.spans, attributes) if attributes else make_spans(args.spans)
        lines = [encode_line(spans[i : i + BATCH]).encode() for i in range(0, len(spans), BATCH)]
        da, db = a.Decoder(*ARGS), b.Decoder(*ARGS)
        assert [da.decode(x) for x in lines] == [db.decode(x) for x in lines], "the two builds read other spans"
        rates_a, rates_b, ratios = [], [], []
        for i in range(args.pairs):
            if i % 2:
                tb, ta = cpu_seconds(b, lines), cpu_seconds(a, lines)
            else:
                ta, tb = cpu_seconds(a, lines), cpu_seconds(b, lines)
            rates_a.append(args.spans / ta)
            rates_b.append(args.spans / tb)
            ratios.append(tb / ta)
        print(f"{label}: {args.spans} spans, {args.pairs} pairs, load {os.getloadavg()[0]:.1f}")
        for name, rates in (("A", rates_a), ("B", rates_b)):
            print(f"  {name} median {statistics.median(rates):,.0f} spans per CPU second "
                  f"(min {min(rates):,.0f}, max {max(rates):,.0f})")  # fmt: skip
        print(f"  B / A time: median {statistics.median(ratios):.3f}x (min {min(ratios):.3f}x, max {max(ratios):.3f}x)")


if __name__ == "__main__":
    main()
