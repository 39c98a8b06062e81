#!/usr/bin/env bash
# The GPU checks, in one go, on a bare machine with one NVIDIA GPU: installs the project, then runs the
# gpu-marked tests, the capture and export benchmarks on cuda:0, and device timing against the host window,
# printing every figure. Each step has its own time limit; the limits add up to 7 min 55 s (install 150 s,
# Warp 60, tests 90, bench_capture 45, bench_export 100, device timing 30), so it ends within 8 minutes.
#
#   bash scripts/gpu_check.sh            # from anywhere; GPU_CHECK_SKIP_INSTALL=1 skips the pip install
#
# Exit status: 0 every step passed; 1 a step failed (named in the summary); 2 no usable CUDA device.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
START=$(date +%s)
FAILED=()

say() { printf '\n== %s (%ss elapsed)\n' "$1" "$(( $(date +%s) - START ))"; }

step() {  # step NAME LIMIT_S COMMAND...: run it under a time limit, remember a failure
    local name=$1 limit=$2
    shift 2
    say "$name (limit ${limit}s)"
    timeout --kill-after=2 "$limit" "$@"
    local status=$?
    if [ "$status" -ne 0 ]; then
        [ "$status" -eq 124 ] && echo "gpu_check: $name ran past ${limit}s"
        FAILED+=("$name (exit $status)")
    fi
    return 0
}

say "GPU"
if ! command -v nvidia-smi > /dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi not found); nothing run" >&2
    exit 2
fi
if ! nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv; then
    echo "gpu_check: nvidia-smi found no usable GPU; nothing run" >&2
    exit 2
fi

if [ "${GPU_CHECK_SKIP_INSTALL:-0}" != "1" ]; then
    say "install (pip install -e '.[test]')"
    if ! timeout 150 "$PYTHON" -m pip install --quiet -e '.[test]'; then
        echo "gpu_check: pip install -e '.[test]' failed" >&2
        exit 1
    fi
fi

say "Warp on cuda:0"
if ! timeout 60 "$PYTHON" -c '
import sys
import warp as wp
wp.init()
if not wp.is_cuda_available():
    sys.exit("gpu_check: Warp sees no CUDA device (driver or toolkit missing?); nothing run")
d = wp.get_device("cuda:0")
print(f"warp {wp.__version__}: cuda:0 is {d.name}, {d.total_memory / 2**30:.1f} GiB, sm_{d.arch}")
'; then
    exit 2
fi

# The gpu-marked tests skip themselves without CUDA; here CUDA is there, so a skip is a failure too.
step "pytest -m gpu" 90 bash -c "set -o pipefail; '$PYTHON' -m pytest -m gpu -q -rs -p no:cacheprovider 2>&1 | tee /tmp/gpu_check_pytest.txt; status=\$?; if grep -q ' skipped' /tmp/gpu_check_pytest.txt; then echo 'gpu_check: gpu tests were skipped'; exit 1; fi; exit \$status"
step "bench_capture.py --device cuda:0" 45 "$PYTHON" benchmarks/bench_capture.py --device cuda:0 --launches 20000 --pairs 5
step "bench_export.py --device cuda:0" 100 "$PYTHON" benchmarks/bench_export.py --device cuda:0 --launches 3000 --pairs 5 --otlp-spans 20000 --sdk-spans 2000
step "device timing against the host window" 30 "$PYTHON" scripts/gpu_device_timing.py --device cuda:0 --launches 20

say "summary"
if [ "${#FAILED[@]}" -ne 0 ]; then
    printf 'gpu_check: FAILED: %s\n' "${FAILED[@]}"
    exit 1
fi
echo "gpu_check: all steps passed in $(( $(date +%s) - START ))s"
