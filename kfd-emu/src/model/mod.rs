//! The model of the KFD driver: processes, GPU VMs, buffer objects, events and the rest of the
//! `/dev/kfd` ioctl interface, with the kernel's validation order and errnos
//! (`shared/ref/kfd-abi.md` §4).
//!
//! [`Model`] implements the supervisor's [`Backend`]: it decides which opens get a stand-in
//! file ([`Backend::open`]) and answers ioctls on those stand-ins ([`Backend::ioctl`]), reading
//! and writing the caller's memory through [`Caller`].
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
//!   native `mmap` see nothing. It answers the DRM ioctls (naming the GPU) and can be given to
//!   ACQUIRE_VM.
//!
//!   Isolation: the memory of a BO is reachable only through its own memfd, which no process
//!   gets as an fd except as a dma-buf it exported or was given. A mapping through a render
//!   node is redirected only when the file is the DRM file of a process's GPU VM and that
//!   process holds a handle on the object (`drm_vma_node_is_allowed`, else `EACCES`), so a
//!   process maps nothing of another's VRAM, with or without `/dev/kfd`. This needs the
//!   supervisor to carry out [`Backend::mmap`]'s redirects; a program whose mmaps are not
//!   intercepted maps the empty stand-ins and gets `SIGBUS` on access.
//! * Every memfd the model hands out or maps (render nodes, `/dev/kfd`, BOs and their
//!   dma-bufs, `/proc/modules`) is sealed against resizing (`F_SEAL_SHRINK | F_SEAL_GROW`):
//!   `ftruncate` fails with `EPERM` (a real device node says `EINVAL`), and no mapping can be
//!   cut short into a `SIGBUS`.
//! * The file table (stand-in inode → what it is) drops a process's entries when it exits; a
//!   stand-in still held by a child or a peer is then told by its memfd name
//!   (`kfd-emu:<what>`): a `/dev/kfd` of a process that is gone answers `EBADF`, a render node
//!   is a DRM file no object is allowed on. A dma-buf's registration (what IMPORT and
//!   GET_DMABUF_INFO recognise) goes with its exporter's exit; its memory lives on in the fds
//!   and mappings programs still have (the model cannot see those close).
//! * The KFD topology under `/sys/devices/virtual/kfd/kfd/topology` and
//!   `/sys/class/kfd/kfd/topology` → files of a tree generated from the [`Machine`].
//! * `/proc/modules` → a list that contains `amdgpu`; `/sys/module/amdgpu` → what libkmod
//!   reads of a loaded module (`refcnt`, `holders/`, `initstate`, `parameters/noretry`).
//! * A `stat`/`access` of those paths ([`Backend::stat`]): `/dev/kfd` is a character device
//!   `0666` with major [`KFD_MAJOR`], a render node one with major [`DRM_MAJOR`] and its minor,
//!   sysfs files are `0444` with the generated file's size, directories `0755`, and a path
//!   under an emulated sysfs root that is not in the tree is `ENOENT`.
//! * SVM ranges live over the caller's own memory (`svm`), and SMI event fds are socket pairs
//!   the model writes the kernel's records into (`smi`).
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

mod chardev;
mod dispatch;
mod drm;
mod events;
mod fail;
mod files;
mod gpu_view;
mod handlers;
mod host;
mod memory;
mod memory_ioctls;
mod mmap;
mod objects;
mod offsets;
mod process;
mod smi;
mod svm;
mod trace;
mod vm;
mod vmas;

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use rustix::io::Errno;

use crate::backend::{
    Backend, Caller, CallerId, IoctlResult, MmapAction, OpenAction, StatAnswer, StatKind, StatTime,
};
use crate::machine::Machine;

pub use fail::{FailRule, FailRuleError};
pub use gpu_view::{GpuFault, GpuFaultReason};
pub use svm::{SvmPage, SvmRange};

use files::FileKey;
use process::State;

/// How the model behaves: which machine, which KFD version, and the emulator-only extras.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The machine whose GPUs the model drives.
    pub machine: Machine,
    /// The KFD minor version to act as (1.x). Ioctls newer than this fail as that kernel's
    /// dispatcher would. Default: the header's, 23.
    pub kfd_minor: u32,
    /// Print every ioctl to stderr, decoded, strace-style.
    pub trace: bool,
    /// Errors to inject before the handler runs.
    pub fail: Vec<FailRule>,
    /// Report what a process leaves behind when it exits (buffer objects, mappings, events).
    pub check_leaks: bool,
}

impl Default for ModelConfig {
    /// The `mi300x` machine at KFD 1.23, no tracing, no faults, no leak check.
    fn default() -> Self {
        ModelConfig {
            machine: Machine::default(),
            kfd_minor: kfd_ioctl::abi::KFD_IOCTL_MINOR_VERSION,
            trace: false,
            fail: Vec::new(),
            check_leaks: false,
        }
    }
}

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

/// What a stand-in file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    /// `/dev/kfd` of a KFD process (`tgid`, and the serial that tells a process apart from a
    /// later one that reuses the pid).
    Kfd { tgid: i32, serial: u64 },
    /// An open of the render node of GPU index `gpu` (a DRM file): an empty memfd of its own.
    Render { gpu: usize },
    /// A dma-buf the model exported.
    Dmabuf { id: u64 },
}

/// The emulated KFD driver (see the [module docs](self)).
#[derive(Debug)]
pub struct Model {
    cfg: ModelConfig,
    state: Mutex<State>,
    /// Signalled whenever an event is set or destroyed, or a process goes away.
    wake: Condvar,
    files: RwLock<HashMap<FileKey, FileKind>>,
    sysfs: Mutex<Option<files::SysfsTree>>,
    fail: Mutex<Vec<fail::Armed>>,
    leaks: AtomicBool,
    limits: memory::Limits,
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
        let table = HashMap::new();
        let state = State::new(cfg.machine.gpus().len());
        let fail = cfg.fail.iter().cloned().map(fail::Armed::new).collect();
        Ok(Arc::new_cyclic(|model| Model {
            view: gpu_view::Worker::start(model.clone()),
            limits: memory::Limits::of_host(),
            state: Mutex::new(state),
            wake: Condvar::new(),
            files: RwLock::new(table),
            sysfs: Mutex::new(None),
            fail: Mutex::new(fail),
            leaks: AtomicBool::new(false),
            born: files::now(),
            cfg,
        }))
    }

    /// The configuration the model was made with.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The machine the model drives.
    pub fn machine(&self) -> &Machine {
        &self.cfg.machine
    }

    /// How many stand-in files (their inodes) the model knows: the `/dev/kfd`, render-node opens
    /// and dma-bufs of live processes. It is back to its
    /// earlier value once the processes that opened stand-ins since have exited and been
    /// released.
    pub fn stand_ins(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether a leak report found anything (only with [`ModelConfig::check_leaks`]).
    pub fn leaks_found(&self) -> bool {
        self.leaks.load(Ordering::Relaxed)
    }

    /// The model state, even if a thread panicked while holding it (the state stays
    /// consistent between ioctls, which are the only writers).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn register(&self, key: FileKey, kind: FileKind) {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, kind);
    }

    fn unregister(&self, key: &FileKey) {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    fn kind_of(&self, key: &FileKey) -> Option<FileKind> {
        self.files
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
    }

    /// The GPU index of `gpu_id` in the machine.
    fn gpu_index(&self, gpu_id: u32) -> Option<usize> {
        self.cfg
            .machine
            .gpus()
            .iter()
            .position(|gpu| gpu.gpu_id == gpu_id)
    }

    fn open_kfd(&self, caller: &dyn Caller) -> OpenAction {
        let tgid = caller.id().tgid;
        let mut st = self.lock();
        if let Some(process) = st.procs.get(&tgid) {
            return match process.memfd.try_clone() {
                Ok(fd) => OpenAction::Inject(fd),
                Err(e) => OpenAction::Fail(io_errno(&e)),
            };
        }
        match process::Process::create(tgid, &mut st, &self.cfg.machine) {
            Ok(process) => {
                let fd = process.memfd.try_clone();
                let key = process.key;
                let serial = process.serial;
                st.procs.insert(tgid, process);
                drop(st);
                self.register(key, FileKind::Kfd { tgid, serial });
                match fd {
                    Ok(fd) => OpenAction::Inject(fd),
                    Err(e) => OpenAction::Fail(io_errno(&e)),
                }
            }
            Err(errno) => OpenAction::Fail(errno),
        }
    }

    /// A render node: a new DRM file, an empty memfd of its own (see the module docs).
    fn open_render(&self, caller: &dyn Caller, gpu: usize) -> OpenAction {
        let tgid = caller.id().tgid;
        let minor = self.cfg.machine.gpus()[gpu].render_minor;
        let file = files::render_memfd(minor).map_err(|e| io_errno(&e));
        match file.and_then(|fd| Ok((files::key_of(fd.as_fd())?, fd))) {
            Ok((key, fd)) => {
                self.register(key, FileKind::Render { gpu });
                self.lock().render_files.entry(tgid).or_default().push(key);
                OpenAction::Inject(fd)
            }
            Err(errno) => OpenAction::Fail(errno),
        }
    }

    /// What a stand-in whose registration was released (its process exited; a child or a
    /// peer still holds the fd) is, from its memfd name: a `/dev/kfd` of a process that is
    /// gone (ioctls fail with `EBADF`, as the kernel's do for a process that is not the
    /// file's), or a render node (a DRM file no object is allowed on any more).
    fn released_kind(&self, file: BorrowedFd<'_>) -> Option<FileKind> {
        let name = files::standin_name(file)?;
        if name == process::KFD_MEMFD_NAME {
            return Some(FileKind::Kfd { tgid: 0, serial: 0 });
        }
        self.cfg
            .machine
            .gpus()
            .iter()
            .position(|g| name == files::render_name(g.render_minor))
            .map(|gpu| FileKind::Render { gpu })
    }

    /// Runs `f` on the generated sysfs tree, generating it on first use.
    fn with_sysfs<T>(
        &self,
        f: impl FnOnce(&files::SysfsTree) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let mut sysfs = self.sysfs.lock().unwrap_or_else(|e| e.into_inner());
        if sysfs.is_none() {
            *sysfs = Some(files::SysfsTree::generate(&self.cfg.machine).map_err(|e| io_errno(&e))?);
        }
        match sysfs.as_ref() {
            Some(tree) => f(tree),
            None => Err(Errno::NOENT),
        }
    }

    fn open_sysfs(&self, part: files::SysfsPart, rest: &str, flags: i32) -> OpenAction {
        match self.with_sysfs(|tree| tree.open(part, rest, flags)) {
            Ok(fd) => OpenAction::Inject(fd),
            Err(errno) => OpenAction::Fail(errno),
        }
    }
}

/// The errno of an I/O error (EIO when it carries none).
fn io_errno(e: &std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error)
}

/// The two roots under which the kernel publishes the topology.
const SYSFS_ROOTS: [&str; 2] = [
    "/sys/devices/virtual/kfd/kfd/topology",
    "/sys/class/kfd/kfd/topology",
];

/// `major` of `/dev/kfd`. The kernel allocates it dynamically; 235 is what many hosts show.
pub const KFD_MAJOR: u32 = 235;
/// `major` of the DRM nodes (`DRM_MAJOR`).
pub const DRM_MAJOR: u32 = 226;

/// What an emulated path is.
enum Target<'p> {
    Kfd,
    Render(usize),
    ProcModules,
    Sysfs(files::SysfsPart, &'p str),
}

impl Model {
    /// Which emulated file `path` names; `None` for a path that is not the model's.
    fn target<'p>(&self, path: &'p str) -> Option<Target<'p>> {
        if path == "/dev/kfd" {
            return Some(Target::Kfd);
        }
        if let Some(minor) = path.strip_prefix("/dev/dri/renderD") {
            let minor = minor.parse::<u32>().ok()?;
            return self
                .cfg
                .machine
                .gpus()
                .iter()
                .position(|gpu| gpu.render_minor == minor)
                .map(Target::Render);
        }
        if path == "/proc/modules" {
            return Some(Target::ProcModules);
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
        None
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
            Some(Target::Kfd) => self.open_kfd(caller),
            Some(Target::Render(gpu)) => self.open_render(caller, gpu),
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
            Target::Render(gpu) => {
                let minor = self.cfg.machine.gpus()[gpu].render_minor;
                Some(Ok(self.device_stat(DRM_MAJOR, minor)))
            }
            // The host's own /proc/modules stats like the generated one (size 0).
            Target::ProcModules => None,
            Target::Sysfs(part, rest) => Some(self.with_sysfs(|tree| tree.stat(part, rest))),
        }
    }

    fn fstat(
        &self,
        _caller: &dyn Caller,
        file: BorrowedFd<'_>,
    ) -> Option<Result<StatAnswer, Errno>> {
        let key = files::key_of(file).ok()?;
        match self.kind_of(&key).or_else(|| self.released_kind(file))? {
            FileKind::Kfd { .. } => Some(Ok(self.device_stat(KFD_MAJOR, 0))),
            FileKind::Render { gpu } => {
                let minor = self.cfg.machine.gpus()[gpu].render_minor;
                Some(Ok(self.device_stat(DRM_MAJOR, minor)))
            }
            // A dma-buf is the kernel's anonymous file in its own pseudo filesystem: the
            // memfd's regular-file answer stands for it.
            FileKind::Dmabuf { .. } => None,
        }
    }

    fn ioctl(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        cmd: u32,
        arg: u64,
    ) -> Option<IoctlResult> {
        let key = files::key_of(file).ok()?;
        let kind = self.kind_of(&key).or_else(|| self.released_kind(file))?;
        Some(match kind {
            FileKind::Kfd { tgid, serial } => {
                dispatch::kfd_ioctl(self, caller, tgid, serial, cmd, arg)
            }
            FileKind::Render { gpu } => drm::ioctl(self, caller, gpu, cmd, arg),
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
        _prot: u32,
        _flags: u32,
    ) -> MmapAction {
        self.mmap_standin(caller, file, offset, len)
    }

    fn is_standin(&self, file: BorrowedFd<'_>) -> bool {
        // Every memfd the model hands out is named `kfd-emu:<what>` (device nodes, dma-bufs,
        // BO memory, `/proc/modules`); sysfs stand-ins are files of the generated tree, which
        // the kernel's sysfs would not resize either (they are opened read-only).
        files::standin_name(file).is_some()
            || files::key_of(file).is_ok_and(|key| self.kind_of(&key).is_some())
    }

    fn process_exited(&self, tgid: i32) {
        let private = self.lock().render_files.remove(&tgid);
        for key in private.into_iter().flatten() {
            self.unregister(&key);
        }
        process::teardown(self, tgid);
    }
}
