"""``graph`` draws a program whose launch dims change every step (a growing particle count) once per shape, not
once per step: a real Warp program's spans, written as the file sink writes them."""

from __future__ import annotations

import threading
from pathlib import Path

import warp as wp

import launchtrace
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.cli.graph import SHAPES_AT
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.otlp.json_codec import encode_line
from launchtrace.testing import trace_launches
from test_analysis_programs import scale


def _growing(path: Path, frames: int) -> Path:
    x, y = wp.zeros(1024, dtype=float), wp.zeros(1024, dtype=float)
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        for frame in range(frames):
            with launchtrace.scope("frame"):
                wp.launch(scale, dim=64 + 16 * frame, inputs=[x, 2.0, y])
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    path.write_text(encode_line(builder.feed(events) + builder.flush()) + "\n", encoding="utf-8")
    return path


def _frame_pictures(tmp_path: Path, frames: int) -> list[str]:
    out = tmp_path / f"g{frames}"
    assert (
        main(["graph", str(_growing(tmp_path / f"grow{frames}.jsonl", frames)), "--out", str(out), "--formats", ""])
        == 0
    )
    return [p.read_text() for p in sorted(out.glob("*frame*.dot"))]


def test_many_steps_that_differ_only_in_dims_are_one_picture(tmp_path: Path, capsys) -> None:
    frames = SHAPES_AT + 4
    (dot,) = _frame_pictures(tmp_path, frames)
    assert f"frame: {frames} occurrences with this shape ({frames} topologies: dims or scalars vary)" in dot


def test_a_few_distinct_steps_keep_a_picture_each(tmp_path: Path, capsys) -> None:
    dots = _frame_pictures(tmp_path, 3)
    assert len(dots) == 3 and all("frame: 1 occurrence (#" in d for d in dots)
