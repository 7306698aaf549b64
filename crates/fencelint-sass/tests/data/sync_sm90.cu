// Test source for the SASS front end: mbarrier, TMA, bulk copies, fences and polls (sm_90a).
#include <cuda.h>
#include <cstdint>

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__global__ void tma_consume(const __grid_constant__ CUtensorMap tmap, float *out, int iters) {
    __shared__ alignas(128) float tile[32 * 32];
    __shared__ alignas(8) uint64_t bar;
    uint32_t b = smem_addr(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(1));
        asm volatile("fence.mbarrier_init.release.cluster;");
        asm volatile("fence.proxy.async.shared::cta;");
    }
    __syncthreads();
    uint32_t phase = 0;
    float acc = 0.f;
    for (int it = 0; it < iters; ++it) {
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(4096));
            asm volatile(
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(tile)),
                "l"(&tmap), "r"(it * 32), "r"(0), "r"(b)
                : "memory");
        }
        uint32_t done = 0;
        while (!done) {
            asm volatile(
                "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
                " selp.u32 %0, 1, 0, p; }"
                : "=r"(done)
                : "r"(b), "r"(phase)
                : "memory");
        }
        phase ^= 1;
        acc += tile[threadIdx.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void tma_store(const __grid_constant__ CUtensorMap tmap, const float *in) {
    __shared__ alignas(128) float tile[32 * 32];
    tile[threadIdx.x] = in[threadIdx.x] * 0.5f;
    asm volatile("fence.proxy.async.shared::cta;");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(&tmap), "r"(0), "r"(0), "r"(smem_addr(tile)) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

__global__ void flag_poll(volatile int *flag, const int *data, int *out) {
    int v;
    do {
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    } while (v == 0);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    out[threadIdx.x] = data[threadIdx.x];
}

__global__ void flag_publish(int *flag, int *data) {
    data[threadIdx.x] = threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(1) : "memory");
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(flag + 1), "r"(1) : "memory");
    }
}

__global__ void atomics_and_fences(unsigned *ctr, unsigned *out, unsigned long long *wide) {
    unsigned old = atomicAdd(ctr, 1u);
    unsigned cas;
    asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(cas) : "l"(ctr + 1), "r"(old), "r"(old + 1) : "memory");
    asm volatile("fence.sc.sys;" ::: "memory");
    asm volatile("fence.proxy.alias;" ::: "memory");
    atomicMax(wide, (unsigned long long)cas);
    __threadfence_block();
    out[threadIdx.x] = old + cas;
}
