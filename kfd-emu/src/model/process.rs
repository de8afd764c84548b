//! KFD processes and their per-GPU data (the kernel's `kfd_process` and
//! `kfd_process_device`), the model's global state, and process teardown.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::io::Errno;

use super::events::EventTable;
use super::files::{self, FileKey};
use super::memory::Accounts;
use super::objects::{Backing, Bo, Dmabuf, DrmFile, Store, Userptrs, remote_read, remote_write};
use super::offsets::VmaSpace;
use super::queues::Queues;
use super::smi::Smi;
use super::svm::ranges::Svm;
use super::vm::{Mapping, Vm};
use crate::machine::{ApertureLayout, Machine};

/// Where the event signal page is in a process's `/dev/kfd` memfd.
pub(super) const EVENT_PAGE_OFFSET: u64 = 0x1_0000;
/// Its size: `KFD_SIGNAL_EVENT_LIMIT` 8-byte slots.
pub(super) const EVENT_PAGE_SIZE: u64 = 4096 * 8;
/// Where GPU `i`'s doorbell slice starts in the memfd: `GPU_SLOTS + i * GPU_SLOT_SIZE`.
const GPU_SLOTS: u64 = 0x2_0000;
const GPU_SLOT_SIZE: u64 = 0x1_0000;
/// The MMIO-remap page, within a GPU's slot (after the doorbell slice).
const MMIO_IN_SLOT: u64 = 0x4000;
/// The two CWSR pages of `KFD_MMAP_TYPE_RESERVED_MEM`, within a GPU's slot.
const RESERVED_IN_SLOT: u64 = 0x8000;

/// The name of a process's `/dev/kfd` memfd.
pub(super) const KFD_MEMFD_NAME: &str = "kfd";

/// The model's state: every KFD process and the device-wide memory bookkeeping.
#[derive(Debug)]
pub(super) struct State {
    pub procs: HashMap<i32, Process>,
    /// The serial the next process gets.
    pub serial: u64,
    pub acc: Accounts,
    /// Per GPU (DRM device): the vma offset manager of its GEM objects.
    pub vma: Vec<VmaSpace>,
    pub backings: HashMap<u64, Backing>,
    pub next_backing: u64,
    pub dmabufs: HashMap<u64, Dmabuf>,
    pub next_dmabuf: u64,
    /// The SMI event clients of every GPU.
    pub smi: Smi,
    /// Per GPU: bytes of VRAM holding migrated SVM pages.
    pub svm_vram: Vec<u64>,
    /// The render-node stand-ins each process opened, released (unregistered) when it exits.
    pub render_files: HashMap<i32, Vec<FileKey>>,
    /// The GEM side of each DRM file that used it (handles, VA mappings, contexts), by the
    /// stand-in's identity; released with the file's process (`release_drm_files`).
    pub drm_files: HashMap<FileKey, DrmFile>,
    /// The VRAM managers' LRU clock: the stamp the next validated object gets (`evict`).
    pub lru: u64,
    /// The shared mappings of BO memfds the copy engines made, by backing
    /// ([`bo_maps`](super::bo_maps)); each dropped with its backing's last reference.
    pub bo_maps: HashMap<u64, Arc<super::bo_maps::BoMap>>,
}

impl State {
    pub(super) fn new(gpus: usize) -> State {
        State {
            procs: HashMap::new(),
            serial: 1,
            acc: Accounts::new(gpus),
            vma: (0..gpus).map(|_| VmaSpace::new()).collect(),
            backings: HashMap::new(),
            next_backing: 1,
            dmabufs: HashMap::new(),
            next_dmabuf: 1,
            smi: Smi::default(),
            svm_vram: vec![0; gpus],
            render_files: HashMap::new(),
            drm_files: HashMap::new(),
            lru: 1,
            bo_maps: HashMap::new(),
        }
    }

    /// The live process behind a `/dev/kfd` stand-in; `EBADF` when it is gone.
    pub(super) fn process(&mut self, tgid: i32, serial: u64) -> Result<&mut Process, Errno> {
        match self.procs.get_mut(&tgid) {
            Some(p) if p.serial == serial => Ok(p),
            _ => Err(Errno::BADF),
        }
    }
}

/// A KFD process.
#[derive(Debug)]
pub(super) struct Process {
    pub tgid: i32,
    pub serial: u64,
    /// The `/dev/kfd` stand-in.
    pub memfd: Arc<OwnedFd>,
    /// Its doorbell slices mapped into the emulator (`doorbells`), made at its first
    /// CREATE_QUEUE; `None` before, or if the host refused.
    pub doorbells: Option<Arc<super::doorbells::DoorbellMap>>,
    pub key: FileKey,
    /// One per GPU of the machine, in machine order (`kfd_process_device`).
    pub pdds: Vec<Pdd>,
    pub events: EventTable,
    /// RUNTIME_ENABLE state.
    pub runtime_enabled: bool,
    pub r_debug: u64,
    pub ttmp_setup: bool,
    /// The debugger's view of it (`debug`).
    pub debug: DebugState,
    /// XNACK (retry faults) mode.
    pub xnack: bool,
    /// The handle of the BO given as the event page, which FREE refuses.
    pub signal_handle: Option<u64>,
    /// SVM ranges.
    pub svm: Svm,
    /// Its USERPTR BOs' invalidations.
    pub userptrs: Userptrs,
    /// User-mode queues.
    pub queues: Queues,
    /// TTM evicted one of its BOs: its eviction fence signalled, its queues are evicted
    /// (`kfd_process_evict_queues`, trigger TTM) and its restore worker is pending
    /// (`evict`).
    pub ttm_evicted: bool,
}

/// A process's view of one GPU.
#[derive(Debug)]
pub(super) struct Pdd {
    /// The GPU index in the machine.
    pub gpu: usize,
    pub gpu_id: u32,
    /// The DRM file given to ACQUIRE_VM (the same open file the caller has).
    pub drm: Option<OwnedFd>,
    /// The identity of that file's stand-in (the render-node open the VM is), which mappings
    /// through the render node are checked against.
    pub drm_key: Option<FileKey>,
    /// Buffer objects by idr id (the low 32 bits of the handle).
    pub bos: BTreeMap<u32, Bo>,
    pub vm: Vm,
    pub scratch_va: u64,
    pub tba: u64,
    pub tma: u64,
    pub default_policy: u32,
    pub alternate_policy: u32,
    pub misc_process_flag: u32,
    /// VRAM bytes this process allocated on the GPU (`/sys/.../proc/<pid>/vram_<gpuid>`).
    pub vram_usage: u64,
    /// The VM's task info (`amdgpu_task_info`): the thread id and name of who set the VM up
    /// at ACQUIRE_VM, which VM-fault and process SMI records name.
    pub task: Option<(i32, String)>,
    /// The process's queues on this GPU were evicted for a VM fault (`qpd->evicted` raised by
    /// `kfd_dqm_evict_pasid` → `evict_process_queues_cpsch` in
    /// `kfd_device_queue_manager.c`, from `event_interrupt_wq_v9`'s VM-fault branch). Nothing
    /// gives that count back: `restore_process_queues_cpsch` only undoes the evictions of
    /// `kfd_process_evict_queues` (the BO and USERPTR restore workers), each of which takes
    /// one more count first. So from the fault until the process exits its queues on the GPU
    /// stay evicted, and `create_queue_cpsch` makes every later one there evicted too
    /// (`q->properties.is_evicted = !!qpd->evicted`, so `QUEUE_IS_ACTIVE` is false and the
    /// HWS never maps it). Per GPU: `kfd_dqm_evict_pasid` takes the faulting device's pdd.
    pub fault_evicted: bool,
    /// GWS entries the process's queue on this GPU holds (`qpd->num_gws`: the device's
    /// `gws_size` while one of its queues has GWS, else 0; `pqm_set_gws`).
    pub num_gws: u32,
    /// `pdd->exception_status`: the device exceptions raised for the debugger
    /// (`KFD_EC_MASK_DEVICE` bits, `kfd_dbg_ev_raise`).
    pub exception_status: u64,
    /// `pdd->vm_fault_exc_data`: the `kfd_hsa_memory_exception_data` of the first VM fault
    /// raised to the debugger and not yet cleared (QUERY_EXCEPTION_INFO copies it out).
    pub vm_fault_exc_data: Option<Vec<u8>>,
    /// `pdd->alloc_watch_ids`: the GPU's address watch points (of 4) this process holds; the
    /// GPU's own mask (`dev->alloc_watch_ids`) is every process's together.
    pub watch_ids: u32,
}

impl Pdd {
    /// Whether ACQUIRE_VM was done (`kfd_bind_process_to_device` succeeds).
    pub(super) fn bound(&self) -> Result<(), Errno> {
        if self.drm.is_some() {
            Ok(())
        } else {
            Err(Errno::NODEV)
        }
    }

    /// The lowest free idr id (the kernel's `idr_alloc(..., 0, 0)`).
    pub(super) fn free_id(&self) -> Option<u32> {
        let mut expected = 0u32;
        for &id in self.bos.keys() {
            if id != expected {
                return Some(expected);
            }
            expected = expected.checked_add(1)?;
        }
        (expected <= i32::MAX as u32).then_some(expected)
    }
}

/// The handle of BO `id` on the GPU `gpu_id`.
pub(super) fn make_handle(gpu_id: u32, id: u32) -> u64 {
    (u64::from(gpu_id) << 32) | u64::from(id)
}

impl Process {
    /// Creates the KFD process of `tgid` (`kfd_create_process`): a pdd for every GPU.
    pub(super) fn create(tgid: i32, st: &mut State, machine: &Machine) -> Result<Process, Errno> {
        let gpus = machine.gpus();
        let size = GPU_SLOTS + GPU_SLOT_SIZE * gpus.len() as u64;
        let memfd = files::memfd(KFD_MEMFD_NAME, size).map_err(|e| {
            e.raw_os_error()
                .map_or(Errno::NOMEM, Errno::from_raw_os_error)
        })?;
        // Every event slot starts unsignaled (all ones).
        files::write_at(
            memfd.as_fd(),
            EVENT_PAGE_OFFSET,
            &[0xFF; EVENT_PAGE_SIZE as usize],
        )?;
        let key = files::key_of(memfd.as_fd())?;
        let memfd = Arc::new(memfd);
        let serial = st.serial;
        st.serial += 1;
        Ok(Process {
            tgid,
            serial,
            memfd,
            doorbells: None,
            key,
            pdds: gpus
                .iter()
                .enumerate()
                .map(|(gpu, g)| Pdd {
                    gpu,
                    gpu_id: g.gpu_id,
                    drm: None,
                    drm_key: None,
                    bos: BTreeMap::new(),
                    vm: Vm::default(),
                    scratch_va: 0,
                    tba: 0,
                    tma: 0,
                    default_policy: 0,
                    alternate_policy: 0,
                    misc_process_flag: 0,
                    vram_usage: 0,
                    task: None,
                    fault_evicted: false,
                    num_gws: 0,
                    exception_status: 0,
                    vm_fault_exc_data: None,
                    watch_ids: 0,
                })
                .collect(),
            events: EventTable::new(),
            runtime_enabled: false,
            r_debug: 0,
            ttmp_setup: false,
            debug: Default::default(),
            // create_process: `kfd_process_xnack_mode(process, false)`, the mode every GPU
            // can run in as booted (off on every preset: they boot with `noretry`).
            xnack: machine.xnack_mode(false),
            signal_handle: None,
            svm: Svm::default(),
            userptrs: Userptrs::default(),
            queues: Queues::default(),
            ttm_evicted: false,
        })
    }

    /// The pdd of `gpu_id` (`kfd_process_device_data_by_id`).
    pub(super) fn pdd(&mut self, gpu_id: u32) -> Result<&mut Pdd, Errno> {
        if gpu_id == 0 {
            return Err(Errno::INVAL);
        }
        self.pdds
            .iter_mut()
            .find(|p| p.gpu_id == gpu_id)
            .ok_or(Errno::INVAL)
    }

    /// The doorbell slice of GPU index `gpu` in the memfd.
    pub(super) fn doorbell_offset(gpu: usize) -> u64 {
        GPU_SLOTS + GPU_SLOT_SIZE * gpu as u64
    }

    /// The MMIO-remap page of GPU index `gpu` in the memfd.
    pub(super) fn mmio_offset(gpu: usize) -> u64 {
        Self::doorbell_offset(gpu) + MMIO_IN_SLOT
    }

    /// The CWSR (`RESERVED_MEM`) pages of GPU index `gpu` in the memfd.
    pub(super) fn reserved_offset(gpu: usize) -> u64 {
        Self::doorbell_offset(gpu) + RESERVED_IN_SLOT
    }
}

/// The process doorbell slice size (`kfd_doorbell_process_slice`): 1024 doorbells of 8 bytes
/// on SOC15 (GFX9+), of 4 bytes before.
pub(super) fn doorbell_slice(layout: ApertureLayout) -> u64 {
    match layout {
        ApertureLayout::Vi => 4096,
        ApertureLayout::V9 | ApertureLayout::V12 => 8192,
    }
}

impl State {
    /// Registers a new backing with one reference.
    pub(super) fn add_backing(&mut self, backing: Backing) -> u64 {
        let id = self.next_backing;
        self.next_backing += 1;
        self.backings.insert(id, backing);
        id
    }

    /// Drops one reference to backing `id`; the last gives the memory and its charge back.
    pub(super) fn put_backing(&mut self, id: u64) {
        let Some(backing) = self.backings.get_mut(&id) else {
            return;
        };
        backing.refs = backing.refs.saturating_sub(1);
        if backing.refs > 0 {
            return;
        }
        let Some(backing) = self.backings.remove(&id) else {
            return;
        };
        self.acc.unreserve(backing.gpu, backing.charge);
        // An engine copying now keeps its own reference: the map goes when that copy ends.
        self.bo_maps.remove(&id);
        for (gpu, start) in backing.offsets {
            self.vma[gpu].remove(start);
        }
        // The memfd closes with the last holder: a mapping or a dma-buf fd a program still
        // has keeps its pages, as the kernel's keep a reference on the GEM object.
    }

    /// The process memory behind `offset` of backing `id` (`(tgid, address)`) when it is a
    /// USERPTR BO; `None` when the model keeps the bytes itself.
    pub(super) fn backing_user(&self, id: u64, offset: u64) -> Result<Option<(i32, u64)>, Errno> {
        let backing = self.backings.get(&id).ok_or(Errno::FAULT)?;
        match &backing.store {
            &Store::UserPtr { tgid, addr } => {
                Ok(Some((tgid, addr.checked_add(offset).ok_or(Errno::FAULT)?)))
            }
            Store::Memfd(_) | Store::Kfd { .. } => Ok(None),
        }
    }

    /// The VM of a DRM file is one VM: when the file `key` is a process's KFD VM
    /// (ACQUIRE_VM), its GEM_VA mappings are in that VM too, next to KFD's (which MAP then
    /// sees, and the GPU reaches). Sets them there from the file's record (`DrmFile::va`).
    pub(super) fn mirror_gem_va(&mut self, key: FileKey) {
        /// `AMDGPU_VM_PAGE_WRITEABLE`.
        const WRITEABLE: u32 = 0x4;
        let maps: Vec<(u64, Mapping)> = match self.drm_files.get(&key) {
            Some(f) => {
                f.va.iter()
                    .map(|(&start, m)| {
                        let mapping = Mapping {
                            end: m.end,
                            backing: m.backing,
                            offset: m.offset,
                            writable: m.flags & WRITEABLE != 0,
                            handle: f.handle_of(m.backing).map_or(0, u64::from),
                        };
                        (start, mapping)
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        for p in self.procs.values_mut() {
            for pdd in p.pdds.iter_mut().filter(|pdd| pdd.drm_key == Some(key)) {
                pdd.vm.retain(|_, m| !m.is_gem());
                for &(start, m) in &maps {
                    pdd.vm.insert(start, m);
                }
            }
        }
    }

    /// Reads `buf.len()` bytes at `offset` of backing `id`.
    pub(super) fn backing_read(&self, id: u64, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let backing = self.backings.get(&id).ok_or(Errno::FAULT)?;
        match &backing.store {
            Store::Memfd(fd) => files::read_at(fd.as_fd(), offset, buf),
            &Store::Kfd { tgid, offset: base } => {
                let process = self.procs.get(&tgid).ok_or(Errno::FAULT)?;
                files::read_at(process.memfd.as_fd(), base + offset, buf)
            }
            &Store::UserPtr { tgid, addr } => {
                remote_read(tgid, addr.checked_add(offset).ok_or(Errno::FAULT)?, buf)
            }
        }
    }

    /// Writes `buf` at `offset` of backing `id`.
    pub(super) fn backing_write(&self, id: u64, offset: u64, buf: &[u8]) -> Result<(), Errno> {
        let backing = self.backings.get(&id).ok_or(Errno::FAULT)?;
        match &backing.store {
            Store::Memfd(fd) => files::write_at(fd.as_fd(), offset, buf),
            &Store::Kfd { tgid, offset: base } => {
                let process = self.procs.get(&tgid).ok_or(Errno::FAULT)?;
                files::write_at(process.memfd.as_fd(), base + offset, buf)
            }
            &Store::UserPtr { tgid, addr } => {
                remote_write(tgid, addr.checked_add(offset).ok_or(Errno::FAULT)?, buf)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kfd_ioctl::abi::AllocMemFlags;

    use super::super::memory::{Charge, Limits};
    use super::super::objects::Domain;
    use super::*;

    /// The state layer on its own, with no model, driver or caller: a backing shared by two
    /// references keeps its bytes and its charge until the last one goes.
    #[test]
    fn a_backing_lives_until_its_last_reference_with_the_state_alone() {
        const VRAM: u64 = 1 << 40;
        let mut st = State::new(1);
        let limits = Limits::of_host();
        let charge = Charge::on(AllocMemFlags::VRAM, 4096, false).expect("charge");
        let free = st.acc.available(&limits, 0, VRAM);
        st.acc.reserve(&limits, 0, VRAM, charge).expect("reserve");
        let charged = st.acc.available(&limits, 0, VRAM);
        assert!(charged < free);
        let fd = files::memfd("state-test", 4096).expect("memfd");
        let id = st.add_backing(Backing {
            refs: 2,
            store: Store::Memfd(Arc::new(fd)),
            size: 4096,
            gpu: 0,
            domain: Domain::Vram,
            cpu_access: false,
            charge,
            offsets: Vec::new(),
            gem: Default::default(),
            placed: Default::default(),
        });
        st.backing_write(id, 8, b"ping").expect("write");
        st.put_backing(id);
        let mut back = [0u8; 4];
        st.backing_read(id, 8, &mut back)
            .expect("one reference left");
        assert_eq!(&back, b"ping");
        assert_eq!(st.acc.available(&limits, 0, VRAM), charged);
        st.put_backing(id);
        assert_eq!(st.backing_read(id, 8, &mut back), Err(Errno::FAULT));
        assert_eq!(st.acc.available(&limits, 0, VRAM), free);
    }
}

/// A process's debugging state (the `kfd_process` fields `kfd_debug.c` uses; the `debug`
/// module runs it).
#[derive(Debug, Default)]
pub(super) struct DebugState {
    /// `debug_trap_enabled`.
    pub enabled: bool,
    /// `dbg_ev_file`: the debugger's file, written one byte per subscribed event.
    pub ev_file: Option<Arc<OwnedFd>>,
    /// `exception_enable_mask`: what the debugger is told of.
    pub exception_enable_mask: u64,
    /// `exception_status` of the process (its `KFD_EC_MASK_PROCESS` bits).
    pub exception_status: u64,
    /// `runtime_enable_sema`'s count: SEND_RUNTIME_EVENT answers not yet taken.
    pub sema: u32,
    /// `is_runtime_retry`: a runtime enable or disable whose wait was interrupted.
    pub runtime_retry: bool,
    /// The wave launch mode last set.
    pub wave_launch_mode: u32,
    /// The trap mask (`SPI_GDBG_TRAP_MASK.EXCP_EN`, or the VMID's on GC 9.4.2 and later) the
    /// wave launch override set.
    pub trap_mask: u32,
    /// `dbg_flags` (SET_FLAGS: `KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP`).
    pub flags: u32,
}
