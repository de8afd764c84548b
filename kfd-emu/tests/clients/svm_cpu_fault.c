/*
 * CPU faults on SVM memory the GPU holds (kfd_migrate.c, svm_migrate_to_ram), as a libhsakmt
 * program sees them: XNACK on, a 4 MiB range (two 2 MiB granules) prefetched to the first
 * GPU, an SDMA FENCE writing into its second granule while it is in VRAM, then the CPU
 * reads it back. Between steps it prints "phase NAME" and the SMI records read so far
 * ("smi RECORD"), and what it read ("value NAME 0x..."), for the Rust test to check. Then a
 * forked child reads its copy of a granule the GPU holds, the program makes a granule in VRAM
 * read-only and reads it (and its write then faults to its own handler), two threads read the first granule at once, a SIGSEGV of the
 * program's own is delivered to its own handler, and it prints "done". Exits non-zero at the
 * first failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hsakmt_gpu.h"

#include "svm_client.h"

static volatile unsigned char *mem;
static pthread_barrier_t barrier;

static void *reader(void *arg)
{
    uint64_t offset = (uint64_t)(uintptr_t)arg;
    pthread_barrier_wait(&barrier);
    return (void *)(uintptr_t)mem[offset];
}

static sigjmp_buf jump;

static void own_handler(int sig)
{
    (void)sig;
    siglongjmp(jump, 1);
}

/* Writes `value` to `at` with own_handler taking SIGSEGV: whether the write faulted (the
 * handler ran). The default action is back after. */
static int write_faults(volatile uint32_t *at, uint32_t value)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        return -1;
    int faulted = 1;
    if (sigsetjmp(jump, 1) == 0) {
        *at = value;
        faulted = 0;
    }
    signal(SIGSEGV, SIG_DFL);
    return faulted;
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

    unsigned char *raw = mmap(NULL, 3 * granule, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(raw != MAP_FAILED);
    unsigned char *buf = (unsigned char *)(((uintptr_t)raw + granule - 1) & ~(granule - 1));
    mem = buf;
    memset(buf, 0x3c, 2 * granule);
    printf("range 0x%llx pages 0x%llx gpu 0x%x\n", (unsigned long long)(uintptr_t)buf >> 12,
           (unsigned long long)(2 * granule) >> 12, gpu_id);
    drain("start");

    HSA_SVM_ATTRIBUTE set[] = {
        { HSA_SVM_ATTR_ACCESS, node },
        { HSA_SVM_ATTR_PREFETCH_LOC, node },
    };
    CHECK(hsaKmtSVMSetAttr(buf, 2 * granule, 2, set));
    drain("prefetch");

    /* The GPU writes into the second granule while it is in VRAM. */
    EXPECT(gpu_write((uint64_t)(uintptr_t)(buf + granule + 0x100), 0xdeadbeef, 1) == 0);
    drain("gpu-write");

    /* One CPU read of one page of it. */
    printf("value cpu-read %#x\n", *(volatile uint32_t *)(buf + granule + 0x100));
    drain("cpu-read");
    printf("value cpu-read-again %#x\n", mem[granule + (1 << 20)]);
    drain("cpu-read-again");

    /* The GPU's next access to it faults again. */
    EXPECT(gpu_write((uint64_t)(uintptr_t)(buf + granule + 0x200), 0xfeed, 2) == 0);
    drain("gpu-again");
    /* In VRAM again, so hidden again: the CPU's next read faults it back. */
    printf("value cpu-after-gpu %#x\n", *(volatile uint32_t *)(buf + granule + 0x200));
    drain("cpu-after-gpu");

    /* A forked child reads its copy of the first granule, which the GPU holds. */
    pid_t child = fork();
    EXPECT(child >= 0);
    if (child == 0)
        _exit(mem[8] == 0x3c && mem[granule - 1] == 0x3c ? 0 : 7);
    int child_status = 0;
    EXPECT(waitpid(child, &child_status, 0) == child);
    printf("fork-child %s\n",
           WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0 ? "ok" : "failed");
    drain("fork");

    /* The program's own mprotect of memory in VRAM: read-only now, still faults back. */
    EXPECT(gpu_write((uint64_t)(uintptr_t)(buf + granule + 0x300), 0xabc, 3) == 0);
    drain("gpu-third");
    EXPECT(mprotect(buf + granule, granule, PROT_READ) == 0);
    drain("mprotect");
    printf("value read-only %#x\n", *(volatile uint32_t *)(buf + granule + 0x300));
    drain("read-only");
    /* Home again with the program's own protection: its write is the program's fault,
     * delivered to its handler (neither the model's nor restarted for ever), and lands nothing. */
    EXPECT(write_faults((volatile uint32_t *)(buf + granule + 0x300), 0x1234) == 1);
    printf("value read-only-write %#x\n", *(volatile uint32_t *)(buf + granule + 0x300));
    drain("read-only-write");
    EXPECT(mprotect(buf + granule, granule, PROT_READ | PROT_WRITE) == 0);

    /* Two threads read the first granule at once. */
    pthread_t t[2];
    void *got[2];
    pthread_barrier_init(&barrier, NULL, 2);
    EXPECT(pthread_create(&t[0], NULL, reader, (void *)(uintptr_t)0) == 0);
    EXPECT(pthread_create(&t[1], NULL, reader, (void *)(uintptr_t)4096) == 0);
    EXPECT(pthread_join(t[0], &got[0]) == 0 && pthread_join(t[1], &got[1]) == 0);
    printf("value threads %#x %#x\n", (unsigned)(uintptr_t)got[0], (unsigned)(uintptr_t)got[1]);
    drain("threads");

    /* A fault of the program's own reaches its own handler. */
    unsigned char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(none != MAP_FAILED);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGSEGV, &sa, NULL) == 0);
    if (sigsetjmp(jump, 1) == 0) {
        printf("value own %#x\n", *(volatile unsigned char *)none);
        fprintf(stderr, "FAILED a PROT_NONE page was readable\n");
        return 1;
    }
    printf("own-handler ok\n");

    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    EXPECT(munmap(raw, 3 * granule) == 0);
    printf("done\n");
    return 0;
}
