//! The driver: what every ioctl handler reaches through its [`Ctx`](super::chardev::Ctx) — the
//! [`Device`], the per-process [`State`] under its lock, the table of stand-in files, the armed
//! fault-injection rules and the leak flag. It calls no handler; the dispatcher and the
//! [`Model`](super::backend::Model) on top call into the handlers with it.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use rustix::io::Errno;

use super::device::Device;
use super::fail;
use super::files::{self, FileKey};
use super::process::{self, State};
use super::vmas::Vmas;

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
    /// Signalled whenever an event is set or destroyed, or a process goes away.
    pub wake: Condvar,
    pub files: RwLock<HashMap<FileKey, FileKind>>,
    pub fail: Mutex<Vec<fail::Armed>>,
    pub leaks: AtomicBool,
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
            wake: Condvar::new(),
            files: RwLock::new(HashMap::new()),
            fail: Mutex::new(fail),
            leaks: AtomicBool::new(false),
        }
    }

    /// The model state, even if a thread panicked while holding it (the state stays
    /// consistent between ioctls, which are the only writers).
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Reads process `tgid`'s maps; the model's stand-ins are device memory. (Here rather
    /// than in [`vmas`](super::vmas), which knows nothing of the stand-ins.)
    pub(super) fn read_vmas(&self, tgid: i32) -> Result<Vmas, Errno> {
        let text = std::fs::read_to_string(format!("/proc/{tgid}/maps")).map_err(|e| {
            e.raw_os_error()
                .map_or(Errno::FAULT, Errno::from_raw_os_error)
        })?;
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        Ok(Vmas::parse(&text, |dev, ino| {
            files.contains_key(&(dev, ino))
        }))
    }
}
