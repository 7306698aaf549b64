#!/usr/bin/env bash
# Regenerates the committed PTX test data from the .cu sources beside this script with nvcc
# (CUDA 13.5 from PyPI: scripts/install-cuda-tools.sh prints the directory to pass).
# Usage: tests/data/build.sh [CUDA_BIN_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -ge 1 ]; then
    nvcc="$1/nvcc"
elif [ -n "${FENCELINT_CUDA_BIN:-}" ]; then
    nvcc="$FENCELINT_CUDA_BIN/nvcc"
else
    nvcc="$(command -v nvcc || true)"
fi
[ -x "$nvcc" ] || { echo "build.sh: nvcc not found; pass its directory or set FENCELINT_CUDA_BIN" >&2; exit 2; }
cd "$here"
# Make `.file` paths independent of where the checkout and the toolkit live.
relativize() {
    sed -E -i -e "s#\"$here/#\"#" -e 's#"[^"]*/nvidia/cu[0-9]+/(bin/\.\./)?#"cuda/#' "$@"
}
"$nvcc" -ptx -lineinfo -arch=sm_90a -o mbarrier_tma.ptx mbarrier_tma.cu
"$nvcc" -ptx -lineinfo -arch=sm_100a -o tcgen05.ptx tcgen05.cu
"$nvcc" -ptx -lineinfo -arch=sm_90a -rdc=true -o calls_and_tables.ptx calls_and_tables.cu
"$nvcc" -ptx -lineinfo -arch=sm_90a -o atomics_poll.ptx atomics_poll.cu
# Full debug information: `.section .debug_*` blocks with data directives and labels.
"$nvcc" -ptx -G -arch=sm_90a -o atomics_poll_debug.ptx atomics_poll.cu
relativize ./*.ptx
