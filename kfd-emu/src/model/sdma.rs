//! The SDMA engines: what one does with a user SDMA queue when [`scheduler`](super::scheduler)
//! runs it — notice new work (a doorbell write: the process's doorbell slice is in its
//! `/dev/kfd` memfd, which the engine reads; else the write pointer in the process's memory,
//! read through the GPU's page tables as the engine's `RB_WPTR_POLL` does) and execute the
//! packets against the GPU view: BO, USERPTR and SVM memory alike.
//!
//! Packets are the SDMA 4.x layouts of `vega10_sdma_pkt_open.h`, which `sdma_v4_4_2`
//! (gfx94x), `navi10_sdma_pkt_open.h` (5.x) and `sdma_v6_0_0_pkt_open.h` (6.x) keep for every
//! packet here (they add cache-policy bits the model ignores): every packet the kernel's
//! `sdma_v4_0` / `v4_4_2` / `v5_0` / `v5_2` / `v6_0` rings and buffer/PTE functions emit and
//! every one ROCr 5.2.3's `BlitSdma` emits —
//! NOP, COPY_LINEAR (with `broadcast`'s second destination) and COPY_LINEAR_SUB_WIND (ROCr's
//! rectangle copy), WRITE_LINEAR, CONSTANT_FILL (see `fill_bytes` for its count), FENCE,
//! TRAP, POLL_REGMEM (memory; a register poll, such as an HDP flush, holds at once: no MMIO
//! registers are modelled), COND_EXE, ATOMIC (the TC atomic opcodes, 32- and 64-bit),
//! GEN_PTEPDE, TIMESTAMP (SET, GET, GET_GLOBAL), SRBM_WRITE (a register write: no-op) and, from
//! SDMA 5.0 on, GCR_REQ (a cache flush: no-op). The kernel's INDIRECT (`emit_ib`) runs only on
//! its own rings, never on a KFD user queue, and the 5.x/6.x VM-invalidation sub-op of
//! POLL_REGMEM only in its `emit_vm_flush`: both stop the queue as unknown packets, as do
//! PRED_EXEC and SEM, which nothing emits. The engine writes the read pointer back (bytes,
//! 64-bit) after each packet.
//!
//! A TRAP raises the KFD event named by its `int_context` as the interrupt path does
//! (`kfd_signal_event_interrupt` with 28 valid id bits). An access that faults is what the
//! hardware does with a VM fault: the SMI VMFAULT record (from the GPU view), the process's
//! memory events set with the fault (`kfd_signal_vm_fault_event`), and the queue stops at the
//! packet. A packet the engine does not know stops the queue too; nothing panics.
//!
//! One call runs one turn of the queue (at most `TURN_PACKETS` packets and `TURN_BYTES`
//! bytes, see [`scheduler`](super::scheduler)); each packet starts through the queue's
//! runner, so a preemption (DESTROY_QUEUE, a deactivating UPDATE_QUEUE) lands between
//! packets, and a COPY_LINEAR larger than what is left of the turn stops between chunks and
//! goes on from there the next turn (the read pointer moves past it only once it is done).
//!
//! A copy moves in chunks of [`COPY_CHUNK`]. The engine translates a chunk's source and
//! destinations under the model's lock ([`Driver::reach`]) and then moves the bytes itself
//! without it, so two queues' engines copy at once on two cores and a copy never holds up
//! another process's ioctls: between the long-lived shared mappings of VRAM and GTT BOs'
//! memfds ([`bo_maps`](super::bo_maps)), the queue's GPU's or a peer's mapped in its VM;
//! between such a mapping and a process's own memory (USERPTR BOs, SVM pages) with
//! `process_vm_writev` straight out of the mapping, or `process_vm_readv` in pieces stored
//! into it ([`direct_copy`]). Holes stay holes: where the source BO's memfd has a hole, a BO
//! destination gets the hole punched and process memory gets zeros, and a CONSTANT_FILL of
//! zeros punches a BO's pages, so memory nobody wrote is never loaded or allocated (kfdtest's
//! P2PBandWidthTest copies 1.7 TB between BOs nothing writes). The bytes read afterwards are
//! those of a plain copy. Any other chunk (the driver's own memory, an address the GPU does
//! not map, a chunk whose destination overlaps its source) goes through the GPU view with a
//! bounce buffer as before: read whole before it is written (an overlapping copy is a
//! `memmove` per chunk, the chunks in forward order), a fault writing nothing of its chunk and
//! reported as ever.

use rustix::io::Errno;

use super::driver::Driver;
use super::engine::{TURN_PACKETS, Work, advance, raise_interrupt, stop, vm_fault};
use super::gpu_view::GpuFault;
use super::objects::Domain;
use super::queues::Stopped;

/// `SDMA_OP_*` of `vega10_sdma_pkt_open.h` (the same numbers in `navi10_sdma_pkt_open.h` and
/// `sdma_v6_0_0_pkt_open.h`; `GCR_REQ` exists from SDMA 5.0 on).
const OP_NOP: u32 = 0;
const OP_COPY: u32 = 1;
const OP_WRITE: u32 = 2;
const OP_FENCE: u32 = 5;
const OP_TRAP: u32 = 6;
const OP_POLL_REGMEM: u32 = 8;
const OP_COND_EXE: u32 = 9;
const OP_ATOMIC: u32 = 10;
const OP_CONST_FILL: u32 = 11;
const OP_PTEPDE: u32 = 12;
const OP_TIMESTAMP: u32 = 13;
const OP_SRBM_WRITE: u32 = 14;
const OP_GCR_REQ: u32 = 17;
/// `SDMA_SUBOP_COPY_LINEAR`, `SDMA_SUBOP_COPY_LINEAR_SUB_WIND` (ROCr's `COPY_LINEAR_RECT`).
const SUBOP_COPY_LINEAR: u32 = 0;
const SUBOP_COPY_LINEAR_SUB_WIND: u32 = 4;
/// `SDMA_SUBOP_WRITE_LINEAR`.
const SUBOP_WRITE_LINEAR: u32 = 0;
/// `SDMA_SUBOP_TIMESTAMP_SET`, `_GET`, `_GET_GLOBAL`.
const SUBOP_TIMESTAMP_SET: u32 = 0;
const SUBOP_TIMESTAMP_GET: u32 = 1;
const SUBOP_TIMESTAMP_GET_GLOBAL: u32 = 2;
/// `SDMA_SUBOP_POLL_REGMEM` (the plain poll; the other sub-ops read registers).
const SUBOP_POLL_REGMEM: u32 = 0;
/// `SDMA_SUBOP_GEN_PTEPDE`.
const SUBOP_GEN_PTEPDE: u32 = 0;
/// The most bytes the model moves for one COPY_LINEAR_SUB_WIND (a model limit: the packet's
/// fields reach 2^14 x 2^14 x 2^11 elements of 16 bytes, ROCr tiles no smaller); a larger
/// one stops the queue.
const SUB_WINDOW_MAX_BYTES: u64 = 1 << 30;
/// The most ring bytes an engine reads in one turn: twice the largest packet.
const READ_WINDOW: u64 = 128 << 10;
/// The bytes a copy moves between two looks at its turn's budget.
const COPY_CHUNK: u64 = 1 << 20;
/// What running a packet did.
enum Step {
    /// Done; the engine moves on by this many dwords.
    Done(usize),
    /// The packet is not all there yet, or a POLL_REGMEM condition does not hold yet.
    Wait,
    /// The turn's bytes are spent in the middle of the packet: it goes on next turn.
    Yield,
    /// The queue stops.
    Stop(Stopped),
    /// An access faulted: the process's queues on the GPU were evicted.
    Faulted,
}

/// Runs one turn of a queue: its packets from its read pointer towards its write pointer.
pub(super) fn run_queue(drv: &Driver, w: &Work) -> bool {
    let mut consumed = w.consumed;
    // Bytes to run up to a write pointer, when it is one: ahead, within a ring, in dwords.
    let pending_to = |wptr: u64| {
        let pending = wptr.wrapping_sub(consumed);
        (pending > 0 && pending <= w.ring_size && pending.is_multiple_of(4)).then_some(pending)
    };
    // A doorbell write is the new write pointer (the engine's RB_WPTR); without one, the
    // engine polls the write pointer in memory (RB_WPTR_POLL), through the GPU's page tables.
    let pending = match w.rung().and_then(pending_to) {
        Some(pending) => pending,
        None => {
            let mut wptr = [0u8; 8];
            if let Err(f) = drv.read_here(w.tgid, w.gpu_id, w.wptr_va, &mut wptr) {
                vm_fault(drv, w, &f);
                return true;
            }
            match pending_to(u64::from_le_bytes(wptr)) {
                Some(pending) => pending,
                None => return false,
            }
        }
    };
    // The dwords from the read pointer towards the write pointer, across the wrap, at most a
    // window per turn (the largest packet, a NOP, is 64 KiB): a write pointer a whole large
    // ring ahead costs the supervisor no more memory than that.
    let pending = pending.min(READ_WINDOW);
    let mask = w.ring_size - 1;
    let mut bytes = vec![0u8; pending as usize];
    let start = consumed & mask;
    let first = (w.ring_size - start).min(pending) as usize;
    let read = drv
        .read_here(w.tgid, w.gpu_id, w.ring_va + start, &mut bytes[..first])
        .and_then(|()| match bytes.get_mut(first..) {
            Some(rest) if !rest.is_empty() => drv.read_here(w.tgid, w.gpu_id, w.ring_va, rest),
            _ => Ok(()),
        });
    if let Err(f) = read {
        vm_fault(drv, w, &f);
        return true;
    }
    let dwords: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
        .collect();
    let mut at = 0;
    let mut ran = false;
    let mut packets = 0;
    while at < dwords.len() && packets < TURN_PACKETS {
        // Preempted (destroyed, made inactive): no packet starts.
        let Some(_packet) = w.runner.begin() else {
            break;
        };
        packets += 1;
        w.packet_at.set(consumed);
        match execute(drv, w, &dwords[at..]) {
            Step::Done(n) => {
                at += n;
                consumed = consumed.wrapping_add(4 * n as u64);
                ran = true;
                if !advance(drv, w, consumed) {
                    return true;
                }
                raise_interrupt(drv, w);
            }
            Step::Wait => break,
            Step::Yield => return true,
            Step::Stop(why) => {
                stop(drv, w, why);
                return true;
            }
            Step::Faulted => return true,
        }
    }
    ran
}

/// The 64-bit address in dwords `lo`, `hi`.
fn addr(lo: u32, hi: u32) -> u64 {
    u64::from(hi) << 32 | u64::from(lo)
}

/// The dwords packet `header` takes, given what follows it in `d` (`None`: a packet the
/// engine does not know). The layouts are `vega10_sdma_pkt_open.h`'s; SDMA 5.x and 6.x keep
/// them and add GCR_REQ.
fn packet_len(header: u32, d: &[u32], sdma5: bool) -> Option<usize> {
    let (op, sub_op) = (header & 0xFF, (header >> 8) & 0xFF);
    Some(match (op, sub_op) {
        (OP_NOP, _) => 1 + ((header >> 16) & 0x3FFF) as usize,
        // COPY_LINEAR: `broadcast` (bit 27) adds a second destination (kfdtest's
        // `SDMACopyDataPacket` with two destinations).
        (OP_COPY, SUBOP_COPY_LINEAR) if header & 1 << 27 != 0 => 9,
        (OP_COPY, SUBOP_COPY_LINEAR) => 7,
        (OP_COPY, SUBOP_COPY_LINEAR_SUB_WIND) => 13,
        // WRITE_LINEAR: header, address, `count` (dwords - 1, 20 bits), the data.
        (OP_WRITE, SUBOP_WRITE_LINEAR) => 5 + (*d.get(3)? & 0xF_FFFF) as usize,
        (OP_CONST_FILL, _) => 5,
        (OP_FENCE, _) => 4,
        (OP_TRAP, _) => 2,
        (OP_POLL_REGMEM, SUBOP_POLL_REGMEM) => 6,
        (OP_COND_EXE, _) => 5,
        (OP_ATOMIC, _) => 8,
        (OP_PTEPDE, SUBOP_GEN_PTEPDE) => 10,
        (OP_TIMESTAMP, SUBOP_TIMESTAMP_SET | SUBOP_TIMESTAMP_GET | SUBOP_TIMESTAMP_GET_GLOBAL) => 3,
        (OP_SRBM_WRITE, _) => 3,
        (OP_GCR_REQ, _) if sdma5 => 5,
        _ => return None,
    })
}

/// Runs the packet at the start of `d`.
fn execute(drv: &Driver, w: &Work, d: &[u32]) -> Step {
    let header = d[0];
    let op = header & 0xFF;
    let sub_op = (header >> 8) & 0xFF;
    let sdma5 = drv.dev.cfg.machine.gpus()[w.gpu].target.major >= 10;
    let Some(len) = packet_len(header, d, sdma5) else {
        // WRITE_LINEAR's length is in its fourth dword.
        if op == OP_WRITE && sub_op == SUBOP_WRITE_LINEAR && d.len() < 4 {
            return Step::Wait;
        }
        return Step::Stop(Stopped::BadPacket(header));
    };
    // A packet longer than the engine's read window could never be all there.
    if 4 * len as u64 > READ_WINDOW {
        return Step::Stop(Stopped::BadPacket(header));
    }
    if d.len() < len {
        return Step::Wait;
    }
    let p = &d[..len];
    let trace = |what: &dyn Fn() -> String| {
        if drv.dev.cfg.trace {
            crate::own::elog!(
                "[{}] sdma gpu {:#x} queue {}: {}",
                w.tgid,
                w.gpu_id,
                w.id,
                what()
            );
        }
    };
    let write = |va: u64, bytes: &[u8]| drv.write_here(w.tgid, w.gpu_id, va, bytes);
    let result = match op {
        OP_NOP => {
            trace(&|| format!("NOP count={}", len - 1));
            Ok(())
        }
        OP_COPY if sub_op == SUBOP_COPY_LINEAR_SUB_WIND => {
            let r = SubWindow::decode(p);
            trace(&|| format!("COPY_LINEAR_SUB_WIND {r:x?}"));
            // Its fields allow petabytes in one packet; the engine's round would never end.
            if r.bytes() > SUB_WINDOW_MAX_BYTES {
                return Step::Stop(Stopped::BadPacket(header));
            }
            r.copy(drv, w)
        }
        OP_COPY => {
            // COPY_LINEAR: count is bytes - 1 (22 bits on 4.x).
            let count = u64::from(p[1] & 0x3F_FFFF) + 1;
            let (src, dst) = (addr(p[3], p[4]), addr(p[5], p[6]));
            let dst2 = (len == 9).then(|| addr(p[7], p[8]));
            trace(&|| {
                format!("COPY_LINEAR src={src:#x} dst={dst:#x} dst2={dst2:#x?} bytes={count}")
            });
            let dsts: &[u64] = match dst2 {
                Some(d2) => &[dst, d2],
                None => &[dst],
            };
            let copied = match copy(drv, w, src, dsts, count) {
                Ok(false) => return Step::Yield,
                done => done.map(drop),
            };
            if copied.is_ok() {
                // The timing model's cost of the copy over the link it takes (a peer's VRAM
                // over xGMI when there is a direct link, else PCIe through system memory).
                let (from, to) = (vram_of(drv, w, src), vram_of(drv, w, dst));
                drv.dev.time_sdma_copy(w.gpu, from, to, count);
            }
            copied
        }
        OP_WRITE => {
            // WRITE_LINEAR: the data dwords at the (dword-aligned) address.
            let dst = addr(p[1] & !3, p[2]);
            trace(&|| format!("WRITE_LINEAR dst={dst:#x} dwords={}", len - 4));
            let data: Vec<u8> = p[4..].iter().flat_map(|v| v.to_le_bytes()).collect();
            write(dst, &data)
        }
        OP_CONST_FILL => {
            let dst = addr(p[1], p[2]);
            let Some(bytes) = fill_bytes(header, p[4]) else {
                return Step::Stop(Stopped::BadPacket(header));
            };
            trace(&|| format!("CONSTANT_FILL dst={dst:#x} data={:#x} bytes={bytes}", p[3]));
            // The pattern is the fill size's low bytes of the data dword, repeated.
            fill(drv, w, dst, bytes, p[3].to_le_bytes(), 1 << (header >> 30))
        }
        OP_FENCE => {
            let dst = addr(p[1], p[2]);
            trace(&|| format!("FENCE addr={dst:#x} data={:#x}", p[3]));
            write(dst, &p[3].to_le_bytes())
        }
        OP_TRAP => {
            let context = p[1] & 0x0FFF_FFFF;
            trace(&|| format!("TRAP int_context={context:#x}"));
            w.interrupt.set(Some(context));
            Ok(())
        }
        OP_POLL_REGMEM => {
            // mem_poll (bit 31) polls memory; func in bits 28-30.
            let (value, mask) = (p[3], p[4]);
            let func = (header >> 28) & 7;
            if func == 7 {
                return Step::Stop(Stopped::BadPacket(header));
            }
            if header >> 31 == 0 {
                // A register poll: the model has no MMIO registers, so every register
                // condition holds at once. Runtimes emit these for an HDP flush: ROCr's
                // `hdp_flush_cmd` (sdma_registers.h: header 8, func 0 "always"), and the
                // kernel's `sdma_v4_0_ring_emit_hdp_flush` (hdp_flush bit 26, func 3 on
                // GPU_HDP_FLUSH_DONE) — the HDP write cache is not modelled either: CPU and
                // GPU views of VRAM are coherent here.
                trace(&|| {
                    format!(
                        "POLL_REGMEM register={:#x} func={func} value={value:#x} mask={mask:#x}: \
                     register not modelled, holds",
                        p[1] >> 2
                    )
                });
                return Step::Done(len);
            }
            // Memory: polled until the condition holds. The retry count and interval of
            // the last dword (`retry_count` 0xFFF: forever) are not modelled as a limit:
            // the engine re-reads the value each round until it holds, as with 0xFFF.
            let at = addr(p[1] & !3, p[2]);
            let now = match read_u32(drv, w, at) {
                Ok(v) => v & mask,
                Err(f) => return fault_step(drv, w, f),
            };
            let holds = compare(func, now, value);
            trace(&|| {
                format!(
                    "POLL_REGMEM addr={at:#x} func={func} value={value:#x} mask={mask:#x}: {}",
                    if holds { "holds" } else { "waits" }
                )
            });
            if !holds {
                return Step::Wait;
            }
            Ok(())
        }
        OP_COND_EXE => {
            // COND_EXE: the next `exec_count` dwords run only when the dword at the address
            // holds the reference (the kernel's `sdma_v*_ring_init_cond_exec`: reference 1,
            // a flag the kernel clears to skip the frame).
            let at = addr(p[1] & !3, p[2]);
            let exec_count = (p[4] & 0x3FFF) as usize;
            let now = match read_u32(drv, w, at) {
                Ok(v) => v,
                Err(f) => return fault_step(drv, w, f),
            };
            trace(&|| {
                format!(
                    "COND_EXE addr={at:#x} reference={:#x} value={now:#x} exec_count={exec_count}",
                    p[3]
                )
            });
            if now != p[3] {
                // Skipped: the dwords go with the packet.
                if d.len() < len + exec_count {
                    return Step::Wait;
                }
                return Step::Done(len + exec_count);
            }
            Ok(())
        }
        OP_ATOMIC => {
            let at = addr(p[1], p[2]);
            let src = addr(p[3], p[4]);
            let cmp = addr(p[5], p[6]);
            let operation = header >> 25;
            trace(&|| format!("ATOMIC op={operation} addr={at:#x} src={src:#x} cmp={cmp:#x}"));
            match atomic(drv, w, operation, at, src, cmp) {
                Some(r) => r,
                None => return Step::Stop(Stopped::BadPacket(header)),
            }
        }
        OP_PTEPDE => {
            // GEN_PTEPDE (`sdma_v*_vm_set_pte_pde`): `count + 1` 64-bit entries from the
            // address, each the value (incremented by `incr` per entry) with the flags.
            let pe = addr(p[1] & !7, p[2]);
            let (flags, value, incr) = (addr(p[3], p[4]), addr(p[5], p[6]), u64::from(p[7]));
            let count = u64::from(p[9] & 0x7_FFFF) + 1;
            trace(&|| {
                format!(
                    "PTEPDE pe={pe:#x} value={value:#x} flags={flags:#x} incr={incr:#x} entries={count}"
                )
            });
            let data: Vec<u8> = (0..count)
                .flat_map(|i| (value.wrapping_add(i * incr) | flags).to_le_bytes())
                .collect();
            write(pe, &data)
        }
        OP_TIMESTAMP if sub_op == SUBOP_TIMESTAMP_SET => {
            // The engine's local timestamp counter is not modelled apart from the global
            // one: setting it changes nothing the model reports.
            trace(&|| format!("TIMESTAMP_SET {:#x}: not modelled", addr(p[1], p[2])));
            Ok(())
        }
        OP_TIMESTAMP => {
            // TIMESTAMP GET / GET_GLOBAL: the 64-bit GPU clock (100 MHz reference) at the
            // address, the same counter GET_CLOCK_COUNTERS reports (so under the model clock
            // it follows the model); the local counter is the global one here.
            let dst = addr(p[1] & !7, p[2]);
            let ticks = drv.dev.clock.raw_ns() / 10;
            trace(&|| format!("TIMESTAMP addr={dst:#x} value={ticks}"));
            write(dst, &ticks.to_le_bytes())
        }
        OP_SRBM_WRITE => {
            // A register write (`sdma_v*_ring_emit_wreg`): no MMIO registers are modelled.
            trace(&|| {
                format!(
                    "SRBM_WRITE register={:#x} value={:#x}: not modelled",
                    p[1], p[2]
                )
            });
            Ok(())
        }
        _ => {
            // GCR_REQ (SDMA 5+; `sdma_v5_0_ring_emit_mem_sync`, ROCr's `BuildGCRCommand`):
            // a cache write-back / invalidate. The model's memory has no GPU caches.
            trace(&|| "GCR_REQ: no caches modelled".into());
            Ok(())
        }
    };
    match result {
        Ok(()) => Step::Done(len),
        Err(f) => fault_step(drv, w, f),
    }
}

/// The bytes a CONSTANT_FILL writes: `count` is bytes - 1 whatever the fill size, and the
/// engine writes whole units of the fill size (`fillsize`, header bits 30-31: 0 byte,
/// 1 word, 2 dword), ignoring the low bits of `count` below the unit. So the kernel's
/// `sdma_v4_0_emit_fill_buffer` (and v5/v6: `count = byte_count - 1`, fill size 0), Mesa's
/// `si_sdma_clear_buffer` (fill size 2, `count = bytes - 1` on gfx9+), AMD PAL's
/// `oss4DmaCmdBuffer.cpp` `WriteFillMemoryCmd` (fill size 2: "the low two bits of our count
/// are ignored, but we still program this in terms of bytes"), kfdtest 5.2.3's
/// `SDMAFillDataPacket` (fill size 2 "DW Fill" when size and address are dword aligned, else
/// 0 "Byte Fill", `count = size - 1`) and ROCr 5.2.3's `BlitSdma::BuildFillCommand` (fill
/// size 2, `count = (dwords - 1) * 4` through `SizeToCountOffset` -1) all fill exactly the
/// bytes they mean. Fill size 3 (a 64-bit
/// pattern) has no source dword in this packet: `None`.
fn fill_bytes(header: u32, count: u32) -> Option<u64> {
    let unit = match header >> 30 {
        3 => return None,
        size => 1u64 << size,
    };
    Some((u64::from(count & 0x3F_FFFF) & !(unit - 1)) + unit)
}

/// How POLL_REGMEM (and PM4's WAIT_REG_MEM, which has the same functions) compares the
/// masked value with the reference; `func` 7 is reserved (the caller refuses it).
pub(super) fn compare(func: u32, now: u32, reference: u32) -> bool {
    match func {
        0 => true,
        1 => now < reference,
        2 => now <= reference,
        3 => now == reference,
        4 => now != reference,
        5 => now >= reference,
        _ => now > reference,
    }
}

fn read_u32(drv: &Driver, w: &Work, va: u64) -> Result<u32, GpuFault> {
    let mut b = [0u8; 4];
    drv.read_here(w.tgid, w.gpu_id, va, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// COPY_LINEAR_SUB_WIND (ROCr's `SDMA_PKT_COPY_LINEAR_RECT`, `BuildCopyRectCommand`): a
/// rectangle of elements (`1 << element` bytes) between two pitched surfaces; offsets,
/// pitches and the extent count elements, pitches and the extent minus one.
#[derive(Debug, Clone, Copy)]
struct SubWindow {
    element: u32,
    src: u64,
    src_xyz: [u64; 3],
    src_pitch: u64,
    src_slice: u64,
    dst: u64,
    dst_xyz: [u64; 3],
    dst_pitch: u64,
    dst_slice: u64,
    extent: [u64; 3],
}

impl SubWindow {
    fn decode(p: &[u32]) -> SubWindow {
        let xy = |v: u32| [u64::from(v & 0x3FFF), u64::from((v >> 16) & 0x3FFF)];
        let [sx, sy] = xy(p[3]);
        let [dx, dy] = xy(p[8]);
        let [rx, ry] = xy(p[11]);
        SubWindow {
            element: (p[0] >> 29) & 7,
            src: addr(p[1], p[2]),
            src_xyz: [sx, sy, u64::from(p[4] & 0x7FF)],
            src_pitch: u64::from(p[4] >> 13) + 1,
            src_slice: u64::from(p[5] & 0x0FFF_FFFF) + 1,
            dst: addr(p[6], p[7]),
            dst_xyz: [dx, dy, u64::from(p[9] & 0x7FF)],
            dst_pitch: u64::from(p[9] >> 13) + 1,
            dst_slice: u64::from(p[10] & 0x0FFF_FFFF) + 1,
            extent: [rx + 1, ry + 1, u64::from(p[12] & 0x7FF) + 1],
        }
    }

    /// The bytes the rectangle holds.
    fn bytes(&self) -> u64 {
        self.extent.iter().product::<u64>() << self.element.min(4)
    }

    /// One row at a time: `extent[0]` elements per row, each row through the GPU view.
    fn copy(&self, drv: &Driver, w: &Work) -> Result<(), GpuFault> {
        // Elements of 1 to 16 bytes (element 0-4); larger codes are reserved: 16 bytes.
        let size = 1u64 << self.element.min(4);
        let row = self.extent[0] * size;
        let at = |base: u64, xyz: [u64; 3], pitch: u64, slice: u64, y: u64, z: u64| {
            let elements = xyz[0] + (xyz[1] + y) * pitch + (xyz[2] + z) * slice;
            base.wrapping_add(elements * size)
        };
        for z in 0..self.extent[2] {
            for y in 0..self.extent[1] {
                let s = at(self.src, self.src_xyz, self.src_pitch, self.src_slice, y, z);
                let d = at(self.dst, self.dst_xyz, self.dst_pitch, self.dst_slice, y, z);
                copy_whole(drv, w, s, d, row)?;
            }
        }
        Ok(())
    }
}

/// The GPU (index) whose VRAM the queue's GPU reaches at `va`: a VRAM BO mapped there in the
/// process's VM of that GPU. `None` for system memory (GTT, USERPTR, SVM ranges, which the
/// model keeps in the process's memory) and for an address the VM does not map.
fn vram_of(drv: &Driver, w: &Work, va: u64) -> Option<usize> {
    let st = drv.lock();
    let pdd = st.procs.get(&w.tgid)?.pdds.get(w.gpu)?;
    let (_, mapping) = pdd.vm.lookup(va)?;
    let backing = st.backings.get(&mapping.backing)?;
    (backing.domain == Domain::Vram).then_some(backing.gpu)
}

/// Copies `count` bytes from `src` to each of `dsts` (two for a broadcast COPY_LINEAR) through
/// the GPU view, in chunks, from where the last turn left the packet (`w.resume`) until the turn's bytes (`w.budget`) are spent: true
/// once the copy is done, false when it yields (`w.resume` says how far it got).
fn copy(drv: &Driver, w: &Work, src: u64, dsts: &[u64], count: u64) -> Result<bool, GpuFault> {
    let mut done = match w.resume.take() {
        Some((at, done)) if at == w.packet_at.get() && done < count => done,
        _ => 0,
    };
    let mut buf = Vec::new();
    while done < count {
        if w.budget.get() == 0 {
            w.resume.set(Some((w.packet_at.get(), done)));
            return Ok(false);
        }
        let n = (count - done).min(COPY_CHUNK) as usize;
        let at: Vec<u64> = dsts.iter().map(|&dst| dst + done).collect();
        copy_chunk(drv, w, src + done, &at, n, &mut buf)?;
        done += n as u64;
        let moved = n as u64 * dsts.len() as u64;
        w.budget.set(w.budget.get().saturating_sub(moved));
    }
    Ok(true)
}

/// Copies `count` bytes from `src` to `dst` in one go, in chunks: one row of a
/// COPY_LINEAR_SUB_WIND, whose whole rectangle is bounded by [`SUB_WINDOW_MAX_BYTES`] instead
/// of being resumed across turns.
fn copy_whole(drv: &Driver, w: &Work, src: u64, dst: u64, count: u64) -> Result<(), GpuFault> {
    let mut buf = Vec::new();
    let mut done = 0;
    while done < count {
        let n = (count - done).min(COPY_CHUNK) as usize;
        copy_chunk(drv, w, src + done, &[dst + done], n, &mut buf)?;
        done += n as u64;
    }
    Ok(())
}

/// Copies one chunk of `n` bytes (at most [`COPY_CHUNK`]) from `src` to each of `dsts`: moved
/// by the engine itself without the model's lock when every side is reachable that way
/// ([`direct_copy`]), else through the GPU view with a bounce buffer (`buf`), which takes the
/// faults and reaches the driver's own memory. Through the GPU view the chunk is read whole
/// before it is written, or fails before anything of it is written.
fn copy_chunk(
    drv: &Driver,
    w: &Work,
    src: u64,
    dsts: &[u64],
    n: usize,
    buf: &mut Vec<u8>,
) -> Result<(), GpuFault> {
    if direct_copy(drv, w, src, dsts, n, buf) {
        return Ok(());
    }
    buf.resize(n, 0);
    drv.read_here(w.tgid, w.gpu_id, src, buf)?;
    for &dst in dsts {
        drv.write_here(w.tgid, w.gpu_id, dst, buf)?;
    }
    Ok(())
}

/// The bytes a piece of process memory moves through the engine's buffer at a time when it is
/// copied into a BO: small enough to stay in the cache between the read and the store.
const PROCESS_PIECE: usize = 64 << 10;

/// The copy of one chunk by the engine itself: the sides translated under one take of the
/// model's lock ([`Driver::reach`]), the bytes then moved without it, so two queues' engines
/// copy at once and a copy never holds up another process's ioctls:
/// - BO to BO (VRAM or GTT of any GPU, the queue's or a peer's, mapped in the queue's GPU's
///   VM): between the BOs' long-lived mappings, a hole of the source punched in the
///   destination ([`bo_maps::copy_sparse`](super::bo_maps::copy_sparse));
/// - BO to process memory (a USERPTR BO, SVM pages): one `process_vm_writev` straight out of
///   the BO's mapping per run of data, zeros for a hole ([`BoMap::to_process`]);
/// - process memory to a BO: `process_vm_readv` into the engine's buffer, [`PROCESS_PIECE`]
///   bytes at a time, stored into the BO's mapping only if the queue still exists: an engine
///   blocked in the read (a page behind a userfaultfd nobody serves) whose queue is
///   destroyed meanwhile writes nothing after, as through the GPU view
///   ([`queues::cancelled`](super::queues::cancelled));
/// - process memory to process memory: through the engine's buffer.
///
/// False, having moved nothing, when a side faults or is not reachable so (the driver's own
/// memory), or when a destination overlaps the source (the GPU view's bounce buffer gives
/// that copy its meaning, a `memmove`): the caller copies through the GPU view, which
/// reports the fault. False too when a process's memory fails under the move (the process
/// unmapped it meanwhile): the caller's GPU view then takes the fault (what this move wrote
/// of the chunk stays, as a GPU's copy racing an unmap leaves it).
///
/// [`BoMap::to_process`]: super::bo_maps::BoMap::to_process
fn direct_copy(
    drv: &Driver,
    w: &Work,
    src: u64,
    dsts: &[u64],
    n: usize,
    buf: &mut Vec<u8>,
) -> bool {
    // The emulator's own time moving the bytes is not the machine's (`ClockMode::Program`).
    let _busy = drv.dev.clock.busy();
    let accesses: Vec<(u64, usize, bool)> = std::iter::once((src, n, false))
        .chain(dsts.iter().map(|&dst| (dst, n, true)))
        .collect();
    let Some(mut sides) = drv.reach(w.tgid, w.gpu_id, &accesses) else {
        return false;
    };
    let from = sides.remove(0);
    let clash = sides
        .iter()
        .any(|to| to.iter().any(|d| from.iter().any(|s| s.overlaps(d))));
    if clash {
        return false;
    }
    sides.iter().all(|to| move_pieces(&from, to, buf).is_ok())
}

/// Moves the bytes of `from` (the source's pieces, in order) to `to` (a destination's pieces,
/// as many bytes), piece against piece ([`direct_copy`]).
fn move_pieces(
    from: &[super::gpu_view::Reach],
    to: &[super::gpu_view::Reach],
    buf: &mut Vec<u8>,
) -> Result<(), Errno> {
    use super::gpu_view::Reach;
    let (mut fi, mut fo, mut ti, mut to_off) = (0, 0, 0, 0);
    while let (Some(f), Some(t)) = (from.get(fi), to.get(ti)) {
        let n = (f.len() - fo).min(t.len() - to_off);
        if n > 0 {
            if super::queues::cancelled() {
                return Err(Errno::CANCELED);
            }
            let refused = |_| Errno::FAULT;
            match (f.part(fo, n), t.part(to_off, n)) {
                (
                    Reach::Map {
                        map: s, offset: so, ..
                    },
                    Reach::Map {
                        map: d,
                        offset: d_off,
                        ..
                    },
                ) => super::bo_maps::copy_sparse(&s, so, &d, d_off, n).map_err(refused)?,
                (Reach::Map { map, offset, .. }, Reach::Process { tgid, addr, .. }) => {
                    map.to_process(offset, n, tgid, addr)?
                }
                (Reach::Process { tgid, addr, .. }, t) => {
                    let mut done = 0;
                    while done < n {
                        let k = (n - done).min(PROCESS_PIECE);
                        buf.resize(k, 0);
                        super::objects::remote_read(tgid, addr + done as u64, buf)?;
                        if super::queues::cancelled() {
                            return Err(Errno::CANCELED);
                        }
                        match t.part(done, k) {
                            Reach::Map { map, offset, .. } => {
                                map.write(offset, buf).map_err(refused)?
                            }
                            Reach::Process { tgid, addr, .. } => {
                                super::objects::remote_write(tgid, addr, buf)?
                            }
                        }
                        done += k;
                    }
                }
            }
        }
        fo += n;
        to_off += n;
        if fo == f.len() {
            (fi, fo) = (fi + 1, 0);
        }
        if to_off == t.len() {
            (ti, to_off) = (ti + 1, 0);
        }
    }
    Ok(())
}

/// CONSTANT_FILL's `bytes` at `dst`, byte `i` being `pattern[i % unit]`: by the engine itself
/// without the model's lock when the destination is reachable so ([`Driver::reach`]) — a BO
/// through its mapping (a fill with zeros punches the BO's data there instead of storing
/// zeros: [`BoMap::zero`]), process memory with `process_vm_writev` of the pattern — else
/// through the GPU view, which takes the fault.
///
/// [`BoMap::zero`]: super::bo_maps::BoMap::zero
fn fill(
    drv: &Driver,
    w: &Work,
    dst: u64,
    bytes: u64,
    pattern: [u8; 4],
    unit: usize,
) -> Result<(), GpuFault> {
    // The pattern repeated over a run of whole units (the fill's phase at each piece is its
    // offset in the fill modulo the unit, which divides the run).
    const RUN: usize = 64 << 10;
    let zero = pattern[..unit].iter().all(|&b| b == 0);
    let run = if zero {
        vec![0u8; RUN + 4]
    } else {
        pattern[..unit].repeat((RUN + 4) / unit)
    };
    let direct = || {
        let _busy = drv.dev.clock.busy();
        let len = usize::try_from(bytes).ok()?;
        let pieces = drv.reach(w.tgid, w.gpu_id, &[(dst, len, true)])?.pop()?;
        let mut at = 0usize;
        for p in pieces {
            if super::queues::cancelled() {
                return None;
            }
            let p_len = p.len();
            let phase = &run[at % unit..at % unit + RUN];
            let moved = match p {
                super::gpu_view::Reach::Map { map, offset, len } if zero => {
                    map.zero(offset, len).is_ok()
                }
                super::gpu_view::Reach::Map { map, offset, len } => {
                    map.fill(offset, len, phase).is_ok()
                }
                super::gpu_view::Reach::Process { tgid, addr, len } => {
                    super::bo_maps::pattern_to_process(tgid, addr, len, phase).is_ok()
                }
            };
            if !moved {
                return None;
            }
            at += p_len;
        }
        Some(())
    };
    if direct().is_some() {
        return Ok(());
    }
    // At most 4 MiB (a 22-bit count).
    let n = usize::try_from(bytes).unwrap_or(0);
    let data = pattern[..unit].repeat(n.div_ceil(unit));
    drv.write_here(w.tgid, w.gpu_id, dst, &data[..n])
}

/// ATOMIC `operation` at `at`: the TC atomic opcodes of `TC_OP` (`vega10_enum.h`): the low
/// five bits say which operation, bit 5 that it is 64-bit, bit 6 that it returns nothing
/// (which the engine does not use anyway); `None` for a float or non-atomic opcode.
fn atomic(
    drv: &Driver,
    w: &Work,
    operation: u32,
    at: u64,
    src: u64,
    cmp: u64,
) -> Option<Result<(), GpuFault>> {
    /// `TC_OP_ATOMIC_*_RTN_32`: SWAP 7, CMPSWAP 8, ADD 15 … DEC 25.
    const SWAP: u32 = 7;
    const CMPSWAP: u32 = 8;
    const ADD: u32 = 15;
    const DEC: u32 = 25;
    let kind = operation & 0x1F;
    if !(kind == SWAP || kind == CMPSWAP || (ADD..=DEC).contains(&kind)) {
        return None;
    }
    let wide = operation & 0x20 != 0;
    let size = if wide { 8 } else { 4 };
    let mut old = [0u8; 8];
    if let Err(f) = drv.read_here(w.tgid, w.gpu_id, at, &mut old[..size]) {
        return Some(Err(f));
    }
    let old = u64::from_le_bytes(old);
    let (src, cmp) = if wide {
        (src, cmp)
    } else {
        (src & 0xFFFF_FFFF, cmp & 0xFFFF_FFFF)
    };
    // Signed comparisons at the operation's width.
    let signed = |v: u64| {
        if wide {
            v as i64
        } else {
            i64::from(v as u32 as i32)
        }
    };
    let new = match kind {
        SWAP => src,
        CMPSWAP if old == cmp => src,
        CMPSWAP => return Some(Ok(())),
        15 => old.wrapping_add(src),
        16 => old.wrapping_sub(src),
        17 => {
            if signed(src) < signed(old) {
                src
            } else {
                old
            }
        }
        18 => old.min(src),
        19 => {
            if signed(src) > signed(old) {
                src
            } else {
                old
            }
        }
        20 => old.max(src),
        21 => old & src,
        22 => old | src,
        23 => old ^ src,
        // INC and DEC wrap at the operand, as the shader atomics do.
        24 => {
            if old >= src {
                0
            } else {
                old + 1
            }
        }
        _ => {
            if old == 0 || old > src {
                src
            } else {
                old - 1
            }
        }
    };
    Some(drv.write_here(w.tgid, w.gpu_id, at, &new.to_le_bytes()[..size]))
}

/// A faulting access stops the queue.
fn fault_step(drv: &Driver, w: &Work, f: GpuFault) -> Step {
    vm_fault(drv, w, &f);
    Step::Faulted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encodings of CONSTANT_FILL's producers fill the bytes they mean.
    #[test]
    fn fill_counts_are_bytes_in_whole_fill_units() {
        let dword = 2 << 30;
        for dwords in [1u32, 2, 1000] {
            let bytes = u64::from(dwords) * 4;
            assert_eq!(fill_bytes(dword, (dwords - 1) * 4), Some(bytes), "ROCr");
            assert_eq!(fill_bytes(dword, dwords * 4 - 1), Some(bytes), "Mesa, PAL");
            assert_eq!(fill_bytes(0, dwords * 4 - 1), Some(bytes), "the kernel");
        }
        assert_eq!(fill_bytes(0, 6), Some(7), "kfdtest's byte fill");
        assert_eq!(fill_bytes(1 << 30, 6), Some(8), "words");
        assert_eq!(fill_bytes(3 << 30, 7), None);
        assert_eq!(fill_bytes(dword, u32::MAX), Some(0x40_0000), "22 bits");
    }
}
