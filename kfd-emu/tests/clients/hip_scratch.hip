/*
 * A HIP 5.2.3 kernel that needs scratch (a private array indexed by a run-time value, which
 * the compiler cannot keep in registers): ROCr's queue starts without scratch, so the first
 * dispatch makes the CP ask for it (queue error 1, AqlQueue::DynamicScratchHandler), ROCr
 * allocates it and the dispatch runs. Prints the check and "done"; exits non-zero on a wrong
 * element.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void spill(const int *idx, int *out, int n)
{
    int priv[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 64; k++)
        priv[k] = i * k;
    if (i < n)
        out[i] = priv[idx[i] & 63];
}

int main(void)
{
    enum { N = 4096 };
    static int hidx[N], hout[N];
    int *idx, *out, bad = 0;
    for (int i = 0; i < N; i++)
        hidx[i] = (i * 7) % 64;
    if (hipMalloc(&idx, sizeof hidx) || hipMalloc(&out, sizeof hout)) {
        printf("FAILED hipMalloc\n");
        return 1;
    }
    hipMemcpy(idx, hidx, sizeof hidx, hipMemcpyHostToDevice);
    hipLaunchKernelGGL(spill, dim3(N / 128), dim3(128), 0, 0, idx, out, N);
    hipError_t e = hipMemcpy(hout, out, sizeof hout, hipMemcpyDeviceToHost);
    if (e != hipSuccess) {
        printf("FAILED hipMemcpy: %s\n", hipGetErrorString(e));
        return 1;
    }
    for (int i = 0; i < N; i++)
        if (hout[i] != i * ((i * 7) % 64))
            bad++;
    printf("scratch n=%d bad=%d\n", N, bad);
    hipFree(idx);
    hipFree(out);
    printf("done\n");
    return bad != 0;
}
