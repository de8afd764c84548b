/*
 * A libhsakmt client: open KFD, read the version and the topology, allocate VRAM on every GPU
 * and paged system memory, map, unmap and free them, set and read back SVM attributes of
 * anonymous memory on every SVM-capable GPU, query and set the XNACK mode, close. Every call
 * must return HSAKMT_STATUS_SUCCESS (turning XNACK on may be NOT_SUPPORTED, which is printed);
 * the program prints one line per fact for the Rust test to check and exits non-zero at the
 * first failure, naming the call.
 */
#include <hsakmt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hsakmt_check.h"

static int alloc_map_free(HSAuint32 node, HSAuint64 size, int vram, int host)
{
    HsaMemFlags flags;
    void *mem = NULL;
    HSAuint64 alternate_va = 0;

    memset(&flags, 0, sizeof(flags));
    flags.ui32.PageSize = HSA_PAGE_SIZE_4KB;
    flags.ui32.HostAccess = host;
    if (vram) {
        flags.ui32.NonPaged = 1;
        flags.ui32.NoSubstitute = 1;
    }
    CHECK(hsaKmtAllocMemory(node, size, flags, &mem));
    if (mem == NULL) {
        fprintf(stderr, "FAILED hsaKmtAllocMemory returned NULL\n");
        return 1;
    }
    CHECK(hsaKmtMapMemoryToGPU(mem, size, &alternate_va));
    /* HostAccess memory is CPU-visible at the same address. */
    if (host) {
        memset(mem, 0x5a, 4096);
        if (((volatile unsigned char *)mem)[4095] != 0x5a) {
            fprintf(stderr, "FAILED CPU write through the mapping\n");
            return 1;
        }
    }
    CHECK(hsaKmtUnmapMemoryToGPU(mem));
    CHECK(hsaKmtFreeMemory(mem, size));
    printf("alloc node=%u kind=%s size=%llu ok\n", node,
           vram ? (host ? "vram" : "vram-device") : "system", (unsigned long long)size);
    return 0;
}

/* VRAM behind a small BAR (a FB_PRIVATE bank): CPU-visible VRAM is refused (the kernel's
 * ALLOC of VRAM|PUBLIC is EINVAL), VRAM for the GPU alone is allocated, mapped and freed. */
static int small_bar_vram(HSAuint32 node, HSAuint64 size)
{
    HsaMemFlags flags;
    void *mem = NULL;
    HSAKMT_STATUS status;

    memset(&flags, 0, sizeof(flags));
    flags.ui32.PageSize = HSA_PAGE_SIZE_4KB;
    flags.ui32.HostAccess = 1;
    flags.ui32.NonPaged = 1;
    flags.ui32.NoSubstitute = 1;
    status = hsaKmtAllocMemory(node, size, flags, &mem);
    if (status == HSAKMT_STATUS_SUCCESS) {
        fprintf(stderr, "FAILED CPU-visible VRAM allocated behind a small BAR\n");
        return 1;
    }
    printf("alloc node=%u kind=vram size=%llu refused\n", node, (unsigned long long)size);
    return alloc_map_free(node, size, 1, 0);
}

#define EXPECT(cond)                                                                 \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "FAILED %s (line %d)\n", #cond, __LINE__);               \
            return 1;                                                                \
        }                                                                            \
    } while (0)

/* SVM attributes of 2 MiB of anonymous memory, set with node ids (which libhsakmt turns into
 * gpu_ids) and read back (gpu_ids turned into node ids again). */
static int svm_round_trip(HSAuint32 node)
{
    const HSAuint64 size = 2 << 20;
    const HSAuint32 flags = HSA_SVM_FLAG_HOST_ACCESS | HSA_SVM_FLAG_GPU_EXEC;
    HSA_SVM_ATTRIBUTE set[] = {
        {HSA_SVM_ATTR_PREFERRED_LOC, node},
        {HSA_SVM_ATTR_ACCESS, node},
        {HSA_SVM_ATTR_SET_FLAGS, HSA_SVM_FLAG_GPU_EXEC},
        {HSA_SVM_ATTR_CLR_FLAGS, HSA_SVM_FLAG_COHERENT},
        {HSA_SVM_ATTR_GRANULARITY, 4},
        {HSA_SVM_ATTR_PREFETCH_LOC, node},
    };
    HSA_SVM_ATTRIBUTE get[] = {
        {HSA_SVM_ATTR_PREFERRED_LOC, 0},
        {HSA_SVM_ATTR_PREFETCH_LOC, 0},
        {HSA_SVM_ATTR_ACCESS, node},
        {HSA_SVM_ATTR_SET_FLAGS, 0},
        {HSA_SVM_ATTR_CLR_FLAGS, 0},
        {HSA_SVM_ATTR_GRANULARITY, 0},
    };
    unsigned char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                              -1, 0);

    EXPECT(mem != MAP_FAILED);
    memset(mem, 0x3c, size);
    CHECK(hsaKmtSVMSetAttr(mem, size, sizeof(set) / sizeof(set[0]), set));
    CHECK(hsaKmtSVMGetAttr(mem, size, sizeof(get) / sizeof(get[0]), get));
    EXPECT(get[0].value == node);
    EXPECT(get[1].value == node);
    EXPECT(get[2].type == HSA_SVM_ATTR_ACCESS && get[2].value == node);
    EXPECT(get[3].value == flags);
    EXPECT(get[4].value == ~flags);
    EXPECT(get[5].value == 4);
    /* Prefetched to the GPU, the data is still what the CPU wrote. */
    EXPECT(mem[0] == 0x3c && mem[size - 1] == 0x3c);
    EXPECT(munmap(mem, size) == 0);
    printf("svm node=%u ok\n", node);
    return 0;
}

/* The XNACK mode: query it, set the mode it has, then turn it on where the GPUs allow. */
static int xnack(void)
{
    HSAint32 mode = -1;
    HSAKMT_STATUS status;

    CHECK(hsaKmtGetXNACKMode(&mode));
    printf("xnack mode=%d\n", mode);
    CHECK(hsaKmtSetXNACKMode(mode));
    status = hsaKmtSetXNACKMode(1);
    if (status == HSAKMT_STATUS_NOT_SUPPORTED) {
        printf("xnack on not-supported\n");
        return 0;
    }
    CHECK(status);
    CHECK(hsaKmtGetXNACKMode(&mode));
    EXPECT(mode == 1);
    CHECK(hsaKmtSetXNACKMode(0));
    printf("xnack on ok\n");
    return 0;
}

int main(void)
{
    HsaVersionInfo version;
    HsaSystemProperties system;
    HSAuint32 node;

    CHECK(hsaKmtOpenKFD());
    CHECK(hsaKmtGetVersion(&version));
    printf("version %u.%u\n", version.KernelInterfaceMajorVersion,
           version.KernelInterfaceMinorVersion);
    CHECK(hsaKmtAcquireSystemProperties(&system));
    printf("nodes %u\n", system.NumNodes);

    for (node = 0; node < system.NumNodes; node++) {
        HsaNodeProperties props;
        CHECK(hsaKmtGetNodeProperties(node, &props));
        printf("node %u cpu_cores=%u simds=%u banks=%u caches=%u links=%u gfx=%u.%u.%u "
               "render=%d simd_per_cu=%u\n",
               node, props.NumCPUCores, props.NumFComputeCores, props.NumMemoryBanks,
               props.NumCaches, props.NumIOLinks, props.EngineId.ui32.Major,
               props.EngineId.ui32.Minor, props.EngineId.ui32.Stepping, props.DrmRenderMinor,
               props.NumSIMDPerCU);
        int small_bar = 0;
        if (props.NumMemoryBanks > 0) {
            HsaMemoryProperties *banks = calloc(props.NumMemoryBanks, sizeof(*banks));
            HSAuint32 b;
            HSAuint64 vram = 0;
            if (banks == NULL)
                return 1;
            CHECK(hsaKmtGetNodeMemoryProperties(node, props.NumMemoryBanks, banks));
            for (b = 0; b < props.NumMemoryBanks; b++) {
                if (banks[b].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC ||
                    banks[b].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PRIVATE)
                    vram += banks[b].SizeInBytes;
                if (banks[b].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PRIVATE)
                    small_bar = 1;
            }
            printf("node %u vram=%llu\n", node, (unsigned long long)vram);
            free(banks);
        }
        if (props.NumFComputeCores > 0 && small_bar && small_bar_vram(node, 2 << 20))
            return 1;
        if (props.NumFComputeCores > 0 && !small_bar && alloc_map_free(node, 2 << 20, 1, 1))
            return 1;
        if (props.NumFComputeCores > 0 && props.Capability.ui32.SVMAPISupported &&
            svm_round_trip(node))
            return 1;
    }
    if (alloc_map_free(0, 1 << 20, 0, 1))
        return 1;
    if (xnack())
        return 1;

    CHECK(hsaKmtReleaseSystemProperties());
    CHECK(hsaKmtCloseKFD());
    printf("done\n");
    return 0;
}
