#!/usr/bin/env bash
# Compile the project's own CUDA kernels (fixtures/kernels/*.cu) into every
# format fencelint reads, under fixtures/compiled/. Deterministic: running it
# twice gives byte-identical files.
#
# Usage: scripts/build-fixtures.sh
#
# Toolchain: $FENCELINT_CUDA_BIN (a directory holding nvcc, ptxas, cuobjdump,
# nvdisasm) if set, else the directory printed by scripts/install-cuda-tools.sh.
#
# For every kernel file and every architecture on its `// archs:` line it
# writes fixtures/compiled/<arch>/:
#   <stem>.ptx                 nvcc -O3 -ptx -lineinfo  (.file paths made relative)
#   <stem>.cubin               nvcc -O3 -cubin -lineinfo, from that .ptx
#   <stem>.cuobjdump.sass      cuobjdump -sass
#   <stem>.nvdisasm.sass       nvdisasm -c -g   (source lines)
#   <stem>.nvdisasm-gp.sass    nvdisasm -c -gp  (PTX lines)
#   <stem>.nvdisasm-hex.sass   nvdisasm -c -hex  (last arch on the line only)
#   <stem>.nvdisasm.json       nvdisasm -json    (last arch on the line only)
#   <stem>.nvdisasm-gi.sass    nvdisasm -c -gi  (source lines with the call sites of
#                              inlined code; kernel files with an `// extra: nvdisasm-gi`
#                              line only)
#   <stem>.rdc.ptx             nvcc -O3 -ptx -rdc=true -lineinfo, where the
#                              `__noinline__` functions are functions of their own,
#                              called by name (kernel files with an `// extra: rdc`
#                              line only; so for the next two)
#   <stem>.rdc.cubin           nvcc -O3 -cubin -rdc=true -lineinfo, from that .ptx
#   <stem>.rdc.nvdisasm.sass   nvdisasm -c -g of it
#   <stem>.rdc.cuobjdump.sass  cuobjdump -sass of it, which prints no callee names
#                              (`CALL.ABS.NOINC 0x0`: the calls-not-followed note)
#   <stem>.rdc.nvdisasm.json   nvdisasm -json of it (last arch on the line only)
# and, for binary-input tests, fixtures/compiled/multiarch/:
#   spin_poll.fatbin           nvcc -fatbin, sm_90a + sm_100a SASS, compute_100a PTX
#   spin_poll.o                nvcc -c, sm_80 + sm_120 SASS, compute_120 PTX
#   device_data.o              nvcc -c -rdc=true of kernels/objects/device_data.cu:
#                              device variables only, sm_80 + sm_90a SASS with
#                              no code section, compute_90a PTX
#   kernels.a                  ar rcD of spin_poll.o and device_data.o
#   linked.sm_80.cubin         nvlink of kernels/linked/*.cu compiled with
#                              nvcc -c -rdc=true for sm_80: two kernels that call
#                              a wait by name, with two copies of each of the
#                              compiler's division helpers (functions sharing a name)
#   linked.sm_80.nvdisasm-c.sass nvdisasm -c of it
#   consumer_a.rdc.sm_80.cubin nvcc -cubin -rdc=true of kernels/linked/consumer_a.cu
#                              alone: its kernel calls a function the cubin lacks
#   app                        an executable: kernels/objects/app.cu compiled with
#                              nvcc -c (sm_90a SASS, compute_90a PTX) and linked by
#                              the host compiler against the CUDA runtime's shared
#                              library (never run)
#   libapp.so                  the same code without `main`, as a shared library
# plus fixtures/compiled/TOOLCHAIN.txt with the tool versions.
set -euo pipefail
export LC_ALL=C

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [ -n "${FENCELINT_CUDA_BIN:-}" ]; then
    bin="$FENCELINT_CUDA_BIN"
else
    bin="$(scripts/install-cuda-tools.sh | tail -n 1)"
fi
for tool in nvcc ptxas cuobjdump nvdisasm fatbinary nvlink; do
    [ -x "$bin/$tool" ] || { echo "build-fixtures: $tool not found in $bin" >&2; exit 2; }
done
export PATH="$bin:$PATH"

# Paths that nvcc writes into .file directives and that must not leak into
# committed fixtures: the checkout, and the toolchain's include directories
# (nvcc spells the latter both as <bin>/../include and <root>/include).
bin_real="$(cd "$bin" && pwd -P)"
root_real="$(cd "$bin/.." && pwd -P)"
repo_real="$(pwd -P)"

relativize_ptx() { # in out
    local in="$1" out="$2"
    awk -v repo1="$repo/" -v repo2="$repo_real/" \
        -v inc1="$bin/../include/" -v inc2="$bin_real/../include/" \
        -v inc3="$root_real/include/" '
        function swap(s, from, to,    i) {
            i = index(s, from)
            if (i > 0) s = substr(s, 1, i - 1) to substr(s, i + length(from))
            return s
        }
        /^[ \t]*\.file[ \t]/ {
            # Toolchain first: it may live inside the checkout (.cuda-venv).
            $0 = swap($0, "\"" inc1, "\"cuda/include/")
            $0 = swap($0, "\"" inc2, "\"cuda/include/")
            $0 = swap($0, "\"" inc3, "\"cuda/include/")
            $0 = swap($0, "\"" repo1, "\"")
            $0 = swap($0, "\"" repo2, "\"")
        }
        { print }' "$in" >"$out"
    if grep -nE '^[[:space:]]*\.file[[:space:]]' "$out" |
        grep -vE '\.file[[:space:]]+[0-9]+[[:space:]]+"(fixtures/kernels|cuda/include)/' >&2; then
        echo "build-fixtures: unexpected path in .file of $in" >&2
        exit 1
    fi
}

out_final=fixtures/compiled
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$work/compiled"
mkdir "$out"

max_cubin=262144
for src in fixtures/kernels/*.cu; do
    stem="$(basename "$src" .cu)"
    archs="$(sed -n 's@^// archs:[[:space:]]*@@p' "$src" | head -n 1)"
    if [ -z "$archs" ]; then
        echo "build-fixtures: $src has no '// archs:' line" >&2
        exit 1
    fi
    # -hex and -json repeat what the other formats show; to keep the fixtures
    # small they are written for the last architecture on the line only.
    read -r -a arch_list <<<"$archs"
    extra="$(sed -n 's@^// extra:[[:space:]]*@@p' "$src" | head -n 1)"
    last_arch="${arch_list[${#arch_list[@]} - 1]}"
    for arch in "${arch_list[@]}"; do
        echo "build-fixtures: $src -> $arch" >&2
        d="$out/$arch"
        mkdir -p "$d"
        nvcc -O3 -ptx -lineinfo -arch="$arch" "$src" -o "$work/$stem.ptx"
        relativize_ptx "$work/$stem.ptx" "$d/$stem.ptx"
        rm -f "$work/$stem.ptx"
        # The cubin is assembled from the committed PTX, so its line table and
        # its embedded .nv_debug_ptx_txt agree with the .ptx file.
        (cd "$d" && nvcc -O3 -cubin -lineinfo -arch="$arch" "$stem.ptx" -o "$stem.cubin")
        if [[ " $extra " == *" rdc "* ]]; then
            nvcc -O3 -ptx -rdc=true -lineinfo -arch="$arch" "$src" -o "$work/$stem.rdc.ptx"
            relativize_ptx "$work/$stem.rdc.ptx" "$d/$stem.rdc.ptx"
            rm -f "$work/$stem.rdc.ptx"
            (cd "$d" && nvcc -O3 -cubin -rdc=true -lineinfo -arch="$arch" "$stem.rdc.ptx" \
                -o "$stem.rdc.cubin")
        fi
        size="$(wc -c <"$d/$stem.cubin")"
        if [ "$size" -gt "$max_cubin" ]; then
            echo "build-fixtures: $d/$stem.cubin is $size bytes (limit $max_cubin)" >&2
            exit 1
        fi
        (
            cd "$d"
            cuobjdump -sass "$stem.cubin" >"$stem.cuobjdump.sass"
            nvdisasm -c -g "$stem.cubin" >"$stem.nvdisasm.sass"
            nvdisasm -c -gp "$stem.cubin" >"$stem.nvdisasm-gp.sass"
            if [[ " $extra " == *" nvdisasm-gi "* ]]; then
                nvdisasm -c -gi "$stem.cubin" >"$stem.nvdisasm-gi.sass"
            fi
            if [[ " $extra " == *" rdc "* ]]; then
                nvdisasm -c -g "$stem.rdc.cubin" >"$stem.rdc.nvdisasm.sass"
                cuobjdump -sass "$stem.rdc.cubin" >"$stem.rdc.cuobjdump.sass"
                if [ "$arch" = "$last_arch" ]; then
                    nvdisasm -json "$stem.rdc.cubin" >"$stem.rdc.nvdisasm.json"
                fi
            fi
            if [ "$arch" = "$last_arch" ]; then
                nvdisasm -c -hex "$stem.cubin" >"$stem.nvdisasm-hex.sass"
                nvdisasm -json "$stem.cubin" >"$stem.nvdisasm.json"
            fi
        )
    done
done

# Whole binaries. Built without -lineinfo: with it nvcc embeds absolute
# paths that cannot be relativized inside an ELF file.
m="$out/multiarch"
mkdir -p "$m"
nvcc -O3 -fatbin \
    -gencode arch=compute_90a,code=sm_90a \
    -gencode 'arch=compute_100a,code=[sm_100a,compute_100a]' \
    fixtures/kernels/spin_poll.cu -o "$m/spin_poll.fatbin"
nvcc -O3 -c \
    -gencode arch=compute_80,code=sm_80 \
    -gencode 'arch=compute_120,code=[sm_120,compute_120]' \
    fixtures/kernels/spin_poll.cu -o "$work/spin_poll.o"
# The host object names its temporary source file (tmpxft_<pid>_...) in a
# local file symbol; zero the pid so the object is reproducible.
perl -0777 -pe 's/tmpxft_[0-9a-f]{8}_/tmpxft_00000000_/g' "$work/spin_poll.o" >"$m/spin_poll.o"
# Device variables and no code: cubins without a code section.
nvcc -O3 -c -rdc=true \
    -gencode arch=compute_80,code=sm_80 \
    -gencode 'arch=compute_90a,code=[sm_90a,compute_90a]' \
    fixtures/kernels/objects/device_data.cu -o "$work/device_data.o"
perl -0777 -pe 's/tmpxft_[0-9a-f]{8}_/tmpxft_00000000_/g' "$work/device_data.o" >"$m/device_data.o"
# A static library of the two objects (`D`: no timestamps, owners or modes).
(cd "$m" && ar rcD kernels.a spin_poll.o device_data.o)
# Three translation units device-linked into one cubin (kernels/linked/): nvlink
# itself, without nvcc's -L flags, which it would write into the cubin. Each
# consumer file brings its own copies of the compiler's division helpers.
for f in wait consumer_a consumer_b; do
    nvcc -O3 -rdc=true -c -arch=sm_80 "fixtures/kernels/linked/$f.cu" -o "$work/linked_$f.o"
done
(cd "$work" && nvlink -m64 --arch=sm_80 -cpu-arch=X86_64 \
    linked_wait.o linked_consumer_a.o linked_consumer_b.o -o linked.sm_80.cubin)
cp "$work/linked.sm_80.cubin" "$m/linked.sm_80.cubin"
(cd "$m" && nvdisasm -c linked.sm_80.cubin >linked.sm_80.nvdisasm-c.sass)
# One of them alone: a relocatable cubin whose kernel calls a function it does not hold.
nvcc -O3 -rdc=true -cubin -arch=sm_80 fixtures/kernels/linked/consumer_a.cu \
    -o "$m/consumer_a.rdc.sm_80.cubin"
# A whole application and a shared library. Linked by the host compiler, not by
# nvcc, which would write its -L paths into the binary; against a libcudart.so
# link to the runtime of the pip CUDA tools (`$bin/../lib`), which names only
# its soname.
mkdir -p "$work/cudart"
ln -sf "$(cd "$bin/../lib" && pwd)/libcudart.so.13" "$work/cudart/libcudart.so"
for variant in app lib; do
    flags=()
    [ "$variant" = lib ] && flags=(-DAPP_LIBRARY -Xcompiler -fPIC)
    nvcc -O3 -c "${flags[@]}" -gencode 'arch=compute_90a,code=[sm_90a,compute_90a]' \
        fixtures/kernels/objects/app.cu -o "$work/$variant.raw.o"
    perl -0777 -pe 's/tmpxft_[0-9a-f]{8}_/tmpxft_00000000_/g' "$work/$variant.raw.o" >"$work/$variant.o"
done
"${CXX:-g++}" "$work/app.o" -o "$m/app" -L"$work/cudart" -lcudart
"${CXX:-g++}" -shared "$work/lib.o" -o "$m/libapp.so" -L"$work/cudart" -lcudart

if grep -rl --binary-files=text -e "$repo/" -e "$repo_real/" -e "$root_real" -e "$work" "$out" >&2; then
    echo "build-fixtures: absolute paths leaked into the files above" >&2
    exit 1
fi

{
    echo "# Toolchain that produced fixtures/compiled (scripts/build-fixtures.sh)"
    echo
    echo "## nvcc --version"
    nvcc --version
    echo
    echo "## ptxas --version"
    ptxas --version
    echo
    echo "## cuobjdump --version"
    cuobjdump --version
    echo
    echo "## nvdisasm --version"
    nvdisasm --version
    echo
    echo "## fatbinary --version"
    fatbinary --version
    echo
    echo "## nvlink --version"
    nvlink --version
    echo
    echo "## host compiler (host objects; links app and libapp.so)"
    "${CXX:-g++}" --version | head -n 1
} >"$out/TOOLCHAIN.txt"

rm -rf "$out_final"
cp -R "$out" "$out_final"
echo "build-fixtures: wrote $out_final ($(du -sh "$out_final" | cut -f1))" >&2
