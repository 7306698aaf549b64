// Device calls, printf, function pointers, a jump table, assert, constants and local arrays.
// Compiled by tests/data/build.sh; the PTX is committed next to this file.
#include <cstdio>
#include <cassert>

__constant__ float coefficients[4] = {1.0f, 0.5f, -2.25f, 3.0e-3f};
__device__ int lookup[8] = {3, 1, 4, 1, 5, 9, 2, 6};
__device__ const char* names[2] = {"alpha", "beta"};

__device__ __noinline__ float scale(float x, int k) {
    return x * coefficients[k & 3] + static_cast<float>(lookup[k & 7]);
}

__device__ __noinline__ int twice(int x) { return 2 * x; }
__device__ __noinline__ int thrice(int x) { return 3 * x; }

typedef int (*unary_fn)(int);
__device__ unary_fn table[2] = {twice, thrice};

__device__ __noinline__ int dispatch(int sel, int x) {
    switch (sel) {
        case 0: return x + 1;
        case 1: return x * 7;
        case 2: return x - 13;
        case 3: return x ^ 0x55;
        case 4: return x << 3;
        case 5: return x / 3;
        case 6: return x % 11;
        case 7: return ~x;
        default: return x;
    }
}

// NVVM lowers switches to compare trees, so the jump table comes through inline asm.
__device__ __noinline__ int jump(int sel) {
    int r;
    asm volatile(
        "{\n"
        "ts_%=: .branchtargets L0_%=, L1_%=, L2_%=;\n"
        "brx.idx.uni %1, ts_%=;\n"
        "L0_%=: mov.u32 %0, 10;\n"
        "bra.uni END_%=;\n"
        "L1_%=: mov.u32 %0, 0x20U;\n"
        "bra.uni END_%=;\n"
        "L2_%=: mov.u32 %0, -30;\n"
        "END_%=:\n"
        "}\n" : "=r"(r) : "r"(sel % 3));
    return r;
}

__global__ void __launch_bounds__(256, 2) calls_kernel(float* out, const int* sel, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float local[16];
#pragma unroll 1
    for (int k = 0; k < 16; ++k) {
        local[k] = scale(out[i] + k, sel[(i + k) % n]);
    }
    int v = table[sel[i] & 1](i);
    v = dispatch(sel[i] & 15, v) + jump(v);
    assert(v != 12345);
    if (i == 0) {
        printf("thread %d value %f name %s\n", i, local[sel[i] & 15], names[v & 1]);
    }
    out[i] = local[v & 15] + static_cast<float>(v);
}
