/*
 * A HIP 5.2.3 program (Debian's hipcc, --offload-arch=gfx90a) whose kernel traps: each
 * wave stores a marker, then `__builtin_trap()` (`s_trap 2`). On a GPU, the wave enters
 * the kernel's trap handler, then ROCr's, which reports EC_QUEUE_WAVE_TRAP to the runtime
 * and halts the wave; ROCr's exception handler calls HIP's queue error callback, which
 * reports HSA_STATUS_ERROR_EXCEPTION and aborts. Prints the marker line first (flushed).
 */
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void trapping(int *p)
{
    if (threadIdx.x == 0)
        p[blockIdx.x] = 1;
    __builtin_trap();
}

int main(void)
{
    int *p;
    if (hipMalloc(&p, 4 * sizeof(int))) {
        printf("hipMalloc failed\n");
        return 1;
    }
    printf("launch\n");
    fflush(stdout);
    hipLaunchKernelGGL(trapping, dim3(4), dim3(64), 0, 0, p);
    hipError_t e = hipDeviceSynchronize();
    /* Not reached when the queue error aborts the process. */
    printf("synchronized: %d\n", (int)e);
    return 0;
}
