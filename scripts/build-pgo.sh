#!/usr/bin/env bash
# A profile-guided release build of `fencelint`, trained on the project's own compiled fixtures.
#
# Usage: scripts/build-pgo.sh
#
# 1. builds an instrumented release binary (`-Cprofile-generate`) in target-pgo/gen;
# 2. runs it over fixtures/compiled/: every listing and PTX file in one run (JSON output; the
#    binaries there are left out, they would need NVIDIA's tools), and the cuobjdump and the nvdisasm listings each concatenated four times into
#    one file of 8 MiB or more, so that the memory-mapped path for large listings is trained too;
# 3. merges the profiles with llvm-profdata (from `rustup component add llvm-tools`, or
#    $LLVM_PROFDATA) and builds target-pgo/release/fencelint with `-Cprofile-use`.
#
# The last line printed is the path of the binary; `FENCELINT=<path> scripts/bench-sass.py ...`
# measures it. The behaviour is that of a plain release build (the profile only steers code
# layout and inlining); docs/performance.md says which measurements used it.
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$repo/target-pgo"
work="$out/train"

profdata="${LLVM_PROFDATA:-}"
if [ -z "$profdata" ]; then
    sysroot="$(rustc --print sysroot)"
    host="$(rustc -vV | sed -n 's/^host: //p')"
    profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
    if [ ! -x "$profdata" ] && command -v rustup > /dev/null; then
        rustup component add llvm-tools >&2
    fi
fi
[ -x "$profdata" ] || {
    echo "build-pgo: llvm-profdata not found (rustup component add llvm-tools, or set LLVM_PROFDATA)" >&2
    exit 2
}

rm -rf "$work"
mkdir -p "$work/profiles"

echo "build-pgo: instrumented build" >&2
RUSTFLAGS="-Cprofile-generate=$work/profiles" CARGO_TARGET_DIR="$out/gen" \
    cargo build --release -q -p fencelint-cli
gen="$out/gen/release/fencelint"

echo "build-pgo: training on fixtures/compiled" >&2
for flavour in cuobjdump nvdisasm; do
    for _ in 1 2 3 4; do
        cat fixtures/compiled/*/*."$flavour".sass
    done > "$work/all.$flavour.sass"
done
export LLVM_PROFILE_FILE="$work/profiles/%m_%p.profraw"
# Exit 1 means findings, which the fixtures have by design; anything else is a failure.
run() {
    local status=0
    "$gen" check --quiet "$@" > /dev/null || status=$?
    [ "$status" -le 1 ] || { echo "build-pgo: training run failed ($status): $*" >&2; exit 2; }
}
run --format short "$work/all.cuobjdump.sass"
run --format short "$work/all.nvdisasm.sass"
run --format json fixtures/compiled/*/*.ptx fixtures/compiled/*/*.sass fixtures/compiled/*/*.json
unset LLVM_PROFILE_FILE

"$profdata" merge -o "$work/fencelint.profdata" "$work/profiles"

echo "build-pgo: optimized build" >&2
RUSTFLAGS="-Cprofile-use=$work/fencelint.profdata" CARGO_TARGET_DIR="$out" \
    cargo build --release -q -p fencelint-cli
rm -f "$work"/all.*.sass
echo "$out/release/fencelint"
