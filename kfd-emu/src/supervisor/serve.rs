//! The supervisor loop: receive a notification, find out who is calling, ask the backend,
//! answer.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};

use super::caller::NotifCaller;
use super::path;
use super::seccomp::{Listener, SeccompNotif};
use super::stat;
use crate::backend::{Backend, Caller, CallerId, IoctlResult, OpenAction};

/// What the loop does besides serving the listener: the fds of its owner (a shutdown eventfd,
/// the spawned child's pidfd) and when to stop.
pub(crate) trait Driver {
    /// Fds to poll for readability besides the listener and the tracked processes.
    fn watched(&self) -> Vec<BorrowedFd<'_>>;
    /// `watched()[index]` became readable; `true` stops the loop.
    fn ready(&mut self, index: usize) -> bool;
    /// Asked after each round with the number of live processes seen; `true` stops the loop.
    fn done(&self, live_processes: usize) -> bool;
}

/// Serves one listener until its [`Driver`] stops it or no task uses the filter any more.
pub(crate) struct Server {
    listener: Arc<Listener>,
    backend: Arc<dyn Backend>,
    /// tgid → pidfd of every process that has made an intercepted call.
    processes: HashMap<i32, OwnedFd>,
    /// tid → tgid, checked with `tgkill(tgid, tid, 0)` before each use.
    threads: HashMap<i32, i32>,
}

/// Whether `tid` is a live thread of thread group `tgid` (`tgkill` with signal 0 sends nothing).
fn thread_in_group(tgid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 only checks existence and permission; no pointers are involved.
    let ret = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, 0) };
    ret == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The thread group of `tid`, from `/proc/<tid>/status`.
fn tgid_from_proc(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

fn has_exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(n) if n > 0)
}

/// Answers `caller`'s ioctl with the backend's result. Failure to send is normal when the
/// caller was killed meanwhile (`ENOENT`) and is ignored: nothing is waiting for the answer.
fn answer_ioctl(caller: &NotifCaller, result: Option<IoctlResult>) {
    let listener = caller.listener();
    let id = caller.notif_id();
    let _ = match result {
        None => listener.respond_continue(id),
        Some(Ok(val)) => listener.respond_value(id, val),
        Some(Err(errno)) => listener.respond_error(id, errno),
    };
}

/// Runs the backend's ioctl, turning a panic in it into `EIO` for the caller: a model bug must
/// not take the supervisor down with every other process it serves.
fn run_ioctl(
    backend: &dyn Backend,
    caller: &NotifCaller,
    file: BorrowedFd<'_>,
    cmd: u32,
    arg: u64,
) -> Option<IoctlResult> {
    catch_unwind(AssertUnwindSafe(|| backend.ioctl(caller, file, cmd, arg))).unwrap_or_else(|_| {
        eprintln!("kfd-emu: the backend panicked on ioctl {cmd:#010x}; answering EIO");
        Some(Err(Errno::IO))
    })
}

/// Where the answer to a `stat`-family call goes.
#[derive(Debug, Clone, Copy)]
enum Reply {
    /// A `struct stat` at this address of the caller.
    Stat(u64),
    /// A `struct statx` at this address of the caller.
    Statx(u64),
    /// No buffer: `access` with these `R_OK`/`W_OK`/`X_OK` bits.
    Access(i32),
    /// `getxattr`: an emulated file has none (`ENODATA`).
    GetXattr,
    /// `listxattr`: an emulated file has none (an empty list, 0).
    ListXattr,
}

impl Server {
    pub(crate) fn new(listener: Listener, backend: Arc<dyn Backend>) -> Self {
        Self {
            listener: Arc::new(listener),
            backend,
            processes: HashMap::new(),
            threads: HashMap::new(),
        }
    }

    /// Runs until `driver` stops it, or the listener has hung up (no task uses the filter any
    /// more) and every tracked process has exited and nothing else is watched.
    pub(crate) fn run(&mut self, driver: &mut dyn Driver) {
        // The hang-up can come before the last process's pidfd turns readable: after it the
        // listener is no longer polled, but exits still are.
        let mut hung_up = false;
        loop {
            let (listener_events, watched_ready, exited, watching) = {
                let watched = driver.watched();
                let tgids: Vec<i32> = self.processes.keys().copied().collect();
                let first = usize::from(!hung_up);
                let mut fds = Vec::with_capacity(first + watched.len() + tgids.len());
                if !hung_up {
                    fds.push(PollFd::from_borrowed_fd(
                        self.listener.as_fd(),
                        PollFlags::IN,
                    ));
                }
                for fd in &watched {
                    fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
                }
                for tgid in &tgids {
                    fds.push(PollFd::from_borrowed_fd(
                        self.processes[tgid].as_fd(),
                        PollFlags::IN,
                    ));
                }
                if fds.is_empty() {
                    return;
                }
                match poll(&mut fds, None) {
                    Ok(_) => {}
                    Err(Errno::INTR) => continue,
                    Err(err) => {
                        eprintln!("kfd-emu: poll in the supervisor failed: {err}");
                        return;
                    }
                }
                let ready = |fd: &PollFd<'_>| !fd.revents().is_empty();
                let watched_ready: Vec<usize> = (0..watched.len())
                    .filter(|&i| ready(&fds[first + i]))
                    .collect();
                let exited: Vec<i32> = tgids
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| ready(&fds[first + watched.len() + i]))
                    .map(|(_, &tgid)| tgid)
                    .collect();
                let listener_events = if hung_up {
                    PollFlags::empty()
                } else {
                    fds[0].revents()
                };
                (listener_events, watched_ready, exited, !watched.is_empty())
            };
            // Exits first, so a recycled pid in the next notification is a new process.
            for tgid in exited {
                self.process_exited(tgid);
            }
            if listener_events.contains(PollFlags::IN) {
                match self.listener.recv() {
                    Ok(notif) => self.handle(&notif),
                    // ENOENT: the caller died between the wake-up and the receive.
                    Err(Errno::NOENT | Errno::INTR) => {}
                    Err(err) => {
                        eprintln!("kfd-emu: SECCOMP_IOCTL_NOTIF_RECV failed: {err}");
                        hung_up = true;
                    }
                }
            } else if listener_events.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL)
            {
                hung_up = true;
            }
            for index in watched_ready {
                if driver.ready(index) {
                    return;
                }
            }
            if driver.done(self.processes.len()) {
                return;
            }
            if hung_up && !watching && self.processes.is_empty() {
                return;
            }
        }
    }

    fn process_exited(&mut self, tgid: i32) {
        if self.processes.remove(&tgid).is_some() {
            self.threads.retain(|_, group| *group != tgid);
            let backend = &self.backend;
            if catch_unwind(AssertUnwindSafe(|| backend.process_exited(tgid))).is_err() {
                eprintln!("kfd-emu: the backend panicked releasing process {tgid}");
            }
        }
    }

    /// The thread group of the calling thread `tid`.
    fn tgid_of(&mut self, tid: i32) -> Option<i32> {
        if let Some(&tgid) = self.threads.get(&tid)
            && thread_in_group(tgid, tid)
        {
            return Some(tgid);
        }
        let tgid = tgid_from_proc(tid)?;
        self.threads.insert(tid, tgid);
        Some(tgid)
    }

    /// The pidfd of `caller`'s process, opened (and the process tracked) on first sight.
    fn track(&mut self, caller: &NotifCaller) -> Result<(), Errno> {
        let tgid = crate::backend::Caller::id(caller).tgid;
        if let Some(pidfd) = self.processes.get(&tgid) {
            if !has_exited(pidfd) {
                return Ok(());
            }
            // A new process reusing the pid of one whose exit is not handled yet.
            self.process_exited(tgid);
        }
        let pid = Pid::from_raw(tgid).ok_or(Errno::SRCH)?;
        let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
        // The caller still waiting means `tgid` was not recycled before the pidfd was taken.
        caller.still_valid()?;
        self.processes.insert(tgid, pidfd);
        Ok(())
    }

    fn handle(&mut self, notif: &SeccompNotif) {
        let id = notif.id;
        let tid = notif.pid as i32;
        let Some(tgid) = (tid > 0).then(|| self.tgid_of(tid)).flatten() else {
            // The caller is gone or invisible in our pid namespace: let the kernel handle it.
            let _ = self.listener.respond_continue(id);
            return;
        };
        let caller = NotifCaller::new(Arc::clone(&self.listener), id, CallerId { tid, tgid });
        if self.track(&caller).is_err() {
            let _ = self.listener.respond_continue(id);
            return;
        }
        let args = notif.data.args;
        match i64::from(notif.data.nr) {
            libc::SYS_openat => self.open(
                &caller,
                args[0] as i32,
                args[1],
                args[2] as i32,
                args[3] as u32,
            ),
            libc::SYS_open => self.open(
                &caller,
                libc::AT_FDCWD,
                args[0],
                args[1] as i32,
                args[2] as u32,
            ),
            libc::SYS_ioctl => self.ioctl(caller, args[0] as i32, args[1] as u32, args[2]),
            libc::SYS_stat | libc::SYS_lstat => {
                self.stat(&caller, libc::AT_FDCWD, args[0], 0, Reply::Stat(args[1]));
            }
            libc::SYS_newfstatat => {
                let flags = args[3] as i32;
                self.stat(
                    &caller,
                    args[0] as i32,
                    args[1],
                    flags,
                    Reply::Stat(args[2]),
                );
            }
            libc::SYS_statx => {
                let flags = args[2] as i32;
                self.stat(
                    &caller,
                    args[0] as i32,
                    args[1],
                    flags,
                    Reply::Statx(args[4]),
                );
            }
            libc::SYS_access => {
                self.stat(
                    &caller,
                    libc::AT_FDCWD,
                    args[0],
                    0,
                    Reply::Access(args[1] as i32),
                );
            }
            libc::SYS_faccessat => {
                let how = Reply::Access(args[2] as i32);
                self.stat(&caller, args[0] as i32, args[1], 0, how);
            }
            libc::SYS_getxattr | libc::SYS_lgetxattr => {
                self.stat(&caller, libc::AT_FDCWD, args[0], 0, Reply::GetXattr);
            }
            libc::SYS_listxattr | libc::SYS_llistxattr => {
                self.stat(&caller, libc::AT_FDCWD, args[0], 0, Reply::ListXattr);
            }
            libc::SYS_faccessat2 => {
                let how = Reply::Access(args[2] as i32);
                self.stat(&caller, args[0] as i32, args[1], args[3] as i32, how);
            }
            _ => {
                let _ = self.listener.respond_continue(id);
            }
        }
    }

    fn open(&mut self, caller: &NotifCaller, dirfd: i32, path_addr: u64, flags: i32, mode: u32) {
        let id = caller.notif_id();
        let tid = crate::backend::Caller::id(caller).tid;
        // A path we cannot read or resolve is not ours; the kernel reports EFAULT & co itself.
        let path = caller
            .read_path(path_addr)
            .ok()
            .and_then(|raw| path::resolve(tid, dirfd, &raw));
        let Some(path) = path.filter(|_| caller.still_valid().is_ok()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let backend = &self.backend;
        let action = catch_unwind(AssertUnwindSafe(|| {
            backend.open(caller, &path, flags, mode)
        }))
        .unwrap_or_else(|_| {
            eprintln!("kfd-emu: the backend panicked opening {path}; answering EIO");
            OpenAction::Fail(Errno::IO)
        });
        let _ = match action {
            OpenAction::Continue => self.listener.respond_continue(id),
            OpenAction::Inject(fd) => {
                let cloexec = flags & libc::O_CLOEXEC != 0;
                match self.listener.add_fd(id, fd.as_fd(), cloexec, true) {
                    Ok(_) | Err(Errno::NOENT) => Ok(()),
                    // Not installed (EMFILE: the caller's table is full): the call is still
                    // held and must fail as the kernel's open would.
                    Err(errno) => self.listener.respond_error(id, errno),
                }
            }
            OpenAction::Fail(errno) => self.listener.respond_error(id, errno),
        };
    }

    /// A path-based `stat`-family (or xattr-read) call: the backend describes the path (or declines, and the
    /// kernel runs the call), and the answer is written in the layout the call expects.
    fn stat(&mut self, caller: &NotifCaller, dirfd: i32, path_addr: u64, flags: i32, reply: Reply) {
        let id = caller.notif_id();
        // Flags we do not know are the kernel's to refuse. `AT_SYMLINK_NOFOLLOW` changes
        // nothing: the emulated paths hold no symlinks. An empty path with `AT_EMPTY_PATH`
        // names `dirfd` itself, which `resolve` declines, so it runs natively.
        let known = libc::AT_SYMLINK_NOFOLLOW
            | libc::AT_EMPTY_PATH
            | libc::AT_NO_AUTOMOUNT
            | libc::AT_STATX_SYNC_TYPE
            | libc::AT_EACCESS;
        let tid = caller.id().tid;
        let path = (flags & !known == 0)
            .then(|| caller.read_path(path_addr).ok())
            .flatten()
            .and_then(|raw| path::resolve(tid, dirfd, &raw));
        let Some(path) = path.filter(|_| caller.still_valid().is_ok()) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let backend = &self.backend;
        let answer =
            catch_unwind(AssertUnwindSafe(|| backend.stat(caller, &path))).unwrap_or_else(|_| {
                eprintln!("kfd-emu: the backend panicked on a stat of {path}; answering EIO");
                Some(Err(Errno::IO))
            });
        let result = match (answer, reply) {
            (None, _) => {
                let _ = self.listener.respond_continue(id);
                return;
            }
            (Some(Err(errno)), _) => Err(errno),
            (Some(Ok(answer)), Reply::Stat(buf)) => caller.write(buf, &stat::stat_bytes(&answer)),
            (Some(Ok(answer)), Reply::Statx(buf)) => caller.write(buf, &stat::statx_bytes(&answer)),
            (Some(Ok(answer)), Reply::Access(how)) => stat::access(&answer, how),
            // The emulated files carry no extended attributes.
            (Some(Ok(_)), Reply::GetXattr) => Err(Errno::NODATA),
            (Some(Ok(_)), Reply::ListXattr) => Ok(()),
        };
        let _ = match result {
            Ok(()) => self.listener.respond_value(id, 0),
            Err(errno) => self.listener.respond_error(id, errno),
        };
    }

    fn ioctl(&mut self, caller: NotifCaller, fd: i32, cmd: u32, arg: u64) {
        let id = caller.notif_id();
        let tgid = crate::backend::Caller::id(&caller).tgid;
        let Some(pidfd) = self.processes.get(&tgid) else {
            let _ = self.listener.respond_continue(id);
            return;
        };
        let file = match pidfd_getfd(pidfd, fd, PidfdGetfdFlags::empty()) {
            Ok(file) => file,
            // Not an open fd: what the kernel's ioctl would say.
            Err(Errno::BADF) => {
                let _ = self.listener.respond_error(id, Errno::BADF);
                return;
            }
            Err(_) => {
                let _ = self.listener.respond_continue(id);
                return;
            }
        };
        if self.backend.may_block(cmd) {
            let backend = Arc::clone(&self.backend);
            let parked = Arc::new(std::sync::Mutex::new(Some((caller, file))));
            let for_thread = Arc::clone(&parked);
            let spawned = std::thread::Builder::new()
                .name("kfd-emu-blocking".into())
                .spawn(move || {
                    if let Some((caller, file)) = for_thread.lock().ok().and_then(|mut p| p.take())
                    {
                        answer_ioctl(
                            &caller,
                            run_ioctl(&*backend, &caller, file.as_fd(), cmd, arg),
                        );
                    }
                });
            if spawned.is_ok() {
                return;
            }
            // No thread to be had: serve it here, blocking the loop, rather than not at all.
            if let Some((caller, file)) = parked.lock().ok().and_then(|mut p| p.take()) {
                answer_ioctl(
                    &caller,
                    run_ioctl(&*self.backend, &caller, file.as_fd(), cmd, arg),
                );
            }
            return;
        }
        answer_ioctl(
            &caller,
            run_ioctl(&*self.backend, &caller, file.as_fd(), cmd, arg),
        );
    }
}
