// Test source for the SASS front end: inlined helpers, calls and float immediates (sm_120).
__device__ __forceinline__ float helper(float x) { return x > 0.f ? x * 0.25f : -x; }

__device__ __noinline__ float outlined(float x) { return sqrtf(fabsf(x)) + __int_as_float(0x7f800000); }

__global__ void inlined(const float *in, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = helper(in[i]);
    v = helper(v + 1.0f);
    out[i] = outlined(v) / (v - 3.0f);
}

__global__ void shared_reduce(const int *in, int *out) {
    __shared__ int s[256];
    s[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
