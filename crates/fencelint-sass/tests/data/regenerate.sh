#!/usr/bin/env bash
# Regenerates the compiler-output fixtures of the SASS front end from the `.cu` sources here.
#
# Needs nvcc, cuobjdump and nvdisasm (CUDA 13.5 was used for the committed files); pass their
# folder as $CUDA_BIN or put them on PATH. Cubins are built in a temporary folder and not kept.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ -n "${CUDA_BIN:-}" ]]; then PATH="$CUDA_BIN:$PATH"; fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$here"

# name:arch pairs; every source is compiled for one architecture.
builds=(sync_sm90:sm_90a cpasync_sm80:sm_80 tcgen05_sm100:sm_100a inline_sm120:sm_120)

for build in "${builds[@]}"; do
    name="${build%%:*}"
    arch="${build##*:}"
    cubin="$tmp/$name.cubin"
    # The source path is relative so that line info does not depend on the checkout location.
    nvcc -O3 -cubin -lineinfo -arch="$arch" "$name.cu" -o "$cubin"
    cuobjdump -sass "$cubin" > "$name.cuobjdump.sass"
    nvdisasm -c -g "$cubin" > "$name.nvdisasm-g.sass"
    nvdisasm -c -gp "$cubin" > "$name.nvdisasm-gp.sass"
    nvdisasm -c -hex "$cubin" > "$name.nvdisasm-hex.sass"
    nvdisasm -json "$cubin" > "$name.nvdisasm.json"
done

# -gi (inlined-at locations) and a listing without -c (all ELF sections) for one cubin.
nvcc -O3 -cubin -lineinfo -arch=sm_120 inline_sm120.cu -o "$tmp/inline.cubin"
nvdisasm -c -gi "$tmp/inline.cubin" > inline_sm120.nvdisasm-gi.sass
nvdisasm -g "$tmp/inline.cubin" > inline_sm120.nvdisasm-full.sass

# A host object with a fat binary: several cubins plus PTX, as cuobjdump prints them.
nvcc -O3 -c -lineinfo \
    -gencode arch=compute_90a,code="[sm_90a,compute_90a]" \
    -gencode arch=compute_80,code=sm_80 \
    cpasync_sm80.cu -o "$tmp/fat.o"
cuobjdump -sass "$tmp/fat.o" > fatbin_multi.cuobjdump.sass
