/*
 * A libhsakmt client of UPDATE_QUEUE: on every GPU node, hsaKmtCreateQueue an SDMA queue,
 * hsaKmtUpdateQueue it to 0 percent (the kernel's QUEUE_IS_ACTIVE is then false: the queue
 * is unmapped), write an SDMA FENCE packet, publish the write pointer and ring the doorbell:
 * the fence must not land (looked at for 300 ms) nor the read pointer move. Then
 * hsaKmtUpdateQueue back to 100 percent: the fence lands. Prints one line per queue for the
 * Rust test; exits non-zero at the first failure, naming it.
 */
#include <hsakmt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hsakmt_gpu.h"

static int update_queue(HSAuint32 node)
{
    const HSAuint64 ring_size = 4096;
    void *ring = NULL, *target = NULL;
    HsaQueueResource qr;
    volatile uint32_t *value;
    uint32_t *packet;
    uint64_t addr;
    double deadline;

    if (system_memory(node, ring_size, &ring) || system_memory(node, 4096, &target))
        return 1;
    memset(&qr, 0, sizeof(qr));
    CHECK(hsaKmtCreateQueue(node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL, ring,
                            ring_size, NULL, &qr));
    CHECK(hsaKmtUpdateQueue(qr.QueueId, 0, HSA_QUEUE_PRIORITY_NORMAL, ring, ring_size, NULL));
    addr = (uint64_t)(uintptr_t)target;
    packet = ring;
    packet[0] = 5 | 3 << 16; /* FENCE, mtype 3 */
    packet[1] = (uint32_t)addr;
    packet[2] = (uint32_t)(addr >> 32);
    packet[3] = 0xC0FFEE;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile HSAuint64 *)qr.Queue_write_ptr_aql = 16;
    *(volatile HSAuint64 *)qr.Queue_DoorBell_aql = 16;
    value = target;
    /* Inactive: nothing runs (an absence, looked at for a while). */
    deadline = seconds() + 0.3;
    while (seconds() < deadline) {
        if (*value != 0 || *(volatile HSAuint64 *)qr.Queue_read_ptr_aql != 0) {
            fprintf(stderr, "FAILED node %u: the inactive queue ran its fence\n", node);
            return 1;
        }
    }
    CHECK(hsaKmtUpdateQueue(qr.QueueId, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, ring_size, NULL));
    deadline = seconds() + 10;
    while (*value != 0xC0FFEE || *(volatile HSAuint64 *)qr.Queue_read_ptr_aql != 16) {
        if (seconds() > deadline) {
            fprintf(stderr, "FAILED node %u: the fence did not land once active again\n", node);
            return 1;
        }
    }
    printf("queue node=%u inactive: idle; active: fence=%#x rptr=%llu\n", node, *value,
           (unsigned long long)*(volatile HSAuint64 *)qr.Queue_read_ptr_aql);
    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    CHECK(hsaKmtUnmapMemoryToGPU(ring));
    CHECK(hsaKmtFreeMemory(ring, ring_size));
    CHECK(hsaKmtUnmapMemoryToGPU(target));
    CHECK(hsaKmtFreeMemory(target, 4096));
    return 0;
}

int main(void)
{
    return on_every_gpu(update_queue);
}
