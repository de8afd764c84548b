/* What the libhsakmt queue clients share: GPU-mapped system memory, a clock, and a main
 * that runs a test on every GPU node. */
#ifndef HSAKMT_GPU_H
#define HSAKMT_GPU_H

#include <hsakmt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hsakmt_check.h"

/* Allocates `size` bytes of zeroed system memory for `node` and maps it on its GPU. */
static inline int system_memory(HSAuint32 node, HSAuint64 size, void **mem)
{
    HsaMemFlags flags;
    HSAuint64 alternate_va = 0;

    memset(&flags, 0, sizeof(flags));
    flags.ui32.PageSize = HSA_PAGE_SIZE_4KB;
    flags.ui32.HostAccess = 1;
    flags.ui32.ExecuteAccess = 1;
    CHECK(hsaKmtAllocMemory(node, size, flags, mem));
    CHECK(hsaKmtMapMemoryToGPU(*mem, size, &alternate_va));
    memset(*mem, 0, size);
    return 0;
}

/* Unmaps and frees what system_memory gave. */
static inline int free_system_memory(void *mem, HSAuint64 size)
{
    CHECK(hsaKmtUnmapMemoryToGPU(mem));
    CHECK(hsaKmtFreeMemory(mem, size));
    return 0;
}

static inline double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Opens KFD, runs `test` on every GPU node (one with compute cores), closes KFD and prints
 * "done"; 1 at the first failure. */
static inline int on_every_gpu(int (*test)(HSAuint32 node))
{
    HsaSystemProperties system;
    HSAuint32 node;

    CHECK(hsaKmtOpenKFD());
    CHECK(hsaKmtAcquireSystemProperties(&system));
    for (node = 0; node < system.NumNodes; node++) {
        HsaNodeProperties props;
        CHECK(hsaKmtGetNodeProperties(node, &props));
        if (props.NumFComputeCores == 0)
            continue;
        if (test(node))
            return 1;
    }
    CHECK(hsaKmtReleaseSystemProperties());
    CHECK(hsaKmtCloseKFD());
    printf("done\n");
    return 0;
}

#endif
