"""Every command shown in README.md, the guide (docs/guide/*.md) and docs/traces.md runs, and prints what the page
shows, by shape.

The page convention is in ``tests/console_blocks.py`` (```console blocks, ``$ `` lines, ``...`` for a partial
output, ``# exit code N``). The commands of one page run in order in one fresh directory that holds the
guide's example programs (``examples/``, copied from docs/guide/examples/) and two demo traces made once per
session with the real ``launchtrace demo``: ``four-substeps.jsonl`` (the default) and ``three-substeps.jsonl``
(``--substeps 3``), the pair the diff examples compare. Commands run in bash, on the CPU device, with no
``OTEL_*`` variables, so they write files instead of needing a server. What is compared is the command's
standard output (Warp's warnings and progress lines go to standard error).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests import console_blocks as B

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide"
# README, the guide, and the reference pages that show commands as ```console blocks (the rest show plain blocks)
PAGES = [ROOT / "README.md", *sorted(GUIDE.glob("*.md")), ROOT / "docs" / "traces.md"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["COLUMNS"] = "120"
    return env


def _run(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def demo_traces(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("demo-traces")
    for name, extra in (("four-substeps.jsonl", ""), ("three-substeps.jsonl", "--substeps 3")):
        result = _run(f"launchtrace demo {extra} --out {name}", where)
        assert result.returncode == 0, result.stderr
    return where


def _workspace(demo_traces: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for trace in demo_traces.glob("*.jsonl"):
        shutil.copy(trace, work / trace.name)
    if (GUIDE / "examples").is_dir():
        shutil.copytree(GUIDE / "examples", work / "examples")
    return work


def test_the_guide_and_readme_show_commands():
    shown = {page.name: len(B.commands(page)) for page in PAGES}
    assert shown["README.md"] >= 4, shown
    assert sum(shown.values()) >= 20, shown


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_on_the_page_prints_what_the_page_shows(page, demo_traces, tmp_path):
    work = _workspace(demo_traces, tmp_path)
    problems = []
    for cmd in B.commands(page):
        result = _run(cmd.command, work)
        where = f"{page.relative_to(ROOT)}:{cmd.line}: $ {cmd.command}"
        if result.returncode != cmd.exit_code:
            problems.append(f"{where}\n  exit code {result.returncode}, the page says {cmd.exit_code}\n{result.stderr}")
            continue
        mismatch = B.shape_mismatch(cmd.expected, result.stdout.splitlines())
        if mismatch:
            problems.append(where + "\n  " + "\n  ".join(mismatch))
    assert not problems, "\n\n".join(problems)


# --- the convention itself ------------------------------------------------------------------------------------


def test_console_blocks_are_parsed_into_commands_outputs_and_exit_codes(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "text\n```console\n$ launchtrace summary a.jsonl\n1 trace(s), 3 records\n...\n"
        "$ launchtrace diff a.jsonl \\\n  b.jsonl   # exit code 1\ntopology: differs\n```\n"
        "```text\n$ not run\n```\n```bash\n$ nor this\n```\n"
    )
    cmds = B.commands(page)
    assert [c.command for c in cmds] == [
        "launchtrace summary a.jsonl",
        "launchtrace diff a.jsonl \\\n  b.jsonl   # exit code 1",
    ]
    assert cmds[0].expected == ["1 trace(s), 3 records", "..."] and cmds[0].exit_code == 0
    assert cmds[1].expected == ["topology: differs"] and cmds[1].exit_code == 1
    assert cmds[1].line == 6


def test_shapes_ignore_values_but_not_words():
    assert B.shape("exported 367 spans, dropped 0, to file /tmp/x/launchtrace-1-2.jsonl") == B.shape(
        "exported 12 spans, dropped 3, to file launchtrace-20261130-134542-12708.jsonl"
    )
    assert B.shape("  #1 k (from .../particles.py:94 (substep)): scalar dt 0.0041 -> 5e-3") == B.shape(
        "#17 k (from /work/src/launchtrace/demo/particles.py:101 (substep)): scalar dt 1 -> 2"
    )
    assert B.shape("trace 4bf92f3577b34da6a3ce929d0e0e4736") == B.shape("trace 0af7651916cd43dd8448eb211c80319c")
    assert B.shape("scope 'step': 60 occurrences, static") != B.shape("scope 'step': 60 occurrences, dynamic")
    assert B.shape("kernel op count") != B.shape("kernel op calls")


def test_a_drifted_output_is_reported_and_a_partial_one_is_allowed():
    shown = ["61 trace(s), 1086 records", "kernel op count total ms"]
    assert B.shape_mismatch(shown, ["60 trace(s), 5 records", "kernel   op   count  total ms"]) == []
    assert B.shape_mismatch(shown, ["61 trace(s), 1086 records", "kernel op count total us"]) != []
    assert B.shape_mismatch(shown, [*shown, "an extra line"]) == [
        "printed but not shown (add the line or a '...'): 'an extra line'"
    ]
    assert B.shape_mismatch([*shown, "..."], [*shown, "an extra line"]) == []
    warp = ["Warp 1.19.0 initialized:", "   Devices:", "Module m 88a33cd load on device 'cpu' took 1.2 ms  (cached)"]
    assert B.shape_mismatch(shown, warp + shown) == []


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_guide_and_deploy_readme_resolves():
    pages = [*sorted(GUIDE.glob("*.md")), ROOT / "deploy" / "README.md"]
    problems = []
    for page in pages:
        for target in _LINK.findall(page.read_text()):
            if re.match(r"^\w+:", target):
                continue  # an absolute URL
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                problems.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            elif anchor and resolved.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", resolved.read_text(), re.M)}
                if anchor not in headings:
                    problems.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    assert not problems, "\n".join(problems)
