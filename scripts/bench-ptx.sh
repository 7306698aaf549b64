#!/usr/bin/env bash
# Benchmark: fencelint versus ptxas on the same real PTX, side by side in one run.
#
# Usage: scripts/bench-ptx.sh [PTX_FILE...]
# Default input: the largest PTX embedded in NCCL (extracted by scripts/vendor-ptx-corpus.sh
# into .corpus/nccl/ptx). Prints medians of repeated runs, the ratio ptxas/fencelint and the
# linter's throughput. ptxas compiles for the architecture the PTX file targets (its `.target`):
# a PTX file can only be compiled for its own target or newer.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

runs_lint=${RUNS_LINT:-7}
runs_ptxas=${RUNS_PTXAS:-3}

bin_dir="${FENCELINT_CUDA_BIN:-}"
if [ -z "$bin_dir" ]; then
    bin_dir="$(scripts/install-cuda-tools.sh | tail -n 1)"
fi
ptxas="$bin_dir/ptxas"

if [ $# -gt 0 ]; then
    files=("$@")
else
    if [ ! -d .corpus/nccl/ptx ]; then
        scripts/vendor-ptx-corpus.sh >&2
    fi
    files=("$(ls -S .corpus/nccl/ptx/*.ptx | head -n 1)")
fi

cargo build -q --release -p fencelint-cli
fencelint="$repo/target/release/fencelint"

python3 - "$fencelint" "$ptxas" "$runs_lint" "$runs_ptxas" "${files[@]}" <<'PY'
import os, re, statistics, subprocess, sys, tempfile, time

fencelint, ptxas, runs_lint, runs_ptxas, *files = sys.argv[1:]
runs_lint, runs_ptxas = int(runs_lint), int(runs_ptxas)

def timed(cmd, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if result.returncode not in (0, 1):
            sys.exit(f"{cmd[0]} failed ({result.returncode}): {result.stderr.decode()[:400]}")
    return statistics.median(times)

print(f"{'file':<40} {'MB':>6} {'fencelint s':>12} {'ptxas s':>9} {'ratio':>7} {'MB/s':>8}")
for path in files:
    size = os.path.getsize(path) / 1e6
    with open(path, errors="replace") as f:
        head = f.read(65536)
    m = re.search(r"^\s*\.target\s+(sm_\w+)", head, re.M)
    arch = m.group(1) if m else "sm_90a"
    lint = timed([fencelint, "check", "--quiet", "--format", "short", path], runs_lint)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.cubin")
        compile_time = timed([ptxas, f"-arch={arch}", path, "-o", out], runs_ptxas)
    print(f"{os.path.basename(path):<40} {size:>6.2f} {lint:>12.4f} {compile_time:>9.2f} "
          f"{compile_time / lint:>6.0f}x {size / lint:>8.1f}")
print(f"(medians of {runs_lint} fencelint runs and {runs_ptxas} ptxas runs; ptxas -arch=<the file's .target>)")
PY
