//! KFD processes and their per-GPU data (the kernel's `kfd_process` and
//! `kfd_process_device`), the model's global state, and process teardown.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rustix::io::Errno;

use super::driver::Driver;
use super::events::EventTable;
use super::files::{self, FileKey};
use super::memory::Accounts;
use super::objects::{Backing, Bo, Dmabuf};
use super::offsets::VmaSpace;
use super::smi::{Event, Smi};
use super::svm::{self, Svm};
use super::vm::Vm;
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
    pub key: FileKey,
    /// One per GPU of the machine, in machine order (`kfd_process_device`).
    pub pdds: Vec<Pdd>,
    pub events: EventTable,
    /// RUNTIME_ENABLE state.
    pub runtime_enabled: bool,
    pub r_debug: u64,
    pub ttmp_setup: bool,
    /// XNACK (retry faults) mode.
    pub xnack: bool,
    /// The handle of the BO given as the event page, which FREE refuses.
    pub signal_handle: Option<u64>,
    /// SVM ranges.
    pub svm: Svm,
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
                })
                .collect(),
            events: EventTable::new(),
            runtime_enabled: false,
            r_debug: 0,
            ttmp_setup: false,
            // The default mode: no GPU of the presets has retry faults on by default
            // (`amdgpu.noretry=1`).
            xnack: false,
            signal_handle: None,
            svm: Svm::default(),
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

/// A process went away: report what it left behind (with `check_leaks`), then release it all
/// as the kernel does when the last reference to the process goes.
pub(super) fn teardown(model: &Driver, tgid: i32) {
    let mut st = model.lock();
    let Some(mut process) = st.procs.remove(&tgid) else {
        return;
    };
    if model.dev.cfg.check_leaks
        && let Some(report) = leak_report(&process, model)
    {
        eprint!("{report}");
        model.leaks.store(true, Ordering::Relaxed);
    }
    for pdd in &mut process.pdds {
        let bos = std::mem::take(&mut pdd.bos);
        for bo in bos.into_values() {
            if !bo.imported && bo.flags & kfd_ioctl::abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM != 0 {
                pdd.vram_usage = pdd.vram_usage.saturating_sub(bo.size);
            }
            st.put_backing(bo.backing);
            st.handle_dropped(bo.backing, pdd.gpu);
        }
    }
    svm::teardown(model, &mut st, &mut process);
    // The process's own SMI fds closed when it exited; the others see it go.
    st.smi.release(tgid);
    for (gpu, pdd) in process.pdds.iter().enumerate() {
        if let Some((task_pid, comm)) = &pdd.task {
            st.smi.emit(
                model.dev.cfg.kfd_minor,
                gpu,
                &Event::Process {
                    start: false,
                    task_pid: *task_pid,
                    comm,
                },
            );
        }
    }
    let exported: Vec<u64> = st
        .dmabufs
        .iter()
        .filter(|(_, d)| d.exporter == tgid)
        .map(|(&id, _)| id)
        .collect();
    for id in exported {
        if let Some(dmabuf) = st.dmabufs.remove(&id) {
            model.unregister(&dmabuf.key);
            st.put_backing(dmabuf.backing);
        }
    }
    drop(st);
    // The stand-in is released from the file table; a forked child still holding the fd is
    // told from its memfd name and gets EBADF, as from the kernel (`released_kind`).
    model.unregister(&process.key);
    // Waiters of the process see their events gone.
    model.wake.notify_all();
}

/// What a process left behind, or `None` when it cleaned up.
fn leak_report(process: &Process, model: &Driver) -> Option<String> {
    let mut out = String::new();
    for pdd in &process.pdds {
        for (&id, bo) in &pdd.bos {
            let handle = make_handle(pdd.gpu_id, id);
            if Some(handle) == process.signal_handle {
                // The event page: the kernel frees it at teardown and refuses FREE before.
                continue;
            }
            let mapped: Vec<String> = bo
                .mapped
                .iter()
                .map(|&g| format!("{:#x}", model.dev.cfg.machine.gpus()[g].gpu_id))
                .collect();
            let _ = writeln!(
                out,
                "  buffer object handle={handle:#x} va={:#x} size={} flags={}{}{}",
                bo.va,
                bo.size,
                super::trace::alloc_flags(bo.flags),
                if bo.imported { " (imported)" } else { "" },
                if mapped.is_empty() {
                    String::new()
                } else {
                    format!(", still mapped on {}", mapped.join(", "))
                }
            );
        }
        for (start, m) in pdd.vm.iter() {
            let _ = writeln!(
                out,
                "  mapping gpu_id={:#x} va={start:#x}..{:#x} handle={:#x}",
                pdd.gpu_id, m.end, m.handle
            );
        }
        if pdd.vram_usage > 0 {
            let _ = writeln!(
                out,
                "  {} MiB of VRAM still allocated on gpu_id={:#x}",
                pdd.vram_usage.div_ceil(1 << 20),
                pdd.gpu_id
            );
        }
    }
    for event in process.events.live() {
        let _ = writeln!(out, "  {event}");
    }
    (!out.is_empty()).then(|| {
        format!(
            "kfd-emu: process {} exited with live KFD objects:\n{out}",
            process.tgid
        )
    })
}
