"""Misuse costs the user nothing (issue 25): real ``launchtrace run`` processes running real Warp programs on the
CPU device, real signals, real files, real symbolic links and file owners.

Each test is one finding of the adversarial pass: what the user did, and what must hold now (the program's
exit status as it would be bare, its files untouched, the spans it launched on disk).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from launchtrace import conventions as C
from launchtrace.sources.files import read_spans

LAUNCHES = """
import os, sys, time
import warp as wp
wp.config.quiet = True

@wp.kernel
def twice(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = 2.0 * a[i]

a = wp.zeros(8, dtype=float)
b = wp.zeros(8, dtype=float)

def launch(n):
    for _ in range(n):
        wp.launch(twice, dim=8, inputs=[a, b])
"""


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
    e.update(extra)
    return e


def write_program(tmp_path: Path, body: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(LAUNCHES + textwrap.dedent(body))
    return path


def launchtrace(*args: str, cwd: Path, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchtrace", *args],
        cwd=cwd,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_ready(proc: subprocess.Popen) -> None:
    """Read the program's stdout (Warp's banner first) up to its ``ready`` line."""
    for line in proc.stdout:  # type: ignore[union-attr]
        if line.strip() == "ready":
            return
    raise AssertionError(f"the program ended before it was ready: {proc.wait()}")


def launches_in(path: Path) -> int:
    return sum(1 for s in read_spans(path, check=False).spans if s.attribute(C.OP) == "launch")


# ---------------------------------------------------------------------------------------------- 1, 20: --out
def test_run_refuses_an_out_that_is_the_script_and_leaves_it_whole(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(3)\n")
    before = script.read_bytes()
    proc = launchtrace("run", "--out", str(script), str(script), cwd=tmp_path)
    assert proc.returncode == 2 and "also an input" in proc.stderr
    assert proc.stderr.count("\n") == 1  # one line, no traceback
    assert script.read_bytes() == before


def test_run_refuses_an_out_that_holds_something_else(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(3)\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    proc = launchtrace("run", "--out", str(notes), str(script), cwd=tmp_path)
    assert proc.returncode == 2 and "not a span file" in proc.stderr
    assert notes.read_text() == "my notes\n"


def test_run_empties_a_previous_trace_file_as_documented(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(3)\n")
    out = tmp_path / "s.jsonl"
    assert launchtrace("run", "--out", str(out), str(script), cwd=tmp_path).returncode == 0
    assert launchtrace("run", "--out", str(out), str(script), cwd=tmp_path).returncode == 0
    assert launches_in(out) == 3


def test_diff_and_report_refuse_an_out_equal_to_an_input(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(3)\n")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (a, b):
        assert launchtrace("run", "--out", str(out), str(script), cwd=tmp_path).returncode == 0
    before = a.read_bytes()
    for cmd in (["diff", str(a), str(b), "--out", str(a)], ["report", str(a), "--out", str(a)]):
        proc = launchtrace(*cmd, cwd=tmp_path)
        assert proc.returncode == 2 and "also an input" in proc.stderr, proc.stderr
        assert a.read_bytes() == before
    # a report may not replace another trace file either
    proc = launchtrace("report", str(a), "--out", str(b), cwd=tmp_path)
    assert proc.returncode == 2 and "holds spans" in proc.stderr


def test_run_out_dev_null_discards_as_asked(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(2)\n")
    proc = launchtrace("run", "--out", "/dev/null", str(script), cwd=tmp_path)
    assert proc.returncode == 0 and "spans -> file /dev/null" in proc.stderr, proc.stderr


def test_out_creates_only_the_last_missing_folder(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(2)\n")
    deep = tmp_path / "missing" / "deeper" / "s.jsonl"
    proc = launchtrace("run", "--out", str(deep), str(script), cwd=tmp_path)
    assert proc.returncode == 2 and f"folder {tmp_path / 'missing'} does not exist" in proc.stderr
    assert not (tmp_path / "missing").exists()
    one = tmp_path / "new" / "s.jsonl"
    assert launchtrace("run", "--out", str(one), str(script), cwd=tmp_path).returncode == 0
    assert launches_in(one) == 2


# ---------------------------------------------------------------------------------------- 11: the same --out
def test_a_second_run_on_the_same_out_is_refused_and_the_first_keeps_every_span(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    first = write_program(
        tmp_path,
        f"""
        launch(50)
        print("ready", flush=True)
        while not os.path.exists({str(gate)!r}):
            time.sleep(0.02)
        launch(50)
        """,
    )
    out = tmp_path / "shared.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(first)],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_ready(proc)
        second = launchtrace(
            "run", "--out", str(out), str(write_program(tmp_path, "launch(1)\n", "b.py")), cwd=tmp_path
        )
        assert second.returncode == 2 and "being written by another launchtrace run" in second.stderr
        gate.touch()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert launches_in(out) == 100 and "100 spans" not in err  # every launch; the count below is the file's
    assert ", 0 dropped)" in err


# ----------------------------------------------------------------------------- 12: links and others' files
def test_a_planted_link_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.jsonl"
    victim.write_text("")
    link = tmp_path / "spans.jsonl"
    link.symlink_to(victim)
    script = write_program(tmp_path, "launch(2)\n")
    proc = launchtrace("run", "--out", str(link), str(script), cwd=tmp_path)
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    # LAUNCHTRACE_FILE (what children and library users get): the program runs, nothing goes through the link
    plain = launchtrace("run", str(script), cwd=tmp_path, LAUNCHTRACE_FILE=str(link))
    assert plain.returncode == 0 and "symbolic link" in plain.stderr
    assert victim.read_text() == ""


def test_collect_refuses_a_link_and_a_file_of_another_user(tmp_path: Path) -> None:
    victim = tmp_path / "root-owned.jsonl"
    victim.write_text("")
    link = tmp_path / "launchtrace-collect.jsonl"
    link.symlink_to(victim)
    proc = launchtrace("collect", "--grpc", "0", "--http", "0", "--out", str(link), "--max-spans", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "symbolic link" in proc.stderr
    if os.geteuid() != 0:  # only root can give a file away; as another user the owner check is the same code
        return
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_text("")
    os.chown(theirs, 65534, 65534)
    proc = launchtrace("collect", "--grpc", "0", "--http", "0", "--out", str(theirs), "--max-spans", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "belongs to another user" in proc.stderr
    assert theirs.read_text() == ""


# ------------------------------------------------------------------------------------ 2: stdout and stderr
def test_a_program_that_closes_stdout_and_stderr_keeps_its_exit_code(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(2)\nprint('hi')\nsys.stdout.close()\nsys.stderr.close()\n")
    out = tmp_path / "s.jsonl"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path)
    bare = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env(), capture_output=True, text=True)
    assert bare.returncode == 0 and proc.returncode == 0, proc.stderr
    assert "launchtrace: 2 spans" in proc.stderr or launches_in(out) == 2


def test_a_program_that_reuses_fd_2_gets_nothing_of_ours_in_its_file(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    script = write_program(
        tmp_path,
        f"""
        launch(2)
        os.close(2)
        fd = os.open({str(data)!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        assert fd == 2
        os.write(2, b"DATA\\n")
        """,
    )
    out = tmp_path / "s.jsonl"
    # a bad setting read at exit: its warning, like the closing line, goes to the stderr run started with
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path, LAUNCHTRACE_EXIT_TIMEOUT="x")
    assert proc.returncode == 0
    assert data.read_bytes() == b"DATA\n"
    assert "launchtrace:" in proc.stderr and launches_in(out) == 2
    assert "ignoring LAUNCHTRACE_EXIT_TIMEOUT='x'" in proc.stderr


# --------------------------------------------------------------------------------------------- 6: SIGINT
def test_ctrl_c_ends_the_run_by_sigint_like_bare_python_and_keeps_the_spans(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(5)\nprint('before', end='')\nos.kill(os.getpid(), signal.SIGINT)\n")
    script.write_text("import signal\n" + script.read_text())
    bare = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env(), capture_output=True, text=True)
    out = tmp_path / "s.jsonl"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path)
    assert bare.returncode == -signal.SIGINT
    assert proc.returncode == -signal.SIGINT, proc.stderr
    assert proc.stdout.splitlines()[-1] == bare.stdout.splitlines()[-1] == "before"  # buffered output kept
    assert "KeyboardInterrupt" in proc.stderr and launches_in(out) == 5


# --------------------------------------------------------------------------------- 7: sys.exit(0) in a scope
@pytest.mark.parametrize(("code", "error"), [("0", False), ("None", False), ("3", True)])
def test_sys_exit_zero_inside_a_scope_is_not_an_error(tmp_path: Path, code: str, error: bool) -> None:
    script = write_program(
        tmp_path, f"import launchtrace\nwith launchtrace.scope('step'):\n    launch(1)\n    sys.exit({code})\n"
    )
    out = tmp_path / "s.jsonl"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == (3 if error else 0)
    scopes = [s for s in read_spans(out, check=False).spans if s.name == "step"]
    assert len(scopes) == 1
    assert (scopes[0].status_code == 2) is error, scopes[0]


# -------------------------------------------------------------------------------------- 5: SIGHUP, SIGTERM
def _default_signal_actions() -> None:
    """The child starts with SIGHUP and SIGTERM at their default actions, whatever the test run inherited: under
    ``nohup`` SIGHUP is ignored, a child inherits that, and launchtrace rightly leaves an ignored signal ignored."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _started(tmp_path: Path, n: int, **extra: str) -> tuple[subprocess.Popen, Path]:
    script = write_program(tmp_path, f"launch({n})\nprint('ready', flush=True)\ntime.sleep(120)\n")
    out = tmp_path / "s.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "run", "--out", str(out), str(script)],
        cwd=tmp_path,
        env=env(LAUNCHTRACE_EXPORT_INTERVAL="600", **extra),  # nothing written before the signal
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signal_actions,
    )
    wait_ready(proc)
    return proc, out


@pytest.mark.parametrize("signame", ["SIGHUP", "SIGTERM"])
def test_a_closed_terminal_or_kill_flushes_then_dies_of_the_signal(tmp_path: Path, signame: str) -> None:
    proc, out = _started(tmp_path, 500)
    assert launches_in(out) == 0
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -getattr(signal, signame)
    assert launches_in(out) == 500 and f"{signame}: " in err


def test_a_second_sigterm_during_the_flush_lets_the_write_finish(tmp_path: Path) -> None:
    n = 20_000
    proc, out = _started(tmp_path, n, LAUNCHTRACE_FOLD="off", LAUNCHTRACE_EXIT_TIMEOUT="60")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)  # the flush of 20,000 launches is under way (about a second on this machine)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM
    assert launches_in(out) == n


# ------------------------------------------------------------------------------------------------ 8: exec
def test_exec_right_after_launches_keeps_them(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(7)\nos.execv(sys.executable, [sys.executable, '-c', 'print(42)'])\n")
    out = tmp_path / "s.jsonl"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path, LAUNCHTRACE_EXPORT_INTERVAL="600")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("42")
    assert launches_in(out) == 7


def test_a_failed_exec_leaves_the_export_running(tmp_path: Path) -> None:
    script = write_program(
        tmp_path,
        "launch(2)\ntry:\n    os.execv('/nonexistent/x', ['x'])\nexcept OSError:\n    pass\nlaunch(3)\n",
    )
    out = tmp_path / "s.jsonl"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert launches_in(out) == 5


# ----------------------------------------------------------------------------------- 3, 22: bounded exit
def test_threads_still_launching_at_exit_are_cut_and_counted(tmp_path: Path) -> None:
    script = write_program(
        tmp_path,
        """
        import threading
        def forever():
            while True:
                launch(10)
        for _ in range(2):
            threading.Thread(target=forever, daemon=True).start()
        time.sleep(1.0)
        print("exiting", flush=True)
        """,
    )
    out = tmp_path / "s.jsonl"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path, LAUNCHTRACE_EXIT_TIMEOUT="1")
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("launchtrace: ")][-1]
    written = int(line.split()[1])
    dropped = int(line.rsplit("(", 1)[1].split(",")[-1].split()[0])
    assert written == len(read_spans(out, check=False).spans) and launches_in(out) > 0
    assert dropped > 0  # threads launching after the exit flush began: counted, not waited for


def test_an_unreachable_endpoint_is_given_up_after_the_exit_timeout_and_said_once(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = write_program(tmp_path, "launch(4)\nprint('done', flush=True)\n")
    proc = launchtrace(
        "run",
        str(script),
        cwd=tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        LAUNCHTRACE_EXIT_TIMEOUT="1",
    )
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "done"
    assert proc.stderr.count("did not finish within 1.0 s") == 1, proc.stderr
    summary = [x for x in proc.stderr.splitlines() if x.startswith("launchtrace: 0 spans -> OTLP")]
    assert len(summary) == 1 and int(summary[0].rsplit(",", 1)[1].split()[0]) >= 4  # the 4 launches, Warp's fills


def test_a_bad_exit_timeout_warns_and_uses_the_default(tmp_path: Path) -> None:
    script = write_program(tmp_path, "launch(1)\n")
    proc = launchtrace(
        "run", "--out", str(tmp_path / "s.jsonl"), str(script), cwd=tmp_path, LAUNCHTRACE_EXIT_TIMEOUT="x"
    )
    assert proc.returncode == 0 and "ignoring LAUNCHTRACE_EXIT_TIMEOUT='x'" in proc.stderr


# --------------------------------------------------------------------------------- 4: a malformed endpoint
@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_a_malformed_endpoint_warns_once_and_the_program_runs(tmp_path: Path, variable: str) -> None:
    script = write_program(tmp_path, "launch(2)\nprint('ran', flush=True)\n")
    proc = launchtrace("run", str(script), cwd=tmp_path, **{variable: "http://[::1"})
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "ran"
    assert proc.stderr.count(f"ignoring {variable}='http://[::1'") == 1
    files = list(tmp_path.glob("launchtrace-*.jsonl"))  # fell back to the file sink
    assert len(files) == 1 and launches_in(files[0]) == 2
    lib = tmp_path / "lib.py"
    lib.write_text("import launchtrace\nlaunchtrace.start_export()\nprint('ok')\n")
    library = subprocess.run(
        [sys.executable, str(lib)], cwd=tmp_path, env=env(**{variable: "http://[::1"}), capture_output=True, text=True
    )
    assert library.returncode == 0 and library.stdout.splitlines()[-1] == "ok", library.stderr


# -------------------------------------------------------------------- 10: children of other Python versions
def _other_pythons() -> list[str]:
    """Interpreters launchtrace does not support that are installed here (pyenv's, or on PATH)."""
    import shutil

    found = []
    for version, name in (("2.7", "python2.7"), ("3.6", "python3.6")):
        candidates = [shutil.which(name) or ""]
        candidates += sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{version}.*/bin/{name}"))
        for c in candidates:
            if c and subprocess.run([c, "-c", "pass"], capture_output=True).returncode == 0:
                found.append(c)
                break
    return found


@pytest.mark.parametrize("python", [sys.executable, *_other_pythons()])
def test_children_of_any_python_run_clean_and_keep_their_own_sitecustomize(tmp_path: Path, python: str) -> None:
    """A child of an unsupported Python (2.7, 3.6, where installed) gets nothing from launchtrace and no error;
    every child still runs the environment's own ``sitecustomize`` that launchtrace's folder hides."""
    own = tmp_path / "site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import sys\nsys.stdout.write('OWN SITECUSTOMIZE\\n')\n")
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys\n"
        f"out = subprocess.run([{python!r}, '-c', 'print(42)'], capture_output=True, universal_newlines=True)\n"
        "print(repr(out.stdout), repr(out.stderr), out.returncode)\n"
    )
    proc = launchtrace("run", "--out", str(tmp_path / "s.jsonl"), str(script), cwd=tmp_path, PYTHONPATH=str(own))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "'OWN SITECUSTOMIZE\\n42\\n' '' 0"


# -------------------------------------------------------------------------------- 9: spawn while importing
def test_spawned_pool_workers_start_the_export_without_an_import_race(tmp_path: Path) -> None:
    """Workers of a ``spawn`` pool import Warp (starting the export) while the parent compiles kernels; the
    worker's export thread and its main thread used to import launchtrace's modules at once."""
    script = write_program(
        tmp_path,
        """
        import multiprocessing as mp

        def work(i):
            launch(3)
            return i

        if __name__ == "__main__":
            pool = mp.get_context("spawn").Pool(4)
            results = pool.map_async(work, range(8))
            launch(3)
            print(sorted(results.get(120)), flush=True)
            pool.close()  # the workers leave through their finalizers (flushing), not by terminate()
            pool.join()
        """,
    )
    for attempt in range(2):
        out = tmp_path / f"s{attempt}.jsonl"
        proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "could not start the export" not in proc.stderr and "partially initialized" not in proc.stderr
        assert launches_in(out) == 3 + 8 * 3


# ------------------------------------------------------------------------------ 16: damaged baseline files
def test_baselines_that_are_not_or_are_damaged_are_one_line_exit_2(tmp_path: Path) -> None:
    from launchtrace.analysis.fleet.baseline import MAGIC, SCHEMA_VERSION
    from launchtrace.baselines import write_baseline
    from launchtrace.v1 import baseline_pb2 as pb

    script = write_program(tmp_path, "launch(2)\n")
    spans = tmp_path / "s.jsonl"
    assert launchtrace("run", "--out", str(spans), str(script), cwd=tmp_path).returncode == 0
    empty_group_by = tmp_path / "empty.pb"
    write_baseline(pb.Baseline(magic=MAGIC, schema_version=SCHEMA_VERSION), empty_group_by)
    zeros = tmp_path / "zeros.pb"
    with open(zeros, "wb") as f:
        f.truncate(300 << 20)  # 300 MB of zeros (sparse): refused from its first bytes, not read whole
    blob = tmp_path / "blob.pb"
    msg = pb.Baseline(magic=MAGIC, schema_version=SCHEMA_VERSION, group_by=["host.name"])
    write_baseline(msg, blob)
    data = blob.read_bytes()
    blob.write_bytes(data[:-26] + b"\x9a\x01" + b"\x80\x80\x40" + b"x" * (1 << 20) + data[-26:])  # field 19, 1 MiB
    for path, expected in (
        (empty_group_by, "group_by names no resource attribute"),
        (zeros, "it starts with zero bytes"),
        (blob, "fields this launchtrace does not know"),
    ):
        proc = launchtrace("alert", "--baseline", str(path), "--from", str(spans), "--quiet", cwd=tmp_path)
        assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1


# ------------------------------------------------------------------------------- 19: Markdown from a trace
def test_diff_markdown_shows_links_and_images_from_names_as_text(tmp_path: Path) -> None:
    outs = []
    for n in (2, 3):
        script = write_program(
            tmp_path,
            f"import launchtrace\nwith launchtrace.scope('[x](javascript:alert(1)) ![i](http://e/x.png)'):\n"
            f"    launch({n})\n",
            f"p{n}.py",
        )
        outs.append(tmp_path / f"s{n}.jsonl")
        assert launchtrace("run", "--out", str(outs[-1]), str(script), cwd=tmp_path).returncode == 0
    proc = launchtrace("diff", str(outs[0]), str(outs[1]), "--format", "markdown", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    md = proc.stdout
    assert "\\[x\\](javascript:alert(1)) !\\[i\\](http://e/x.png)" in md
    assert "](" not in md.replace("\\](", "")  # no link or image can form


# ----------------------------------------------------------------------- 15: Alertmanager answering 500
class _FlakyAlertmanager:
    """A loopback HTTP server standing in for an Alertmanager that fails: a real Alertmanager cannot be made to
    answer 500 on demand. It answers ``failures`` POSTs with 500, then 200, and records each POST."""

    def __init__(self, failures: int, status: int = 500) -> None:
        import http.server
        import threading

        self.posts = 0
        outer = self
        fail_with = status

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.posts += 1
                status = fail_with if outer.posts <= failures else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if status != 200 else b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def firing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A baseline of 2 launches per step and a window of 3: alerts fire."""
    tmp = tmp_path_factory.mktemp("alert")
    paths = []
    for n in (2, 3):
        script = write_program(
            tmp,
            f"import launchtrace\nfor _ in range(5):\n    with launchtrace.scope('step'):\n        launch({n})\n",
            f"p{n}.py",
        )
        paths.append(tmp / f"s{n}.jsonl")
        attrs = "host.name=h1,service.version=1"
        assert (
            launchtrace("run", "--out", str(paths[-1]), str(script), cwd=tmp, OTEL_RESOURCE_ATTRIBUTES=attrs).returncode
            == 0
        )
    base = tmp / "base.pb"
    assert (
        launchtrace("baseline", "build", "--from", str(paths[0]), "--out", str(base), "--quiet", cwd=tmp).returncode
        == 0
    )
    return base, paths[1]


@pytest.mark.parametrize(
    ("failures", "status", "retries", "code", "posts"),
    [(2, 500, 3, 1, 3), (9, 500, 2, 3, 3), (1, 500, 0, 3, 1), (9, 400, 3, 3, 1)],
)
def test_alertmanager_failures_are_retried_and_fired_stays_in_the_exit_code(
    firing: tuple[Path, Path], tmp_path: Path, failures: int, status: int, retries: int, code: int, posts: int
) -> None:
    """5xx is retried with backoff; a 4xx is not (no retry changes it); either way "fired" stays visible: exit 3."""
    base, window = firing
    am = _FlakyAlertmanager(failures, status)
    try:
        proc = launchtrace(
            "alert", "--baseline", str(base), "--from", str(window), "--quiet", "--alertmanager", am.url,
            "--retries", str(retries), cwd=tmp_path,
        )  # fmt: skip
    finally:
        am.close()
    assert proc.returncode == code, proc.stderr
    assert am.posts == posts
    if code == 3:
        assert f"Alertmanager answered {status}" in proc.stderr and "the alerts fired (exit 3)" in proc.stderr


# ------------------------------------------------------------------------- 21: a folder with other files
def test_a_folder_with_files_that_are_not_traces_is_read_and_they_are_named(tmp_path: Path) -> None:
    import gzip as gz

    runs = tmp_path / "runs"
    runs.mkdir()
    script = write_program(tmp_path, "import launchtrace\nwith launchtrace.scope('step'):\n    launch(2)\n")
    assert launchtrace("run", "--out", str(runs / "a.jsonl"), str(script), cwd=tmp_path).returncode == 0
    (runs / "package.json").write_text('{"name": "x", "version": 1}\n')
    (runs / "notes.txt").write_text("hello world\n")
    (runs / "old.tar.gz").write_bytes(gz.compress(b"not spans at all"))
    proc = launchtrace("summary", str(runs), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("2 traces, 4 records")  # the step, and the setup outside it
    assert "notes.txt: skipped, not a trace file (text starting 'hello world')" in proc.stderr
    assert "package.json: skipped, not a trace file (JSON without spans" in proc.stderr
    assert "old.tar.gz: skipped, not a trace file (gzip of text starting" in proc.stderr


# ------------------------------------------------------------------------ 13, 14: collect on a full disk
def _otlp_json(n: int, seed: int) -> bytes:
    import json

    spans = [
        {
            "traceId": f"{seed + 1:016x}{i + 1:016x}",
            "spanId": f"{seed + 1:08x}{i + 1:08x}",
            "name": "launch " + "x" * 200,
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
        }
        for i in range(n)
    ]
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}).encode()


def _start_collect(tmp_path: Path, out: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchtrace", "collect", "--grpc", "off", "--http", "0", "--out", str(out)],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert "listening on http" in line, line + proc.stderr.read()  # type: ignore[union-attr]
    return proc, "http://" + line.split("listening on http ")[1].split(";")[0] + "/v1/traces"


def test_collect_on_a_full_disk_counts_only_what_is_in_the_file_and_leaves_whole_lines(tmp_path: Path) -> None:
    """A real full disk: a 256 KiB tmpfs mounted for the test (root may mount here; elsewhere /dev/full, where
    every write fails with ENOSPC, stands in for it, and the partial-line half of the check is then vacuous)."""
    import requests

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True)
    out = disk / "spans.jsonl" if mounted.returncode == 0 else Path("/dev/full")
    try:
        proc, url = _start_collect(tmp_path, out)
        accepted = refused = 0
        try:
            for seed in range(40):  # 40 x 50 spans of about 300 bytes: far more than 256 KiB
                answer = requests.post(
                    url, data=_otlp_json(50, seed), headers={"Content-Type": "application/json"}, timeout=60
                )
                if answer.status_code == 200:
                    accepted += 50
                else:
                    assert answer.status_code == 503, answer.text
                    refused += 50
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1 and refused > 0, err
        summary = next(x for x in err.splitlines() if "received" in x)
        assert f"received {accepted + refused} spans" in summary and f"wrote {accepted} to" in summary
        assert f"{refused} not written (refused to their senders)" in summary
        if out.is_file():
            data = out.read_bytes()
            assert data.endswith(b"\n") and len(read_spans(out, check=False).spans) == accepted > 0
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", str(disk)], check=True)


def test_collect_drops_a_partial_last_line_left_by_a_crash(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    whole = _otlp_json(3, 1) + b"\n"
    out.write_bytes(whole + _otlp_json(3, 2)[:100])  # the crash cut the second line
    proc, _ = _start_collect(tmp_path, out)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "ended in part of a line: dropped its last 100 bytes" in err
    assert out.read_bytes() == whole


def test_clients_that_go_away_are_one_counted_line_not_tracebacks(tmp_path: Path) -> None:
    import socket

    proc, url = _start_collect(tmp_path, tmp_path / "spans.jsonl")
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    body = _otlp_json(5, 3)
    try:
        for _ in range(30):  # each sends half its body, then resets the connection
            with socket.create_connection((host, int(port))) as s:
                s.sendall(
                    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body[: len(body) // 2]
                )
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    finally:
        time.sleep(3)  # collect has seen every reset before it is stopped, even on a loaded machine
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "Traceback" not in err and len(err.splitlines()) <= 5, err
    assert "received 0 spans in 0 requests" in err
    counted = [x for x in err.splitlines() if x.startswith("launchtrace collect: ") and " requests " in x]
    assert sum(int(x.split()[2]) for x in counted if "rejected" in x or "went away" in x) >= 30, err


# ------------------------------------------------------------------------------- caps on collect's input
def test_collect_refuses_empty_and_id_less_spans_over_protobuf_and_too_many_attributes(tmp_path: Path) -> None:
    import json

    import requests
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    proc, url = _start_collect(tmp_path, tmp_path / "spans.jsonl")
    try:
        empty = ExportTraceServiceRequest()
        spans = empty.resource_spans.add().scope_spans.add().spans
        for _ in range(1000):
            spans.add()  # empty spans: no ids at all
        no_span_id = ExportTraceServiceRequest()
        no_span_id.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, name="x")
        good = ExportTraceServiceRequest()
        good.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="x")
        proto = {"Content-Type": "application/x-protobuf"}
        answers = [
            requests.post(url, data=m.SerializeToString(), headers=proto, timeout=60) for m in (empty, no_span_id, good)
        ]
        assert [a.status_code for a in answers] == [400, 400, 200], [a.text for a in answers]
        assert "no valid traceId" in answers[0].text and "no valid spanId" in answers[1].text
        many = json.loads(_otlp_json(1, 9))
        many["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = [
            {"key": f"k{i}", "value": {"intValue": "1"}} for i in range(300_000)
        ]
        answer = requests.post(url, data=json.dumps(many), headers={"Content-Type": "application/json"}, timeout=60)
        assert answer.status_code == 413 and "300000 attributes in one request" in answer.text
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "received 1 spans in 1 requests; wrote 1" in err


# ------------------------------------------------------------------------------------ compressed span files
def test_a_gz_out_is_written_compressed_by_every_process_and_read_back_by_every_reader(tmp_path: Path) -> None:
    script = write_program(
        tmp_path,
        """
        import launchtrace
        with launchtrace.scope("step"):
            launch(5)
        pid = os.fork()
        if pid == 0:
            with launchtrace.scope("step"):
                launch(3)
            launchtrace.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        """,
    )
    out = tmp_path / "s.jsonl.gz"
    proc = launchtrace("run", "--out", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert subprocess.run(["gzip", "-t", str(out)]).returncode == 0  # members of two processes: one valid stream
    assert launches_in(out) == 8
    summary = launchtrace("summary", str(out), cwd=tmp_path)
    assert summary.returncode == 0 and summary.stdout.startswith("3 traces"), summary.stdout + summary.stderr


def test_collect_and_pull_write_gz_when_the_name_says_so(tmp_path: Path) -> None:
    import requests

    out = tmp_path / "c.jsonl.gz"
    proc, url = _start_collect(tmp_path, out)
    try:
        for seed in range(3):
            answer = requests.post(
                url, data=_otlp_json(4, seed), headers={"Content-Type": "application/json"}, timeout=60
            )
            assert answer.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert out.read_bytes()[:2] == b"\x1f\x8b" and len(read_spans(out, check=False).spans) == 12
    pulled = tmp_path / "p.jsonl.gz"
    proc = launchtrace("pull", str(out), "--out", str(pulled), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pulled.read_bytes()[:2] == b"\x1f\x8b" and len(read_spans(pulled, check=False).spans) == 12


# ------------------------------------------------------------------- 18: the same checks for every source
def test_a_backend_answer_with_a_repeated_key_reads_as_the_same_bytes_in_a_file(tmp_path: Path) -> None:
    """Jaeger's answer played by the loopback server: an api_v3 answer whose ``resourceSpans`` is given twice.
    A key given twice keeps its last value everywhere (issue 26 dropped the compiled-only warning), so the file
    and the backend give the same spans and the same words."""
    from loopback_http import Answer, Backend

    trace = "5b8efff798038103d269b633813fc60c"
    one = '{"scopeSpans": [{"spans": [{"traceId": "' + trace + '", "spanId": "eee19b7ec3c1b174"}]}]}'
    body = ('{"result": {"resourceSpans": [' + one + '], "resourceSpans": [' + one + "]}}").encode()
    saved = tmp_path / "answer.json"
    saved.write_bytes(body)
    from_file = launchtrace("pull", str(saved), "--out", str(tmp_path / "f.jsonl"), cwd=tmp_path)
    with Backend() as b:
        b.routes[f"/api/v3/traces/{trace}"] = Answer(200, body)
        from_jaeger = launchtrace(
            "pull", f"jaeger+{b.url}", "--trace-id", trace, "--out", str(tmp_path / "j.jsonl"), cwd=tmp_path
        )
    assert from_file.returncode == from_jaeger.returncode == 0, from_file.stderr + from_jaeger.stderr
    assert len(read_spans(tmp_path / "f.jsonl", check=False).spans) == 1
    assert len(read_spans(tmp_path / "j.jsonl", check=False).spans) == 1


# ----------------------------------------------------------------- caps on what readers build for non-spans
def test_a_line_of_ten_million_empty_spans_is_refused_before_it_is_built(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join(["{}"] * 10_000_000) + "]}]}]}\n")
    for cmd in (["summary", str(path)], ["baseline", "build", "--from", str(path), "--out", str(tmp_path / "b.pb")]):
        proc = launchtrace(*cmd, cwd=tmp_path)
        assert proc.returncode == 2 and "10000000 empty objects in one line: not spans, skipped" in proc.stderr


@pytest.mark.parametrize("decoder", ["json_codec", "proto_decode"])
def test_a_long_run_of_spans_without_ids_is_cut_short_in_one_problem(decoder: str) -> None:
    import orjson

    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}] * 30_000}]}]}
    if decoder == "json_codec":
        from launchtrace.otlp.json_codec import decode_traces_data

        spans, problems = decode_traces_data(orjson.loads(orjson.dumps(doc)))
    else:
        from google.protobuf import json_format
        from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

        from launchtrace.otlp.proto_decode import spans_from_message

        spans, problems = spans_from_message(json_format.ParseDict(doc, TracesData()))
    assert spans == [] and len(problems) == 10_001
    assert "20000 more spans skipped unread after 10000 in a row" in str(problems[-1])
    assert sum(p.skipped for p in problems) == 30_000  # every span still counted as skipped


# ------------------------------------------------------------------- 17: broken span structure, one behaviour
def _mutated(src: Path, dst: Path, change) -> Path:
    import json

    lines = []
    for line in src.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    change(span)
        lines.append(json.dumps(doc))
    dst.write_text("\n".join(lines) + "\n")
    return dst


def test_baseline_build_reports_broken_structure_as_every_reader_does(tmp_path: Path) -> None:
    script = write_program(
        tmp_path, "import launchtrace\nfor _ in range(3):\n    with launchtrace.scope('step'):\n        launch(2)\n"
    )
    good = tmp_path / "good.jsonl"
    assert launchtrace("run", "--out", str(good), str(script), cwd=tmp_path).returncode == 0
    own_parent = _mutated(good, tmp_path / "own.jsonl", lambda s: s.__setitem__("parentSpanId", s["spanId"]))
    same_ids = _mutated(good, tmp_path / "same.jsonl", lambda s: s.__setitem__("spanId", "00000000000000aa"))
    base = tmp_path / "b.pb"
    proc = launchtrace("baseline", "build", "--from", str(own_parent), "--out", str(base), "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "leads back to it" in proc.stderr and not base.exists()
    summary = launchtrace("summary", str(own_parent), cwd=tmp_path)
    assert summary.returncode == 2 and "leads back to it" in summary.stderr  # the same verdict
    proc = launchtrace("baseline", "build", "--from", str(same_ids), "--out", str(base), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0 and "duplicate span id, second copy skipped" in proc.stderr
    summary = launchtrace("summary", str(same_ids), cwd=tmp_path)
    assert "duplicate span id, second copy skipped" in summary.stderr
