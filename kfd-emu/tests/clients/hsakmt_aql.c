/*
 * A libhsakmt client of AQL queues: on every GPU node, allocate an AQL ring, the queue's
 * read and write indices and two amd_signal_t signals in GPU-mapped system memory, and
 * hsaKmtCreateQueue an HSA_QUEUE_COMPUTE_AQL queue with them (the indices are the caller's,
 * QueueRptrValue and QueueWptrValue, as ROCr passes its amd_queue_t's read_dispatch_id and
 * write_dispatch_id). Write a BARRIER_AND packet (hsa.h's hsa_barrier_and_packet_t) whose
 * dependency is the first signal and whose completion signal is the second, publish its
 * header last, bump the write index and ring the doorbell. The packet must wait while the
 * dependency is 1, and complete once the program sets it to 0: the completion signal drops
 * from 1 to 0 and, having an event mailbox (a libhsakmt signal event's HWData2 and id), wakes
 * hsaKmtWaitOnEvent. Then hsaKmtDestroyQueue and free. One line per queue for the Rust test;
 * exits non-zero at the first failure, naming it.
 */
#include <hsakmt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hsakmt_gpu.h"

/* amd_signal_t (amd_hsa_signal.h): kind, value, event_mailbox_ptr, event_id. */
struct signal {
    int64_t kind;
    volatile int64_t value;
    uint64_t event_mailbox_ptr;
    uint32_t event_id;
    uint32_t reserved[9];
};

/* hsa_barrier_and_packet_t (hsa.h). */
struct barrier_packet {
    uint16_t header;
    uint16_t reserved0;
    uint32_t reserved1;
    uint64_t dep_signal[5];
    uint64_t reserved2;
    uint64_t completion_signal;
};

#define PACKET_INVALID 1
#define PACKET_BARRIER_AND 3
/* The barrier bit and system-scope acquire and release fences. */
#define HEADER_FENCES (1 << 8 | 2 << 9 | 2 << 11)

static int aql_barrier(HSAuint32 node)
{
    const HSAuint64 ring_size = 64 * 64;
    void *ring = NULL, *indices = NULL, *signals = NULL;
    HsaQueueResource qr;
    HsaEventDescriptor desc;
    HsaEvent *event = NULL;
    struct barrier_packet *packet;
    struct signal *dep, *done;
    volatile uint64_t *rptr, *wptr;
    double deadline;
    int waited;

    if (system_memory(node, ring_size, &ring) || system_memory(node, 4096, &indices) ||
        system_memory(node, 4096, &signals))
        return 1;
    memset(&desc, 0, sizeof(desc));
    desc.EventType = HSA_EVENTTYPE_SIGNAL;
    desc.NodeId = node;
    desc.SyncVar.SyncVar.UserData = NULL;
    CHECK(hsaKmtCreateEvent(&desc, false, false, &event));
    /* Every slot INVALID, as ROCr leaves a new ring. */
    for (packet = ring; (char *)packet < (char *)ring + ring_size; packet++)
        packet->header = PACKET_INVALID;
    rptr = indices;
    wptr = (volatile uint64_t *)((char *)indices + 64);
    dep = signals;
    done = dep + 1;
    dep->kind = 1;
    dep->value = 1;
    done->kind = 1;
    done->value = 1;
    done->event_mailbox_ptr = event->EventData.HWData2;
    done->event_id = event->EventId;

    memset(&qr, 0, sizeof(qr));
    qr.QueueRptrValue = (uintptr_t)rptr;
    qr.QueueWptrValue = (uintptr_t)wptr;
    CHECK(hsaKmtCreateQueue(node, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring,
                            ring_size, NULL, &qr));

    packet = ring;
    memset((char *)packet + 2, 0, sizeof(*packet) - 2);
    packet->dep_signal[0] = (uintptr_t)dep;
    packet->completion_signal = (uintptr_t)done;
    __atomic_store_n(&packet->header, PACKET_BARRIER_AND | HEADER_FENCES, __ATOMIC_RELEASE);
    *wptr = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* The doorbell takes the packet index (64-bit on GFX9+). */
    *(volatile HSAuint64 *)qr.Queue_DoorBell_aql = 0;

    /* The dependency holds 1: the packet must not complete. */
    deadline = seconds() + 0.2;
    while (seconds() < deadline) {
        if (done->value != 1 || *rptr != 0) {
            fprintf(stderr, "FAILED the barrier ran before its dependency on node %u\n", node);
            return 1;
        }
    }
    dep->value = 0;
    waited = hsaKmtWaitOnEvent(event, 10000) == HSAKMT_STATUS_SUCCESS;
    deadline = seconds() + 10;
    while (done->value != 0 || *rptr != 1) {
        if (seconds() > deadline) {
            fprintf(stderr, "FAILED the barrier did not complete on node %u: signal %lld rptr %llu\n",
                    node, (long long)done->value, (unsigned long long)*rptr);
            return 1;
        }
    }
    printf("aql node=%u signal=%lld rptr=%llu header=%u event=%s\n", node,
           (long long)done->value, (unsigned long long)*rptr, packet->header,
           waited ? "woke" : "timeout");
    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    CHECK(hsaKmtDestroyEvent(event));
    if (free_system_memory(ring, ring_size) || free_system_memory(indices, 4096) ||
        free_system_memory(signals, 4096))
        return 1;
    return 0;
}

int main(void)
{
    return on_every_gpu(aql_barrier);
}
