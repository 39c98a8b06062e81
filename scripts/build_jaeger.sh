#!/usr/bin/env bash
# Build the real Jaeger v2 (cmd/jaeger of github.com/jaegertracing/jaeger, pinned by tools/jaeger/go.mod and
# go.sum) once, into a cache keyed by those two files, and reuse it: the live tests (tests/test_jaeger_live*.py)
# start this binary. A cold build takes minutes on 2 cores (docs/send-to-jaeger.md has the figures), a cached one
# nothing. Nothing of Jaeger's source is copied into the repository: Go fetches the modules go.sum names.
#
#   scripts/build_jaeger.sh           build if missing; print the binary's path on stdout (CI runs this)
#   scripts/build_jaeger.sh --path    only print where the binary is or would be (no Go needed)
#
# Exit 0 with the path printed; 3 when Go is missing (the live tests then skip, or fail under CI=true);
# any other non-zero when the build fails. The cache root is $LAUNCHTRACE_CACHE (default ~/.cache/launchtrace).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$here/tools/jaeger"
key="$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)"
dir="${LAUNCHTRACE_CACHE:-$HOME/.cache/launchtrace}/jaeger-$key"
binary="$dir/jaeger"

if [ "${1:-}" = "--path" ]; then
    echo "$binary"
    exit 0
fi
if [ -x "$binary" ] && "$binary" version >/dev/null 2>&1; then
    echo "$binary"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "build_jaeger: go is not installed; cannot build $binary" >&2
    exit 3
fi

mkdir -p "$dir"
tmp="$(mktemp "$dir/.jaeger.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
start=$(date +%s)
echo "build_jaeger: building github.com/jaegertracing/jaeger/cmd/jaeger (go.sum key $key) ..." >&2
(cd "$module" && CGO_ENABLED=0 go build -trimpath -o "$tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
"$tmp" version >/dev/null 2>&1
mv -f "$tmp" "$binary"  # atomic: a concurrent reader sees the old state or the whole binary
trap - EXIT
echo "build_jaeger: built in $(($(date +%s) - start)) s: $binary" >&2
echo "$binary"
