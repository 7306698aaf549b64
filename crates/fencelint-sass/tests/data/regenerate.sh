#!/usr/bin/env bash
# Regenerates the compiler-output fixtures of the SASS front end from the `.cu` sources here.
#
# Needs nvcc, cuobjdump and nvdisasm (CUDA 13.5 made the committed files); pass their folder as
# $CUDA_BIN or put them on PATH. Cubins are built in a temporary folder and not kept.
#
# Each source is compiled to PTX first; the `.file` paths of the PTX are made relative (the
# source becomes `x.cu`, the toolkit's headers `cuda/include/...`) and the cubin is assembled
# from that PTX, so no absolute path of this machine reaches the listings. The host object with
# a fat binary is built without line info for the same reason.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ -n "${CUDA_BIN:-}" ]]; then PATH="$CUDA_BIN:$PATH"; fi
nvcc_bin="$(dirname "$(command -v nvcc)")"
include_dir="$(cd "$nvcc_bin/../include" && pwd -P)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$here"

# Rewrites the `.file` directives of PTX file $1 in place.
relative_files() {
    local ptx="$1"
    local prefix
    prefix="$(cd "$here" && pwd -P)"
    sed -i -E \
        -e "/^[[:space:]]*\.file/ s#\"$here/#\"#" \
        -e "/^[[:space:]]*\.file/ s#\"$prefix/#\"#" \
        -e "/^[[:space:]]*\.file/ s#\"$nvcc_bin/\.\./include/#\"cuda/include/#" \
        -e "/^[[:space:]]*\.file/ s#\"$include_dir/#\"cuda/include/#" \
        "$ptx"
}

# Builds $tmp/$1.cubin for architecture $2 with line info that names relative paths.
build_cubin() {
    local name="$1" arch="$2"
    nvcc -O3 -ptx -lineinfo -arch="$arch" "$name.cu" -o "$tmp/$name.ptx"
    relative_files "$tmp/$name.ptx"
    (cd "$tmp" && nvcc -O3 -cubin -lineinfo -arch="$arch" "$name.ptx" -o "$name.cubin")
}

# name:arch pairs; every source is compiled for one architecture.
builds=(sync_sm90:sm_90a cpasync_sm80:sm_80 tcgen05_sm100:sm_100a inline_sm120:sm_120)

for build in "${builds[@]}"; do
    name="${build%%:*}"
    arch="${build##*:}"
    build_cubin "$name" "$arch"
    cubin="$tmp/$name.cubin"
    cuobjdump -sass "$cubin" > "$name.cuobjdump.sass"
    nvdisasm -c -g "$cubin" > "$name.nvdisasm-g.sass"
    nvdisasm -c -gp "$cubin" > "$name.nvdisasm-gp.sass"
    nvdisasm -c -hex "$cubin" > "$name.nvdisasm-hex.sass"
    nvdisasm -json "$cubin" > "$name.nvdisasm.json"
done

# -gi (inlined-at locations) and a listing without -c (all ELF sections) for one cubin.
nvdisasm -c -gi "$tmp/inline_sm120.cubin" > inline_sm120.nvdisasm-gi.sass
nvdisasm -g "$tmp/inline_sm120.cubin" > inline_sm120.nvdisasm-full.sass

# A host object with a fat binary: cubins for two architectures plus PTX, as cuobjdump prints
# them.
nvcc -O3 -c \
    -gencode arch=compute_90a,code="[sm_90a,compute_90a]" \
    -gencode arch=compute_80,code=sm_80 \
    cpasync_sm80.cu -o "$tmp/fat.o"
cuobjdump -sass "$tmp/fat.o" > fatbin_multi.cuobjdump.sass

if grep -l -e "$here" -e "$include_dir" -e "$tmp" -- *.sass *.json; then
    echo "regenerate.sh: absolute paths leaked into the files above" >&2
    exit 1
fi
