"""The ``launch_topology`` pytest plugin, run by pytest's own ``pytester`` on a real Warp program (CPU).

Each inner session is a fresh pytest run in this process (``runpytest``), loading the plugin through its
``pytest11`` entry point as any user's session does.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import warp as wp

import launchtrace.render.snapshot_text
import launchtrace.snapshot_session  # noqa: F401
from launchtrace.testing import trace_launches
from warp_programs import scale

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Warp initialised and the capture's lazy modules imported before any inner session: pytester drops the
    modules an inner run imported first, and Warp or the capture imported twice in one process would be two of
    each (and every inner run would pay Warp's start-up again)."""
    x = wp.ones(4, dtype=float, device="cpu")
    with trace_launches():
        wp.launch(scale, dim=4, inputs=[x, x, 1.0], device="cpu")


PROGRAM = '''
"""A step with owned state and temporaries freed and re-allocated (the allocator may hand tmp's address to
tmp2). SNAP_VARIANT changes one thing: dim, insert, swap or scalar."""
import os

import warp as wp

wp.config.quiet = True
N = 32


@wp.kernel
def scale(src: wp.array(dtype=float), dst: wp.array(dtype=float), s: float):
    i = wp.tid()
    dst[i] = src[i] * s


@wp.kernel
def add(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = a[i] + b[i]


class Sim:
    def __init__(self):
        self.x = wp.full(N, 1.0, dtype=float, device="cpu")
        self.v = wp.full(N, 2.0, dtype=float, device="cpu")
        self.alt = wp.full(N, 3.0, dtype=float, device="cpu")

    def step(self):
        variant = os.environ.get("SNAP_VARIANT", "base")
        tmp = wp.empty(N, dtype=float, device="cpu")
        wp.launch(scale, dim=N, inputs=[self.x, tmp, 0.25 if variant == "scalar" else 0.5], device="cpu")
        if variant == "insert":
            wp.launch(scale, dim=N, inputs=[tmp, tmp, 1.0], device="cpu")
        other = self.alt if variant == "swap" else self.v
        wp.launch(add, dim=N // 2 if variant == "dim" else N, inputs=[tmp, other, self.x], device="cpu")
        del tmp
        tmp2 = wp.empty(N, dtype=float, device="cpu")
        wp.launch(scale, dim=N, inputs=[self.x, tmp2, 2.0], device="cpu")
        wp.launch(add, dim=N, inputs=[tmp2, self.v, self.v], device="cpu")
'''

TEST = """
from simprog import Sim


def test_step(launch_topology):
    sim = Sim()
    sim.step()  # warm-up, not recorded
    with launch_topology("step", owners={"sim": sim}):
        sim.step()
"""

SNAPSHOT = Path("__launchtrace__/test_sim/test_step.step.json")


def _line(fragment: str) -> int:
    """The line of ``simprog.py`` (as pytester writes it: dedented, stripped) that holds ``fragment``."""
    lines = PROGRAM.strip().splitlines()
    (found,) = [i + 1 for i, line in enumerate(lines) if fragment in line]
    return found


SCALE, INSERT, ADD = _line("0.25 if variant"), _line("inputs=[tmp, tmp, 1.0]"), _line("dim=N // 2 if")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SNAP_VARIANT", raising=False)
    pytester.makepyfile(simprog=PROGRAM, test_sim=TEST)
    pytester.syspathinsert()
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inner session without Hypothesis's plugin and assertion rewriting, which would import Hypothesis and
    recompile every module the run imports afresh in each one (pytester drops them after each run)."""
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--assert=plain", *args)


def _site_lines(result: pytest.RunResult) -> list[str]:
    """The diff lines of a failure: one per distinct change, each naming its kernel and call site."""
    return [line.strip() for line in result.outlines if re.match(r"^\s+#\d+(->#\d+)? ", line)]


def test_missing_snapshot_fails_with_the_command_then_update_creates_it(project: pytest.Pytester) -> None:
    result = _run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "launch topology snapshot 'step' is missing: __launchtrace__/test_sim/test_step.step.json",
            "create it with: pytest --launchtrace-update 'test_sim.py::test_step'",
        ]
    )
    assert not (project.path / SNAPSHOT).exists()

    result = _run(project, "--launchtrace-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["launchtrace: 1 snapshot(s) written, 0 updated"])
    text = (project.path / SNAPSHOT).read_text()
    doc = json.loads(text)
    assert [e["kernel"] for e in doc["launches"]] == ["simprog.scale", "simprog.add", "simprog.scale", "simprog.add"]
    assert doc["launches"][1]["buffers"]["b"] == "sim.v" and doc["launches"][0]["scalars"] == {"s": 0.5}
    assert doc["launches"][0]["site"] == f"simprog.py:{SCALE} (step)"  # relative to the root, with line and function
    lines = text.splitlines()
    assert sum(line.lstrip().startswith('{"buffers"') for line in lines) == 4  # one launch per line
    assert all(
        list(json.loads(line.strip().rstrip(","))) == sorted(json.loads(line.strip().rstrip(",")))
        for line in lines
        if line.lstrip().startswith('{"buffers"')
    )  # keys sorted
    assert str(project.path) not in text and not re.search(r"0x[0-9a-f]{6,}", text)  # no paths, no pointers

    _run(project).assert_outcomes(passed=1)  # the same program matches its snapshot


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("dim", f"#1 simprog.add (from simprog.py:{ADD} (step)): dim (32,) -> (16,)"),
        ("insert", f"#1 inserted simprog.scale dim=(32,) (from simprog.py:{INSERT} (step))"),
        ("swap", f"#1 simprog.add (from simprog.py:{ADD} (step)): buffer b sim.v -> sim.alt"),
        ("scalar", f"#0 simprog.scale (from simprog.py:{SCALE} (step)): scalar s 0.5 -> 0.25"),
    ],
)
def test_a_change_fails_with_one_line_naming_the_site(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variant: str, expected: str
) -> None:
    _run(project, "--launchtrace-update").assert_outcomes(passed=1)
    before = (project.path / SNAPSHOT).read_text()
    monkeypatch.setenv("SNAP_VARIANT", variant)
    result = _run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["launch topology 'step' differs from __launchtrace__/test_sim/test_step.step.json:"])
    (line,) = _site_lines(result)
    assert line == expected
    result.stdout.fnmatch_lines(["*update the snapshot with: pytest --launchtrace-update 'test_sim.py::test_step'"])
    assert (project.path / SNAPSHOT).read_text() == before  # a mismatch never rewrites the snapshot

    _run(project, "--launchtrace-update").stdout.fnmatch_lines(["launchtrace: 0 snapshot(s) written, 1 updated"])
    assert (project.path / SNAPSHOT).read_text() != before
    _run(project).assert_outcomes(passed=1)  # the updated snapshot holds the new topology


def test_an_unchanged_program_passes_twenty_reruns_in_a_row(project: pytest.Pytester) -> None:
    """Temporaries freed and re-allocated, with the allocator's state stirred between runs (arrays of random
    sizes kept alive or freed here, in the same process): the snapshot must not depend on which address the
    allocator hands out."""
    _run(project, "--launchtrace-update").assert_outcomes(passed=1)
    rng = random.Random(28)
    ballast: list = []
    outcomes = []
    for _ in range(20):
        for _ in range(rng.randrange(1, 6)):
            ballast.append(wp.empty(rng.choice((8, 16, 32, 64)), dtype=float, device="cpu"))
        rng.shuffle(ballast)
        del ballast[: rng.randrange(0, len(ballast) + 1)]
        result = _run(project)
        outcomes.append((result.ret, _site_lines(result)))
    assert outcomes == [(0, [])] * 20


def test_missing_created_locally_and_failing_in_ci_when_configured(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makefile(".toml", pyproject='[tool.launchtrace.snapshot]\nmissing = "create-unless-ci"\n')
    monkeypatch.setenv("CI", "true")
    result = _run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["launch topology snapshot 'step' is missing (CI is set): *"])
    monkeypatch.delenv("CI")
    _run(project).assert_outcomes(passed=1)
    assert (project.path / SNAPSHOT).is_file()


def test_options_from_pyproject_and_keyword_arguments(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(project, "--launchtrace-update").assert_outcomes(passed=1)
    monkeypatch.setenv("SNAP_VARIANT", "scalar")  # s 0.5 -> 0.25
    project.makefile(".toml", pyproject="[tool.launchtrace.snapshot]\nignore_scalars = true\n")
    result = _run(project)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(  # passes, and says that the stored text (s: 0.5) is not what runs now
        ["launchtrace: 1 snapshot(s) match in topology but differ in sites, scopes or tolerated values: *"]
    )
    project.makefile(".toml", pyproject="[tool.launchtrace.snapshot]\nfloat_tolerance = { s = 0.3 }\n")
    _run(project).assert_outcomes(passed=1)  # |0.5 - 0.25| <= 0.3 * max(1, 0.5, 0.25)
    project.makefile(".toml", pyproject="[tool.launchtrace.snapshot]\nfloat_tolerance = { s = 0.1 }\n")
    _run(project).assert_outcomes(failed=1)
    project.makepyfile(test_sim=TEST.replace('owners={"sim": sim}', 'owners={"sim": sim}, float_tolerance={"s": 0.3}'))
    _run(project).assert_outcomes(passed=1)  # a keyword argument wins over pyproject.toml
    project.makefile(".toml", pyproject="[tool.launchtrace.snapshot]\nmising = 'create'\n")
    result = _run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*pyproject.toml [[]tool.launchtrace.snapshot[]]: unknown key 'mising' (known: *"])


def test_a_long_diff_is_cut_at_max_diff_lines_with_the_rest_counted(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(
        test_sim="""
import os

import warp as wp
from simprog import scale


def test_step(launch_topology):
    x = wp.ones(8, dtype=float, device="cpu")
    with launch_topology("step", owners={"x": x}):
        for k in range(int(os.environ.get("LAUNCHES", "10"))):
            wp.launch(scale, dim=8 + k, inputs=[x, x, 1.0], device="cpu")
"""
    )
    project.makefile(".toml", pyproject="[tool.launchtrace.snapshot]\nmax_diff_lines = 3\n")
    _run(project, "--launchtrace-update").assert_outcomes(passed=1)
    monkeypatch.setenv("LAUNCHES", "20")
    result = _run(project)
    result.assert_outcomes(failed=1)
    assert len(_site_lines(result)) == 3
    result.stdout.fnmatch_lines(
        ["*10 launches in the snapshot, 20 now (10 inserted, 0 removed, 0 changed)", "*... 7 more"]
    )


def test_one_name_twice_in_a_test_fails_and_parametrized_tests_get_their_own_files(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_sim="""
import pytest
from simprog import Sim


@pytest.mark.parametrize("k", [1, 2])
def test_step(launch_topology, k):
    sim = Sim()
    with launch_topology("step"):
        for _ in range(k):
            sim.step()


def test_twice(launch_topology):
    sim = Sim()
    with launch_topology("step"):
        sim.step()
    with launch_topology("step"):
        sim.step()
"""
    )
    result = _run(project, "--launchtrace-update")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*snapshot __launchtrace__/test_sim/test_twice.step.json was already used in this session*"]
    )
    names = sorted(p.name for p in (project.path / "__launchtrace__" / "test_sim").iterdir())
    assert names == ["test_step[1].step.json", "test_step[2].step.json", "test_twice.step.json"]
    doc = json.loads((project.path / "__launchtrace__" / "test_sim" / "test_step[1].step.json").read_text())
    # no owners given: buffers by allocation, Sim() included (made in the test, before the block)
    assert [e["buffers"] for e in doc["launches"][:2]] == [
        {"src": "Sim.x", "dst": "Sim.step.tmp"},
        {"a": "Sim.step.tmp", "b": "Sim.v", "out": "Sim.x"},
    ]
    assert not list((project.path / "__launchtrace__").rglob("*.tmp"))


def test_a_test_that_does_not_use_the_fixture_is_untouched(project: pytest.Pytester) -> None:
    project.makepyfile(test_sim="def test_plain():\n    assert True\n")
    result = _run(project, "--launchtrace-update")
    result.assert_outcomes(passed=1)
    assert "launchtrace:" not in result.stdout.str()
    assert not (project.path / "__launchtrace__").exists()


def test_the_plugin_module_imports_nothing_heavy() -> None:
    """What every pytest session pays: the plugin module alone, without Warp, numpy or the snapshot code."""
    code = (
        "import sys, launchtrace.pytest_plugin\n"
        "print(sorted(m for m in ('warp', 'numpy', 'launchtrace.snapshot', 'launchtrace.testing', "
        "'launchtrace.snapshot_session') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
