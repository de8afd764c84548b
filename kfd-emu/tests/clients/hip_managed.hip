/*
 * hipMallocManaged with XNACK on (HSA_XNACK=1; Debian's hipcc 5.2.3, --offload-arch=gfx90a):
 * the host writes the managed array, a kernel scales it in place — its first touch of each
 * page is a GPU retry fault that migrates the page — and the host reads it back (a CPU fault
 * migrating it back). Prints the check and "done"; exits non-zero on a wrong element.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void scale(int *a, int n, int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = a[i] * k + i;
}

int main(void)
{
    enum { N = 1 << 16 };
    int *a;
    int bad = 0;
    hipError_t e = hipMallocManaged(&a, N * sizeof *a);
    if (e != hipSuccess) {
        printf("FAILED hipMallocManaged: %s\n", hipGetErrorString(e));
        return 1;
    }
    /* Where the range lies decides how many granularity blocks it spans. */
    printf("managed at %p, %zu bytes\n", (void *)a, N * sizeof *a);
    for (int i = 0; i < N; i++)
        a[i] = i % 1000;
    hipLaunchKernelGGL(scale, dim3(N / 256), dim3(256), 0, 0, a, N, 3);
    e = hipDeviceSynchronize();
    if (e != hipSuccess) {
        printf("FAILED hipDeviceSynchronize: %s\n", hipGetErrorString(e));
        return 1;
    }
    for (int i = 0; i < N; i++)
        if (a[i] != (i % 1000) * 3 + i)
            bad++;
    printf("managed n=%d bad=%d\n", N, bad);
    hipFree(a);
    printf("done\n");
    return bad != 0;
}
