//! The SDMA engines: what one does with a user SDMA queue when [`scheduler`](super::scheduler)
//! runs it — notice new work (a doorbell write: the process's doorbell slice is in its
//! `/dev/kfd` memfd, which the engine reads; else the write pointer in the process's memory,
//! read through the GPU's page tables as the engine's `RB_WPTR_POLL` does) and execute the
//! packets against the GPU view: BO, USERPTR and SVM memory alike.
//!
//! Packets are the SDMA 4.x layouts of `vega10_sdma_pkt_open.h`, which `sdma_v4_4_2`
//! (gfx94x), `navi10_sdma_pkt_open.h` (5.x) and `sdma_v6_0_0_pkt_open.h` (6.x) keep for every
//! packet here (they add cache-policy bits the model ignores): NOP, COPY_LINEAR,
//! CONSTANT_FILL, FENCE, TRAP, POLL_REGMEM (memory; a register poll, such as an HDP flush,
//! holds at once: no MMIO registers are modelled), ATOMIC (64-bit add, swap, compare-swap)
//! and TIMESTAMP. The engine writes the read pointer back (bytes, 64-bit) after each packet.
//!
//! A TRAP raises the KFD event named by its `int_context` as the interrupt path does
//! (`kfd_signal_event_interrupt` with 28 valid id bits). An access that faults is what the
//! hardware does with a VM fault: the SMI VMFAULT record (from the GPU view), the process's
//! memory events set with the fault (`kfd_signal_vm_fault_event`), and the queue stops at the
//! packet. A packet the engine does not know stops the queue too; nothing panics.

use super::driver::Driver;
use super::engine::{Work, advance, signal_interrupt, stop, vm_fault};
use super::gpu_view::GpuFault;
use super::objects::Domain;
use super::queues::Stopped;

/// `SDMA_OP_*` of `vega10_sdma_pkt_open.h`.
const OP_NOP: u32 = 0;
const OP_COPY: u32 = 1;
const OP_FENCE: u32 = 5;
const OP_TRAP: u32 = 6;
const OP_POLL_REGMEM: u32 = 8;
const OP_ATOMIC: u32 = 10;
const OP_CONST_FILL: u32 = 11;
const OP_TIMESTAMP: u32 = 13;
/// `SDMA_SUBOP_COPY_LINEAR`.
const SUBOP_COPY_LINEAR: u32 = 0;
/// `SDMA_SUBOP_TIMESTAMP_GET_GLOBAL`.
const SUBOP_TIMESTAMP_GET_GLOBAL: u32 = 2;
/// The TC atomic opcodes of `SDMA_PKT_ATOMIC_HEADER_operation` (`TC_OP_ATOMIC_*_RTN_64`).
const ATOMIC_SWAP_RTN_64: u32 = 39;
const ATOMIC_CMPSWAP_RTN_64: u32 = 40;
const ATOMIC_ADD_RTN_64: u32 = 47;
/// The most ring bytes an engine reads in one round: twice the largest packet.
const READ_WINDOW: u64 = 128 << 10;
/// What running a packet did.
enum Step {
    /// Done; the engine moves on by this many dwords.
    Done(usize),
    /// The packet is not all there yet, or a POLL_REGMEM condition does not hold yet.
    Wait,
    /// The queue stops.
    Stop(Stopped),
    /// An access faulted: the process's queues on the GPU were evicted.
    Faulted,
}

/// Runs the packets of one queue from its read pointer up to its write pointer.
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
    // window per round (the largest packet, a NOP, is 64 KiB): a write pointer a whole large
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
    while at < dwords.len() {
        match execute(drv, w, &dwords[at..]) {
            Step::Done(n) => {
                at += n;
                consumed = consumed.wrapping_add(4 * n as u64);
                ran = true;
                if !advance(drv, w, consumed) {
                    return true;
                }
            }
            Step::Wait => break,
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

/// Runs the packet at the start of `d`.
fn execute(drv: &Driver, w: &Work, d: &[u32]) -> Step {
    let header = d[0];
    let op = header & 0xFF;
    let sub_op = (header >> 8) & 0xFF;
    let len = match (op, sub_op) {
        (OP_NOP, _) => 1 + ((header >> 16) & 0x3FFF) as usize,
        (OP_COPY, SUBOP_COPY_LINEAR) => 7,
        (OP_CONST_FILL, _) => 5,
        (OP_FENCE, _) => 4,
        (OP_TRAP, _) => 2,
        (OP_POLL_REGMEM, _) => 6,
        (OP_ATOMIC, _) => 8,
        (OP_TIMESTAMP, SUBOP_TIMESTAMP_GET_GLOBAL) => 3,
        _ => return Step::Stop(Stopped::BadPacket(header)),
    };
    if d.len() < len {
        return Step::Wait;
    }
    let p = &d[..len];
    let trace = |what: String| {
        if drv.dev.cfg.trace {
            crate::own::elog!(
                "[{}] sdma gpu {:#x} queue {}: {what}",
                w.tgid,
                w.gpu_id,
                w.id
            );
        }
    };
    let result = match op {
        OP_NOP => {
            trace(format!("NOP count={}", len - 1));
            Ok(())
        }
        OP_COPY => {
            // COPY_LINEAR: count is bytes - 1 (22 bits on 4.x).
            let count = u64::from(p[1] & 0x3F_FFFF) + 1;
            let (src, dst) = (addr(p[3], p[4]), addr(p[5], p[6]));
            trace(format!(
                "COPY_LINEAR src={src:#x} dst={dst:#x} bytes={count}"
            ));
            let copied = copy(drv, w, src, dst, count);
            if copied.is_ok() {
                // The timing model's cost of the copy over the link it takes (a peer's VRAM
                // over xGMI when there is a direct link, else PCIe through system memory).
                let (from, to) = (vram_of(drv, w, src), vram_of(drv, w, dst));
                drv.dev.time_sdma_copy(w.gpu, from, to, count);
            }
            copied
        }
        OP_CONST_FILL => {
            // fillsize in header bits 30-31 (2: dwords); count is bytes - 1.
            let dst = addr(p[1], p[2]);
            let count = u64::from(p[4] & 0x3F_FFFF) + 1;
            let unit = 1usize << ((header >> 30) & 3);
            trace(format!(
                "CONSTANT_FILL dst={dst:#x} data={:#x} bytes={count}",
                p[3]
            ));
            let pattern = p[3].to_le_bytes();
            let data: Vec<u8> = (0..count as usize).map(|i| pattern[i % unit]).collect();
            drv.write_here(w.tgid, w.gpu_id, dst, &data)
        }
        OP_FENCE => {
            let dst = addr(p[1], p[2]);
            trace(format!("FENCE addr={dst:#x} data={:#x}", p[3]));
            drv.write_here(w.tgid, w.gpu_id, dst, &p[3].to_le_bytes())
        }
        OP_TRAP => {
            let context = p[1] & 0x0FFF_FFFF;
            trace(format!("TRAP int_context={context:#x}"));
            signal_interrupt(drv, w.tgid, context);
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
                trace(format!(
                    "POLL_REGMEM register={:#x} func={func} value={value:#x} mask={mask:#x}: \
                     register not modelled, holds",
                    p[1] >> 2
                ));
                return Step::Done(len);
            }
            let at = addr(p[1] & !3, p[2]);
            let mut now = [0u8; 4];
            if let Err(f) = drv.read_here(w.tgid, w.gpu_id, at, &mut now) {
                return fault_step(drv, w, f);
            }
            let now = u32::from_le_bytes(now) & mask;
            let holds = match func {
                0 => true,
                1 => now < value,
                2 => now <= value,
                3 => now == value,
                4 => now != value,
                5 => now >= value,
                _ => now > value,
            };
            trace(format!(
                "POLL_REGMEM addr={at:#x} func={func} value={value:#x} mask={mask:#x}: {}",
                if holds { "holds" } else { "waits" }
            ));
            if !holds {
                return Step::Wait;
            }
            Ok(())
        }
        OP_ATOMIC => {
            let at = addr(p[1], p[2]);
            let src = addr(p[3], p[4]);
            let cmp = addr(p[5], p[6]);
            let operation = header >> 25;
            trace(format!(
                "ATOMIC op={operation} addr={at:#x} src={src:#x} cmp={cmp:#x}"
            ));
            match atomic(drv, w, operation, at, src, cmp) {
                Some(r) => r,
                None => return Step::Stop(Stopped::BadPacket(header)),
            }
        }
        _ => {
            // TIMESTAMP GET_GLOBAL: the 64-bit GPU clock (100 MHz reference) at the address,
            // the same counter GET_CLOCK_COUNTERS reports (so under the model clock it
            // follows the model).
            let dst = addr(p[1] & !7, p[2]);
            let ticks = drv.dev.clock.raw_ns() / 10;
            trace(format!("TIMESTAMP addr={dst:#x} value={ticks}"));
            drv.write_here(w.tgid, w.gpu_id, dst, &ticks.to_le_bytes())
        }
    };
    match result {
        Ok(()) => Step::Done(len),
        Err(f) => fault_step(drv, w, f),
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

/// Copies `count` bytes from `src` to `dst` through the GPU view, in chunks.
fn copy(drv: &Driver, w: &Work, src: u64, dst: u64, count: u64) -> Result<(), GpuFault> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; count.min(CHUNK) as usize];
    let mut done = 0;
    while done < count {
        let n = (count - done).min(CHUNK) as usize;
        drv.read_here(w.tgid, w.gpu_id, src + done, &mut buf[..n])?;
        drv.write_here(w.tgid, w.gpu_id, dst + done, &buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// A 64-bit atomic at `at`; `None` for an operation the engine does not know.
fn atomic(
    drv: &Driver,
    w: &Work,
    operation: u32,
    at: u64,
    src: u64,
    cmp: u64,
) -> Option<Result<(), GpuFault>> {
    if !matches!(
        operation,
        ATOMIC_ADD_RTN_64 | ATOMIC_SWAP_RTN_64 | ATOMIC_CMPSWAP_RTN_64
    ) {
        return None;
    }
    let mut old = [0u8; 8];
    if let Err(f) = drv.read_here(w.tgid, w.gpu_id, at, &mut old) {
        return Some(Err(f));
    }
    let old = u64::from_le_bytes(old);
    let new = match operation {
        ATOMIC_ADD_RTN_64 => old.wrapping_add(src),
        ATOMIC_SWAP_RTN_64 => src,
        _ if old == cmp => src,
        _ => return Some(Ok(())),
    };
    Some(drv.write_here(w.tgid, w.gpu_id, at, &new.to_le_bytes()))
}

/// A faulting access stops the queue.
fn fault_step(drv: &Driver, w: &Work, f: GpuFault) -> Step {
    vm_fault(drv, w, &f);
    Step::Faulted
}
