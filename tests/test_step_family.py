"""Timer names that carry the frame number (``wp.ScopedTimer(f"frame {i}")``) are one step scope, ``frame <n>``:
each name occurs once, so every frame was a scope of its own that never repeated (no step, no verdict, no static
check, a table row per frame). A real Warp program, recorded and written as the file sink writes it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import warp as wp

from launchtrace.analysis.diff import diff_traces
from launchtrace.capture import bus
from launchtrace.cli import main
from launchtrace.export.config import ExportConfig
from launchtrace.export.spanbuilder import SpanBuilder
from launchtrace.model import TraceData
from launchtrace.otlp.json_codec import encode_line
from launchtrace.steps import default_scope, occurrences, step_family
from launchtrace.testing import trace_launches
from test_analysis_programs import scale

FRAMES = 8


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("frame 17", "frame <n>"),
        ("frame_17", "frame_<n>"),
        ("frame #17", "frame #<n>"),
        ("step: 3", "step: <n>"),
        ("iter=5", "iter=<n>"),
        ("layer2", "layer2"),  # a number glued to the word: a name, not a counter
        ("17", "17"),
        ("frame", "frame"),
        ("epoch 3/10", "epoch 3/10"),
        ("", ""),
    ],
)
def test_the_family_of_a_name(name: str, family: str) -> None:
    assert step_family(name) == family


def _frames(extra: bool = False) -> tuple[TraceData, str]:
    x, y = wp.zeros(64, dtype=float), wp.zeros(64, dtype=float)
    with trace_launches() as trace:
        sub = bus.subscribe(thread=threading.get_ident())
        for frame in range(FRAMES):
            with wp.ScopedTimer(f"frame {frame}", print=False):
                with wp.ScopedTimer("physics", print=False):
                    wp.launch(scale, dim=64, inputs=[x, 2.0, y])
                if extra:
                    wp.launch(scale, dim=64, inputs=[y, 0.5, x])
        sub.close()
        events = sub.drain()
    builder = SpanBuilder(ExportConfig.resolve(fold=False))
    return trace.to_data(), encode_line(builder.feed(events) + builder.flush()) + "\n"


def test_numbered_frames_are_the_steps_of_one_scope() -> None:
    data, _ = _frames()
    steps = [o for o in occurrences(data) if o.scope_id is not None]
    assert [(o.name, o.index) for o in steps] == [("frame <n>", k) for k in range(FRAMES)]
    assert default_scope(steps)[0] == "frame <n>"
    assert {data.scopes[o.scope_id].name for o in steps} == {f"frame {k}" for k in range(FRAMES)}  # kept as named


def test_diff_compares_frame_k_with_frame_k_and_judges_the_steps() -> None:
    result = diff_traces(_frames()[0], _frames(extra=True)[0])
    (seg,) = {(s.name, s.count_a, s.count_b) for s in result.segments if s.entries}
    assert seg == ("frame <n>", 1, 2) and result.counts["inserted"] == FRAMES
    groups = {t.group for t in result.timing}
    assert {"scope frame <n>", "scope frame <n>/physics"} <= groups
    assert not any(g.startswith("scope frame 1") for g in groups)


def test_summary_and_check_static_read_one_scope(tmp_path: Path, capsys) -> None:
    path = tmp_path / "frames.jsonl"
    path.write_text(_frames()[1], encoding="utf-8")
    assert main(["summary", str(path)]) == 0
    rows = [line.split()[0:3] for line in capsys.readouterr().out.splitlines() if line.startswith("frame")]
    assert rows == [["frame", "<n>", "timer"], ["frame", "<n>/physics", "timer"]]
    assert main(["check-static", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"checking 'frame <n>', the outermost repeating scope ({FRAMES} occurrences)" in out
    assert f"scope 'frame <n>': {FRAMES} occurrences, static" in out
