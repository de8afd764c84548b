//! Attach mode shares no lock with the thread it serves (see `kfd_emu::own`).
//!
//! The scenario runs in a child process (this binary again, one role test), bounded by a
//! timeout: a deadlock there fails the test, naming it, instead of hanging the run.
//!
//! Built with `--no-default-features` (no private heap for the emulator's threads, as before
//! `kfd_emu::own`), `fork_while_an_attached_thread_grows_its_arena` deadlocks every time.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use kfd_emu::backend::{AddressSpaceChange, Backend, Caller, CallerId, IoctlResult, OpenAction};

/// Set in the child process: which role to play.
const ROLE: &str = "KFD_EMU_ATTACH_DEADLOCK_ROLE";

/// How long the scenario may take before it counts as a deadlock (it takes well under a
/// second; the margin is for a loaded 2-CPU machine).
const DEADLOCK_AFTER: Duration = Duration::from_secs(60);

/// How long the backend waits for the forking thread to block.
const PATIENCE: Duration = Duration::from_secs(20);

static ARMED: AtomicBool = AtomicBool::new(false);
static TRIGGERED: AtomicBool = AtomicBool::new(false);
static GO_FORK: AtomicBool = AtomicBool::new(false);
static PREPARED: AtomicBool = AtomicBool::new(false);
static FORKER: AtomicI32 = AtomicI32::new(0);

extern "C" fn fork_prepare() {
    PREPARED.store(true, Ordering::SeqCst);
}

/// Whether thread `tid` of this process is in a `futex` wait (from `/proc`).
fn in_futex(tid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall"))
        .is_ok_and(|s| s.split(' ').next() == Some(&libc::SYS_futex.to_string()))
}

/// Serves nothing but address-space changes: the first `mprotect` after [`ARMED`] (the
/// attached thread growing its malloc arena, holding the arena's lock) starts a `fork` on
/// another thread, waits until that `fork` is blocked (it takes every arena in turn, so it
/// waits for the attached thread's, holding the ones before it), then allocates as any
/// backend does, and answers.
struct ForkWhileNotified;

impl Backend for ForkWhileNotified {
    fn open(&self, _caller: &dyn Caller, _path: &str, _flags: i32, _mode: u32) -> OpenAction {
        OpenAction::Continue
    }

    fn ioctl(
        &self,
        _caller: &dyn Caller,
        _file: std::os::fd::BorrowedFd<'_>,
        _cmd: u32,
        _arg: u64,
    ) -> Option<IoctlResult> {
        None
    }

    fn address_space(&self, _caller: CallerId, change: AddressSpaceChange) {
        if !matches!(change, AddressSpaceChange::Protect { .. })
            || !ARMED.load(Ordering::SeqCst)
            || TRIGGERED.swap(true, Ordering::SeqCst)
        {
            return;
        }
        GO_FORK.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + PATIENCE;
        let mut blocked = false;
        while Instant::now() < deadline {
            let forker = FORKER.load(Ordering::SeqCst);
            if PREPARED.load(Ordering::SeqCst) && forker != 0 && in_futex(forker) {
                blocked = true;
                break;
            }
            std::thread::yield_now();
        }
        // An allocation too big for glibc's per-thread cache: from an arena, under its lock.
        let mut block = Vec::<u8>::with_capacity(64 << 10);
        block.resize(64 << 10, 1);
        std::hint::black_box(&block);
        drop(block);
        if blocked {
            // Written raw: no lock of std's stderr or libtest's capture is taken here.
            let msg = b"REACHED: fork blocked while the attached thread waits in mprotect\n";
            // SAFETY: writes a static byte string to fd 2.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
        }
    }

    fn process_exited(&self, _tgid: i32) {}
}

/// The child's part (only under [`ROLE`]).
#[test]
fn fork_while_notified_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    // SAFETY: registers a handler that only stores to an atomic.
    unsafe { libc::pthread_atfork(Some(fork_prepare), None, None) };
    let forker = std::thread::spawn(|| {
        FORKER.store(
            rustix::thread::gettid().as_raw_nonzero().get(),
            Ordering::SeqCst,
        );
        while !GO_FORK.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // SAFETY: the child only calls `_exit`, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: ends the forked child at once.
            unsafe { libc::_exit(0) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    });
    let backend: Arc<dyn Backend> = Arc::new(ForkWhileNotified);
    kfd_emu::supervisor::run_attached(backend, || {
        ARMED.store(true, Ordering::SeqCst);
        // Grows this thread's arena (glibc `grow_heap`: mprotect under the arena lock) until
        // the backend has seen one.
        let mut kept = Vec::new();
        while !TRIGGERED.load(Ordering::SeqCst) && kept.len() < 100_000 {
            kept.push(vec![0u8; 32 << 10]);
        }
        ARMED.store(false, Ordering::SeqCst);
        drop(kept);
    })
    .expect("attach");
    // The forking thread never starts without the trigger; start it so that it ends.
    GO_FORK.store(true, Ordering::SeqCst);
    forker.join().expect("the forking thread");
    assert!(TRIGGERED.load(Ordering::SeqCst), "no mprotect was notified");
    println!("ROLE OK");
}

/// glibc's `fork`, from another thread, while an attached thread waits in a notified
/// `mprotect` inside `malloc` (holding its arena) and the worker serving it allocates: the
/// call is answered, the fork completes, nothing hangs. Before `kfd_emu::own` the worker's
/// allocation waited on an arena the fork held, and the fork on the attached thread's arena.
#[test]
fn fork_while_an_attached_thread_grows_its_arena() {
    let (out, err) = run_role(
        "fork_while_notified_role",
        "fork while an attached thread waits in a notified mprotect",
    );
    assert!(
        err.contains("REACHED"),
        "the fork never blocked on the attached thread's arena: the scenario was not \
         exercised\n{out}\n{err}"
    );
}

/// The child's part of [`a_traced_ioctl_while_the_caller_holds_stderr`] (only under
/// [`ROLE`]).
#[test]
fn traced_ioctl_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    let model = kfd_emu::model::Model::new(kfd_emu::model::ModelConfig {
        trace: true,
        ..kfd_emu::model::ModelConfig::default()
    })
    .expect("a model");
    let version = kfd_emu::supervisor::run_attached(model, || {
        // Rust's stderr lock, held across the ioctl the emulator traces.
        let held = std::io::stderr().lock();
        let kfd = kfd_ioctl::Kfd::open().expect("/dev/kfd");
        let version = kfd.get_version().expect("GET_VERSION");
        drop(held);
        version
    })
    .expect("attach");
    println!("ROLE OK {version:?}");
}

/// An attached thread holding Rust's stderr lock across a KFD ioctl that the model traces
/// (`ModelConfig::trace`): the trace line is written and the ioctl answered. Before
/// `kfd_emu::own` the worker's `eprintln!` waited for the lock the caller held.
#[test]
fn a_traced_ioctl_while_the_caller_holds_stderr() {
    let (_, err) = run_role(
        "traced_ioctl_role",
        "a traced ioctl while the caller holds stderr",
    );
    assert!(err.contains("GET_VERSION() = 0"), "no trace line: {err}");
}

/// The ioctl [`PanicOnIoctl`] panics on (type `'K'`, so the filter notifies it).
const PANIC_IOCTL: u64 = 0xc008_4b7f;

/// A backend with a bug: it panics on [`PANIC_IOCTL`].
struct PanicOnIoctl;

impl Backend for PanicOnIoctl {
    fn open(&self, _caller: &dyn Caller, _path: &str, _flags: i32, _mode: u32) -> OpenAction {
        OpenAction::Continue
    }

    fn ioctl(
        &self,
        _caller: &dyn Caller,
        _file: std::os::fd::BorrowedFd<'_>,
        cmd: u32,
        _arg: u64,
    ) -> Option<IoctlResult> {
        assert!(u64::from(cmd) != PANIC_IOCTL, "a backend bug");
        None
    }

    fn process_exited(&self, _tgid: i32) {}
}

/// Makes [`PANIC_IOCTL`] while it is being formatted, and notes the errno.
struct IoctlWhileFormatted<'a>(&'a std::fs::File, std::cell::Cell<i32>);

impl std::fmt::Display for IoctlWhileFormatted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::os::fd::AsRawFd;
        let mut arg = 0u64;
        // SAFETY: an ioctl the kernel does not know on /dev/null, with a valid u64 argument.
        let ret = unsafe { libc::ioctl(self.0.as_raw_fd(), PANIC_IOCTL as _, &mut arg) };
        let errno = if ret < 0 {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            0
        };
        self.1.set(errno);
        f.write_str("formatted")
    }
}

/// The child's part of [`a_backend_panic_while_the_caller_holds_the_output_capture`] (only
/// under [`ROLE`]; run with libtest's output capture on).
#[test]
fn panic_in_capture_role() {
    if std::env::var_os(ROLE).is_none() {
        return;
    }
    let errno = kfd_emu::supervisor::run_attached(Arc::new(PanicOnIoctl), || {
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        let call = IoctlWhileFormatted(&null, std::cell::Cell::new(0));
        // libtest's capture (this thread inherited it) is locked while `call` is formatted.
        println!("{call}");
        call.1.get()
    })
    .expect("attach");
    assert_eq!(errno, libc::EIO, "the backend's panic is answered with EIO");
    // Past libtest's capture, so that the parent sees it.
    let msg = b"ROLE OK\n";
    // SAFETY: writes a static byte string to fd 1.
    unsafe { libc::write(1, msg.as_ptr().cast(), msg.len()) };
}

/// An attached thread holding libtest's output capture (inherited from the test thread)
/// across a KFD ioctl on which the backend panics: the panic is reported on fd 2 and the call
/// answered with EIO. Before `kfd_emu::own` the worker's panic message went to the same
/// capture (the default panic hook), whose lock the caller held.
#[test]
fn a_backend_panic_while_the_caller_holds_the_output_capture() {
    let (_, err) = run_role_with(
        "panic_in_capture_role",
        "a backend panic while the caller holds the output capture",
        false,
    );
    assert!(
        err.contains("panicked at") && err.contains("a backend bug"),
        "{err}"
    );
}

/// Runs `role` of this binary in a child process under [`ROLE`] with libtest's output capture
/// off; fails naming `what` when it does not end within [`DEADLOCK_AFTER`] (it is killed), or
/// ends without `ROLE OK`. Its stdout and stderr.
fn run_role(role: &str, what: &str) -> (String, String) {
    run_role_with(role, what, true)
}

/// [`run_role`], with libtest's output capture on unless `nocapture`.
fn run_role_with(role: &str, what: &str, nocapture: bool) -> (String, String) {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", role, "--test-threads=1"])
        .args(nocapture.then_some("--nocapture"))
        .env(ROLE, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the role");
    // Read on threads, so that a full pipe never holds the child.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > DEADLOCK_AFTER {
            // Our own child, by its pid.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().expect("stdout reader");
    let err = err.join().expect("stderr reader");
    let Some(status) = status else {
        panic!("deadlock: {what}: not done in {DEADLOCK_AFTER:?}\n{out}\n{err}");
    };
    assert!(
        status.success() && out.contains("ROLE OK"),
        "{what}: {status}\n{out}\n{err}"
    );
    (out, err)
}
