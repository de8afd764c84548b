//! The seccomp supervisor against a small fake backend: what reaches the backend, what the
//! program sees, and that processes, threads, forks and crashes are handled.
//!
//! The fake backend redirects three paths: `/emu-test/file` (a memfd with [`CONTENT`]),
//! `/emu-test/dev` (an empty memfd) and `/emu-test/denied` (`EACCES`). On its memfds it answers
//! three `'K'` ioctls: [`ECHO`] (reads two u64, writes back `a + 1, b * 2`, returns 42),
//! [`BLOCK`] (parks until released, returns 7) and [`INSTALL`] (installs a fresh memfd in the
//! caller and writes its number back).

use std::collections::HashSet;
use std::ffi::CString;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

mod fork_support;

use fork_support::{fork, wait_pid};
use kfd_emu::backend::{Backend, Caller, CallerId, IoctlResult, OpenAction};
use kfd_emu::supervisor::{attach, run_attached, spawn, spawn_command};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

const CONTENT: &[u8] = b"hello from the fake backend\n";

const fn iowr(nr: u32, size: u32) -> u32 {
    (3 << 30) | (size << 16) | ((b'K' as u32) << 8) | nr
}
/// `_IOWR('K', 0x70, [u64; 2])`.
const ECHO: u32 = iowr(0x70, 16);
/// `_IOWR('K', 0x71, u64)`: may block.
const BLOCK: u32 = iowr(0x71, 8);
/// `_IOWR('K', 0x72, u32)`.
const INSTALL: u32 = iowr(0x72, 4);

/// How long a test waits for something that should happen at once before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

#[derive(Default)]
struct State {
    standins: HashSet<u64>,
    opened_by: HashSet<i32>,
    exited: Vec<i32>,
    last_ioctl_caller: Option<CallerId>,
    parked: usize,
    released: bool,
}

#[derive(Default)]
struct Fake {
    state: Mutex<State>,
    changed: Condvar,
}

impl Fake {
    fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn memfd(&self, content: &[u8]) -> Result<OwnedFd, Errno> {
        let fd = rustix::fs::memfd_create("emu-test", rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::io::pwrite(&fd, content, 0)?;
        let ino = rustix::fs::fstat(&fd)?.st_ino;
        self.state.lock().unwrap().standins.insert(ino);
        Ok(fd)
    }

    /// Waits until `done` holds for the state; false after [`PATIENCE`].
    fn wait_for(&self, done: impl Fn(&State) -> bool) -> bool {
        let deadline = Instant::now() + PATIENCE;
        let mut state = self.state.lock().unwrap();
        while !done(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.changed.wait_timeout(state, left).unwrap().0;
        }
        true
    }

    fn release(&self) {
        self.state.lock().unwrap().released = true;
        self.changed.notify_all();
    }

    fn exited(&self) -> Vec<i32> {
        self.state.lock().unwrap().exited.clone()
    }
}

impl Backend for Fake {
    fn open(&self, caller: &dyn Caller, path: &str, _flags: i32, _mode: u32) -> OpenAction {
        self.state
            .lock()
            .unwrap()
            .opened_by
            .insert(caller.id().tgid);
        let made = match path {
            "/emu-test/file" => self.memfd(CONTENT),
            "/emu-test/dev" => self.memfd(b""),
            "/emu-test/denied" => return OpenAction::Fail(Errno::ACCESS),
            _ => return OpenAction::Continue,
        };
        match made {
            Ok(fd) => OpenAction::Inject(fd),
            Err(errno) => OpenAction::Fail(errno),
        }
    }

    fn ioctl(
        &self,
        caller: &dyn Caller,
        file: BorrowedFd<'_>,
        cmd: u32,
        arg: u64,
    ) -> Option<IoctlResult> {
        let ino = rustix::fs::fstat(file).ok()?.st_ino;
        let mut state = self.state.lock().unwrap();
        if !state.standins.contains(&ino) {
            return None;
        }
        state.last_ioctl_caller = Some(caller.id());
        Some(match cmd {
            ECHO => {
                drop(state);
                let mut bytes = [0u8; 16];
                caller
                    .read(arg, &mut bytes)
                    .and_then(|()| {
                        let a = u64::from_ne_bytes(bytes[..8].try_into().unwrap());
                        let b = u64::from_ne_bytes(bytes[8..].try_into().unwrap());
                        bytes[..8].copy_from_slice(&a.wrapping_add(1).to_ne_bytes());
                        bytes[8..].copy_from_slice(&b.wrapping_mul(2).to_ne_bytes());
                        caller.write(arg, &bytes)
                    })
                    .map(|()| 42)
            }
            BLOCK => {
                state.parked += 1;
                self.changed.notify_all();
                while !state.released {
                    state = self.changed.wait(state).unwrap();
                }
                state.parked -= 1;
                self.changed.notify_all();
                Ok(7)
            }
            INSTALL => {
                drop(state);
                self.memfd(CONTENT)
                    .and_then(|fd| caller.install_fd(fd.as_fd(), true))
                    .and_then(|number| caller.write(arg, &number.to_ne_bytes()))
                    .map(|()| 0)
            }
            _ => Err(Errno::NOTTY),
        })
    }

    fn process_exited(&self, tgid: i32) {
        self.state.lock().unwrap().exited.push(tgid);
        self.changed.notify_all();
    }
}

fn open(path: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, flags, Mode::empty())
}

/// `ioctl(fd, cmd, arg)` as a program issues it.
fn ioctl(fd: BorrowedFd<'_>, cmd: u32, arg: u64) -> Result<i32, Errno> {
    // SAFETY: the commands used here are the fake backend's, which touches `arg` only through
    // process_vm_readv/writev (a bad address is EFAULT, not a write through a wild pointer),
    // or ones the kernel refuses on the file without touching `arg`.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::Ioctl::from(cmd), arg as usize) };
    if ret < 0 {
        Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap())
    } else {
        Ok(ret)
    }
}

fn echo(fd: BorrowedFd<'_>, a: u64, b: u64) -> Result<(i32, [u64; 2]), Errno> {
    let mut words = [a, b];
    let ret = ioctl(fd, ECHO, words.as_mut_ptr() as u64)?;
    Ok((ret, words))
}

fn read_all(fd: OwnedFd) -> Vec<u8> {
    let mut file = std::fs::File::from(fd);
    file.rewind().unwrap();
    let mut out = Vec::new();
    file.read_to_end(&mut out).unwrap();
    out
}

fn is_cloexec(fd: BorrowedFd<'_>) -> bool {
    rustix::io::fcntl_getfd(fd)
        .unwrap()
        .contains(rustix::io::FdFlags::CLOEXEC)
}

#[test]
fn redirected_openat_returns_the_injected_memfd() {
    let result = run_attached(Fake::new(), || {
        let fd = open("/emu-test/file", OFlags::RDWR).unwrap();
        let mut file = std::fs::File::from(fd);
        let mut text = Vec::new();
        file.read_to_end(&mut text).unwrap();
        file.write_all(b"more").unwrap();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        (text, read_all(file.into()), link)
    })
    .unwrap();
    assert_eq!(result.0, CONTENT);
    assert_eq!(result.1, [CONTENT, b"more"].concat());
    assert!(
        result.2.to_string_lossy().starts_with("/memfd:emu-test"),
        "{:?}",
        result.2
    );
}

#[test]
fn o_cloexec_is_honoured_on_injected_fds() {
    let flags = run_attached(Fake::new(), || {
        let with = open("/emu-test/file", OFlags::RDONLY | OFlags::CLOEXEC).unwrap();
        let without = open("/emu-test/file", OFlags::RDONLY).unwrap();
        // The legacy open(2) goes through the same path.
        let path = CString::new("/emu-test/file").unwrap();
        // SAFETY: open(2) with a NUL-terminated path; the fd is owned right after.
        let legacy = unsafe {
            libc::syscall(
                libc::SYS_open,
                path.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        assert!(
            legacy >= 0,
            "SYS_open failed: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a fresh fd returned by open(2), owned by nobody else.
        let legacy = unsafe { OwnedFd::from_raw_fd(legacy as i32) };
        (
            is_cloexec(with.as_fd()),
            is_cloexec(without.as_fd()),
            is_cloexec(legacy.as_fd()),
            read_all(legacy),
        )
    })
    .unwrap();
    assert_eq!((flags.0, flags.1, flags.2), (true, false, true));
    assert_eq!(flags.3, CONTENT);
}

#[test]
fn unrelated_opens_run_natively_and_failures_are_passed_on() {
    let (status, denied, missing) = run_attached(Fake::new(), || {
        (
            std::fs::read_to_string("/proc/self/status").unwrap(),
            open("/emu-test/denied", OFlags::RDONLY).err(),
            open("/emu-test/missing", OFlags::RDONLY).err(),
        )
    })
    .unwrap();
    // The kernel opened the caller's own /proc/self: it names this process.
    assert!(
        status.contains(&format!("Tgid:\t{}\n", std::process::id())),
        "{status}"
    );
    assert_eq!(denied, Some(Errno::ACCESS));
    assert_eq!(missing, Some(Errno::NOENT));
}

#[test]
fn relative_paths_resolve_against_dirfd_and_are_normalised() {
    let text = run_attached(Fake::new(), || {
        let root = open("/", OFlags::PATH | OFlags::DIRECTORY).unwrap();
        let fd = rustix::fs::openat(
            &root,
            "emu-test/./x/..//file",
            OFlags::RDONLY,
            Mode::empty(),
        )
        .unwrap();
        read_all(fd)
    })
    .unwrap();
    assert_eq!(text, CONTENT);
}

#[test]
fn a_path_that_ends_at_an_unmapped_page_is_read() {
    let (at_edge, unterminated) = run_attached(Fake::new(), || {
        // SAFETY: a fresh private mapping of two pages; the second is unmapped at once and the
        // first is unmapped at the end; nothing else refers to them.
        let pages = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                8192,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap();
        // SAFETY: the second page of the mapping above.
        unsafe { rustix::mm::munmap(pages.cast::<u8>().add(4096).cast(), 4096) }.unwrap();
        // SAFETY: the first page stays mapped and writable until the munmap below.
        let page = unsafe { std::slice::from_raw_parts_mut(pages.cast::<u8>(), 4096) };
        let path = b"/emu-test/file\0";
        let start = 4096 - path.len();
        page[start..].copy_from_slice(path);
        let addr = page[start..].as_ptr() as u64;
        let openat = |addr: u64| {
            // SAFETY: openat(2) on a caller-chosen address: the kernel (and the supervisor)
            // validate it; a bad one is EFAULT.
            let fd =
                unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, addr, libc::O_RDONLY) };
            if fd < 0 {
                Err(std::io::Error::last_os_error().raw_os_error())
            } else {
                // SAFETY: a fresh fd returned by openat(2).
                Ok(read_all(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
            }
        };
        let at_edge = openat(addr);
        // Without its NUL the string runs into the unmapped page.
        page[4095] = b'x';
        let unterminated = openat(addr);
        // SAFETY: the first page, not used after this.
        unsafe { rustix::mm::munmap(pages, 4096) }.unwrap();
        (at_edge, unterminated)
    })
    .unwrap();
    assert_eq!(at_edge, Ok(CONTENT.to_vec()));
    assert_eq!(unterminated, Err(Some(libc::EFAULT)));
}

#[test]
fn kfd_ioctl_is_answered_through_caller_memory() {
    let fake = Fake::new();
    let (answer, me) = run_attached(fake.clone(), || {
        let fd = open("/emu-test/dev", OFlags::RDWR).unwrap();
        let me = CallerId {
            tid: rustix::thread::gettid().as_raw_nonzero().get(),
            tgid: std::process::id() as i32,
        };
        (echo(fd.as_fd(), 10, 21), me)
    })
    .unwrap();
    assert_eq!(answer, Ok((42, [11, 42])));
    assert_eq!(fake.state.lock().unwrap().last_ioctl_caller, Some(me));
}

#[test]
fn ioctl_on_a_foreign_fd_gets_the_kernels_own_answer() {
    let fake = Fake::new();
    let (null, closed) = run_attached(fake.clone(), || {
        let null = open("/dev/null", OFlags::RDWR).unwrap();
        let mut words = [1u64, 2];
        let null = ioctl(null.as_fd(), ECHO, words.as_mut_ptr() as u64);
        // SAFETY: a descriptor number far above any open one; ioctl only looks it up.
        let closed = ioctl(unsafe { BorrowedFd::borrow_raw(999_999) }, ECHO, 0);
        (null, closed)
    })
    .unwrap();
    assert_eq!(null, Err(Errno::NOTTY));
    assert_eq!(closed, Err(Errno::BADF));
    assert_eq!(
        fake.state.lock().unwrap().last_ioctl_caller,
        None,
        "the backend answered a foreign fd"
    );
}

#[test]
fn bad_ioctl_pointers_give_efault() {
    let (unmapped, read_only, page_value) = run_attached(Fake::new(), || {
        let fd = open("/emu-test/dev", OFlags::RDWR).unwrap();
        let unmapped = ioctl(fd.as_fd(), ECHO, 8);
        // SAFETY: a fresh anonymous mapping, unmapped below; nothing else refers to it.
        let page = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                4096,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap();
        let read_only = ioctl(fd.as_fd(), ECHO, page as u64);
        // SAFETY: the page is mapped readable.
        let value = unsafe { page.cast::<u64>().read() };
        // SAFETY: the mapping made above, not used after this.
        unsafe { rustix::mm::munmap(page, 4096) }.unwrap();
        (unmapped, read_only, value)
    })
    .unwrap();
    assert_eq!(unmapped, Err(Errno::FAULT));
    assert_eq!(read_only, Err(Errno::FAULT));
    assert_eq!(page_value, 0, "a write-back reached a read-only page");
}

#[test]
fn install_fd_puts_a_descriptor_in_the_caller() {
    let (ret, text, cloexec) = run_attached(Fake::new(), || {
        let fd = open("/emu-test/dev", OFlags::RDWR).unwrap();
        let mut number = -1i32;
        let ret = ioctl(fd.as_fd(), INSTALL, (&raw mut number) as u64);
        assert!(number >= 0, "no fd number written back ({ret:?})");
        // SAFETY: the backend installed this fd in our table for us to own.
        let installed = unsafe { OwnedFd::from_raw_fd(number) };
        let cloexec = is_cloexec(installed.as_fd());
        (ret, read_all(installed), cloexec)
    })
    .unwrap();
    assert_eq!(ret, Ok(0));
    assert_eq!(text, CONTENT);
    assert!(cloexec);
}

#[test]
fn openat2_fails_with_enosys() {
    let result = run_attached(Fake::new(), || {
        let path = CString::new("/proc/self/status").unwrap();
        let how = [0u64; 3]; // struct open_how { flags, mode, resolve }
        // SAFETY: openat2 with a NUL-terminated path and a zeroed open_how of its size.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                path.as_ptr(),
                how.as_ptr(),
                24usize,
            )
        };
        (ret, std::io::Error::last_os_error().raw_os_error())
    })
    .unwrap();
    assert_eq!(result, (-1, Some(libc::ENOSYS)));
}

#[test]
fn a_blocking_ioctl_is_parked_while_other_threads_are_served() {
    let fake = Fake::new();
    let (blocked, others) = run_attached(fake.clone(), || {
        std::thread::scope(|scope| {
            // Started from the attached thread, so filtered and served too.
            let waiter = scope.spawn(|| {
                let fd = open("/emu-test/dev", OFlags::RDWR).unwrap();
                ioctl(fd.as_fd(), BLOCK, 0)
            });
            assert!(
                fake.wait_for(|s| s.parked == 1),
                "BLOCK never reached the backend"
            );
            let fd = open("/emu-test/dev", OFlags::RDWR).unwrap();
            let others: Vec<_> = (0..3).map(|i| echo(fd.as_fd(), i, i)).collect();
            fake.release();
            (waiter.join().unwrap(), others)
        })
    })
    .unwrap();
    assert_eq!(blocked, Ok(7));
    assert_eq!(
        others,
        vec![Ok((42, [1, 0])), Ok((42, [2, 2])), Ok((42, [3, 4]))]
    );
}

/// The child's checks: 0 when the redirected open and an ECHO both worked.
fn child_uses_the_backend() -> i32 {
    let Ok(fd) = open("/emu-test/file", OFlags::RDONLY) else {
        return 10;
    };
    let mut buf = [0u8; 64];
    match rustix::io::read(&fd, &mut buf) {
        Ok(n) if buf[..n] == *CONTENT => {}
        _ => return 11,
    }
    match echo(fd.as_fd(), 1, 2) {
        Ok((42, [2, 4])) => 0,
        _ => 12,
    }
}

#[test]
fn a_forked_child_is_served_as_its_own_process_and_reported_exited() {
    let fake = Fake::new();
    let (status, child) = run_attached(fake.clone(), || {
        let pid = fork(child_uses_the_backend);
        let status = wait_pid(pid);
        (status, pid)
    })
    .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(fake.state.lock().unwrap().opened_by.contains(&child));
    assert!(
        fake.wait_for(|s| s.exited.contains(&child)),
        "process_exited({child}) never came"
    );
    assert!(!fake.exited().contains(&(std::process::id() as i32)));
}

#[test]
fn a_caller_killed_mid_ioctl_does_not_hang_the_supervisor() {
    let fake = Fake::new();
    let (status, child, before, after) = run_attached(fake.clone(), || {
        let pid = fork(|| {
            let Ok(fd) = open("/emu-test/dev", OFlags::RDWR) else {
                return 10;
            };
            let _ = ioctl(fd.as_fd(), BLOCK, 0);
            11
        });
        assert!(
            fake.wait_for(|s| s.parked == 1),
            "the child's BLOCK never reached the backend"
        );
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        let status = wait_pid(pid);
        assert!(
            fake.wait_for(|s| s.exited.contains(&pid)),
            "process_exited({pid}) never came"
        );
        let fd = open("/emu-test/dev", OFlags::RDWR).unwrap();
        let before = echo(fd.as_fd(), 5, 5);
        // The parked call now answers a dead caller: the answer is dropped, nothing hangs.
        fake.release();
        assert!(fake.wait_for(|s| s.parked == 0));
        let after = echo(fd.as_fd(), 6, 6);
        (status, pid, before, after)
    })
    .unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{status:?} of {child}"
    );
    assert_eq!(before, Ok((42, [6, 10])));
    assert_eq!(after, Ok((42, [7, 12])));
}

#[test]
fn a_dropped_guard_leaves_the_thread_on_the_real_kernel() {
    let after = std::thread::spawn(|| {
        let guard = attach(Fake::new()).unwrap();
        let served = read_all(open("/emu-test/file", OFlags::RDONLY).unwrap());
        assert_eq!(served, CONTENT);
        drop(guard);
        let null = std::fs::File::open("/dev/null")
            .map(|_| ())
            .map_err(|e| e.raw_os_error());
        let redirected = open("/emu-test/file", OFlags::RDONLY).map(|_| ());
        (null, redirected)
    })
    .join()
    .unwrap();
    // /dev/null opens as it would anywhere; the emulated path is not there on the real kernel.
    assert_eq!(after, (Ok(()), Err(Errno::NOENT)));
}

fn output_file() -> (OwnedFd, std::process::Stdio) {
    let fd = rustix::fs::memfd_create("stdout", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    let stdio = std::process::Stdio::from(fd.try_clone().unwrap());
    (fd, stdio)
}

#[test]
fn a_spawned_cat_prints_the_fake_file() {
    let fake = Fake::new();
    let status = spawn(fake.clone(), "/bin/true", [""; 0]).unwrap();
    assert!(status.success(), "{status:?}");

    // Relative to the child's working directory, output captured.
    let (out, stdout) = output_file();
    let mut command = Command::new("/bin/cat");
    command.arg("emu-test/file").current_dir("/").stdout(stdout);
    let status = spawn_command(fake.clone(), &mut command).unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(read_all(out), CONTENT);

    let opened_by = fake.state.lock().unwrap().opened_by.clone();
    assert_eq!(opened_by.len(), 2, "true and cat: {opened_by:?}");
    for tgid in opened_by {
        assert!(
            fake.exited().contains(&tgid),
            "cat {tgid} not reported exited"
        );
    }
}

#[test]
fn a_spawned_shell_and_its_children_are_served_and_all_reported_exited() {
    let fake = Fake::new();
    let (out, stdout) = output_file();
    let mut command = Command::new("/bin/sh");
    // Two commands, so the shell forks for `cat` instead of exec'ing it.
    command
        .args(["-c", "cat /emu-test/file; cat /emu-test/file"])
        .stdout(stdout);
    let status = spawn_command(fake.clone(), &mut command).unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(read_all(out), [CONTENT, CONTENT].concat());
    let state = fake.state.lock().unwrap();
    assert_eq!(
        state.opened_by.len(),
        3,
        "sh and two cats: {:?}",
        state.opened_by
    );
    for tgid in &state.opened_by {
        assert!(state.exited.contains(tgid), "{tgid} not reported exited");
    }
}

#[test]
fn a_spawned_program_killed_by_a_signal_returns_its_status() {
    let status = spawn(
        Fake::new(),
        "/bin/sh",
        ["-c", "cat /emu-test/file >/dev/null; kill -9 $$"],
    )
    .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}

#[test]
fn a_program_that_cannot_start_is_an_error() {
    let err = spawn(Fake::new(), "/nonexistent/program", [""; 0]).unwrap_err();
    assert!(
        matches!(err, kfd_emu::supervisor::SupervisorError::Spawn { .. }),
        "{err}"
    );
    // The child whose exec failed does not stay behind (it used to stay stopped in its exit,
    // holding the fds it inherited). It was forked from this thread, so it has its name.
    let name: String = std::thread::current()
        .name()
        .unwrap_or_default()
        .chars()
        .take(15)
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = children_named(&name);
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the failed child is still there: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// This process's children (of any thread) whose command name is `name`, with their state.
fn children_named(name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return found;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ...": the comm may hold spaces and parentheses.
            if let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')'))
                && stat[open + 1..close] == *name
            {
                found.push(format!("{pid}: {}", stat[close + 1..].trim()));
            }
        }
    }
    found
}
