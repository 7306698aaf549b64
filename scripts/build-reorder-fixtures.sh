#!/usr/bin/env bash
# Build the reorder-audit fixtures: the PTX of fixtures/kernels/reorder_*.cu,
# compiled once by nvcc (13.5), then assembled by two ptxas versions, written
# to fixtures/reorder/. Deterministic: running it twice gives identical files.
#
# Usage: scripts/build-reorder-fixtures.sh
#
# Toolchains: $FENCELINT_CUDA_BIN (nvcc, ptxas, nvdisasm, cuobjdump of 13.5)
# and $FENCELINT_CUDA_BIN_OLD (ptxas of 13.2.78), each defaulting to the
# directory printed by scripts/install-cuda-tools.sh (--version 13.2.78 for the
# old one).
#
# For every fixtures/kernels/reorder_<name>.cu it writes fixtures/reorder/:
#   reorder_<name>.ptx                        nvcc -O3 -ptx -lineinfo -arch=sm_90a,
#                                             .file paths made relative and
#                                             `.version` lowered to 9.2 so that
#                                             both ptxas versions read the same PTX
#   reorder_<name>.ptxas-<v>.cubin            ptxas -O3 -arch=sm_90a -lineinfo
#   reorder_<name>.ptxas-<v>.nvdisasm-gp.sass nvdisasm -c -gp (PTX line markers)
#   TOOLCHAIN.txt                             the versions used
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

new_bin="${FENCELINT_CUDA_BIN:-$(scripts/install-cuda-tools.sh | tail -n 1)}"
old_bin="${FENCELINT_CUDA_BIN_OLD:-$(scripts/install-cuda-tools.sh --version 13.2.78 | tail -n 1)}"
for tool in nvcc ptxas nvdisasm; do
    [ -x "$new_bin/$tool" ] || { echo "build-reorder-fixtures: $tool not found in $new_bin" >&2; exit 2; }
done
[ -x "$old_bin/ptxas" ] || { echo "build-reorder-fixtures: ptxas not found in $old_bin" >&2; exit 2; }

ptxas_version() { # bin -> 13.2.78
    "$1/ptxas" --version | sed -n 's/.*, V\([0-9.]*\).*/\1/p'
}
new_v="$(ptxas_version "$new_bin")"
old_v="$(ptxas_version "$old_bin")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$work/reorder"
mkdir "$out"
repo_real="$(pwd -P)"
bin_real="$(cd "$new_bin" && pwd -P)"
root_real="$(cd "$new_bin/.." && pwd -P)"

for src in fixtures/kernels/reorder_*.cu; do
    stem="$(basename "$src" .cu)"
    echo "build-reorder-fixtures: $src" >&2
    "$new_bin/nvcc" -O3 -ptx -lineinfo -arch=sm_90a "$src" -o "$work/$stem.raw.ptx"
    # Relative .file paths (the checkout and the toolchain's include directory)
    # and a PTX ISA version that ptxas 13.2 reads (9.2; the kernels use nothing newer).
    awk -v repo1="$repo/" -v repo2="$repo_real/" \
        -v inc1="$new_bin/../include/" -v inc2="$bin_real/../include/" -v inc3="$root_real/include/" '
        function swap(s, from, to,    i) {
            i = index(s, from)
            if (i > 0) s = substr(s, 1, i - 1) to substr(s, i + length(from))
            return s
        }
        /^[ \t]*\.file[ \t]/ {
            $0 = swap($0, "\"" inc1, "\"cuda/include/")
            $0 = swap($0, "\"" inc2, "\"cuda/include/")
            $0 = swap($0, "\"" inc3, "\"cuda/include/")
            $0 = swap($0, "\"" repo1, "\"")
            $0 = swap($0, "\"" repo2, "\"")
        }
        /^\.version[ \t]/ { $0 = ".version 9.2" }
        { print }' "$work/$stem.raw.ptx" >"$out/$stem.ptx"
    for pair in "$old_v:$old_bin" "$new_v:$new_bin"; do
        v="${pair%%:*}"
        bin="${pair#*:}"
        (
            cd "$out"
            "$bin/ptxas" -O3 -arch=sm_90a -lineinfo "$stem.ptx" -o "$stem.ptxas-$v.cubin"
            "$new_bin/nvdisasm" -c -gp "$stem.ptxas-$v.cubin" >"$stem.ptxas-$v.nvdisasm-gp.sass"
        )
    done
done

if grep -rl --binary-files=text -e "$repo/" -e "$repo_real/" -e "$root_real" -e "$work" "$out" >&2; then
    echo "build-reorder-fixtures: absolute paths leaked into the files above" >&2
    exit 1
fi

{
    echo "nvcc (PTX):      $("$new_bin/nvcc" --version | sed -n 's/.*, V\([0-9.]*\).*/\1/p')"
    echo "ptxas (new):     $new_v"
    echo "ptxas (old):     $old_v"
    echo "nvdisasm:        $("$new_bin/nvdisasm" --version | sed -n 's/.*, V\([0-9.]*\).*/\1/p')"
    echo "flags (PTX):     nvcc -O3 -ptx -lineinfo -arch=sm_90a; .version lowered to 9.2"
    echo "flags (cubin):   ptxas -O3 -arch=sm_90a -lineinfo"
    echo "flags (SASS):    nvdisasm -c -gp"
} >"$out/TOOLCHAIN.txt"

mkdir -p fixtures/reorder
rm -f fixtures/reorder/reorder_*
cp "$out"/* fixtures/reorder/
echo "build-reorder-fixtures: wrote $(ls "$out" | wc -l) files to fixtures/reorder/" >&2
