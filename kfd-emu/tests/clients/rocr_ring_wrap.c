/*
 * An unmodified ROCr client (Debian's libhsa-runtime64, 5.2.3) that feeds an AQL queue faster
 * than the packet processor drains it: on every GPU agent, a queue of the agent's smallest
 * size (HSA_AGENT_INFO_QUEUE_MIN_SIZE) takes 2 * size + 3 BARRIER_AND packets, then a stress
 * of 3000, each submitted as ROCr's own clients do: hsa_queue_add_write_index first (the
 * write index may then run past the ring while the producer waits), then a wait for the read
 * index to leave the slot free, then the packet body, the header last with release order,
 * and the doorbell rung with the packet's index. Every barrier decrements one completion
 * signal; the wait for it to reach 0 ends the run. One line per agent and run; exits non-zero
 * at the first failure (a producer that waits 10 s for a slot, a completion that never
 * comes), naming it.
 */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* How long the producer waits for a slot or a completion before it gives up: 10 s. */
#define PATIENCE_NS 10000000000ull

struct agents {
    hsa_agent_t gpu[16];
    int gpus;
};

static hsa_status_t find_gpus(hsa_agent_t agent, void *data)
{
    struct agents *a = data;
    hsa_device_type_t type;
    hsa_status_t status = hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
    if (status != HSA_STATUS_SUCCESS)
        return status;
    if (type == HSA_DEVICE_TYPE_GPU && a->gpus < 16)
        a->gpu[a->gpus++] = agent;
    return HSA_STATUS_SUCCESS;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Submits `n` barriers through a queue of `size` slots; 0 when all completed. */
static int ring_wrap(hsa_agent_t gpu, int g, uint32_t size, long n)
{
    hsa_queue_t *q = NULL;
    hsa_signal_t done;
    uint16_t header = HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE |
                      1 << HSA_PACKET_HEADER_BARRIER |
                      HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
                      HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
    long i;

    CHECK(hsa_queue_create(gpu, size, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX,
                           &q));
    CHECK(hsa_signal_create(n, 0, NULL, &done));
    for (i = 0; i < n; i++) {
        uint64_t index = hsa_queue_add_write_index_screlease(q, 1);
        uint64_t deadline = now_ns() + PATIENCE_NS;
        hsa_barrier_and_packet_t *p;

        while (index - hsa_queue_load_read_index_scacquire(q) >= q->size) {
            if (now_ns() > deadline) {
                fprintf(stderr,
                        "FAILED gpu %d size %u: packet %lu never got a slot (read index %lu)\n",
                        g, size, (unsigned long)index,
                        (unsigned long)hsa_queue_load_read_index_scacquire(q));
                return 1;
            }
            sched_yield();
        }
        p = (hsa_barrier_and_packet_t *)q->base_address + (index & (q->size - 1));
        memset((char *)p + 4, 0, sizeof(*p) - 4);
        p->completion_signal = done;
        __atomic_store_n((uint32_t *)p, header, __ATOMIC_RELEASE);
        hsa_signal_store_screlease(q->doorbell_signal, index);
    }
    if (hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, PATIENCE_NS,
                                  HSA_WAIT_STATE_BLOCKED) != 0) {
        fprintf(stderr, "FAILED gpu %d size %u: barriers left %ld\n", g, size,
                (long)hsa_signal_load_relaxed(done));
        return 1;
    }
    printf("gpu %d size %u barriers %ld read_index %lu\n", g, size, n,
           (unsigned long)hsa_queue_load_read_index_scacquire(q));
    CHECK(hsa_signal_destroy(done));
    CHECK(hsa_queue_destroy(q));
    return 0;
}

int main(void)
{
    struct agents agents = {0};
    int g;

    CHECK(hsa_init());
    CHECK(hsa_iterate_agents(find_gpus, &agents));
    for (g = 0; g < agents.gpus; g++) {
        uint32_t size = 0;
        CHECK(hsa_agent_get_info(agents.gpu[g], HSA_AGENT_INFO_QUEUE_MIN_SIZE, &size));
        if (ring_wrap(agents.gpu[g], g, size, 2 * (long)size + 3) ||
            ring_wrap(agents.gpu[g], g, size, 3000))
            return 1;
    }
    CHECK(hsa_shut_down());
    printf("done\n");
    return 0;
}
