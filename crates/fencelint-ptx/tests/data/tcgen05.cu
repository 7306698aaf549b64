// Blackwell tensor memory through inline asm: alloc, ld, wait::ld, commit, dealloc.
// Compiled by tests/data/build.sh for sm_100a; the PTX is committed next to this file.
#include <cstdint>

__global__ void __launch_bounds__(128) tmem_kernel(float* out, int iters) {
    __shared__ uint32_t tmem_base;
    __shared__ alignas(8) uint64_t bar;
    uint32_t smem_slot = static_cast<uint32_t>(__cvta_generic_to_shared(&tmem_base));
    uint32_t smem_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(smem_slot));
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
    }
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_bar));
    }
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
    __syncthreads();
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
    uint32_t taddr = tmem_base;
    float acc = 0.f;
    for (int i = 0; i < iters; ++i) {
        uint32_t r0, r1;
        asm volatile("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%0, %1}, [%2];"
                     : "=r"(r0), "=r"(r1) : "r"(taddr));
        asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
        acc += __uint_as_float(r0) + __uint_as_float(r1);
    }
    if (threadIdx.x == 0) {
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                     :: "r"(smem_bar) : "memory");
    }
    out[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(taddr));
    }
}
