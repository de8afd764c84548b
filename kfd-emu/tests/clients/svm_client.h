/*
 * What the SVM clients (svm_cpu_fault.c, svm_syscall.c) share: the SMI event fd they read
 * their migration records from (AMDKFD_IOC_SMI_EVENTS), EXPECT, the 2 MiB granule, the
 * first GPU's id, and an SDMA queue whose FENCE packets write a value at an address (the
 * GPU's write into SVM memory) and then a flag the client polls. Included once, by one client each.
 */
#ifndef SVM_CLIENT_H
#define SVM_CLIENT_H

struct kfd_ioctl_smi_events_args {
    uint32_t gpuid;
    uint32_t anon_fd;
};
#define AMDKFD_IOC_SMI_EVENTS _IOWR('K', 0x1F, struct kfd_ioctl_smi_events_args)
/* KFD_SMI_EVENT_MASK_FROM_INDEX of MIGRATE_START (5) ... UNMAP_FROM_GPU (11). */
#define SMI_MASK (0x7fULL << 4)

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "FAILED %s (line %d)\n", #cond, __LINE__);                \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static const uint64_t granule = 2 << 20;
static int smi;

/* Prints the SMI records already written (the model writes them before the call or the
 * access that makes them returns). */
static void drain(const char *phase)
{
    char buf[16384];
    printf("phase %s\n", phase);
    for (;;) {
        struct pollfd p = { .fd = smi, .events = POLLIN };
        if (poll(&p, 1, 0) <= 0)
            break;
        ssize_t n = read(smi, buf, sizeof(buf) - 1);
        if (n <= 0)
            break;
        /* Line by line over the bytes read: a QUEUE_RESTORE record holds a NUL (its
         * rescheduled flag), where a string function would stop and lose the rest. */
        for (ssize_t at = 0; at < n;) {
            char *nl = memchr(buf + at, '\n', (size_t)(n - at));
            ssize_t len = nl ? nl - (buf + at) : n - at;
            if (len > 0)
                printf("smi %.*s\n", (int)len, buf + at);
            at += len + 1;
        }
    }
    fflush(stdout);
}

/* The gpu_id of topology node `node` (sysfs), 0 if none. */
static uint32_t gpu_id_of(HSAuint32 node)
{
    char path[128];
    unsigned id = 0;
    snprintf(path, sizeof(path), "/sys/class/kfd/kfd/topology/nodes/%u/gpu_id", node);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (fscanf(f, "%u", &id) != 1)
        id = 0;
    fclose(f);
    return id;
}

static HsaQueueResource qr;
static uint32_t *ring;
static volatile uint32_t *flag;
static uint64_t wptr;

/* Writes `value` at `addr` with an SDMA FENCE, then `seq` at the flag; waits for the flag. */
static int gpu_write(uint64_t addr, uint32_t value, uint32_t seq)
{
    uint64_t flag_addr = (uint64_t)(uintptr_t)flag;
    uint32_t *p = ring + wptr / 4;
    p[0] = 5 | 3 << 16;
    p[1] = (uint32_t)addr;
    p[2] = (uint32_t)(addr >> 32);
    p[3] = value;
    p[4] = 5 | 3 << 16;
    p[5] = (uint32_t)flag_addr;
    p[6] = (uint32_t)(flag_addr >> 32);
    p[7] = seq;
    wptr += 32;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile HSAuint64 *)qr.Queue_write_ptr_aql = wptr;
    *(volatile HSAuint64 *)qr.Queue_DoorBell_aql = wptr;
    double deadline = seconds() + 20;
    while (*flag != seq) {
        if (seconds() > deadline) {
            fprintf(stderr, "FAILED the fence %u did not land\n", seq);
            return 1;
        }
    }
    return 0;
}

#endif
