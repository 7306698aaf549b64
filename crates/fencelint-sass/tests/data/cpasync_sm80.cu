// Test source for the SASS front end: Ampere cp.async pipelines and spin loops (sm_80).
#include <cstdint>

__global__ void cp_async_pipeline(const float4 *in, float *out, int n) {
    __shared__ alignas(16) float4 buf[2][128];
    float acc = 0.f;
    for (int i = 0; i < n; ++i) {
        uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(&buf[i & 1][threadIdx.x]));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                     "l"(in + i * 128 + threadIdx.x));
        asm volatile("cp.async.commit_group;");
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        __syncthreads();
        acc += buf[i & 1][(threadIdx.x + 1) % 128].x;
        __syncthreads();
    }
    out[threadIdx.x] = acc;
}

__device__ __noinline__ int spin_until(volatile int *flag, int expect) {
    int spins = 0;
    while (*flag != expect) {
        __nanosleep(32);
        ++spins;
    }
    return spins;
}

__global__ void volatile_spin(volatile int *flag, const double *data, double *out) {
    int s = spin_until(flag, 1);
    __threadfence_system();
    out[threadIdx.x] = data[threadIdx.x] * 5.9604644775390625e-08 + s;
}

__global__ void bar_named(int *p) {
    asm volatile("bar.sync 1, 64;");
    p[threadIdx.x] = __shfl_sync(0xffffffffu, p[threadIdx.x], 0);
    asm volatile("bar.arrive 2, 64;");
    unsigned x = __popc(__ballot_sync(0xffffffffu, p[threadIdx.x] > 0));
    p[threadIdx.x + 64] = x;
}
