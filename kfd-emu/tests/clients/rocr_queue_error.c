/*
 * Queue errors through an unmodified ROCr (Debian's libhsa-runtime64, 5.2.3). On every GPU
 * agent, an AQL queue from hsa_queue_create with an error callback gets, one queue each:
 *  - a packet of a reserved type (7): the callback reports HSA_STATUS_ERROR_INVALID_PACKET_FORMAT;
 *  - a vendor-specific packet of no AMD format: HSA_STATUS_ERROR_INVALID_PACKET_FORMAT;
 *  - a KERNEL_DISPATCH of a null kernel object: HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
 *  - a KERNEL_DISPATCH of a kernel object in GPU-accessible memory that holds no kernel the
 *    emulator can run: HSA_STATUS_ERROR_INVALID_ISA.
 * Each time the callback names the queue, the packet's completion signal keeps its value (1),
 * the read index stays at the packet, and hsa_queue_destroy succeeds.
 * Then, on the last GPU agent, with a system event handler registered
 * (hsa_amd_register_system_event_handler), a BARRIER_AND whose dependency signal handle points
 * at memory the GPU cannot reach: the handler gets HSA_AMD_GPU_MEMORY_FAULT_EVENT with that
 * agent and the faulting page (ROCr's VMFaultHandler; it would abort without a handler that
 * returns success), and the queue's error callback is not called. With the argument
 * `unhandled-fault`, only that fault, with no handler: ROCr prints "Memory access fault by GPU
 * node-N ... on address ..." and aborts the process.
 * One line per case for the Rust test; exits non-zero at the first failure, naming it.
 */
#include <hsa/amd_hsa_queue.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        hsa_status_t status_ = (call);                                                   \
        if (status_ != HSA_STATUS_SUCCESS) {                                             \
            const char *why_ = "?";                                                      \
            hsa_status_string(status_, &why_);                                           \
            fprintf(stderr, "FAILED %s = %#x %s (line %d)\n", #call, (unsigned)status_, \
                    why_, __LINE__);                                                     \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

#define EXPECT(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "FAILED " __VA_ARGS__);                                      \
            fprintf(stderr, " (line %d)\n", __LINE__);                                   \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

/* 10 s in ns: long enough on a loaded machine (the wait ends as soon as the report comes). */
#define LONG_WAIT 10000000000ull
#define PAGE 4096ull

static hsa_agent_t cpu_agent;
static hsa_amd_memory_pool_t system_pool;

struct agents {
    hsa_agent_t gpu[16];
    int gpus;
};

/* What the error callback saw (written on ROCr's async-events thread before `reported`). */
static hsa_status_t reported_status;
static hsa_queue_t *reported_queue;
static int reports;
static hsa_signal_t reported;

/* What the system event handler saw. */
static hsa_amd_gpu_memory_fault_info_t fault;
static int faults;
static hsa_signal_t faulted;

static void on_queue_error(hsa_status_t status, hsa_queue_t *source, void *data)
{
    (void)data;
    reported_status = status;
    reported_queue = source;
    __atomic_add_fetch(&reports, 1, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(reported, 0);
}

static hsa_status_t on_system_event(const hsa_amd_event_t *event, void *data)
{
    (void)data;
    if (event->event_type != HSA_AMD_GPU_MEMORY_FAULT_EVENT)
        return HSA_STATUS_ERROR;
    fault = event->memory_fault;
    __atomic_add_fetch(&faults, 1, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(faulted, 0);
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_agents(hsa_agent_t agent, void *data)
{
    struct agents *a = data;
    hsa_device_type_t type;
    hsa_status_t status = hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
    if (status != HSA_STATUS_SUCCESS)
        return status;
    if (type == HSA_DEVICE_TYPE_GPU && a->gpus < 16)
        a->gpu[a->gpus++] = agent;
    if (type == HSA_DEVICE_TYPE_CPU && cpu_agent.handle == 0)
        cpu_agent = agent;
    return HSA_STATUS_SUCCESS;
}

/* The first fine-grained global pool of the CPU agent the runtime may allocate from. */
static hsa_status_t find_system_pool(hsa_amd_memory_pool_t pool, void *data)
{
    hsa_amd_segment_t segment;
    uint32_t flags;
    bool alloc;
    hsa_status_t status;

    status = hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
    if (status != HSA_STATUS_SUCCESS || segment != HSA_AMD_SEGMENT_GLOBAL)
        return status;
    status = hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                                          &alloc);
    if (status != HSA_STATUS_SUCCESS || !alloc)
        return status;
    status = hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
    if (status != HSA_STATUS_SUCCESS)
        return status;
    if (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) {
        *(hsa_amd_memory_pool_t *)data = pool;
        return HSA_STATUS_INFO_BREAK;
    }
    return HSA_STATUS_SUCCESS;
}

/* Writes `packet` (64 bytes; its header last, with release order) at the queue's next index
 * and rings the doorbell. */
static void submit(hsa_queue_t *q, const uint8_t *packet)
{
    uint64_t index = hsa_queue_add_write_index_screlease(q, 1);
    uint8_t *slot = (uint8_t *)q->base_address + (index & (q->size - 1)) * 64;
    uint32_t first;

    memcpy(slot + 4, packet + 4, 60);
    memcpy(&first, packet, 4);
    __atomic_store_n((uint32_t *)slot, first, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, index);
}

/* A packet of `type` with the barrier bit, system-scope fences and `completion`. */
static void packet_of(uint8_t *p, uint16_t type, hsa_signal_t completion)
{
    uint16_t header = type << HSA_PACKET_HEADER_TYPE | 1 << HSA_PACKET_HEADER_BARRIER |
                      HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
                      HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
    memset(p, 0, 64);
    memcpy(p, &header, 2);
    memcpy(p + 56, &completion.handle, 8);
}

/* A 1-D dispatch of 64 work-items in one group of the kernel object at `code`. */
static void dispatch_of(uint8_t *p, uint64_t code, hsa_signal_t completion)
{
    hsa_kernel_dispatch_packet_t d;

    packet_of(p, HSA_PACKET_TYPE_KERNEL_DISPATCH, completion);
    memcpy(&d, p, 64);
    d.setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
    d.workgroup_size_x = 64;
    d.workgroup_size_y = 1;
    d.workgroup_size_z = 1;
    d.grid_size_x = 64;
    d.grid_size_y = 1;
    d.grid_size_z = 1;
    d.kernel_object = code;
    memcpy(p, &d, 64);
}

/* Submits `packet` to a new queue on `gpu`: the error callback must report `want` for that
 * queue, with the packet neither completed nor consumed; then the queue is destroyed. */
static int refused(hsa_agent_t gpu, int n, const char *what, const uint8_t *packet,
                   hsa_signal_t done, hsa_status_t want)
{
    hsa_queue_t *q = NULL;
    hsa_signal_t inactive;
    const char *name = "?";
    int before = __atomic_load_n(&reports, __ATOMIC_ACQUIRE);

    CHECK(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_SINGLE, on_queue_error, NULL, UINT32_MAX,
                           UINT32_MAX, &q));
    hsa_signal_store_screlease(reported, 1);
    hsa_signal_store_screlease(done, 1);
    submit(q, packet);
    EXPECT(hsa_signal_wait_scacquire(reported, HSA_SIGNAL_CONDITION_LT, 1, LONG_WAIT,
                                     HSA_WAIT_STATE_BLOCKED) == 0,
           "gpu %d: %s: the error callback was not called", n, what);
    EXPECT(__atomic_load_n(&reports, __ATOMIC_ACQUIRE) == before + 1,
           "gpu %d: %s: %d reports", n, what, reports - before);
    EXPECT(reported_queue == q, "gpu %d: %s: the callback named queue %p, not %p", n, what,
           (void *)reported_queue, (void *)q);
    hsa_status_string(reported_status, &name);
    EXPECT(reported_status == want, "gpu %d: %s: status %#x (%s), not %#x", n, what,
           (unsigned)reported_status, name, (unsigned)want);
    EXPECT(hsa_signal_load_scacquire(done) == 1, "gpu %d: %s: completion signal %ld", n, what,
           (long)hsa_signal_load_scacquire(done));
    EXPECT(hsa_queue_load_read_index_scacquire(q) == 0, "gpu %d: %s: read index %lu", n, what,
           (unsigned long)hsa_queue_load_read_index_scacquire(q));
    /* ROCr's handler marks itself done and stores -1 in the queue's queue_inactive_signal
     * after the callback returns; hsa_queue_destroy must not start before, or ~AqlQueue can
     * overwrite that -1 with its own wake-up value and wait for a handler that has gone
     * (a race of ROCr 5.2.3's AqlQueue::~AqlQueue and DynamicScratchHandler, on hardware
     * too). hsa_queue_t is the first member of amd_queue_t (amd_hsa_queue.h). */
    inactive = ((amd_queue_t *)q)->queue_inactive_signal;
    EXPECT(hsa_signal_wait_scacquire(inactive, HSA_SIGNAL_CONDITION_EQ, -1, LONG_WAIT,
                                     HSA_WAIT_STATE_BLOCKED) == -1,
           "gpu %d: %s: ROCr's queue error handler did not finish", n, what);
    CHECK(hsa_queue_destroy(q));
    printf("gpu %d %s: status=%#x completion=1 read_index=0 destroyed\n", n, what,
           (unsigned)reported_status);
    return 0;
}

static int queue_errors(hsa_agent_t gpu, int n)
{
    uint8_t p[64];
    hsa_signal_t done;
    void *code = NULL;

    CHECK(hsa_signal_create(1, 0, NULL, &done));
    packet_of(p, 7, done);
    if (refused(gpu, n, "reserved-type", p, done, HSA_STATUS_ERROR_INVALID_PACKET_FORMAT))
        return 1;
    packet_of(p, HSA_PACKET_TYPE_VENDOR_SPECIFIC, done);
    if (refused(gpu, n, "vendor-specific", p, done, HSA_STATUS_ERROR_INVALID_PACKET_FORMAT))
        return 1;
    dispatch_of(p, 0, done);
    if (refused(gpu, n, "null-kernel-object", p, done, HSA_STATUS_ERROR_INVALID_CODE_OBJECT))
        return 1;
    /* A kernel object the GPU can read, holding zeros. */
    CHECK(hsa_amd_memory_pool_allocate(system_pool, PAGE, 0, &code));
    CHECK(hsa_amd_agents_allow_access(1, &gpu, NULL, code));
    memset(code, 0, PAGE);
    dispatch_of(p, (uint64_t)(uintptr_t)code, done);
    if (refused(gpu, n, "bogus-kernel-object", p, done, HSA_STATUS_ERROR_INVALID_ISA))
        return 1;
    CHECK(hsa_amd_memory_pool_free(code));
    CHECK(hsa_signal_destroy(done));
    return 0;
}

/* Memory the GPU cannot reach: this program's own data, never registered with the runtime. */
static uint8_t unreachable_page[2 * PAGE];

static int memory_fault(hsa_agent_t gpu, int n, int handled)
{
    hsa_queue_t *q = NULL;
    hsa_signal_t done, dep;
    uint8_t p[64];
    uint64_t page;
    int before = __atomic_load_n(&reports, __ATOMIC_ACQUIRE);

    CHECK(hsa_signal_create(1, 0, NULL, &faulted));
    if (handled)
        CHECK(hsa_amd_register_system_event_handler(on_system_event, NULL));
    CHECK(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_SINGLE, on_queue_error, NULL, UINT32_MAX,
                           UINT32_MAX, &q));
    CHECK(hsa_signal_create(1, 0, NULL, &done));
    /* A dependency "signal" whose amd_signal_t the packet processor reads at +8. */
    dep.handle = ((uint64_t)(uintptr_t)unreachable_page + PAGE - 1) & ~(PAGE - 1);
    page = dep.handle;
    packet_of(p, HSA_PACKET_TYPE_BARRIER_AND, done);
    memcpy(p + 8, &dep.handle, 8);
    submit(q, p);
    if (!handled) {
        /* ROCr's VMFaultHandler prints the fault and aborts this process. */
        hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, LONG_WAIT,
                                  HSA_WAIT_STATE_BLOCKED);
        EXPECT(0, "gpu %d: an unhandled memory fault did not abort the process", n);
    }
    EXPECT(hsa_signal_wait_scacquire(faulted, HSA_SIGNAL_CONDITION_LT, 1, LONG_WAIT,
                                     HSA_WAIT_STATE_BLOCKED) == 0,
           "gpu %d: the memory fault handler was not called", n);
    EXPECT(faults == 1, "gpu %d: %d faults", n, faults);
    EXPECT(fault.agent.handle == gpu.handle, "gpu %d: the fault names agent %#lx, not %#lx", n,
           (unsigned long)fault.agent.handle, (unsigned long)gpu.handle);
    EXPECT(fault.virtual_address == page, "gpu %d: the fault is at %#lx, not %#lx", n,
           (unsigned long)fault.virtual_address, (unsigned long)page);
    EXPECT(fault.fault_reason_mask & HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT,
           "gpu %d: fault reasons %#x", n, (unsigned)fault.fault_reason_mask);
    EXPECT(hsa_signal_load_scacquire(done) == 1, "gpu %d: the barrier completed", n);
    EXPECT(__atomic_load_n(&reports, __ATOMIC_ACQUIRE) == before,
           "gpu %d: a memory fault reached the queue's error callback", n);
    CHECK(hsa_queue_destroy(q));
    printf("gpu %d memory-fault: agent=ok address=page reasons=%#x destroyed\n", n,
           (unsigned)fault.fault_reason_mask);
    CHECK(hsa_signal_destroy(done));
    CHECK(hsa_signal_destroy(faulted));
    return 0;
}

int main(int argc, char **argv)
{
    struct agents agents;
    hsa_status_t status;
    int unhandled = argc > 1 && strcmp(argv[1], "unhandled-fault") == 0;
    int i;

    memset(&agents, 0, sizeof(agents));
    CHECK(hsa_init());
    CHECK(hsa_iterate_agents(find_agents, &agents));
    EXPECT(cpu_agent.handle != 0 && agents.gpus > 0, "no CPU or no GPU agent");
    status = hsa_amd_agent_iterate_memory_pools(cpu_agent, find_system_pool, &system_pool);
    EXPECT(status == HSA_STATUS_INFO_BREAK, "no fine-grained system pool");
    CHECK(hsa_signal_create(1, 0, NULL, &reported));
    printf("gpus %d\n", agents.gpus);
    fflush(stdout);
    if (unhandled)
        return memory_fault(agents.gpu[agents.gpus - 1], agents.gpus - 1, 0);
    for (i = 0; i < agents.gpus; i++)
        if (queue_errors(agents.gpu[i], i))
            return 1;
    /* ROCr reports the first VM fault of a process only (its handler is then removed), and
     * the kernel stops the GPU's queues: last. */
    if (memory_fault(agents.gpu[agents.gpus - 1], agents.gpus - 1, 1))
        return 1;
    CHECK(hsa_signal_destroy(reported));
    CHECK(hsa_shut_down());
    printf("done\n");
    return 0;
}
