//! File `mmap`s of traced programs: asking [`Backend::mmap`] and carrying its answer out.
//!
//! # In-process attach
//!
//! [`Filter::kfd`](super::seccomp::Filter::kfd) notifies every file `mmap`. The worker takes a
//! duplicate of the caller's fd (`pidfd_getfd`, as for ioctls) and asks the backend; as the
//! supervisor shares the caller's address space, it carries a [`MmapAction::Redirect`] out
//! itself — `mmap(addr, len, prot, flags, memfd, offset)` with the caller's own address,
//! length, protection and flags — and answers the call with the address it got (or
//! `-errno`). `Continue` lets the kernel run the call; `Fail` fails it. A process forked by
//! the attached thread has an address space of its own, which the supervisor cannot map into:
//! its redirected mappings fail with `ENODEV` (use `kfd-emu run` for such programs).
//!
//! # `kfd-emu run`: a traced program
//!
//! The spawned program runs under [`Filter::kfd_traced`](super::seccomp::Filter::kfd_traced)
//! and the supervisor is its ptrace tracer (see [`super::tracer`]). A file `mmap` stops the
//! program (`PTRACE_EVENT_SECCOMP`); the tracer asks the backend and, for a redirect:
//!
//! - to the same file (only the offset changes), rewrites the offset register;
//! - to another file, needs that memory inside the program: it rewrites the fd argument to
//!   the process's **slot** number with [`SLOT_MARKER`] in the upper 32 bits (the kernel's
//!   `fget` only looks at the low 32) and the offset argument, and records the memfd here
//!   ([`Slots`]). The kernel re-runs the filter on the changed registers (Linux ≥ 4.8), which
//!   notifies a marked `mmap`; the worker then installs the memfd at the slot
//!   (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SECCOMP_ADDFD_FLAG_SETFD`, close-on-exec) and answers
//!   `CONTINUE`, so the kernel maps it. A marked `mmap` the tracer did not prepare (a program
//!   passing such a value itself) is answered `CONTINUE` without installing anything.
//!
//! The slot is, per process, the highest free fd number below the program's
//! `RLIMIT_NOFILE` soft limit (at most [`SLOT_CEILING`]), read from `/proc/<pid>/limits`
//! at the first redirect and chosen again when the number was taken by the program meanwhile.
//! **Documented deviation from the kernel:** after a redirected mapping the slot keeps the
//! last memfd open (close-on-exec) until the next redirect replaces it or the process execs
//! or exits, so one fd of the program's table (the highest free one) is used, and the last
//! redirected object stays referenced until then.
//!
//! The tracer lets one thread per process use the slot at a time (another thread's redirect
//! waits, stopped, until the first one's `mmap` has returned), and restores the fd and offset
//! registers at the syscall-exit stop, so that the program sees its own registers back.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use rustix::io::Errno;
use rustix::process::{PidfdGetfdFlags, pidfd_getfd};

pub use super::seccomp::SLOT_MARKER;
use crate::backend::{Backend, CallerId, MmapAction};

/// The highest slot number used, whatever the program's limit: the kernel sizes an fd table
/// to the highest fd in it, so a slot near a limit of 2^20 would cost the program megabytes.
pub const SLOT_CEILING: u32 = 65536;

/// The arguments of an `mmap` as the caller passed them (x86_64 `rdi, rsi, rdx, r10, r8, r9`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MmapArgs {
    pub addr: u64,
    pub len: u64,
    pub prot: u32,
    pub flags: u32,
    pub fd: i32,
    pub offset: u64,
}

impl MmapArgs {
    /// The argument registers again.
    pub(crate) fn regs(&self) -> [u64; 6] {
        [
            self.addr,
            self.len,
            u64::from(self.prot),
            u64::from(self.flags),
            self.fd as u32 as u64,
            self.offset,
        ]
    }

    pub(crate) fn from_regs(args: [u64; 6]) -> Self {
        Self {
            addr: args[0],
            len: args[1],
            prot: args[2] as u32,
            flags: args[3] as u32,
            fd: args[4] as i32,
            offset: args[5],
        }
    }
}

/// Asks `backend` about `args` of `caller`, whose process is `pidfd`: `EBADF` (the kernel's
/// answer) when the fd is not open, `Continue` when it cannot be duplicated. A panic in the
/// backend is answered `EIO`.
pub(crate) fn ask(
    backend: &dyn Backend,
    pidfd: BorrowedFd<'_>,
    caller: CallerId,
    args: &MmapArgs,
) -> (MmapAction, Option<OwnedFd>) {
    let file = match pidfd_getfd(pidfd, args.fd, PidfdGetfdFlags::empty()) {
        Ok(file) => file,
        Err(Errno::BADF) => return (MmapAction::Fail(Errno::BADF), None),
        Err(_) => return (MmapAction::Continue, None),
    };
    let action = catch_unwind(AssertUnwindSafe(|| {
        backend.mmap(
            caller,
            file.as_fd(),
            args.offset,
            args.len,
            args.prot,
            args.flags,
        )
    }))
    .unwrap_or_else(|_| {
        crate::own::elog!("kfd-emu: the backend panicked on an mmap; answering EIO");
        MmapAction::Fail(Errno::IO)
    });
    (action, Some(file))
}

/// Maps `fd` at `offset` into this process with the caller's address, length, protection and
/// flags: the in-process carrying-out of a redirect. Returns the address.
pub(crate) fn map_here(args: &MmapArgs, fd: BorrowedFd<'_>, offset: u64) -> Result<u64, Errno> {
    let offset = libc::off_t::try_from(offset).map_err(|_| Errno::OVERFLOW)?;
    // SAFETY: this is the mapping the attached caller (a thread of this very process) asked
    // the kernel for, with its own address, length, protection and flags; only the file and
    // offset differ. Whatever it replaces (MAP_FIXED) the caller asked to replace, as the
    // kernel would have. Rust code of this process holds no reference into that range that the
    // caller's own call would not have invalidated as well.
    let got = unsafe {
        libc::mmap(
            args.addr as *mut libc::c_void,
            args.len as usize,
            args.prot as i32,
            args.flags as i32,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            offset,
        )
    };
    if got == libc::MAP_FAILED {
        return Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        ));
    }
    Ok(got as u64)
}

/// Undoes [`map_here`] for a caller that went away before its answer: the mapping is not
/// wanted by anyone.
pub(crate) fn unmap_here(addr: u64, len: u64) {
    // SAFETY: `[addr, addr + len)` was just mapped by `map_here` for a call that was never
    // answered, so nothing else refers to it.
    unsafe {
        libc::munmap(addr as *mut libc::c_void, len as usize);
    }
}

/// A redirect the tracer has prepared for one thread: the memfd to install at `slot` when the
/// marked `mmap` is notified.
#[derive(Debug)]
pub(crate) struct Pending {
    pub slot: u32,
    pub fd: Arc<OwnedFd>,
}

/// The redirects prepared by the tracer and not yet installed, by thread id.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    pending: Mutex<HashMap<i32, Pending>>,
}

impl Slots {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `pending` for thread `tid` (before the tracer resumes it).
    pub(crate) fn prepare(&self, tid: i32, pending: Pending) {
        self.map().insert(tid, pending);
    }

    /// Forgets what was prepared for `tid` (at its syscall exit or its death).
    pub(crate) fn forget(&self, tid: i32) {
        self.map().remove(&tid);
    }

    /// The memfd to install for `tid`'s marked `mmap` of `slot`, if the tracer prepared
    /// exactly that.
    pub(crate) fn take(&self, tid: i32, slot: u32) -> Option<Arc<OwnedFd>> {
        let mut map = self.map();
        match map.get(&tid) {
            Some(p) if p.slot == slot => map.remove(&tid).map(|p| p.fd),
            _ => None,
        }
    }
}

/// How the supervisor carries out a file `mmap`'s redirect.
#[derive(Debug, Clone)]
pub(crate) enum Route {
    /// The attached caller shares the supervisor's address space: map it here.
    InProcess,
    /// A traced program: the tracer decided; notifications only install prepared slots.
    Traced(Arc<Slots>),
}
