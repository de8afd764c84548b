/*
 * A HIP 5.2.3 program (Debian's hipcc, --offload-arch=gfx90a): vector add of 1000 floats in
 * blocks of 256 (the last partial) through hipMalloc, hipMemcpy (HIP's own blit kernels) and
 * a kernel launch; prints the number of wrong elements.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void vadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

#define N 1000

int main(void)
{
    static float ha[N], hb[N], hc[N];
    float *a, *b, *c;
    int bad = 0;

    for (int i = 0; i < N; i++) {
        ha[i] = i;
        hb[i] = 2 * i;
        hc[i] = -1;
    }
    if (hipMalloc(&a, sizeof ha) || hipMalloc(&b, sizeof hb) || hipMalloc(&c, sizeof hc)) {
        printf("hipMalloc failed\n");
        return 1;
    }
    if (hipMemcpy(a, ha, sizeof ha, hipMemcpyHostToDevice) ||
        hipMemcpy(b, hb, sizeof hb, hipMemcpyHostToDevice)) {
        printf("hipMemcpy to the device failed\n");
        return 1;
    }
    hipLaunchKernelGGL(vadd, dim3((N + 255) / 256), dim3(256), 0, 0, a, b, c, N);
    hipError_t e = hipMemcpy(hc, c, sizeof hc, hipMemcpyDeviceToHost);
    if (e != hipSuccess) {
        printf("hipMemcpy from the device: %s\n", hipGetErrorString(e));
        return 1;
    }
    for (int i = 0; i < N; i++)
        if (hc[i] != 3.0f * i)
            bad++;
    printf("vadd n=%d bad=%d c[999]=%g\n", N, bad, hc[N - 1]);
    hipFree(a);
    hipFree(b);
    hipFree(c);
    return bad != 0;
}
