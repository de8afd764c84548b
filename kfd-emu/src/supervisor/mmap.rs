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
//! and the supervisor is its ptrace tracer (see [`super::tracer`]). A file `mmap` is notified
//! as in attach mode; the worker asks the backend ([`ask`]) and answers `Continue` and `Fail`
//! itself. A redirect it hands to the tracer ([`Slots::request`], a [`Request`]), which
//! answers the notification:
//!
//! - a thread the tracer traces (the usual case) is interrupted (`PTRACE_INTERRUPT`: the
//!   thread waits killable for the answer, so the interrupt only marks it) and the call
//!   answered `-ERESTARTNOINTR`. On its way out of the call the thread stops for the
//!   interrupt (`exit_to_user_mode_loop` → `arch_do_signal_or_restart` → `get_signal` →
//!   `do_jobctl_trap`), and after that stop the kernel restarts the call
//!   (`arch_do_signal_or_restart`: `-ERESTARTNOINTR` → `regs->ax = regs->orig_ax; regs->ip
//!   -= 2`) with the argument registers the stop leaves, so at the stop the tracer:
//!   - for a redirect to the same file (only the offset changes), rewrites the offset and
//!     puts [`DIRECT_MARKER`](super::seccomp::DIRECT_MARKER) in the fd argument's upper 32
//!     bits, which the filter allows (the kernel's fd is the low 32 bits); the result
//!     comes back at the call's exit stop;
//!   - for another file, needs that memory inside the program, for the length of the call
//!     only:
//!     1. it records the memfd here ([`Slots`]) and rewrites the fd argument to
//!        [`SLOT_MARKER`] in the upper 32 bits, which the filter notifies. The worker
//!        installs the memfd with `SECCOMP_IOCTL_NOTIF_ADDFD` **without**
//!        `SECCOMP_ADDFD_FLAG_SETFD` (close-on-exec, answering the call with the number,
//!        `SECCOMP_ADDFD_FLAG_SEND`): the kernel picks the lowest free number as it does
//!        for any new fd, so nothing of the program's is ever replaced, whatever its other
//!        threads do meanwhile;
//!     2. at that call's syscall-exit stop the tracer re-executes the `mmap` (instruction
//!        pointer back over the 2-byte `syscall`) with that number and the backend's
//!        offset, marked direct;
//!     3. at its exit stop the tracer re-executes once more as `close(number)`, and at that
//!        call's exit gives the program all its registers back with the `mmap`'s result.
//!
//!   The tracer tells a syscall-exit stop from an entry stop with `PTRACE_GET_SYSCALL_INFO`
//!   (Linux 5.3; the supervisor needs 5.14 for `SECCOMP_ADDFD_FLAG_SEND` anyway). A stop
//!   that is not in that call (the thread killed, or answered otherwise) is passed over.
//! - a thread lent to the program's own tracer (see [`super::tracer`]) cannot be stopped
//!   nor have its registers changed by the supervisor; its helper does the mapping: a
//!   process the tracer made the thread `clone` before lending it, sharing its memory and fd
//!   table, stopped and running only the calls the tracer issues. The memfd is installed in
//!   the thread's fd table (ADDFD without `SEND`, at a number the kernel picks), the helper
//!   maps it with the caller's address, length, protection and flags at the backend's offset
//!   (marked direct) and closes it, and the call is answered with the helper's result. A
//!   lent thread without a helper gets `ENOSYS`, the kernel's answer to a
//!   `SECCOMP_RET_TRACE` without a tracer that asked for seccomp stops (what the filter
//!   returned for file `mmap`s before).
//!
//! So the program runs no instruction of its own while the memfd is in its table (its other
//! threads can see the number for that while), and nothing of it stays there afterwards.
//! When the program's table is full (the kernel's `mmap` needs no fd), the installer (the
//! worker, or the tracer for a helper) raises the process's soft `RLIMIT_NOFILE` by one
//! (`prlimit`, raising the hard limit too if needed, which takes `CAP_SYS_RESOURCE`), installs
//! at that number and puts the limit back at once; another thread of the program sees the
//! higher limit only during that ADDFD. Only if that fails too (no `CAP_SYS_RESOURCE` with
//! soft = hard, or `fs.nr_open` reached) does the `mmap` fail, with `EMFILE`.
//!
//! A marked `mmap` the tracer did not prepare (a program passing such a value itself) is
//! answered `CONTINUE` without installing anything, and a direct one runs natively. Each
//! thread goes through this on its own: two threads' redirects get two numbers. A signal that
//! arrives between the steps runs its handler as it would after any system call (the
//! re-issued call is made when the handler returns, as a restarted call is); a file `mmap`
//! that handler itself makes meanwhile runs natively, not redirected (a limit: a thread's
//! redirects do not nest). A call the tracer has the thread issue runs even if a filter of the
//! program's own traces it.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use rustix::io::Errno;
use rustix::process::{PidfdGetfdFlags, pidfd_getfd};

pub use super::seccomp::SLOT_MARKER;
use crate::backend::{Backend, CallerId, MmapAction};

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
        // The supervisor's own table is full: a memfd may be a stand-in, whose native
        // mapping would show the wrong memory, so it fails as an allocation would.
        Err(errno @ (Errno::MFILE | Errno::NFILE)) if holds_memfd(caller.tgid, args.fd) => {
            return (MmapAction::Fail(errno), None);
        }
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

/// The device and inode of `fd`'s file.
pub(crate) fn file_id(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|st| (st.st_dev, st.st_ino))
}

/// Whether fd `fd` of process `tgid` is a memfd (what every stand-in is), by its
/// `/proc/<tgid>/fd/<fd>` link, which needs no fd of ours. Asked when the supervisor cannot
/// duplicate the fd because its own fd table is full: a stand-in's call must then fail
/// cleanly (`EMFILE`/`ENFILE`, what a kernel allocation that cannot be made answers) rather
/// than run natively on the stand-in's memfd. No KFD or DRM ioctl and no device mapping
/// means anything on a program's own memfd either, so failing those too loses nothing.
pub(crate) fn holds_memfd(tgid: i32, fd: i32) -> bool {
    std::fs::read_link(format!("/proc/{tgid}/fd/{fd}"))
        .is_ok_and(|link| link.as_os_str().as_encoded_bytes().starts_with(b"/memfd:"))
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

/// A redirect the tracer has prepared for one thread: the memfd to install when its marked
/// `mmap` is notified, and the thread's process (whose fd limit may have to be raised).
#[derive(Debug)]
pub(crate) struct Pending {
    pub tgid: i32,
    pub fd: Arc<OwnedFd>,
}

/// A traced program's file `mmap` the backend redirected, which a worker received and hands
/// to the tracer (which answers the notification: see the module docs).
#[derive(Debug)]
pub(crate) struct Request {
    /// The notification, on `listener`.
    pub id: u64,
    pub listener: Arc<super::seccomp::Listener>,
    pub tid: i32,
    pub tgid: i32,
    /// The call's argument registers.
    pub args: [u64; 6],
    /// The backend's file and offset, and whether that file is the one the caller passed
    /// (then only the offset changes).
    pub fd: Arc<OwnedFd>,
    pub offset: u64,
    pub same: bool,
}

/// The redirects prepared by the tracer and not yet installed, by thread id.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    pending: Mutex<HashMap<i32, Pending>>,
    /// Redirected `mmap`s the workers received, for the tracer, and how many were posted
    /// and taken so far.
    requests: Mutex<(Vec<Request>, u64, u64)>,
    taken: std::sync::Condvar,
    /// Per process, a `syscall` instruction (the address after the one of a notified
    /// `mmap`, less its 2 bytes), for the calls the tracer injects.
    insns: Mutex<HashMap<i32, u64>>,
    /// The tracer's CPU-fault wakeups (see [`super::tracer`]), shared with the workers.
    pub(crate) cpu: Arc<super::wakeups::Wakeups>,
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

    /// What to install for `tid`'s marked `mmap`, if the tracer prepared it.
    pub(crate) fn take(&self, tid: i32) -> Option<Pending> {
        self.map().remove(&tid)
    }

    /// Hands `request` to the tracer, interrupting its `waitpid` until it has taken it (a
    /// kick that comes before the tracer's `waitpid` is lost: it is sent again), 2 s at most.
    pub(crate) fn request(&self, request: Request) {
        let mut queue = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        queue.0.push(request);
        queue.1 += 1;
        let mine = queue.1;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while queue.2 < mine && std::time::Instant::now() < deadline {
            drop(queue);
            self.cpu.kick();
            queue = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            if queue.2 >= mine {
                break;
            }
            queue = self
                .taken
                .wait_timeout(queue, std::time::Duration::from_millis(5))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The requests handed over since the last call.
    pub(crate) fn take_requests(&self) -> Vec<Request> {
        let mut queue = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        queue.2 = queue.1;
        let taken = std::mem::take(&mut queue.0);
        drop(queue);
        self.taken.notify_all();
        taken
    }

    /// Records that process `tgid` made a system call at the `syscall` instruction `insn`.
    pub(crate) fn note_insn(&self, tgid: i32, insn: u64) {
        self.insns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tgid, insn);
    }

    /// A `syscall` instruction of process `tgid` a worker saw, if any (taken: the tracer
    /// keeps what it checked).
    pub(crate) fn take_insn(&self, tgid: i32) -> Option<u64> {
        self.insns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tgid)
    }
}

/// `prlimit64(pid, RLIMIT_NOFILE, new, old)`.
fn prlimit_nofile(pid: i32, new: Option<&libc::rlimit64>) -> Result<libc::rlimit64, Errno> {
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let new = new.map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: prlimit64 reads `new` (a live local or null) and writes `old`, both
    // `struct rlimit64`.
    let ret = unsafe { libc::prlimit64(pid, libc::RLIMIT_NOFILE, new, &raw mut old) };
    if ret < 0 {
        return Err(Errno::from_raw_os_error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EPERM),
        ));
    }
    Ok(old)
}

/// Runs `install` (an ADDFD into process `tgid` that found its table full) again with the
/// process's soft `RLIMIT_NOFILE` one higher, then puts the limit back: the kernel's `mmap`
/// needs no free fd, so the emulator's must not either (see the module docs).
pub(crate) fn with_one_more_fd<T>(
    tgid: i32,
    install: impl FnOnce() -> Result<T, Errno>,
) -> Result<T, Errno> {
    // One raise at a time, so that a second one never takes the first's raised limit for
    // the one to restore.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let old = prlimit_nofile(tgid, None).map_err(|_| Errno::MFILE)?;
    let raised = libc::rlimit64 {
        rlim_cur: old.rlim_cur.saturating_add(1),
        rlim_max: old.rlim_max.max(old.rlim_cur.saturating_add(1)),
    };
    prlimit_nofile(tgid, Some(&raised)).map_err(|_| Errno::MFILE)?;
    let got = install();
    // Lowering a limit below an open fd is allowed; the fd stays.
    let _ = prlimit_nofile(tgid, Some(&old));
    got
}

/// How the supervisor carries out a file `mmap`'s redirect.
#[derive(Debug, Clone)]
pub(crate) enum Route {
    /// The attached caller shares the supervisor's address space: map it here.
    InProcess,
    /// A traced program: the tracer decided; notifications only install the memfds it
    /// prepared.
    Traced(Arc<Slots>),
}
