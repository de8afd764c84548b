/*
 * HIP 5.2.3 kernels beyond a vector add (Debian's hipcc, --offload-arch=gfx90a), each checked
 * against the host:
 *  - a block reduction through LDS (__shared__) and __syncthreads (s_barrier), then one
 *    atomicAdd per block into a global sum;
 *  - atomicAdd/atomicMax/atomicCAS contention on one word from every thread;
 *  - a 2D 5-point stencil over a 130x67 grid in 16x16 blocks (partial blocks at both edges);
 *  - hipMemset (HIP's fill kernel) and a device-to-device hipMemcpy.
 * One line per check, then "done"; exits non-zero at the first wrong result.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        hipError_t e_ = (call);                                                          \
        if (e_ != hipSuccess) {                                                          \
            printf("FAILED %s: %s (line %d)\n", #call, hipGetErrorString(e_), __LINE__); \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

__global__ void block_sum(const int *in, int n, int *partial, unsigned long long *total)
{
    __shared__ int s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0];
        atomicAdd(total, (unsigned long long)s[0]);
    }
}

__global__ void contend(int *counter, int *maximum, int *cas_count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(counter, 1);
    atomicMax(maximum, i);
    int old = *cas_count, seen;
    do {
        seen = old;
        old = atomicCAS(cas_count, seen, seen + 2);
    } while (old != seen);
}

__global__ void stencil(const float *in, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x <= 0 || y <= 0 || x >= w - 1 || y >= h - 1)
        return;
    int i = y * w + x;
    out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}

int main(void)
{
    enum { N = 10000, W = 130, H = 67 };
    static int hin[N], hpart[(N + 255) / 256];
    static float hs[W * H], hso[W * H];
    int *din, *dpart, *dc, *dm, *dcas;
    unsigned long long *dtotal, total = 0;
    float *dsi, *dso;
    long long want = 0;
    int blocks = (N + 255) / 256;

    for (int i = 0; i < N; i++) {
        hin[i] = (i * 7919) % 1000 - 300;
        want += hin[i];
    }
    CHECK(hipMalloc(&din, sizeof hin));
    CHECK(hipMalloc(&dpart, sizeof hpart));
    CHECK(hipMalloc(&dtotal, sizeof total));
    CHECK(hipMemcpy(din, hin, sizeof hin, hipMemcpyHostToDevice));
    CHECK(hipMemset(dtotal, 0, sizeof total));
    hipLaunchKernelGGL(block_sum, dim3(blocks), dim3(256), 0, 0, din, N, dpart, dtotal);
    CHECK(hipMemcpy(hpart, dpart, sizeof hpart, hipMemcpyDeviceToHost));
    CHECK(hipMemcpy(&total, dtotal, sizeof total, hipMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) {
        int s = 0;
        for (int i = b * 256; i < N && i < (b + 1) * 256; i++)
            s += hin[i];
        if (s != hpart[b]) {
            printf("FAILED block %d: %d, not %d\n", b, hpart[b], s);
            return 1;
        }
    }
    if ((long long)total != want) {
        printf("FAILED total %lld, not %lld\n", (long long)total, want);
        return 1;
    }
    printf("reduce n=%d blocks=%d sum=%lld\n", N, blocks, want);

    int zero = 0, minus = -1, hc, hm, hcas;
    CHECK(hipMalloc(&dc, 4));
    CHECK(hipMalloc(&dm, 4));
    CHECK(hipMalloc(&dcas, 4));
    CHECK(hipMemcpy(dc, &zero, 4, hipMemcpyHostToDevice));
    CHECK(hipMemcpy(dm, &minus, 4, hipMemcpyHostToDevice));
    CHECK(hipMemcpy(dcas, &zero, 4, hipMemcpyHostToDevice));
    hipLaunchKernelGGL(contend, dim3(40), dim3(128), 0, 0, dc, dm, dcas);
    CHECK(hipMemcpy(&hc, dc, 4, hipMemcpyDeviceToHost));
    CHECK(hipMemcpy(&hm, dm, 4, hipMemcpyDeviceToHost));
    CHECK(hipMemcpy(&hcas, dcas, 4, hipMemcpyDeviceToHost));
    if (hc != 40 * 128 || hm != 40 * 128 - 1 || hcas != 2 * 40 * 128) {
        printf("FAILED atomics: add %d max %d cas %d\n", hc, hm, hcas);
        return 1;
    }
    printf("atomics threads=%d add=%d max=%d cas=%d\n", 40 * 128, hc, hm, hcas);

    for (int i = 0; i < W * H; i++)
        hs[i] = (float)((i * 31) % 97);
    CHECK(hipMalloc(&dsi, sizeof hs));
    CHECK(hipMalloc(&dso, sizeof hs));
    CHECK(hipMemcpy(dsi, hs, sizeof hs, hipMemcpyHostToDevice));
    CHECK(hipMemcpy(dso, dsi, sizeof hs, hipMemcpyDeviceToDevice));
    hipLaunchKernelGGL(stencil, dim3((W + 15) / 16, (H + 15) / 16), dim3(16, 16), 0, 0, dsi, dso,
                       W, H);
    CHECK(hipMemcpy(hso, dso, sizeof hso, hipMemcpyDeviceToHost));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int i = y * W + x;
            float want_v = hs[i];
            if (x > 0 && y > 0 && x < W - 1 && y < H - 1)
                want_v = 0.5f * hs[i] + 0.125f * (hs[i - 1] + hs[i + 1] + hs[i - W] + hs[i + W]);
            if (hso[i] != want_v) {
                printf("FAILED stencil (%d,%d): %g, not %g\n", x, y, hso[i], want_v);
                return 1;
            }
        }
    printf("stencil %dx%d ok\n", W, H);

    CHECK(hipMemset(dso, 0x7f, sizeof hs));
    CHECK(hipMemcpy(hso, dso, sizeof hso, hipMemcpyDeviceToHost));
    for (int i = 0; i < W * H; i++)
        if (((unsigned char *)hso)[4 * i] != 0x7f) {
            printf("FAILED memset at %d\n", i);
            return 1;
        }
    printf("memset ok\n");
    hipFree(din);
    hipFree(dpart);
    hipFree(dtotal);
    hipFree(dc);
    hipFree(dm);
    hipFree(dcas);
    hipFree(dsi);
    hipFree(dso);
    printf("done\n");
    return 0;
}
