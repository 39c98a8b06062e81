"""Large realistic span files for the size benchmarks: a real launchtrace output, replicated to a size.

Running Warp for a 2 GB file would take as long as the program ran; this writes lines instead. A small real
output (``launchtrace demo``, run once and kept in a cache folder, or any ``--source`` file of OTLP JSON Lines)
is cut into literal bytes and the values that make a trace itself: trace and span ids, start and end times,
``launchtrace.seq``, ``process.pid`` and ``service.instance.id``. Each copy writes the same bytes with fresh ids
(trace ids and span ids XOR a per-copy mask: distinct within a copy, so parents and links still match), times
shifted past the previous copy's end and sequence numbers past its last, so the result reads like one longer run
(``runs=1``) or several (each run its own pid and instance id).

Shapes:

- ``traces`` (the default): the source's traces, copied until the file holds ``megabytes``.
- ``wide``: one trace of a root ``step`` scope with ``spans`` launch children (or as many as fill
  ``megabytes``), written in lines of 512 spans, the root last as launchtrace's exporter ends it: the shape that
  per-trace work must stay linear on.

Example::

    from scale_inputs import make_input
    spans = make_input(Path("big.jsonl"), 100)                         # ~100 MB of demo traces
    spans = make_input(Path("wide.jsonl"), 0, shape="wide", spans=1_000_000)

    python benchmarks/scale_inputs.py big.jsonl --mb 400
    python benchmarks/scale_inputs.py wide.jsonl --shape wide --spans 1000000
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson

__all__ = ["SHAPES", "demo_source", "make_input"]

SHAPES = ("traces", "wide")
_LINE_SPANS = 512
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1
# the values that make one trace (or one run) itself; everything else is copied byte for byte
_TOKEN = re.compile(
    rb'(?P<tpre>"traceId":")(?P<trace>[0-9a-f]{32})'
    rb'|(?P<spre>"(?:parentS|s)panId":")(?P<span>[0-9a-f]{16})'
    rb'|(?P<npre>"(?:start|end)?[tT]imeUnixNano":")(?P<time>\d+)'
    rb'|(?P<qpre>"launchtrace\.(?:fold\.)?seq(?:_last)?","value":\{"intValue":")(?P<seq>\d+)'
    rb'|(?P<ppre>"process\.pid","value":\{"intValue":")(?P<pid>\d+)'
    rb'|(?P<ipre>"service\.instance\.id","value":\{"stringValue":")(?P<inst>[^"]*)'
)


def demo_source(folder: Path | None = None) -> Path:
    """A real launchtrace output to replicate: ``launchtrace demo`` (50 steps, 256 particles, no folding) on the
    CPU, run once and kept in ``folder`` (default: ``$LAUNCHTRACE_SCALE_CACHE`` or the temp folder)."""
    folder = folder or Path(os.environ.get("LAUNCHTRACE_SCALE_CACHE", Path(tempfile.gettempdir()) / "lt-scale"))
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "demo-source.jsonl"
    if not out.exists():
        tmp = folder / f"demo-source.{os.getpid()}.jsonl"
        cmd = [sys.executable, "-m", "launchtrace", "demo", "--steps", "50", "--particles", "256"]
        cmd += ["--fold", "off", "--out", str(tmp)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=600, cwd=folder)
        os.replace(tmp, out)
    return out


class _Template:
    """One line of the source cut into literal bytes and tokens ``(kind, value)``."""

    def __init__(self, line: bytes) -> None:
        self.pieces: list[bytes | tuple[str, bytes]] = []
        at = 0
        for m in _TOKEN.finditer(line):
            kind = m.lastgroup
            assert kind is not None
            self.pieces.append(line[at : m.start(kind)])
            self.pieces.append((kind, m.group(kind)))
            at = m.end()
        self.pieces.append(line[at:])

    def tokens(self, kind: str) -> list[bytes]:
        return [p[1] for p in self.pieces if isinstance(p, tuple) and p[0] == kind]

    def render(self, subs: dict[str, Callable[[bytes], bytes]]) -> bytes:
        return b"".join(p if isinstance(p, bytes) else subs[p[0]](p[1]) for p in self.pieces)


def _copy_subs(copy: int, run: int, time_shift: int, seq_shift: int) -> dict[str, Callable[[bytes], bytes]]:
    """Value rewriters for one copy: ids XOR a mask (a bijection, so every parent and link still matches)."""
    mask128 = (copy * 0x9E3779B97F4A7C15F39CC0605CEDC835) & _MASK128
    mask64 = (copy * 0x9E3779B97F4A7C15) & _MASK64
    trace_cache: dict[bytes, bytes] = {}
    span_cache: dict[bytes, bytes] = {}

    def trace(v: bytes) -> bytes:
        new = trace_cache.get(v)
        if new is None:
            new = trace_cache[v] = b"%032x" % (int(v, 16) ^ mask128)
        return new

    def span(v: bytes) -> bytes:
        new = span_cache.get(v)
        if new is None:
            new = span_cache[v] = b"%016x" % (int(v, 16) ^ mask64)
        return new

    return {
        "trace": trace,
        "span": span,
        "time": lambda v: b"%d" % (int(v) + time_shift),
        "seq": lambda v: b"%d" % (int(v) + seq_shift),
        "pid": lambda v: b"%d" % (100_000 + run),
        "inst": lambda v: b"scale-run-%d" % run,
    }


def _source_lines(source: Path) -> list[bytes]:
    lines = [line for line in source.read_bytes().splitlines() if line.strip()]
    if not lines:
        raise SystemExit(f"{source}: no lines")
    return lines


def _replicate(source: Path, out: Path, target_bytes: int, runs: int) -> int:
    templates = [_Template(line) for line in _source_lines(source)]
    times = [int(v) for t in templates for v in t.tokens("time")]
    seqs = [int(v) for t in templates for v in t.tokens("seq")]
    period = (max(times) - min(times) + 1_000_000) if times else 0  # one copy's time, and a millisecond between
    seq_period = max(seqs, default=0) + 1
    spans_per_copy = sum(_spans(line) for line in _source_lines(source))
    copy_bytes = sum(len(t.render(_copy_subs(0, 0, 0, 0))) + 1 for t in templates)
    copies = max(1, -(-target_bytes // copy_bytes))
    per_run = -(-copies // max(1, runs))
    with out.open("wb") as f:
        for copy in range(copies):
            subs = _copy_subs(copy, copy // per_run, copy * period, copy * seq_period)
            f.write(b"\n".join(t.render(subs) for t in templates) + b"\n")
    return copies * spans_per_copy


def _spans(line: bytes) -> int:
    """The spans of one source line (links hold ``spanId`` keys too, so they are counted, not grepped)."""
    return sum(
        len(ss.get("spans", [])) for rs in orjson.loads(line).get("resourceSpans", []) for ss in rs["scopeSpans"]
    )


def _wide(source: Path, out: Path, target_bytes: int, children: int | None) -> int:
    """One trace: the source's first ``step`` scope as the root, and ``children`` copies of its first launch."""
    root = child = envelope = None
    for line in _source_lines(source):
        for rs in orjson.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    keys = {a["key"]: a["value"] for a in s.get("attributes", [])}
                    if root is None and not s.get("parentSpanId") and "launchtrace.scope.kind" in keys:
                        root = s
                    if child is None and keys.get("launchtrace.op") == {"stringValue": "launch"}:
                        child = s
                        envelope = (rs["resource"], ss["scope"])
    if root is None or child is None or envelope is None:
        raise SystemExit(f"{source}: needs a root scope span and a launch span for --shape wide")
    trace_id, root_id = f"{0x5CA1E:032x}", "f" * 16
    duration = int(child["endTimeUnixNano"]) - int(child["startTimeUnixNano"])
    step, start = duration + 1000, int(root["startTimeUnixNano"])
    # times relative to the child's own start and a placeholder span id: each copy adds its start and number
    child = {**child, "traceId": trace_id, "spanId": "0" * 16, "parentSpanId": root_id}
    child.update(startTimeUnixNano="0", endTimeUnixNano=str(duration))
    template = _Template(orjson.dumps(child))
    head = b'{"resourceSpans":[{"resource":%s,"scopeSpans":[{"scope":%s,"spans":[' % tuple(map(orjson.dumps, envelope))
    tail = b"]}]}]}\n"
    written, n, root_bytes = 0, 0, root_id.encode()
    with out.open("wb") as f:
        while (children is not None and n < children) or (children is None and written < target_bytes):
            batch = []
            for _ in range(_LINE_SPANS if children is None else min(_LINE_SPANS, children - n)):
                n += 1
                t0 = start + n * step
                subs: dict[str, Callable[[bytes], bytes]] = {
                    "trace": lambda v: v,
                    "span": lambda v, n=n: v if v == root_bytes else b"%016x" % n,
                    "time": lambda v, t0=t0: b"%d" % (t0 + int(v)),
                    "seq": lambda v, n=n: b"%d" % n,
                    "pid": lambda v: v,
                    "inst": lambda v: v,
                }
                batch.append(template.render(subs))
            line = head + b",".join(batch) + tail
            f.write(line)
            written += len(line)
        end = start + (n + 1) * step
        root = {**root, "traceId": trace_id, "spanId": root_id, "endTimeUnixNano": str(end)}
        root_attrs = [a for a in root.get("attributes", []) if a["key"] != "launchtrace.seq"]
        root["attributes"] = [*root_attrs, {"key": "launchtrace.seq", "value": {"intValue": str(n + 1)}}]
        f.write(head + orjson.dumps(root) + tail)
    return n + 1


def make_input(
    path: Path,
    megabytes: float,
    shape: str = "traces",
    *,
    spans: int | None = None,
    source: Path | None = None,
    runs: int = 1,
) -> int:
    """Write ``path`` (OTLP JSON Lines) of about ``megabytes`` MB (10**6 bytes) in ``shape``; the spans written.
    ``spans`` sets the children of ``wide`` instead of the size; ``runs`` spreads ``traces`` copies over runs."""
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r}: one of {SHAPES}")
    source = source or demo_source()
    target = int(megabytes * 1e6)
    if shape == "wide":
        return _wide(source, path, target, spans)
    return _replicate(source, path, target, runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the file to write (OTLP JSON Lines)")
    parser.add_argument("--mb", type=float, default=100.0, help="size in MB (default 100)")
    parser.add_argument("--shape", choices=SHAPES, default="traces")
    parser.add_argument("--spans", type=int, help="wide: this many children instead of --mb")
    parser.add_argument("--runs", type=int, default=1, help="traces: spread the copies over this many runs")
    parser.add_argument("--source", type=Path, help="OTLP JSON Lines to replicate (default: a demo run)")
    args = parser.parse_args(argv)
    n = make_input(args.out, args.mb, args.shape, spans=args.spans, source=args.source, runs=args.runs)
    print(f"{args.out}: {n} spans, {args.out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
