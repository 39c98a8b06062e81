"""Under ``launchtrace run`` every process the program starts exports its own launches, once: ``os.fork``,
``multiprocessing`` with ``fork``, ``spawn`` and ``forkserver``; and ``SIGTERM`` flushes what is pending, with
the exit status the program would have had.

Real subprocesses running real Warp kernels on the CPU; spans read back from the one file all processes
append to, counted per process and kernel (folded summaries expanded by ``launchtrace.sources.rebuild``). Bounded by
subprocess timeouts: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from launchtrace.sources.files import read_spans
from test_fork import records_by_pid
from test_run_cli import env

PARENT_LAUNCHES = 4
CHILD_LAUNCHES = 3
TIMEOUT_S = 240

PROGRAM = textwrap.dedent(
    f"""
    import multiprocessing, os, sys, time
    import warp as wp
    import launchtrace

    wp.config.quiet = True

    @wp.kernel
    def parent_kernel(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = x[i] + 1.0

    @wp.kernel
    def child_kernel(x: wp.array(dtype=float)):
        i = wp.tid()
        x[i] = x[i] * 2.0

    def child_work(ready=None):
        x = wp.zeros(8, dtype=float)
        with launchtrace.scope("child"):
            for _ in range({CHILD_LAUNCHES}):
                wp.launch(child_kernel, dim=8, inputs=[x])
        if ready is not None:  # then wait to be terminated (SIGTERM), as a stopped worker is
            ready.set()
            time.sleep(120)

    if __name__ == "__main__":
        how = sys.argv[1]
        x = wp.zeros(8, dtype=float)
        with launchtrace.scope("parent"):
            for _ in range({PARENT_LAUNCHES}):
                wp.launch(parent_kernel, dim=8, inputs=[x])
        if how == "os.fork":
            pid = os.fork()
            if pid == 0:
                child_work()
                sys.exit(0)  # as the program would: the child leaves through launchtrace run's end too
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
        elif how == "terminate":
            context = multiprocessing.get_context("fork")
            ready = context.Event()
            process = context.Process(target=child_work, args=(ready,))
            process.start()
            ready.wait({TIMEOUT_S})
            process.terminate()
            process.join({TIMEOUT_S})
            code = 0 if process.exitcode == -15 else process.exitcode
        elif how == "sigterm":
            print("ready", flush=True)
            time.sleep(120)
            code = 0
        else:
            process = multiprocessing.get_context(how).Process(target=child_work)
            process.start()
            process.join({TIMEOUT_S})
            code = process.exitcode
        print("child exit", code, flush=True)
        sys.exit(0 if code == 0 else 3)
    """
)

SIGTERM_HANDLER = textwrap.dedent(
    """
    import signal, sys
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(7))  # the program's own handler
    """
)


def _launch(program: Path, *args: str, cwd: Path, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(cwd / "spans.jsonl"), str(program), *args],
        cwd=cwd,
        env=env(**extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kernel_counts(path: Path) -> Counter:
    """(process, kernel) -> launches exported; processes numbered 0 (the parent), 1, ... by first span."""
    read = read_spans(path)
    assert not read.problems
    ids = [s.span_id for s in read.spans]
    assert len(ids) == len(set(ids))  # nothing exported twice
    records = records_by_pid(read.spans)
    parent = min(records, key=lambda pid: min(r.start_ns for r in records[pid]))
    out: Counter = Counter()
    for pid, recs in records.items():
        for r in recs:
            if str(r.op) == "launch":
                out[("parent" if pid == parent else "child", r.kernel.rpartition(".")[2])] += 1
    return out


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "family.py"
    path.write_text(PROGRAM)
    return path


@pytest.mark.parametrize("how", ["os.fork", "fork", "spawn", "forkserver"])
def test_every_child_exports_its_own_launches_once(warp_cpu, tmp_path: Path, program: Path, how: str) -> None:
    proc = _launch(program, how, cwd=tmp_path)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err
    assert "child exit 0" in out
    counts = _kernel_counts(tmp_path / "spans.jsonl")
    assert counts == {("parent", "parent_kernel"): PARENT_LAUNCHES, ("child", "child_kernel"): CHILD_LAUNCHES}


def test_a_terminated_forked_worker_flushes_before_it_dies(warp_cpu, tmp_path: Path, program: Path) -> None:
    """``Process.terminate()`` sends SIGTERM: the worker's pending launches still reach the file."""
    proc = _launch(program, "terminate", cwd=tmp_path, LAUNCHTRACE_EXPORT_INTERVAL="60")
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err
    assert "child exit 0" in out  # the worker died of SIGTERM (-15)
    counts = _kernel_counts(tmp_path / "spans.jsonl")
    assert counts == {("parent", "parent_kernel"): PARENT_LAUNCHES, ("child", "child_kernel"): CHILD_LAUNCHES}


def _sigterm_after_ready(proc: subprocess.Popen) -> tuple[str, str]:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "ready":
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    return out, err


def test_sigterm_flushes_what_is_pending_and_dies_of_the_signal(warp_cpu, tmp_path: Path, program: Path) -> None:
    # the worker would export only after 60 s: everything is still pending when the signal comes
    proc = _launch(program, "sigterm", cwd=tmp_path, LAUNCHTRACE_EXPORT_INTERVAL="60")
    _, err = _sigterm_after_ready(proc)
    assert proc.returncode == -signal.SIGTERM
    assert "launchtrace: SIGTERM:" in err
    assert _kernel_counts(tmp_path / "spans.jsonl") == {("parent", "parent_kernel"): PARENT_LAUNCHES}


def test_sigterm_keeps_the_programs_own_handler_and_exit_status(warp_cpu, tmp_path: Path) -> None:
    program = tmp_path / "handled.py"
    program.write_text(PROGRAM.replace("import launchtrace\n", "import launchtrace\n" + SIGTERM_HANDLER, 1))
    proc = _launch(program, "sigterm", cwd=tmp_path, LAUNCHTRACE_EXPORT_INTERVAL="60")
    _, err = _sigterm_after_ready(proc)
    assert proc.returncode == 7, err  # the program's handler decided, and its clean exit flushed
    assert "launchtrace: SIGTERM:" not in err
    assert _kernel_counts(tmp_path / "spans.jsonl") == {("parent", "parent_kernel"): PARENT_LAUNCHES}


def test_sigterm_in_process_start_export(warp_cpu, tmp_path: Path) -> None:
    """Without ``launchtrace run``: a program that calls ``start_export`` itself gets the same flush."""
    program = tmp_path / "inprocess.py"
    program.write_text(
        PROGRAM.replace("wp.config.quiet = True\n", "wp.config.quiet = True\nlaunchtrace.start_export()\n", 1)
    )
    proc = subprocess.Popen(
        [sys.executable, str(program), "sigterm"],
        cwd=tmp_path,
        env=env(LAUNCHTRACE_EXPORT_INTERVAL="60", LAUNCHTRACE_FILE=str(tmp_path / "spans.jsonl")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _sigterm_after_ready(proc)
    assert proc.returncode == -signal.SIGTERM
    assert _kernel_counts(tmp_path / "spans.jsonl") == {("parent", "parent_kernel"): PARENT_LAUNCHES}


def test_children_get_the_parents_settings_through_the_environment(tmp_path: Path) -> None:
    from launchtrace import autorun
    from launchtrace.export.config import ExportConfig

    config = ExportConfig.resolve(file_path=str(tmp_path / "s.jsonl"), service_name="sim")
    environ = {"PYTHONPATH": f"/elsewhere{os.pathsep}{autorun.AUTORUN_DIR}"}
    autorun.export_to_children(config, {"value_stats": True, "file_path": config.file_path}, environ)
    assert environ["PYTHONPATH"] == f"{autorun.AUTORUN_DIR}{os.pathsep}/elsewhere"
    assert environ["LAUNCHTRACE_FILE"] == config.file_path
    assert environ["LAUNCHTRACE_VALUE_STATS"] == "true"
    assert environ["LAUNCHTRACE_SERVICE_NAME"] == "sim"
    child = ExportConfig.resolve(env=environ)
    assert (child.file_path, child.value_stats, child.service_name) == (config.file_path, True, "sim")


def test_the_child_bootstrap_is_light_and_keeps_the_sitecustomize_it_hides(tmp_path: Path) -> None:
    """A Python child that never imports Warp loads no Warp and no exporter; the environment's own
    ``sitecustomize`` (here one that leaves a marker) still runs."""
    from launchtrace import autorun

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = '1'\n")
    src = str(Path(autorun.__file__).resolve().parents[1])
    code = (
        "import os, sys; print(os.environ.get('THEIRS_RAN'), 'launchtrace.autorun' in sys.modules, "
        "'warp' in sys.modules, 'launchtrace.export' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env(PYTHONPATH=os.pathsep.join([autorun.AUTORUN_DIR, str(theirs), src]), LAUNCHTRACE_AUTORUN="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "True", "False", "False"]
