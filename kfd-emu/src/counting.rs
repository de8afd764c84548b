//! A [`Backend`] that counts the ioctls another backend answers, for tests that assert how
//! many ioctls an operation issues (a count that holds on any machine), and records which
//! processes' teardown the backend has done, for tests that check what an exit left behind.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use kfd_ioctl::abi::{AMDKFD_IOCTL_BASE, ioc_nr, ioc_type};
use rustix::io::Errno;

use crate::backend::{
    AddressSpaceChange, Backend, Caller, CallerId, IoctlResult, MmapAction, OpenAction, StatAnswer,
    WriteCall,
};

/// How many KFD command numbers are counted one by one (0x00..0xFF).
const KFD_NRS: usize = 256;

/// Wraps a backend and counts every ioctl it answers: KFD ioctls by command number, DRM ioctls
/// together. Opens and native (unanswered) ioctls are not counted. It also records the
/// processes whose exit the backend has handled ([`Counting::wait_exited`]).
#[derive(Debug)]
pub struct Counting<B: ?Sized> {
    inner: Arc<B>,
    kfd: Box<[AtomicU64; KFD_NRS]>,
    drm: AtomicU64,
    exited: Mutex<Vec<i32>>,
    exit_seen: Condvar,
}

/// The counters at one moment, to compare with a later one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlCounts {
    kfd: Vec<u64>,
    drm: u64,
}

impl IoctlCounts {
    /// How many KFD ioctls with command number `nr` were answered.
    pub fn kfd(&self, nr: u8) -> u64 {
        self.kfd[usize::from(nr)]
    }

    /// How many DRM ioctls were answered.
    pub fn drm(&self) -> u64 {
        self.drm
    }

    /// How many ioctls of any kind were answered.
    pub fn total(&self) -> u64 {
        self.kfd.iter().sum::<u64>() + self.drm
    }

    /// What happened between `earlier` and `self`, as `(ioctl name, count)` for each ioctl
    /// that was answered (names from the ABI table; DRM ioctls as `"DRM"`), in number order.
    pub fn since(&self, earlier: &IoctlCounts) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(&'static str, u64)> = self
            .kfd
            .iter()
            .zip(&earlier.kfd)
            .enumerate()
            .filter(|(_, (now, then))| now != then)
            .map(|(nr, (now, then))| {
                let name = u8::try_from(nr)
                    .ok()
                    .and_then(kfd_ioctl::abi::ioctl_info)
                    .map_or("unknown", |info| info.name);
                (name, now - then)
            })
            .collect();
        if self.drm != earlier.drm {
            out.push(("DRM", self.drm - earlier.drm));
        }
        out
    }
}

impl<B: Backend + ?Sized> Counting<B> {
    /// Counts what `inner` answers.
    pub fn new(inner: Arc<B>) -> Arc<Counting<B>> {
        Arc::new(Counting {
            inner,
            kfd: Box::new(std::array::from_fn(|_| AtomicU64::new(0))),
            drm: AtomicU64::new(0),
            exited: Mutex::new(Vec::new()),
            exit_seen: Condvar::new(),
        })
    }

    /// Waits up to `timeout` until the wrapped backend has handled the exit of process `pid`
    /// (its teardown and leak report done); whether it has.
    pub fn wait_exited(&self, pid: i32, timeout: Duration) -> bool {
        let exited = self.exited.lock().unwrap_or_else(PoisonError::into_inner);
        let (_exited, waited) = self
            .exit_seen
            .wait_timeout_while(exited, timeout, |e| !e.contains(&pid))
            .unwrap_or_else(PoisonError::into_inner);
        !waited.timed_out()
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<B> {
        &self.inner
    }

    /// The counters now.
    pub fn counts(&self) -> IoctlCounts {
        IoctlCounts {
            kfd: self.kfd.iter().map(|c| c.load(Ordering::SeqCst)).collect(),
            drm: self.drm.load(Ordering::SeqCst),
        }
    }
}

impl<B: Backend + ?Sized> Backend for Counting<B> {
    fn open(&self, caller: &dyn Caller, path: &str, flags: i32, mode: u32) -> OpenAction {
        self.inner.open(caller, path, flags, mode)
    }

    fn stat(&self, caller: &dyn Caller, path: &str) -> Option<Result<StatAnswer, Errno>> {
        self.inner.stat(caller, path)
    }

    fn ioctl(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        cmd: u32,
        arg: u64,
    ) -> Option<IoctlResult> {
        let answer = self.inner.ioctl(caller, file, cmd, arg);
        if answer.is_some() {
            if ioc_type(cmd) == AMDKFD_IOCTL_BASE {
                self.kfd[usize::from(ioc_nr(cmd))].fetch_add(1, Ordering::SeqCst);
            } else {
                self.drm.fetch_add(1, Ordering::SeqCst);
            }
        }
        answer
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
        self.inner.mmap(caller, file, offset, len, prot, flags)
    }

    fn fstat(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
    ) -> Option<Result<crate::backend::StatAnswer, Errno>> {
        self.inner.fstat(caller, file)
    }

    fn readlink(&self, caller: &dyn Caller, path: &str) -> Option<Result<String, Errno>> {
        self.inner.readlink(caller, path)
    }

    fn is_standin(&self, file: BorrowedFd<'_>) -> bool {
        self.inner.is_standin(file)
    }

    fn address_space(&self, caller: CallerId, change: AddressSpaceChange) {
        self.inner.address_space(caller, change);
    }

    fn process_exited(&self, tgid: i32) {
        self.inner.process_exited(tgid);
        self.exited
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tgid);
        self.exit_seen.notify_all();
    }

    fn write(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        segments: &dyn Fn() -> Result<WriteCall, Errno>,
    ) -> Option<IoctlResult> {
        self.inner.write(caller, file, segments)
    }
}
