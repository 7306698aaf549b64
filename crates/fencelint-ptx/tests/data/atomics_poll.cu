// Flags and polls: volatile and acquire loads, atomics with scopes, fences, warp operations,
// dynamic shared memory and cooperative-groups style barriers.
// Compiled by tests/data/build.sh; the PTX is committed next to this file.
#include <cuda/atomic>

extern __shared__ float dynamic_smem[];

__device__ unsigned int flag;
__device__ float payload[1024];

__global__ void producer(float value) {
    payload[threadIdx.x] = value;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        cuda::atomic_ref<unsigned int, cuda::thread_scope_device> f(flag);
        f.store(1u, cuda::memory_order_release);
    }
}

__global__ void consumer(float* out, unsigned long long* counter) {
    if (threadIdx.x == 0) {
        cuda::atomic_ref<unsigned int, cuda::thread_scope_device> f(flag);
        while (f.load(cuda::memory_order_acquire) == 0) {
            __nanosleep(32);
        }
        volatile unsigned int* vf = &flag;
        while (*vf == 0) {
        }
    }
    __syncthreads();
    dynamic_smem[threadIdx.x] = payload[threadIdx.x];
    __syncwarp();
    float v = dynamic_smem[(threadIdx.x + 1) % blockDim.x];
    v += __shfl_xor_sync(0xffffffff, v, 1);
    unsigned ballot = __ballot_sync(0xffffffff, v > 0.f);
    if (__popc(ballot) > 16) {
        atomicAdd(counter, 1ull);
    }
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> c(*counter);
    c.fetch_add(2ull, cuda::memory_order_relaxed);
    atomicCAS(reinterpret_cast<unsigned int*>(counter), 0u, 7u);
    out[blockIdx.x * blockDim.x + threadIdx.x] = v + clock64() % 3;
}
