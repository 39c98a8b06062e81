"""Screenshots of the demo's HTML report for ``docs/report.md`` (headless Chromium over the DevTools pipe).

Runs ``launchtrace demo`` twice (4 and 3 substeps) and reports the 4-substep run (the default demo, whose
substeps are folded) with the 3-substep run as its baseline (so the diff section has something to show), then
saves one PNG per section under ``docs/img/`` (and the top of the page as the guide's ``docs/guide/img/report.png``);
then reports ``tests/race_program.py`` (a writer and a reader thread racing on ``s.x``) and saves its whole-run
timeline, every thread on one axis, and its hazard; then runs ``docs/guide/examples/springs.py`` (the first hour's
zero-code program: a Tape, ScopedTimers, a NaN written at step 3) under ``launchtrace run --value-stats`` with a
cold kernel cache and saves its header and steps, its Values section, the first ``forward`` in the timeline
(zoomed onto the end of its ``warp.module.load`` span and the launches after it), and its dataflow.

    python scripts/report_screenshots.py [--out docs/img] [--guide docs/guide/img]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from chromium_cdp import Page  # noqa: E402

SECTIONS = {
    "report-header-steps.png": ("#header", "#steps"),
    "report-kernels.png": ("#kernels", "#kernels"),
    "report-timeline.png": ("#timeline-section", "#timeline-section"),
    "report-dataflow.png": ("#dataflow", "#dataflow"),
    "report-diff.png": ("#diff", "#diff"),
}


def _launchtrace(*args: str, env: dict | None = None) -> None:
    subprocess.run([sys.executable, "-m", "launchtrace", *args], check=True, timeout=600, env=env)


def _clip(page: Page, first: str, last: str, most: int = 1400) -> dict:
    return page.eval(
        f"(() => {{ const a = document.querySelector('{first}').getBoundingClientRect(); "
        f"const b = document.querySelector('{last}').getBoundingClientRect(); "
        "return {x: 0, y: a.top + window.scrollY, width: 1280, "
        f"height: Math.min(b.bottom - a.top, {most})}}; }})()"
    )


def _select_view(page: Page, view: str) -> None:
    page.eval(
        "(() => { const s = document.getElementById('view-select'); "
        f"s.value = {view!r}; s.dispatchEvent(new Event('change')); }})()"
    )


def _zoom_past_the_load(page: Page) -> None:
    """Zoom the first forward's timeline onto the end of its warp.module.load bar (wheel at that point), then
    pan right (D) so the launches that follow the load fill most of the view, as a user would."""
    page.eval("document.querySelector('.timeline').scrollIntoView()")
    at = page.eval(
        "(() => { const bar = [...document.querySelectorAll('.timeline .bar.scope')]"
        ".find(b => b.dataset.label === 'warp.module.load'); const r = bar.getBoundingClientRect(); "
        "return [r.right - 1, r.top + r.height / 2]; })()"
    )
    page.wheel(at[0], at[1], -3500)
    page.hover(at[0] - 200, at[1])
    for _ in range(4):
        page.key("d")
    page.eval("window.scrollTo(0, 0)")


def _first_hour(tmp: Path, out: Path) -> int:
    """The first hour's program, cold kernel cache, NaN at step 3: header and steps, values, the first
    forward's timeline (its warp.module.load span), the dataflow."""
    env = {**os.environ, "WARP_CACHE_PATH": str(tmp / "cold-cache")}
    trace, page_path = tmp / "springs.jsonl", tmp / "springs.html"
    program = str(ROOT / "docs" / "guide" / "examples" / "springs.py")
    _launchtrace("run", "--value-stats", "--out", str(trace), program, "3", env=env)
    _launchtrace("report", str(trace), "--out", str(page_path), "--title", "springs.py (zero-code)")
    with Page.open(page_path, tmp, width=1280, height=900) as page:
        page.eval("document.querySelectorAll('.graph').forEach(g => g.style.maxHeight = '560px')")
        loaded = page.eval(  # the step that holds the compile (step #0), whatever its steps are called
            "JSON.parse(document.getElementById('launchtrace-data').textContent).views"
            ".find(v => v.items.some(i => i.n === 'warp.module.load')).id"
        )
        _select_view(page, loaded)
        # the dataflow at full size, scrolled to where the forward pass meets the adjoint launches
        page.eval(
            "(() => { const g = document.querySelector('#dataflow .graph'); "
            "g.scrollLeft = g.scrollWidth * 0.45; g.scrollTop = (g.scrollHeight - g.clientHeight) * 0.35; })()"
        )
        _zoom_past_the_load(page)
        shots = {
            "first-hour-header-steps.png": _clip(page, "#header", "#steps"),
            "first-hour-values.png": _clip(page, "#values", "#values"),
            "first-hour-timeline.png": _clip(page, "#timeline-section", "#timeline-section", 900),
            "first-hour-dataflow.png": _clip(page, "#dataflow", "#dataflow", 800),
        }
        for name, clip in shots.items():
            path = page.screenshot(out / name, full_page=True, clip=clip)
            print(path, path.stat().st_size, "bytes")
        if page.errors:
            print("console errors:", page.errors, file=sys.stderr)
            return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    parser.add_argument("--guide", default=str(ROOT / "docs" / "guide" / "img"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        _launchtrace("demo", "--out", str(tmp / "four.jsonl"))
        _launchtrace("demo", "--substeps", "3", "--out", str(tmp / "three.jsonl"))
        page_path = tmp / "report.html"
        _launchtrace("report", str(tmp / "four.jsonl"), "--baseline", str(tmp / "three.jsonl"), "--out", str(page_path))
        with Page.open(page_path, tmp, width=1280, height=900) as page:
            page.eval("document.querySelectorAll('.graph').forEach(g => g.style.maxHeight = '520px')")
            page.eval("document.querySelector('.timeline').scrollIntoView()")
            # zoom the median step's timeline onto its first part, as a user would with the wheel
            box = page.eval(
                "(() => { const r = document.querySelector('.timeline .tl-body').getBoundingClientRect(); "
                "return [r.left, r.top, r.width, r.height]; })()"
            )
            page.wheel(box[0] + 180, box[1] + box[3] / 2, -300)
            page.eval("window.scrollTo(0, 0)")
            page.eval("document.querySelector('.graph').classList.add('fit')")  # the demo's graph: fit to the width
            for name, (first, last) in SECTIONS.items():
                path = page.screenshot(out / name, full_page=True, clip=_clip(page, first, last))
                print(path, path.stat().st_size, "bytes")
            guide = Path(args.guide) / "report.png"
            path = page.screenshot(guide, full_page=True, clip=_clip(page, "#header", "#timeline-section", 1800))
            print(path, path.stat().st_size, "bytes")
            if page.errors:
                print("console errors:", page.errors, file=sys.stderr)
                return 1
        subprocess.run([sys.executable, str(ROOT / "tests" / "race_program.py"), str(tmp / "race.jsonl")], check=True)
        _launchtrace("report", str(tmp / "race.jsonl"), "--out", str(tmp / "race.html"))
        with Page.open(tmp / "race.html", tmp, width=1280, height=900) as page:
            page.eval(
                "(() => { const s = document.getElementById('view-select'); s.value = 'run'; "
                "s.dispatchEvent(new Event('change')); })()"
            )
            clip = page.eval(
                "(() => { const a = document.querySelector('#timeline-section').getBoundingClientRect(); "
                "const b = document.querySelector('ul.hazards').getBoundingClientRect(); "
                "document.querySelector('.graph').style.display = 'none'; "
                "return {x: 0, y: a.top + window.scrollY, width: 1280, height: 360}; })()"
            )
            path = page.screenshot(out / "report-threads.png", full_page=True, clip=clip)
            print(path, path.stat().st_size, "bytes")
            hazard = page.eval("document.querySelector('ul.hazards').textContent")
            print("hazard:", hazard)
            if page.errors:
                print("console errors:", page.errors, file=sys.stderr)
                return 1
        return _first_hour(tmp, out)


if __name__ == "__main__":
    sys.exit(main())
