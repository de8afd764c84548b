//! Running a program under the filter: `fork`, filter, hand the listener to the parent over a
//! socketpair (`SCM_RIGHTS`), `exec`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;

use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use super::error::SupervisorError;
use super::seccomp::{Filter, Listener};
use super::serve::{Driver, Server};
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

/// Sends `fd` over `socket`. Async-signal-safe: only `sendmsg`, on stack buffers.
fn send_fd(socket: RawFd, fd: RawFd) -> Result<(), Errno> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
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

/// Receives one fd sent by [`send_fd`]; `EPIPE` if the peer closed without sending one.
fn recv_fd(socket: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
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
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Drives the loop for a spawned child: reaps it when its pidfd becomes readable, and stops
/// once it is reaped and every process seen has exited.
struct ChildDriver {
    child: Child,
    pidfd: OwnedFd,
    /// The reaped child's status, or why reaping failed.
    outcome: Option<std::io::Result<ExitStatus>>,
}

impl Driver for ChildDriver {
    fn watched(&self) -> Vec<BorrowedFd<'_>> {
        if self.outcome.is_some() {
            Vec::new()
        } else {
            vec![self.pidfd.as_fd()]
        }
    }

    fn ready(&mut self, _index: usize) -> bool {
        // A readable pidfd means the child has exited, so this does not block.
        self.outcome = Some(self.child.wait());
        false
    }

    fn done(&self, live_processes: usize) -> bool {
        self.outcome.is_some() && live_processes == 0
    }
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
    let filter = Filter::kfd();
    let (parent_end, child_end) = socketpair().map_err(|e| SupervisorError::Setup {
        what: "socketpair",
        source: e,
    })?;
    let child_raw = child_end.as_raw_fd();
    // SAFETY: the hook runs in the forked child before exec and only issues system calls
    // (prctl, seccomp, sendmsg, close) on memory it owns: async-signal-safe, no allocation.
    unsafe {
        command.pre_exec(move || {
            let listener = filter.install().map_err(std::io::Error::from)?;
            send_fd(child_raw, listener.as_raw_fd()).map_err(std::io::Error::from)?;
            // The listener is close-on-exec anyway; dropping it is a plain close.
            drop(listener);
            Ok(())
        });
    }
    // Returns once the child has exec'd (or failed to), so the listener is already queued.
    let child = command.spawn().map_err(spawn_err)?;
    drop(child_end);
    let pid = Pid::from_raw(child.id() as i32).ok_or(Errno::SRCH);
    let setup = recv_fd(parent_end.as_fd())
        .map_err(|e| SupervisorError::Setup {
            what: "receiving the child's seccomp listener",
            source: e,
        })
        .and_then(|fd| {
            Listener::new(fd).map_err(|e| SupervisorError::Setup {
                what: "SECCOMP_GET_NOTIF_SIZES",
                source: e,
            })
        })
        .and_then(|listener| {
            let pidfd = pid
                .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()))
                .map_err(|e| SupervisorError::Setup {
                    what: "pidfd_open of the child",
                    source: e,
                })?;
            Ok((listener, pidfd))
        });
    let mut child = child;
    let (listener, pidfd) = match setup {
        Ok(parts) => parts,
        Err(err) => {
            // Without a supervisor its intercepted calls would wait forever: end it.
            let _ = child.kill();
            let _ = child.wait();
            return Err(err);
        }
    };
    let mut server = match Server::new(listener, backend) {
        Ok(server) => server,
        Err(source) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SupervisorError::Setup {
                what: "eventfd",
                source,
            });
        }
    };
    let mut driver = ChildDriver {
        child,
        pidfd,
        outcome: None,
    };
    server.run(&mut driver);
    let outcome = match driver.outcome {
        Some(outcome) => outcome,
        None => driver.child.wait(),
    };
    outcome.map_err(|source| SupervisorError::Wait { source })
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
