#!/usr/bin/env bash
# Builds a corpus of vendor and DSL-generated PTX in $REPO/.corpus (gitignored) and runs the
# PTX front end over it, to measure coverage (parse errors) and speed.
#
# Usage:
#   scripts/vendor-ptx-corpus.sh            # NCCL + Triton + CuTe DSL, then ptx-stats
#   SKIP_NCCL=1 SKIP_TRITON=1 SKIP_CUTE=1 scripts/vendor-ptx-corpus.sh
#
# Steps (each is skipped when its output already exists):
#   1. NCCL: `pip download --no-deps nvidia-nccl-cu13`, unzip libnccl.so.2, and extract its
#      embedded PTX with `cuobjdump -xptx all` into .corpus/nccl/ptx/.
#   2. Triton: a venv with `pip install triton`; compiles a few kernels of our own to PTX
#      (compile only, no GPU) into .corpus/triton/.
#   3. CuTe DSL: a venv with `pip install nvidia-cutlass-dsl`; compiles a few kernels of our
#      own with fake tensors (no GPU) into .corpus/cute/.
#   4. `cargo run --release -p fencelint-ptx --example ptx-stats` over everything; the report
#      goes to stdout and to .corpus/ptx-stats.txt.
# A step that cannot run (no network, a package that does not install or compile) says why in
# .corpus/<step>/STATUS and the script goes on.
#
# cuobjdump is found through FENCELINT_CUDA_BIN, PATH, or scripts/install-cuda-tools.sh.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
corpus="$repo/.corpus"
python="${PYTHON:-python3}"
mkdir -p "$corpus"

log() { echo "vendor-ptx-corpus: $*" >&2; }

status() { # status STEP MESSAGE...
    local step="$1"
    shift
    mkdir -p "$corpus/$step"
    echo "$*" > "$corpus/$step/STATUS"
    log "$step: $*"
}

find_cuda_bin() {
    if [ -n "${FENCELINT_CUDA_BIN:-}" ] && [ -x "$FENCELINT_CUDA_BIN/cuobjdump" ]; then
        echo "$FENCELINT_CUDA_BIN"
    elif command -v cuobjdump > /dev/null 2>&1; then
        dirname "$(command -v cuobjdump)"
    else
        "$repo/scripts/install-cuda-tools.sh" | tail -n 1
    fi
}

# --- 1. NCCL -----------------------------------------------------------------------------
nccl() {
    local dir="$corpus/nccl"
    mkdir -p "$dir/ptx" "$corpus/wheels"
    if compgen -G "$dir/ptx/*.ptx" > /dev/null; then
        log "nccl: PTX already extracted ($(ls "$dir"/ptx/*.ptx | wc -l) files)"
        return 0
    fi
    if ! compgen -G "$corpus/wheels/nvidia_nccl_cu13-*.whl" > /dev/null; then
        log "nccl: downloading the nvidia-nccl-cu13 wheel"
        if ! "$python" -m pip download --quiet --no-deps nvidia-nccl-cu13 -d "$corpus/wheels"; then
            status nccl "pip download nvidia-nccl-cu13 failed"
            return 1
        fi
    fi
    local wheel
    wheel="$(ls "$corpus"/wheels/nvidia_nccl_cu13-*.whl | tail -n 1)"
    if ! unzip -o -j -q "$wheel" 'nvidia/nccl/lib/libnccl.so.2' -d "$dir"; then
        status nccl "libnccl.so.2 not found in $(basename "$wheel")"
        return 1
    fi
    local bin
    if ! bin="$(find_cuda_bin)" || [ ! -x "$bin/cuobjdump" ]; then
        status nccl "cuobjdump not found; run scripts/install-cuda-tools.sh"
        return 1
    fi
    log "nccl: extracting the embedded PTX with $bin/cuobjdump"
    if ! (cd "$dir/ptx" && "$bin/cuobjdump" -xptx all ../libnccl.so.2 > ../cuobjdump.log 2>&1); then
        status nccl "cuobjdump -xptx all failed; see .corpus/nccl/cuobjdump.log"
        return 1
    fi
    status nccl "ok: $(basename "$wheel"), $(ls "$dir"/ptx/*.ptx | wc -l) PTX files"
}

# --- 2. Triton ---------------------------------------------------------------------------
triton() {
    local dir="$corpus/triton"
    mkdir -p "$dir"
    if compgen -G "$dir/*.ptx" > /dev/null; then
        log "triton: PTX already there"
        return 0
    fi
    local venv="$corpus/triton-venv"
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import triton' 2> /dev/null; then
        log "triton: installing triton into $venv"
        if ! { "$python" -m venv "$venv" && "$venv/bin/pip" install --quiet triton; } > "$dir/install.log" 2>&1; then
            status triton "pip install triton failed; see .corpus/triton/install.log"
            return 1
        fi
    fi
    cat > "$dir/compile_triton.py" << 'PY'
"""Compiles a few Triton kernels of our own to PTX without a GPU."""
import os
import sys
import traceback

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def flag_kernel(flag_ptr, data_ptr, out_ptr):
    pid = tl.program_id(0)
    tl.store(data_ptr + pid, pid + 1)
    tl.atomic_add(flag_ptr, 1, sem="release", scope="gpu")
    while tl.atomic_cas(flag_ptr + 1, 1, 1, sem="acquire", scope="gpu") == 0:
        pass
    tl.store(out_ptr + pid, tl.load(data_ptr + pid, volatile=True))


MATMUL = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
          "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
KERNELS = [
    ("add", add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
     {"BLOCK": 1024}, 90),
    ("softmax", softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32", "n_cols": "i32",
                                 "BLOCK": "constexpr"}, {"BLOCK": 1024}, 90),
    ("matmul_sm80", matmul_kernel, MATMUL, {"BM": 64, "BN": 64, "BK": 32}, 80),
    ("matmul_sm90", matmul_kernel, MATMUL, {"BM": 128, "BN": 128, "BK": 64}, 90),
    ("matmul_sm100", matmul_kernel, MATMUL, {"BM": 128, "BN": 128, "BK": 64}, 100),
    ("flag", flag_kernel, {"flag_ptr": "*i32", "data_ptr": "*i32", "out_ptr": "*i32"}, {}, 90),
]

failed = 0
for name, fn, signature, constexprs, arch in KERNELS:
    try:
        compiled = triton.compile(triton.compiler.ASTSource(fn, signature, constexprs),
                                  target=GPUTarget("cuda", arch, 32))
        with open(os.path.join(sys.argv[1], f"triton_{name}.ptx"), "w") as out:
            out.write(compiled.asm["ptx"])
        print(f"ok triton_{name}.ptx (triton {triton.__version__}, sm_{arch})")
    except Exception as error:  # Record why, go on with the next kernel.
        failed += 1
        print(f"FAILED {name}: {type(error).__name__}: {str(error).splitlines()[:1]}")
        traceback.print_exc(file=sys.stderr)
sys.exit(1 if failed == len(KERNELS) else 0)
PY
    log "triton: compiling kernels"
    if TRITON_DEFAULT_FP_FUSION=1 "$venv/bin/python" "$dir/compile_triton.py" "$dir" > "$dir/compile.log" 2> "$dir/compile.err"; then
        status triton "ok: $(grep -c '^ok' "$dir/compile.log") kernels compiled; $(grep -c '^FAILED' "$dir/compile.log") failed (see compile.log)"
    else
        status triton "compilation failed: $(grep -m1 '^FAILED' "$dir/compile.log"); see .corpus/triton/compile.err"
        return 1
    fi
}

# --- 3. CuTe DSL -------------------------------------------------------------------------
cute() {
    local dir="$corpus/cute"
    mkdir -p "$dir"
    if compgen -G "$dir/dump/*.ptx" > /dev/null; then
        log "cute: PTX already there"
        return 0
    fi
    local venv="$corpus/cute-venv"
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import cutlass.cute' 2> /dev/null; then
        log "cute: installing nvidia-cutlass-dsl into $venv"
        if ! { "$python" -m venv "$venv" && "$venv/bin/pip" install --quiet nvidia-cutlass-dsl; } > "$dir/install.log" 2>&1; then
            status cute "pip install nvidia-cutlass-dsl failed; see .corpus/cute/install.log"
            return 1
        fi
    fi
    cat > "$dir/compile_cute.py" << 'PY'
"""Compiles a few CuTe DSL kernels of our own to PTX with fake tensors, without a GPU."""
import sys
import traceback

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    idx = bidx * bdim + tidx
    m, n = gA.shape
    gC[idx // n, idx % n] = gA[idx // n, idx % n] + gB[idx // n, idx % n]


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
    m, n = mA.shape
    add_kernel(mA, mB, mC).launch(grid=((m * n) // 256, 1, 1), block=(256, 1, 1))


@cute.kernel
def mbarrier_kernel(gA: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bar = cute.arch.alloc_smem(cutlass.Int64, 1, alignment=8)
    with cute.arch.elect_one():
        cute.arch.mbarrier_init(bar, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.sync_threads()
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive(bar)
    cute.arch.mbarrier_wait(bar, 0)
    cute.arch.fence_acq_rel_gpu()
    gA[tidx] = gA[tidx] + cutlass.Float32(1.0)


@cute.jit
def mbarrier_launch(mA: cute.Tensor):
    mbarrier_kernel(mA).launch(grid=(1, 1, 1), block=(128, 1, 1))


failed = 0
for name, fn, args in [
    ("add", add, [make_fake_compact_tensor(cutlass.Float32, (1024, 1024)) for _ in range(3)]),
    ("mbarrier", mbarrier_launch, [make_fake_compact_tensor(cutlass.Float32, (128,))]),
]:
    try:
        cute.compile(fn, *args)
        print(f"ok {name}")
    except Exception as error:  # Record why, go on with the next kernel.
        failed += 1
        print(f"FAILED {name}: {type(error).__name__}: {str(error).splitlines()[:1]}")
        traceback.print_exc(file=sys.stderr)
sys.exit(1 if failed else 0)
PY
    local arch ok=0
    for arch in sm_90a sm_100a; do
        log "cute: compiling kernels for $arch"
        mkdir -p "$dir/dump"
        if CUTE_DSL_ARCH="$arch" CUTE_DSL_KEEP=ptx CUTE_DSL_DUMP_DIR="$dir/dump" CUTE_DSL_LINEINFO=1 \
            "$venv/bin/python" "$dir/compile_cute.py" > "$dir/compile-$arch.log" 2> "$dir/compile-$arch.err"; then
            ok=$((ok + 1))
        fi
    done
    if compgen -G "$dir/dump/*.ptx" > /dev/null; then
        status cute "ok: $(ls "$dir"/dump/*.ptx | wc -l) PTX files ($ok of 2 architectures compiled everything)"
    else
        status cute "no PTX produced; see .corpus/cute/compile-*.err"
        return 1
    fi
}

[ -n "${SKIP_NCCL:-}" ] || nccl
[ -n "${SKIP_TRITON:-}" ] || triton
[ -n "${SKIP_CUTE:-}" ] || cute

# --- 4. ptx-stats ------------------------------------------------------------------------
files=()
for pattern in "$corpus"/nccl/ptx/*.ptx "$corpus"/triton/*.ptx "$corpus"/cute/dump/*.ptx; do
    [ -f "$pattern" ] && files+=("$pattern")
done
if [ ${#files[@]} -eq 0 ]; then
    log "no PTX in the corpus"
    exit 1
fi
cd "$repo"
cargo run --quiet --release -p fencelint-ptx --example ptx-stats -- --repeat "${REPEAT:-3}" --errors 5 "${files[@]}" \
    | sed "s|$corpus/||" | tee "$corpus/ptx-stats.txt"
