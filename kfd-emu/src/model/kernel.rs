//! Kernel dispatch: what the CP and the shader engines do with an AQL KERNEL_DISPATCH packet
//! (and a PM4 DISPATCH_DIRECT/INDIRECT, [`run_pm4`]) —
//! the kernel descriptor read, the queue's scratch found, every wave of the grid run by
//! [`kfd_gfx9`]'s interpreter over the process's memory as the GPU sees it, and the outcome
//! turned into what the runtime would see (a completed packet, a VM fault, a queue error).
//!
//! * The packet is `hsa_kernel_dispatch_packet_t` (`hsa.h`): dimensions in `setup`, the
//!   workgroup and grid sizes, `private_segment_size`, `group_segment_size`, `kernel_object`
//!   (the amdhsa kernel descriptor, LLVM AMDGPUUsage "Kernel Descriptor"),
//!   `kernarg_address`, `completion_signal`. Sizes the CP refuses before reading the
//!   descriptor are [`queue_error::check_dispatch`]'s; a descriptor the GPU cannot read is a
//!   VM fault; a descriptor the interpreter cannot run (a GPU that is not gfx906, gfx908,
//!   gfx90a, gfx94x or gfx11; wave32 on gfx9; inconsistent SGPR counts; an entry offset of
//!   0, which puts the code on the descriptor's own 64 bytes, as no code object does) is the
//!   CP's "invalid ISA" error (128), as before kernels ran.
//! * gfx11 GPUs (rx7900xtx, GC 11.x) run on kfd-gfx9's gfx11 front end (`kfd_gfx9::gfx11`,
//!   `Target::Gfx11`), in wave32 when the descriptor's `ENABLE_WAVEFRONT_SIZE32` (AQL) or the
//!   initiator's `CS_W32_EN` (PM4, as kfdtest's `Dispatch::BuildIb` sets it on gfx10+) says
//!   so; a wave32 kernel short of scratch asks with ROCr 6.2's wave32 code (0x400).
//! * The waves get the registers AMDGPUUsage's "Initial Kernel Execution State" gives them
//!   ([`kfd_gfx9::dispatch`]): the dispatch ptr is the packet's address, the queue ptr the
//!   `amd_queue_t` found from the read pointer as [`queue_error`] finds it, the dispatch id
//!   the packet's index, the apertures the process's (GET_PROCESS_APERTURES: LDS and scratch).
//! * Scratch is the queue's: `amd_queue_t.scratch_resource_descriptor` (the private segment
//!   buffer), `scratch_backing_memory_location` (on gfx9 the backing memory's GPU address:
//!   ROCr 5.2.3 `GpuAgent::AcquireQueueScratch` sets `queue_process_offset` to the base
//!   itself when the ISA major is above 8), and `compute_tmpring_size` (WAVES bits 0–11, the
//!   slots; WAVESIZE bits 12–24, a slot's KiB), as `AqlQueue::InitScratchSRD` fills them. A
//!   kernel that needs more scratch than the queue has gets what ROCr's
//!   `AqlQueue::DynamicScratchHandler` expects of the CP: the packet is not run, error code
//!   1 ("insufficient scratch, wave64") goes into `queue_inactive_signal` (its event raised),
//!   and the CP waits; ROCr allocates scratch, rewrites the queue's fields and stores 0 in the
//!   signal, and the packet is tried again (a queue with no such signal stops with code 1).
//!   After a dispatch on scratch ROCr marked `AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE`, the CP
//!   asks for it back with code 512 ("large scratch reclaim"). Where it differs: ROCr's retry
//!   bit (bit 63) is not used.
//! * Memory: every access goes through the GPU view ([`gpu_view`](super::gpu_view)): BOs,
//!   USERPTR, imports and SVM ranges, with the retry-fault path of XNACK (an SVM page not on
//!   the GPU migrates as the kernel's `svm_range_restore_pages` does) and, for an address the
//!   GPU cannot reach, the VM fault the SDMA engines take
//!   ([`engine::vm_fault`](super::engine::vm_fault): the SMI record, the process's queues on
//!   the GPU stopped, the memory events set). An instruction
//!   prefetch past the instruction being fetched reports nothing ([`Driver::peek_here`]).
//!   The bytes of VRAM and GTT BOs are reached through a shared mapping of their memfds
//!   (`GpuMemory`: no lock or system call per lane), the state's long-lived one
//!   ([`bo_maps`](super::bo_maps), made with the BO's first GPU access and unmapped with its
//!   last reference: a dispatch maps and unmaps nothing); USERPTR and SVM pages the GPU maps are
//!   reached with one `process_vm_readv`/`writev` per access and no lock, their translation
//!   cached until the next MMU-notifier event or SVM unmap (the first access to a page, and
//!   the first after an invalidation, goes through the GPU view and its retry-fault path);
//!   a translation covers its whole span (a BO's or USERPTR BO's GPU mapping, an SVM page
//!   alone), so a whole-wave access (`kfd_gfx9`'s bulk path: one call per page for a wave's
//!   unit-stride load or store) walking a BO finds it in the thread's last four spans;
//!   the dispatch packet and the kernarg
//!   segment are read once when the dispatch starts, as the HSA lets the CP (neither may
//!   change while the dispatch runs; every wave reads them through the scalar cache).
//!   An atomic on a BO page is a compare-and-swap on the shared mapping: atomic with respect
//!   to every other GPU access and to the CPU's own atomic instructions on the same memory.
//!   On USERPTR and SVM memory in system memory (the process's own pages, which the model
//!   reaches with `process_vm_readv` / `process_vm_writev`, not through a mapping it could
//!   use a locked instruction on), as on the hardware, where it is a PCIe/xGMI atomic, it is
//!   atomic with the CPU's locked instructions too under `kfd-emu run`: a compare-and-swap
//!   loop (`GpuMemory::cpu_atomic`: the value read, the operation applied, the
//!   compare-and-swap retried with the value a mismatch returns) whose `lock cmpxchg` a
//!   stopped thread of the process runs ([`CpuWake::cas`](crate::backend::CpuWake::cas),
//!   the supervisor's tracer, which keeps the thread stopped for the next lane's; measured
//!   by `benches/cas.rs` on the shared 2-core development VM at a load average of 12–15:
//!   0.12–0.24 ms each in a thread kept stopped, 0.3–1 ms for the first of a burst, against
//!   6–7 µs for the `process_vm_readv`/`writev` pair it replaces, nearly all of it the
//!   hand-overs between the engine thread, the tracer and the stopped thread). Every such atomic of the process's dispatches holds one lock per
//!   process ([`atomics_lock`]; per process, so that an atomic blocked on one program's
//!   unserved page stalls no other program). Where it differs: in attach mode (no tracer),
//!   on a process none of whose threads stops within a quarter of a second (every one
//!   blocked in a call the supervisor is answering: the rest of that dispatch, which waited
//!   that quarter of a second once; logged once),
//!   or before the process made a file `mmap` (no `syscall` instruction of it known), the
//!   atomic is the read-modify-write under that lock: atomic with every GPU access but not
//!   with the CPU's, which can lose updates made between the read and the write.
//! * Profiling: on a queue whose `amd_queue_t.queue_properties` has
//!   `AMD_QUEUE_PROPERTIES_ENABLE_PROFILING` (`hsa_amd_profiling_set_profiler_enabled`), the
//!   dispatch's start and end times on the GPU clock go into the completion signal's
//!   `start_ts` and `end_ts`, as the CP writes them.
//! * Fences: the packet's acquire and release fence scopes need nothing: every access of a
//!   wave reaches the process's memory (or the BO's memfd) before the next instruction runs,
//!   so memory is coherent at every scope, and the completion signal is written after the
//!   last wave ended.
//! * Traps: a wave that executes `s_trap` enters the kernel's first-level (CWSR) trap
//!   handler, whose effect is modelled ([`trap_handler`]: `cwsr_trap_handler_gfx9.asm`,
//!   and `cwsr_trap_handler_gfx10.asm` on gfx11):
//!   with a second-level handler (SET_TRAP_HANDLER's TBA, which ROCr always sets) the wave
//!   jumps there and runs it; without one the `s_trap` is stepped over. A trap handler's
//!   `s_sendmsg MSG_GET_DOORBELL` (gfx9) or `s_sendmsg_rtn MSG_RTN_GET_DOORBELL` (gfx11)
//!   gets the queue's doorbell id; its `MSG_INTERRUPT` is the
//!   SQ interrupt of `event_interrupt_wq_v9` / `_v11` ([`sq_interrupt`]; the two read a
//!   wave's message the same way: PRIV in bit 26, the data in 23:0): from the trap handler it
//!   raises the exception its data names on its queue for the debugger, else for the
//!   runtime (the error payload and event of the queue's context save area header), else
//!   it signals the event its data names. A wave the handler leaves halted stays so until
//!   the queue is destroyed (only a debugger resumes a wave).
//! * An instruction that does not decode or is not implemented stops the dispatch; the
//!   queue stops with the code ROCr's trap handler would write (`amd_gpu_shaders.h`:
//!   `1 << 30` for an illegal instruction), which `DynamicScratchHandler` turns into
//!   `HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION`; a runtime that enabled exceptions also gets
//!   `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION`, as ROCr 6.2.4's trap handler sends it
//!   ([`queue_error`]'s module docs). An unimplemented instruction is always logged
//!   (it is the emulator's limit, not the program's error).
//! * Global wave sync: a queue given GWS (ALLOC_QUEUE_GWS, `pqm_set_gws`) dispatches with
//!   its GPU's resources ([`Device::gws`](super::device::Device), which every such queue of
//!   every process shares: the hardware's); a `ds_gws_*` instruction on a queue without them
//!   stops the queue with the illegal-instruction code (`kfd_gfx9::gws`: the hardware's
//!   behaviour there is not documented; our choice). Whether the queue has them is looked
//!   up as each dispatch starts ([`has_gws`]): `pqm_set_gws` remaps the queue
//!   (`update_queue`), so a dispatch started after ALLOC_QUEUE_GWS returned has them. Where it
//!   differs: a dispatch already running when GWS are given or taken keeps what it started
//!   with (the CP would preempt its waves and resume them under the new mapping). The
//!   dispatcher parks workgroups whose waves wait on GWS and starts others
//!   (`kfd_gfx9::dispatch`, "Global wave sync").
//! * Threads: the workgroups run on up to [`ModelConfig::gpu_threads`](super::ModelConfig)
//!   threads started for the dispatch (each marked an own thread). The engine thread waits
//!   for them. Their decoded code and wave state are the queue's
//!   ([`Runner::dispatch_pool`](super::queues::Runner), a [`dispatch::Pool`]), kept from one
//!   dispatch to the next as a CU keeps its instruction cache: a kernel dispatched again
//!   decodes nothing unless its code's bytes changed (each cached page is compared with
//!   memory at its first fetch of each dispatch) and allocates no wave registers. A long kernel holds its queue's packet: DESTROY_QUEUE (and a process's exit)
//!   cancel it between quanta — its remaining waves never run, what it wrote stays —; a
//!   deactivating UPDATE_QUEUE holds its threads between quanta, its waves kept, and returns
//!   once none runs a wave (the CP's context save and restore, CWSR: `queues::Runner`'s
//!   pause points), activation lets them go on; an eviction lets it finish.

use std::sync::Mutex;

use kfd_gfx9::dispatch::{self, Dispatch, DispatchError, KernelDescriptor, Observer, Scratch};
use kfd_gfx9::exec::{Apertures, ExecError, Fault, Memory, Target, Wave};

use super::bo_maps::BoMap;
use super::driver::Driver;
use super::engine::{Work, signal_interrupt, vm_fault};
use super::exceptions;
use super::gpu_view::{GpuFault, Route};
use super::queue_error::{self, ILLEGAL_INSTRUCTION, TRAP};
use super::queues::{Runner, Stopped};
use super::trap_handler::{self, Message};

/// What running a dispatch packet came to.
pub(super) enum Outcome {
    /// Every wave ended: the packet completes.
    Done,
    /// Not run yet (waiting for the runtime to give the queue scratch).
    Wait,
    /// The queue stops with this.
    Stop(Stopped),
    /// A VM fault was taken (or the queue went away): nothing more to do.
    Faulted,
}

/// "Insufficient scratch, wave64" and "large scratch reclaim" (`DynamicScratchHandler`).
const SCRATCH_WAVE64: u32 = 1;
/// "Insufficient scratch, wave32" (ROCr 6.2 `AqlQueue::DynamicQueueEventsHandler`: `error_code
/// & 0x401`, lanes per wave 32 when bit 10 is set).
const SCRATCH_WAVE32: u32 = 0x400;

/// The insufficient-scratch code of a kernel: by its wave size.
fn scratch_code(kd: &KernelDescriptor) -> u32 {
    if kd.wave32() {
        SCRATCH_WAVE32
    } else {
        SCRATCH_WAVE64
    }
}
const SCRATCH_RECLAIM: u32 = 512;

/// `amd_queue_t` (`amd_hsa_queue.h`, ROCr 5.2.3): `compute_tmpring_size` at 140,
/// `scratch_resource_descriptor` at 144, `scratch_backing_memory_location` at 160,
/// `queue_properties` at 180.
const QUEUE_TMPRING: u64 = 140;
const QUEUE_SRD: u64 = 144;
const QUEUE_SCRATCH_BASE: u64 = 160;
const QUEUE_PROPERTIES: u64 = 180;
/// `AMD_QUEUE_PROPERTIES_USE_SCRATCH_ONCE` and `_ENABLE_PROFILING`.
const USE_SCRATCH_ONCE: u32 = 1 << 4;
const ENABLE_PROFILING: u32 = 1 << 3;
/// `amd_queue_t` from `read_dispatch_id_field_base_byte_offset` (136) to the end of
/// `queue_properties` (184): what a dispatch reads of the queue ([`queue_fields`]).
const QUEUE_FIELDS_AT: u64 = 136;
const QUEUE_FIELDS: usize = 48;

/// The `amd_queue_t` word at `field` (one of the offsets above) of a [`queue_fields`] block.
fn queue_word(block: &[u8; QUEUE_FIELDS], field: u64) -> u32 {
    let i = (field - QUEUE_FIELDS_AT) as usize;
    u32::from_le_bytes([block[i], block[i + 1], block[i + 2], block[i + 3]])
}

/// `amd_queue_t`'s fields a dispatch reads, from the read-index offset field on (bytes
/// 136..184: the offset, `compute_tmpring_size`, the scratch descriptor and base,
/// `queue_properties`), in one access — one system call where the queue is process memory,
/// as ROCr's is on a dGPU — when the queue is laid out as ROCr lays it out: the offset field
/// says the read index is at 128, so the block read at the read index + 8 is the queue's
/// bytes 136..184. `None` otherwise, or when the block is not readable (it is read
/// speculatively: no fault reported), and the caller reads field by field as before
/// ([`queue_error::amd_queue`]).
fn queue_fields(drv: &Driver, w: &Work) -> Option<[u8; QUEUE_FIELDS]> {
    let mut block = [0u8; QUEUE_FIELDS];
    drv.peek_here(w.tgid, w.gpu_id, w.rptr_va.checked_add(8)?, &mut block)
        .ok()?;
    (u32::from_le_bytes([block[0], block[1], block[2], block[3]]) == 128 && w.rptr_va >= 128)
        .then_some(block)
}

/// `amd_signal_t.start_ts` (`amd_hsa_signal.h`; `end_ts` follows it).
const SIGNAL_START_TS: u64 = 32;

/// The per-process locks GPU atomics on process memory hold across their read-modify-write
/// (module docs), by tgid; an entry lives while a dispatch of the process holds it.
static ATOMICS: Mutex<Vec<(i32, std::sync::Weak<Mutex<()>>)>> = Mutex::new(Vec::new());

/// The lock the GPU atomics of process `tgid` share: one per live process, never another
/// process's (a dispatch blocked inside it, on a page the program does not serve, must not
/// stall a second program's atomics).
fn atomics_lock(tgid: i32) -> std::sync::Arc<Mutex<()>> {
    let mut all = ATOMICS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.retain(|(_, w)| w.strong_count() > 0);
    if let Some(lock) = all
        .iter()
        .find(|(t, _)| *t == tgid)
        .and_then(|(_, w)| w.upgrade())
    {
        return lock;
    }
    let lock = std::sync::Arc::new(Mutex::new(()));
    all.push((tgid, std::sync::Arc::downgrade(&lock)));
    lock
}

/// The interpreter's target of GFX version `major.minor.stepping`, if it runs it: the gfx9
/// GPUs, and gfx11 (RDNA3) through kfd-gfx9's gfx11 front end (`kfd_gfx9::gfx11`).
fn target(t: kfd_ioctl::topology::GfxTargetVersion) -> Option<Target> {
    match (t.major, t.minor, t.stepping) {
        (9, 0, 6) => Some(Target::Gfx906),
        (9, 0, 8) => Some(Target::Gfx908),
        (9, 0, 10) => Some(Target::Gfx90a),
        (9, 4, _) => Some(Target::Gfx942),
        (11, _, _) => Some(Target::Gfx11),
        _ => None,
    }
}

/// One GPU page as a dispatch's translation cache holds it: the model's own bytes, reached
/// through a shared mapping of the BO's memfd (`base` is the page's first byte in it);
/// process memory (USERPTR, SVM) the GPU maps, reached with one `process_vm_readv` /
/// `process_vm_writev` at `addr` of process `owner`; memory the model keeps for the kernel
/// driver, reached through the GPU view on every access; or a page not mapped on the GPU
/// (its access goes through the GPU view, which faults or migrates it, and is translated
/// again after: never cached).
#[derive(Clone, Copy)]
enum Page {
    Mapped {
        base: PagePtr,
        writable: bool,
    },
    Process {
        owner: i32,
        addr: u64,
        writable: bool,
    },
    Slow,
    Unmapped,
}

impl Page {
    /// The translation of the page `delta` bytes (a multiple of the page size, either sign)
    /// from this one in the same span ([`Translations`]): the same window or process memory,
    /// moved linearly.
    fn moved(self, delta: i64) -> Page {
        match self {
            Page::Mapped { base, writable } => Page::Mapped {
                // Within the same window (the span lies in it): the caller's invariant.
                base: PagePtr(base.0.wrapping_offset(delta as isize)),
                writable,
            },
            Page::Process {
                owner,
                addr,
                writable,
            } => Page::Process {
                owner,
                addr: addr.wrapping_add_signed(delta),
                writable,
            },
            p => p,
        }
    }
}

/// A dispatch's translations, valid while the device's translation generation
/// ([`Device::translations`](super::device::Device)) is `epoch`.
#[derive(Default)]
struct Translations {
    epoch: u64,
    /// Each page's translation and its span: the pages around it its mapping maps linearly
    /// (a BO's or USERPTR's whole GPU mapping, within its window; an SVM page alone).
    pages: std::collections::HashMap<u64, (Page, std::ops::Range<u64>)>,
}

/// A page's address in a window (a [`BoMap`] of the BO's memfd) the cache holds for the whole
/// dispatch.
#[derive(Clone, Copy)]
struct PagePtr(*mut u8);
// SAFETY: the pointer is into a window (a MAP_SHARED mapping) that outlives every use (the
// dispatch's `GpuMemory` keeps every window until it is dropped), and the bytes are only
// accessed with atomic operations, from any thread.
unsafe impl Send for PagePtr {}
// SAFETY: as for Send.
unsafe impl Sync for PagePtr {}

/// Copies `buf.len()` bytes from shared memory at `src` with atomic loads (the process may
/// write the same bytes meanwhile: a racy access, as on the hardware, but no data race in the
/// emulator). Aligned dwords and qwords are single loads; a longer copy (a whole wave's
/// coalesced access, `kfd_gfx9`'s bulk path) moves its 8-aligned middle a qword at a time.
///
/// # Safety
///
/// `src..src + buf.len()` is within a live window ([`BoMap`]).
unsafe fn load(src: *const u8, buf: &mut [u8]) {
    use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
    let aligned = |n: usize| (src as usize).is_multiple_of(n);
    match buf.len() {
        // SAFETY: in the window (the caller), aligned.
        4 if aligned(4) => buf.copy_from_slice(
            &unsafe { &*src.cast::<AtomicU32>() }
                .load(Relaxed)
                .to_le_bytes(),
        ),
        // SAFETY: as above.
        8 if aligned(8) => buf.copy_from_slice(
            &unsafe { &*src.cast::<AtomicU64>() }
                .load(Relaxed)
                .to_le_bytes(),
        ),
        n => {
            // Bytes up to the first 8-aligned address, qwords, then the last bytes.
            let head = (src as usize).next_multiple_of(8) - src as usize;
            let head = head.min(n);
            let qwords = (n - head) / 8;
            for (i, b) in buf.iter_mut().enumerate().take(head) {
                // SAFETY: in the window (the caller).
                *b = unsafe { &*src.add(i).cast::<AtomicU8>() }.load(Relaxed);
            }
            for (q, chunk) in buf[head..head + 8 * qwords].chunks_exact_mut(8).enumerate() {
                // SAFETY: in the window (the caller), 8-aligned (past `head`).
                let v = unsafe { &*src.add(head + 8 * q).cast::<AtomicU64>() }.load(Relaxed);
                chunk.copy_from_slice(&v.to_le_bytes());
            }
            for (i, b) in buf.iter_mut().enumerate().skip(head + 8 * qwords) {
                // SAFETY: in the window (the caller).
                *b = unsafe { &*src.add(i).cast::<AtomicU8>() }.load(Relaxed);
            }
        }
    }
}

/// Copies `data` to shared memory at `dst` with atomic stores (see [`load`]).
///
/// # Safety
///
/// `dst..dst + data.len()` is within a live window ([`BoMap`]).
unsafe fn store(dst: *mut u8, data: &[u8]) {
    use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
    let aligned = |n: usize| (dst as usize).is_multiple_of(n);
    match data.len() {
        4 if aligned(4) => {
            let v = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
            // SAFETY: in the window (the caller), aligned.
            unsafe { &*dst.cast::<AtomicU32>() }.store(v, Relaxed);
        }
        8 if aligned(8) => {
            let v = u64::from_le_bytes(data.try_into().unwrap_or_default());
            // SAFETY: as above.
            unsafe { &*dst.cast::<AtomicU64>() }.store(v, Relaxed);
        }
        n => {
            let head = (dst as usize).next_multiple_of(8) - dst as usize;
            let head = head.min(n);
            let qwords = (n - head) / 8;
            for (i, &b) in data.iter().enumerate().take(head) {
                // SAFETY: in the window (the caller).
                unsafe { &*dst.add(i).cast::<AtomicU8>() }.store(b, Relaxed);
            }
            for (q, chunk) in data[head..head + 8 * qwords].chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
                // SAFETY: in the window (the caller), 8-aligned (past `head`).
                unsafe { &*dst.add(head + 8 * q).cast::<AtomicU64>() }.store(v, Relaxed);
            }
            for (i, &b) in data.iter().enumerate().skip(head + 8 * qwords) {
                // SAFETY: in the window (the caller).
                unsafe { &*dst.add(i).cast::<AtomicU8>() }.store(b, Relaxed);
            }
        }
    }
}

/// The GPU's memory as one dispatch of process `tgid` on GPU `gpu_id` sees it: the GPU view,
/// with a translation cache for the dispatch's lifetime (the TLB of this dispatch):
///
/// * pages of VRAM and GTT BOs, whose bytes are then reached through a shared mapping of the
///   BO's memfd (an access is atomic loads or stores, a qword at a time for a whole wave's,
///   no lock and no system call; an atomic is a compare-and-swap on the shared page, atomic
///   with respect to the CPU too);
/// * pages of process memory the GPU maps (USERPTR BOs with pages, SVM pages whose PTE is
///   valid on this GPU), reached with one `process_vm_readv`/`writev` per access and no lock.
///   A page is cached only once it is mapped: the first access to an SVM page goes through
///   the GPU view, which applies the XNACK retry-fault path (the migration, or the VM fault)
///   exactly as before, and the page is translated after it. The cache is dropped whenever
///   the device's translation generation changes (every MMU-notifier event — munmap, mremap,
///   madvise, mprotect, fork — and every SVM unmap from the GPUs: eviction, migration to
///   system memory, attribute changes), so an access after an invalidation translates again
///   and faults, or migrates, as the GPU view decides. An access whose cached translation
///   fails (the page went away) is made again through the GPU view, whose answer (its fault)
///   is the one given. A translation holds for its span (`Route`'s: the pages the same
///   mapping maps linearly, within the BO's window), which each thread keeps for its last
///   four ([`LAST_SPANS`]; the map by page behind them).
///
/// Everything else (memory the model keeps for the kernel driver, faults) goes through the GPU
/// view on every access. Where it differs: a BO freed, or a VA unmapped from the GPU and
/// mapped again (the GPU-side ioctls, not the CPU's munmap), while the kernel runs is still
/// reached as it was when the dispatch first touched that mapping (on the hardware the kernel
/// would race with the unmap).
struct GpuMemory<'a> {
    drv: &'a Driver,
    tgid: i32,
    gpu_id: u32,
    runner: &'a Runner,
    /// The first fault a wave took (the dispatch stops at it).
    fault: Mutex<Option<GpuFault>>,
    /// Translations by page address.
    pages: std::sync::RwLock<Translations>,
    /// The BO mappings the translations point into, by mapping (its `Arc`'s address): the
    /// state's long-lived ones ([`bo_maps`](super::bo_maps), made with a BO's first access and
    /// unmapped with its last reference), held so that none goes while the dispatch runs.
    windows: Mutex<std::collections::HashMap<usize, std::sync::Arc<BoMap>>>,
    /// This dispatch's number, which the threads' translation caches ([`LAST_SPANS`]) are keyed
    /// by.
    generation: u64,
    /// Read-only copies, taken when the dispatch starts, of what the HSA says no one changes
    /// while it runs: the dispatch packet and the kernarg segment ("the kernarg segment is
    /// read-only" for the kernel, and the host may not modify it until the dispatch
    /// completes), which every wave reads through the scalar cache. Reads inside them are
    /// served from here (they are often in USERPTR memory, whose every access is a system
    /// call).
    snapshots: Vec<(u64, Vec<u8>)>,
    /// The process's GPU-atomics lock ([`atomics_lock`]).
    atomics: std::sync::Arc<Mutex<()>>,
    /// The GPU's GWS, when the queue has them.
    gws: Option<&'a kfd_gfx9::gws::Gws>,
    /// Whether atomics on process memory still ask the process's CPU to run their
    /// compare-and-swaps ([`GpuMemory::cpu_atomic`]).
    cpu_cas: std::sync::atomic::AtomicBool,
}

/// Dispatches made so far (each `GpuMemory` takes the next number).
static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Spans a thread's translation cache ([`LAST_SPANS`]) holds.
const LAST_SPANS_LEN: usize = 4;

/// One entry of [`LAST_SPANS`]: (dispatch number, translation generation, span start, span
/// end, a page of the span, that page's translation).
type SpanSlot = (u64, u64, u64, u64, u64, Page);

thread_local! {
    /// The last spans a thread translated (a span: the pages one mapping maps linearly, a
    /// whole BO for VRAM and GTT), the next slot to replace last. A wave's lanes mostly touch
    /// the page the previous lane did, and a copy kernel walks a source and a destination BO
    /// a page further at each instruction; this spares them the shared map's lock.
    static LAST_SPANS: std::cell::Cell<([SpanSlot; LAST_SPANS_LEN], usize)> =
        const { std::cell::Cell::new(([(0, 0, 0, 0, 0, Page::Slow); LAST_SPANS_LEN], 0)) };
}

const PAGE: u64 = super::memory::PAGE_SIZE;

impl GpuMemory<'_> {
    fn new<'a>(drv: &'a Driver, w: &'a Work) -> GpuMemory<'a> {
        GpuMemory {
            drv,
            tgid: w.tgid,
            gpu_id: w.gpu_id,
            runner: &w.runner,
            fault: Mutex::new(None),
            pages: std::sync::RwLock::new(Translations::default()),
            windows: Mutex::new(std::collections::HashMap::new()),
            generation: GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            snapshots: Vec::new(),
            atomics: atomics_lock(w.tgid),
            gws: has_gws(drv, w).then(|| &*drv.dev.gws[w.gpu]),
            cpu_cas: std::sync::atomic::AtomicBool::new(true),
        }
    }

    fn check(&self, addr: u64, write: bool) -> Result<(), Fault> {
        // A destroyed queue's dispatch makes no more accesses.
        if self.runner.is_gone() {
            return Err(Fault { addr, write });
        }
        Ok(())
    }

    fn fail(&self, f: GpuFault) -> Fault {
        self.fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert(f);
        Fault {
            addr: f.va,
            write: f.write,
        }
    }

    /// The cached translation of the page at `page`, made on first use.
    fn page(&self, page: u64) -> Page {
        let epoch = self
            .drv
            .dev
            .translations
            .load(std::sync::atomic::Ordering::Acquire);
        let (mut slots, next) = LAST_SPANS.with(std::cell::Cell::get);
        if let Some(&(_, _, _, _, at, p)) = slots.iter().find(|&&(g, e, lo, hi, _, _)| {
            g == self.generation && e == epoch && lo <= page && page < hi
        }) {
            return p.moved(page.wrapping_sub(at) as i64);
        }
        let (p, span) = self.page_shared(page, epoch);
        if !matches!(p, Page::Unmapped) {
            slots[next] = (self.generation, epoch, span.start, span.end, page, p);
            LAST_SPANS.with(|c| c.set((slots, (next + 1) % LAST_SPANS_LEN)));
        }
        p
    }

    /// [`page`](Self::page) through the dispatch's map, made on first use, with its span;
    /// `epoch` is the translation generation read before.
    fn page_shared(&self, page: u64, epoch: u64) -> (Page, std::ops::Range<u64>) {
        {
            let cache = self
                .pages
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if cache.epoch == epoch
                && let Some(p) = cache.pages.get(&page)
            {
                return p.clone();
            }
        }
        let alone = page..page.saturating_add(PAGE);
        let (p, span) = match self.drv.page_route(self.tgid, self.gpu_id, page) {
            Route::Memfd {
                map,
                offset,
                writable,
                span,
            } if offset + PAGE <= map.len() as u64 => {
                let size = map.len() as u64;
                // SAFETY: `offset + PAGE <= map.len()`, the window's length.
                let base = unsafe { map.base().add(offset as usize) };
                // The window stays mapped while the dispatch runs (its `Arc` kept here), even
                // if the BO is freed meanwhile.
                self.windows
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .entry(std::sync::Arc::as_ptr(&map) as usize)
                    .or_insert(map);
                // The span's pages within the window: offsets 0..size.
                let lo = span.start.max(page.saturating_sub(offset));
                let hi = span
                    .end
                    .min(page.saturating_add((size - offset) / PAGE * PAGE));
                let page_mapped = Page::Mapped {
                    base: PagePtr(base),
                    writable,
                };
                (page_mapped, lo.min(page)..hi.max(page.saturating_add(PAGE)))
            }
            Route::Process {
                owner,
                addr,
                writable,
                span,
            } => (
                Page::Process {
                    owner,
                    addr,
                    writable,
                },
                span.start.min(page)..span.end.max(page.saturating_add(PAGE)),
            ),
            Route::Unmapped => return (Page::Unmapped, alone),
            Route::Memfd { .. } | Route::Other => (Page::Slow, alone),
        };
        let mut cache = self
            .pages
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A translation made under an older generation is not kept (it may be stale); one
        // made under a newer generation than the map's drops the map.
        if epoch > cache.epoch {
            cache.pages.clear();
            cache.epoch = epoch;
        }
        if epoch == cache.epoch {
            cache.pages.insert(page, (p, span.clone()));
        }
        (p, span)
    }

    /// Where `addr..addr + len` is when it lies in one cached page (writable when `write`).
    fn fast(&self, addr: u64, len: usize, write: bool) -> Fast {
        let page = addr & !(PAGE - 1);
        if (addr - page) + len as u64 > PAGE {
            return Fast::No;
        }
        match self.page(page) {
            Page::Mapped { base, writable } if writable || !write => {
                // SAFETY: within the page (checked above), which is within its window.
                Fast::Mapped(unsafe { base.0.add((addr - page) as usize) })
            }
            Page::Process {
                owner,
                addr: at,
                writable,
            } if writable || !write => Fast::Process(owner, at + (addr - page)),
            _ => Fast::No,
        }
    }

    /// Reads `buf` at `addr` through the cache or the GPU view (a fault reported).
    fn read_cached(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        match self.fast(addr, buf.len(), false) {
            Fast::Mapped(p) => {
                // SAFETY: `fast` checked the range lies in one page of a live window.
                unsafe { load(p, buf) };
                return Ok(());
            }
            // A failure (the page went away) is the GPU view's to answer.
            Fast::Process(owner, at) if super::objects::remote_read(owner, at, buf).is_ok() => {
                return Ok(());
            }
            _ => {}
        }
        self.drv
            .read_here(self.tgid, self.gpu_id, addr, buf)
            .map_err(|f| self.fail(f))
    }

    /// Writes `data` at `addr` through the cache or the GPU view (a fault reported).
    fn write_cached(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        match self.fast(addr, data.len(), true) {
            Fast::Mapped(p) => {
                // SAFETY: as in `read_cached`, and the page is writable.
                unsafe { store(p, data) };
                return Ok(());
            }
            Fast::Process(owner, at) if super::objects::remote_write(owner, at, data).is_ok() => {
                return Ok(());
            }
            _ => {}
        }
        self.drv
            .write_here(self.tgid, self.gpu_id, addr, data)
            .map_err(|f| self.fail(f))
    }
}

impl GpuMemory<'_> {
    /// A GPU atomic on process memory (`size` bytes at `at` of process `owner`) as a
    /// compare-and-swap loop whose compare-and-swaps the process's own CPU runs
    /// ([`CpuWake::cas`](crate::backend::CpuWake::cas)): atomic with its locked instructions,
    /// as the hardware's PCIe/xGMI atomic is. `None` when none can run (the caller then does
    /// what it did before): no tracer, a fault (the GPU view answers it), or no thread of the
    /// process stopped in time, after which this dispatch does not ask again (logged once).
    fn cpu_atomic(
        &self,
        owner: i32,
        at: u64,
        size: usize,
        f: &mut dyn FnMut(u64) -> u64,
    ) -> Option<u64> {
        use crate::backend::CasError;
        use std::sync::atomic::Ordering::Relaxed;
        if !self.cpu_cas.load(Relaxed) {
            return None;
        }
        let mask = if size == 8 {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        // The first guess; a mismatch answers the value to try next.
        let mut raw = [0u8; 8];
        super::objects::remote_read(owner, at, &mut raw[..size]).ok()?;
        let mut old = u64::from_le_bytes(raw);
        loop {
            let new = f(old) & mask;
            match self.drv.cpu.cas(owner, at, size as u8, old, new) {
                Ok(now) if now == old => return Some(old),
                Ok(now) => old = now,
                Err(CasError::Fault) => return None,
                Err(e) => {
                    self.cpu_cas.store(false, Relaxed);
                    if e == CasError::NoThread
                        && !CAS_FALLBACK_LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed)
                    {
                        crate::own::elog!(
                            "kfd-emu: no thread of process {owner} stopped to run a GPU atomic: this dispatch's atomics on its memory are not atomic with its CPU's (logged once)"
                        );
                    }
                    return None;
                }
            }
        }
    }
}

/// Whether a dispatch fell back from CPU compare-and-swaps for want of a thread
/// ([`GpuMemory::cpu_atomic`]: said once).
static CAS_FALLBACK_LOGGED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Where a cached access goes ([`GpuMemory::fast`]).
enum Fast {
    /// The address in a shared memfd mapping.
    Mapped(*mut u8),
    /// Process `.0`'s memory at `.1`.
    Process(i32, u64),
    /// Through the GPU view.
    No,
}

impl Memory for GpuMemory<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.check(addr, false)?;
        for (start, bytes) in &self.snapshots {
            if let Some(off) = addr
                .checked_sub(*start)
                .and_then(|o| usize::try_from(o).ok())
                && let Some(src) = bytes.get(off..off.saturating_add(buf.len()))
                && src.len() == buf.len()
            {
                buf.copy_from_slice(src);
                return Ok(());
            }
        }
        self.read_cached(addr, buf)
    }

    fn read_ahead(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.check(addr, false)?;
        match self.fast(addr, buf.len(), false) {
            Fast::Mapped(p) => {
                // SAFETY: as in `read_cached`.
                unsafe { load(p, buf) };
                return Ok(());
            }
            Fast::Process(owner, at) if super::objects::remote_read(owner, at, buf).is_ok() => {
                return Ok(());
            }
            _ => {}
        }
        self.drv
            .peek_here(self.tgid, self.gpu_id, addr, buf)
            .map_err(|f| Fault {
                addr: f.va,
                write: false,
            })
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.check(addr, true)?;
        self.write_cached(addr, data)
    }

    /// `f` may be called more than once (a compare-and-swap loop): it must be a pure
    /// function of the old value, as every atomic operation's is.
    fn atomic(&self, addr: u64, size: u8, f: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
        self.check(addr, true)?;
        let size = usize::from(size);
        if !(size == 4 || size == 8) || !addr.is_multiple_of(size as u64) {
            return Err(Fault { addr, write: true });
        }
        if let Fast::Mapped(p) = self.fast(addr, size, true) {
            if size == 4 {
                // SAFETY: in a live window (`mapped`), 4-aligned (`addr` is, and pages are).
                let a = unsafe { &*p.cast::<AtomicU32>() };
                let mut old = a.load(SeqCst);
                loop {
                    let new = f(u64::from(old)) as u32;
                    match a.compare_exchange_weak(old, new, SeqCst, SeqCst) {
                        Ok(_) => return Ok(u64::from(old)),
                        Err(now) => old = now,
                    }
                }
            }
            // SAFETY: as above, 8-aligned.
            let a = unsafe { &*p.cast::<AtomicU64>() };
            let mut old = a.load(SeqCst);
            loop {
                match a.compare_exchange_weak(old, f(old), SeqCst, SeqCst) {
                    Ok(_) => return Ok(old),
                    Err(now) => old = now,
                }
            }
        }
        let _held = self
            .atomics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Fast::Process(owner, at) = self.fast(addr, size, true)
            && let Some(old) = self.cpu_atomic(owner, at, size, f)
        {
            return Ok(old);
        }
        let mut raw = [0u8; 8];
        self.read_cached(addr, &mut raw[..size])?;
        let old = u64::from_le_bytes(raw);
        let new = f(old);
        self.write_cached(addr, &new.to_le_bytes()[..size])?;
        Ok(old)
    }

    fn gws(&self) -> Option<&kfd_gfx9::gws::Gws> {
        self.gws
    }
}

/// Whether queue `w` has its GPU's GWS now (ALLOC_QUEUE_GWS set `q->gws`), asked as each
/// dispatch starts, not when the engine's turn began: `pqm_set_gws` ends in the device queue
/// manager's `update_queue`, which unmaps the queue and maps it again with the process's new
/// `num_gws` (`pm_map_process_v9`), so every dispatch the CP starts after the ioctl returned
/// reaches the GWS. Not from the turn's [`Work`], which is copied out before the turn reads
/// its packets: a packet submitted right after the ioctl, in a turn that began before it,
/// would run without GWS. A queue destroyed or replaced meanwhile has none.
fn has_gws(drv: &Driver, w: &Work) -> bool {
    let st = drv.lock();
    st.procs
        .get(&w.tgid)
        .and_then(|p| p.queues.by_id.get(&w.id))
        .filter(|q| std::sync::Arc::ptr_eq(&q.runner, &w.runner))
        .is_some_and(|q| q.gws != 0)
}

/// The dispatch's hooks: threads marked as the emulator's own, cancellation when the queue
/// is destroyed, the trap handler's entry and the waves' messages (the module docs).
struct Hooks<'a> {
    drv: &'a Driver,
    runner: &'a Runner,
    /// The queue's process and GPU (index).
    tgid: i32,
    gpu: usize,
    /// The queue's doorbell id (what MSG_GET_DOORBELL answers).
    doorbell: u32,
}

impl Hooks<'_> {
    /// What the first-level trap handler's TMA holds now (the handler reads it as the wave
    /// traps): the second-level TBA and TMA SET_TRAP_HANDLER gave the GPU
    /// (`kfd_process_set_trap_handler`) and the debug trap flag
    /// (`kfd_process_set_trap_debug_flag`): set by `kfd_dbg_trap_activate`, which runs once
    /// both the debugger and the runtime are enabled (`kfd_dbg_trap_enable` with the runtime
    /// enabled, or `runtime_enable` under a debugger), cleared by `kfd_dbg_trap_deactivate`
    /// (the debugger's disable, the runtime's disable).
    fn tma(&self) -> trap_handler::Tma {
        let st = self.drv.lock();
        let Some(p) = st.procs.get(&self.tgid) else {
            return trap_handler::Tma::default();
        };
        let (tba, tma) = p
            .pdds
            .iter()
            .find(|d| d.gpu == self.gpu)
            .map_or((0, 0), |d| (d.tba, d.tma));
        trap_handler::Tma {
            tba,
            tma,
            debug_trap_enabled: p.debug.enabled && p.runtime_enabled,
        }
    }
}

/// `hwreg(HW_REG_STATUS)`.
const HW_REG_STATUS: usize = 2;

impl Observer for Hooks<'_> {
    fn thread_start(&self) {
        crate::own::mark();
        self.runner.dispatch_thread(true);
    }
    fn wave_start(&self, _: [u32; 3], _: u32, _: &Wave) {}
    fn cancelled(&self) -> bool {
        self.runner.is_gone()
    }
    fn pause_point(&self) {
        self.runner.pause_point();
    }
    fn thread_end(&self) {
        self.runner.dispatch_thread(false);
    }

    /// The hardware's trap entry has set TTMP0/1 and STATUS.PRIV; the trap handler base
    /// (TBA) is the kernel's CWSR trap handler, whose non-context-save path
    /// [`trap_handler::enter`] runs (`cwsr_trap_handler_gfx9.asm` on gfx9,
    /// `cwsr_trap_handler_gfx10.asm` on gfx11) with what its TMA holds as the wave traps:
    /// the second-level TBA and TMA SET_TRAP_HANDLER gave and the process's
    /// `debug_trap_enabled` ([`Hooks::tma`]).
    fn trap(&self, _: [u32; 3], _: u32, w: &mut Wave, _: u16) -> bool {
        trap_handler::enter(w, self.tma());
        true
    }

    /// gfx11's `s_sendmsg_rtn`: the SPI answers from the queue ([`trap_handler::message_rtn`]:
    /// the doorbell id, the first-level TBA and TMA).
    fn message_rtn(&self, _: [u32; 3], _: u32, _: &Wave, msg: u16) -> Option<u64> {
        let apu = self.drv.dev.cfg.machine.gpus()[self.gpu].apu;
        trap_handler::message_rtn(msg, self.doorbell, apu)
    }

    /// The message as the wave's target numbers it ([`trap_handler::message`]):
    /// MSG_GET_DOORBELL (gfx9): the SPI writes the wave's queue doorbell id into EXEC_LO
    /// (bit 31, which the handler set and waits on, clears). MSG_INTERRUPT: the SQ raises an
    /// interrupt with M0[23:0] and the wave's STATUS.PRIV ([`sq_interrupt`]). Other
    /// messages reach nothing the model has.
    fn message(&self, _: [u32; 3], _: u32, w: &mut Wave, simm16: u16) {
        match trap_handler::message(w.target, simm16) {
            Message::GetDoorbell => w.exec = (w.exec & !0xffff_ffff) | u64::from(self.doorbell),
            Message::Interrupt => {
                let privileged = w.read_hwreg(HW_REG_STATUS) & STATUS_PRIV != 0;
                sq_interrupt(self.drv, self.tgid, self.gpu, w.m0 & 0xff_ffff, privileged);
            }
            Message::Other => {}
        }
    }
}

/// `SQ_WAVE_STATUS.PRIV`.
const STATUS_PRIV: u32 = 1 << 5;

/// An SQ interrupt of a queue of process `tgid` on GPU `gpu` with data `data` (`event_interrupt_wq_v9`, source
/// SQ_INTERRUPT_MSG, encoding INST: a wave's `s_sendmsg MSG_INTERRUPT`): from a trap handler
/// (PRIV) the data names a queue (`KFD_CTXID0_DOORBELL_ID`, bits 9:0) and an exception mask
/// (`KFD_CTXID0_TRAP_CODE`, bits 23:10), raised to the debugger or the runtime
/// ([`exceptions::from_interrupt`]); otherwise, or when neither takes it, it signals the
/// event the data names (`kfd_signal_event_interrupt(pasid, data, 24)`).
fn sq_interrupt(drv: &Driver, tgid: i32, gpu: usize, data: u32, privileged: bool) {
    if privileged
        && exceptions::from_interrupt(
            drv,
            tgid,
            gpu,
            data & 0x3ff,
            u64::from((data & 0xff_fc00) >> 10),
            None,
        )
    {
        return;
    }
    signal_interrupt(drv, tgid, data);
}

/// Runs the KERNEL_DISPATCH `packet` read at `at` of queue `w` (module docs).
///
/// # Errors
///
/// A [`GpuFault`] reading the descriptor or the queue (the caller takes the VM fault).
pub(super) fn run(drv: &Driver, w: &Work, at: u64, packet: &[u8; 64]) -> Result<Outcome, GpuFault> {
    if let Some(code) = queue_error::check_dispatch(drv, w.gpu, packet) {
        return Ok(Outcome::Stop(Stopped::QueueError(code)));
    }
    let u16_at = |i: usize| u32::from(u16::from_le_bytes([packet[i], packet[i + 1]]));
    let u32_at =
        |i: usize| u32::from_le_bytes([packet[i], packet[i + 1], packet[i + 2], packet[i + 3]]);
    let u64_at = |i: usize| u64::from(u32_at(i)) | u64::from(u32_at(i + 4)) << 32;
    let kernel_object = queue_error::kernel_object(packet);
    let mut raw = [0u8; dispatch::DESCRIPTOR_BYTES];
    drv.read_here(w.tgid, w.gpu_id, kernel_object, &mut raw)?;
    let gpu = &drv.dev.cfg.machine.gpus()[w.gpu];
    let target = target(gpu.target);
    let kd = KernelDescriptor::parse_for(&raw, target.unwrap_or(Target::Gfx90a));
    let (Some(target), Ok(kd)) = (target, kd) else {
        trace(drv, w, &|| {
            format!("KERNEL_DISPATCH of {kernel_object:#x}: cannot run it ({kd:?}): invalid ISA")
        });
        return Ok(Outcome::Stop(Stopped::QueueError(
            queue_error::REGISTER_SIZE_INVALID,
        )));
    };
    if kd.kernel_code_entry_byte_offset == 0 {
        return Ok(Outcome::Stop(Stopped::QueueError(
            queue_error::REGISTER_SIZE_INVALID,
        )));
    }
    let dims = (u16_at(2) & 3) as usize;
    let grid: [u32; 3] = std::array::from_fn(|d| if d < dims { u32_at(12 + 4 * d) } else { 1 });
    let workgroup: [u32; 3] = std::array::from_fn(|d| if d < dims { u16_at(4 + 2 * d) } else { 1 });
    // `amd_queue_t` from its read-index offset field to `queue_properties` in one access
    // when it is laid out as ROCr lays it out (the read index at 128); else field by field.
    let (queue, mut fields) = match queue_fields(drv, w) {
        Some(block) => (w.rptr_va - 128, Some(block)),
        None => (
            queue_error::amd_queue(drv, w.tgid, w.gpu_id, w.rptr_va)?,
            None,
        ),
    };
    let apertures = gpu.apertures();
    let mut d = Dispatch {
        target,
        kd,
        entry: kd.entry(kernel_object),
        grid,
        workgroup,
        kernarg: u64_at(40),
        dispatch_ptr: at,
        queue_ptr: queue,
        dispatch_id: w.packet_at.get(),
        private_segment_size: u32_at(24),
        group_segment_size: u32_at(28),
        scratch: Scratch::default(),
        apertures: Apertures {
            shared_base: apertures.lds_base,
            private_base: apertures.scratch_base,
            ..Apertures::default()
        },
        user_data: None,
    };
    let mut properties = 0;
    if d.scratch_wave_bytes() > 0 {
        // The queue's scratch, as ROCr last set it up; whether it is too little.
        let read_scratch = |d: &mut Dispatch,
                            fields: &mut Option<[u8; QUEUE_FIELDS]>|
         -> Result<(bool, u32), GpuFault> {
            let mut q = [0u8; 44];
            match fields.take() {
                // Read with the offset field just now.
                Some(block) => q.copy_from_slice(&block[4..]),
                None => drv.read_here(w.tgid, w.gpu_id, queue + QUEUE_TMPRING, &mut q)?,
            }
            let word = |o: u64| {
                let i = (o - QUEUE_TMPRING) as usize;
                u32::from_le_bytes([q[i], q[i + 1], q[i + 2], q[i + 3]])
            };
            let tmpring = word(QUEUE_TMPRING);
            d.scratch = Scratch {
                srd: std::array::from_fn(|i| word(QUEUE_SRD + 4 * i as u64)),
                base: u64::from(word(QUEUE_SCRATCH_BASE))
                    | u64::from(word(QUEUE_SCRATCH_BASE + 4)) << 32,
                wave_bytes: u64::from(tmpring >> 12 & 0x1fff) * 1024,
                slots: tmpring & 0xfff,
            };
            let short = matches!(d.validate(), Err(DispatchError::Scratch { .. }))
                || d.scratch.slots < d.waves_per_group();
            Ok((short, word(QUEUE_PROPERTIES)))
        };
        let (short, props) = read_scratch(&mut d, &mut fields)?;
        properties = props;
        if short {
            // The runtime writes the scratch fields, then 0 in the signal: a request it
            // answered between the read above and the signal's read is not asked again
            // (the signal read first, then the fields, as an acquire orders them).
            return Ok(match inactive_signal_value(drv, w, queue)? {
                None => Outcome::Stop(Stopped::QueueError(scratch_code(&d.kd))),
                // Asked already: the runtime has not answered yet.
                Some(v) if v != 0 => Outcome::Wait,
                // Answered meanwhile: the next turn runs the dispatch.
                Some(_) if !read_scratch(&mut d, &mut None)?.0 => Outcome::Wait,
                Some(_) => {
                    trace(drv, w, &|| {
                        "KERNEL_DISPATCH needs scratch: asks the runtime (code 1)".into()
                    });
                    if let Some(event) =
                        queue_error::report(drv, w.tgid, w.gpu_id, w.rptr_va, scratch_code(&d.kd))?
                    {
                        signal_interrupt(drv, w.tgid, event);
                    }
                    Outcome::Wait
                }
            });
        }
    }
    // Profiling (AMD_QUEUE_PROPERTIES_ENABLE_PROFILING): read quietly, so that a queue with
    // no amd_queue_t (kfd-queue's own AQL queues) only goes without timestamps.
    let profiling = match fields {
        Some(block) => queue_word(&block, QUEUE_PROPERTIES) & ENABLE_PROFILING != 0,
        None => {
            let mut b = [0u8; 4];
            drv.peek_here(w.tgid, w.gpu_id, queue + QUEUE_PROPERTIES, &mut b)
                .is_ok_and(|()| u32::from_le_bytes(b) & ENABLE_PROFILING != 0)
        }
    };
    let completion = u64_at(56);
    let start = drv.dev.clock.raw_ns() / 10;
    let what = format!("KERNEL_DISPATCH {kernel_object:#x}");
    // The packet as read, and the kernarg segment when the GPU can read it (else the waves
    // fault on it themselves).
    let mut snapshots = vec![(at, packet.to_vec())];
    let mut kernarg = vec![0u8; kd.kernarg_size as usize];
    if !kernarg.is_empty()
        && drv
            .peek_here(w.tgid, w.gpu_id, d.kernarg, &mut kernarg)
            .is_ok()
    {
        snapshots.push((d.kernarg, kernarg));
    }
    match execute(drv, w, &d, &what, snapshots) {
        Ran::Done => {
            if profiling && completion != 0 {
                // The dispatch's start and end on the GPU clock (100 MHz, the counter
                // GET_CLOCK_COUNTERS and SDMA's TIMESTAMP report) in the completion signal's
                // `start_ts` and `end_ts`, before it is decremented: ROCr's
                // hsa_amd_profiling_get_dispatch_time reads them.
                let end = drv.dev.clock.raw_ns() / 10;
                let mut ts = [0u8; 16];
                ts[..8].copy_from_slice(&start.to_le_bytes());
                ts[8..].copy_from_slice(&end.max(start).to_le_bytes());
                drv.write_here(w.tgid, w.gpu_id, completion + SIGNAL_START_TS, &ts)?;
            }
            if properties & USE_SCRATCH_ONCE != 0 {
                // Give the single-use scratch back (ROCr releases it and stores 0).
                if let Some(event) =
                    queue_error::report(drv, w.tgid, w.gpu_id, w.rptr_va, SCRATCH_RECLAIM)?
                {
                    signal_interrupt(drv, w.tgid, event);
                }
            }
            Ok(Outcome::Done)
        }
        Ran::Scratch => scratch_request(drv, w, queue, scratch_code(&d.kd)),
        Ran::Other(outcome) => Ok(outcome),
    }
}

/// What [`execute`] came to.
enum Ran {
    Done,
    /// Too little scratch.
    Scratch,
    Other(Outcome),
}

/// Runs dispatch `d` of queue `w` and turns its end into what the queue does (module docs);
/// `what` names it in messages.
fn execute(
    drv: &Driver,
    w: &Work,
    d: &Dispatch,
    what: &str,
    snapshots: Vec<(u64, Vec<u8>)>,
) -> Ran {
    let mut mem = GpuMemory::new(drv, w);
    mem.snapshots = snapshots;
    // The queue's doorbell id, as the CP has it when it starts the dispatch.
    let doorbell = {
        let st = drv.lock();
        st.procs
            .get(&w.tgid)
            .and_then(|p| p.queues.by_id.get(&w.id))
            .map_or(0, |q| exceptions::doorbell_id(q.doorbell))
    };
    let hooks = Hooks {
        drv,
        runner: &w.runner,
        tgid: w.tgid,
        gpu: w.gpu,
        doorbell,
    };
    let opts = dispatch::RunOptions {
        threads: drv.dev.cfg.gpu_threads.max(1),
    };
    let started = std::time::Instant::now();
    w.runner.dispatching(true);
    let result = dispatch::run_in(d, &mem, &opts, &hooks, &w.runner.dispatch_pool);
    w.runner.dispatching(false);
    let took = started.elapsed();
    trace(drv, w, &|| {
        format!(
            "{what} entry {:#x} grid {:?} workgroup {:?} kernarg {:#x} lds {} scratch {}: \
             {result:?} in {took:?}",
            d.entry,
            d.grid,
            d.workgroup,
            d.kernarg,
            d.lds_bytes(),
            d.scratch_wave_bytes()
        )
    });
    match result {
        Ok(_) => Ran::Done,
        Err(DispatchError::Cancelled) => Ran::Other(Outcome::Faulted),
        Err(DispatchError::Wave {
            error: ExecError::Memory { .. },
            ..
        }) => {
            let fault = mem
                .fault
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            // No recorded fault: the queue went away under the access.
            if let Some(f) = fault {
                vm_fault(drv, w, &f);
            }
            Ran::Other(Outcome::Faulted)
        }
        Err(e @ DispatchError::Wave { .. }) => {
            if matches!(
                e,
                DispatchError::Wave {
                    error: ExecError::Unimplemented { .. },
                    ..
                }
            ) {
                crate::own::elog!(
                    "kfd-emu: [{}] gpu {:#x} queue {}: {what} stopped: {e}",
                    w.tgid,
                    w.gpu_id,
                    w.id
                );
            }
            Ran::Other(Outcome::Stop(Stopped::QueueError(ILLEGAL_INSTRUCTION)))
        }
        // (Not reached: the first-level trap handler takes every trap.)
        Err(DispatchError::Trap { .. }) => Ran::Other(Outcome::Stop(Stopped::QueueError(TRAP))),
        Err(DispatchError::Scratch { .. }) => Ran::Scratch,
        // Sizes were checked before; LDS over 64 KiB on a GPU whose node says more is what
        // the CP calls invalid group memory.
        Err(DispatchError::Invalid(_)) => Ran::Other(Outcome::Stop(Stopped::QueueError(
            queue_error::GROUP_SEGMENT_INVALID,
        ))),
    }
}

/// gfx9 SH registers (dword offsets, `gc_9_0_offset.h`'s `mmCOMPUTE_*`) a PM4 dispatch reads.
mod reg {
    pub const START_X: u32 = 0x2E04;
    pub const NUM_THREAD_X: u32 = 0x2E07;
    pub const PGM_LO: u32 = 0x2E0C;
    pub const PGM_HI: u32 = 0x2E0D;
    pub const DISPATCH_SCRATCH_BASE_LO: u32 = 0x2E10;
    pub const DISPATCH_SCRATCH_BASE_HI: u32 = 0x2E11;
    pub const PGM_RSRC1: u32 = 0x2E12;
    pub const PGM_RSRC2: u32 = 0x2E13;
    pub const TMPRING_SIZE: u32 = 0x2E18;
    pub const PGM_RSRC3: u32 = 0x2E28;
    pub const USER_DATA_0: u32 = 0x2E40;
}

/// `COMPUTE_DISPATCH_INITIATOR` bits: `FORCE_START_AT_000`, `USE_THREAD_DIMENSIONS`.
const FORCE_START_AT_000: u32 = 1 << 2;
const USE_THREAD_DIMENSIONS: u32 = 1 << 5;
/// `COMPUTE_DISPATCH_INITIATOR.CS_W32_EN` (gfx10+, bit 15; amdgpu's `gc_11_0_0_sh_mask.h`).
const CS_W32_EN: u32 = 1 << 15;

/// Runs a PM4 `DISPATCH_DIRECT` (`body`: DIM_X, DIM_Y, DIM_Z, DISPATCH_INITIATOR) of queue `w`
/// from the SH registers `regs` the queue set (`SET_SH_REG`), as the CP starts one: the entry
/// `COMPUTE_PGM_HI:LO << 8`, `COMPUTE_PGM_RSRC1/2/3`, the user SGPRs from
/// `COMPUTE_USER_DATA_0..15`, the workgroup size from `COMPUTE_NUM_THREAD_X/Y/Z` (bits 0–15),
/// the grid in work-items when the initiator's `USE_THREAD_DIMENSIONS` is set, else in
/// workgroups; LDS from RSRC2's `LDS_SIZE`; scratch from `COMPUTE_TMPRING_SIZE` (slots and
/// slot size) at `COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI` on gfx940+ (tinygrad's
/// `AMDComputeQueue` sets it), else at the process's scratch backing address
/// (SET_SCRATCH_BACKING_VA, the `SH_HIDDEN_PRIVATE_BASE_VMID` the kernel programs). A zero
/// `COMPUTE_NUM_THREAD_*` (never set) or a descriptor the interpreter cannot run stops the
/// queue ([`Stopped::CannotDispatch`]); a zero dimension runs nothing. Where it differs: a
/// non-zero `COMPUTE_START_X/Y/Z` without `FORCE_START_AT_000` is refused too.
pub(super) fn run_pm4(
    drv: &Driver,
    w: &Work,
    regs: &std::collections::BTreeMap<u32, u32>,
    header: u32,
    body: &[u32],
) -> Outcome {
    let reg = |r: u32| regs.get(&r).copied().unwrap_or(0);
    let gpu = &drv.dev.cfg.machine.gpus()[w.gpu];
    let (Some(target), &[dx, dy, dz, initiator, ..]) = (target(gpu.target), body) else {
        return Outcome::Stop(Stopped::CannotDispatch(header));
    };
    let rsrc = [reg::PGM_RSRC1, reg::PGM_RSRC2, reg::PGM_RSRC3].map(reg);
    // gfx10+: the initiator's CS_W32_EN makes the waves wave32 (kfdtest's `Dispatch::
    // BuildIb` sets it for every gfx10+ dispatch); a gfx9 GPU has no such bit (wave64).
    let wave32 = target.is_gfx11() && initiator & CS_W32_EN != 0;
    let Ok(kd) = KernelDescriptor::from_registers_for(target, rsrc, wave32) else {
        return Outcome::Stop(Stopped::CannotDispatch(header));
    };
    let start = [0, 1, 2].map(|i| reg(reg::START_X + i));
    if initiator & FORCE_START_AT_000 == 0 && start != [0; 3] {
        return Outcome::Stop(Stopped::CannotDispatch(header));
    }
    let workgroup = [0, 1, 2].map(|i| reg(reg::NUM_THREAD_X + i) & 0xFFFF);
    let dims = [dx, dy, dz];
    let grid: [u32; 3] = if initiator & USE_THREAD_DIMENSIONS != 0 {
        dims
    } else {
        std::array::from_fn(|i| dims[i].saturating_mul(workgroup[i]))
    };
    let tmpring = reg(reg::TMPRING_SIZE);
    let wave_bytes = u64::from(tmpring >> 12 & 0x1FFF) * 1024;
    // COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (the address >> 8; gfx940+, which tinygrad's
    // AMD backend sets per dispatch), else the process's scratch backing address.
    let dispatch_base = (u64::from(reg(reg::DISPATCH_SCRATCH_BASE_LO))
        | u64::from(reg(reg::DISPATCH_SCRATCH_BASE_HI)) << 32)
        << 8;
    let scratch_base = if dispatch_base != 0 && target == Target::Gfx942 {
        dispatch_base
    } else {
        let st = drv.lock();
        st.procs
            .get(&w.tgid)
            .and_then(|p| p.pdds.iter().find(|p| p.gpu_id == w.gpu_id))
            .map_or(0, |p| p.scratch_va)
    };
    let apertures = gpu.apertures();
    let d = Dispatch {
        target,
        kd,
        entry: (u64::from(reg(reg::PGM_LO)) | u64::from(reg(reg::PGM_HI) & 0xFF) << 32) << 8,
        grid,
        workgroup,
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        // What a wave's slot holds per lane: the kernel gets as much as the queue gave.
        private_segment_size: (wave_bytes / kd.lanes() as u64) as u32,
        group_segment_size: kd.lds_size(),
        scratch: Scratch {
            srd: [0; 4],
            base: scratch_base,
            wave_bytes,
            slots: tmpring & 0xFFF,
        },
        apertures: Apertures {
            shared_base: apertures.lds_base,
            private_base: apertures.scratch_base,
            ..Apertures::default()
        },
        user_data: Some(std::array::from_fn(|i| reg(reg::USER_DATA_0 + i as u32))),
    };
    if workgroup.contains(&0) {
        // No threads per group (COMPUTE_NUM_THREAD_* never set): nothing the SPI can form.
        return Outcome::Stop(Stopped::CannotDispatch(header));
    }
    if grid.contains(&0) {
        // A zero dimension dispatches no workgroup.
        return Outcome::Done;
    }
    match execute(drv, w, &d, "DISPATCH_DIRECT", Vec::new()) {
        Ran::Done => Outcome::Done,
        // The queue's TMPRING_SIZE gives too little: the CP has no one to ask.
        Ran::Scratch => Outcome::Stop(Stopped::CannotDispatch(header)),
        Ran::Other(o) => o,
    }
}

/// The value of the queue's `queue_inactive_signal`, `None` when it has none.
fn inactive_signal_value(drv: &Driver, w: &Work, queue: u64) -> Result<Option<u64>, GpuFault> {
    let mut b = [0u8; 8];
    drv.read_here(
        w.tgid,
        w.gpu_id,
        queue + queue_error::QUEUE_INACTIVE_SIGNAL,
        &mut b,
    )?;
    let signal = u64::from_le_bytes(b);
    if signal == 0 {
        return Ok(None);
    }
    drv.read_here(w.tgid, w.gpu_id, signal + queue_error::SIGNAL_VALUE, &mut b)?;
    Ok(Some(u64::from_le_bytes(b)))
}

/// Asks the runtime for scratch (module docs): code 1 in `queue_inactive_signal` when it
/// holds 0, then waits for the runtime to store 0 again.
fn scratch_request(drv: &Driver, w: &Work, queue: u64, code: u32) -> Result<Outcome, GpuFault> {
    let mut b = [0u8; 8];
    drv.read_here(
        w.tgid,
        w.gpu_id,
        queue + queue_error::QUEUE_INACTIVE_SIGNAL,
        &mut b,
    )?;
    let signal = u64::from_le_bytes(b);
    if signal == 0 {
        return Ok(Outcome::Stop(Stopped::QueueError(code)));
    }
    drv.read_here(w.tgid, w.gpu_id, signal + queue_error::SIGNAL_VALUE, &mut b)?;
    if u64::from_le_bytes(b) == 0 {
        trace(drv, w, &|| {
            "KERNEL_DISPATCH needs scratch: asks the runtime (code 1)".into()
        });
        if let Some(event) = queue_error::report(drv, w.tgid, w.gpu_id, w.rptr_va, code)? {
            signal_interrupt(drv, w.tgid, event);
        }
    }
    Ok(Outcome::Wait)
}

fn trace(drv: &Driver, w: &Work, what: &dyn Fn() -> String) {
    if drv.dev.cfg.trace {
        crate::own::elog!(
            "[{}] aql gpu {:#x} queue {}: {}",
            w.tgid,
            w.gpu_id,
            w.id,
            what()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::atomics_lock;
    use std::sync::Arc;
    use std::time::Duration;

    /// A window access of any length at any alignment (the qword middle of a long one, the
    /// bytes around it) reads and writes exactly its bytes.
    #[test]
    fn window_loads_and_stores_move_exactly_their_bytes_at_any_alignment() {
        let pattern: Vec<u8> = (0..96u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for at in 0..16 {
            for len in 0..64 {
                let mut mem = vec![0u8; 96];
                let data = &pattern[..len];
                // SAFETY: `at + len <= 80` lies in `mem`, which nothing else touches.
                unsafe { super::store(mem.as_mut_ptr().add(at), data) };
                assert_eq!(&mem[at..at + len], data, "store of {len} at {at}");
                assert!(
                    mem[..at].iter().chain(&mem[at + len..]).all(|&b| b == 0),
                    "store of {len} at {at} wrote around it"
                );
                let mut buf = vec![0xeeu8; len];
                // SAFETY: as above.
                unsafe { super::load(pattern.as_ptr().add(at), &mut buf) };
                assert_eq!(buf, pattern[at..at + len], "load of {len} at {at}");
            }
        }
    }

    /// A process's GPU atomic blocked inside its lock (on a page its program does not serve)
    /// leaves another process's atomics free, while the same process's wait for it.
    #[test]
    fn a_blocked_atomic_stalls_only_its_own_process() {
        let a = atomics_lock(4_000_001);
        let b = atomics_lock(4_000_002);
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&a, &atomics_lock(4_000_001)));
        let held = a.lock().unwrap();
        let other = std::thread::spawn(move || {
            let _g = b.lock().unwrap();
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = other.join();
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(30)).is_ok(),
            "another process's atomic waited for this one's"
        );
        assert!(atomics_lock(4_000_001).try_lock().is_err());
        drop(held);
    }
}
