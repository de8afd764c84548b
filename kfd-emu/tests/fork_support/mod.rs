//! Forking a child that runs raw system calls, and reaping it (shared by the test binaries).
#![allow(dead_code)]

use std::os::unix::process::ExitStatusExt;

/// Forks; the child runs `child` (async-signal-safe calls only) and `_exit`s with its result.
pub fn fork(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only calls `child`, which makes raw system calls on memory prepared
    // before the fork, then `_exit`s without running destructors or atexit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = child();
        // SAFETY: ends the forked child at once.
        unsafe { libc::_exit(code) };
    }
    pid
}

pub fn wait_pid(pid: i32) -> std::process::ExitStatus {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid status pointer.
    let ret = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    assert_eq!(ret, pid, "waitpid: {}", std::io::Error::last_os_error());
    std::process::ExitStatus::from_raw(status)
}

/// Forks a child that only waits: it exits when a byte is written to the returned pipe end.
/// Returns its pid and that end.
pub fn fork_idle() -> (i32, std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    let (read, release) = rustix::pipe::pipe().expect("pipe");
    let raw = read.as_raw_fd();
    let pid = fork(|| {
        let mut byte = 0u8;
        // SAFETY: a read into a local byte; the parent writes to the pipe to end the child.
        unsafe { libc::read(raw, (&raw mut byte).cast(), 1) };
        0
    });
    drop(read);
    (pid, release)
}
