"""Screenshots of the demo's HTML report for ``docs/report.md`` (headless Chromium over the DevTools pipe).

Runs ``launchtrace demo`` twice (4 and 3 substeps) and reports the 4-substep run (the default demo, whose
substeps are folded) with the 3-substep run as its baseline (so the diff section has something to show), then
saves one PNG per section under ``docs/img/``; then reports ``tests/race_program.py`` (a writer and a reader thread
racing on ``s.x``) and saves its whole-run timeline, every thread on one axis, and its hazard.

    python scripts/report_screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
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


def _launchtrace(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "launchtrace", *args], check=True, timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
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
            for name, (first, last) in SECTIONS.items():
                clip = page.eval(
                    f"(() => {{ const a = document.querySelector('{first}').getBoundingClientRect(); "
                    f"const b = document.querySelector('{last}').getBoundingClientRect(); "
                    "return {x: 0, y: a.top + window.scrollY, width: 1280, "
                    "height: Math.min(b.bottom - a.top, 1400)}; })()"
                )
                path = page.screenshot(out / name, full_page=True, clip=clip)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
