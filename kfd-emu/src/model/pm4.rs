//! The compute CP's PM4 processor: what the model's MEC does with a user compute queue of
//! type `KFD_IOC_QUEUE_TYPE_COMPUTE` (not AQL) when [`scheduler`](super::scheduler) runs it.
//!
//! **Pointers.** Both count dwords. The write pointer is the 64-bit dword count the producer
//! stores at the write-pointer address (and rings the doorbell with) (`CP_HQD_PQ_WPTR_POLL_ADDR`
//! of `kfd_mqd_manager_v9.c`'s `init_mqd`/`update_mqd`, 64-bit from gfx9 on as the kernel's
//! own compute rings use it: `gfx_v9_0_ring_set_wptr_compute` writes `ring->wptr`, a dword
//! count, to the doorbell and the write-back slot). The read pointer the CP reports at the
//! read-pointer address (`CP_HQD_PQ_RPTR_REPORT_ADDR`) is a 32-bit dword offset in the ring
//! (`gfx_v9_0_ring_get_rptr_compute` reads 32 bits; kfdtest's `PM4Queue::Rptr` says "still
//! 32-bit even on Vega10" and waits for it to equal the write pointer modulo the ring).
//! The processor writes that report once per turn and before an interrupt it raises, as the
//! CP writes it while it fetches rather than after each packet.
//!
//! **Packets** (type 3: header bits 31-30 = 3, 29-16 the body's dwords - 1, 15-8 the opcode;
//! type 2: a one-dword filler), opcodes of the kernel's `soc15d.h` (gfx9) and `nvd.h`
//! (gfx10, gfx11), which agree on every packet here; what differs per generation is in the
//! packets' bodies (ACQUIRE_MEM gains a `GCR_CNTL` dword on gfx10+, RELEASE_MEM's cache bits
//! become `GCR_CNTL` bits), and the fields the model reads sit at the same places:
//!
//! * NOP — any length; with count 0x3FFF one dword (the kernel's and kfdtest's filler).
//!   ACQUIRE_MEM, EVENT_WRITE — cache and pipeline events: no caches or
//!   pipeline are modelled, any length.
//! * WRITE_DATA — `DST_SEL` (bits 8-11) 1, 2 or 5 write the data dwords to memory (bit 16,
//!   `WR_ONE_ADDR`, writes them all to the one address), 0 writes registers (recorded);
//!   `WR_CONFIRM` changes nothing here. Consecutive ones to adjacent memory are written
//!   together, before any other packet runs (see `Writes`).
//! * RELEASE_MEM (`gfx_v9_0_ring_emit_fence`'s layout, kfdtest's `PM4ReleaseMemoryPacket`):
//!   `DATA_SEL` (bits 29-31 of the second body dword) 1 writes the low 32 bits, 2 the 64-bit
//!   data, 3 the 64-bit GPU clock (100 MHz), 4 the system clock; `INT_SEL` (bits 24-26) 1 or 2
//!   raises the CP end-of-pipe interrupt with the packet's `int_ctxid`, which KFD takes as an
//!   event id (`kfd_signal_event_interrupt(pasid, context_id0, 32)` for
//!   `SOC15_INTSRC_CP_END_OF_PIPE`): kfdtest and ROCr write the event id into its slot (the
//!   event mailbox) with the same packet.
//! * WAIT_REG_MEM — on memory (`MEM_SPACE`, bit 4), the queue waits (without stopping) until
//!   `(*addr & mask) func reference` holds, the functions of SDMA's POLL_REGMEM; on a
//!   register it holds at once (no MMIO registers are modelled), as SDMA's register polls.
//! * INDIRECT_BUFFER — the IB's dwords (`IB_SIZE`, bits 0-19) run from its address through
//!   the GPU view; one inside an IB nests (at most [`MAX_IB_DEPTH`] deep, else the queue
//!   stops), one with `CHAIN` (bit 20) replaces the IB it is in. The ring's read pointer moves
//!   past the ring's INDIRECT_BUFFER once its IBs are done.
//! * SET_SH_REG, SET_CONTEXT_REG, SET_UCONFIG_REG, SET_CONFIG_REG — recorded as the queue's
//!   register state, at the space's base (`PACKET3_SET_*_REG_START`) plus the offset; an
//!   offset past the space stops the queue.
//! * DISPATCH_DIRECT — runs the kernel the SH registers describe (`COMPUTE_PGM_LO/HI`,
//!   `COMPUTE_PGM_RSRC1/2/3`, `COMPUTE_USER_DATA_*`, `COMPUTE_NUM_THREAD_*`,
//!   `COMPUTE_TMPRING_SIZE`) on the gfx9 interpreter ([`kernel::run_pm4`]); the queue moves
//!   on once every wave ended (a wave's fault is a VM fault, a trap or an illegal
//!   instruction stops the queue). Inside an AQL queue's PM4 IB the registers are the IB's
//!   own (set earlier in the same IB). DISPATCH_INDIRECT is the compute CP's form (PAL's
//!   `PM4_MEC_DISPATCH_INDIRECT`: the address of DIM_X/Y/Z, then the initiator): the
//!   dimensions are read through the GPU view (a fault is a VM fault), then it runs as
//!   DISPATCH_DIRECT. One too short for its fields stops the queue with
//!   [`Stopped::CannotDispatch`].
//! * PRED_EXEC (gfx9.4.3's multi-XCC predication; the field layout of the kernel's
//!   `gfx_v12_1_pkt.h`: `EXEC_COUNT` bits 0-13, `VIRTUALXCCID_SELECT` bits 24-31) — the next
//!   `EXEC_COUNT` dwords run on the XCCs whose bit the select sets and are skipped by the
//!   others. The model's CP is all of the partition's XCCs at once (a queue of a multi-XCC
//!   partition is one queue per XCC in the kernel, `init_mqd_v9_4_3`, each running the same
//!   packets): the dwords run once when the select names an XCC of the partition (bit
//!   `i < num_xcc` of the GPU's topology node; one XCC without the property), and are skipped
//!   when it names none. A count that runs past the end of an IB stops the queue. Where it
//!   differs: register writes predicated for different XCCs land in the one register state,
//!   the last one holding (tinygrad's per-XCC `COMPUTE_DISPATCH_SCRATCH_BASE`s: every wave
//!   gets the last XCC's slice of its scratch buffer, which is as large as any one XCC's).
//! * Anything else (another opcode, EVENT_WRITE_EOP among them: neither kfdtest nor the
//!   kernel's gfx9+ compute rings emit it; a type-0 or type-1 header; an IB that ends inside a
//!   packet) stops the queue with [`Stopped::BadPacket`]; an access that faults is a VM fault,
//!   as for SDMA. A round runs at most [`ROUND_PACKETS`] packets; nothing a packet says
//!   allocates more than its own size.

use super::driver::Driver;
use super::engine::{Work, raise_interrupt, stop, vm_fault};
use super::gpu_view::GpuFault;
use super::kernel::{self, Outcome};
use super::queues::{Pm4State, Stopped};
use super::sdma::compare;

/// `PACKET3_*` opcodes of `soc15d.h` / `nvd.h`.
const IT_NOP: u32 = 0x10;
const IT_DISPATCH_DIRECT: u32 = 0x15;
const IT_DISPATCH_INDIRECT: u32 = 0x16;
const IT_PRED_EXEC: u32 = 0x23;
const IT_WRITE_DATA: u32 = 0x37;
const IT_WAIT_REG_MEM: u32 = 0x3C;
const IT_INDIRECT_BUFFER: u32 = 0x3F;
const IT_EVENT_WRITE: u32 = 0x46;
const IT_RELEASE_MEM: u32 = 0x49;
const IT_ACQUIRE_MEM: u32 = 0x58;
const IT_SET_CONFIG_REG: u32 = 0x68;
const IT_SET_CONTEXT_REG: u32 = 0x69;
const IT_SET_SH_REG: u32 = 0x76;
const IT_SET_UCONFIG_REG: u32 = 0x79;
/// The register spaces of the SET_*_REG packets: (`PACKET3_SET_*_REG_START`, `_END`).
const CONFIG_SPACE: (u32, u32) = (0x2000, 0x2C00);
const SH_SPACE: (u32, u32) = (0x2C00, 0x3000);
const CONTEXT_SPACE: (u32, u32) = (0xA000, 0xA400);
const UCONFIG_SPACE: (u32, u32) = (0xC000, 0x10000);
/// How deep indirect buffers nest (the ring's IB and one IB it calls, as the CP's IB1/IB2,
/// with room to spare).
pub(super) const MAX_IB_DEPTH: usize = 4;
/// The most packets one round runs (IB packets included).
pub(super) const ROUND_PACKETS: usize = 4096;
/// The most dwords the processor reads at once (the largest packet is 2^14 + 1 dwords).
const WINDOW_DWORDS: u64 = 32 << 10;

/// What running a packet did.
enum Step {
    /// Done; the processor moves on past the packet.
    Done,
    /// A condition (WAIT_REG_MEM) does not hold yet.
    Wait,
    Stop(Stopped),
    /// An access faulted (the queue was stopped with the fault).
    Faulted,
    /// Done, and the `u32` dwords after the packet are skipped (a PRED_EXEC whose XCCs are not
    /// the queue's).
    Skip(u32),
    /// An INDIRECT_BUFFER: run `dwords` at `va`; `chain` replaces the current IB.
    Call {
        va: u64,
        dwords: u32,
        chain: bool,
    },
}

/// Where the processor reads: the ring, or the innermost IB.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Ring,
    Ib(u64),
}

/// Dwords read ahead from one source, starting at a position of it.
struct Window {
    source: Source,
    start: u64,
    dwords: Vec<u32>,
}

/// Runs the packets of PM4 queue `w` from its read pointer towards its write pointer.
pub(super) fn run_queue(drv: &Driver, w: &Work) -> bool {
    let ring_dwords = w.ring_size / 4;
    if ring_dwords == 0 {
        return false;
    }
    let mut consumed = w.consumed;
    let pending_to = |wptr: u64| {
        let pending = wptr.wrapping_sub(consumed);
        (pending <= ring_dwords).then_some(pending)
    };
    // The write pointer the producer stored at the write-pointer address, which the CP polls
    // (`CP_PQ_WPTR_POLL_CNTL`; kfdtest's `PM4Queue::SubmitPacket` and the kernel's
    // `gfx_v9_0_ring_set_wptr_compute` store it before ringing the doorbell). The doorbell's
    // last value is not used: the model keeps it in the doorbell page after its queue is
    // destroyed, so a new queue on the same doorbell would read a stale write pointer.
    let mut wptr = [0u8; 8];
    if let Err(f) = drv.read_here(w.tgid, w.gpu_id, w.wptr_va, &mut wptr) {
        vm_fault(drv, w, &f);
        return true;
    }
    let mut pending = pending_to(u64::from_le_bytes(wptr)).unwrap_or(0);
    let Some(mut state) = queue_state(drv, w) else {
        return false;
    };
    if pending == 0 && state.ibs.is_empty() {
        return false;
    }
    let mut window = Window {
        source: Source::Ring,
        start: consumed,
        dwords: Vec::new(),
    };
    let mut ran = false;
    let mut reported = consumed;
    let mut writes = Writes::default();
    for _ in 0..ROUND_PACKETS {
        // The innermost IB, or the ring.
        let (source, at, available) = match state.ibs.last() {
            Some(&(va, dwords, done)) => {
                (Source::Ib(va), u64::from(done), u64::from(dwords - done))
            }
            None => (Source::Ring, consumed, pending),
        };
        if available == 0 {
            if state.ibs.pop().is_none() {
                break;
            }
            if state.ibs.is_empty() {
                // The ring's INDIRECT_BUFFER is done: the read pointer moves past it.
                consumed = consumed.wrapping_add(IB_PACKET_DWORDS);
                pending -= IB_PACKET_DWORDS.min(pending);
            }
            ran = true;
            continue;
        }
        // Read ahead: on the ring up to the write pointer (the ring memory is all mapped),
        // in an IB up to its end.
        let reach = (source, at, available);
        let header = match fetch(drv, w, &mut window, reach, 1) {
            Ok(d) => d[0],
            Err(f) => {
                return !flush(drv, w, &mut writes, consumed, reported)
                    || fault(drv, w, &f, &state);
            }
        };
        let mut len = match packet_len(header) {
            Some(len) if len <= available => len,
            // Not all written yet on the ring; an IB that ends inside a packet is malformed.
            Some(_) if source == Source::Ring => break,
            _ => {
                return !flush(drv, w, &mut writes, consumed, reported)
                    || halt(drv, w, Stopped::BadPacket(header), &state);
            }
        };
        let packet = match fetch(drv, w, &mut window, reach, len) {
            Ok(d) => d,
            Err(f) => {
                return !flush(drv, w, &mut writes, consumed, reported)
                    || fault(drv, w, &f, &state);
            }
        };
        let step = match execute(drv, w, &mut state, &mut writes, &packet) {
            // The skipped dwords go with the packet; on the ring they may not all be written
            // yet (the packet runs again when they are), in an IB they must be there.
            Step::Skip(n) if len + u64::from(n) > available => {
                if source == Source::Ring {
                    break;
                }
                return !flush(drv, w, &mut writes, consumed, reported)
                    || halt(drv, w, Stopped::BadPacket(header), &state);
            }
            Step::Skip(n) => {
                len += u64::from(n);
                Step::Done
            }
            step => step,
        };
        match step {
            Step::Done | Step::Skip(_) => {
                ran = true;
                match state.ibs.last_mut() {
                    Some(ib) => ib.2 += len as u32,
                    None => {
                        consumed = consumed.wrapping_add(len);
                        pending -= len;
                    }
                }
                // The interrupt is raised once the read pointer is written past the packet
                // (in an IB the ring's read pointer stays on the IB packet: at once there).
                if w.interrupt.get().is_some() {
                    if !flush(drv, w, &mut writes, consumed, reported) {
                        return true;
                    }
                    reported = consumed;
                    raise_interrupt(drv, w);
                }
            }
            Step::Wait => break,
            Step::Stop(why) => {
                return !flush(drv, w, &mut writes, consumed, reported)
                    || halt(drv, w, why, &state);
            }
            Step::Faulted => {
                flush(drv, w, &mut writes, consumed, reported);
                return true;
            }
            Step::Call { va, dwords, chain } => {
                ran = true;
                match state.ibs.last_mut() {
                    // A chained IB takes the place of the one it ends.
                    Some(_) if chain => {
                        state.ibs.pop();
                    }
                    Some(ib) => ib.2 += len as u32,
                    // The ring's read pointer stays on its IB packet until the IB is done.
                    None => {}
                }
                if state.ibs.len() >= MAX_IB_DEPTH {
                    return !flush(drv, w, &mut writes, consumed, reported)
                        || halt(drv, w, Stopped::BadPacket(header), &state);
                }
                state.ibs.push((va, dwords, 0));
            }
        }
    }
    if !flush(drv, w, &mut writes, consumed, reported) {
        return true;
    }
    save(drv, w, &state);
    ran
}

/// Writes the read pointer the CP reports when it moved since it was last written
/// (`reported`): once per turn, and before an interrupt the turn raises. The CP writes its
/// read-pointer report as it fetches, not after each packet (`CP_HQD_PQ_RPTR_REPORT_ADDR`),
/// and what a producer waits for (kfdtest's `Wait4PacketConsumption`: the report equal to
/// the write pointer) is the same. True to go on; false when the queue went away or the write
/// faulted (stopped then).
fn flush(drv: &Driver, w: &Work, writes: &mut Writes, consumed: u64, reported: u64) -> bool {
    if let Err(f) = writes.flush(drv, w) {
        vm_fault(drv, w, &f);
        return false;
    }
    consumed == reported || report(drv, w, consumed)
}

/// The most bytes of WRITE_DATA held back to be written together.
const WRITES_MAX: usize = 64 << 10;

/// The data of WRITE_DATA packets to memory not written yet: consecutive packets that write
/// adjacent dwords (kfdtest's `PM4EventInterrupt` writes a page a dword per packet) are
/// written at once, before any other packet runs (one that reads memory, an interrupt, a
/// fence), before the read pointer is reported and at the end of the turn. What a program
/// can see is the same: the CP's writes reach memory in no order the program may rely on
/// until a later packet or the read pointer says they are done. A fault in such a write is
/// reported when the bytes are written (the queue stops there), as the hardware reports a
/// VM fault after the fact.
#[derive(Default)]
struct Writes {
    va: u64,
    bytes: Vec<u8>,
}

impl Writes {
    /// Adds `data` at `va`, writing what was held first unless `data` continues it.
    fn add(&mut self, drv: &Driver, w: &Work, va: u64, data: &[u8]) -> Result<(), GpuFault> {
        let continues = self.va.checked_add(self.bytes.len() as u64) == Some(va);
        if !(continues && self.bytes.len() + data.len() <= WRITES_MAX) {
            self.flush(drv, w)?;
            self.va = va;
        }
        self.bytes.extend_from_slice(data);
        Ok(())
    }

    /// Writes what is held.
    fn flush(&mut self, drv: &Driver, w: &Work) -> Result<(), GpuFault> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        let written = drv.write_here(w.tgid, w.gpu_id, self.va, &self.bytes);
        self.bytes.clear();
        written
    }
}

/// INDIRECT_BUFFER's dwords (header and three).
const IB_PACKET_DWORDS: u64 = 4;

/// The dwords of the packet `header` starts; `None` for a header the CP refuses. A type-3
/// NOP whose count is 0x3FFF is one dword: the kernel's compute-ring NOP
/// (`gfx_v9_0_ring_funcs_compute.nop = PACKET3(PACKET3_NOP, 0x3FFF)`, likewise gfx10/11) and
/// kfdtest's ring padding (`CMD_NOP_TYPE_3` 0xFFFF1002, and `PM4NopPacket(1)`).
fn packet_len(header: u32) -> Option<u64> {
    let count = (header >> 16) & 0x3FFF;
    match header >> 30 {
        3 if count == 0x3FFF && (header >> 8) & 0xFF == IT_NOP => Some(1),
        3 => Some(u64::from(count) + 2),
        2 => Some(1),
        _ => None,
    }
}

/// `len` dwords of `source` from position `at` (ring positions wrap), through the window,
/// which reads ahead up to `ahead` dwords (at most [`WINDOW_DWORDS`]) when it must read.
fn fetch(
    drv: &Driver,
    w: &Work,
    window: &mut Window,
    (source, at, ahead): (Source, u64, u64),
    len: u64,
) -> Result<Vec<u32>, GpuFault> {
    let covered = window.source == source
        && at >= window.start
        && at + len <= window.start + window.dwords.len() as u64;
    if !covered {
        let n = len.max(ahead.min(WINDOW_DWORDS));
        let mut bytes = vec![0u8; (n * 4) as usize];
        match source {
            Source::Ring => {
                let ring_dwords = w.ring_size / 4;
                let start = at % ring_dwords;
                let first = ((ring_dwords - start).min(n) * 4) as usize;
                drv.read_here(w.tgid, w.gpu_id, w.ring_va + start * 4, &mut bytes[..first])?;
                if first < bytes.len() {
                    drv.read_here(w.tgid, w.gpu_id, w.ring_va, &mut bytes[first..])?;
                }
            }
            Source::Ib(va) => drv.read_here(w.tgid, w.gpu_id, va + at * 4, &mut bytes)?,
        }
        window.source = source;
        window.start = at;
        window.dwords = bytes
            .chunks_exact(4)
            .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
            .collect();
    }
    let from = (at - window.start) as usize;
    Ok(window.dwords[from..from + len as usize].to_vec())
}

/// The 64-bit address in dwords `lo`, `hi`.
fn addr(lo: u32, hi: u32) -> u64 {
    u64::from(hi) << 32 | u64::from(lo)
}

/// The XCCs of the queue's GPU (its partition) as PRED_EXEC's `VIRTUALXCCID_SELECT` names
/// them: bit `i` for each of the topology node's `num_xcc` XCCs (one without the property,
/// as a kernel before GC 9.4.3 partitions prints none).
fn xcc_mask(drv: &Driver, w: &Work) -> u32 {
    let machine = &drv.dev.cfg.machine;
    let xccs = machine
        .gpus()
        .get(w.gpu)
        .and_then(|g| machine.node_of(g))
        .and_then(|n| n.properties.get("num_xcc"))
        .unwrap_or(1)
        .clamp(1, 8);
    (1u32 << xccs) - 1
}

/// Runs one packet (`p` is all of it).
fn execute(drv: &Driver, w: &Work, state: &mut Pm4State, writes: &mut Writes, p: &[u32]) -> Step {
    let header = p[0];
    if header >> 30 == 2 {
        return Step::Done;
    }
    let opcode = (header >> 8) & 0xFF;
    let body = &p[1..];
    // Held WRITE_DATA bytes are written before any other packet runs.
    let held = opcode == IT_WRITE_DATA
        && body.len() >= 3
        && matches!((body[0] >> 8) & 0xF, 1 | 2 | 5)
        && body[0] & 1 << 16 == 0;
    if !held && let Err(f) = writes.flush(drv, w) {
        vm_fault(drv, w, &f);
        return Step::Faulted;
    }
    let trace = |what: &dyn Fn() -> String| {
        if drv.dev.cfg.trace {
            crate::own::elog!(
                "[{}] pm4 gpu {:#x} queue {}: {}",
                w.tgid,
                w.gpu_id,
                w.id,
                what()
            );
        }
    };
    let write = |va: u64, bytes: &[u8]| drv.write_here(w.tgid, w.gpu_id, va, bytes);
    let need = |n: usize| body.len() >= n;
    let result = match opcode {
        IT_NOP | IT_ACQUIRE_MEM | IT_EVENT_WRITE => {
            trace(&|| format!("opcode {opcode:#x} ({} dwords): no-op", p.len()));
            Ok(())
        }
        IT_WRITE_DATA if need(3) => {
            let dst_sel = (body[0] >> 8) & 0xF;
            let one_addr = body[0] & 1 << 16 != 0;
            let data = &body[3..];
            trace(&|| {
                format!(
                    "WRITE_DATA dst_sel={dst_sel} addr={:#x} dwords={}",
                    addr(body[1], body[2]),
                    data.len()
                )
            });
            match dst_sel {
                0 => {
                    for (i, &v) in data.iter().enumerate() {
                        let reg = body[1].wrapping_add(if one_addr { 0 } else { i as u32 });
                        state.regs.insert(reg & 0x3_FFFF, v);
                    }
                    Ok(())
                }
                1 | 2 | 5 => {
                    let va = addr(body[1] & !3, body[2]);
                    if one_addr {
                        data.last().map_or(Ok(()), |v| write(va, &v.to_le_bytes()))
                    } else {
                        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
                        writes.add(drv, w, va, &bytes)
                    }
                }
                _ => return Step::Stop(Stopped::BadPacket(header)),
            }
        }
        IT_RELEASE_MEM if need(7) => {
            let data_sel = body[1] >> 29;
            let int_sel = (body[1] >> 24) & 7;
            let va = addr(body[2] & !3, body[3]);
            let data = addr(body[4], body[5]);
            let ctxid = body[6];
            trace(&|| {
                format!(
                    "RELEASE_MEM data_sel={data_sel} int_sel={int_sel} addr={va:#x} data={data:#x} \
                 int_ctxid={ctxid:#x}"
                )
            });
            let written = match data_sel {
                0 => Ok(()),
                1 => write(va, &body[4].to_le_bytes()),
                2 => write(va, &data.to_le_bytes()),
                // The GPU clock counter (100 MHz, the one GET_CLOCK_COUNTERS reports) and the
                // system clock counter (the model's one clock, in ns).
                3 => write(va, &(drv.dev.clock.raw_ns() / 10).to_le_bytes()),
                4 => write(va, &drv.dev.clock.raw_ns().to_le_bytes()),
                _ => return Step::Stop(Stopped::BadPacket(header)),
            };
            if written.is_ok() && matches!(int_sel, 1 | 2) {
                w.interrupt.set(Some(ctxid));
            }
            written
        }
        IT_WAIT_REG_MEM if need(5) => {
            let func = body[0] & 7;
            let memory = body[0] & 1 << 4 != 0;
            let (reference, mask) = (body[3], body[4]);
            if func == 7 {
                return Step::Stop(Stopped::BadPacket(header));
            }
            if !memory {
                trace(&|| format!("WAIT_REG_MEM register={:#x}: not modelled, holds", body[1]));
                return Step::Done;
            }
            let va = addr(body[1] & !3, body[2]);
            let mut now = [0u8; 4];
            if let Err(f) = drv.read_here(w.tgid, w.gpu_id, va, &mut now) {
                vm_fault(drv, w, &f);
                return Step::Faulted;
            }
            let holds = compare(func, u32::from_le_bytes(now) & mask, reference);
            trace(&|| {
                format!(
                    "WAIT_REG_MEM addr={va:#x} func={func} reference={reference:#x} mask={mask:#x}: {}",
                    if holds { "holds" } else { "waits" }
                )
            });
            if !holds {
                return Step::Wait;
            }
            Ok(())
        }
        IT_INDIRECT_BUFFER if body.len() == 3 => {
            let va = addr(body[0] & !3, body[1] & 0xFFFF);
            let dwords = body[2] & 0xF_FFFF;
            let chain = body[2] & 1 << 20 != 0;
            trace(&|| format!("INDIRECT_BUFFER addr={va:#x} dwords={dwords} chain={chain}"));
            return Step::Call { va, dwords, chain };
        }
        IT_SET_CONFIG_REG | IT_SET_CONTEXT_REG | IT_SET_SH_REG | IT_SET_UCONFIG_REG if need(1) => {
            let (start, end) = match opcode {
                IT_SET_CONFIG_REG => CONFIG_SPACE,
                IT_SET_CONTEXT_REG => CONTEXT_SPACE,
                IT_SET_SH_REG => SH_SPACE,
                _ => UCONFIG_SPACE,
            };
            let first = start + (body[0] & 0xFFFF);
            let values = &body[1..];
            if u64::from(first) + values.len() as u64 > u64::from(end) {
                return Step::Stop(Stopped::BadPacket(header));
            }
            trace(&|| {
                format!("SET_REG opcode={opcode:#x} register={first:#x} values={values:#x?}")
            });
            for (i, &v) in values.iter().enumerate() {
                state.regs.insert(first + i as u32, v);
            }
            Ok(())
        }
        IT_PRED_EXEC if need(1) => {
            let count = body[0] & 0x3FFF;
            let select = body[0] >> 24;
            let ours = select & xcc_mask(drv, w) != 0;
            trace(&|| {
                format!(
                    "PRED_EXEC select={select:#04x} count={count}: {}",
                    if ours { "runs" } else { "skipped" }
                )
            });
            return if ours { Step::Done } else { Step::Skip(count) };
        }
        IT_DISPATCH_DIRECT if need(4) => {
            trace(&|| format!("DISPATCH_DIRECT {:?}", &body[..4]));
            return match kernel::run_pm4(drv, w, &state.regs, header, body) {
                Outcome::Done => Step::Done,
                Outcome::Wait => Step::Wait,
                Outcome::Stop(why) => Step::Stop(why),
                Outcome::Faulted => Step::Faulted,
            };
        }
        IT_DISPATCH_INDIRECT if need(3) => {
            // The compute CP's form (PAL's PM4_MEC_DISPATCH_INDIRECT): the address of
            // DIM_X, DIM_Y, DIM_Z in memory, then the initiator.
            let args = addr(body[0] & !3, body[1]);
            let mut dims = [0u8; 12];
            if let Err(f) = drv.read_here(w.tgid, w.gpu_id, args, &mut dims) {
                vm_fault(drv, w, &f);
                return Step::Faulted;
            }
            let d = |i: usize| u32::from_le_bytes([dims[i], dims[i + 1], dims[i + 2], dims[i + 3]]);
            let direct = [d(0), d(4), d(8), body[2]];
            trace(&|| format!("DISPATCH_INDIRECT args={args:#x} {direct:?}"));
            return match kernel::run_pm4(drv, w, &state.regs, header, &direct) {
                Outcome::Done => Step::Done,
                Outcome::Wait => Step::Wait,
                Outcome::Stop(why) => Step::Stop(why),
                Outcome::Faulted => Step::Faulted,
            };
        }
        IT_DISPATCH_DIRECT | IT_DISPATCH_INDIRECT => {
            trace(&|| format!("dispatch (opcode {opcode:#x}) too short: the queue stops"));
            return Step::Stop(Stopped::CannotDispatch(header));
        }
        _ => {
            trace(&|| {
                format!("opcode {opcode:#x} (header {header:#010x}) cannot run: the queue stops")
            });
            return Step::Stop(Stopped::BadPacket(header));
        }
    };
    match result {
        Ok(()) => Step::Done,
        Err(f) => {
            vm_fault(drv, w, &f);
            Step::Faulted
        }
    }
}

/// What an AQL queue's PM4 indirect buffer came to ([`run_aql_ib`]).
pub(super) enum AqlIb {
    /// Every packet of it ran.
    Done,
    /// A WAIT_REG_MEM in it does not hold yet: the AQL packet waits and runs again.
    Wait,
    /// The CP refuses a packet of it.
    Stop(Stopped),
    /// An access faulted: the VM fault was taken (`vm_fault`).
    Faulted,
}

/// Runs the INDIRECT_BUFFER command that an AQL vendor-specific packet of format
/// `AMD_AQL_FORMAT_PM4_IB` carries in its `ib_jump_cmd` dwords — ROCr 5.2.3's
/// `AqlQueue::ExecutePM4` on gfx9 and later, which `GpuAgent::InvalidateCodeCaches` uses on
/// the utility queue whenever a code object is loaded — as the CP runs an IB: every packet of
/// the buffer, nested IBs up to [`MAX_IB_DEPTH`], a chained IB in place of the rest of its
/// caller. The whole IB runs within the AQL packet: a WAIT_REG_MEM that does not hold makes
/// the AQL packet wait, to be run again from its start (the buffers ROCr submits this way,
/// cache invalidations, do the same again); an interrupt a RELEASE_MEM asks for is raised at
/// once (the queue's read index stays on the AQL packet until the IB is done). Register
/// writes are not kept: an AQL queue has no PM4 register state the model reads.
pub(super) fn run_aql_ib(drv: &Driver, w: &Work, jump: &[u32; 4]) -> AqlIb {
    let mut state = Pm4State::default();
    let mut writes = Writes::default();
    let ran = match execute(drv, w, &mut state, &mut writes, jump) {
        Step::Call { va, dwords, .. } => run_ib(drv, w, &mut state, &mut writes, va, dwords, 1),
        Step::Done | Step::Skip(0) => AqlIb::Done,
        // Nothing follows the packet's IB command to skip.
        Step::Skip(_) => AqlIb::Stop(Stopped::BadPacket(jump[0])),
        Step::Wait => AqlIb::Wait,
        Step::Stop(why) => AqlIb::Stop(why),
        Step::Faulted => return AqlIb::Faulted,
    };
    // What WRITE_DATA packets left held lands before the packet completes or waits.
    if let Err(f) = writes.flush(drv, w) {
        vm_fault(drv, w, &f);
        return AqlIb::Faulted;
    }
    raise_interrupt(drv, w);
    ran
}

/// Runs the `dwords` of the IB at `va` at nesting depth `depth` (see [`run_aql_ib`]).
fn run_ib(
    drv: &Driver,
    w: &Work,
    state: &mut Pm4State,
    writes: &mut Writes,
    va: u64,
    dwords: u32,
    depth: usize,
) -> AqlIb {
    let mut bytes = vec![0u8; dwords as usize * 4];
    if let Err(f) = drv.read_here(w.tgid, w.gpu_id, va, &mut bytes) {
        vm_fault(drv, w, &f);
        return AqlIb::Faulted;
    }
    let d: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut at = 0;
    while at < d.len() {
        let header = d[at];
        // An IB that ends inside a packet is malformed.
        let Some(len) = packet_len(header)
            .map(|len| len as usize)
            .filter(|&len| at + len <= d.len())
        else {
            return AqlIb::Stop(Stopped::BadPacket(header));
        };
        match execute(drv, w, state, writes, &d[at..at + len]) {
            Step::Done => raise_interrupt(drv, w),
            Step::Skip(n) if at + len + n as usize > d.len() => {
                return AqlIb::Stop(Stopped::BadPacket(header));
            }
            Step::Skip(n) => at += n as usize,
            Step::Wait => return AqlIb::Wait,
            Step::Stop(why) => return AqlIb::Stop(why),
            Step::Faulted => return AqlIb::Faulted,
            Step::Call { va, dwords, chain } => {
                if depth >= MAX_IB_DEPTH {
                    return AqlIb::Stop(Stopped::BadPacket(header));
                }
                match run_ib(drv, w, state, writes, va, dwords, depth + 1) {
                    AqlIb::Done if chain => return AqlIb::Done,
                    AqlIb::Done => {}
                    other => return other,
                }
            }
        }
        at += len;
    }
    AqlIb::Done
}

/// The queue's CP state, copied out; `None` when the queue is gone.
fn queue_state(drv: &Driver, w: &Work) -> Option<Pm4State> {
    let st = drv.lock();
    let q = st.procs.get(&w.tgid)?.queues.by_id.get(&w.id)?;
    Some(q.pm4.clone())
}

/// Keeps the CP state for the next round.
fn save(drv: &Driver, w: &Work, state: &Pm4State) {
    let mut st = drv.lock();
    if let Some(q) = st
        .procs
        .get_mut(&w.tgid)
        .and_then(|p| p.queues.by_id.get_mut(&w.id))
    {
        q.pm4 = state.clone();
    }
}

/// Records the new read position and writes the read pointer the CP reports: the 32-bit
/// dword offset in the ring. False when the queue went away or the write faulted (the queue
/// is stopped then).
fn report(drv: &Driver, w: &Work, consumed: u64) -> bool {
    {
        let mut st = drv.lock();
        let Some(q) = st
            .procs
            .get_mut(&w.tgid)
            .and_then(|p| p.queues.by_id.get_mut(&w.id))
        else {
            return false;
        };
        q.consumed = consumed;
    }
    let rptr = (consumed % (w.ring_size / 4)) as u32;
    if let Err(f) = drv.write_here(w.tgid, w.gpu_id, w.rptr_va, &rptr.to_le_bytes()) {
        vm_fault(drv, w, &f);
        return false;
    }
    true
}

/// Stops the queue at a packet it cannot run, keeping its state.
fn halt(drv: &Driver, w: &Work, why: Stopped, state: &Pm4State) -> bool {
    save(drv, w, state);
    stop(drv, w, why);
    true
}

/// A faulting read of the ring or an IB.
fn fault(drv: &Driver, w: &Work, f: &GpuFault, state: &Pm4State) -> bool {
    save(drv, w, state);
    vm_fault(drv, w, f);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Type 3 takes count + 2 dwords, except the one-dword NOP of count 0x3FFF; type 2 is a
    /// filler; types 0 and 1 are refused.
    #[test]
    fn packet_lengths_follow_the_header() {
        assert_eq!(packet_len(0xC006_4902), Some(8), "RELEASE_MEM, count 6");
        assert_eq!(packet_len(0xFFFF_1002), Some(1), "kfdtest's CMD_NOP_TYPE_3");
        assert_eq!(packet_len(0xFFFF_3702), Some(0x4001), "only NOP is special");
        assert_eq!(packet_len(0x8000_0000), Some(1));
        assert_eq!(packet_len(0x0000_1234), None);
        assert_eq!(packet_len(0x4000_0000), None);
    }
}
