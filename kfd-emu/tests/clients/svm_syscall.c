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
 *
 * Then the calls that copy structs rather than buffers, each given memory in VRAM (the
 * range prefetched again before each group): fstat() into the first granule; FIONREAD into
 * the second; AMDKFD_IOC_GET_VERSION into the third; a private FUTEX_WAKE on a word of the
 * fourth (the kernel touches no memory: nothing moves), a private FUTEX_WAIT on it (the GPU
 * wrote 0xf00d there: EAGAIN for 0, the granule home; ETIMEDOUT for 0xf00d with a zero
 * timeout) and a shared FUTEX_WAKE on a word of the
 * first (get_futex_key's get_user_pages_fast: home); clock_gettime() as a system call into
 * the second and through the vDSO (a CPU fault) into the third; poll() of a pollfd in the
 * third; sendmsg() of a msghdr and iovec in the fourth sending the GPU's 0xdeadbeef from the
 * first (the fourth home, then the first); recvmsg() of a msghdr in the second into the
 * third (in that order); and two calls the tracer's table does not describe, left to its
 * exit fallback: getcwd() into the fourth, and AMDKFD_IOC_GET_PROCESS_APERTURES_NEW whose
 * struct (on the stack) points at an array in the second.
 *
 * Last, the range prefetched again and the second and fourth granules read right after the
 * prefetch returns (each faults home); then a forked child's copy of memory the GPU holds
 * (the first and third granules): its write() from the first and its getcwd() into the
 * third (the exit fallback) succeed; and a read() into a granule in VRAM the program made read-only fails with
 * EFAULT, moving nothing, as on the kernel.
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
#include <linux/futex.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hsakmt_gpu.h"

#include "svm_client.h"

/* kfd_ioctl.h's (the installed header may predate them). */
struct get_version_args {
    uint32_t major_version;
    uint32_t minor_version;
};
#define GET_VERSION _IOR('K', 0x01, struct get_version_args)
struct device_apertures {
    uint64_t lds_base, lds_limit, scratch_base, scratch_limit, gpuvm_base, gpuvm_limit;
    uint32_t gpu_id;
    uint32_t pad;
};
struct apertures_new_args {
    uint64_t kfd_process_device_apertures_ptr;
    uint32_t num_of_nodes;
    uint32_t pad;
};
#define GET_PROCESS_APERTURES_NEW _IOWR('K', 0x14, struct apertures_new_args)

static long futex(void *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

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

    /* Structs: fstat(), FIONREAD, a KFD ioctl. */
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-structs");
    struct stat *st = (struct stat *)(buf + 0x1000);
    EXPECT(fstat(p[0], st) == 0);
    drain("fstat");
    printf("value fstat fifo %d gpu %#x\n", S_ISFIFO(st->st_mode) ? 1 : 0,
           *(volatile uint32_t *)(buf + 0x100));
    EXPECT(write(p[1], "hello", 5) == 5);
    int *pending = (int *)(buf + granule + 0x40);
    EXPECT(ioctl(p[0], FIONREAD, pending) == 0);
    drain("fionread");
    printf("value fionread %d\n", *pending);
    char five[5];
    EXPECT(read(p[0], five, 5) == 5);
    struct get_version_args *version = (struct get_version_args *)(buf + 2 * granule + 0x80);
    EXPECT(ioctl(kfd, GET_VERSION, version) == 0);
    drain("kfd-version");
    printf("value kfd-version %u\n", version->major_version);

    /* Futex words. */
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-futex");
    uint32_t *word = (uint32_t *)(buf + 3 * granule + 0x200);
    EXPECT(gpu_write((uint64_t)(uintptr_t)word, 0xf00d, 2) == 0);
    drain("gpu-write-futex");
    EXPECT(futex(word, FUTEX_WAKE_PRIVATE, 1) == 0);
    drain("futex-wake-private");
    EXPECT(futex(word, FUTEX_WAIT_PRIVATE, 0) == -1 && errno == EAGAIN);
    drain("futex-wait");
    /* The word is the GPU's 0xf00d: a wait for that value with a zero timeout times out. */
    struct timespec zero = { 0, 0 };
    EXPECT(syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 0xf00d, &zero, NULL, 0) == -1 &&
           errno == ETIMEDOUT);
    drain("futex-wait-value");
    EXPECT(futex(buf + 0x200, FUTEX_WAKE, 1) == 0);
    drain("futex-wake-shared");

    /* Time. */
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-time");
    struct timespec *ts = (struct timespec *)(buf + granule + 0x300);
    EXPECT(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, ts) == 0);
    drain("clock-gettime");
    struct timespec *vts = (struct timespec *)(buf + 2 * granule + 0x300);
    EXPECT(clock_gettime(CLOCK_MONOTONIC, vts) == 0);
    drain("clock-vdso");
    printf("value clock %d\n", ts->tv_sec != 0 && vts->tv_sec >= ts->tv_sec);

    /* poll(), sendmsg(), recvmsg(): their structs set up in place, then sent to the GPU. */
    struct pollfd *pf = (struct pollfd *)(buf + 2 * granule + 0x400);
    *pf = (struct pollfd){ .fd = p[0], .events = POLLIN };
    int sv[2];
    EXPECT(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
    struct iovec *send_iov = (struct iovec *)(buf + 3 * granule + 0x500);
    *send_iov = (struct iovec){ .iov_base = buf + 0x100, .iov_len = 4 };
    struct msghdr *send_msg = (struct msghdr *)(buf + 3 * granule + 0x400);
    *send_msg = (struct msghdr){ .msg_iov = send_iov, .msg_iovlen = 1 };
    struct iovec *recv_iov = (struct iovec *)(buf + granule + 0x500);
    *recv_iov = (struct iovec){ .iov_base = buf + 2 * granule + 0x600, .iov_len = 4 };
    struct msghdr *recv_msg = (struct msghdr *)(buf + granule + 0x400);
    *recv_msg = (struct msghdr){ .msg_iov = recv_iov, .msg_iovlen = 1 };
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-poll");
    EXPECT(write(p[1], &v, 4) == 4);
    EXPECT(poll(pf, 1, 0) == 1);
    drain("poll");
    printf("value poll %#x\n", pf->revents);
    EXPECT(read(p[0], &v, 4) == 4);
    EXPECT(sendmsg(sv[0], send_msg, 0) == 4);
    drain("sendmsg");
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-recvmsg");
    EXPECT(recvmsg(sv[1], recv_msg, 0) == 4);
    drain("recvmsg");
    printf("value recvmsg %#x\n", *(volatile uint32_t *)(buf + 2 * granule + 0x600));

    /* Calls the table does not describe: the exit fallback's. */
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    drain("prefetch-fallback");
    char *cwd = (char *)(buf + 3 * granule + 0x800);
    EXPECT(syscall(SYS_getcwd, cwd, 4096) > 0);
    drain("getcwd");
    char here[4096];
    EXPECT(getcwd(here, sizeof(here)) != NULL);
    printf("value getcwd %d\n", strcmp(cwd, here) == 0);
    struct device_apertures *apertures = (struct device_apertures *)(buf + granule + 0x800);
    struct apertures_new_args ask = {
        .kfd_process_device_apertures_ptr = (uint64_t)(uintptr_t)apertures,
        .num_of_nodes = 1,
    };
    EXPECT(ioctl(kfd, GET_PROCESS_APERTURES_NEW, &ask) == 0);
    drain("apertures");
    printf("value apertures %u %d\n", ask.num_of_nodes, apertures->gpu_id != 0);

    /* A forked child's system calls on its copy of memory in VRAM. */
    CHECK(hsaKmtSVMSetAttr(buf, 4 * granule, 1, again));
    /* Read right after the prefetch returns: what it moved is hidden before the program
     * runs on (its thread stops at the call's exit), so both reads fault. */
    uint32_t split = *(volatile uint32_t *)(buf + granule + 8);
    split += *(volatile uint32_t *)(buf + 3 * granule);
    drain("fork-split");
    printf("value fork-split %#x\n", split);
    int fp[2];
    EXPECT(pipe(fp) == 0);
    pid_t child = fork();
    EXPECT(child >= 0);
    if (child == 0) {
        int ok = write(fp[1], buf + 0x100, 4) == 4;
        ok = ok && syscall(SYS_getcwd, buf + 2 * granule + 0x900, 4096) > 0;
        ok = ok && strcmp((char *)buf + 2 * granule + 0x900, here) == 0;
        _exit(ok ? 0 : 9);
    }
    int child_status = 0;
    EXPECT(waitpid(child, &child_status, 0) == child);
    printf("fork-child %s\n",
           WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? "ok" : "failed");
    EXPECT(read(fp[0], &v, 4) == 4);
    printf("value fork-write %#x\n", v);
    drain("fork");

    /* read() into the third granule (in VRAM) made read-only: the kernel's copy_to_user
     * faults for writing into a VMA without VM_WRITE (access_error) and fails with EFAULT
     * before any migration; the bytes stay in the pipe. */
    EXPECT(mprotect(buf + 2 * granule, granule, PROT_READ) == 0);
    EXPECT(write(p[1], &v, 4) == 4);
    drain("read-only-setup");
    EXPECT(read(p[0], buf + 2 * granule + 0x20, 4) == -1 && errno == EFAULT);
    drain("read-only");
    EXPECT(mprotect(buf + 2 * granule, granule, PROT_READ | PROT_WRITE) == 0);
    uint32_t left = 0;
    EXPECT(read(p[0], &left, 4) == 4);
    printf("value read-only %#x\n", left);

    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    EXPECT(munmap(raw, 5 * granule) == 0);
    printf("done\n");
    return 0;
}
