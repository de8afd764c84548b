//! [`Caller`] for a held system call: the caller's memory through `process_vm_readv` /
//! `process_vm_writev`, fd installation through `SECCOMP_IOCTL_NOTIF_ADDFD`.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use nix::sys::uio::{RemoteIoVec, process_vm_readv, process_vm_writev};
use nix::unistd::Pid;
use rustix::io::Errno;

use super::seccomp::Listener;
use crate::backend::{Caller, CallerId};

/// `PATH_MAX`, counting the terminating NUL.
const PATH_MAX: usize = libc::PATH_MAX as usize;
const PAGE: usize = 4096;

/// The caller of one notification.
#[derive(Debug, Clone)]
pub(crate) struct NotifCaller {
    listener: Arc<Listener>,
    notif_id: u64,
    who: CallerId,
}

fn from_nix(errno: nix::errno::Errno) -> Errno {
    match errno {
        // The thread is gone: the notification is too.
        nix::errno::Errno::ESRCH => Errno::NOENT,
        other => Errno::from_raw_os_error(other as i32),
    }
}

impl NotifCaller {
    pub(crate) fn new(listener: Arc<Listener>, notif_id: u64, who: CallerId) -> Self {
        Self {
            listener,
            notif_id,
            who,
        }
    }

    pub(crate) fn notif_id(&self) -> u64 {
        self.notif_id
    }

    pub(crate) fn listener(&self) -> &Listener {
        &self.listener
    }

    /// `ENOENT` unless the notification is still pending, i.e. the thread is still the caller.
    pub(crate) fn still_valid(&self) -> Result<(), Errno> {
        if self.listener.id_valid(self.notif_id) {
            Ok(())
        } else {
            Err(Errno::NOENT)
        }
    }

    fn remote(addr: u64, len: usize) -> Result<RemoteIoVec, Errno> {
        let base = usize::try_from(addr).map_err(|_| Errno::FAULT)?;
        base.checked_add(len).ok_or(Errno::FAULT)?;
        Ok(RemoteIoVec { base, len })
    }

    /// Reads the NUL-terminated path at `addr`, without its NUL.
    ///
    /// The string may end just before an unmapped page, so it is read as one remote iovec per
    /// page: a transfer stops at the first iovec that faults and keeps what came before.
    /// `EFAULT` if the first byte is unreadable or the string runs into a fault,
    /// `ENAMETOOLONG` without a NUL in `PATH_MAX` bytes.
    pub(crate) fn read_path(&self, addr: u64) -> Result<Vec<u8>, Errno> {
        let start = usize::try_from(addr).map_err(|_| Errno::FAULT)?;
        let mut remote = Vec::with_capacity(2);
        let mut at = start;
        let mut left = PATH_MAX;
        while left > 0 {
            let len = (PAGE - at % PAGE).min(left);
            let end = at.checked_add(len).ok_or(Errno::FAULT)?;
            remote.push(RemoteIoVec { base: at, len });
            at = end;
            left -= len;
        }
        let mut buf = vec![0u8; PATH_MAX];
        let got = process_vm_readv(
            Pid::from_raw(self.who.tid),
            &mut [IoSliceMut::new(&mut buf)],
            &remote,
        )
        .map_err(from_nix)?;
        self.still_valid()?;
        match buf[..got].iter().position(|&b| b == 0) {
            Some(nul) => {
                buf.truncate(nul);
                Ok(buf)
            }
            None if got < PATH_MAX => Err(Errno::FAULT),
            None => Err(Errno::NAMETOOLONG),
        }
    }
}

impl Caller for NotifCaller {
    fn id(&self) -> CallerId {
        self.who
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if !buf.is_empty() {
            let remote = [Self::remote(addr, buf.len())?];
            let want = buf.len();
            let got = process_vm_readv(
                Pid::from_raw(self.who.tid),
                &mut [IoSliceMut::new(buf)],
                &remote,
            )
            .map_err(from_nix)?;
            if got != want {
                return Err(Errno::FAULT);
            }
        }
        self.still_valid()
    }

    fn write(&self, addr: u64, buf: &[u8]) -> Result<(), Errno> {
        // Checked before writing: never write into a process that merely reuses the tid.
        self.still_valid()?;
        if buf.is_empty() {
            return Ok(());
        }
        let remote = [Self::remote(addr, buf.len())?];
        let got = process_vm_writev(Pid::from_raw(self.who.tid), &[IoSlice::new(buf)], &remote)
            .map_err(from_nix)?;
        if got != buf.len() {
            return Err(Errno::FAULT);
        }
        Ok(())
    }

    fn install_fd(&self, fd: BorrowedFd<'_>, cloexec: bool) -> Result<i32, Errno> {
        self.listener.add_fd(self.notif_id, fd, cloexec, false)
    }
}
