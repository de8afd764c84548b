//! The model of the KFD driver: processes, GPU VMs, buffer objects, events and the rest of the
//! `/dev/kfd` ioctl interface, with the kernel's validation order and errnos
//! (`shared/ref/kfd-abi.md` §4).
//!
//! [`Model`] implements the supervisor's [`Backend`]: it decides which opens get a stand-in
//! file ([`Backend::open`]) and answers ioctls on those stand-ins ([`Backend::ioctl`]), reading
//! and writing the caller's memory through [`Caller`].
//!
//! # Layers
//!
//! The modules form layers, like the kernel's own split, and a module uses only modules of its
//! own layer or below; no module uses one that uses it back (`tests/tests/module_cycles.rs`
//! checks that there is no module cycle). From the bottom:
//!
//! 1. **Device** — read-only data of the machine (`kfd_node`/`adev`): `device` (the
//!    [`ModelConfig`] and the host's memory limits), with the machine itself in
//!    [`crate::machine`], and the leaves every layer uses: `memory` (page size, limits,
//!    accounting), `offsets` (the kernel's mmap offsets), `vmas` (a process's maps), `files`
//!    (stand-in memfds, the sysfs tree), `host` (clocks, capabilities), `fail` (armed faults),
//!    `trace` (the `--trace` printer: ioctl arguments, errnos and constants by their ABI names),
//!    `timing` (the timing model: link, fault, prefetch and SDMA costs, and the model's clock),
//!    `observe` (the SVM observer a tool may install: SET_ATTRs and XNACK modes), `bo_maps`
//!    (long-lived shared mappings of BO memfds, for the copy engines' bulk copies),
//!    `host_calls` (counts of the system calls GPU accesses make, for the tests).
//! 2. **State** — per-process data only, with no reference to the model or a caller, testable
//!    alone: `process` (`State`: the KFD processes, their GPU VMs, objects and accounts),
//!    `objects`, `vm`, `events` (the event table), `smi` (SMI clients and their records),
//!    `svm::ranges` (the SVM range tree), `queues` (a process's user queues, and the kick
//!    that wakes the copy engines), `doorbells` (the processes' doorbell slices mapped, and the
//!    watcher thread that turns a doorbell write into its queue's kick). `driver` puts the device, the state under its lock
//!    and the stand-in file table together (`Driver`), without calling any behaviour.
//! 3. **Kernel behaviour** — functions over the device, the state and their effects: `svm`
//!    (SET/GET, `svm::env` below `svm::migrate`, `svm::fault` and `svm::notify`), `addrspace`
//!    (the MMU notifiers of munmap, mremap, madvise, mprotect, brk, fork), `gpu_view` (accesses through
//!    a GPU's page tables), `mmap` (which pages a stand-in's offset maps), `evict` (TTM's
//!    VRAM placement and the eviction and restore of KFD processes), `teardown` (what a
//!    process leaves when it goes), `exceptions` (the debugger's and the runtime's
//!    queue, device and process exceptions), the GPU engines: `queue_error` (the error codes of AQL
//!    packets the CP refuses, reported in the queue's `queue_inactive_signal`) below `engine`
//!    (what they share: the queue run, a queue stopped, faults, event interrupts) below
//!    `sdma` (the copy engines' packets), `kernel` (kernel dispatches on the gfx9
//!    interpreter, over `trap_handler`: the first-level trap handlers and gfx11's SPI answers), `aql` (the AQL packet processor) and `pm4` (the
//!    compute CP's PM4 processor, which uses `sdma`'s compare functions), and `scheduler` on
//!    top (an engine thread per queue, in bounded turns, sharing no lock with another queue
//!    while it touches memory).
//! 4. **Chardev** — `chardev` (the ioctl context `Ctx` and argument access), the handlers
//!    (`handlers`, `memory_ioctls`, `event_ioctls`, `queue_ioctls`, `svm_ioctl`, `debug`: DBG_TRAP
//!    and RUNTIME_ENABLE's debugger hand-shake), `dispatch` (one ioctl
//!    table keyed by the ABI opcodes, with version checks and fault injection), `drm` (the
//!    render node's ioctls) over `cs_ioctls` (amdgpu's command submission) over
//!    `gem_ioctls` (amdgpu's GEM and PRIME ioctls);
//!    and on top `backend`: [`Model`], the [`Backend`] impl that owns the `Driver`, the sysfs
//!    tree and the GPU-view worker. Nothing imports `backend`; `mod.rs` only declares the
//!    modules and re-exports the public API.
//!
//! * `/dev/kfd` → a memfd per KFD process (one per thread group, as the kernel keeps one per
//!   `mm`). Its pages hold the event signal page and, per GPU, the doorbell slice, the
//!   MMIO-remap page and the CWSR pages; the ioctls return the kernel's offsets for them
//!   (`KFD_MMAP_TYPE_EVENTS`, `KFD_MMAP_TYPE_MMIO | KFD_MMAP_GPU_ID(gpu_id)`, ...), which
//!   [`Backend::mmap`] decodes as `kfd_mmap` does and redirects to those pages (`mmap`).
//! * Every VRAM or GTT buffer object → its own sealed memfd of its size. Its `mmap_offset` is
//!   the kernel's: a DRM vma-manager offset (from 4 GiB) of the GPU's render node, which
//!   [`Backend::mmap`] looks up and redirects to the BO's memfd (`mmap`). An import shares the
//!   exporter's memfd (and, on the same GPU, its offset), and EXPORT_DMABUF hands out a reopen
//!   of it, so a mapping of the dma-buf fd shows the BO's bytes natively.
//! * `/dev/dri/renderD<minor>` → a new empty memfd per open (a DRM file): `pread` and a
//!   native `mmap` see nothing. It answers the DRM ioctls (naming the GPU; amdgpu's GEM
//!   objects, whose handles are the file's and whose vma offsets map their memfds, PRIME,
//!   and command submission of NOP IBs: `gem_ioctls`) and can be given to ACQUIRE_VM.
//!   `/dev/dri/card<minor - 128>`, the GPU's primary node (`drm_minor_alloc` gives both
//!   minors one index), opens as the same kind of DRM file of the same GPU (as
//!   `amdgpu_file_to_fpriv` accepts either); only its `st_rdev` differs. Where it differs:
//!   no DRM master, mode-setting or primary-only ioctl is emulated.
//!
//!   Isolation: the memory of a BO is reachable only through its own memfd, which no process
//!   gets as an fd except as a dma-buf it exported or was given. A mapping through a render
//!   node is redirected only when the file is the DRM file of a process's GPU VM and that
//!   process holds a handle on the object (`drm_vma_node_is_allowed`, else `EACCES`), so a
//!   process maps nothing of another's VRAM, with or without `/dev/kfd`. This needs the
//!   supervisor to carry out [`Backend::mmap`]'s redirects; a program whose mmaps are not
//!   intercepted maps the empty stand-ins and gets `SIGBUS` on access.
//! * Every memfd the model hands out or maps (render nodes, `/dev/kfd`, BOs and their
//!   dma-bufs, `/proc/modules`) is sealed against resizing (`F_SEAL_SHRINK | F_SEAL_GROW`), so
//!   no mapping can be cut short into a `SIGBUS`; on top of that the supervisor answers
//!   `ftruncate` and `fallocate` of a stand-in ([`Backend::is_standin`]) as the kernel answers
//!   them for a device file (`EINVAL`; `ENODEV`), and `fstat` of `/dev/kfd` or a render node
//!   ([`Backend::fstat`]) as the device file's (`S_IFCHR`, its `st_rdev`).
//! * The file table (stand-in inode → what it is) drops a process's entries when it exits; a
//!   stand-in still held by a child or a peer is then told by its memfd name
//!   (`kfd-emu:<what>`): a `/dev/kfd` of a process that is gone answers `EBADF`, a render node
//!   is a DRM file no object is allowed on.
//! * A dma-buf lives, as the kernel's does, while any reference to it does: every export
//!   installs an open file of its own carrying an open-file-description lock, which the
//!   kernel drops only at that file's last `fput` (the last fd in any process, an fd in flight
//!   in `SCM_RIGHTS`, a mapping of it), and the model keeps no reference itself, so a lock
//!   probe tells exactly whether any remains. Until none does, IMPORT and GET_DMABUF_INFO
//!   recognise it in any process (after its exporter freed its handle and exited too) and it
//!   holds the BO's memory and charge, which go with the last reference (dma-buf or handle).
//!   The model looks when it matters: at a process exit, AVAILABLE_MEMORY and an ALLOC that
//!   would not fit. Where it differs: two exports of a live dma-buf give two open files of the
//!   same memory (the kernel's give the same file), and a program's own `fcntl` lock over the
//!   file's whole range meets the model's lock (a write lock fails, a read lock keeps the
//!   dma-buf while it is held).
//! * The KFD topology under `/sys/devices/virtual/kfd/kfd/topology` and
//!   `/sys/class/kfd/kfd/topology` → files of a tree generated from the [`Machine`].
//! * The rest of the machine, from the same topology ([`crate::machine::cpus`],
//!   [`crate::machine::ip_discovery`]): `/proc/cpuinfo` (the host's CPU model, the topology's
//!   CPUs and APIC ids), `/sys/devices/system/cpu` (`online`, `possible`, `present`,
//!   `cpu<N>/topology/*`, links to the node) and `/sys/devices/system/node` (a node per CPU
//!   node: `cpulist`, `cpumap`, `meminfo`, `distance`, links to its CPUs);
//!   `/sys/bus/pci/devices` lists the emulated PCI devices (links into `/sys/devices/pci…`);
//!   each GPU's PCI device has `numa_node`, `local_cpus`, `local_cpulist`, `config`,
//!   `mem_info_{vram,vis_vram,gtt}_total`, the `mem_info_*_used` files (read fresh at each
//!   open: what the model's processes hold), `unique_id` and, for a GPU the kernel brings up
//!   from its discovery table, `ip_discovery/die/0` (GC, SDMA0, NBIF). Where it differs: no
//!   cpufreq, cache or hotplug files; `/proc/meminfo`
//!   and `sched_getaffinity` stay the host's (a program may run on a subset of the CPUs, as
//!   under a cpuset).
//! * `/proc/modules` → a list that contains `amdgpu`; `/sys/module/amdgpu` → what libkmod
//!   reads of a loaded module (`refcnt`, `holders/`, `initstate`, `parameters/noretry`), and
//!   the `parameters/cwsr_enable` and `emu_mode` kfdtest reads.
//! * The DRM and PCI side of sysfs, laid out as the kernel's (so that libdrm's
//!   `drmGetDevices2` lists every GPU once, with its primary and render nodes, its PCI
//!   location and ids): `/dev/dri` opens as a directory with `card<N>` and `renderD<minor>`
//!   per GPU; each GPU is a PCI device `/sys/devices/pci<domain>:00/<PCI_SLOT_NAME>` with
//!   `uevent` (`PCI_SLOT_NAME`, `PCI_ID`), `vendor`, `device`, `subsystem_*`, `revision`,
//!   `class` from the topology's ids and `location_id`, a `subsystem` link naming the `pci`
//!   bus and a `drm/` with both minors (`dev`, `uevent`, links `device` and `subsystem`);
//!   `/sys/dev/char/226:<minor>` and `/sys/class/drm/<node>` are links to those minors, so
//!   `realpath` of `/sys/dev/char/226:<minor>/device` is the PCI device, and a `readlink`
//!   ([`Backend::readlink`](crate::backend::Backend::readlink)) of any of these links gives
//!   the kernel's relative target (`EINVAL` for an emulated file that is no link, `ENOENT`
//!   when it does not exist). `/sys/class/drm` lists the nodes and `version`;
//!   `/sys/class/kfd` lists `kfd` (`dev`, `uevent`, `topology`). Where it differs: the GPUs
//!   hang directly from their root bus (no bridges); `/sys/devices/pci<domain>:00` and
//!   `/sys/class/drm` list only the emulated devices; a `stat` of a link describes its
//!   target, and so does an `lstat`.
//! * A `stat`/`access` of those paths ([`Backend::stat`]): `/dev/kfd` is a character device
//!   `0666` with major [`KFD_MAJOR`], a render or primary node one with major [`DRM_MAJOR`] and
//!   its minor,
//!   sysfs files are `0444` with the generated file's size, directories `0755`, and a path
//!   under an emulated sysfs root that is not in the tree is `ENOENT`.
//! * SVM ranges live over the caller's own memory (`svm`). An SMI event fd is the read end
//!   of a pipe the model writes the kernel's records into, installed at a number of
//!   [`SMI_FDS`](crate::backend::SMI_FDS) whose writes the supervisor hands to the model, so
//!   reads and polls are native and exact (no `POLLOUT`), writes are `kfd_smi_ev_write`'s
//!   (`EFAULT` under 8 bytes, else the first 8 are the mask and 8 is returned), and a client
//!   goes with the last close of its fd; where it differs is listed in `smi`.
//! * User queues (`queue_ioctls`): CREATE_QUEUE's checks, limits and doorbell offsets are the
//!   kernel's. SDMA queues run: each queue's engine thread (`scheduler`, `sdma`) reads its write
//!   pointer through the GPU view, executes its packets against BO, USERPTR and SVM memory,
//!   writes the read pointer back, raises the event a TRAP names, and turns a faulting
//!   access into a VM fault (SMI record, memory events, the process's queues on the GPU
//!   evicted until it exits, later ones there created evicted). AQL queues run their
//!   barrier packets, completion signals and kernel dispatches (`aql`, `kernel`: the waves
//!   run on `kfd_gfx9`'s interpreter over the GPU view; PM4 compute queues' DISPATCH_DIRECT
//!   too); a packet the packet processor cannot run (an agent, vendor or reserved packet, a
//!   dispatch the CP refuses or whose kernel traps) stops the queue and reaches ROCr's
//!   `hsa_queue_create` error callback as the CP's error code in the queue's
//!   `queue_inactive_signal` (`queue_error`).
//!   A queue runs in bounded turns (a long copy resumes mid-packet), only while active
//!   (`QUEUE_IS_ACTIVE`: UPDATE_QUEUE to 0 percent parks it), and an access that blocks
//!   holds up only its own queue: WAIT_EVENTS waits for no engine, and DESTROY_QUEUE and a
//!   process's exit preempt a blocked queue without waiting for it (what the access brings
//!   back is discarded).
//!
//! ```no_run
//! use kfd_emu::model::{Model, ModelConfig};
//!
//! let model = Model::new(ModelConfig {
//!     fail: vec!["ALLOC_MEMORY_OF_GPU:ENOMEM:1".parse()?],
//!     ..ModelConfig::default()
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Backend`]: crate::backend::Backend
//! [`Backend::open`]: crate::backend::Backend::open
//! [`Backend::ioctl`]: crate::backend::Backend::ioctl
//! [`Backend::mmap`]: crate::backend::Backend::mmap
//! [`Backend::stat`]: crate::backend::Backend::stat
//! [`Backend::fstat`]: crate::backend::Backend::fstat
//! [`Backend::is_standin`]: crate::backend::Backend::is_standin
//! [`Caller`]: crate::backend::Caller
//! [`Machine`]: crate::machine::Machine

mod addrspace;
mod aql;
mod backend;
mod bo_maps;
mod chardev;
mod cs_ioctls;
mod debug;
mod device;
mod dispatch;
mod dkms;
mod doorbells;
mod driver;
mod drm;
mod engine;
mod event_ioctls;
mod events;
mod evict;
mod exceptions;
mod fail;
mod files;
mod gem_ioctls;
mod gpu_view;
mod handlers;
mod host;
mod host_calls;
mod kernel;
mod memory;
mod memory_ioctls;
mod mmap;
mod objects;
mod observe;
mod offsets;
mod pm4;
mod process;
mod queue_error;
mod queue_ioctls;
mod queues;
mod scheduler;
mod sdma;
mod smi;
mod svm;
mod svm_ioctl;
mod teardown;
mod timing;
mod trace;
mod trap_handler;
mod vm;
mod vmas;

pub use backend::{DRM_MAJOR, KFD_MAJOR, Model, ModelError};
pub use device::Kernel;
pub use device::ModelConfig;
pub use fail::{FailRule, FailRuleError};
pub use gpu_view::{GpuFault, GpuFaultReason};
pub use host_calls::{HostCalls, host_calls};
pub use observe::{SvmObserver, SvmSetAttr};
pub use svm::{SvmPage, SvmRange};
pub use timing::{Clock, ClockMode, Costs, LinkCost, Timing, TimingError};
