//! The driver: what every ioctl handler reaches through its [`Ctx`](super::chardev::Ctx) — the
//! [`Device`], the per-process [`State`] under its lock, the table of stand-in files, the armed
//! fault-injection rules and the leak flag. It calls no handler; the dispatcher and the
//! [`Model`](super::backend::Model) on top call into the handlers with it.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock, Weak};

use rustix::io::Errno;

use super::device::Device;
use super::dkms::state::DkmsState;
use super::fail;
use super::files::{self, FileKey};
use super::observe::Observer;
use super::process::{self, State};
use super::vmas::{Hidden, StandIns, Vmas};
use crate::backend::CpuWaker;

/// What a stand-in file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileKind {
    /// `/dev/kfd` of a KFD process (`tgid`, and the serial that tells a process apart from a
    /// later one that reuses the pid).
    Kfd { tgid: i32, serial: u64 },
    /// An open of the render node of GPU index `gpu` (a DRM file): an empty memfd of its own;
    /// `primary` when it was opened as the primary node `/dev/dri/card<N>`, which is the same
    /// kind of DRM file of the same device (what `amdgpu_file_to_fpriv` accepts) under
    /// another minor.
    Render { gpu: usize, primary: bool },
    /// A dma-buf the model exported.
    Dmabuf { id: u64 },
}

/// The shared part of the emulated driver (see the [module docs](self)).
#[derive(Debug)]
pub(super) struct Driver {
    pub dev: Device,
    state: Mutex<State>,
    /// The thread that last took `state` (its holder while it is held).
    state_owner: AtomicI32,
    /// Signalled whenever an event is set or destroyed, or a process goes away.
    pub wake: Condvar,
    pub files: RwLock<HashMap<FileKey, FileKind>>,
    pub fail: Mutex<Vec<fail::Armed>>,
    pub leaks: AtomicBool,
    /// A process's teardown left something behind (an emulator leak; see `teardown`).
    pub teardown_leaks: AtomicBool,
    /// Per KFD process (tgid): its open `/proc/<pid>/maps`, which [`Driver::vmas`] asks.
    maps: Mutex<HashMap<i32, Arc<OwnedFd>>>,
    /// The driver itself, for the engine threads a new queue starts (set when the model
    /// starts; they hold it only while they run a turn).
    pub this: OnceLock<Weak<Driver>>,
    /// CPU faults on SVM pages in VRAM (`svm::cpu`).
    pub cpu: CpuFaults,
    /// The SVM observer a tool installed ([`super::Model::observe_svm`]), if any.
    pub observer: OnceLock<Observer>,
    /// The out-of-tree driver's IPC handles and PC-sampling sessions (`dkms`; empty on the
    /// mainline kernel). Taken after `state` when both are held.
    pub dkms: Mutex<DkmsState>,
    /// The doorbell watcher: the idle queues whose doorbells it reads (`doorbells`).
    pub doorbells: super::doorbells::Watch,
}

/// What CPU faults on SVM pages in VRAM need (`svm::cpu`): the supervisor's waker (set only
/// when it can hide memory from a program: `kfd-emu run`), and per process what it hid.
#[derive(Default)]
pub(super) struct CpuFaults {
    waker: Mutex<Option<CpuWaker>>,
    hidden: Mutex<HashMap<i32, Arc<Hidden>>>,
}

impl std::fmt::Debug for CpuFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuFaults").finish_non_exhaustive()
    }
}

impl CpuFaults {
    /// Sets (or clears) the supervisor's waker.
    pub(super) fn set_waker(&self, waker: Option<CpuWaker>) {
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = waker;
    }

    /// Whether pages in VRAM are hidden from the CPU (a waker is set).
    pub(super) fn enabled(&self) -> bool {
        self.waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Tells the supervisor that what process `tgid` should have hidden changed.
    pub(super) fn wake(&self, tgid: i32) {
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(waker) = waker {
            waker.wake(tgid);
        }
    }

    /// [`CpuWake::sync`](crate::backend::CpuWake::sync), when a waker is set.
    pub(super) fn sync(&self) {
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(waker) = waker {
            waker.sync();
        }
    }

    /// [`CpuWake::cas`](crate::backend::CpuWake::cas) in process `tgid`, when a waker is set
    /// (else [`CasError::Unsupported`](crate::backend::CasError)).
    pub(super) fn cas(
        &self,
        tgid: i32,
        addr: u64,
        size: u8,
        expected: u64,
        new: u64,
    ) -> Result<u64, crate::backend::CasError> {
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match waker {
            Some(waker) => waker.cas(tgid, addr, size, expected, new),
            None => Err(crate::backend::CasError::Unsupported),
        }
    }

    /// What was hidden of process `tgid`, if anything ever was.
    pub(super) fn hidden_of(&self, tgid: i32) -> Option<Arc<Hidden>> {
        self.hidden
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tgid)
            .cloned()
    }

    /// What is hidden of process `tgid`, created empty.
    pub(super) fn hidden_for(&self, tgid: i32) -> Arc<Hidden> {
        Arc::clone(
            self.hidden
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(tgid)
                .or_default(),
        )
    }
}

impl Driver {
    /// The driver of `dev`, with no process yet.
    pub(super) fn new(dev: Device) -> Driver {
        let mut state = State::new(dev.cfg.machine.gpus().len());
        state.acc.apu = dev.cfg.machine.gpus().iter().map(|g| g.apu).collect();
        state.smi.use_clock(Arc::clone(&dev.clock));
        let fail = dev.cfg.fail.iter().cloned().map(fail::Armed::new).collect();
        Driver {
            dev,
            state: Mutex::new(state),
            state_owner: AtomicI32::new(0),
            wake: Condvar::new(),
            files: RwLock::new(HashMap::new()),
            fail: Mutex::new(fail),
            leaks: AtomicBool::new(false),
            teardown_leaks: AtomicBool::new(false),
            maps: Mutex::new(HashMap::new()),
            this: OnceLock::new(),
            cpu: CpuFaults::default(),
            observer: OnceLock::new(),
            dkms: Mutex::new(DkmsState::default()),
            doorbells: super::doorbells::Watch::default(),
        }
    }

    /// The model state, even if a thread panicked while holding it (the state stays
    /// consistent between ioctls, which are the only writers).
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        let guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.state_owner.store(this_thread(), Ordering::Relaxed);
        guard
    }

    /// The model state for the address-space call of thread `tid`, or `None` when `tid`
    /// itself holds it: a thread of this process calling the model's API (a test) whose
    /// allocator unmapped or protected memory while it held the lock is blocked in that call
    /// and cannot be waited for; its change is not applied.
    pub(super) fn lock_for_call(&self, tid: i32) -> Option<MutexGuard<'_, State>> {
        loop {
            match self.state.try_lock() {
                Ok(guard) => {
                    self.state_owner.store(this_thread(), Ordering::Relaxed);
                    return Some(guard);
                }
                Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if self.state_owner.load(Ordering::Relaxed) == tid {
                        return None;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            }
        }
    }

    pub(super) fn register(&self, key: FileKey, kind: FileKind) {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, kind);
    }

    pub(super) fn unregister(&self, key: &FileKey) {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    pub(super) fn kind_of(&self, key: &FileKey) -> Option<FileKind> {
        self.files
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
    }

    /// What a stand-in whose registration was released (its process exited; a child or a
    /// peer still holds the fd) is, from its memfd name: a `/dev/kfd` of a process that is
    /// gone (ioctls fail with `EBADF`, as the kernel's do for a process that is not the
    /// file's), or a render node (a DRM file no object is allowed on any more).
    pub(super) fn released_kind(&self, file: BorrowedFd<'_>) -> Option<FileKind> {
        let name = files::standin_name(file)?;
        if name == process::KFD_MEMFD_NAME {
            return Some(FileKind::Kfd { tgid: 0, serial: 0 });
        }
        files::drm_node(&self.dev.cfg.machine, |minor, primary| {
            name == files::drm_node_name(minor, primary)
        })
        .map(|(gpu, primary)| FileKind::Render { gpu, primary })
    }

    /// The VMAs of process `tgid`; the model's stand-ins are device memory. The process's
    /// maps file is opened at the first call and kept until [`Driver::forget_maps`] (its
    /// exit); on a kernel without `PROCMAP_QUERY` the maps text is read and parsed at each
    /// call. (Here rather than in [`vmas`](super::vmas), which knows nothing of the
    /// stand-ins.)
    pub(super) fn vmas(&self, tgid: i32) -> Result<Vmas<'_>, Errno> {
        static QUERY: OnceLock<bool> = OnceLock::new();
        let io = |e: std::io::Error| {
            e.raw_os_error()
                .map_or(Errno::FAULT, Errno::from_raw_os_error)
        };
        let path = format!("/proc/{tgid}/maps");
        let maps = {
            let mut all = self.maps.lock().unwrap_or_else(|e| e.into_inner());
            match all.get(&tgid) {
                Some(maps) => Arc::clone(maps),
                None => {
                    let maps = Arc::new(OwnedFd::from(std::fs::File::open(&path).map_err(io)?));
                    all.insert(tgid, Arc::clone(&maps));
                    maps
                }
            }
        };
        let hidden = self.cpu.hidden_of(tgid);
        if *QUERY.get_or_init(|| Vmas::query_supported(&maps)) {
            return Ok(Vmas::query(maps, self).through(hidden));
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Ok(Vmas::parse(&text, self).through(hidden))
    }

    /// Closes process `tgid`'s maps file (it exited).
    pub(super) fn forget_maps(&self, tgid: i32) {
        self.maps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tgid);
        self.cpu
            .hidden
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tgid);
    }
}

/// The calling thread's id.
fn this_thread() -> i32 {
    thread_local! {
        static TID: i32 = rustix::thread::gettid().as_raw_nonzero().get();
    }
    TID.with(|tid| *tid)
}

impl StandIns for Driver {
    fn is_stand_in(&self, dev: u64, inode: u64) -> bool {
        self.files
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&(dev, inode))
    }
}
