/*
 * hsaKmtRegisterMemory over memory that is not plain process memory, through libhsakmt 5.2.3
 * (Debian's, which registers with a USERPTR ALLOC: fmm_register_user_memory). Prints one
 * "<what> <HSAKMT_STATUS>" line per case, then "done":
 *  - "bo": the whole of a host-accessible VRAM BO libhsakmt allocated (vm_find_object finds
 *    it: registered with no ioctl, 0);
 *  - "bo-page": a page inside that BO, its CPU mapping through the render node (VM_IO |
 *    VM_PFNMAP: the ALLOC's EFAULT, HSAKMT_STATUS_ERROR 1);
 *  - "read-only": a PROT_READ page (EPERM: KFD faults a USERPTR's pages for writing; 1);
 *  - "hole": a page of plain memory and an unmapped one (EFAULT; 1);
 *  - "plain": a page of plain memory (0).
 * Deregisters and frees what it made.
 */
#include <hsakmt.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "hsakmt_check.h"

int main(void)
{
    HsaSystemProperties system;
    HsaMemFlags flags;
    HSAuint32 gpu = 0;
    void *bo = NULL;
    const HSAuint64 size = 2 << 20;

    CHECK(hsaKmtOpenKFD());
    CHECK(hsaKmtAcquireSystemProperties(&system));
    for (HSAuint32 node = 0; node < system.NumNodes; node++) {
        HsaNodeProperties props;
        CHECK(hsaKmtGetNodeProperties(node, &props));
        if (props.NumFComputeCores) {
            gpu = node;
            break;
        }
    }
    memset(&flags, 0, sizeof(flags));
    flags.ui32.HostAccess = 1;
    flags.ui32.NonPaged = 1;
    flags.ui32.PageSize = HSA_PAGE_SIZE_4KB;
    CHECK(hsaKmtAllocMemory(gpu, size, flags, &bo));

    printf("bo %d\n", hsaKmtRegisterMemory(bo, size));
    printf("bo-page %d\n", hsaKmtRegisterMemory((char *)bo + 4096, 4096));
    char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ro == MAP_FAILED || two == MAP_FAILED || rw == MAP_FAILED || munmap(two + 4096, 4096)) {
        fprintf(stderr, "FAILED mmap\n");
        return 1;
    }
    printf("read-only %d\n", hsaKmtRegisterMemory(ro, 4096));
    printf("hole %d\n", hsaKmtRegisterMemory(two, 8192));
    printf("plain %d\n", hsaKmtRegisterMemory(rw, 4096));

    CHECK(hsaKmtDeregisterMemory(rw));
    CHECK(hsaKmtFreeMemory(bo, size));
    CHECK(hsaKmtCloseKFD());
    printf("done\n");
    return 0;
}
