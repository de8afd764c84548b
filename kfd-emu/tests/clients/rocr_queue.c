/*
 * An unmodified ROCr client (Debian's libhsa-runtime64, 5.2.3): on every GPU agent,
 *  - hsa_queue_create an AQL queue and submit a BARRIER_AND packet (dependency A) and then a
 *    BARRIER_OR packet (dependencies B and C), each with a completion signal. Completing C
 *    first must not complete the OR packet while the AND packet before it waits for A (the
 *    packet processor runs packets in order); completing A then completes both, in order.
 *  - hsa_amd_memory_async_copy a buffer host→device and back device→host (memory from
 *    hsa_amd_memory_pool_allocate, access through hsa_amd_agents_allow_access) and check the
 *    bytes; the first copy waits for a dependency signal and is profiled (its start and end
 *    times, from the engine's timestamps). With HSA_ENABLE_SDMA=1 (the test's environment) ROCr copies through its SDMA
 *    queues (BlitSdma).
 * then hsa_shut_down. One line per agent for the Rust test; exits non-zero at the first
 * failure, naming it.
 */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <sched.h>
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

/* Waits long enough on a real GPU and on the emulator; 1 s in ns (HSA's timeout hint). */
#define LONG_WAIT 10000000000ull
#define SHORT_WAIT 100000000ull
#define COPY_BYTES (1u << 20)

static hsa_agent_t cpu_agent;
static hsa_amd_memory_pool_t system_pool;

struct agents {
    hsa_agent_t gpu[16];
    int gpus;
};

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

/* The first global pool whose flags contain `want` (the data: a hsa_amd_memory_pool_t with
 * the wanted HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_* in its handle on entry). */
static hsa_status_t find_pool(hsa_amd_memory_pool_t pool, void *data)
{
    hsa_amd_memory_pool_t *found = data;
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
    if ((flags & found->handle) == found->handle) {
        *found = pool;
        return HSA_STATUS_INFO_BREAK;
    }
    return HSA_STATUS_SUCCESS;
}

static int pool_of(hsa_agent_t agent, uint64_t flags, hsa_amd_memory_pool_t *pool)
{
    hsa_status_t status;
    pool->handle = flags;
    status = hsa_amd_agent_iterate_memory_pools(agent, find_pool, pool);
    EXPECT(status == HSA_STATUS_INFO_BREAK, "no global pool with flags %#lx", (unsigned long)flags);
    return 0;
}

/* Writes a barrier packet of `type` with `deps` and `completion` at the queue's next index
 * and rings the doorbell: the body first, the header last with release order. */
static void submit_barrier(hsa_queue_t *q, uint16_t type, const hsa_signal_t *deps, int ndeps,
                           hsa_signal_t completion)
{
    uint64_t index = hsa_queue_add_write_index_screlease(q, 1);
    hsa_barrier_and_packet_t *p =
        (hsa_barrier_and_packet_t *)q->base_address + (index & (q->size - 1));
    uint16_t header = type << HSA_PACKET_HEADER_TYPE | 1 << HSA_PACKET_HEADER_BARRIER |
                      HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
                      HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
    int i;

    memset((char *)p + 4, 0, sizeof(*p) - 4);
    for (i = 0; i < ndeps; i++)
        p->dep_signal[i] = deps[i];
    p->completion_signal = completion;
    __atomic_store_n((uint32_t *)p, header, __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, index);
}

static hsa_signal_value_t wait_below(hsa_signal_t s, hsa_signal_value_t below, uint64_t ns)
{
    return hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_LT, below, ns, HSA_WAIT_STATE_BLOCKED);
}

static int barriers(hsa_agent_t gpu, int n)
{
    hsa_queue_t *q = NULL;
    hsa_signal_t a, b, c, and_done, or_done, deps[2];
    long i;

    CHECK(hsa_queue_create(gpu, 128, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX,
                           &q));
    CHECK(hsa_signal_create(1, 0, NULL, &a));
    CHECK(hsa_signal_create(1, 0, NULL, &b));
    CHECK(hsa_signal_create(1, 0, NULL, &c));
    CHECK(hsa_signal_create(1, 0, NULL, &and_done));
    CHECK(hsa_signal_create(1, 0, NULL, &or_done));
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_AND, &a, 1, and_done);
    deps[0] = b;
    deps[1] = c;
    submit_barrier(q, HSA_PACKET_TYPE_BARRIER_OR, deps, 2, or_done);

    EXPECT(wait_below(and_done, 1, SHORT_WAIT) == 1, "gpu %d: BARRIER_AND done before A", n);
    hsa_signal_store_screlease(c, 0);
    EXPECT(wait_below(or_done, 1, SHORT_WAIT) == 1,
           "gpu %d: BARRIER_OR done while the BARRIER_AND before it waits", n);
    hsa_signal_store_screlease(a, 0);
    EXPECT(wait_below(and_done, 1, LONG_WAIT) == 0, "gpu %d: BARRIER_AND not done after A", n);
    EXPECT(wait_below(or_done, 1, LONG_WAIT) == 0, "gpu %d: BARRIER_OR not done after C", n);
    /* Both packets consumed: the read index passes them (written back by the packet
     * processor, so waited for a bounded time). */
    for (i = 0; i < 1000000 && hsa_queue_load_read_index_scacquire(q) != 2; i++)
        sched_yield();
    EXPECT(hsa_queue_load_read_index_scacquire(q) == 2, "gpu %d: read index %lu", n,
           (unsigned long)hsa_queue_load_read_index_scacquire(q));
    printf("gpu %d barriers and=%ld or=%ld read_index=%lu\n", n,
           (long)hsa_signal_load_relaxed(and_done), (long)hsa_signal_load_relaxed(or_done),
           (unsigned long)hsa_queue_load_read_index_scacquire(q));
    CHECK(hsa_signal_destroy(a));
    CHECK(hsa_signal_destroy(b));
    CHECK(hsa_signal_destroy(c));
    CHECK(hsa_signal_destroy(and_done));
    CHECK(hsa_signal_destroy(or_done));
    CHECK(hsa_queue_destroy(q));
    return 0;
}

static int copies(hsa_agent_t gpu, int n)
{
    hsa_amd_memory_pool_t device_pool;
    uint8_t *src = NULL, *back = NULL, *dev = NULL;
    hsa_signal_t done, gate;
    hsa_amd_profiling_async_copy_time_t time;
    uint32_t i;

    if (pool_of(gpu, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, &device_pool))
        return 1;
    CHECK(hsa_amd_memory_pool_allocate(system_pool, COPY_BYTES, 0, (void **)&src));
    CHECK(hsa_amd_memory_pool_allocate(system_pool, COPY_BYTES, 0, (void **)&back));
    CHECK(hsa_amd_memory_pool_allocate(device_pool, COPY_BYTES, 0, (void **)&dev));
    CHECK(hsa_amd_agents_allow_access(1, &gpu, NULL, src));
    CHECK(hsa_amd_agents_allow_access(1, &gpu, NULL, back));
    for (i = 0; i < COPY_BYTES; i++) {
        src[i] = (uint8_t)(i * 7 + n);
        back[i] = 0;
    }
    CHECK(hsa_signal_create(1, 0, NULL, &done));
    CHECK(hsa_signal_create(1, 0, NULL, &gate));
    /* The host to device copy waits for `gate` (BlitSdma polls its value's two dwords). */
    CHECK(hsa_amd_memory_async_copy(dev, gpu, src, cpu_agent, COPY_BYTES, 1, &gate, done));
    EXPECT(wait_below(done, 1, SHORT_WAIT) == 1, "gpu %d: copy done before its dependency", n);
    hsa_signal_store_screlease(gate, 0);
    EXPECT(wait_below(done, 1, LONG_WAIT) == 0, "gpu %d: host to device copy not done", n);
    /* Profiled: the engine's timestamps before and after the copy. */
    CHECK(hsa_amd_profiling_get_async_copy_time(done, &time));
    EXPECT(time.start != 0 && time.end >= time.start, "gpu %d: copy time %lu..%lu", n,
           (unsigned long)time.start, (unsigned long)time.end);
    hsa_signal_store_relaxed(done, 1);
    CHECK(hsa_amd_memory_async_copy(back, cpu_agent, dev, gpu, COPY_BYTES, 0, NULL, done));
    EXPECT(wait_below(done, 1, LONG_WAIT) == 0, "gpu %d: device to host copy not done", n);
    for (i = 0; i < COPY_BYTES; i++)
        EXPECT(back[i] == src[i], "gpu %d: byte %u is %#x, not %#x", n, i, back[i], src[i]);
    printf("gpu %d copied %u bytes there and back\n", n, COPY_BYTES);
    CHECK(hsa_signal_destroy(done));
    CHECK(hsa_signal_destroy(gate));
    CHECK(hsa_amd_memory_pool_free(dev));
    CHECK(hsa_amd_memory_pool_free(back));
    CHECK(hsa_amd_memory_pool_free(src));
    return 0;
}

int main(void)
{
    struct agents agents;
    int i;

    memset(&agents, 0, sizeof(agents));
    CHECK(hsa_init());
    CHECK(hsa_iterate_agents(find_agents, &agents));
    EXPECT(cpu_agent.handle != 0, "no CPU agent");
    if (pool_of(cpu_agent, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, &system_pool))
        return 1;
    CHECK(hsa_amd_profiling_async_copy_enable(true));
    printf("gpus %d\n", agents.gpus);
    for (i = 0; i < agents.gpus; i++)
        if (barriers(agents.gpu[i], i) || copies(agents.gpu[i], i))
            return 1;
    CHECK(hsa_shut_down());
    printf("done\n");
    return 0;
}
