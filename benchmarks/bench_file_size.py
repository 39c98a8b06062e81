"""Bytes per span in the span file, plain (``.jsonl``) and compressed (``.jsonl.gz``), of one real Warp program
under ``launchtrace run`` with folding off (every launch a span): ``--steps`` steps of ``--launches`` launches of
a 2-argument kernel, each step a ``step`` scope. Docs: docs/reliability.md, "File size".

Also the compressed size of the plain file by ``gzip -6`` as one stream (what compressing afterwards gives), and
the launch spans' share of the bytes.

    python benchmarks/bench_file_size.py [--steps 200] [--launches 10]
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import textwrap

PROGRAM = """
import sys
import warp as wp
import launchtrace
wp.config.quiet = True

@wp.kernel
def twice(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = 2.0 * a[i]

a = wp.zeros(64, dtype=float)
b = wp.zeros(64, dtype=float)
for _ in range(int(sys.argv[1])):
    with launchtrace.scope("step"):
        for _ in range(int(sys.argv[2])):
            wp.launch(twice, dim=64, inputs=[a, b])
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--launches", type=int, default=10)
    args = ap.parse_args()
    from launchtrace.sources.files import read_spans

    with tempfile.TemporaryDirectory() as tmp:
        program = os.path.join(tmp, "prog.py")
        with open(program, "w") as f:
            f.write(textwrap.dedent(PROGRAM))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LAUNCHTRACE_"))}
        env["LAUNCHTRACE_FOLD"] = "off"
        sizes = {}
        for name in ("spans.jsonl", "spans.jsonl.gz"):
            out = os.path.join(tmp, name)
            cmd = [
                sys.executable,
                "-m",
                "launchtrace",
                "run",
                "--out",
                out,
                program,
                str(args.steps),
                str(args.launches),
            ]
            subprocess.run(cmd, check=True, env=env, capture_output=True)
            spans = read_spans(out, check=False).spans
            sizes[name] = (os.path.getsize(out), len(spans))
        plain, n = sizes["spans.jsonl"]
        packed, n_gz = sizes["spans.jsonl.gz"]
        with open(os.path.join(tmp, "spans.jsonl"), "rb") as f:
            afterwards = len(gzip.compress(f.read(), compresslevel=6))
        print(f"{args.steps} steps x {args.launches} launches: {n} spans ({n_gz} in the .gz run)")
        print(f"plain .jsonl:          {plain:>10,} bytes, {plain / n:7.1f} bytes/span")
        ratio = plain / packed
        print(f"sink .jsonl.gz:        {packed:>10,} bytes, {packed / n_gz:7.1f} bytes/span ({ratio:.1f}x smaller)")
        print(f"gzip -6 of the plain:  {afterwards:>10,} bytes, {afterwards / n:7.1f} bytes/span")


if __name__ == "__main__":
    main()
