//! The ptrace tracer of `kfd-emu run`: carries out the backend's answer to a file `mmap` in a
//! program whose address space is not the supervisor's (see [`super::mmap`] for the scheme).
//!
//! One dedicated thread does every ptrace request. It seizes the spawned child before its
//! `exec` (the child waits in its pre-exec hook until then) with `TRACESECCOMP`, `TRACEFORK`,
//! `TRACEVFORK`, `TRACECLONE`, `TRACEEXEC`, `TRACESYSGOOD` and `EXITKILL`, so every descendant
//! is traced from its first instruction and every tracee is killed if the supervisor dies.
//! Besides the `PTRACE_EVENT_SECCOMP` stops of file `mmap`s it keeps the program behaving as
//! untraced:
//!
//! - a signal-delivery stop re-injects the signal;
//! - a group-stop (`PTRACE_EVENT_STOP` with a stopping signal) is entered with `PTRACE_LISTEN`,
//!   so the tracee stays stopped until a `SIGCONT`, as without a tracer;
//! - the other event stops (a new child's or thread's first stop, fork/clone/exec events) are
//!   resumed as they are;
//! - the direct child's exit status, which the tracer reaps (it shares a thread group with the
//!   child's parent), is handed to the code that waits for the child ([`ChildExit`]).
//!
//! Anonymous mappings never stop the program: the filter allows them outright, so only file
//! mappings (the loader's, a few per library) pay a stop, a `pidfd_getfd` and a backend call.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use rustix::event::{EventfdFlags, eventfd};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};

use super::addrspace;
use super::mmap::{self as file_mmap, MmapArgs, Pending, SLOT_CEILING, SLOT_MARKER, Slots};
use super::serve::tgid_from_proc;
use crate::backend::{Backend, CallerId, MmapAction};

/// The options every tracee gets.
const OPTIONS: i32 = libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACEEXIT
    | libc::PTRACE_O_EXITKILL;

fn errno() -> Errno {
    Errno::from_raw_os_error(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// `ptrace(request, tid, addr, data)` for requests whose `addr` and `data` are integers.
fn ptrace_value(request: libc::c_uint, tid: i32, data: usize) -> Result<(), Errno> {
    // SAFETY: the requests used with this helper (SEIZE, CONT, SYSCALL, LISTEN) take `addr`
    // and `data` by value; no memory of ours is read or written.
    let ret = unsafe {
        libc::ptrace(
            request,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            data as *mut libc::c_void,
        )
    };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

/// `ptrace(request, tid, NULL, data)` for requests whose `data` points at a struct.
///
/// # Safety
/// `data` must be valid for what `request` reads or writes there.
unsafe fn ptrace_ptr(
    request: libc::c_uint,
    tid: i32,
    data: *mut libc::c_void,
) -> Result<(), Errno> {
    // SAFETY: the caller guarantees `data` suits `request`; `addr` is unused by it.
    let ret = unsafe { libc::ptrace(request, tid, std::ptr::null_mut::<libc::c_void>(), data) };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

fn get_regs(tid: i32) -> Result<libc::user_regs_struct, Errno> {
    // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: PTRACE_GETREGS writes one `struct user_regs_struct` to `data`.
    unsafe { ptrace_ptr(libc::PTRACE_GETREGS, tid, (&raw mut regs).cast())? };
    Ok(regs)
}

fn set_regs(tid: i32, regs: &libc::user_regs_struct) -> Result<(), Errno> {
    let mut copy = *regs;
    // SAFETY: PTRACE_SETREGS reads one `struct user_regs_struct` from `data`.
    unsafe { ptrace_ptr(libc::PTRACE_SETREGS, tid, (&raw mut copy).cast()) }
}

fn event_msg(tid: i32) -> Result<u64, Errno> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: PTRACE_GETEVENTMSG writes one unsigned long to `data`.
    unsafe { ptrace_ptr(libc::PTRACE_GETEVENTMSG, tid, (&raw mut msg).cast())? };
    Ok(msg)
}

/// Seizes `pid` with the tracer's options. Must be called on the tracer thread.
pub(crate) fn seize(pid: i32) -> Result<(), Errno> {
    ptrace_value(libc::PTRACE_SEIZE, pid, OPTIONS as usize)
}

/// The spawned child's exit status, reaped by the tracer, for the code that waits for it.
#[derive(Debug)]
pub(crate) struct ChildExit {
    status: Mutex<Option<ExitStatus>>,
    /// Written when the status is recorded, or when the tracer ends without one.
    pub(crate) ready: OwnedFd,
    /// The tracer thread's id while its loop runs (0 before and after).
    tracer_tid: AtomicI32,
    /// Tracees the tracer is asked to resume (see [`ChildExit::release_failed_exec`]).
    release: Mutex<Vec<i32>>,
}

/// The signal that interrupts the tracer's `waitpid` ([`ChildExit::release_failed_exec`]):
/// a real-time signal given a handler that does nothing, installed without `SA_RESTART`.
fn kick_signal() -> Option<i32> {
    static SIGNAL: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *SIGNAL.get_or_init(|| {
        extern "C" fn nothing(_: libc::c_int) {}
        let sig = libc::SIGRTMAX() - 3;
        // SAFETY: sigaction reads and writes only the two local structs; the handler does
        // nothing, so it is async-signal-safe. An existing handler of the program's is kept
        // (then no signal is used).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &raw mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                return None;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&raw mut action.sa_mask);
            (libc::sigaction(sig, &raw const action, std::ptr::null_mut()) == 0).then_some(sig)
        }
    })
}

impl ChildExit {
    pub(crate) fn new() -> Result<Self, Errno> {
        // Installed before any tracer runs, so its first kick finds the handler.
        let _ = kick_signal();
        Ok(Self {
            status: Mutex::new(None),
            ready: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            tracer_tid: AtomicI32::new(0),
            release: Mutex::new(Vec::new()),
        })
    }

    /// The child `pid` failed to exec, and `std`'s spawn, which then waits for it from a
    /// thread of the tracer's thread group, may have taken the report of its
    /// `PTRACE_EVENT_EXIT` stop: the tracer would never see it, and the child would stay
    /// stopped in its exit for good (holding every fd it inherited). Only the tracer may
    /// resume it, so this asks it to (interrupting its `waitpid` with [`kick_signal`]) and
    /// waits until it has, or has ended. A child the tracer saw exit itself is not traced
    /// any more, and the resume does nothing.
    pub(crate) fn release_failed_exec(&self, pid: i32) {
        let Some(sig) = kick_signal() else {
            return;
        };
        self.release
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let tid = self.tracer_tid.load(Ordering::Acquire);
            let pending = !self
                .release
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty();
            if tid == 0 || !pending || std::time::Instant::now() > deadline {
                return;
            }
            // SAFETY: tgkill takes plain integers; `tid` is a thread of this process (the
            // tracer's id is cleared before that thread ends).
            unsafe {
                libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Says that the calling thread is the tracer (before it hands the child's listener
    /// over, so that a failed exec seen after that finds it).
    pub(crate) fn tracing_on_this_thread(&self) {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        self.tracer_tid.store(tid, Ordering::Release);
    }

    /// Resumes the tracees [`ChildExit::release_failed_exec`] asked for.
    fn resume_released(&self) {
        let pids = std::mem::take(&mut *self.release.lock().unwrap_or_else(|e| e.into_inner()));
        for pid in pids {
            // ESRCH: not stopped or not traced any more (the tracer saw its exit itself).
            let _ = ptrace_value(libc::PTRACE_CONT, pid, 0);
        }
    }

    fn record(&self, status: Option<ExitStatus>) {
        let mut slot = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = status;
        }
        drop(slot);
        let _ = rustix::io::write(&self.ready, &1u64.to_ne_bytes());
    }

    /// The recorded status, if the tracer saw the child end.
    pub(crate) fn status(&self) -> Option<ExitStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A thread holding a redirect between its seccomp stop and its syscall-exit stop.
#[derive(Debug, Clone, Copy)]
struct Hold {
    /// The fd and offset arguments as the program passed them, restored at the exit stop.
    r8: u64,
    r9: u64,
    /// Whether it holds its process's slot.
    slot: bool,
}

/// A redirect waiting for its process's slot; its thread stays in its seccomp stop.
#[derive(Debug)]
struct Waiting {
    tid: i32,
    fd: Arc<OwnedFd>,
    offset: u64,
}

/// Per process: its slot and who waits for it.
#[derive(Debug, Default)]
struct Process {
    /// The slot number last used and the (st_dev, st_ino) of what was installed there.
    slot: Option<(u32, (u64, u64))>,
    busy: bool,
    waiting: VecDeque<Waiting>,
}

struct Tracer {
    backend: Arc<dyn Backend>,
    slots: Arc<Slots>,
    child: i32,
    exit: Arc<ChildExit>,
    /// tid → tgid, for every tracee seen in a seccomp stop.
    tgids: HashMap<i32, i32>,
    holds: HashMap<i32, Hold>,
    processes: HashMap<i32, Process>,
}

/// Runs the tracer's loop on the calling thread (the one that seized `child`) until no tracee
/// is left.
pub(crate) fn run(backend: Arc<dyn Backend>, slots: Arc<Slots>, child: i32, exit: Arc<ChildExit>) {
    let mut tracer = Tracer {
        backend,
        slots,
        child,
        exit,
        tgids: HashMap::new(),
        holds: HashMap::new(),
        processes: HashMap::new(),
    };
    tracer.exit.tracing_on_this_thread();
    tracer.run();
    tracer.exit.tracer_tid.store(0, Ordering::Release);
    tracer.exit.resume_released();
    // Without a status (cannot happen once seized) the waiter falls back to waiting itself.
    tracer.exit.record(None);
}

fn file_id(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|st| (st.st_dev, st.st_ino))
}

/// The soft `RLIMIT_NOFILE` of `pid`, from `/proc/<pid>/limits`.
fn nofile_soft(pid: i32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(u64::MAX);
    }
    soft.parse().ok()
}

impl Tracer {
    fn run(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status to a local int.
            let tid =
                unsafe { libc::waitpid(-1, &raw mut status, libc::__WALL | libc::__WNOTHREAD) };
            if tid < 0 {
                if errno() == Errno::INTR {
                    self.exit.resume_released();
                    continue;
                }
                // ECHILD: no tracee is left.
                return;
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                self.gone(tid);
                if tid == self.child {
                    self.exit.record(Some(ExitStatus::from_raw(status)));
                }
                continue;
            }
            if !libc::WIFSTOPPED(status) {
                continue;
            }
            let sig = libc::WSTOPSIG(status);
            match (status >> 16) & 0xff {
                libc::PTRACE_EVENT_SECCOMP => self.seccomp_stop(tid),
                libc::PTRACE_EVENT_STOP => {
                    if matches!(
                        sig,
                        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                    ) {
                        // A group-stop: stay stopped, but let the tracer see the SIGCONT.
                        let _ = ptrace_value(libc::PTRACE_LISTEN, tid, 0);
                    } else {
                        self.resume(tid, 0);
                    }
                }
                libc::PTRACE_EVENT_EXEC => {
                    // The thread that exec'd now has the leader's id; the former one is gone.
                    if let Ok(former) = event_msg(tid)
                        && former as i32 != tid
                    {
                        self.gone(former as i32);
                    }
                    self.tgids.remove(&tid);
                    self.resume(tid, 0);
                }
                libc::PTRACE_EVENT_EXIT if tid == self.child => {
                    // Let the child's parent reap it (`Child::wait`), as `std` does when its
                    // exec fails: detach it as it exits. (A child killed by a signal skips
                    // this stop and is reaped above.)
                    self.gone(tid);
                    let _ = ptrace_value(libc::PTRACE_DETACH, tid, 0);
                    self.exit.record(None);
                }
                0 if sig == libc::SIGTRAP | 0x80 => self.syscall_stop(tid),
                // A signal-delivery stop: deliver it.
                0 => self.resume(tid, sig),
                // Fork, vfork, clone: the new tracee reports its own first stop.
                _ => self.resume(tid, 0),
            }
        }
    }

    /// Resumes `tid`, through its syscall-exit stop while it holds a redirect.
    fn resume(&self, tid: i32, sig: i32) {
        let request = if self.holds.contains_key(&tid) {
            libc::PTRACE_SYSCALL
        } else {
            libc::PTRACE_CONT
        };
        // ESRCH: killed meanwhile; its exit is reported next.
        let _ = ptrace_value(request, tid, sig as usize);
    }

    fn tgid(&mut self, tid: i32) -> Option<i32> {
        if let Some(&tgid) = self.tgids.get(&tid) {
            return Some(tgid);
        }
        let tgid = tgid_from_proc(tid)?;
        self.tgids.insert(tid, tgid);
        Some(tgid)
    }

    /// Thread `tid` ended (or became another id at an exec).
    fn gone(&mut self, tid: i32) {
        let tgid = self.tgids.remove(&tid);
        self.slots.forget(tid);
        let held = self.holds.remove(&tid);
        if let Some(tgid) = tgid {
            if let Some(process) = self.processes.get_mut(&tgid) {
                process.waiting.retain(|w| w.tid != tid);
            }
            if held.is_some_and(|h| h.slot) {
                self.release(tgid);
            }
        }
        // A leader's exit is reported once the whole group is gone (its own tgid may never
        // have been looked up: only threads that mapped a file were).
        self.processes.remove(&tid);
    }

    /// A file `mmap` stopped `tid`: ask the backend and carry its answer out.
    fn seccomp_stop(&mut self, tid: i32) {
        let Ok(mut regs) = get_regs(tid) else {
            return self.resume(tid, 0);
        };
        if regs.orig_rax != libc::SYS_mmap as u64 {
            return self.resume(tid, 0);
        }
        let args = MmapArgs::from_regs([regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9]);
        let Some(tgid) = self.tgid(tid) else {
            return self.resume(tid, 0);
        };
        let Some(pidfd) = Pid::from_raw(tgid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
        else {
            return self.resume(tid, 0);
        };
        let who = CallerId { tid, tgid };
        let (action, file) = file_mmap::ask(&*self.backend, pidfd.as_fd(), who, &args);
        if !matches!(action, MmapAction::Fail(_)) {
            // A MAP_FIXED file mapping replaces what is there (anonymous ones are notified).
            addrspace::tell(&*self.backend, who, libc::SYS_mmap, args.regs());
        }
        match action {
            MmapAction::Continue => self.resume(tid, 0),
            MmapAction::Fail(errno) => self.fail(tid, regs, errno),
            MmapAction::Redirect { fd, offset } => {
                let same = file
                    .as_ref()
                    .and_then(|f| file_id(f.as_fd()))
                    .is_some_and(|id| file_id(fd.as_fd()) == Some(id));
                if same {
                    // Only the offset changes: no fd to install.
                    let hold = Hold {
                        r8: regs.r8,
                        r9: regs.r9,
                        slot: false,
                    };
                    regs.r9 = offset;
                    if set_regs(tid, &regs).is_ok() {
                        self.holds.insert(tid, hold);
                    }
                    return self.resume(tid, 0);
                }
                let process = self.processes.entry(tgid).or_default();
                if process.busy {
                    process.waiting.push_back(Waiting { tid, fd, offset });
                    return;
                }
                self.redirect(tid, tgid, pidfd.as_fd(), regs, fd, offset);
            }
        }
    }

    /// Skips the call with `-errno` as its result (ptrace(2): syscall number -1).
    fn fail(&self, tid: i32, mut regs: libc::user_regs_struct, errno: Errno) {
        regs.orig_rax = u64::MAX;
        regs.rax = (-i64::from(errno.raw_os_error())) as u64;
        let _ = set_regs(tid, &regs);
        self.resume(tid, 0);
    }

    /// Points `tid`'s stopped `mmap` at the process's slot, where the worker installs `fd`,
    /// and resumes it to its syscall-exit stop holding the slot.
    fn redirect(
        &mut self,
        tid: i32,
        tgid: i32,
        pidfd: BorrowedFd<'_>,
        mut regs: libc::user_regs_struct,
        fd: Arc<OwnedFd>,
        offset: u64,
    ) {
        let Some(slot) = self.slot_for(tgid, pidfd) else {
            return self.fail(tid, regs, Errno::MFILE);
        };
        let hold = Hold {
            r8: regs.r8,
            r9: regs.r9,
            slot: true,
        };
        regs.r8 = (u64::from(SLOT_MARKER) << 32) | u64::from(slot);
        regs.r9 = offset;
        let installed = file_id(fd.as_fd()).unwrap_or((0, 0));
        self.slots.prepare(tid, Pending { slot, fd });
        if set_regs(tid, &regs).is_err() {
            // Killed meanwhile: its exit is reported next.
            self.slots.forget(tid);
            return;
        }
        let process = self.processes.entry(tgid).or_default();
        process.busy = true;
        process.slot = Some((slot, installed));
        self.holds.insert(tid, hold);
        self.resume(tid, 0);
    }

    /// The slot of process `tgid`: the one used before if it is still free or still holds
    /// what was installed there, else the highest free fd below the limit.
    fn slot_for(&mut self, tgid: i32, pidfd: BorrowedFd<'_>) -> Option<u32> {
        let limit = nofile_soft(tgid)?.min(u64::from(SLOT_CEILING)) as u32;
        let holds = |n: u32| match pidfd_getfd(pidfd, n as i32, PidfdGetfdFlags::empty()) {
            Err(Errno::BADF) => Some(None),
            Ok(fd) => Some(file_id(fd.as_fd())),
            Err(_) => None,
        };
        let known = self.processes.get(&tgid).and_then(|p| p.slot);
        if let Some((n, id)) = known
            && n < limit
        {
            match holds(n) {
                Some(None) => return Some(n),
                Some(Some(got)) if got == id => return Some(n),
                _ => {}
            }
        }
        (limit.saturating_sub(64)..limit)
            .rev()
            .find(|&n| matches!(holds(n), Some(None)))
    }

    /// `tid` reached its syscall exit: give the program its registers back and free the slot.
    fn syscall_stop(&mut self, tid: i32) {
        if let Some(hold) = self.holds.remove(&tid) {
            if let Ok(mut regs) = get_regs(tid) {
                regs.r8 = hold.r8;
                regs.r9 = hold.r9;
                let _ = set_regs(tid, &regs);
            }
            self.slots.forget(tid);
            if hold.slot
                && let Some(tgid) = self.tgids.get(&tid).copied()
            {
                self.release(tgid);
            }
        }
        self.resume(tid, 0);
    }

    /// The slot of `tgid` is free: hand it to the next thread waiting for it.
    fn release(&mut self, tgid: i32) {
        loop {
            let Some(process) = self.processes.get_mut(&tgid) else {
                return;
            };
            process.busy = false;
            let Some(next) = process.waiting.pop_front() else {
                return;
            };
            let Ok(regs) = get_regs(next.tid) else {
                continue;
            };
            let Some(pidfd) =
                Pid::from_raw(tgid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
            else {
                self.fail(next.tid, regs, Errno::NOMEM);
                continue;
            };
            self.redirect(next.tid, tgid, pidfd.as_fd(), regs, next.fd, next.offset);
            if self.processes.get(&tgid).is_some_and(|p| p.busy) {
                return;
            }
        }
    }
}
