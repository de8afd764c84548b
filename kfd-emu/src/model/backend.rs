//! The top of the chardev layer: [`Model`], the supervisor's [`Backend`]. It owns the
//! [`Driver`] (device, process state, stand-in table), the generated sysfs tree and the GPU-view
//! worker, decides which opens get a stand-in and hands ioctls to the dispatcher (KFD) or the
//! DRM layer. Nothing below imports it.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use rustix::io::Errno;

use super::device::{Device, Kernel, ModelConfig};
use super::driver::{Driver, FileKind};
use super::files::{self, io_errno};
use super::gpu_view::GpuFault;
use super::svm::{SvmPage, SvmRange};
use super::{
    addrspace, dispatch, dkms, drm, evict, gem_ioctls, gpu_view, process, scheduler, smi, svm,
    teardown,
};
use crate::backend::{
    AddressSpaceChange, Backend, Caller, CallerId, CpuProtect, CpuWaker, IoctlResult, MmapAction,
    OpenAction, StatAnswer, StatKind, StatTime, WriteCall,
};
use crate::machine::Machine;

/// An error creating the [`Model`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A stand-in file (a render node's memfd) could not be created.
    #[error("could not create the stand-in for {what}: {source}")]
    StandIn {
        /// Which stand-in.
        what: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The requested KFD minor version is not one the model can act as.
    #[error("KFD 1.{0} is not supported: the model acts as KFD 1.1 to 1.{max}", max = kfd_ioctl::abi::KFD_IOCTL_MINOR_VERSION)]
    Minor(u32),
}

/// The emulated KFD driver (see the [module docs](crate::model)).
#[derive(Debug)]
pub struct Model {
    /// The device, the process state and the stand-in table the handlers work on.
    drv: Arc<Driver>,
    sysfs: Mutex<Option<files::SysfsTree>>,
    /// Where GPU-view accesses run (see [`gpu_view`]): a thread started with the model.
    view: gpu_view::Worker,
    /// When the model was made: the times the device nodes report.
    born: StatTime,
}

impl Model {
    /// Creates the model for `cfg`'s machine.
    pub fn new(cfg: ModelConfig) -> Result<Arc<Model>, ModelError> {
        if cfg.kfd_minor == 0 || cfg.kfd_minor > kfd_ioctl::abi::KFD_IOCTL_MINOR_VERSION {
            return Err(ModelError::Minor(cfg.kfd_minor));
        }
        // Every VRAM and GTT BO holds a memfd: let the model hold as many as the hard limit
        // allows (the soft limit is often 1024).
        files::raise_fd_limit();
        // Before the engine and GPU-view threads start: see `arenas`.
        crate::arenas::one_per_thread();
        let drv = Arc::new(Driver::new(Device::new(cfg)));
        scheduler::start(&drv);
        Ok(Arc::new(Model {
            view: gpu_view::Worker::start(Arc::downgrade(&drv)),
            drv,
            sysfs: Mutex::new(None),
            born: files::now(),
        }))
    }

    /// The configuration the model was made with.
    pub fn config(&self) -> &ModelConfig {
        &self.drv.dev.cfg
    }

    /// The machine the model drives.
    pub fn machine(&self) -> &Machine {
        &self.drv.dev.cfg.machine
    }

    /// The timing model's costs on this machine (what the SDMA engine, replay and tests use
    /// to time a copy, a migration or a fault).
    pub fn costs(&self) -> &super::timing::Costs {
        &self.drv.dev.costs
    }

    /// The model's clock: the time modeled so far, and the time the model shows.
    pub fn clock(&self) -> &super::timing::Clock {
        &self.drv.dev.clock
    }

    /// Installs `observer`, told of every successful SVM SET_ATTR and XNACK change of every
    /// process from now on (see [`SvmObserver`](super::SvmObserver)). Once per model: a second
    /// observer is refused and given back.
    pub fn observe_svm(
        &self,
        observer: Arc<dyn super::SvmObserver>,
    ) -> Result<(), Arc<dyn super::SvmObserver>> {
        self.drv
            .observer
            .set(super::observe::Observer(observer))
            .map_err(|o| o.0)
    }

    /// How many stand-in files (their inodes) the model knows: the `/dev/kfd`, render-node opens
    /// and dma-bufs of live processes. It is back to its
    /// earlier value once the processes that opened stand-ins since have exited and been
    /// released.
    pub fn stand_ins(&self) -> usize {
        self.drv
            .files
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Whether a leak report found anything (only with [`ModelConfig::check_leaks`]): what a
    /// process still held at exit, or what survived its teardown.
    pub fn leaks_found(&self) -> bool {
        self.drv.leaks.load(Ordering::Relaxed)
    }

    /// Whether a process's teardown left anything behind that the kernel's would have freed
    /// (only with [`ModelConfig::check_teardown`] or [`ModelConfig::check_leaks`]): an
    /// emulator leak, whatever the process held at exit.
    pub fn teardown_leaks_found(&self) -> bool {
        self.drv.teardown_leaks.load(Ordering::Relaxed)
    }

    /// How many times the doorbell watcher (the thread that reads idle queues' doorbells
    /// through a mapping and kicks their engines) woke so far: none while no queue is idle
    /// and runnable, at most one per 200 µs while some are (for the tests' count).
    pub fn doorbell_watch_passes(&self) -> u64 {
        self.drv.doorbells.passes()
    }

    fn open_kfd(&self, caller: &dyn Caller) -> OpenAction {
        let tgid = caller.id().tgid;
        let mut st = self.drv.lock();
        if let Some(process) = st.procs.get(&tgid) {
            return match process.memfd.try_clone() {
                Ok(fd) => OpenAction::Inject(fd),
                Err(e) => OpenAction::Fail(io_errno(&e)),
            };
        }
        match process::Process::create(tgid, &mut st, &self.drv.dev.cfg.machine) {
            Ok(process) => {
                let fd = process.memfd.try_clone();
                let key = process.key;
                let serial = process.serial;
                st.procs.insert(tgid, process);
                drop(st);
                self.drv.register(key, FileKind::Kfd { tgid, serial });
                match fd {
                    Ok(fd) => OpenAction::Inject(fd),
                    Err(e) => OpenAction::Fail(io_errno(&e)),
                }
            }
            Err(errno) => OpenAction::Fail(errno),
        }
    }

    /// A render node (or, `primary`, the primary node): a new DRM file, an empty memfd of its
    /// own, so reading it shows nothing and mapping it natively maps nothing; its mappings are
    /// redirected to the memory of the BOs the model allows it on (see the module docs).
    fn open_render(&self, caller: &dyn Caller, gpu: usize, primary: bool) -> OpenAction {
        let tgid = caller.id().tgid;
        let file = files::memfd(
            &files::drm_node_name(self.drm_minor(gpu, primary), primary),
            0,
        )
        .map_err(|e| io_errno(&e));
        match file.and_then(|fd| Ok((files::key_of(fd.as_fd())?, fd))) {
            Ok((key, fd)) => {
                self.drv.register(key, FileKind::Render { gpu, primary });
                self.drv
                    .lock()
                    .render_files
                    .entry(tgid)
                    .or_default()
                    .push(key);
                OpenAction::Inject(fd)
            }
            Err(errno) => OpenAction::Fail(errno),
        }
    }

    /// Runs `f` on the generated sysfs tree for a path (`rest` of `part`), generating the tree
    /// on first use, and the per-CPU directories when the path needs them.
    fn with_sysfs<T>(
        &self,
        part: files::SysfsPart,
        rest: &str,
        f: impl FnOnce(&files::SysfsTree) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let mut sysfs = self.sysfs.lock().unwrap_or_else(|e| e.into_inner());
        if sysfs.is_none() {
            let tree =
                files::SysfsTree::generate(&self.drv.dev.cfg.machine).map_err(|e| io_errno(&e))?;
            if self.drv.dev.cfg.kernel == Kernel::Dkms {
                tree.write_module_version(dkms::AMDGPU_VERSION)
                    .map_err(|e| io_errno(&e))?;
            }
            *sysfs = Some(tree);
        }
        match sysfs.as_mut() {
            Some(tree) => {
                if files::SysfsTree::needs_cpus(part, rest) {
                    tree.write_cpus(&self.drv.dev.cfg.machine)
                        .map_err(|e| io_errno(&e))?;
                }
                f(tree)
            }
            None => Err(Errno::NOENT),
        }
    }

    fn open_sysfs(&self, part: files::SysfsPart, rest: &str, flags: i32) -> OpenAction {
        let machine = &self.drv.dev.cfg.machine;
        if let Ok(Some((gpu, which))) =
            self.with_sysfs(part, rest, |tree| Ok(tree.usage_file(machine, part, rest)))
        {
            return self.open_usage(gpu, which, flags);
        }
        match self.with_sysfs(part, rest, |tree| tree.open(part, rest, flags)) {
            Ok(fd) => OpenAction::Inject(fd),
            Err(errno) => OpenAction::Fail(errno),
        }
    }
}

impl Model {
    /// One of GPU `gpu`'s usage files ([`files::USAGE_FILES`] index `which`) as amdgpu prints
    /// it when read: VRAM in use (`ttm_resource_manager_usage` of the VRAM manager: the KFD
    /// BOs and GEM objects in VRAM, not those evicted, and migrated SVM pages), the
    /// CPU-visible part of it (all of it with a large BAR; at most the BAR otherwise), GTT in
    /// use (KFD's TTM charges, GEM objects in GTT and VRAM objects evicted there). Opened
    /// read-only, as sysfs allows.
    fn open_usage(&self, gpu: usize, which: usize, flags: i32) -> OpenAction {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_CREAT | libc::O_TRUNC) != 0
        {
            return OpenAction::Fail(Errno::ACCESS);
        }
        let info = &self.drv.dev.cfg.machine.gpus()[gpu];
        let (vram, gtt) = {
            let st = self.drv.lock();
            (
                evict::occupied(&st, gpu),
                st.acc.ttm_used.saturating_add(evict::in_gtt(&st)),
            )
        };
        let value = match which {
            0 => vram,
            1 if info.large_bar => vram,
            1 => vram.min(256 << 20),
            _ => gtt,
        };
        match files::text_file(files::USAGE_FILES[which], &format!("{value}\n")) {
            Ok(fd) => OpenAction::Inject(fd),
            Err(e) => OpenAction::Fail(io_errno(&e)),
        }
    }
}

/// The two roots under which the kernel publishes the topology.
const SYSFS_ROOTS: [&str; 2] = [
    "/sys/devices/virtual/kfd/kfd/topology",
    "/sys/class/kfd/kfd/topology",
];

pub use super::files::{DRM_MAJOR, KFD_MAJOR};

/// What an emulated path is.
enum Target<'p> {
    Kfd,
    Render(usize),
    /// A primary node `/dev/dri/card<N>` of GPU index `.0`.
    Card(usize),
    ProcModules,
    Sysfs(files::SysfsPart, &'p str),
}

impl Model {
    /// Which emulated file `path` names; `None` for a path that is not the model's.
    fn target<'p>(&self, path: &'p str) -> Option<Target<'p>> {
        if path == "/dev/kfd" {
            return Some(Target::Kfd);
        }
        for (prefix, primary) in [("/dev/dri/renderD", false), ("/dev/dri/card", true)] {
            if let Some(minor) = path.strip_prefix(prefix) {
                let (gpu, is_primary) = self.drm_node(minor.parse::<u32>().ok()?)?;
                return match (primary, is_primary) {
                    (false, false) => Some(Target::Render(gpu)),
                    (true, true) => Some(Target::Card(gpu)),
                    _ => None,
                };
            }
        }
        if path == "/dev/dri" {
            return Some(Target::Sysfs(files::SysfsPart::DevDri, ""));
        }
        if path == "/proc/modules" {
            return Some(Target::ProcModules);
        }
        if path == "/proc/cpuinfo" {
            return Some(Target::Sysfs(files::SysfsPart::ProcCpuinfo, ""));
        }
        // The machine's CPUs, NUMA nodes and PCI devices: the whole directory is the
        // emulated machine's (its other entries, such as cpufreq, are absent).
        for (root, part) in [
            ("/sys/devices/system/cpu", files::SysfsPart::SystemCpu),
            ("/sys/devices/system/node", files::SysfsPart::SystemNode),
            ("/sys/bus/pci/devices", files::SysfsPart::BusPciDevices),
        ] {
            if let Some(rest) = path.strip_prefix(root)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return Some(Target::Sysfs(part, rest));
            }
        }
        for root in SYSFS_ROOTS {
            if let Some(rest) = path.strip_prefix(root)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return Some(Target::Sysfs(files::SysfsPart::Topology, rest));
            }
        }
        if let Some(rest) = path.strip_prefix("/sys/module/amdgpu")
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(Target::Sysfs(files::SysfsPart::AmdgpuModule, rest));
        }
        if path == "/sys/class/drm" {
            return Some(Target::Sysfs(files::SysfsPart::ClassDrm, ""));
        }
        if let Some(rest) = path.strip_prefix("/sys/class/kfd")
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return Some(Target::Sysfs(files::SysfsPart::ClassKfd, rest));
        }
        if let Some(rest) = path.strip_prefix("/sys/devices/")
            && self.is_pci_root(rest.split('/').next().unwrap_or(""))
        {
            return Some(Target::Sysfs(files::SysfsPart::PciDevices, rest));
        }
        for (root, part) in [
            ("/sys/dev/char/", files::SysfsPart::DevChar),
            ("/sys/class/drm/", files::SysfsPart::ClassDrm),
        ] {
            if let Some(rest) = path.strip_prefix(root)
                && self.is_drm_entry(part, rest)
            {
                return Some(Target::Sysfs(part, rest));
            }
        }
        None
    }

    /// Whether `rest` (below `/sys/dev/char/` or `/sys/class/drm/`) is in the entry of one of
    /// the machine's DRM nodes (`226:<minor>`, `card<N>`, `renderD<minor>`, the class's
    /// `version`); other entries stay the host's.
    fn is_drm_entry(&self, part: files::SysfsPart, rest: &str) -> bool {
        let entry = rest.split('/').next().unwrap_or("");
        let node = |minor: Option<&str>| {
            minor
                .and_then(|m| m.parse::<u32>().ok())
                .and_then(|m| self.drm_node(m))
        };
        match part {
            files::SysfsPart::DevChar => {
                node(entry.strip_prefix(&format!("{DRM_MAJOR}:"))).is_some()
            }
            files::SysfsPart::ClassDrm => {
                entry == "version"
                    || node(entry.strip_prefix("renderD")).is_some_and(|(_, primary)| !primary)
                    || node(entry.strip_prefix("card")).is_some_and(|(_, primary)| primary)
            }
            _ => false,
        }
    }

    /// The GPU (index) whose DRM minor `minor` is, and whether it is its primary node
    /// (`card<N>`) rather than its render node.
    fn drm_node(&self, minor: u32) -> Option<(usize, bool)> {
        files::drm_node(&self.drv.dev.cfg.machine, |m, _| m == minor)
    }

    /// Whether `entry` of `/sys/devices` is the root bus (`pci<domain>:00`) of one of the
    /// machine's GPUs.
    fn is_pci_root(&self, entry: &str) -> bool {
        self.drv
            .dev
            .cfg
            .machine
            .gpus()
            .iter()
            .any(|gpu| files::pci_root(gpu) == entry)
    }

    /// The answer for GPU `gpu`'s render node, or its primary node.
    fn drm_node_stat(&self, gpu: usize, primary: bool) -> StatAnswer {
        self.device_stat(DRM_MAJOR, self.drm_minor(gpu, primary))
    }

    /// The minor of GPU `gpu`'s render node, or its primary node.
    fn drm_minor(&self, gpu: usize, primary: bool) -> u32 {
        let node = &self.drv.dev.cfg.machine.gpus()[gpu];
        if primary {
            files::card_minor(node)
        } else {
            node.render_minor
        }
    }

    /// The answer for a device node: `S_IFCHR | 0666`, root-owned, on devtmpfs (0:5).
    fn device_stat(&self, major: u32, minor: u32) -> StatAnswer {
        StatAnswer {
            kind: StatKind::CharDevice { major, minor },
            perm: 0o666,
            dev: (0, 5),
            // Distinct and stable per node.
            ino: 0x4b00_0000 | u64::from(major) << 12 | u64::from(minor),
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 0,
            blksize: 4096,
            blocks: 0,
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
        }
    }
}

impl Backend for Model {
    fn open(&self, caller: &dyn Caller, path: &str, flags: i32, _mode: u32) -> OpenAction {
        match self.target(path) {
            None => OpenAction::Continue,
            // A device node opened read-only (or write-only) is a file of that access mode,
            // which `mmap` and `fallocate` look at.
            Some(Target::Kfd) => files::with_access_mode(self.open_kfd(caller), flags),
            Some(Target::Render(gpu)) => {
                files::with_access_mode(self.open_render(caller, gpu, false), flags)
            }
            Some(Target::Card(gpu)) => {
                files::with_access_mode(self.open_render(caller, gpu, true), flags)
            }
            Some(Target::ProcModules) => match files::proc_modules() {
                Ok(fd) => OpenAction::Inject(fd),
                Err(e) => OpenAction::Fail(io_errno(&e)),
            },
            Some(Target::Sysfs(part, rest)) => self.open_sysfs(part, rest, flags),
        }
    }

    fn stat(&self, _caller: &dyn Caller, path: &str) -> Option<Result<StatAnswer, Errno>> {
        match self.target(path)? {
            Target::Kfd => Some(Ok(self.device_stat(KFD_MAJOR, 0))),
            Target::Render(gpu) => Some(Ok(self.drm_node_stat(gpu, false))),
            Target::Card(gpu) => Some(Ok(self.drm_node_stat(gpu, true))),
            // The host's own /proc/modules stats like the generated one (size 0).
            Target::ProcModules => None,
            Target::Sysfs(part, rest) => {
                Some(self.with_sysfs(part, rest, |tree| tree.stat(part, rest)))
            }
        }
    }

    fn readlink(&self, caller: &dyn Caller, path: &str) -> Option<Result<String, Errno>> {
        // The generated tree holds the links (a render node's `device/subsystem`); every
        // other emulated path is no link.
        match self.target(path)? {
            Target::Sysfs(part, rest) => {
                Some(self.with_sysfs(part, rest, |tree| tree.readlink(part, rest)))
            }
            _ => Some(self.stat(caller, path)?.and(Err(Errno::INVAL))),
        }
    }

    fn fstat(
        &self,
        _caller: &dyn Caller,
        file: BorrowedFd<'_>,
    ) -> Option<Result<StatAnswer, Errno>> {
        let key = files::key_of(file).ok()?;
        let kind = self
            .drv
            .kind_of(&key)
            .or_else(|| self.drv.released_kind(file))?;
        match kind {
            FileKind::Kfd { .. } => Some(Ok(self.device_stat(KFD_MAJOR, 0))),
            FileKind::Render { gpu, primary } => Some(Ok(self.drm_node_stat(gpu, primary))),
            // A dma-buf is the kernel's anonymous file in its own pseudo filesystem: the
            // memfd's regular-file answer stands for it.
            FileKind::Dmabuf { .. } => None,
        }
    }

    fn write(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        segments: &dyn Fn() -> Result<WriteCall, Errno>,
    ) -> Option<IoctlResult> {
        // The wall time of the driver's work is not the program's (`ClockMode::Program`).
        let _busy = self.drv.dev.clock.busy();
        let key = files::key_of(file).ok()?;
        if !self.drv.lock().smi.is_client(key) {
            return None;
        }
        // Caller memory is read outside the model's lock; the mask is set under it.
        let (pieces, vector) = match segments() {
            Ok(WriteCall::Write(buf, count)) => (vec![(buf, count)], false),
            Ok(WriteCall::Vector(pieces)) => (pieces, true),
            Err(errno) => return Some(Err(errno)),
        };
        let read = |addr, buf: &mut [u8]| caller.read(addr, buf);
        let (result, mask) = smi::write(&pieces, vector, read);
        if let Some(mask) = mask {
            self.drv.lock().smi.set_mask(key, mask);
        }
        Some(result)
    }

    fn ioctl(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        cmd: u32,
        arg: u64,
    ) -> Option<IoctlResult> {
        // The wall time of the driver's work is not the program's (`ClockMode::Program`).
        let _busy = self.drv.dev.clock.busy();
        let key = files::key_of(file).ok()?;
        let kind = self
            .drv
            .kind_of(&key)
            .or_else(|| self.drv.released_kind(file))?;
        Some(match kind {
            FileKind::Kfd { tgid, serial } => {
                dispatch::kfd_ioctl(&self.drv, caller, tgid, serial, cmd, arg)
            }
            FileKind::Render { gpu, .. } => drm::ioctl(&self.drv, caller, key, gpu, cmd, arg),
            // dma_buf_ioctl answers only its own 'b' commands.
            FileKind::Dmabuf { .. } => Err(Errno::NOTTY),
        })
    }

    fn mmap(
        &self,
        caller: CallerId,
        file: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        prot: u32,
        flags: u32,
    ) -> MmapAction {
        let _busy = self.drv.dev.clock.busy();
        self.drv
            .mmap_standin(caller, file, offset, len, prot, flags)
    }

    fn is_standin(&self, file: BorrowedFd<'_>) -> bool {
        // Every memfd the model hands out is named `kfd-emu:<what>` (device nodes, dma-bufs,
        // BO memory, `/proc/modules`); sysfs stand-ins are files of the generated tree, which
        // the kernel's sysfs would not resize either (they are opened read-only).
        files::standin_name(file).is_some()
            || files::key_of(file).is_ok_and(|key| self.drv.kind_of(&key).is_some())
    }

    fn address_space(&self, caller: CallerId, change: AddressSpaceChange) {
        let _busy = self.drv.dev.clock.busy();
        let program = |start, len, prot| {
            svm::program_changed(&self.drv, caller.tgid, start, len, prot);
        };
        match change {
            AddressSpaceChange::Unmap { start, len }
            | AddressSpaceChange::MapFixed { start, len } => program(start, len, None),
            AddressSpaceChange::Remap { old, old_len, .. } => program(old, old_len, None),
            AddressSpaceChange::Protect { start, len, prot } => program(start, len, Some(prot)),
            _ => {}
        }
        addrspace::changed(&self.drv, caller, change);
    }

    fn numa_nodes(&self) -> Option<u32> {
        u32::try_from(self.machine().numa_nodes().len()).ok()
    }

    fn system_memory(&self) -> Option<u64> {
        Some(self.machine().system_memory()).filter(|&ram| ram > 0)
    }

    fn cpu_faults(&self, waker: Option<CpuWaker>) {
        self.drv.cpu.set_waker(waker);
    }

    fn cpu_protect_plan(&self, tgid: i32) -> Vec<CpuProtect> {
        let _busy = self.drv.dev.clock.busy();
        svm::cpu_protect_plan(&self.drv, tgid)
    }

    fn cpu_protect_done(&self, tgid: i32, failed: &[CpuProtect]) {
        svm::cpu_protect_done(&self.drv, tgid, failed);
    }

    fn cpu_hidden(&self, tgid: i32) -> Vec<CpuProtect> {
        svm::cpu_hidden(&self.drv, tgid)
    }

    fn poke(&self, tracee: i32, addr: u64, word: u64) -> Option<Result<(), Errno>> {
        super::mmap::ptrace_poke(&self.drv, tracee, addr, word)
    }

    fn cpu_fault(&self, caller: CallerId, addr: u64) -> bool {
        let _busy = self.drv.dev.clock.busy();
        svm::cpu_fault(&self.drv, caller.tgid, addr)
    }

    fn cpu_touch(&self, caller: CallerId, spans: &[(u64, u64)], write: bool) -> bool {
        let _busy = self.drv.dev.clock.busy();
        svm::cpu_touch(&self.drv, caller.tgid, spans, write)
    }

    fn process_exited(&self, tgid: i32) {
        let private = {
            let mut st = self.drv.lock();
            let private = st.render_files.remove(&tgid).unwrap_or_default();
            // The last fput of each DRM file it opened: its GEM handles go.
            gem_ioctls::release_drm_files(&mut st, &private);
            private
        };
        for key in private {
            self.drv.unregister(&key);
        }
        teardown::teardown(&self.drv, tgid);
        self.drv.forget_maps(tgid);
    }
}

/// The GPU-side view of memory (the `gpu_view` module).
impl Model {
    /// Reads `buf.len()` bytes at GPU VA `va` as GPU `gpu_id` sees them in process `tgid`'s
    /// VM. Faults when any byte is unmapped. SVM memory is accessed as the kernel would let
    /// it be: with XNACK on, a page the GPU does not map is a retry fault the model handles
    /// (migrating and mapping it, with the SMI records); a fault that stays a fault is
    /// reported to SMI clients as a VM fault.
    pub fn gpu_read(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), GpuFault> {
        self.drv.gpu_read(&self.view, tgid, gpu_id, va, buf)
    }

    /// Writes `buf` at GPU VA `va` as GPU `gpu_id` would in process `tgid`'s VM. Faults, before
    /// writing anything, when any byte is unmapped or mapped read-only (SVM faults are handled
    /// as for [`gpu_read`](Self::gpu_read)).
    pub fn gpu_write(&self, tgid: i32, gpu_id: u32, va: u64, buf: &[u8]) -> Result<(), GpuFault> {
        self.drv.gpu_write(&self.view, tgid, gpu_id, va, buf)
    }
}

/// What the model keeps of SVM (the `svm` module).
impl Model {
    /// The SVM ranges of process `tgid` as the kernel keeps them (split, never merged: what
    /// GET_ATTR aggregates away). The model's own bookkeeping, as of the last time the process
    /// touched SVM (memory unmapped since is still listed).
    pub fn svm_ranges(&self, tgid: i32) -> Vec<SvmRange> {
        self.drv.svm_ranges(tgid)
    }

    /// Where the SVM page holding `va` of process `tgid` is and which GPUs map it; `None` when
    /// no range holds it.
    pub fn svm_page(&self, tgid: i32, va: u64) -> Option<SvmPage> {
        self.drv.svm_page(tgid, va)
    }

    /// A CPU access of process `tgid` at `va` as the kernel's CPU fault path takes it: when
    /// the page is an SVM page in VRAM, `svm_migrate_to_ram` migrates the granularity block
    /// around it back to system memory (with its SMI records and modeled time). For a caller
    /// whose own touches the model does not see (attach mode, `supervisor::run_attached`):
    /// a replay of a recorded CPU fault.
    pub fn cpu_access(&self, tgid: i32, va: u64) {
        svm::cpu_access(&self.drv, tgid, va);
    }

    /// Bytes of GPU `gpu_id`'s VRAM holding migrated SVM pages. (AVAILABLE_MEMORY does not
    /// count them: the kernel reserves KFD's VRAM limit only while a migration runs.)
    pub fn svm_vram_usage(&self, gpu_id: u32) -> u64 {
        self.drv.svm_vram_usage(gpu_id)
    }
}
