//! Running a program under the filter: `fork`, filter, hand the listener to the parent over a
//! socketpair (`SCM_RIGHTS`), `exec`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;

use std::sync::mpsc;

use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use super::error::SupervisorError;
use super::mmap::{Route, Slots};
use super::seccomp::{Filter, Listener};
use super::serve::{Driver, Server};
use super::tracer::{self, ChildExit};
use crate::backend::Backend;

fn last_errno() -> Errno {
    Errno::from_raw_os_error(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// A connected pair of `AF_UNIX` datagram sockets, close-on-exec.
fn socketpair() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair writes two fds into the array on success.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if ret < 0 {
        return Err(last_errno());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Room for one `SCM_RIGHTS` message carrying one fd (`CMSG_SPACE(sizeof(int))` is 24).
#[repr(C, align(8))]
struct OneFdCmsg([u8; 32]);

/// Sends `fd` and the 4 bytes of `payload` over `socket`. Async-signal-safe: only
/// `sendmsg`, on stack buffers.
fn send_fd(socket: RawFd, fd: RawFd, payload: [u8; 4]) -> Result<(), Errno> {
    let mut bytes = payload;
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut control = OneFdCmsg([0; 32]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;
    // SAFETY: `msg` describes `control`, big enough for one cmsg with one int (checked by the
    // const assert below), so CMSG_FIRSTHDR is non-null and CMSG_DATA has room for the fd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as usize;
        libc::CMSG_DATA(cmsg).cast::<RawFd>().write_unaligned(fd);
    }
    // SAFETY: every pointer in `msg` refers to a live local buffer.
    let sent = unsafe { libc::sendmsg(socket, &raw const msg, libc::MSG_NOSIGNAL) };
    if sent < 0 { Err(last_errno()) } else { Ok(()) }
}
const _: () = assert!(size_of::<libc::cmsghdr>() + size_of::<RawFd>() <= size_of::<OneFdCmsg>());

/// Receives one fd and its payload sent by [`send_fd`]; `EPIPE` if the peer closed without
/// sending them.
fn recv_fd(socket: BorrowedFd<'_>) -> Result<(OwnedFd, [u8; 4]), Errno> {
    let mut bytes = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut control = OneFdCmsg([0; 32]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<OneFdCmsg>();
    // SAFETY: every pointer in `msg` refers to a live local buffer of the stated size.
    let got = unsafe { libc::recvmsg(socket.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
    if got < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel filled `msg.msg_control` with `msg_controllen` bytes of cmsgs;
    // CMSG_FIRSTHDR returns null when there is none.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
    if cmsg.is_null() {
        return Err(Errno::PIPE);
    }
    // SAFETY: `cmsg` points into `control`, a complete header as the kernel wrote it.
    let header = unsafe { cmsg.read_unaligned() };
    if header.cmsg_level != libc::SOL_SOCKET || header.cmsg_type != libc::SCM_RIGHTS {
        return Err(Errno::PIPE);
    }
    // SAFETY: an SCM_RIGHTS cmsg carries at least one int after its header.
    let fd = unsafe { libc::CMSG_DATA(cmsg).cast::<RawFd>().read_unaligned() };
    // SAFETY: the kernel installed this fd for us; we are its only owner.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if got != 4 {
        return Err(Errno::PIPE);
    }
    Ok((fd, bytes))
}

/// In the child: waits for the one byte the tracer sends once it has seized the child.
/// Async-signal-safe: only `recv`, on a stack buffer.
fn wait_until_seized(socket: RawFd) -> Result<(), Errno> {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: `recv` writes at most one byte into the local buffer.
        let got = unsafe { libc::recv(socket, byte.as_mut_ptr().cast(), 1, 0) };
        match got {
            1 => return Ok(()),
            0 => return Err(Errno::PIPE),
            _ if last_errno() == Errno::INTR => {}
            _ => return Err(last_errno()),
        }
    }
}

/// `CAP_SYS_PTRACE` (`linux/capability.h`).
const CAP_SYS_PTRACE: libc::c_ulong = 19;

/// In the child, before its `exec`: takes `CAP_SYS_PTRACE` out of its bounding set and its
/// ambient set, so that the program it execs (and everything it runs) never holds it, even as
/// root. The supervisor is not dumpable, and `__ptrace_may_access` lets a task reach a
/// non-dumpable one's `/proc/<pid>/mem`, `/proc/<pid>/fd/*` and `map_files`, `pidfd_getfd`
/// and `process_vm_readv` only with `CAP_SYS_PTRACE` (`ptrace_has_cap`): without it no
/// traced program reaches another's BO memfds through the supervisor, which is what the
/// kernel's isolation of VRAM gives. The bounding set bounds what `exec` grants root
/// (`cap_bprm_creds_from_file`), so the capability cannot come back through `exec` of any
/// file, setuid root included. Dropping it needs `CAP_SETPCAP`: a child without that holds no
/// `CAP_SYS_PTRACE` to lose after `exec` except through its ambient set, which is lowered
/// (that needs no privilege). **Trade-off:** a root program under `kfd-emu run` cannot
/// ptrace, or read the memory of, processes of other users or non-dumpable ones (it could
/// not be debugged under the tracer anyway). Async-signal-safe: two `prctl`s.
fn drop_ptrace_capability() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let bounding = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) };
    if bounding != 0 {
        let errno = std::io::Error::last_os_error();
        // EPERM: no CAP_SETPCAP, so nothing to drop after exec; EINVAL: a kernel without
        // the capability (never on x86_64 Linux >= 2.6.25).
        if !matches!(errno.raw_os_error(), Some(libc::EPERM | libc::EINVAL)) {
            return Err(errno);
        }
    }
    // SAFETY: as above.
    let ambient = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_LOWER as libc::c_ulong,
            CAP_SYS_PTRACE,
            0,
            0,
        )
    };
    if ambient != 0 {
        let errno = std::io::Error::last_os_error();
        // EINVAL: a kernel without ambient capabilities (before 4.3).
        if errno.raw_os_error() != Some(libc::EINVAL) {
            return Err(errno);
        }
    }
    Ok(())
}

/// Drives the loop for a spawned child: takes its exit status when the tracer reports it
/// (the tracer reaps a child killed by a signal, and detaches one that exits, so that
/// `Child::wait` reaps it once its pidfd says the whole process is gone), and stops once it
/// has ended and every process seen has exited.
struct ChildDriver {
    child: Child,
    exit: Arc<ChildExit>,
    /// The detached child's pidfd, readable once it can be reaped without blocking.
    pidfd: Option<OwnedFd>,
    /// The child's status, or why reaping failed.
    outcome: Option<std::io::Result<ExitStatus>>,
}

impl Driver for ChildDriver {
    fn watched(&self) -> Vec<BorrowedFd<'_>> {
        match (&self.outcome, &self.pidfd) {
            (Some(_), _) => Vec::new(),
            (None, Some(pidfd)) => vec![pidfd.as_fd()],
            (None, None) => vec![self.exit.ready.as_fd()],
        }
    }

    fn ready(&mut self, _index: usize) -> bool {
        if self.pidfd.is_some() {
            // The detached child has exited as a whole: reaping does not block.
            self.outcome = Some(self.child.wait());
            return false;
        }
        if let Some(status) = self.exit.status() {
            self.outcome = Some(Ok(status));
            return false;
        }
        // Detached as its leader exits; other threads may still run.
        match self.child.try_wait() {
            Ok(Some(status)) => self.outcome = Some(Ok(status)),
            Ok(None) => {
                let pidfd = Pid::from_raw(self.child.id() as i32)
                    .ok_or(Errno::SRCH)
                    .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()));
                match pidfd {
                    Ok(pidfd) => self.pidfd = Some(pidfd),
                    Err(_) => self.outcome = Some(self.child.wait()),
                }
            }
            Err(err) => self.outcome = Some(Err(err)),
        }
        false
    }

    fn done(&self, live_processes: usize) -> bool {
        self.outcome.is_some() && live_processes == 0
    }
}

/// Starts the tracer thread: it receives the child's listener and pid, seizes the child,
/// lets it go on to `exec`, hands the listener over, and traces until no tracee is left.
fn start_tracer(
    parent_end: OwnedFd,
    backend: Arc<dyn Backend>,
    slots: Arc<Slots>,
    exit: Arc<ChildExit>,
) -> std::io::Result<mpsc::Receiver<Result<(OwnedFd, i32), Errno>>> {
    let (send, receive) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("kfd-emu-tracer".into())
        .spawn(move || {
            crate::own::mark();
            let seized = recv_fd(parent_end.as_fd()).and_then(|(listener, pid)| {
                let pid = i32::from_ne_bytes(pid);
                tracer::seize(pid)?;
                rustix::net::send(&parent_end, &[1], rustix::net::SendFlags::NOSIGNAL)?;
                Ok((listener, pid))
            });
            drop(parent_end);
            match seized {
                Ok((listener, pid)) => {
                    exit.tracing_on_this_thread();
                    let _ = send.send(Ok((listener, pid)));
                    tracer::run(backend, slots, pid, exit);
                }
                Err(err) => {
                    let _ = send.send(Err(err));
                }
            }
        })?;
    Ok(receive)
}

/// See [`super::spawn_command`].
pub(crate) fn spawn_command(
    backend: Arc<dyn Backend>,
    command: &mut Command,
) -> Result<ExitStatus, SupervisorError> {
    let program = command.get_program().to_owned();
    let spawn_err = |source: std::io::Error| SupervisorError::Spawn {
        program: program.clone(),
        source,
    };
    let setup_err =
        |what: &'static str| move |source: Errno| SupervisorError::Setup { what, source };
    let filter = Filter::kfd_traced();
    let (parent_end, child_end) = socketpair().map_err(setup_err("socketpair"))?;
    let child_raw = child_end.as_raw_fd();
    // SAFETY: the hook runs in the forked child before exec and only issues system calls
    // (prctl, getpid, seccomp, sendmsg, recv, close) on memory it owns: async-signal-safe,
    // no allocation.
    unsafe {
        command.pre_exec(move || {
            // Traceable by the supervisor even when the supervisor made itself non-dumpable
            // (exec makes the program dumpable again in any case).
            if libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            drop_ptrace_capability()?;
            let listener = filter.install().map_err(std::io::Error::from)?;
            let pid = libc::getpid().to_ne_bytes();
            send_fd(child_raw, listener.as_raw_fd(), pid).map_err(std::io::Error::from)?;
            // The listener is close-on-exec anyway; dropping it is a plain close.
            drop(listener);
            wait_until_seized(child_raw).map_err(std::io::Error::from)
        });
    }
    let slots = Arc::new(Slots::default());
    let exit = Arc::new(ChildExit::new().map_err(setup_err("eventfd"))?);
    let seized = start_tracer(parent_end, backend.clone(), slots.clone(), exit.clone())
        .map_err(|source| SupervisorError::Thread { source })?;
    // Returns once the child has exec'd (or failed to), so it was seized before.
    let spawned = command.spawn();
    // The tracer sees the end of the socket if the child never sent its listener.
    drop(child_end);
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => {
            // The exec failed, and std's spawn has waited for the child: as this thread is in
            // the tracer's thread group, that wait may have taken the report of the child's
            // PTRACE_EVENT_EXIT stop, which the tracer then never sees, so the child would
            // stay stopped in its exit (holding every fd it inherited, listeners of other
            // supervisors of this process included). Not even SIGKILL ends that stop: the
            // tracer resumes it, and reaps it.
            if let Ok(Ok((_, pid))) = seized.recv() {
                exit.release_failed_exec(pid);
            }
            return Err(spawn_err(err));
        }
    };
    let setup = seized
        .recv()
        .map_err(|_| Errno::PIPE)
        .and_then(|r| r)
        .map_err(setup_err("receiving and seizing the child"))
        .and_then(|(fd, _)| Listener::new(fd).map_err(setup_err("SECCOMP_GET_NOTIF_SIZES")))
        .and_then(|listener| {
            Server::new(listener, backend, Route::Traced(slots)).map_err(setup_err("eventfd"))
        });
    let mut server = match setup {
        Ok(server) => server,
        Err(err) => {
            // Without a supervisor its intercepted calls would wait forever: end it.
            let _ = child.kill();
            let _ = wait_for(&exit, &mut child);
            return Err(err);
        }
    };
    let mut driver = ChildDriver {
        child,
        exit,
        pidfd: None,
        outcome: None,
    };
    server.run(&mut driver);
    let outcome = match driver.outcome.take() {
        Some(outcome) => outcome,
        None => wait_for(&driver.exit, &mut driver.child),
    };
    outcome.map_err(|source| SupervisorError::Wait { source })
}

/// Waits until the tracer has reaped or detached `child`, then returns its status.
fn wait_for(exit: &ChildExit, child: &mut Child) -> std::io::Result<ExitStatus> {
    let mut fds = [rustix::event::PollFd::new(
        &exit.ready,
        rustix::event::PollFlags::IN,
    )];
    while let Err(Errno::INTR) = rustix::event::poll(&mut fds, None) {}
    match exit.status() {
        Some(status) => Ok(status),
        None => child.wait(),
    }
}

/// See [`super::spawn`].
pub(crate) fn spawn<S: AsRef<OsStr>>(
    backend: Arc<dyn Backend>,
    program: impl AsRef<OsStr>,
    args: impl IntoIterator<Item = S>,
) -> Result<ExitStatus, SupervisorError> {
    let mut command = Command::new(program);
    command.args(args);
    spawn_command(backend, &mut command)
}
