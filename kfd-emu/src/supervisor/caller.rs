//! [`Caller`] for a held system call: the caller's memory through `/proc/<pid>/mem`, fd
//! installation through `SECCOMP_IOCTL_NOTIF_ADDFD`.
//!
//! # Reaching the caller's memory (seccomp_unotify(2)'s order)
//!
//! A notification names its caller by thread id, and a thread id can be reused as soon as the
//! caller is killed. Memory is therefore reached through a file that pins one address space:
//! `/proc/<tid>/mem` is opened **first**, `SECCOMP_IOCTL_NOTIF_ID_VALID` is checked **second**
//! (the caller still waiting proves the file is its address space, not that of a process that
//! reuses the id), and only then is the file read or written (`pread`/`pwrite` at the address).
//! The file is kept per process ([`ProcMem`]) so that later calls skip the open; it stays tied
//! to the address space it was validated for: once that address space is gone (the process
//! exec'd or exited) the file reads and writes nothing, and it is reopened and validated again
//! for the new caller. A caller that shares its parent's address space (a `vfork` child) is
//! never cached: after its exec the file would still reach the parent. That is the whole of
//! the man page's order: a write needs no `ID_VALID` of its own, since the file cannot reach
//! another process. (A check right before the write
//! would only narrow, not close, the window in which a caller interrupted by a signal after
//! its call was read gets the answer written into its memory anyway; a read is followed by a
//! check, so that a call whose caller went away is not carried out.)
//!
//! Nothing here runs on the supervisor's receiving loop: callers are served on worker threads
//! ([`super::serve`]), so a read that blocks (a page behind an unserved userfaultfd, a hung FUSE
//! mount) blocks only the worker serving that caller.

use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::seccomp::Listener;
use crate::backend::{Caller, CallerId};
use crate::procmap;

/// `PATH_MAX`, counting the terminating NUL.
const PATH_MAX: usize = libc::PATH_MAX as usize;
const PAGE: u64 = 4096;

/// The files of one address space, opened on a thread validated as a caller afterwards.
#[derive(Debug)]
struct MemFiles {
    /// `/proc/<tid>/mem`: the bytes.
    mem: OwnedFd,
    /// `/proc/<tid>/maps`: the protections, which the memory file does not honour (it
    /// reaches pages the way a debugger does).
    maps: OwnedFd,
}

/// A VMA as `PROCMAP_QUERY` described it: `[start, end)` with its `PROCMAP_QUERY_VMA_*` flags.
#[derive(Debug, Clone, Copy)]
struct Vma {
    start: u64,
    end: u64,
    flags: u64,
}

impl MemFiles {
    /// Whether every byte of `[addr, addr + len)` is in a VMA with all of `need`
    /// (`PROCMAP_QUERY_VMA_READABLE`/`_WRITABLE`): what the kernel's `copy_{from,to}_user` would reach.
    /// `Gone` when the address space is gone. On kernels without `PROCMAP_QUERY` the check
    /// is skipped (an approximation: a protected page is then reached like a debugger would).
    ///
    /// `seen` is the VMA the last query of this call described: an access it covers with
    /// the protections needed is not queried again (see [`NotifCaller`]'s `seen`), and a
    /// query made here replaces it.
    fn allows(
        &self,
        seen: &Cell<Option<Vma>>,
        addr: u64,
        len: usize,
        need: u64,
    ) -> Result<Transfer, Errno> {
        let end = addr.checked_add(len as u64).ok_or(Errno::FAULT)?;
        let mut at = addr;
        while at < end {
            if let Some(vma) = seen.get()
                && vma.start <= at
                && at < vma.end
                && vma.flags & need == need
            {
                at = vma.end;
                continue;
            }
            let q = match procmap::procmap_query(self.maps.as_fd(), at, 0, &mut []) {
                Ok(q) => q,
                Err(Errno::NOENT) => return Err(Errno::FAULT),
                Err(Errno::SRCH) => return Ok(Transfer::Gone),
                Err(Errno::NOTTY | Errno::INVAL) => return Ok(Transfer::Moved(len)),
                Err(other) => return Err(other),
            };
            if q.vma_flags & need != need || q.vma_end <= at || q.vma_start > at {
                return Err(Errno::FAULT);
            }
            seen.set(Some(Vma {
                start: q.vma_start,
                end: q.vma_end,
                flags: q.vma_flags,
            }));
            at = q.vma_end;
        }
        Ok(Transfer::Moved(len))
    }
}

/// One process's memory files, opened on a thread that was then validated as a caller.
#[derive(Debug, Default)]
pub(crate) struct ProcMem {
    files: Mutex<Option<Arc<MemFiles>>>,
}

/// What a transfer through the memory file did.
enum Transfer {
    /// This many bytes (fewer than asked when a page is not mapped).
    Moved(usize),
    /// Nothing: the address space the file was opened on is gone.
    Gone,
}

fn transfer(result: Result<usize, Errno>, want: usize) -> Result<Transfer, Errno> {
    match result {
        Ok(0) if want > 0 => Ok(Transfer::Gone),
        Ok(n) => Ok(Transfer::Moved(n)),
        // EIO: the first page is not mapped; EINVAL: the address is past loff_t.
        Err(Errno::IO | Errno::INVAL | Errno::FAULT) => Err(Errno::FAULT),
        Err(Errno::SRCH) => Err(Errno::NOENT),
        Err(other) => Err(other),
    }
}

impl ProcMem {
    /// The validated files for `caller`: the cached ones, or (with `fresh`, or when none are
    /// cached) `/proc/<tid>/{mem,maps}` opened now and validated by `ID_VALID` after the
    /// open.
    fn files(&self, caller: &NotifCaller, fresh: bool) -> Result<Arc<MemFiles>, Errno> {
        let mut cached = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if !fresh && let Some(files) = cached.as_ref() {
            return Ok(Arc::clone(files));
        }
        let tid = caller.who.tid;
        let open = |what: &str, flags: OFlags| {
            let path = format!("/proc/{tid}/{what}");
            rustix::fs::open(path.as_str(), flags | OFlags::CLOEXEC, Mode::empty())
        };
        let mem = open_then_validate(|| open("mem", OFlags::RDWR), || Ok(()))?;
        let maps = open_then_validate(|| open("maps", OFlags::RDONLY), || caller.still_valid())?;
        let files = Arc::new(MemFiles { mem, maps });
        // A caller that shares its parent's address space (a `vfork` child before its exec,
        // as glibc's `posix_spawn` makes) gets files for this call only: kept, they would
        // still reach the parent's memory after the child's exec, since that address space
        // lives on, and no read through them would fail to say so.
        if !shares_parent_address_space(tid) {
            *cached = Some(Arc::clone(&files));
        }
        Ok(files)
    }

    /// Checks `[addr, addr + len)` has `need`, then runs `op` on the memory file; both are
    /// retried once on freshly opened files if the address space is gone (an `exec`).
    fn access(
        &self,
        caller: &NotifCaller,
        addr: u64,
        len: usize,
        need: u64,
        mut op: impl FnMut(BorrowedFd<'_>) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let mut fresh = false;
        loop {
            let files = self.files(caller, fresh)?;
            if let Transfer::Moved(_) = files.allows(&caller.seen, addr, len, need)?
                && let Transfer::Moved(n) = transfer(op(files.mem.as_fd()), len)?
            {
                return Ok(n);
            }
            if fresh {
                return Err(Errno::NOENT);
            }
            // What was seen of the old address space says nothing of the new one.
            caller.seen.set(None);
            fresh = true;
        }
    }
}

/// Whether thread `tid` shares its address space with its parent process (`kcmp(KCMP_VM)`):
/// a `vfork` child before its exec, or a `CLONE_VM` child. Unknown (no `kcmp`, the parent
/// gone) counts as not shared.
fn shares_parent_address_space(tid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    let ppid = status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse::<libc::pid_t>().ok());
    let Some(ppid) = ppid.filter(|&p| p > 0) else {
        return false;
    };
    // SAFETY: `kcmp` with KCMP_VM compares two processes' mm pointers; it takes no pointer
    // arguments and touches no memory of ours.
    let same = unsafe { libc::syscall(libc::SYS_kcmp, tid, ppid, KCMP_VM, 0, 0) };
    same == 0
}

/// `KCMP_VM` from `<linux/kcmp.h>`.
const KCMP_VM: libc::c_int = 1;

/// seccomp_unotify(2)'s order for reaching a caller: `open` the memory file first, then
/// `still_valid` (`SECCOMP_IOCTL_NOTIF_ID_VALID`); the file is returned only when the caller was
/// still waiting after the open, so it cannot be the address space of a process that reuses
/// the thread id.
pub(crate) fn open_then_validate(
    open: impl FnOnce() -> Result<OwnedFd, Errno>,
    still_valid: impl FnOnce() -> Result<(), Errno>,
) -> Result<OwnedFd, Errno> {
    let file = open()?;
    still_valid()?;
    Ok(file)
}

/// The caller of one notification.
#[derive(Debug)]
pub(crate) struct NotifCaller {
    listener: Arc<Listener>,
    notif_id: u64,
    who: CallerId,
    mem: Arc<ProcMem>,
    /// The VMA the last `PROCMAP_QUERY` of this call described. Later accesses of the same
    /// call inside it (the write of an ioctl's result over the argument it read) are not
    /// queried again. This widens, to the length of one call, the window that the
    /// query-then-access order already has: another thread of the caller that changes the
    /// mapping while the call is held can have an access land as if the change came after
    /// it. The caller's own thread is held, and the next call queries afresh.
    seen: Cell<Option<Vma>>,
    /// The tracer moves an fd installed for this call into place at its exit (see
    /// [`Caller::install_fd_in`]).
    fds_moved_by_tracer: bool,
}

/// Whether thread `tid` uses this process's fd table (`kcmp(KCMP_FILES)`).
fn shares_our_fd_table(tid: i32) -> bool {
    const KCMP_FILES: libc::c_long = 2;
    // SAFETY: kcmp(2) takes plain integers and only compares kernel objects.
    let same = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            libc::c_long::from(rustix::process::getpid().as_raw_nonzero().get()),
            libc::c_long::from(tid),
            KCMP_FILES,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    same == 0
}

impl NotifCaller {
    pub(crate) fn new(
        listener: Arc<Listener>,
        notif_id: u64,
        who: CallerId,
        mem: Arc<ProcMem>,
    ) -> Self {
        Self {
            listener,
            notif_id,
            who,
            mem,
            seen: Cell::new(None),
            fds_moved_by_tracer: false,
        }
    }

    /// Says that the tracer moves an fd this call installs into place at the call's exit (a
    /// traced program's SMI_EVENTS that the tracer marked).
    pub(crate) fn fds_moved_by_tracer(mut self) -> Self {
        self.fds_moved_by_tracer = true;
        self
    }

    pub(crate) fn notif_id(&self) -> u64 {
        self.notif_id
    }

    pub(crate) fn listener(&self) -> &Listener {
        &self.listener
    }

    /// Reads the NUL-terminated path at `addr`, without its NUL.
    ///
    /// The string may end just before an unmapped page: a read of the memory file stops at
    /// the first page it cannot reach and keeps what came before. `EFAULT` if the first byte
    /// is unreadable or the string runs into a fault, `ENAMETOOLONG` without a NUL in
    /// `PATH_MAX` bytes.
    pub(crate) fn read_path(&self, addr: u64) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; PATH_MAX];
        let mut got = 0;
        // A read may stop early at a page boundary; go on until a NUL, a fault or PATH_MAX.
        while got < PATH_MAX && !buf[..got].contains(&0) {
            let at = addr.checked_add(got as u64).ok_or(Errno::FAULT)?;
            // Up to the end of the page, then page by page: a string may end just before a
            // page the caller cannot read.
            let len = ((PAGE - at % PAGE) as usize).min(PATH_MAX - got);
            let n =
                match self
                    .mem
                    .access(self, at, len, procmap::PROCMAP_QUERY_VMA_READABLE, |fd| {
                        rustix::io::pread(fd, &mut buf[got..got + len], at)
                    }) {
                    Ok(n) => n,
                    Err(Errno::FAULT) if got > 0 => break,
                    Err(e) => return Err(e),
                };
            got += n;
        }
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
        let want = buf.len();
        if want > 0 {
            addr.checked_add(want as u64).ok_or(Errno::FAULT)?;
            let got = self.mem.access(
                self,
                addr,
                want,
                procmap::PROCMAP_QUERY_VMA_READABLE,
                |fd| rustix::io::pread(fd, &mut *buf, addr),
            )?;
            if got != want {
                return Err(Errno::FAULT);
            }
        }
        self.still_valid()
    }

    fn write(&self, addr: u64, buf: &[u8]) -> Result<(), Errno> {
        if buf.is_empty() {
            return self.still_valid();
        }
        addr.checked_add(buf.len() as u64).ok_or(Errno::FAULT)?;
        // Through the file, which was validated by `ID_VALID` after its open: never into a
        // process that merely reuses the tid (see the module docs for why no further check).
        let got = self.mem.access(
            self,
            addr,
            buf.len(),
            procmap::PROCMAP_QUERY_VMA_WRITABLE,
            |fd| rustix::io::pwrite(fd, buf, addr),
        )?;
        if got != buf.len() {
            return Err(Errno::FAULT);
        }
        Ok(())
    }

    fn still_valid(&self) -> Result<(), Errno> {
        if self.listener.id_valid(self.notif_id) {
            Ok(())
        } else {
            Err(Errno::NOENT)
        }
    }

    fn install_fd(&self, fd: BorrowedFd<'_>, cloexec: bool) -> Result<i32, Errno> {
        self.listener.add_fd(self.notif_id, fd, cloexec, false)
    }

    fn dup_fd(&self, fd: i32) -> Result<OwnedFd, Errno> {
        use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};
        let pid = Pid::from_raw(self.who.tgid).ok_or(Errno::SRCH)?;
        let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
        let file = pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty())?;
        // The notification still held: the pidfd is the caller's process, not a reuse.
        self.still_valid()?;
        Ok(file)
    }

    /// Three ways, by whose fd table it is:
    ///
    /// - the supervisor's own (an attached thread): `fcntl(F_DUPFD)` here, atomic;
    /// - a traced program's SMI_EVENTS, marked by the tracer ([`Self::fds_moved_by_tracer`]):
    ///   ADDFD at the number the kernel picks, never replacing anything; at the call's exit
    ///   the tracer has the program itself `fcntl(F_DUPFD)` it into `range` and close the
    ///   first number, and rewrites the number the call returns (see `tracer`);
    /// - any other (a process an attached thread forked): a free number of `range` is read
    ///   from `/proc/<pid>/fd` and ADDFD puts the fd there with `SECCOMP_ADDFD_FLAG_SETFD`.
    ///   **Deviation:** that is not atomic; a descriptor the process makes at that number in
    ///   between is replaced. Only such forked children of attached threads (tests) take
    ///   this way.
    fn install_fd_in(
        &self,
        fd: BorrowedFd<'_>,
        range: std::ops::Range<u32>,
        cloexec: bool,
    ) -> Result<i32, Errno> {
        if self.fds_moved_by_tracer {
            return self.listener.add_fd(self.notif_id, fd, cloexec, false);
        }
        if shares_our_fd_table(self.who.tid) {
            let start = i32::try_from(range.start).map_err(|_| Errno::MFILE)?;
            let arg = if cloexec {
                nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(start)
            } else {
                nix::fcntl::FcntlArg::F_DUPFD(start)
            };
            let new = nix::fcntl::fcntl(fd.as_raw_fd(), arg)
                // EINVAL: the start is not below the limit.
                .map_err(|e| match e as i32 {
                    libc::EINVAL => Errno::MFILE,
                    other => Errno::from_raw_os_error(other),
                })?;
            if u32::try_from(new).map_or(true, |n| n >= range.end) {
                // SAFETY: `new` was just made by the fcntl above and is owned by nothing.
                drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(new) });
                return Err(Errno::MFILE);
            }
            // The descriptor is the caller's now (the same table): not closed here.
            return Ok(new);
        }
        // One pick-and-install at a time in this supervisor, so two opens never pick the
        // same free number.
        static PICK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = PICK.lock().unwrap_or_else(|e| e.into_inner());
        // Listed with getdents64 (rustix's `Dir`), not `opendir`, which allocates from glibc:
        // this runs on a supervisor thread (see `crate::own`).
        let dir = rustix::fs::open(
            format!("/proc/{}/fd", self.who.tgid),
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|_| Errno::MFILE)?;
        let taken: std::collections::BTreeSet<u32> = rustix::fs::Dir::read_from(&dir)
            .map_err(|_| Errno::MFILE)?
            .filter_map(|e| e.ok()?.file_name().to_str().ok()?.parse().ok())
            .collect();
        let number = range
            .into_iter()
            .find(|n| !taken.contains(n))
            .ok_or(Errno::MFILE)?;
        self.listener
            .add_fd_numbered(self.notif_id, fd, number, cloexec)
            // EBADF: the number is not below the caller's limit.
            .map_err(|e| if e == Errno::BADF { Errno::MFILE } else { e })
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// The memory file of a recycled tid never reaches the writer: the open comes first and
    /// the notification's validity is checked after it, so a caller that went away between
    /// the notification and the open yields no file at all.
    #[test]
    fn memory_file_is_opened_before_the_id_is_validated() {
        let steps = RefCell::new(Vec::new());
        let open = || {
            steps.borrow_mut().push("open");
            rustix::fs::open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        };
        let valid = || {
            steps.borrow_mut().push("id_valid");
            Ok(())
        };
        assert!(open_then_validate(open, valid).is_ok());
        assert_eq!(*steps.borrow(), ["open", "id_valid"]);

        steps.borrow_mut().clear();
        let open = || {
            steps.borrow_mut().push("open");
            rustix::fs::open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        };
        let gone = || {
            steps.borrow_mut().push("id_valid");
            Err(Errno::NOENT)
        };
        assert_eq!(open_then_validate(open, gone).err(), Some(Errno::NOENT));
        assert_eq!(*steps.borrow(), ["open", "id_valid"]);
    }
}
