"""Generate the Python code of launchtrace's own protobuf schemas (``proto/launchtrace/v1/*.proto``).

The code goes to ``src/launchtrace/v1/*_pb2.py`` and is committed; ``tests/test_proto_schema.py`` regenerates
it and checks that the files are identical. The generator is pinned: grpcio-tools 1.63.2 bundles protoc 26.1,
whose code ("Protobuf Python Version: 5.26.1", as opentelemetry-proto's) loads on every protobuf runtime
from 5.26.1 on (7.x included). grpcio-tools 1.63.2 itself wants protobuf < 6, so it is installed beside the
project, not into it: ``pip install --no-deps --target .protoc grpcio-tools==1.63.2`` (only its bundled
protoc runs; nothing of it is imported by launchtrace).

Usage::

    python scripts/gen_proto.py                 # writes src/launchtrace/v1/
    python scripts/gen_proto.py --out /tmp/gen  # writes elsewhere (the test's check)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "src"
GRPC_TOOLS_VERSION = "1.63.2"
TOOLS_DIR_ENV = "LAUNCHTRACE_GRPC_TOOLS"
DEFAULT_TOOLS_DIR = ROOT / ".protoc"


def tools_dir() -> Path:
    """Where grpcio-tools was installed with ``--target`` (``$LAUNCHTRACE_GRPC_TOOLS`` or ``.protoc``)."""
    return Path(os.environ.get(TOOLS_DIR_ENV) or DEFAULT_TOOLS_DIR)


def installed_version(target: Path) -> str | None:
    found = sorted(target.glob("grpcio_tools-*.dist-info"))
    return found[0].name.removeprefix("grpcio_tools-").removesuffix(".dist-info") if found else None


def proto_files() -> list[Path]:
    return sorted((PROTO_DIR / "launchtrace").rglob("*.proto"))


def generate(out: Path) -> list[Path]:
    """Run the pinned protoc over every schema into ``out``; the files written, relative to ``out``."""
    target = tools_dir()
    version = installed_version(target)
    if version != GRPC_TOOLS_VERSION:
        raise SystemExit(
            f"gen_proto: grpcio-tools {GRPC_TOOLS_VERSION} is needed in {target} (found {version}): "
            f"python -m pip install --no-deps --target {target} grpcio-tools=={GRPC_TOOLS_VERSION}"
        )
    out.mkdir(parents=True, exist_ok=True)
    files = [str(p.relative_to(PROTO_DIR)) for p in proto_files()]
    env = {**os.environ, "PYTHONPATH": str(target)}
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out}", *files]
    subprocess.run(cmd, check=True, env=env, cwd=PROTO_DIR)
    return [Path(f).with_name(Path(f).stem + "_pb2.py") for f in files]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="root of the generated package tree")
    args = parser.parse_args()
    for rel in generate(args.out):
        print(args.out / rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
