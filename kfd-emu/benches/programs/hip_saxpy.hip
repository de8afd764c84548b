/*
 * The whole-program bench's HIP 5.2.3 program (Debian's hipcc, --offload-arch=gfx90a): y = a*x + y
 * over N floats (argv[1], 1 Mi = 4 MiB per array by default) in argv[2] kernel launches (4),
 * with hipMemcpy both ways through HIP's own blit kernels (pageable host memory: HIP stages it
 * through pinned memory). Prints the number of wrong elements. saxpy.c is its host-only
 * equivalent.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>


__global__ void saxpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
    float *x, *y;
    int bad = 0;

    if (!hx || !hy || n <= 0 || rounds < 0)
        return 1;
    for (int i = 0; i < n; i++) {
        hx[i] = i % 1000;
        hy[i] = 1;
    }
    if (hipMalloc(&x, n * sizeof(float)) || hipMalloc(&y, n * sizeof(float))) {
        printf("hipMalloc failed\n");
        return 1;
    }
    if (hipMemcpy(x, hx, n * sizeof(float), hipMemcpyHostToDevice) ||
        hipMemcpy(y, hy, n * sizeof(float), hipMemcpyHostToDevice)) {
        printf("hipMemcpy to the device failed\n");
        return 1;
    }
    for (int r = 0; r < rounds; r++)
        hipLaunchKernelGGL(saxpy, dim3((n + 255) / 256), dim3(256), 0, 0, 2.0f, x, y, n);
    if (hipMemcpy(hy, y, n * sizeof(float), hipMemcpyDeviceToHost)) {
        printf("hipMemcpy from the device failed\n");
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (hy[i] != 1.0f + rounds * 2.0f * (i % 1000))
            bad++;
    printf("saxpy n=%d bad=%d\n", n, bad);
    hipFree(x);
    hipFree(y);
    return bad != 0;
}
