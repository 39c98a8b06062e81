"""``summary``'s tables line up when scope names hold wide characters (CJK, emoji): a real Warp program's spans,
written as the file sink writes them, read back by the command."""

from __future__ import annotations

import threading
from pathlib import Path

import warp as wp
from wcwidth import wcswidth

import launchtrace
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.otlp.json_codec import encode_line
from launchtrace.testing import trace_launches
from test_analysis_programs import scale

NAMES = ("步骤", "step", "模拟 🚀")


def _write(path: Path) -> Path:
    x, y = wp.zeros(16, dtype=float), wp.zeros(16, dtype=float)
    with trace_launches():
        sub = bus.subscribe(thread=threading.get_ident())
        for name in NAMES * 2:
            with launchtrace.scope(name):
                wp.launch(scale, dim=16, inputs=[x, 2.0, y])
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    path.write_text(encode_line(builder.feed(events) + builder.flush()) + "\n", encoding="utf-8")
    return path


def test_scope_rows_line_up_in_terminal_columns(tmp_path: Path, capsys) -> None:
    assert main(["summary", str(_write(tmp_path / "wide.jsonl"))]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("scope ")))
    rows = [line for line in lines[head + 1 :] if line.split(" ", 1)[0] in NAMES or line.startswith("模拟")]
    assert len(rows) == 3, lines
    kind_at = {wcswidth(row[: row.index("user")]) for row in rows}  # the kind column, in terminal columns
    assert len(kind_at) == 1 and kind_at == {wcswidth(lines[head][: lines[head].index("kind")])}, rows
