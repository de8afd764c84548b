//! Why the supervisor could not be set up: the error of [`attach`](super::attach) and
//! [`spawn`](fn@super::spawn), in a module of its own so the modules that produce it need not
//! import their caller.

use rustix::io::Errno;

/// Why the supervisor could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// `seccomp(SECCOMP_SET_MODE_FILTER)` (or the `PR_SET_NO_NEW_PRIVS` before it) failed: the
    /// kernel lacks seccomp user notification (Linux < 5.0) or seccomp is disabled.
    #[error("installing the seccomp filter failed: {source}")]
    InstallFilter {
        /// The errno of the failing call.
        source: Errno,
    },
    /// Another system call needed to start the supervisor failed.
    #[error("setting up the supervisor: {what} failed: {source}")]
    Setup {
        /// The step that failed.
        what: &'static str,
        /// Its errno.
        source: Errno,
    },
    /// The supervisor thread could not be started.
    #[error("starting the supervisor thread: {source}")]
    Thread {
        /// The error from `std::thread::Builder::spawn`.
        source: std::io::Error,
    },
    /// The program could not be started (not found, not executable, or the filter could not
    /// be installed in the child).
    #[error("starting {program:?}: {source}")]
    Spawn {
        /// The program.
        program: std::ffi::OsString,
        /// The error from `fork`/`exec` or from the filter installation in the child.
        source: std::io::Error,
    },
    /// Waiting for the program failed.
    #[error("waiting for the program: {source}")]
    Wait {
        /// The error from `waitpid`.
        source: std::io::Error,
    },
}
