/*
 * A libhsakmt client of PM4 compute queues, driven as kfdtest 5.2.3's PM4Queue drives them:
 * on every GPU node, hsaKmtCreateQueue an HSA_QUEUE_COMPUTE queue over a 4 KiB ring in
 * GPU-mapped system memory (libhsakmt gives the read and write pointers), then write
 * kfdtest's one-dword NOPs (CMD_NOP_TYPE_3), a WRITE_DATA of one dword (PM4WriteDataPacket)
 * and a RELEASE_MEM that writes a signal event's id into its mailbox (HWData2) and raises
 * the end-of-pipe interrupt with the id (PM4ReleaseMemoryPacket, as Wait4PacketConsumption
 * uses it), store the 64-bit write pointer in dwords and ring the 64-bit doorbell with it.
 * hsaKmtWaitOnEvent must wake, the dword must be written and the CP's read pointer (32-bit,
 * in dwords) must reach the write pointer. Then hsaKmtDestroyQueue and free. One line per
 * queue for the Rust test; exits non-zero at the first failure, naming it.
 */
#include <hsakmt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hsakmt_gpu.h"

/* PACKET3_COMPUTE(op, count): type 3, the body's dwords - 1, the opcode, shader type 1. */
#define PACKET3(op, count) (3u << 30 | (uint32_t)(count) << 16 | (uint32_t)(op) << 8 | 1u << 1)
#define CMD_NOP_TYPE_3 0xFFFF1002u
#define IT_WRITE_DATA 0x37
#define IT_RELEASE_MEM 0x49

static int pm4_queue(HSAuint32 node)
{
    const HSAuint64 ring_size = 4096;
    void *ring = NULL, *data = NULL;
    HsaNodeProperties props;
    HsaQueueResource qr;
    HsaEventDescriptor desc;
    HsaEvent *event = NULL;
    volatile uint32_t *target;
    uint32_t *p;
    uint64_t mailbox, wptr;
    int waited;
    double deadline;

    CHECK(hsaKmtGetNodeProperties(node, &props));
    if (system_memory(node, ring_size, &ring) || system_memory(node, 4096, &data))
        return 1;
    memset(&desc, 0, sizeof(desc));
    desc.EventType = HSA_EVENTTYPE_SIGNAL;
    desc.NodeId = node;
    CHECK(hsaKmtCreateEvent(&desc, false, false, &event));
    memset(&qr, 0, sizeof(qr));
    CHECK(hsaKmtCreateQueue(node, HSA_QUEUE_COMPUTE, 100, HSA_QUEUE_PRIORITY_NORMAL, ring,
                            ring_size, NULL, &qr));

    target = data;
    mailbox = event->EventData.HWData2;
    p = ring;
    *p++ = CMD_NOP_TYPE_3;
    *p++ = CMD_NOP_TYPE_3;
    /* WRITE_DATA: DST_SEL(5) memory, WR_CONFIRM; address; one dword. */
    *p++ = PACKET3(IT_WRITE_DATA, 3);
    *p++ = 5u << 8 | 1u << 20;
    *p++ = (uint32_t)(uintptr_t)target;
    *p++ = (uint32_t)((uintptr_t)target >> 32);
    *p++ = 0xC0FFEE;
    /* RELEASE_MEM at end of pipe (CACHE_FLUSH_AND_INV_TS_EVENT, EVENT_INDEX 5) with the cache
     * actions of the GPU's generation, DATA_SEL(2) 64-bit, INT_SEL(2) interrupt after the
     * write; the event id as data and as INT_CTXID. */
    *p++ = PACKET3(IT_RELEASE_MEM, 6);
    *p++ = 0x14 | 5u << 8 |
           (props.EngineId.ui32.Major >= 10 ? (1u << 22 | 1u << 21 | 3u << 25)
                                             : (1u << 15 | 1u << 17));
    *p++ = 2u << 29 | 2u << 24;
    *p++ = (uint32_t)mailbox;
    *p++ = (uint32_t)(mailbox >> 32);
    *p++ = event->EventId;
    *p++ = 0;
    *p++ = event->EventId;
    wptr = (uint64_t)(p - (uint32_t *)ring);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    /* GFX9 and later: a 64-bit write pointer and doorbell, in dwords. */
    *(volatile HSAuint64 *)qr.Queue_write_ptr_aql = wptr;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *(volatile HSAuint64 *)qr.Queue_DoorBell_aql = wptr;

    waited = hsaKmtWaitOnEvent(event, 10000) == HSAKMT_STATUS_SUCCESS;
    deadline = seconds() + 10;
    while (*target != 0xC0FFEE || *(volatile HSAuint32 *)qr.Queue_read_ptr != wptr) {
        if (seconds() > deadline) {
            fprintf(stderr, "FAILED the PM4 packets did not run on node %u: data %#x rptr %u\n",
                    node, *target, *(volatile HSAuint32 *)qr.Queue_read_ptr);
            return 1;
        }
    }
    printf("pm4 node=%u data=%#x rptr=%u event=%s\n", node, *target,
           *(volatile HSAuint32 *)qr.Queue_read_ptr, waited ? "woke" : "timeout");
    CHECK(hsaKmtDestroyQueue(qr.QueueId));
    CHECK(hsaKmtDestroyEvent(event));
    if (free_system_memory(ring, ring_size) || free_system_memory(data, 4096))
        return 1;
    return 0;
}

int main(void)
{
    return on_every_gpu(pm4_queue);
}
