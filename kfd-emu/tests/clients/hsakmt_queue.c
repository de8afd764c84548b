/*
 * A libhsakmt client of SDMA queues: on every GPU node, allocate a ring and a target in
 * system memory, map them on the GPU, hsaKmtCreateQueue an SDMA queue, write an SDMA FENCE
 * packet (vega10_sdma_pkt_open.h: op 5, address low and high, data) into the ring, publish
 * the write pointer and ring the doorbell as ROCr's SDMA blits do, wait for the fence value,
 * then hsaKmtDestroyQueue and free. Prints one line per queue for the Rust test; exits
 * non-zero at the first failure, naming it.
 */
#include <hsakmt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hsakmt_gpu.h"

static int sdma_fence(HSAuint32 node)
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
    addr = (uint64_t)(uintptr_t)target;
    packet = ring;
    packet[0] = 5 | 3 << 16; /* FENCE, mtype 3 */
    packet[1] = (uint32_t)addr;
    packet[2] = (uint32_t)(addr >> 32);
    packet[3] = 0xC0FFEE;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* 64-bit write pointer and doorbell, in bytes (GFX9+). */
    *(volatile HSAuint64 *)qr.Queue_write_ptr_aql = 16;
    *(volatile HSAuint64 *)qr.Queue_DoorBell_aql = 16;
    value = target;
    deadline = seconds() + 10;
    while (*value != 0xC0FFEE) {
        if (seconds() > deadline) {
            fprintf(stderr, "FAILED the fence did not land on node %u\n", node);
            return 1;
        }
    }
    /* The engine writes the read pointer back once it consumed the packet. */
    while (*(volatile HSAuint64 *)qr.Queue_read_ptr_aql != 16) {
        if (seconds() > deadline) {
            fprintf(stderr, "FAILED the read pointer did not reach 16 on node %u\n", node);
            return 1;
        }
    }
    printf("queue node=%u id=%llu fence=%#x rptr=%llu\n", node,
           (unsigned long long)qr.QueueId, *value,
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
    return on_every_gpu(sdma_fence);
}
