//! PM4 compute queues: the packets a runtime without AQL (kfdtest, tinygrad) submits to a
//! compute queue of type `KFD_IOC_QUEUE_TYPE_COMPUTE`, encoded per GFX generation, and
//! [`Pm4Queue`], such a queue with completions through a KFD event.
//!
//! The packets are type 3 (`PACKET3_COMPUTE` of the kernel's `soc15d.h`: type 3 in bits
//! 31-30, the body's dwords - 1 in 29-16, the opcode in 15-8, the compute shader-type bit 1,
//! as kfdtest's `PM4Packet::InitPM4Header` sets it). Opcodes are the same from gfx9 to gfx11
//! (`soc15d.h`, `nvd.h`); two bodies differ:
//!
//! * ACQUIRE_MEM: gfx9 has 6 body dwords (`CP_COHER_CNTL`, size, base, poll interval);
//!   gfx10 and gfx11 add a 7th, `GCR_CNTL`, and leave `CP_COHER_CNTL` 0 (`gfx_v9_0_emit_mem_sync`
//!   vs `gfx_v10_0_emit_mem_sync`; kfdtest's `PM4AcquireMemoryPacket::InitPacketAI` / `NV`).
//! * RELEASE_MEM: the cache actions of the first body dword are `EOP_TC_*_ACTION_EN` bits on
//!   gfx9 (`gfx_v9_0_ring_emit_fence`) and `GCR_*` bits on gfx10+ (`gfx_v10_0_ring_emit_fence`,
//!   `nvd.h`'s `PACKET3_RELEASE_MEM_GCR_*`); `DATA_SEL`, `INT_SEL`, the address, the data and
//!   `INT_CTXID` sit at the same places.
//!
//! gfx12's packets (`soc24`) are not encoded here: [`Pm4Generation::of`] says `None`.
//!
//! ```
//! # kfd_emu::supervisor::run_attached(
//! #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
//! #     || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use std::time::Duration;
//! use kfd_ioctl::{Kfd, abi::AllocMemFlags, topology::Topology};
//! use kfd_queue::{Pm4Command, Pm4Queue, QueueContext};
//!
//! let kfd = Kfd::open()?;
//! let topology = Topology::read()?;
//! let gpu = topology.gpus().next().ok_or("no GPU")?;
//! let gpu_id = gpu.gpu_id().ok_or("no gpu_id")?;
//! kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)?;
//! let context = QueueContext::new(&kfd, &topology)?;
//! let mut queue = Pm4Queue::new(&context, gpu_id, 4096)?;
//!
//! let base = kfd.get_process_apertures()?[0].gpuvm.start + (1 << 40);
//! let mem = kfd.alloc_memory_of_gpu(gpu_id, base, 4096, AllocMemFlags::GTT | AllocMemFlags::WRITABLE)?;
//! kfd.map_memory_to_gpu(&mem, &[gpu_id])?;
//! let done = queue.submit(&[
//!     Pm4Command::WriteData { addr: mem.va(), data: &[0xC0FFEE] },
//!     Pm4Command::Fence { addr: mem.va() + 8, value: 1 << 40 },
//! ])?;
//! queue.wait(done, Duration::from_secs(5))?;
//! let mut back = [0u8; 16];
//! mem.map_cpu()?.read_slice(&mut back, 0)?;
//! assert_eq!(back[..4], 0xC0FFEEu32.to_le_bytes());
//! assert_eq!(back[8..], (1u64 << 40).to_le_bytes());
//! # Ok(())
//! # }).unwrap().unwrap();
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use kfd_ioctl::BufferObject;
use kfd_ioctl::topology::GfxTargetVersion;
use kfd_ioctl::{
    ComputeBuffers, Doorbells, Event, EventKind, OwnedCpuMapping, Queue, QueueBuffer, QueueSpec,
    QueueType,
};
use vm_memory::Bytes;

use kfd_ioctl::GpuId;

use crate::error::{Error, Result};
use crate::packet::PollFunc;
use crate::sdma::QueueContext;

/// `PACKET3_NOP`.
pub const IT_NOP: u32 = 0x10;
/// `PACKET3_DISPATCH_DIRECT`.
pub const IT_DISPATCH_DIRECT: u32 = 0x15;
/// `PACKET3_WRITE_DATA`.
pub const IT_WRITE_DATA: u32 = 0x37;
/// `PACKET3_WAIT_REG_MEM`.
pub const IT_WAIT_REG_MEM: u32 = 0x3C;
/// `PACKET3_INDIRECT_BUFFER`.
pub const IT_INDIRECT_BUFFER: u32 = 0x3F;
/// `PACKET3_RELEASE_MEM`.
pub const IT_RELEASE_MEM: u32 = 0x49;
/// `PACKET3_ACQUIRE_MEM`.
pub const IT_ACQUIRE_MEM: u32 = 0x58;
/// `PACKET3_SET_SH_REG`.
pub const IT_SET_SH_REG: u32 = 0x76;
/// `PACKET3_SET_SH_REG_START`: SET_SH_REG's offsets count from here.
pub const SH_REG_START: u32 = 0x2C00;
/// `PACKET3_SET_SH_REG_END`.
pub const SH_REG_END: u32 = 0x3000;
/// The most body dwords a type-3 packet has (`count` is 14 bits).
pub const MAX_BODY_DWORDS: usize = 0x4000;
/// The most dwords an INDIRECT_BUFFER runs (`IB_SIZE`, 20 bits).
pub const MAX_IB_DWORDS: u32 = 0xF_FFFF;

/// `CACHE_FLUSH_AND_INV_TS_EVENT` with `EVENT_INDEX(5)` (end of pipe), RELEASE_MEM's event.
const EOP_EVENT: u32 = 0x14 | 5 << 8;

/// The PM4 layouts of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pm4Generation {
    /// gfx9 (`soc15d.h`, `gfx_v9_0.c`; gfx94x too).
    Gfx9,
    /// gfx10 and gfx11 (`nvd.h`, `gfx_v10_0.c`, `gfx_v11_0.c`).
    Gfx10,
}

impl Pm4Generation {
    /// The generation of a GFX version; `None` before gfx9 and from gfx12 on.
    pub fn of(gfx: GfxTargetVersion) -> Option<Pm4Generation> {
        match gfx.major {
            9 => Some(Pm4Generation::Gfx9),
            10 | 11 => Some(Pm4Generation::Gfx10),
            _ => None,
        }
    }
}

/// The header of a compute type-3 packet with `body` dwords after it (1 to
/// [`MAX_BODY_DWORDS`]): `PACKET3_COMPUTE(opcode, body - 1)`.
pub fn header(opcode: u32, body: usize) -> u32 {
    3 << 30 | ((body.saturating_sub(1) as u32) & 0x3FFF) << 16 | (opcode & 0xFF) << 8 | 1 << 1
}

fn lo(addr: u64) -> u32 {
    addr as u32
}

fn hi(addr: u64) -> u32 {
    (addr >> 32) as u32
}

/// `dwords` dwords of padding: for one, the one-dword NOP (`PACKET3(PACKET3_NOP, 0x3FFF)`,
/// the kernel's compute-ring NOP and kfdtest's `CMD_NOP_TYPE_3`), else a NOP with a body.
pub fn nop(dwords: u16) -> Vec<u32> {
    match dwords {
        0 => Vec::new(),
        1 => vec![header(IT_NOP, 0x4000)],
        n => {
            let mut p = vec![header(IT_NOP, usize::from(n) - 1)];
            p.resize(usize::from(n), 0);
            p
        }
    }
}

/// WRITE_DATA of `data` to memory at `addr` (dword aligned): `DST_SEL(5)` (memory),
/// `WR_CONFIRM`, the address incrementing (kfdtest's `PM4WriteDataPacket`). `None` for no data
/// or more than a packet holds.
pub fn write_data(addr: u64, data: &[u32]) -> Option<Vec<u32>> {
    if data.is_empty() || data.len() + 3 > MAX_BODY_DWORDS {
        return None;
    }
    let mut p = vec![
        header(IT_WRITE_DATA, 3 + data.len()),
        5 << 8 | 1 << 20,
        lo(addr) & !3,
        hi(addr),
    ];
    p.extend_from_slice(data);
    Some(p)
}

/// What RELEASE_MEM writes at its address (`DATA_SEL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseData {
    /// Nothing (`DATA_SEL(0)`).
    None,
    /// The low 32 bits (`DATA_SEL(1)`).
    Low32(u32),
    /// 64 bits (`DATA_SEL(2)`).
    Full64(u64),
    /// The 64-bit GPU clock counter (`DATA_SEL(3)`).
    GpuClock,
}

/// RELEASE_MEM at end of pipe: writes `data` at `addr` once everything before it is done,
/// then with `interrupt` raises the CP's end-of-pipe interrupt with that context id
/// (`INT_SEL(2)`: after the write is confirmed), which KFD takes as an event id.
pub fn release_mem(
    generation: Pm4Generation,
    addr: u64,
    data: ReleaseData,
    interrupt: Option<u32>,
) -> [u32; 8] {
    let caches = match generation {
        // EOP_TCL1_ACTION_EN | EOP_TC_ACTION_EN | EOP_TC_WB_ACTION_EN | EOP_TC_MD_ACTION_EN.
        Pm4Generation::Gfx9 => 1 << 16 | 1 << 17 | 1 << 15 | 1 << 21,
        // GCR_SEQ | GCR_GL2_WB | GCR_GLM_INV | GCR_GLM_WB | CACHE_POLICY(3).
        Pm4Generation::Gfx10 => 1 << 22 | 1 << 21 | 1 << 13 | 1 << 12 | 3 << 25,
    };
    let (sel, value) = match data {
        ReleaseData::None => (0, 0),
        ReleaseData::Low32(v) => (1, u64::from(v)),
        ReleaseData::Full64(v) => (2, v),
        ReleaseData::GpuClock => (3, 0),
    };
    let int_sel = if interrupt.is_some() { 2 } else { 0 };
    [
        header(IT_RELEASE_MEM, 7),
        caches | EOP_EVENT,
        sel << 29 | int_sel << 24,
        lo(addr) & !3,
        hi(addr),
        lo(value),
        hi(value),
        interrupt.unwrap_or(0),
    ]
}

/// ACQUIRE_MEM over all addresses: invalidates the GPU's caches before what follows. gfx9:
/// kfdtest's `CP_COHER_CNTL` 0x28C00000 and poll interval 4; gfx10+: an extra `GCR_CNTL`
/// dword (kfdtest's `InitPacketNV`: GL2, GL1, GLV, GLK and the instruction cache).
pub fn acquire_mem(generation: Pm4Generation) -> Vec<u32> {
    match generation {
        Pm4Generation::Gfx9 => vec![
            header(IT_ACQUIRE_MEM, 6),
            0x28C0_0000,
            0xFFFF_FFFF,
            0,
            0,
            0,
            4,
        ],
        Pm4Generation::Gfx10 => vec![
            header(IT_ACQUIRE_MEM, 7),
            0,
            0xFFFF_FFFF,
            0,
            0,
            0,
            4,
            1 << 14 | 1 << 9 | 1 << 8 | 1 << 7 | 1,
        ],
    }
}

/// WAIT_REG_MEM on memory: the queue waits until `(*addr & mask) func reference` (the
/// functions of SDMA's POLL_REGMEM), polling every 4 clocks' interval (`MEM_SPACE(1)`,
/// `OPERATION(0)`, `ENGINE(0)`: kfdtest's `PM4WaitRegMemPacket`).
pub fn wait_memory(addr: u64, reference: u32, mask: u32, func: PollFunc) -> [u32; 7] {
    [
        header(IT_WAIT_REG_MEM, 6),
        func as u32 | 1 << 4,
        lo(addr) & !3,
        hi(addr),
        reference,
        mask,
        4,
    ]
}

/// INDIRECT_BUFFER: runs `dwords` dwords of packets at `addr` (dword aligned) and comes back,
/// or with `chain` ends the buffer it is in and goes on there (`IB_SIZE`, `CHAIN`, `VALID`:
/// kfdtest's `PM4IndirectBufPacket`). `None` for more than [`MAX_IB_DWORDS`] or an address
/// past the 48-bit GPU address space.
pub fn indirect_buffer(addr: u64, dwords: u32, chain: bool) -> Option<[u32; 4]> {
    if dwords > MAX_IB_DWORDS || addr >> 48 != 0 {
        return None;
    }
    Some([
        header(IT_INDIRECT_BUFFER, 3),
        lo(addr) & !3,
        hi(addr),
        dwords | u32::from(chain) << 20 | 1 << 23,
    ])
}

/// SET_SH_REG: `values` into the consecutive registers from `reg` (a dword register offset
/// in `SH_REG_START..SH_REG_END`, what compute dispatch state lives in). `None` outside.
pub fn set_sh_reg(reg: u32, values: &[u32]) -> Option<Vec<u32>> {
    let end = u64::from(reg) + values.len() as u64;
    if values.is_empty() || reg < SH_REG_START || end > u64::from(SH_REG_END) {
        return None;
    }
    let mut p = vec![header(IT_SET_SH_REG, 1 + values.len()), reg - SH_REG_START];
    p.extend_from_slice(values);
    Some(p)
}

/// DISPATCH_DIRECT of a grid of `groups` work-groups with `initiator`
/// (`COMPUTE_DISPATCH_INITIATOR`).
pub fn dispatch_direct(groups: [u32; 3], initiator: u32) -> [u32; 5] {
    [
        header(IT_DISPATCH_DIRECT, 4),
        groups[0],
        groups[1],
        groups[2],
        initiator,
    ]
}

/// One command of a [`Pm4Queue`] submission.
#[derive(Debug, Clone, Copy)]
pub enum Pm4Command<'a> {
    /// Write `data` at `addr` (WRITE_DATA, split into packets as needed).
    WriteData {
        /// GPU address (4-aligned).
        addr: u64,
        /// The dwords.
        data: &'a [u32],
    },
    /// Write the 64-bit `value` at `addr` once everything before is done (RELEASE_MEM).
    Fence {
        /// GPU address (8-aligned).
        addr: u64,
        /// The value.
        value: u64,
    },
    /// Write the 64-bit GPU clock at `addr` at end of pipe (RELEASE_MEM).
    Timestamp {
        /// GPU address (8-aligned).
        addr: u64,
    },
    /// Set `event` (a signal event of the queue's context) through the end-of-pipe interrupt:
    /// RELEASE_MEM writes its id into its slot and raises the interrupt with the id.
    Signal(&'a Event),
    /// Wait until `(*addr & mask) func value` (WAIT_REG_MEM on memory).
    WaitMemory {
        /// GPU address (4-aligned).
        addr: u64,
        /// Reference value.
        value: u32,
        /// Mask applied to the memory.
        mask: u32,
        /// Comparison.
        func: PollFunc,
    },
    /// Invalidate the GPU's caches (ACQUIRE_MEM).
    AcquireMem,
    /// Run the packets of an indirect buffer (INDIRECT_BUFFER).
    IndirectBuffer {
        /// GPU address of the packets (4-aligned).
        addr: u64,
        /// Their dwords.
        dwords: u32,
    },
    /// Set compute registers (SET_SH_REG).
    SetShRegs {
        /// The first register's dword offset.
        reg: u32,
        /// The values.
        values: &'a [u32],
    },
    /// Raw dwords (already encoded packets).
    Raw(&'a [u32]),
}

/// A [`Pm4Queue`] submission's completion: wait for it with [`Pm4Queue::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a submission is only known done after waiting for it"]
pub struct Pm4Completion {
    seq: u32,
}

/// The pointers page: the CP's read pointer (32-bit dword offset) at 0, the write pointer
/// (64-bit dword count) at 8, the submissions' fence at 64.
const RPTR_AT: usize = 0;
const WPTR_AT: usize = 8;
const FENCE_AT: u64 = 64;

/// A user-mode PM4 compute queue (`KFD_IOC_QUEUE_TYPE_COMPUTE`): its ring, read and write
/// pointers counting dwords, doorbell, EOP buffer and CWSR area, and the event its
/// completions raise. Destroyed on drop (the queue before its memory).
#[derive(Debug)]
pub struct Pm4Queue {
    // Field order is drop order: the queue goes before the memory the CP follows.
    queue: Queue,
    event: Event,
    slot: u64,
    fault: Event,
    ring: OwnedCpuMapping,
    pointers: OwnedCpuMapping,
    doorbells: Arc<Doorbells>,
    doorbell_at: usize,
    generation: Pm4Generation,
    gpu_id: GpuId,
    /// The ring's size in dwords.
    ring_dwords: u64,
    /// Dwords written so far (the 64-bit write pointer).
    wptr: u64,
    seq: u32,
    /// The VM fault the queue stopped at, once a wait saw it: the queue is dead.
    dead: crate::fence_wait::Dead,
    context: Arc<QueueContext>,
}

impl Pm4Queue {
    /// A PM4 queue on `gpu_id` with a ring of `ring_bytes` (a power of two, 4 KiB or more).
    ///
    /// # Errors
    /// [`Error::Command`] for a ring size that is not a power of two of at least 4 KiB;
    /// [`Error::NoPm4`] for a GPU the context has no compute sizes or PM4 layouts for; the
    /// errors of the allocations, CREATE_EVENT and CREATE_QUEUE.
    pub fn new(
        context: &Arc<QueueContext>,
        gpu_id: impl Into<GpuId>,
        ring_bytes: u32,
    ) -> Result<Pm4Queue> {
        let gpu_id: GpuId = gpu_id.into();
        if ring_bytes < 4096 || !ring_bytes.is_power_of_two() {
            return Err(Error::Command(
                "a PM4 ring is a power of two of 4 KiB or more",
            ));
        }
        context.check_gpu(gpu_id)?;
        let sizes = context.queue_sizes(gpu_id).ok_or(Error::NoPm4(gpu_id))?;
        let gfx_major = context.gfx_major(gpu_id).ok_or(Error::NoPm4(gpu_id))?;
        let gfx = GfxTargetVersion {
            major: gfx_major,
            minor: 0,
            stepping: 0,
        };
        let generation = Pm4Generation::of(gfx).ok_or(Error::NoPm4(gpu_id))?;
        let ring = context.gtt(gpu_id, u64::from(ring_bytes))?;
        let pointers = context.gtt(gpu_id, 4096)?;
        let eop = context.gtt(gpu_id, sizes.eop_buffer_size)?;
        let ctx_save = context.gtt(gpu_id, sizes.total_ctx_save_size())?;
        let (event, slot) = context.signal_event(gpu_id)?;
        let fault = context.kfd().create_event(EventKind::Memory, false)?;
        let spec = QueueSpec {
            gpu_id,
            queue_type: QueueType::Compute,
            percentage: 100,
            priority: 7,
            ring: QueueBuffer::start_of(ring.clone()),
            ring_size: ring_bytes,
            read_pointer: QueueBuffer::start_of(pointers.clone()),
            write_pointer: QueueBuffer {
                bo: pointers.clone(),
                offset: WPTR_AT as u64,
            },
            compute: Some(ComputeBuffers {
                eop: QueueBuffer::start_of(eop),
                ctx_save: QueueBuffer::start_of(ctx_save),
                sizes,
            }),
        };
        let queue = context.kfd().create_queue(&spec)?;
        let doorbells = context.doorbells(gpu_id, gfx_major)?;
        let doorbell_at = queue.doorbell_in_page(&doorbells);
        Ok(Pm4Queue {
            queue,
            event,
            slot,
            fault,
            ring: BufferObject::map_cpu_owned(ring)?,
            pointers: BufferObject::map_cpu_owned(pointers)?,
            doorbells,
            doorbell_at,
            generation,
            gpu_id,
            ring_dwords: u64::from(ring_bytes / 4),
            wptr: 0,
            seq: 0,
            dead: crate::fence_wait::Dead::new(context.vm_fault(gpu_id)?),
            context: context.clone(),
        })
    }

    /// The KFD queue.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }
    /// The GPU.
    pub fn gpu_id(&self) -> GpuId {
        self.gpu_id
    }
    /// The PM4 generation the packets are encoded for.
    pub fn generation(&self) -> Pm4Generation {
        self.generation
    }
    /// The ring's size in dwords.
    pub fn ring_dwords(&self) -> u64 {
        self.ring_dwords
    }
    /// The read pointer the CP reported: its dword offset in the ring.
    pub fn read_pointer(&self) -> Result<u32> {
        Ok(self
            .pointers
            .as_volatile_slice()?
            .read_obj::<u32>(RPTR_AT)?)
    }
    /// The write pointer: dwords submitted.
    pub fn write_pointer(&self) -> u64 {
        self.wptr
    }
    /// A signal event of this queue's context, for [`Pm4Command::Signal`].
    pub fn signal_event(&self) -> Result<(Event, u64)> {
        self.context.signal_event(self.gpu_id)
    }

    /// Encodes `commands`, then a RELEASE_MEM of the submission's sequence number and one
    /// that raises the queue's event, writes them to the ring (wrapping dword by dword),
    /// publishes the 64-bit write pointer and rings the doorbell with it.
    ///
    /// # Errors
    /// [`Error::QueueDead`] once the queue stopped at a VM fault; [`Error::Command`] for a
    /// command that cannot be encoded; [`Error::RingFull`], with the sizes, when the
    /// submission is larger than the ring or the CP does not make room within a second;
    /// [`Error::Kfd`] when ringing fails.
    pub fn submit(&mut self, commands: &[Pm4Command<'_>]) -> Result<Pm4Completion> {
        self.dead.check()?;
        let g = self.generation;
        let mut dwords = Vec::new();
        for c in commands {
            self.encode(c, &mut dwords)?;
        }
        let seq = self.seq.wrapping_add(1);
        let fence = self.pointers.buffer_object().va() + FENCE_AT;
        dwords.extend(release_mem(g, fence, ReleaseData::Low32(seq), None));
        let id = self.event.id();
        dwords.extend(release_mem(
            g,
            self.slot,
            ReleaseData::Full64(u64::from(id)),
            Some(id),
        ));
        self.make_room(dwords.len() as u64)?;
        let ring = self.ring.as_volatile_slice()?;
        for (i, d) in dwords.iter().enumerate() {
            let at = (self.wptr + i as u64) % self.ring_dwords;
            ring.write_obj(*d, at as usize * 4)?;
        }
        self.wptr += dwords.len() as u64;
        self.seq = seq;
        self.pointers
            .as_volatile_slice()?
            .write_obj(self.wptr, WPTR_AT)?;
        self.doorbells.ring(self.doorbell_at, self.wptr)?;
        Ok(Pm4Completion { seq })
    }

    fn encode(&self, c: &Pm4Command<'_>, out: &mut Vec<u32>) -> Result<()> {
        let g = self.generation;
        match *c {
            Pm4Command::WriteData { addr, data } => {
                if data.is_empty() {
                    return Err(Error::Command("write data: no data"));
                }
                let per = MAX_BODY_DWORDS - 3;
                for (i, chunk) in data.chunks(per).enumerate() {
                    let at = addr + (i * per * 4) as u64;
                    out.extend(write_data(at, chunk).ok_or(Error::Command("write data"))?);
                }
            }
            Pm4Command::Fence { addr, value } => {
                out.extend(release_mem(g, addr, ReleaseData::Full64(value), None))
            }
            Pm4Command::Timestamp { addr } => {
                out.extend(release_mem(g, addr, ReleaseData::GpuClock, None))
            }
            Pm4Command::Signal(event) => {
                let (slot, page) = (event.slot(), self.context.signal_page_va());
                let (Some(slot), Some(page), EventKind::Signal) = (slot, page, event.kind()) else {
                    return Err(Error::Command("signal: not a signal event of the context"));
                };
                let id = event.id();
                out.extend(release_mem(
                    g,
                    page + u64::from(slot) * 8,
                    ReleaseData::Full64(u64::from(id)),
                    Some(id),
                ));
            }
            Pm4Command::WaitMemory {
                addr,
                value,
                mask,
                func,
            } => out.extend(wait_memory(addr, value, mask, func)),
            Pm4Command::AcquireMem => out.extend(acquire_mem(g)),
            Pm4Command::IndirectBuffer { addr, dwords } => out.extend(
                indirect_buffer(addr, dwords, false)
                    .ok_or(Error::Command("indirect buffer: too large"))?,
            ),
            Pm4Command::SetShRegs { reg, values } => out.extend(
                set_sh_reg(reg, values)
                    .ok_or(Error::Command("SET_SH_REG: registers outside SH space"))?,
            ),
            Pm4Command::Raw(dwords) => out.extend_from_slice(dwords),
        }
        Ok(())
    }

    /// Dwords in the ring the CP has not consumed (the read pointer is an offset in the ring;
    /// at most `ring_dwords - 1` are ever in flight, so equal offsets mean empty).
    fn in_flight(&self) -> Result<u64> {
        let rptr = u64::from(self.read_pointer()?) % self.ring_dwords;
        Ok((self.wptr % self.ring_dwords + self.ring_dwords - rptr) % self.ring_dwords)
    }

    /// Waits until the ring has `dwords` free.
    fn make_room(&self, dwords: u64) -> Result<()> {
        let full = |free: u64| Error::RingFull {
            needed: dwords * 4,
            free: free * 4,
            ring: self.ring_dwords * 4,
        };
        if dwords >= self.ring_dwords {
            return Err(full(self.ring_dwords - 1 - self.in_flight()?));
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let free = self.ring_dwords - 1 - self.in_flight()?;
            if free >= dwords {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(full(free));
            }
            let _ = self
                .context
                .kfd()
                .wait_events(&[&self.event, &self.fault], false, 1)?;
        }
    }

    /// Whether `c` is done: its RELEASE_MEM landed.
    pub fn is_done(&self, c: Pm4Completion) -> Result<bool> {
        let done: u32 = self
            .pointers
            .as_volatile_slice()?
            .read_obj(FENCE_AT as usize)?;
        Ok(done.wrapping_sub(c.seq) as i32 >= 0)
    }

    /// Waits up to `timeout` (forever for `Duration::MAX`) for `c`, through WAIT_EVENTS on
    /// the queue's event and its memory-fault event.
    ///
    /// # Errors
    /// [`Error::VmFault`] when the GPU took a VM fault first (the queue is dead from then
    /// on); [`Error::QueueDead`] on a queue that already reported its fault;
    /// [`Error::Timeout`]; [`Error::Kfd`] when WAIT_EVENTS fails.
    pub fn wait(&self, c: Pm4Completion, timeout: Duration) -> Result<()> {
        let result = self.dead.wait(
            self.context.kfd(),
            &self.event,
            &self.fault,
            timeout,
            || self.is_done(c),
        );
        self.context.saw(self.gpu_id, &result);
        result
    }

    /// The fault the queue stopped at, once a wait reported it ([`Error::QueueDead`]).
    pub fn dead(&self) -> Option<kfd_ioctl::MemoryFault> {
        self.dead.fault()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Header fields of `PACKET3_COMPUTE`, and each body where `soc15d.h` / `nvd.h` and
    /// kfdtest's packet classes put its fields.
    #[test]
    fn packets_put_their_fields_where_the_headers_say() {
        assert_eq!(header(IT_RELEASE_MEM, 7), 0xC006_4902);
        assert_eq!(nop(1), [0xFFFF_1002], "kfdtest's CMD_NOP_TYPE_3");
        assert_eq!(nop(3), [0xC001_1002, 0, 0]);
        let w = write_data(0x1_2345_6789, &[5, 6]).unwrap();
        assert_eq!(w, [0xC004_3702, 0x0010_0500, 0x2345_6788, 1, 5, 6]);
        let r = release_mem(
            Pm4Generation::Gfx9,
            0x8_0000_1000,
            ReleaseData::Full64(7),
            Some(7),
        );
        assert_eq!(
            r[1] & 0xFFF,
            0x514,
            "CACHE_FLUSH_AND_INV_TS_EVENT, EVENT_INDEX(5)"
        );
        assert_eq!(r[2], 2 << 29 | 2 << 24, "DATA_SEL(2) INT_SEL(2)");
        assert_eq!(&r[3..], [0x1000, 8, 7, 0, 7]);
        let m = wait_memory(0x40_0000_0104, 3, 0xFF, PollFunc::Equal);
        assert_eq!(m, [0xC005_3C02, 0x13, 0x104, 0x40, 3, 0xFF, 4]);
        let ib = indirect_buffer(0x7_0000_0100, 64, true).unwrap();
        assert_eq!(ib, [0xC002_3F02, 0x100, 7, 64 | 1 << 20 | 1 << 23]);
        assert!(indirect_buffer(0, MAX_IB_DWORDS + 1, false).is_none());
        let s = set_sh_reg(0x2E00, &[1, 2]).unwrap();
        assert_eq!(s, [0xC002_7602, 0x200, 1, 2]);
        assert!(set_sh_reg(0x2FFF, &[1, 2]).is_none());
        assert!(set_sh_reg(0x2000, &[1]).is_none());
    }

    /// What differs between gfx9 and gfx10/11: ACQUIRE_MEM's length and RELEASE_MEM's cache
    /// bits.
    #[test]
    fn acquire_and_release_mem_differ_per_generation() {
        let a9 = acquire_mem(Pm4Generation::Gfx9);
        let a10 = acquire_mem(Pm4Generation::Gfx10);
        assert_eq!((a9.len(), a9[0]), (7, header(IT_ACQUIRE_MEM, 6)));
        assert_eq!((a10.len(), a10[0]), (8, header(IT_ACQUIRE_MEM, 7)));
        assert_eq!((a9[1], a10[1]), (0x28C0_0000, 0), "CP_COHER_CNTL");
        let r9 = release_mem(Pm4Generation::Gfx9, 0, ReleaseData::None, None);
        let r10 = release_mem(Pm4Generation::Gfx10, 0, ReleaseData::None, None);
        assert_ne!(r9[1], r10[1]);
        assert_eq!(r10[1] & 1 << 22, 1 << 22, "GCR_SEQ");
        assert_eq!(r9[2..], r10[2..]);
        let v = |major| GfxTargetVersion {
            major,
            minor: 0,
            stepping: 0,
        };
        assert_eq!(Pm4Generation::of(v(9)), Some(Pm4Generation::Gfx9));
        assert_eq!(Pm4Generation::of(v(11)), Some(Pm4Generation::Gfx10));
        assert_eq!(Pm4Generation::of(v(12)), None);
    }
}
