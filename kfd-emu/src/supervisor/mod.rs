//! The seccomp supervisor: the mechanism that makes a program's `open`s and KFD/DRM ioctls land
//! in a [`Backend`].
//!
//! A program runs under a seccomp filter ([`Filter::kfd`](seccomp::Filter::kfd)) that turns
//! `open`/`openat`, the path-based `stat` family (`stat`, `lstat`, `newfstatat`, `statx`,
//! `access`, `faccessat`, `faccessat2`), the path-based xattr reads, every ioctl whose type
//! byte is `'K'` or `'d'`, and every file `mmap` (not `MAP_ANONYMOUS`) into user
//! notifications (for a spawned program, file `mmap`s go to its ptrace tracer instead; see
//! below). The supervisor receives each one on the filter's listener fd and:
//!
//! - for an open, reads the path from the caller's memory, resolves it against the caller's
//!   working directory or `dirfd` and normalises it, and asks [`Backend::open`]: a stand-in fd
//!   is installed as the call's result (`SECCOMP_ADDFD_FLAG_SEND`, `O_CLOEXEC` as requested),
//!   anything else runs natively (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) or fails with an errno;
//! - for a `stat`-family call, resolves the path the same way and asks [`Backend::stat`]: a
//!   path that is not the backend's runs natively, an answer is written into the caller's
//!   `struct stat` / `struct statx` (or judged against the `access` mode; an xattr read finds
//!   none), an errno fails the call. An empty path with `AT_EMPTY_PATH`, and `fstat`, ask
//!   [`Backend::fstat`] about the fd instead (a stand-in is its device file: `S_IFCHR` with
//!   the kernel's `st_rdev`; any other file is the kernel's);
//! - for a `write`, `writev` or `pwritev2` of an fd number in
//!   [`SMI_FDS`](crate::backend::SMI_FDS) (the only writes the filter notifies), asks
//!   [`Backend::write`] with the call's pieces, checked as
//!   the kernel checks them; a file that is not an SMI stand-in writes natively;
//! - for `ftruncate`/`fallocate` of a stand-in ([`Backend::is_standin`]), answers as the
//!   kernel does for a device file (`EINVAL`; `EINVAL`/`EBADF`/`ENODEV`), so no program can
//!   resize or punch holes in a stand-in's memory;
//! - for an ioctl, takes a duplicate of the caller's fd with `pidfd_getfd` and asks
//!   [`Backend::ioctl`], which reads and writes the argument through [`Caller`]; an fd that is
//!   not a stand-in gets the kernel's own answer (`CONTINUE`);
//! - for a file `mmap`, takes a duplicate of the caller's fd the same way and asks
//!   [`Backend::mmap`], then carries the answer out so that the caller's address space ends up
//!   as if the kernel had mapped the device file at that offset: same address (`MAP_FIXED`,
//!   `MAP_FIXED_NOREPLACE`, hint), length, protection and flags, the kernel's errno on failure;
//! - for a call that changes the address space (`munmap`, `mremap`, `mprotect`, `brk`,
//!   `madvise` with advice that drops pages, `mmap` with `MAP_FIXED`; for a spawned program
//!   also `fork` and `clone` without `CLONE_VM`), tells [`Backend::address_space`] before the
//!   kernel runs it, then answers `CONTINUE`: the backend does what the kernel's MMU
//!   notifiers would, and it is done when the call returns. In attach mode only the attached
//!   thread and what it spawns are filtered, so the other threads' calls are not seen, and
//!   forks are not notified (glibc's `fork` makes the call holding every malloc lock of the
//!   process). The supervisor's threads share no lock with the threads they serve, a fork
//!   elsewhere included: see [`crate::own`].
//!
//! # Mappings of stand-ins
//!
//! - **In-process attach** ([`attach`], [`run_attached`]): the supervisor thread shares the
//!   caller's address space, so for [`MmapAction::Redirect`] it calls `mmap` itself with the
//!   caller's arguments on the backend's memfd and offset, and answers with the address it
//!   got (or `-errno`); `Continue` runs the call natively, `Fail` fails it. A process the
//!   attached thread forks cannot be mapped into this way: its redirected mappings fail with
//!   `ENODEV`.
//! - **Spawned programs** ([`spawn`], [`spawn_command`], `kfd-emu run`): the supervisor is
//!   also the program's ptrace tracer. A dedicated thread seizes the child before its `exec`
//!   (the child waits in its pre-exec hook) with `TRACESECCOMP`, `TRACEFORK`, `TRACEVFORK`,
//!   `TRACECLONE`, `TRACEEXEC`, `TRACESYSGOOD`, `TRACEEXIT` and `EXITKILL`, and the filter
//!   ([`Filter::kfd_traced`](seccomp::Filter::kfd_traced)) notifies file `mmap`s (not
//!   `SECCOMP_RET_TRACE`: a thread lent to the program's own tracer would get `ENOSYS`).
//!   The worker asks the backend; for a redirect the tracer interrupts the thread and the
//!   call is answered `-ERESTARTNOINTR`, so that it stops on its way out, where the tracer
//!   makes it issue the call again with the fd argument rewritten to
//!   [`SLOT_MARKER`](seccomp::SLOT_MARKER) in its upper 32 bits, which the filter notifies,
//!   and the worker installs the memfd with `SECCOMP_ADDFD` at a number the kernel picks
//!   (the lowest free one, so no fd of the program's is ever replaced) and answers the call
//!   with it. At that call's exit stop the tracer makes the thread issue the `mmap` again
//!   with that fd and the backend's offset (marked
//!   [`DIRECT_MARKER`](seccomp::DIRECT_MARKER): allowed), then `close` it, then gives the
//!   program its registers back with the `mmap`'s result; the program runs no instruction
//!   while the memfd is in its table. A full table does not fail the mapping (the kernel's
//!   needs no fd): the soft `RLIMIT_NOFILE` is raised by one for the install only (see
//!   `mmap`). A redirect to the same file only rewrites the offset; `Fail` answers
//!   `-errno`. A lent thread's redirects are made by a helper process sharing its memory and
//!   fd table (see `tracer`). A marked
//!   `mmap` the tracer did not prepare runs natively. **Deviation:** for the length of the
//!   redirect the memfd holds a number of the program's table (close-on-exec), so another
//!   thread's `open` made meanwhile gets the next number, a thread reading `/proc/self/fd`
//!   then sees it, and a child another thread forks then inherits it until its `exec`. `stand_in_mapping_cost` measures what a redirect
//!   costs per `mmap`+`munmap`.
//!
//!   The tracer has more jobs through `SECCOMP_RET_TRACE` stops of its own filter
//!   (told apart by their `SECCOMP_RET_DATA`, [`TRACE_DATA`](seccomp::TRACE_DATA)):
//!   - `AMDKFD_IOC_SMI_EVENTS`: marked for the worker, which installs the event fd where the
//!     kernel picks; at the call's exit the thread itself runs `fcntl(F_DUPFD, 944)` and
//!     `close` of the first number, and the argument's `anon_fd` is rewritten: the fd lands
//!     at the lowest free number of `SMI_FDS` atomically, never over one of the program's;
//!   - `clone` with `CLONE_UNTRACED`: the flag is cleared, so the child stays traced (its
//!     inherited filter sends file `mmap`s to a tracer; untraced, every one would fail with
//!     `ENOSYS` and an `exec` would die in the loader). `clone3`, whose flags the filter
//!     cannot read, fails with `ENOSYS`, and glibc falls back to `clone`;
//!   - a stop another filter asked for (a program's own `SECCOMP_RET_TRACE`; the newest
//!     filter's data wins a tie) fails its call with `ENOSYS`, which is what the kernel does
//!     for it when no tracer is attached, as far as the program knows none is.
//!
//!   **Deviations that remain** (the kernel allows one listener per filter chain and one
//!   tracer per task): a program cannot install a filter with its own listener
//!   (`SECCOMP_FILTER_FLAG_NEW_LISTENER` fails with `EBUSY`), so sandboxes built on user
//!   notification, and a `kfd-emu run` inside `kfd-emu run`, do not work; a program cannot
//!   be ptraced by another (debuggers, `strace`, and LeakSanitizer, which ptraces the
//!   program's threads at exit: run ASan/LSan builds with `ASAN_OPTIONS=detect_leaks=0`, or
//!   `LSAN_OPTIONS=detect_leaks=0` for LSan alone).
//!
//!   The tracer keeps everything else as without it: signals are re-injected, group-stops
//!   held with `PTRACE_LISTEN` until `SIGCONT`, new children and threads traced from their
//!   first instruction, the child's exit status handed to the code that waits for it.
//!   Anonymous mappings never stop the program; a file mapping that is not a stand-in's
//!   (the loader's) costs a notification and a backend call (`file_mapping_cost` in
//!   `tests/supervisor_mmap.rs` measures it).
//!   Consequences: a program under `kfd-emu run` cannot itself be debugged or `strace`d
//!   from inside (a task has one tracer), and tracees still running when the supervisor
//!   exits are killed (`EXITKILL`).
//!
//!   **Isolation, root included.** The supervisor holds every program's BO memfds, so it
//!   makes itself non-dumpable (the `kfd-emu` binary), and the spawned child drops
//!   `CAP_SYS_PTRACE` from its bounding and ambient sets before its `exec` (see
//!   `spawn::drop_ptrace_capability`): a traced program, even one running as root, cannot
//!   open `/proc/<supervisor>/fd/*` or `/proc/<supervisor>/mem`, nor `pidfd_getfd` from it,
//!   so no program reaches another's VRAM through the emulator, as none does on the kernel.
//!   Trade-off: traced root programs cannot ptrace or read other users' or non-dumpable
//!   processes.
//!
//! Calls are received and served by a pool of worker threads, never by the loop that watches
//! processes (see `serve`): the worker that receives a call serves it, and a call that takes
//! longer than a couple of milliseconds (WAIT_EVENTS, or a caller whose memory cannot be read:
//! a page behind an unserved userfaultfd, a hung FUSE mount) hands the receiving on to another
//! worker, so it holds up only its own caller. Caller memory is reached through `/proc/<tid>/mem` opened
//! before `SECCOMP_IOCTL_NOTIF_ID_VALID` is checked (see `caller`), never on the receiving
//! loop and never under the model's lock.
//!
//! Every process that makes an intercepted call is tracked with a pidfd; when it exits, the
//! backend hears of it ([`Backend::process_exited`]). Threads are told apart by tid, processes
//! (forked children included) by thread-group id. A caller that dies mid-call is normal: the
//! answer is dropped. Nothing a program sends makes the supervisor panic.
//!
//! There are two ways in, sharing this supervisor: [`attach`] / [`run_attached`] filter one
//! thread of the current process (for Rust tests), [`spawn`] / [`spawn_command`] run a program
//! under the filter (the `kfd-emu run` CLI).
//!
//! ```no_run
//! use std::sync::Arc;
//! # fn backend() -> Arc<dyn kfd_emu::backend::Backend> { unimplemented!() }
//! // In a test: every open and KFD ioctl made by the closure (and by threads it starts)
//! // goes to the backend.
//! let ok = kfd_emu::supervisor::run_attached(backend(), || std::fs::File::open("/dev/kfd").is_ok())?;
//! # Ok::<(), kfd_emu::supervisor::SupervisorError>(())
//! ```
//!
//! [`Caller`]: crate::backend::Caller
//! [`Backend::fstat`]: crate::backend::Backend::fstat
//! [`Backend::is_standin`]: crate::backend::Backend::is_standin
//! [`Backend::address_space`]: crate::backend::Backend::address_space
//! [`Backend::mmap`]: crate::backend::Backend::mmap
//! [`MmapAction::Redirect`]: crate::backend::MmapAction::Redirect

mod addrspace;
mod caller;
mod error;
mod mmap;
mod overcommit;
mod path;
mod plan;
pub mod seccomp;
mod serve;
mod spawn;
mod stat;
mod tracer;
mod usermem;
mod wakeups;

use std::ffi::OsStr;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use rustix::event::{EventfdFlags, eventfd};

use crate::backend::Backend;
pub use error::SupervisorError;
use seccomp::{Filter, Listener};
use serve::{Driver, Server};

/// Stops the loop when the shutdown eventfd is signalled.
struct AttachDriver {
    shutdown: Arc<OwnedFd>,
}

impl Driver for AttachDriver {
    fn watched(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.shutdown.as_fd()]
    }

    fn ready(&mut self, _index: usize) -> bool {
        true
    }

    fn done(&self, _live_processes: usize) -> bool {
        false
    }
}

/// The guard of [`attach`]: while it lives, the attached thread's intercepted calls are served.
///
/// Dropping it stops serving: it returns once no call is served from the backend any more.
/// **The filter stays on the thread** (seccomp filters cannot be removed), so afterwards every
/// notified call (`open`/`openat`, the `stat` family, `readlink`, `'K'`/`'d'` ioctls, file
/// `mmap`s, the address-space calls; see [`Filter::kfd`]) of that thread — and of threads
/// and processes it started — still stops for a round trip, and the supervisor thread lets
/// it run on the real kernel as issued, until no task uses the filter any more. (Failing them
/// instead, as an absent listener makes the kernel do, would fail the thread's `munmap`s, which
/// glibc aborts on.) Attach on a thread that ends with the guard: [`run_attached`] does
/// exactly that.
pub struct Attached {
    backend: Arc<dyn Backend>,
    shutdown: Arc<OwnedFd>,
    /// Says when the server has stopped (then the thread passes calls through).
    stopped: std::sync::Mutex<Option<mpsc::Receiver<()>>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Attached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attached")
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl Attached {
    /// The backend serving the attached thread.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // An eventfd write of 1 cannot fail short of a counter overflow, which a single
        // writer never reaches.
        let _ = rustix::io::write(&*self.shutdown, &1u64.to_ne_bytes());
        // Not a join: the thread goes on letting this thread's calls through until no task
        // uses the filter, which includes this thread.
        let stopped = self.stopped.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(stopped) = stopped.take() {
            let _ = stopped.recv();
        }
        self.thread.take();
    }
}

/// Filters the calling thread and serves it from `backend` until the guard is dropped.
///
/// The supervisor thread is started first, so it is not filtered; then the filter is
/// installed on the calling thread only (`PR_SET_NO_NEW_PRIVS` is set on it too) and its
/// listener handed over. Threads and processes the calling thread creates afterwards are
/// filtered as well and served by the same supervisor; other threads of the process are not.
///
/// The supervisor's threads share no lock with the attached thread (see [`crate::own`]):
/// they allocate from the emulator's private heap, leave glibc frees and new threads to the
/// helper thread started here (before the filter), and print with one raw `write(2)`. So a
/// notified call made while the attached thread holds a malloc arena (glibc's `mprotect`,
/// `munmap`, `madvise`, `brk` from inside `malloc`), the loader's lock, Rust's stderr lock or
/// libtest's output capture is answered, even while another thread of the process forks.
/// It also raises glibc's malloc arena limit (`M_ARENA_MAX`), so that other threads do not
/// share the attached thread's arena.
///
/// See [`Attached`] for what remains after the guard is dropped; [`run_attached`] is the
/// usual way in.
pub fn attach(backend: Arc<dyn Backend>) -> Result<Attached, SupervisorError> {
    // Before the supervisor's threads start: an attached thread may hold its malloc arena's
    // lock inside a notified call (see `crate::arenas`).
    crate::arenas::one_per_thread();
    // Before the filter: the helper frees glibc memory for, and starts threads for, the
    // supervisor's threads, which never wait for either (see `crate::own`).
    crate::own::start_helper();
    let filter = Filter::kfd();
    let shutdown = eventfd(0, EventfdFlags::CLOEXEC).map_err(|source| SupervisorError::Setup {
        what: "eventfd",
        source,
    })?;
    let shutdown = Arc::new(shutdown);
    let (send, receive) = mpsc::sync_channel::<Listener>(1);
    let (stopped_tx, stopped) = mpsc::sync_channel::<()>(1);
    let live = Arc::new(crate::own::Latch::default());
    let thread = {
        let backend = Arc::clone(&backend);
        let shutdown = Arc::clone(&shutdown);
        // Opens the latch once a worker runs, or as soon as none will (no listener, no
        // server).
        let opener = live.opener();
        std::thread::Builder::new()
            .name("kfd-emu-supervisor".into())
            .spawn(move || {
                crate::own::mark();
                // No listener: the filter was not installed; nothing to serve (and nobody
                // waits on the latch).
                if let Ok(listener) = receive.recv() {
                    match Server::new(listener, backend, mmap::Route::InProcess) {
                        Ok(mut server) => {
                            server.run_opening(&mut AttachDriver { shutdown }, Some(opener));
                            let listener = server.listener();
                            drop(server);
                            let _ = stopped_tx.send(());
                            serve::pass_through(&listener);
                        }
                        Err(err) => {
                            drop(opener);
                            crate::own::elog!("kfd-emu: starting the supervisor: {err}");
                        }
                    }
                }
            })
            .map_err(|source| SupervisorError::Thread { source })?
    };
    let listener = filter
        .install()
        .map_err(|source| SupervisorError::InstallFilter { source })
        .and_then(|fd| {
            Listener::new(fd).map_err(|source| SupervisorError::Setup {
                what: "SECCOMP_GET_NOTIF_SIZES",
                source,
            })
        });
    match listener {
        Ok(listener) => {
            // The thread is alive and waiting on the channel, so the send cannot fail.
            let _ = send.send(listener);
            // Filtered from here on: go on only once a worker serves (the wait neither
            // allocates nor makes a notified call).
            live.wait();
            Ok(Attached {
                backend,
                shutdown,
                stopped: std::sync::Mutex::new(Some(stopped)),
                thread: Some(thread),
            })
        }
        Err(err) => {
            drop(send);
            let _ = thread.join();
            Err(err)
        }
    }
}

/// Runs `f` on a fresh thread attached to `backend` and returns its result.
///
/// The thread, and the filter that stays on it, end with `f`, so the caller's thread is never
/// filtered. A panic in `f` is resumed on the calling thread.
///
/// ```no_run
/// # use std::sync::Arc;
/// # fn backend() -> Arc<dyn kfd_emu::backend::Backend> { unimplemented!() }
/// let version = kfd_emu::supervisor::run_attached(backend(), || {
///     std::fs::File::open("/dev/kfd").map(|_| ())
/// })?;
/// # Ok::<(), kfd_emu::supervisor::SupervisorError>(())
/// ```
pub fn run_attached<T: Send>(
    backend: Arc<dyn Backend>,
    f: impl FnOnce() -> T + Send,
) -> Result<T, SupervisorError> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("kfd-emu-attached".into())
            .spawn_scoped(scope, move || {
                let guard = attach(backend)?;
                let out = f();
                drop(guard);
                Ok(out)
            })
            .map_err(|source| SupervisorError::Thread { source })?;
        match worker.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Runs `program` with `args` under the filter, serves it from `backend`, and returns its exit
/// status.
///
/// The same as [`spawn_command`] with `Command::new(program).args(args)`; stdio is inherited.
pub fn spawn<S: AsRef<OsStr>>(
    backend: Arc<dyn Backend>,
    program: impl AsRef<OsStr>,
    args: impl IntoIterator<Item = S>,
) -> Result<ExitStatus, SupervisorError> {
    spawn::spawn(backend, program, args)
}

/// Runs `command` under the filter, serves it from `backend` on the calling thread, and
/// returns its exit status.
///
/// The child makes itself dumpable, sets `PR_SET_NO_NEW_PRIVS`, installs the filter
/// ([`Filter::kfd_traced`](seccomp::Filter::kfd_traced)), passes the listener and its pid to
/// the parent over a socketpair (`SCM_RIGHTS`), waits until the supervisor's tracer thread
/// has seized it (see the module docs), and execs. Its descendants inherit the filter and
/// are served too, each as its own process. Serving ends when the child has exited and been
/// reaped and every process that made an intercepted call has exited (or when no task uses the
/// filter any more); a descendant that makes its first intercepted call after that gets
/// `ENOSYS`. A pre-exec hook is added to `command`.
pub fn spawn_command(
    backend: Arc<dyn Backend>,
    command: &mut Command,
) -> Result<ExitStatus, SupervisorError> {
    spawn::spawn_command(backend, command)
}

// The guard may be moved to, and dropped on, another thread.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<Attached>();
};
