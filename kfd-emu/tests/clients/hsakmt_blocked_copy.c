/*
 * Two libhsakmt processes under one kfd-emu. The child's SDMA COPY_LINEAR reads a page of its
 * own behind a userfaultfd nobody serves (a USERPTR BO from hsaKmtRegisterMemory), so its
 * engine blocks there. Meanwhile the parent's 10 ms hsaKmtWaitOnEvent must still time out in
 * about 10 ms (five tries), then the child's hsaKmtDestroyQueue and its exit must complete.
 * The parent prints "waits <ms> ...", "destroy <ms>", "exit <ms>" and "done"; exits non-zero
 * at the first failure, naming it. Needs a userfaultfd that catches the kernel's accesses
 * (root, or vm.unprivileged_userfaultfd = 1): exits 77 without one.
 */
#include <fcntl.h>
#include <hsakmt.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hsakmt_gpu.h"

#define FAIL(...)                                                                        \
    do {                                                                                 \
        fprintf(stderr, "FAILED " __VA_ARGS__);                                          \
        fprintf(stderr, " (line %d)\n", __LINE__);                                       \
        return 1;                                                                        \
    } while (0)

/* The first GPU node (one with compute cores). */
static int first_gpu(HSAuint32 *gpu)
{
    HsaSystemProperties system;
    HSAuint32 node;

    CHECK(hsaKmtAcquireSystemProperties(&system));
    for (node = 0; node < system.NumNodes; node++) {
        HsaNodeProperties props;
        CHECK(hsaKmtGetNodeProperties(node, &props));
        if (props.NumFComputeCores != 0) {
            *gpu = node;
            return 0;
        }
    }
    FAIL("no GPU node");
}

/* A page behind a new userfaultfd nobody serves: its fd, or -1 (errno set). */
static int unserved_page(void **page)
{
    struct uffdio_api api = {.api = UFFD_API};
    struct uffdio_register reg;
    int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);

    if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) != 0)
        return -1;
    *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*page == MAP_FAILED)
        return -1;
    memset(&reg, 0, sizeof(reg));
    reg.range.start = (uint64_t)(uintptr_t)*page;
    reg.range.len = 4096;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0)
        return -1;
    return uffd;
}

/* The child: a copy out of the unserved page, then a fence; reports 'B' once its engine
 * blocked on the page, then on the parent's word destroys the queue and reports the time. */
static int child(int report, int go)
{
    void *ring = NULL, *target = NULL, *page = NULL;
    HSAuint64 alternate_va = 0;
    HsaQueueResource qr;
    HSAuint32 node = 0;
    uint32_t *p;
    uint64_t src, dst;
    struct pollfd fault;
    char word;
    double t;
    int uffd = unserved_page(&page);

    if (uffd < 0) {
        word = 'U';
        (void)!write(report, &word, 1);
        return 77;
    }
    CHECK(hsaKmtOpenKFD());
    if (first_gpu(&node) || system_memory(node, 4096, &ring) ||
        system_memory(node, 4096, &target))
        return 1;
    CHECK(hsaKmtRegisterMemory(page, 4096));
    CHECK(hsaKmtMapMemoryToGPU(page, 4096, &alternate_va));
    memset(&qr, 0, sizeof(qr));
    CHECK(hsaKmtCreateQueue(node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, 4096,
                            NULL, &qr));
    /* The GPU address libhsakmt gave the USERPTR BO (its own, not the CPU's). */
    src = alternate_va ? alternate_va : (uint64_t)(uintptr_t)page;
    dst = (uint64_t)(uintptr_t)target;
    p = ring;
    /* COPY_LINEAR (op 1, sub-op 0) of 64 bytes, then FENCE (op 5). */
    p[0] = 1;
    p[1] = 64 - 1;
    p[2] = 0;
    p[3] = (uint32_t)src;
    p[4] = (uint32_t)(src >> 32);
    p[5] = (uint32_t)dst;
    p[6] = (uint32_t)(dst >> 32);
    p[7] = 5 | 3 << 16;
    p[8] = (uint32_t)(dst + 64);
    p[9] = (uint32_t)((dst + 64) >> 32);
    p[10] = 0xC0FFEE;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile HSAuint64 *)qr.Queue_write_ptr_aql = 44;
    *(volatile HSAuint64 *)qr.Queue_DoorBell_aql = 44;
    fault.fd = uffd;
    fault.events = POLLIN;
    if (poll(&fault, 1, 10000) != 1)
        FAIL("the copy never read the unserved page");
    word = 'B';
    if (write(report, &word, 1) != 1 || read(go, &word, 1) != 1)
        FAIL("the parent went away");
    t = seconds();
    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    t = (seconds() - t) * 1000;
    if (write(report, &t, sizeof(t)) != sizeof(t))
        FAIL("the parent went away");
    /* Exits with everything still allocated and the copy still blocked: the exit cleans up. */
    return 0;
}

int main(void)
{
    int report[2], go[2];
    HsaEventDescriptor desc;
    HsaEvent *event;
    HSAuint32 node = 0;
    pid_t pid;
    double waits[5], destroy, t;
    char word;
    int i, status;

    if (pipe(report) || pipe(go))
        return 1;
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(report[0]);
        close(go[1]);
        _exit(child(report[1], go[0]));
    }
    /* Each side holds only its ends: a side that dies is seen by the other. */
    close(report[1]);
    close(go[0]);
    if (read(report[0], &word, 1) != 1)
        FAIL("the child failed before its copy blocked");
    if (word == 'U') {
        fprintf(stderr, "no userfaultfd that catches the kernel's accesses here\n");
        return 77;
    }
    CHECK(hsaKmtOpenKFD());
    if (first_gpu(&node))
        return 1;
    memset(&desc, 0, sizeof(desc));
    desc.EventType = HSA_EVENTTYPE_SIGNAL;
    desc.NodeId = node;
    CHECK(hsaKmtCreateEvent(&desc, false, false, &event));
    for (i = 0; i < 5; i++) {
        HSAKMT_STATUS r;
        t = seconds();
        r = hsaKmtWaitOnEvent(event, 10);
        waits[i] = (seconds() - t) * 1000;
        if (r != HSAKMT_STATUS_WAIT_TIMEOUT)
            FAIL("hsaKmtWaitOnEvent = %d, not a timeout", (int)r);
    }
    printf("waits");
    for (i = 0; i < 5; i++)
        printf(" %.1f", waits[i]);
    printf("\n");
    word = 'G';
    if (write(go[1], &word, 1) != 1 || read(report[0], &destroy, sizeof(destroy)) != sizeof(destroy))
        FAIL("the child's hsaKmtDestroyQueue failed");
    printf("destroy %.1f\n", destroy);
    t = seconds();
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (seconds() - t > 20)
            FAIL("the child never exited");
        usleep(1000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("the child failed: status %#x", status);
    printf("exit %.1f\n", (seconds() - t) * 1000);
    CHECK(hsaKmtDestroyEvent(event));
    CHECK(hsaKmtCloseKFD());
    printf("done\n");
    return 0;
}
