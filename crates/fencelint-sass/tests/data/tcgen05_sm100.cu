// Test source for the SASS front end: tcgen05 TMEM allocation, loads, stores and commits (sm_100a).
#include <cstdint>

__global__ void tmem_roundtrip(float *out, int rounds) {
    __shared__ uint32_t tmem_base;
    __shared__ alignas(8) uint64_t bar;
    uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
    uint32_t slot = static_cast<uint32_t>(__cvta_generic_to_shared(&tmem_base));
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" ::"r"(slot));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    }
    asm volatile("tcgen05.fence::before_thread_sync;");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;");
    uint32_t taddr = tmem_base;
    float acc = 0.f;
    for (int r = 0; r < rounds; ++r) {
        uint32_t v = __float_as_uint(acc + r);
        asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};" ::"r"(taddr), "r"(v));
        asm volatile("tcgen05.wait::st.sync.aligned;");
        uint32_t w;
        asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];" : "=r"(w) : "r"(taddr));
        asm volatile("tcgen05.wait::ld.sync.aligned;");
        acc = __uint_as_float(w) * 1.5f;
    }
    if (threadIdx.x == 0) {
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                     ::"r"(bar_addr));
        asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;"
                     " @!p bra W; }" ::"r"(bar_addr) : "memory");
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" ::"r"(taddr));
    }
    out[threadIdx.x] = acc;
}

__global__ void cluster_barrier(int *p) {
    p[threadIdx.x] = 1;
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    p[threadIdx.x + 128] = 2;
    asm volatile("griddepcontrol.launch_dependents;");
}
