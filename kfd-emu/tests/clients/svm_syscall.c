/*
 * System calls given SVM memory the GPU holds, under kfd-emu run: on the kernel their
 * copy_to_user / copy_from_user touches device-private pages, whose fault
 * (svm_migrate_to_ram, kfd_migrate.c) brings each touched granule home, and the call
 * succeeds. XNACK on, an 8 MiB range (four 2 MiB granules) prefetched to the first GPU, an
 * SDMA FENCE writing into its first granule while it is in VRAM; then write() from that
 * granule into a pipe, read() from the pipe into the second granule, and readv() into the
 * fourth and then the second... third granule (iovecs in that order). Between steps it prints
 * "phase NAME" and the SMI records read so far ("smi RECORD"), and what it read
 * ("value NAME 0x..."), for the Rust test to check; then "done". Exits non-zero at the first
 * failure (a call failing with EFAULT among them).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hsakmt_gpu.h"

#include "svm_client.h"

int main(void)
{
    HsaSystemProperties system;
    HsaNodeProperties props;
    HSAuint32 node = 0;
    HSAKMT_STATUS status;

    CHECK(hsaKmtOpenKFD());
    CHECK(hsaKmtAcquireSystemProperties(&system));
    for (node = 0; node < system.NumNodes; node++) {
        CHECK(hsaKmtGetNodeProperties(node, &props));
        if (props.NumFComputeCores != 0)
            break;
    }
    EXPECT(node < system.NumNodes);
    status = hsaKmtSetXNACKMode(1);
    if (status == HSAKMT_STATUS_NOT_SUPPORTED) {
        printf("xnack not-supported\n");
        return 0;
    }
    CHECK(status);

    uint32_t gpu_id = gpu_id_of(node);
    EXPECT(gpu_id != 0);
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    EXPECT(kfd >= 0);
    struct kfd_ioctl_smi_events_args args = { .gpuid = gpu_id };
    EXPECT(ioctl(kfd, AMDKFD_IOC_SMI_EVENTS, &args) == 0);
    smi = (int)args.anon_fd;
    uint64_t mask = SMI_MASK;
    EXPECT(write(smi, &mask, sizeof(mask)) == sizeof(mask));

    void *ring_mem = NULL, *flag_mem = NULL;
    if (system_memory(node, 4096, &ring_mem) || system_memory(node, 4096, &flag_mem))
        return 1;
    ring = ring_mem;
    flag = flag_mem;
    memset(&qr, 0, sizeof(qr));
    CHECK(hsaKmtCreateQueue(node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, 4096,
                            NULL, &qr));

    unsigned char *raw = mmap(NULL, 5 * granule, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(raw != MAP_FAILED);
    unsigned char *buf = (unsigned char *)(((uintptr_t)raw + granule - 1) & ~(granule - 1));
    memset(buf, 0x3c, 4 * granule);
    printf("range 0x%llx pages 0x%llx gpu 0x%x\n", (unsigned long long)(uintptr_t)buf >> 12,
           (unsigned long long)(4 * granule) >> 12, gpu_id);
    drain("start");

    HSA_SVM_ATTRIBUTE set[] = {
        { HSA_SVM_ATTR_ACCESS, node },
        { HSA_SVM_ATTR_PREFETCH_LOC, node },
    };
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 2, set));
    drain("prefetch");

    /* The GPU writes into the first granule while it is in VRAM. */
    EXPECT(gpu_write((uint64_t)(uintptr_t)(buf + 0x100), 0xdeadbeef, 1) == 0);
    drain("gpu-write");

    int p[2];
    EXPECT(pipe(p) == 0);
    uint32_t v = 0;

    /* write() from the first granule: the kernel's copy_from_user faults it home. */
    EXPECT(write(p[1], buf + 0x100, 4) == 4);
    drain("write");
    EXPECT(read(p[0], &v, 4) == 4);
    printf("value write %#x\n", v);

    /* read() into the second granule: copy_to_user faults it home. */
    v = 0x12345678;
    EXPECT(write(p[1], &v, 4) == 4);
    EXPECT(read(p[0], buf + granule + 8, 4) == 4);
    drain("read");
    printf("value read %#x\n", *(volatile uint32_t *)(buf + granule + 8));
    drain("read-check");

    /* readv() into the fourth granule, then the third: faulted home in the iovecs' order. */
    uint32_t two[2] = { 0xaaaa0001, 0xbbbb0002 };
    EXPECT(write(p[1], two, 8) == 8);
    struct iovec iov[2] = {
        { .iov_base = buf + 3 * granule + 16, .iov_len = 4 },
        { .iov_base = buf + 2 * granule + 16, .iov_len = 4 },
    };
    EXPECT(readv(p[0], iov, 2) == 8);
    drain("readv");
    printf("value readv %#x %#x\n", *(volatile uint32_t *)(buf + 3 * granule + 16),
           *(volatile uint32_t *)(buf + 2 * granule + 16));

    /* Memory home already: nothing moves. */
    EXPECT(write(p[1], &v, 4) == 4);
    EXPECT(read(p[0], buf + granule + 12, 4) == 4);
    drain("again");

    /* All of it to the GPU again; then getrandom() into the first granule, pwrite() from the
     * second into a file and pread() from it into the third. */
    HSA_SVM_ATTRIBUTE again[] = { { HSA_SVM_ATTR_PREFETCH_LOC, node } };
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-again");
    EXPECT(getrandom(buf + 0x40, 16, 0) == 16);
    drain("getrandom");
    FILE *tmp = tmpfile();
    EXPECT(tmp != NULL);
    int fd = fileno(tmp);
    EXPECT(pwrite(fd, buf + granule + 8, 4, 0) == 4);
    drain("pwrite");
    EXPECT(pread(fd, buf + 2 * granule + 32, 4, 0) == 4);
    drain("pread");
    printf("value pread %#x\n", *(volatile uint32_t *)(buf + 2 * granule + 32));
    fclose(tmp);

    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    EXPECT(munmap(raw, 5 * granule) == 0);
    printf("done\n");
    return 0;
}
