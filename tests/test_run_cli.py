"""``launchtrace run`` and ``opentelemetry-instrument`` with the ``warp`` instrumentor, as real subprocesses
running a real Warp program on the CPU device.

The program builds its arrays under the exporter, so the file holds its 15 scoped launches plus, exactly, the
fills and the copy Warp issues inside ``wp.zeros`` / ``wp.array(data)`` (internal records), counted against
``warp_programs.internal_work`` of the same ``Sim()`` in this process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from launchtrace import conventions as C
from launchtrace.receiver.collect import Collector
from test_pipeline import file_spans

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

PROGRAM = textwrap.dedent(
    f"""
    import sys
    sys.path.insert(0, {str(REPO / "tests")!r})
    import launchtrace
    import warp_programs

    open(sys.argv[1], "w").write(repr(sys.argv))
    sim = warp_programs.Sim()
    for i in range(3):
        with launchtrace.scope("step", i=i):
            sim.step()
    if len(sys.argv) > 2 and sys.argv[2] == "raise":
        raise ValueError("the program failed")
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    """
)


STEP_LAUNCHES = 3 * 5  # three steps of Sim.step: a copy, a launch, a fill, two launches


@pytest.fixture(scope="module")
def setup_work(warp_cpu) -> list[tuple[str, str]]:
    """What ``warp_programs.Sim()`` issues inside Warp, in order: the internal spans the program adds."""
    import warp_programs

    work = warp_programs.internal_work(warp_programs.Sim)
    assert work  # the program's setup does issue device work: the check below is not vacuous
    return work


def check_launches(spans: list, setup_work: list[tuple[str, str]]) -> None:
    """The program's scoped launches, each once, and exactly Warp's internal setup work, flagged internal."""
    records = sorted((s for s in spans if s.attribute(C.OP)), key=lambda s: s.attribute(C.SEQ))
    assert len([s for s in records if not s.attribute(C.INTERNAL)]) == STEP_LAUNCHES
    assert [(s.attribute(C.OP), s.name) for s in records if s.attribute(C.INTERNAL)] == setup_work


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and not k.startswith("LAUNCHTRACE_")}
    e.update(extra)
    return e


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "sim_program.py"
    path.write_text(PROGRAM)
    return path


def run(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", "run", *args],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_run_exports_to_out_sets_argv_and_keeps_the_exit_code(tmp_path: Path, program: Path, setup_work) -> None:
    out = tmp_path / "spans.jsonl"
    out.write_text('{"resourceSpans": []}\n')  # a previous run's spans: --out empties the file first
    argv_file = tmp_path / "argv.txt"
    proc = run("--out", str(out), "--no-fold", str(program), str(argv_file), "3", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert eval(argv_file.read_text()) == [str(program), str(argv_file), "3"]
    spans = file_spans(out)
    check_launches(spans, setup_work)
    assert sorted(s.name for s in spans if s.attribute(C.SCOPE_KIND) == "user") == ["step"] * 3
    assert f"launchtrace: {len(spans)} spans -> file {out}" in proc.stderr


def test_run_a_program_that_raises_prints_its_traceback_exits_1_and_still_flushes(
    tmp_path: Path, program: Path, setup_work
) -> None:
    out = tmp_path / "spans.jsonl"
    proc = run("--out", str(out), str(program), str(tmp_path / "argv.txt"), "raise", cwd=tmp_path)
    assert proc.returncode == 1
    assert "ValueError: the program failed" in proc.stderr
    assert 'File "' + str(program) in proc.stderr and "runpy" not in proc.stderr
    check_launches(file_spans(out), setup_work)


def test_a_traceback_through_an_instrumented_warp_call_reads_as_it_does_bare(tmp_path: Path) -> None:
    """Warp's utilities are wrapped in Python: an error they raise passed through launchtrace's wrapper frame,
    which the program's traceback showed between its own call and Warp's code. It is left out now: the same
    frames as bare Python, in the same order, for the error and the one chained to it."""
    script = tmp_path / "sums.py"
    script.write_text(
        textwrap.dedent(
            """
            import warp as wp
            import warp.utils

            def total(x):
                return wp.utils.array_sum(x)

            try:
                total(wp.zeros(4, dtype=int, device="cpu"))
            except RuntimeError as e:
                raise ValueError("no total") from e
            """
        )
    )

    def frames(text: str) -> list[str]:
        return [
            line.strip() for line in text.splitlines() if line.strip().startswith(("File ", "ValueError", "Runtime"))
        ]

    bare = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    proc = run("--out", str(tmp_path / "s.jsonl"), str(script), cwd=tmp_path)
    assert proc.returncode == bare.returncode == 1
    assert frames(proc.stderr) == frames(bare.stderr) and len(frames(bare.stderr)) >= 5, proc.stderr
    assert "launchtrace" not in "".join(frames(proc.stderr))


def test_run_default_file_in_the_working_directory(tmp_path: Path, program: Path, setup_work) -> None:
    proc = run(str(program), str(tmp_path / "argv.txt"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = list(tmp_path.glob("launchtrace-*.jsonl"))
    assert len(files) == 1
    check_launches(file_spans(files[0]), setup_work)


def test_run_missing_script_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = run("nope.py", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == "launchtrace run: error: nope.py: no such file\n"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_run_exports_over_otlp_when_the_standard_endpoint_is_set(
    tmp_path: Path, program: Path, protocol: str, setup_work
) -> None:
    with Collector(None, grpc_port=0, http_port=0, keep=True) as c:
        port = c.grpc_port if protocol == "grpc" else c.http_port
        proc = run(
            str(program),
            str(tmp_path / "argv.txt"),
            cwd=tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
            OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        )
        assert proc.returncode == 0, proc.stderr
        spans = c.spans()
    check_launches(spans, setup_work)
    assert not list(tmp_path.glob("launchtrace-*.jsonl"))


def test_opentelemetry_instrument_loads_the_warp_instrumentor(tmp_path: Path, program: Path, setup_work) -> None:
    with Collector(None, grpc_port=0, http_port=None, keep=True) as c:
        proc = subprocess.run(
            [str(BIN / "opentelemetry-instrument"), sys.executable, str(program), str(tmp_path / "argv.txt")],
            cwd=tmp_path,
            env=env(
                OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{c.grpc_port}",
                OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
                OTEL_EXPORTER_OTLP_INSECURE="true",
                OTEL_METRICS_EXPORTER="none",
                OTEL_LOGS_EXPORTER="none",
                OTEL_SERVICE_NAME="instrumented-sim",
                PATH=f"{BIN}:{os.environ.get('PATH', '')}",
            ),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        spans = c.spans()
    check_launches(spans, setup_work)
    assert {dict(s.resource)["service.name"] for s in spans} == {"instrumented-sim"}


def test_instrumentor_is_symmetric_and_repeatable(tmp_path: Path, warp_cpu) -> None:
    import launchtrace.capture as capture
    import launchtrace.export as export
    from launchtrace.instrumentor import WarpInstrumentor

    inst = WarpInstrumentor()
    try:
        for i in range(2):
            inst.instrument(file_path=str(tmp_path / f"i{i}.jsonl"))
            assert capture.is_instrumented() and export._pipeline is not None and export._pipeline.running
            inst.instrument()  # a second call is a no-op
            inst.uninstrument()
            assert not capture.is_instrumented() and export._pipeline is None
    finally:
        inst.uninstrument()


def test_run_a_module_with_dash_m(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("import sys\nprint('argv', sys.argv[1:])\nsys.exit(4)\n")
    proc = run("--out", str(tmp_path / "m.jsonl"), "-m", "pkg.mod", "a", "b", cwd=tmp_path)
    assert proc.returncode == 4 and "argv ['a', 'b']" in proc.stdout


def test_run_out_in_a_missing_folder_creates_it(tmp_path: Path, program: Path, setup_work) -> None:
    """One rule for every command that writes a file: its last missing folder level is created (a deeper missing
    path is refused: tests/test_misuse.py)."""
    out = tmp_path / "new" / "s.jsonl"
    proc = run("--out", str(out), str(program), str(tmp_path / "argv.txt"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    check_launches(file_spans(out), setup_work)


def test_run_names_the_service_after_the_script_and_files_absolutely(tmp_path: Path, program: Path) -> None:
    out = tmp_path / "s.jsonl"
    proc = run("--out", str(out), "sim_program.py", str(tmp_path / "argv.txt"), cwd=tmp_path)  # a relative path
    assert proc.returncode == 0, proc.stderr
    spans = file_spans(out)
    assert {dict(s.resource)["service.name"] for s in spans} == {"sim_program"}
    steps = [s for s in spans if s.attribute(C.SCOPE_KIND) == "user"]  # opened in the program itself
    assert len(steps) == 3 and {s.attribute(C.CODE_FILE_PATH) for s in steps} == {str(program)}


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [("OTEL_SERVICE_NAME", "fleet-sim", "fleet-sim"), ("OTEL_RESOURCE_ATTRIBUTES", "service.name=rl,team=a", "rl")],
)
def test_run_keeps_the_service_name_the_environment_gives(
    tmp_path: Path, program: Path, variable: str, value: str, expected: str
) -> None:
    out = tmp_path / "s.jsonl"
    proc = run("--out", str(out), str(program), str(tmp_path / "argv.txt"), cwd=tmp_path, **{variable: value})
    assert proc.returncode == 0, proc.stderr
    assert {dict(s.resource)["service.name"] for s in file_spans(out)} == {expected}


def test_run_a_missing_module_is_one_line_exit_2_and_no_file(tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    proc = run("--out", str(out), "-m", "nosuchmod_launchtrace", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "launchtrace run: error: -m nosuchmod_launchtrace: no module named 'nosuchmod_launchtrace'\n"
    assert proc.stdout == "" and not out.exists()


def test_run_a_bad_option_is_one_line_pointing_at_runs_help(tmp_path: Path) -> None:
    proc = run("--bogus", "x.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "launchtrace run: error: unrecognized arguments: --bogus (see launchtrace run --help)\n"


def test_run_a_missing_submodule_is_one_line_exit_2_and_no_file(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    out = tmp_path / "m.jsonl"
    proc = run("--out", str(out), "-m", "pkg.nosuch", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "launchtrace run: error: -m pkg.nosuch: no module named 'pkg.nosuch'"
    assert "Traceback" not in proc.stderr and not out.exists()


def test_each_in_process_run_replaces_the_last_ones_stderr_handler() -> None:
    """``run`` called again in one process (a notebook, a test) must not stack handlers: each would print every
    warning once more, to a stderr handle of a run that is over."""
    import io
    import logging

    from launchtrace.cli import run as run_cli

    logger = logging.getLogger("launchtrace")
    before = list(logger.handlers)
    first, second = io.StringIO(), io.StringIO()
    try:
        run_cli._log_to(first)
        run_cli._log_to(second)
        own = [h for h in logger.handlers if isinstance(h, run_cli._OwnStderrHandler)]
        assert [h.stream for h in own] == [second]
        run_cli._log_to(None)
        assert not [h for h in logger.handlers if isinstance(h, run_cli._OwnStderrHandler)]
    finally:
        logger.handlers[:] = before
