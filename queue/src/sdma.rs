//! [`QueueContext`], what a process's queues share, and [`SdmaQueue`], one SDMA queue.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kfd_ioctl::abi::{AllocMemFlags, KFD_SIGNAL_EVENT_LIMIT};
use kfd_ioctl::mem::Reservation;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{
    BufferObject, Doorbells, Event, EventKind, GpuId, Kfd, MemoryFault, OwnedCpuMapping, Queue,
    QueueSizes, QueueType, RawQueueSpec, WaitOutcome,
};
use kfd_ring::{GpuAccess, GpuHostRing, Granularity, HostMirror, Mirrored, Right};
use vm_memory::Bytes;

use crate::error::{Error, Result};
use crate::packet::{self, AtomicOp, PollFunc, SdmaGeneration};

/// GPU address space the context places its own buffer objects in (pointers, doorbells, the
/// signal page): reserved in the CPU address space too, so nothing else lands there.
const VA_SPACE: usize = 16 << 30;
/// The bytes of the pointers page: read pointer at 0, write pointer at 8, fence at 64.
const POINTERS_SIZE: u64 = 4096;
const RPTR_AT: usize = 0;
const WPTR_AT: usize = 8;
const FENCE_AT: u64 = 64;

/// What the queues of one process share: the GPU address range for their own buffer
/// objects, the signal page their traps name events in, and each GPU's doorbell page.
///
/// The signal page is the process's only one: KFD takes a BO as the signal page only with
/// the first signal event of the process, so make the context before creating signal
/// events elsewhere (else [`SdmaQueue::new`] fails with `EINVAL` from CREATE_EVENT).
#[derive(Debug)]
pub struct QueueContext {
    kfd: Kfd,
    /// Every GPU of the topology, in its order.
    known: Vec<GpuId>,
    /// Per GPU: how many SDMA engines it has (PCIe and xGMI), when the topology says.
    engines: BTreeMap<GpuId, u32>,
    /// Per GPU: its SDMA generation and its GFX major version.
    gpus: BTreeMap<GpuId, (SdmaGeneration, u32)>,
    /// Per GPU: the sizes of a compute queue's EOP buffer and CWSR area.
    sizes: BTreeMap<GpuId, QueueSizes>,
    va: Mutex<usize>,
    reservation: Reservation,
    signal_page: Mutex<Option<Arc<BufferObject>>>,
    doorbells: Mutex<BTreeMap<GpuId, Arc<Doorbells>>>,
    /// Per GPU: the VM fault a queue's wait, or [`fault_watch`](Self::fault_watch), reported
    /// there. The kernel evicted the process's queues on that GPU for good
    /// (`kfd_dqm_evict_pasid`), so queues made there later are dead from the start.
    faults: Mutex<BTreeMap<GpuId, MemoryFault>>,
    /// A memory event of the context's own: `kfd_signal_vm_fault_event` sets every memory
    /// event of the process, so this one sees a fault no queue's wait has reported yet
    /// (polled when a queue is made).
    fault_watch: Event,
}

impl QueueContext {
    /// A context for the GPUs of `topology` (whose VMs the caller acquired).
    ///
    /// # Errors
    /// [`Error::Reserve`] when the address range cannot be reserved.
    pub fn new(kfd: &Kfd, topology: &Topology) -> Result<Arc<QueueContext>> {
        let gpus = topology
            .gpus()
            .filter_map(|n| {
                let gfx = n.gfx_target_version()?;
                Some((n.gpu_id()?, (SdmaGeneration::of(gfx)?, gfx.major)))
            })
            .collect();
        let sizes = topology
            .gpus()
            .filter_map(|n| Some((n.gpu_id()?, QueueSizes::for_node(n)?)))
            .collect();
        let known = topology.gpus().filter_map(|n| n.gpu_id()).collect();
        let engines = topology
            .gpus()
            .filter_map(|n| {
                let p = &n.properties;
                let all = p.num_sdma_engines? + p.num_sdma_xgmi_engines.unwrap_or(0);
                Some((n.gpu_id()?, u32::try_from(all).ok()?))
            })
            .collect();
        let reservation = Reservation::new(VA_SPACE, 2 << 20).map_err(Error::Reserve)?;
        let fault_watch = kfd.create_event(EventKind::Memory, false)?;
        Ok(Arc::new(QueueContext {
            kfd: kfd.clone(),
            known,
            engines,
            gpus,
            sizes,
            va: Mutex::new(0),
            reservation,
            signal_page: Mutex::new(None),
            doorbells: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(BTreeMap::new()),
            fault_watch,
        }))
    }

    /// The KFD handle.
    pub fn kfd(&self) -> &Kfd {
        &self.kfd
    }

    /// The GPUs of the topology the context was made from.
    pub fn gpu_ids(&self) -> &[GpuId] {
        &self.known
    }

    /// Fails with [`Error::UnknownGpu`] unless `gpu_id` is a GPU of the context's topology.
    pub(crate) fn check_gpu(&self, gpu_id: GpuId) -> Result<()> {
        if self.known.contains(&gpu_id) {
            Ok(())
        } else {
            Err(Error::UnknownGpu {
                gpu_id,
                known: self.known.clone(),
            })
        }
    }

    /// The SDMA generation of `gpu_id`.
    pub fn generation(&self, gpu_id: impl Into<GpuId>) -> Option<SdmaGeneration> {
        let gpu_id: GpuId = gpu_id.into();
        self.gpus.get(&gpu_id).map(|&(g, _)| g)
    }

    /// The compute-queue buffer sizes of `gpu_id`.
    pub(crate) fn queue_sizes(&self, gpu_id: GpuId) -> Option<QueueSizes> {
        self.sizes.get(&gpu_id).copied()
    }

    /// The GFX major version of `gpu_id`.
    pub(crate) fn gfx_major(&self, gpu_id: GpuId) -> Option<u32> {
        self.gpus.get(&gpu_id).map(|&(_, major)| major)
    }

    /// `size` bytes of the context's GPU address range.
    fn take_va(&self, size: u64) -> Result<u64> {
        let mut next = self.va.lock().unwrap_or_else(PoisonError::into_inner);
        let size = usize::try_from(size).map_err(|_| Error::AddressSpace)?;
        let end = next
            .checked_add(size)
            .filter(|&e| e <= self.reservation.len());
        let end = end.ok_or(Error::AddressSpace)?;
        let va = self.reservation.addr().as_ptr() as u64 + *next as u64;
        *next = end.next_multiple_of(4096);
        Ok(va)
    }

    /// A GTT buffer object of `size` bytes in the context's range, mapped on `gpu_id`.
    pub(crate) fn gtt(&self, gpu_id: GpuId, size: u64) -> Result<Arc<BufferObject>> {
        let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE | AllocMemFlags::COHERENT;
        self.alloc(gpu_id, size, flags)
    }

    /// A buffer object of `size` bytes with `flags` in the context's range, mapped on
    /// `gpu_id`.
    pub(crate) fn alloc(
        &self,
        gpu_id: GpuId,
        size: u64,
        flags: AllocMemFlags,
    ) -> Result<Arc<BufferObject>> {
        let va = self.take_va(size)?;
        let bo = self.kfd.alloc_memory_of_gpu(gpu_id, va, size, flags)?;
        self.kfd.map_memory_to_gpu(&bo, &[gpu_id])?;
        Ok(Arc::new(bo))
    }

    /// A signal event in the context's signal page (the first one makes the page, on
    /// `gpu_id`), and the GPU address of its slot: what a GPU agent writes (any value but all
    /// ones) before raising the event's interrupt — an SDMA TRAP, or an AQL completion signal
    /// whose `event_mailbox_ptr` is the slot.
    ///
    /// # Errors
    /// The errors of allocating and mapping the page, and of CREATE_EVENT.
    pub fn signal_event(&self, gpu_id: impl Into<GpuId>) -> Result<(Event, u64)> {
        let gpu_id: GpuId = gpu_id.into();
        let mut page = self
            .signal_page
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let event = match page.as_ref() {
            Some(_) => self.kfd.create_event(EventKind::Signal, true)?,
            None => {
                let bo = self.gtt(gpu_id, u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8)?;
                let event = self
                    .kfd
                    .create_event_on_page(EventKind::Signal, true, &bo)?;
                *page = Some(bo);
                event
            }
        };
        let Some(bo) = page.as_ref() else {
            return Err(Error::AddressSpace);
        };
        if !bo.mapped_gpus().contains(&gpu_id) {
            self.kfd.map_memory_to_gpu(bo, &[gpu_id])?;
        }
        let slot = event.slot().ok_or(Error::AddressSpace)?;
        Ok((event, bo.va() + u64::from(slot) * 8))
    }

    /// The doorbell page of `gpu_id`, mapped the first time.
    pub(crate) fn doorbells(&self, gpu_id: GpuId, gfx_major: u32) -> Result<Arc<Doorbells>> {
        let mut all = self
            .doorbells
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(d) = all.get(&gpu_id) {
            return Ok(d.clone());
        }
        let size = if gfx_major >= 9 { 8192 } else { 4096 };
        let va = self.take_va(size)?;
        let d = Arc::new(self.kfd.map_doorbells(gpu_id, gfx_major, va)?);
        all.insert(gpu_id, d.clone());
        Ok(d)
    }
}

/// Which SDMA engines a queue goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdmaEngine {
    /// A PCIe engine (`KFD_IOC_QUEUE_TYPE_SDMA`).
    Pcie,
    /// An xGMI engine (`KFD_IOC_QUEUE_TYPE_SDMA_XGMI`), for peer copies over xGMI.
    Xgmi,
    /// The engine with this id (`KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID`, KFD 1.17).
    Id(u32),
}

/// One command of a submission.
#[derive(Debug, Clone, Copy)]
pub enum Command<'a> {
    /// Copy `bytes` bytes from GPU address `src` to `dst` (split into packets as needed).
    Copy {
        /// Destination GPU address.
        dst: u64,
        /// Source GPU address.
        src: u64,
        /// Bytes.
        bytes: u64,
    },
    /// Fill `bytes` bytes (a multiple of 4) at `dst` with the dword `value`.
    Fill {
        /// Destination GPU address (4-aligned).
        dst: u64,
        /// The dword.
        value: u32,
        /// Bytes.
        bytes: u64,
    },
    /// Write the dwords `data` at `addr` (WRITE_LINEAR, split into packets as needed).
    Write {
        /// Destination GPU address (4-aligned).
        addr: u64,
        /// The dwords.
        data: &'a [u32],
    },
    /// Write back the GPU's caches (and invalidate them with `invalidate`): GCR_REQ on SDMA
    /// 5.0 and later, nothing before (SDMA 4.x has no GPU cache request packet).
    CacheFlush {
        /// Invalidate too.
        invalidate: bool,
    },
    /// Write the dword `value` at `addr` once everything before is done.
    Fence {
        /// GPU address (4-aligned).
        addr: u64,
        /// The dword.
        value: u32,
    },
    /// Set `event` (a signal event of this context) through the interrupt path: its slot is
    /// written, then a TRAP names it.
    Signal(&'a Event),
    /// Wait until `(*addr & mask) func value`.
    PollMemory {
        /// GPU address (4-aligned).
        addr: u64,
        /// Reference value.
        value: u32,
        /// Mask applied to the memory.
        mask: u32,
        /// Comparison.
        func: PollFunc,
    },
    /// A 64-bit atomic on `addr`.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// GPU address (8-aligned).
        addr: u64,
        /// Operand.
        src: u64,
        /// Compared value (compare-swap).
        cmp: u64,
    },
    /// Write the 64-bit GPU timestamp at `addr` (8-aligned).
    Timestamp {
        /// GPU address.
        addr: u64,
    },
    /// Raw dwords: packets the caller encoded (another runtime's encodings, say).
    Raw(&'a [u32]),
}

/// A submission's completion: wait for it with [`SdmaQueue::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a submission is only known done after waiting for it"]
pub struct Completion {
    seq: u32,
}

/// A user-mode SDMA queue: a mirrored ring the GPU reads, its read and write pointers, its
/// doorbell, and the events its completions and faults arrive on. Destroyed on drop (the
/// queue first, then its memory).
#[derive(Debug)]
pub struct SdmaQueue {
    // Field order is drop order: the queue goes before the memory the GPU follows.
    queue: Queue,
    trap: Event,
    trap_slot: u64,
    fault: Event,
    ring: GpuHostRing,
    pointers: OwnedCpuMapping,
    doorbells: Arc<Doorbells>,
    doorbell_at: usize,
    generation: SdmaGeneration,
    gpu_id: GpuId,
    /// Bytes written to the ring so far.
    wptr: u64,
    /// The last submission's sequence number.
    seq: u32,
    /// The VM fault the queue stopped at, once a wait saw it: the queue is dead.
    dead: crate::fence_wait::Dead,
    context: Arc<QueueContext>,
}

impl SdmaQueue {
    /// A queue on `gpu_id`'s `engine`s with a ring of at least `ring_bytes` (a power of two
    /// of pages).
    ///
    /// # Errors
    /// [`Error::UnknownGpu`] for a GPU that is not in the context's topology;
    /// [`Error::NoSdma`] for one older than gfx9; [`Error::NoSuchEngine`] for an
    /// [`SdmaEngine::Id`] past the GPU's engines (the kernel's `EINVAL`); the errors of
    /// the ring ([`Error::Ring`]), of the allocations, of CREATE_EVENT and of CREATE_QUEUE
    /// (`ENOMEM` when the engines have no free queue).
    pub fn new(
        context: &Arc<QueueContext>,
        gpu_id: impl Into<GpuId>,
        engine: SdmaEngine,
        ring_bytes: usize,
    ) -> Result<SdmaQueue> {
        let gpu_id: GpuId = gpu_id.into();
        context.check_gpu(gpu_id)?;
        let &(generation, gfx_major) = context.gpus.get(&gpu_id).ok_or(Error::NoSdma(gpu_id))?;
        if let (SdmaEngine::Id(engine), Some(&engines)) = (engine, context.engines.get(&gpu_id))
            && engine >= engines
        {
            return Err(Error::NoSuchEngine {
                gpu_id,
                engine,
                engines,
            });
        }
        let kfd = &context.kfd;
        let access = [GpuAccess {
            gpu_id: gpu_id.get(),
            right: Right::ReadWrite,
        }];
        let ring = GpuHostRing::userptr(
            kfd,
            HostMirror::new(ring_bytes)?,
            &access,
            Granularity::Fine,
        )?;
        let pointers = BufferObject::map_cpu_owned(context.gtt(gpu_id, POINTERS_SIZE)?)?;
        let doorbells = context.doorbells(gpu_id, gfx_major)?;
        let (trap, trap_slot) = context.signal_event(gpu_id)?;
        let fault = kfd.create_event(EventKind::Memory, false)?;
        let ring_size = u32::try_from(ring.capacity()).map_err(|_| Error::RingTooLarge)?;
        let queue_type = match engine {
            SdmaEngine::Pcie => QueueType::Sdma,
            SdmaEngine::Xgmi => QueueType::SdmaXgmi,
            SdmaEngine::Id(id) => QueueType::SdmaByEngine(id),
        };
        let p = pointers.buffer_object().va();
        let spec = RawQueueSpec {
            gpu_id,
            queue_type,
            percentage: 100,
            priority: 7,
            ring_va: ring.gpu_base(),
            ring_size,
            read_pointer_va: p + RPTR_AT as u64,
            write_pointer_va: p + WPTR_AT as u64,
            compute: None,
        };
        // SAFETY: the ring is the base view of `ring`'s USERPTR mapping on `gpu_id` and the
        // pointers are in `pointers`' BO mapped on it; both are fields of the returned value
        // declared after `queue`, so they outlive the queue (destroyed when it drops first).
        let queue = unsafe { kfd.create_queue_raw(&spec) }?;
        let doorbell_at = queue.doorbell_in_page(&doorbells);
        Ok(SdmaQueue {
            queue,
            trap,
            trap_slot,
            fault,
            ring,
            pointers,
            doorbells,
            doorbell_at,
            generation,
            gpu_id,
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
    /// The SDMA generation the packets are encoded for.
    pub fn generation(&self) -> SdmaGeneration {
        self.generation
    }
    /// The ring's size in bytes.
    pub fn ring_size(&self) -> usize {
        self.ring.capacity()
    }
    /// The read pointer the engine wrote back: bytes it consumed.
    pub fn read_pointer(&self) -> Result<u64> {
        Ok(self
            .pointers
            .as_volatile_slice()?
            .read_obj::<u64>(RPTR_AT)?)
    }
    /// The write pointer: bytes submitted.
    pub fn write_pointer(&self) -> u64 {
        self.wptr
    }
    /// A signal event of this queue's context, for [`Command::Signal`]: the event and the GPU
    /// address of its slot.
    pub fn signal_event(&self) -> Result<(Event, u64)> {
        self.context.signal_event(self.gpu_id)
    }

    /// Copies `bytes` bytes from GPU address `src` to `dst`: host↔device, device↔device, or a
    /// peer GPU's memory mapped on this queue's GPU.
    ///
    /// The copy is split into COPY_LINEAR packets of at most
    /// [`SdmaGeneration::copy_max_bytes`] each, and the packets into as many submissions as
    /// the ring needs (each waits for room as [`SdmaQueue::submit`] does): any size fits any
    /// ring. The completion is the last submission's; the engine runs a queue's
    /// submissions in order, so it is the whole copy's.
    ///
    /// # Errors
    /// As [`SdmaQueue::submit`]; [`Error::RingFull`] when the ring cannot hold even one
    /// packet with its fence and signal.
    pub fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> Result<Completion> {
        let packet_bytes = 4 * 7; // COPY_LINEAR
        let tail = self.tail_bytes();
        let ring = self.ring.capacity() as u64;
        let packets = ring.saturating_sub(tail) / packet_bytes;
        if packets == 0 {
            return Err(Error::RingFull {
                needed: packet_bytes + tail,
                free: ring,
                ring,
            });
        }
        let chunk = packets.saturating_mul(self.generation.copy_max_bytes());
        let mut done = 0;
        loop {
            let n = (bytes - done).min(chunk);
            let c = self.submit(&[Command::Copy {
                dst: dst.wrapping_add(done),
                src: src.wrapping_add(done),
                bytes: n,
            }])?;
            done += n;
            if done >= bytes {
                return Ok(c);
            }
        }
    }

    /// Bytes every submission ends with: the sequence fence and the signal (fence + TRAP).
    fn tail_bytes(&self) -> u64 {
        4 * (2 * packet::fence(0, 0).len() + packet::trap(0).len()) as u64
    }

    /// The fault the queue stopped at, once a wait reported it ([`Error::QueueDead`]).
    pub fn dead(&self) -> Option<MemoryFault> {
        self.dead.fault()
    }

    /// Encodes `commands`, then a fence of the submission's sequence number and a TRAP of the
    /// queue's event, writes them to the ring (one contiguous write through the mirror, even
    /// across the wrap), publishes the write pointer and rings the doorbell.
    ///
    /// # Errors
    /// [`Error::QueueDead`] once the queue stopped at a VM fault; [`Error::Command`] for a
    /// command the engine cannot take (a misaligned fill, an event that is not a signal
    /// event); [`Error::RingFull`], with the sizes, when the submission is larger than the
    /// ring or the engine makes no room for a second; [`Error::Kfd`] when ringing the
    /// doorbell fails.
    pub fn submit(&mut self, commands: &[Command<'_>]) -> Result<Completion> {
        self.dead.check()?;
        let mut dwords = Vec::new();
        for c in commands {
            self.encode(c, &mut dwords)?;
        }
        let seq = self.seq.wrapping_add(1);
        let fence_va = self.pointers.buffer_object().va() + FENCE_AT;
        dwords.extend(packet::fence(fence_va, seq));
        self.encode_signal(&self.trap, self.trap_slot, &mut dwords)?;
        let bytes: Vec<u8> = dwords.iter().flat_map(|d| d.to_le_bytes()).collect();
        self.make_room(bytes.len() as u64)?;
        let at = (self.wptr as usize) & (self.ring.capacity() - 1);
        self.ring.write(at as isize, &bytes)?;
        self.wptr += bytes.len() as u64;
        self.seq = seq;
        let memory = self.pointers.as_volatile_slice()?;
        memory.write_obj(self.wptr, WPTR_AT)?;
        self.doorbells.ring(self.doorbell_at, self.wptr)?;
        Ok(Completion { seq })
    }

    fn encode(&self, c: &Command<'_>, out: &mut Vec<u32>) -> Result<()> {
        let g = self.generation;
        match *c {
            Command::Copy { dst, src, bytes } => {
                let mut done = 0;
                while done < bytes {
                    let n = (bytes - done).min(g.copy_max_bytes());
                    let p = packet::copy_linear(g, dst + done, src + done, n)
                        .ok_or(Error::Command("copy"))?;
                    out.extend(p);
                    done += n;
                }
            }
            Command::Fill { dst, value, bytes } => {
                let mut done = 0;
                while done < bytes {
                    let n = (bytes - done).min(g.fill_max_bytes());
                    let p = packet::constant_fill(g, dst + done, value, n).ok_or(
                        Error::Command("fill: address and size must be multiples of 4"),
                    )?;
                    out.extend(p);
                    done += n;
                }
            }
            Command::Write { addr, data } => {
                if data.is_empty() {
                    return Err(Error::Command("write: no data"));
                }
                for (i, chunk) in data.chunks(packet::WRITE_MAX_DWORDS).enumerate() {
                    let at = addr + (i * packet::WRITE_MAX_DWORDS * 4) as u64;
                    out.extend(packet::write_linear(at, chunk).ok_or(Error::Command("write"))?);
                }
            }
            Command::CacheFlush { invalidate } => {
                out.extend(packet::gcr_req(g, invalidate).into_iter().flatten());
            }
            Command::Fence { addr, value } => out.extend(packet::fence(addr, value)),
            Command::Signal(event) => {
                let (slot, page) = (event.slot(), self.context.signal_page_va());
                let (Some(slot), Some(page)) = (slot, page) else {
                    return Err(Error::Command("signal: not a signal event of the context"));
                };
                self.encode_signal(event, page + u64::from(slot) * 8, out)?;
            }
            Command::PollMemory {
                addr,
                value,
                mask,
                func,
            } => out.extend(packet::poll_memory(addr, value, mask, func, 10, 0xFFF)),
            Command::Atomic { op, addr, src, cmp } => {
                out.extend(packet::atomic(op, addr, src, cmp))
            }
            Command::Timestamp { addr } => out.extend(packet::timestamp(addr)),
            Command::Raw(dwords) => out.extend_from_slice(dwords),
        }
        Ok(())
    }

    /// What ROCr's SDMA blits do for an interrupt signal: write the event id into its slot
    /// (`event_mailbox_ptr`), then TRAP with the id.
    fn encode_signal(&self, event: &Event, slot_va: u64, out: &mut Vec<u32>) -> Result<()> {
        if event.kind() != EventKind::Signal {
            return Err(Error::Command("signal: not a signal event"));
        }
        out.extend(packet::fence(slot_va, event.id()));
        out.extend(packet::trap(event.id()));
        Ok(())
    }

    /// Waits until the ring has `bytes` free, giving up when the engine consumes nothing for
    /// a second.
    fn make_room(&self, bytes: u64) -> Result<()> {
        let size = self.ring.capacity() as u64;
        let free = |rptr: u64| size - self.wptr.wrapping_sub(rptr).min(size);
        if bytes > size {
            return Err(Error::RingFull {
                needed: bytes,
                free: free(self.read_pointer()?),
                ring: size,
            });
        }
        let mut last = self.read_pointer()?;
        let mut deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let rptr = self.read_pointer()?;
            if free(rptr) >= bytes {
                return Ok(());
            }
            if rptr != last {
                last = rptr;
                deadline = Instant::now() + Duration::from_secs(1);
            } else if Instant::now() >= deadline {
                return Err(Error::RingFull {
                    needed: bytes,
                    free: free(rptr),
                    ring: size,
                });
            }
            let _ = self
                .context
                .kfd
                .wait_events(&[&self.trap, &self.fault], false, 1)?;
        }
    }

    /// Whether `c` is done: the fence of its submission landed.
    pub fn is_done(&self, c: Completion) -> Result<bool> {
        let memory = self.pointers.as_volatile_slice()?;
        let done: u32 = memory.read_obj(FENCE_AT as usize)?;
        Ok(done.wrapping_sub(c.seq) as i32 >= 0)
    }

    /// Waits up to `timeout` (forever for `Duration::MAX`) for `c`, through WAIT_EVENTS on
    /// the queue's trap event and its memory-fault event.
    ///
    /// # Errors
    /// [`Error::VmFault`] when the GPU took a VM fault before `c` completed (the queue has
    /// stopped, and is dead from then on); [`Error::QueueDead`] on a queue that already
    /// reported its fault; [`Error::Timeout`]; [`Error::Kfd`] when WAIT_EVENTS fails.
    pub fn wait(&self, c: Completion, timeout: Duration) -> Result<()> {
        let result = self
            .dead
            .wait(&self.context.kfd, &self.trap, &self.fault, timeout, || {
                self.is_done(c)
            });
        self.context.saw(self.gpu_id, &result);
        result
    }
}

impl QueueContext {
    /// The VM fault the process took on `gpu_id`, if the context saw one (a queue's wait, or
    /// its own memory event): the process's queues there are evicted until it exits, and so
    /// is every queue made there from then on.
    ///
    /// The memory event stays set once a fault set it (`kfd_reset_event` resets only events
    /// the CPU can signal) and carries the last fault only: two faults on different GPUs
    /// between two polls leave the first GPU's unseen here (its queues' own waits still
    /// report it).
    ///
    /// # Errors
    /// [`Error::Kfd`] when polling the event fails.
    pub(crate) fn vm_fault(&self, gpu_id: GpuId) -> Result<Option<MemoryFault>> {
        let mut faults = self.faults.lock().unwrap_or_else(PoisonError::into_inner);
        if let WaitOutcome::Complete(seen) = self.kfd.wait_events(&[&self.fault_watch], false, 0)?
            && let Some(Some(f)) = seen.first()
        {
            faults.entry(f.gpu_id).or_insert(*f);
        }
        Ok(faults.get(&gpu_id).copied())
    }

    /// Records the VM fault a wait on a queue of `gpu_id` returned (the first one stays).
    pub(crate) fn saw(&self, gpu_id: GpuId, result: &Result<()>) {
        if let Err(Error::VmFault(f)) = result {
            self.faults
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(gpu_id)
                .or_insert(*f);
        }
    }

    /// The GPU address of the context's signal page, once made.
    pub(crate) fn signal_page_va(&self) -> Option<u64> {
        self.signal_page
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|bo| bo.va())
    }
}
