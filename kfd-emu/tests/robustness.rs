//! The emulator under programs that misbehave: a caller whose memory cannot be read must not
//! stall anyone else, one process must not reach another's VRAM through its stand-ins, a
//! stand-in's memory cannot be resized, and a supervisor that served many short-lived
//! processes does not keep their state.

mod fork_support;

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::time::Duration;

use fork_support::{fork, wait_pid};
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use rustix::fs::FallocateFlags;
use rustix::io::Errno;

/// How long a test waits for something that should happen at once before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// `UFFD_API`.
const UFFD_API: u64 = 0xAA;
/// `UFFDIO_API`: `_IOWR(0xAA, 0x3F, struct uffdio_api)`.
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
/// `UFFDIO_REGISTER`: `_IOWR(0xAA, 0x00, struct uffdio_register)`.
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
/// `UFFDIO_COPY`: `_IOWR(0xAA, 0x03, struct uffdio_copy)`.
const UFFDIO_COPY: libc::c_ulong = 0xC028_AA03;
/// `UFFDIO_REGISTER_MODE_MISSING`.
const MODE_MISSING: u64 = 1;
const PAGE: usize = 4096;

/// The forked child of the userfaultfd test: registers a page with a new userfaultfd that it
/// never serves, reports `[uffd, page address]` on `report`, then opens the path stored in
/// that page. Exits 0 when the open fails with ENOENT (the path the parent puts there), 1-5
/// when a step failed.
fn open_path_in_unserved_page(report: i32) -> i32 {
    let (uffd, page) = match unserved_page_raw() {
        Ok(made) => made,
        Err(step) => return step,
    };
    // SAFETY: raw system calls on local memory; the fds and the mapping are the child's.
    unsafe {
        let words = [uffd as u64, page];
        if libc::write(report, words.as_ptr().cast(), 16) != 16 {
            return 5;
        }
        let fd = libc::open(page as *const libc::c_char, libc::O_RDONLY);
        let errno = *libc::__errno_location();
        if fd < 0 && errno == libc::ENOENT {
            0
        } else {
            6
        }
    }
}

/// Whether this kernel lets us make a userfaultfd that catches the supervisor's access (root,
/// or `vm.unprivileged_userfaultfd = 1`).
fn userfaultfd_usable() -> bool {
    // SAFETY: creates a userfaultfd (or fails); the fd is closed at once.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as i32;
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` was just returned to us.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    rustix::process::geteuid().is_root()
        || std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
            .is_ok_and(|v| v.trim() == "1")
}

/// Whether `uffd` reports a fault within [`PATIENCE`].
fn faulted(uffd: &OwnedFd) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        uffd,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec {
        tv_sec: PATIENCE.as_secs() as i64,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&timeout)).expect("poll") == 1
}

/// Takes the fault `uffd` reports and serves it: the page at `page` gets `bytes` at its start,
/// zeros after.
fn serve(uffd: &OwnedFd, page: u64, bytes: &[u8]) {
    let mut msg = [0u8; 32];
    assert_eq!(rustix::io::read(uffd, &mut msg).expect("uffd_msg"), 32);
    let mut source = vec![0u8; 2 * PAGE];
    let at = source.as_ptr().align_offset(PAGE);
    source[at..at + bytes.len()].copy_from_slice(bytes);
    let mut copy = [page, source[at..].as_ptr() as u64, PAGE as u64, 0, 0];
    // SAFETY: UFFDIO_COPY reads one page from `source` (ours, page aligned) into the
    // registered page and writes the result into `copy`.
    let r = unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_COPY, copy.as_mut_ptr()) };
    assert_eq!(r, 0, "UFFDIO_COPY: {}", std::io::Error::last_os_error());
}

/// A model for a userfaultfd test, or `None` (the test is skipped) when this kernel does not
/// let us catch the kernel's accesses.
fn model_for_userfaultfd() -> Option<std::sync::Arc<Model>> {
    if !userfaultfd_usable() {
        kfd_skip::skip("userfaultfd cannot catch kernel accesses here (not root)");
        return None;
    }
    Some(Model::new(ModelConfig::default()).expect("model"))
}

/// What `kfdtool info` does first: open /dev/kfd, GET_VERSION, read the topology, acquire
/// every GPU's VM.
fn kfd_info_work(model: &Model) -> Result<(), String> {
    let kfd = Kfd::open().map_err(|e| format!("open: {e}"))?;
    kfd.get_version().map_err(|e| format!("GET_VERSION: {e}"))?;
    std::fs::read_to_string("/sys/devices/virtual/kfd/kfd/topology/generation_id")
        .map_err(|e| format!("topology: {e}"))?;
    for gpu in model.machine().gpus() {
        kfd.acquire_vm(gpu.gpu_id, gpu.render_minor)
            .map_err(|e| format!("ACQUIRE_VM: {e}"))?;
    }
    Ok(())
}

/// A process whose `open()` path lies in a page behind a userfaultfd nobody serves holds the
/// supervisor's access to that page forever; another process's KFD work must still complete.
/// Afterwards the page is served (with a path that does not exist) and the blocked open ends
/// with ENOENT.
#[test]
fn an_open_stuck_in_a_userfaultfd_page_does_not_stall_other_processes() {
    let Some(model) = model_for_userfaultfd() else {
        return;
    };
    let (child_tx, child_rx) = mpsc::channel::<i32>();
    let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
    let view = std::sync::Arc::clone(&model);
    let runner = std::thread::spawn(move || {
        kfd_emu::supervisor::run_attached(model, move || {
            let (read_end, write_end) = rustix::pipe::pipe().expect("pipe");
            let report = write_end.as_raw_fd();
            let child = fork(|| open_path_in_unserved_page(report));
            drop(write_end);
            let _ = child_tx.send(child);
            let mut words = [0u8; 16];
            let got = rustix::io::read(&read_end, &mut words).expect("the child's report");
            assert_eq!(got, 16, "the child could not set its userfaultfd up");
            let word = |i: usize| u64::from_ne_bytes(words[i * 8..i * 8 + 8].try_into().unwrap());
            let pidfd = rustix::process::pidfd_open(
                rustix::process::Pid::from_raw(child).expect("pid"),
                rustix::process::PidfdFlags::empty(),
            )
            .expect("pidfd_open");
            let uffd = rustix::process::pidfd_getfd(
                &pidfd,
                word(0) as i32,
                rustix::process::PidfdGetfdFlags::empty(),
            )
            .expect("the child's userfaultfd");
            // The supervisor faulted on the page: the open's path read is stuck.
            assert!(
                faulted(&uffd),
                "the supervisor never touched the child's path"
            );
            // Meanwhile another process (this one) does its KFD work.
            let work = kfd_info_work(&view);
            let _ = done_tx.send(work);
            // Serve the page: a path that does not exist.
            serve(&uffd, word(1), b"/kfd-emu-test/no/such/path\0");
            wait_pid(child)
        })
        .expect("attach")
    });
    let child = child_rx.recv().expect("the child's pid");
    let work = done_rx.recv_timeout(PATIENCE);
    if work.is_err() {
        // The supervisor is stalled: end the child so that everything unwinds, then fail.
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet.
        unsafe { libc::kill(child, libc::SIGKILL) };
        panic!("another process's KFD work stalled behind the blocked open");
    }
    assert_eq!(work.unwrap(), Ok(()));
    let status = runner.join().expect("runner");
    assert_eq!(
        status.code(),
        Some(0),
        "the served open did not end with ENOENT: {status:?}"
    );
}

const MIB: u64 = 1 << 20;
/// A GPU VA for the tests' buffer objects.
const VA: u64 = 0x6000_0000_0000;
const SECRET: &[u8] = b"VRAM bytes of another process";

/// Opens the emulated `/dev/kfd`, acquires the first GPU, and allocates a CPU-visible VRAM
/// BO of 2 MiB there.
fn vram_bo(model: &Model) -> (Kfd, kfd_ioctl::BufferObject) {
    let kfd = Kfd::open().expect("open the emulated /dev/kfd");
    let gpu = &model.machine().gpus()[0];
    kfd.acquire_vm(gpu.gpu_id, gpu.render_minor)
        .expect("ACQUIRE_VM");
    let flags = kfd_ioctl::abi::AllocMemFlags::VRAM
        | kfd_ioctl::abi::AllocMemFlags::WRITABLE
        | kfd_ioctl::abi::AllocMemFlags::PUBLIC;
    let bo = kfd
        .alloc_memory_of_gpu(gpu.gpu_id, VA, 2 * MIB, flags)
        .expect("ALLOC_MEMORY_OF_GPU");
    (kfd, bo)
}

/// The forked child of the isolation test: opens the render node at `path` (it never opened
/// `/dev/kfd`), maps a page at `offset` and compares it with [`SECRET`]. 0 when the open or
/// the map fails or the page does not hold the secret, 1 when it does.
fn peek_at_offset(path: &std::ffi::CStr, offset: u64) -> i32 {
    // SAFETY: raw system calls on memory prepared before the fork; the mapping is read only
    // within its length and never written.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDWR);
        if fd < 0 {
            return 0;
        }
        let page = libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            offset as libc::off_t,
        );
        if page == libc::MAP_FAILED {
            return 0;
        }
        let seen = std::slice::from_raw_parts(page.cast::<u8>(), SECRET.len());
        i32::from(seen == SECRET)
    }
}

/// A process that never opened `/dev/kfd` opens the render node and maps the page at another
/// process's BO offset: it must not see that process's bytes.
#[test]
fn a_process_without_dev_kfd_sees_nothing_of_another_process_vram() {
    let model = Model::new(ModelConfig::default()).expect("model");
    let view = std::sync::Arc::clone(&model);
    let minor = model.machine().gpus()[0].render_minor;
    let path = std::ffi::CString::new(format!("/dev/dri/renderD{minor}")).expect("path");
    let status = kfd_emu::supervisor::run_attached(model, move || {
        let (_kfd, bo) = vram_bo(&view);
        let cpu = bo.map_cpu().expect("mmap the BO through the render node");
        cpu.write_slice(SECRET, 0).expect("write");
        let offset = bo.mmap_offset().expect("a VRAM BO has an mmap offset");
        // A new process: it opens the render node itself and never opens /dev/kfd.
        let child = fork(|| peek_at_offset(&path, offset));
        wait_pid(child)
    })
    .expect("attach");
    assert_eq!(
        status.code(),
        Some(0),
        "the other process read this one's VRAM: {status:?}"
    );
}

/// `ftruncate` and `fallocate` on a stand-in (`/dev/kfd` or a render node) fail as the
/// kernel fails them on a device file (`do_ftruncate`: `EINVAL`; `vfs_fallocate`: `EINVAL` for
/// a bad range, `ENODEV`), and a device allocation
/// afterwards is mapped and used normally (no SIGBUS).
#[test]
fn stand_ins_cannot_be_resized_and_allocations_still_work() {
    let model = Model::new(ModelConfig::default()).expect("model");
    let view = std::sync::Arc::clone(&model);
    let minor = model.machine().gpus()[0].render_minor;
    kfd_emu::supervisor::run_attached(model, move || {
        let kfd = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/kfd")
            .expect("open /dev/kfd");
        let render = std::fs::File::options()
            .read(true)
            .write(true)
            .open(format!("/dev/dri/renderD{minor}"))
            .expect("open the render node");
        for (what, file) in [("/dev/kfd", &kfd), ("the render node", &render)] {
            for size in [0, 1 << 20, u64::MAX >> 2] {
                let resized = rustix::fs::ftruncate(file, size);
                assert_eq!(
                    resized,
                    Err(rustix::io::Errno::INVAL),
                    "ftruncate({what}, {size:#x})"
                );
            }
            let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
            for (mode, offset, len, errno) in [
                (punch, 0, 1 << 20, Errno::NODEV),
                (FallocateFlags::empty(), 1 << 30, 1 << 20, Errno::NODEV),
                (punch, 0, 0, Errno::INVAL),
            ] {
                assert_eq!(
                    rustix::fs::fallocate(file, mode, offset, len),
                    Err(errno),
                    "fallocate({what}, {mode:?}, {offset:#x}, {len:#x})"
                );
            }
        }
        // An ordinary file is the kernel's: the interception changes nothing there.
        let tmp = tempfile_in_target();
        rustix::fs::ftruncate(&tmp, 8192).expect("ftruncate of a regular file");
        rustix::fs::fallocate(&tmp, FallocateFlags::empty(), 0, 4096)
            .expect("fallocate of a regular file");
        let (_kfd, bo) = vram_bo(&view);
        let cpu = bo.map_cpu().expect("mmap the BO");
        cpu.write_slice(SECRET, 2 * MIB as usize - SECRET.len())
            .expect("write the last bytes");
        let mut back = vec![0u8; SECRET.len()];
        cpu.read_slice(&mut back, 2 * MIB as usize - SECRET.len())
            .expect("read");
        assert_eq!(back, SECRET);
    })
    .expect("attach");
}

/// The forked child of the churn tests: opens `/dev/kfd` (the path prepared before the fork),
/// issues GET_VERSION, and exits; 0 when both worked.
fn open_kfd_and_get_version(path: &std::ffi::CStr) -> i32 {
    // SAFETY: raw system calls on memory prepared before the fork; `args` is a live struct
    // of the size the command word encodes.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if fd < 0 {
            return 1;
        }
        let mut args = kfd_ioctl::abi::kfd_ioctl_get_version_args::default();
        let cmd = kfd_ioctl::abi::AMDKFD_IOC_GET_VERSION as libc::c_ulong;
        if libc::ioctl(fd, cmd, &raw mut args) != 0 || args.major_version != 1 {
            return 2;
        }
        0
    }
}

/// Forks `n` children one after the other, each [`open_kfd_and_get_version`]; panics when one
/// fails.
fn churn(n: usize) {
    let path = c"/dev/kfd";
    for i in 0..n {
        let child = fork(|| open_kfd_and_get_version(path));
        let status = wait_pid(child);
        assert!(status.success(), "child {i}: {status:?}");
    }
}

/// Waits until `done` holds; false after [`PATIENCE`]. The supervisor releases a process
/// when it sees its pidfd turn readable, which is after the parent's `waitpid` returned.
fn eventually(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// The forked child of the file-table test: opens the render node at `path` (it never opened
/// `/dev/kfd`) and reads its first page. 0 when the open worked and the read gave nothing.
fn open_render_and_read(path: &std::ffi::CStr) -> i32 {
    let mut page = [0u8; PAGE];
    // SAFETY: raw system calls on memory prepared before the fork; `page` is a live local
    // buffer of the length passed.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDWR);
        if fd < 0 {
            return 1;
        }
        if libc::pread(fd, page.as_mut_ptr().cast(), PAGE, 0) != 0 {
            return 2;
        }
        0
    }
}

/// A process's file-table entries (its `/dev/kfd` stand-in, its render nodes) are
/// released at its exit: after 200 short-lived KFD processes the model knows exactly the
/// stand-ins it knew before.
#[test]
fn exited_processes_leave_nothing_in_the_file_table() {
    let model = Model::new(ModelConfig::default()).expect("model");
    let before = model.stand_ins();
    let view = std::sync::Arc::clone(&model);
    kfd_emu::supervisor::run_attached(std::sync::Arc::<Model>::clone(&model), move || {
        churn(200);
        let minor = view.machine().gpus()[0].render_minor;
        let render = std::ffi::CString::new(format!("/dev/dri/renderD{minor}")).unwrap();
        for _ in 0..50 {
            let child = fork(|| open_render_and_read(&render));
            assert_eq!(wait_pid(child).code(), Some(0));
        }
    })
    .expect("attach");
    assert!(
        eventually(|| model.stand_ins() == before),
        "{} stand-ins known after the processes exited, {before} before",
        model.stand_ins()
    );
}

/// The environment variable that makes this test binary the churning program of
/// [`supervisor_memory_stays_flat_over_many_processes`]: phase sizes, comma separated.
const CHURN: &str = "KFD_EMU_TEST_CHURN";

/// The traced program of the memory test (runs only under [`CHURN`]): forks the children of
/// each phase, then prints `PHASE <i>` and waits for a line on stdin.
#[test]
fn churn_role() {
    let Ok(phases) = std::env::var(CHURN) else {
        return;
    };
    let mut stdin = std::io::stdin().lines();
    for (i, n) in phases.split(',').enumerate() {
        churn(n.parse().expect("a phase size"));
        println!("PHASE {i}");
        let _ = stdin.next();
    }
}

/// `VmRSS` of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// `kfd-emu run` serving a program that forks short-lived KFD processes (open /dev/kfd,
/// GET_VERSION, exit): the supervisor's resident memory after the second batch is within a
/// bound of what it was after the first (warm-up) one. Batch size from
/// `KFD_EMU_CHURN_BATCH` (default 1000).
#[test]
fn supervisor_memory_stays_flat_over_many_processes() {
    use std::io::{BufRead, Write};
    let batch: usize = std::env::var("KFD_EMU_CHURN_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .arg("run")
        .arg("--")
        .arg(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "churn_role", "--nocapture", "--test-threads=1"])
        .env(CHURN, format!("{batch},{batch},{batch}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kfd-emu run");
    let supervisor = child.id();
    let mut input = child.stdin.take().expect("stdin");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut rss = Vec::new();
    for phase in 0..3 {
        let want = format!("PHASE {phase}");
        let seen = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.ends_with(&want));
        assert!(seen, "the program never reached {want}");
        rss.push(rss_kib(supervisor));
        writeln!(input, "go").expect("stdin");
    }
    drop(input);
    assert!(child.wait().expect("wait").success());
    eprintln!("supervisor VmRSS after 1, 2, 3 batches of {batch} processes: {rss:?} KiB");
    // A few bytes kept per process would pass; the bound is for state that is not released
    // (a process's model state is kilobytes).
    let growth = rss[2].saturating_sub(rss[1]);
    assert!(
        growth < 1024,
        "the supervisor grew by {growth} KiB over {batch} processes: {rss:?}"
    );
}

/// A new userfaultfd of this process over one fresh page, registered for missing pages and
/// served by nobody yet: `(uffd, page address)`, or the step that failed (1: userfaultfd,
/// 2: UFFDIO_API, 3: mmap, 4: UFFDIO_REGISTER). Allocates nothing and never panics, so a
/// forked child may call it. The mapping is never unmapped.
fn unserved_page_raw() -> Result<(i32, u64), i32> {
    // SAFETY: raw system calls on memory and fds this function creates.
    unsafe {
        let uffd = libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) as i32;
        if uffd < 0 {
            return Err(1);
        }
        let mut api = [UFFD_API, 0, 0];
        if libc::ioctl(uffd, UFFDIO_API, api.as_mut_ptr()) != 0 {
            return Err(2);
        }
        let page = libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if page == libc::MAP_FAILED {
            return Err(3);
        }
        let mut register = [page as u64, PAGE as u64, MODE_MISSING, 0];
        if libc::ioctl(uffd, UFFDIO_REGISTER, register.as_mut_ptr()) != 0 {
            return Err(4);
        }
        Ok((uffd, page as u64))
    }
}

/// [`unserved_page_raw`] for this process, its fd owned.
fn unserved_page() -> (OwnedFd, u64) {
    let (fd, page) = unserved_page_raw().unwrap_or_else(|step| {
        panic!(
            "setting up the unserved page failed at step {step}: {}",
            std::io::Error::last_os_error()
        )
    });
    // SAFETY: `fd` was just returned by userfaultfd(2) and is owned by nobody else.
    (unsafe { OwnedFd::from_raw_fd(fd) }, page)
}

/// A GPU read of a USERPTR BO whose page is behind a userfaultfd nobody serves blocks on that
/// page; the model's lock must not be held meanwhile, or every process's ioctls stall behind
/// it. Afterwards the page is served and the read returns its bytes.
#[test]
fn a_gpu_read_stuck_in_a_userfaultfd_page_does_not_stall_ioctls() {
    let Some(model) = model_for_userfaultfd() else {
        return;
    };
    let gpu = model.machine().gpus()[0].clone();
    let (uffd, page) = unserved_page();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
    let (finished_tx, finished_rx) = mpsc::channel::<()>();
    let runner = {
        let model = std::sync::Arc::clone(&model);
        let gpu = gpu.clone();
        std::thread::spawn(move || {
            kfd_emu::supervisor::run_attached(model, move || {
                let kfd = Kfd::open().expect("open the emulated /dev/kfd");
                kfd.acquire_vm(gpu.gpu_id, gpu.render_minor)
                    .expect("ACQUIRE_VM");
                let flags = kfd_ioctl::abi::AllocMemFlags::USERPTR
                    | kfd_ioctl::abi::AllocMemFlags::WRITABLE;
                // SAFETY: the page stays mapped (never unmapped) while the BO lives.
                let bo = unsafe { kfd.alloc_userptr(gpu.gpu_id, VA, page, PAGE as u64, flags) }
                    .expect("USERPTR BO over the unserved page");
                kfd.map_memory_to_gpu(&bo, &[gpu.gpu_id])
                    .expect("MAP_MEMORY_TO_GPU");
                let _ = ready_tx.send(());
                if go_rx.recv().is_ok() {
                    // The GPU read is stuck on the page: an ioctl must still be answered.
                    let work = kfd.get_version().map(drop).map_err(|e| e.to_string());
                    let _ = done_tx.send(work);
                }
                let _ = finished_rx.recv();
                kfd.free_memory_of_gpu(bo).expect("free");
            })
            .expect("attach")
        })
    };
    ready_rx.recv().expect("the BO is set up");
    let pid = std::process::id() as i32;
    let reader = {
        let model = std::sync::Arc::clone(&model);
        std::thread::spawn(move || {
            let mut seen = [0u8; 8];
            model
                .gpu_read(pid, gpu.gpu_id, VA, &mut seen)
                .map(|()| seen)
        })
    };
    // The GPU view faulted on the page: the read is stuck.
    assert!(faulted(&uffd), "the GPU read never touched the page");
    go_tx.send(()).expect("the attached thread waits");
    let work = done_rx.recv_timeout(PATIENCE);
    // Serve the page (in every case, so that everything unwinds).
    serve(&uffd, page, b"served!!");
    let seen = reader.join().expect("reader");
    let _ = finished_tx.send(());
    runner.join().expect("runner");
    assert!(
        work.is_ok(),
        "an ioctl stalled behind the GPU read of an unserved page"
    );
    assert_eq!(work.unwrap(), Ok(()));
    assert_eq!(seen.expect("the served read"), *b"served!!");
}

/// [`an_exec_after_a_call_in_a_vfork_child_reaches_its_new_address_space`]: set to run the
/// spawning role.
const VFORK_SPAWN: &str = "KFD_EMU_TEST_VFORK_SPAWN";

/// The traced program of the vfork test (runs only under [`VFORK_SPAWN`]): `posix_spawn`s
/// `cat` of the generated `system_properties` with a file action that opens `/dev/kfd`, so
/// the child makes an intercepted call while it still shares this process's memory (glibc's
/// `posix_spawn` is `CLONE_VM | CLONE_VFORK`), then execs and makes another in its own.
/// Exits with `cat`'s status.
#[test]
fn vfork_spawn_role() {
    use std::ffi::CString;
    if std::env::var_os(VFORK_SPAWN).is_none() {
        return;
    }
    let cat = CString::new("/bin/cat").unwrap();
    let file = CString::new("/sys/devices/virtual/kfd/kfd/topology/system_properties").unwrap();
    let kfd = CString::new("/dev/kfd").unwrap();
    let argv = [cat.as_ptr(), file.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null::<libc::c_char>()];
    let mut pid: libc::pid_t = 0;
    // SAFETY: the file-actions object is initialised before use and destroyed after; every
    // pointer handed to posix_spawn is a NUL-terminated string or a NULL-terminated array that
    // outlives the call.
    let status = unsafe {
        let mut actions = std::mem::zeroed::<libc::posix_spawn_file_actions_t>();
        assert_eq!(libc::posix_spawn_file_actions_init(&mut actions), 0);
        assert_eq!(
            libc::posix_spawn_file_actions_addopen(&mut actions, 9, kfd.as_ptr(), libc::O_RDWR, 0),
            0
        );
        let spawned = libc::posix_spawn(
            &mut pid,
            cat.as_ptr(),
            &actions,
            std::ptr::null(),
            argv.as_ptr().cast(),
            envp.as_ptr().cast(),
        );
        libc::posix_spawn_file_actions_destroy(&mut actions);
        assert_eq!(spawned, 0, "posix_spawn");
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        status
    };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "cat ended with wait status {status:#x}"
    );
}

/// A `vfork` child that made an intercepted call before its exec (a memory file opened then
/// reaches the parent's address space, which outlives the exec) is served from its own
/// address space after the exec:
/// `cat` opens the generated sysfs file by a path the supervisor must read from the new image.
#[test]
fn an_exec_after_a_call_in_a_vfork_child_reaches_its_new_address_space() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .arg("run")
        .arg("--")
        .arg(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "vfork_spawn_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(VFORK_SPAWN, "1")
        .output()
        .expect("kfd-emu run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("platform_"),
        "the spawned cat did not read the emulated system_properties: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh regular file (unlinked at once) in the temporary directory.
fn tempfile_in_target() -> std::fs::File {
    let path = std::env::temp_dir().join(format!("kfd-emu-resize-{}", std::process::id()));
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create a temporary file");
    let _ = std::fs::remove_file(&path);
    file
}

/// A device node opened read-only is a read-only file, as the kernel's is: `do_mmap` refuses a
/// shared writable mapping of it (`EACCES`, before the driver looks at the offset) while a
/// read-only mapping of the event page works, and `fallocate` says `EBADF` (`vfs_fallocate`
/// checks the mode before the file type).
#[test]
fn a_read_only_stand_in_maps_read_only() {
    use kfd_ioctl::abi::{
        AMDKFD_IOC_CREATE_EVENT, KFD_IOC_EVENT_SIGNAL, kfd_ioctl_create_event_args,
    };
    let model = Model::new(ModelConfig::default()).expect("model");
    let minor = model.machine().gpus()[0].render_minor;
    let result = kfd_emu::supervisor::run_attached(model, move || {
        let kfd = std::fs::File::open("/dev/kfd").expect("open /dev/kfd read-only");
        let mut args = kfd_ioctl_create_event_args {
            event_type: KFD_IOC_EVENT_SIGNAL,
            ..Default::default()
        };
        // SAFETY: CREATE_EVENT reads and writes the argument struct, which is live.
        let ret =
            unsafe { libc::ioctl(kfd.as_raw_fd(), AMDKFD_IOC_CREATE_EVENT as _, &raw mut args) };
        assert_eq!(ret, 0, "CREATE_EVENT on a read-only /dev/kfd");
        let offset = args.event_page_offset;
        let map = |prot: i32| {
            // SAFETY: a fresh mapping at an address the kernel picks; nothing aliases it.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    prot,
                    libc::MAP_SHARED,
                    kfd.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if at == libc::MAP_FAILED {
                Err(Errno::from_raw_os_error(
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
                ))
            } else {
                // SAFETY: the mapping made just above.
                unsafe { libc::munmap(at, 4096) };
                Ok(())
            }
        };
        assert_eq!(map(libc::PROT_READ | libc::PROT_WRITE), Err(Errno::ACCESS));
        // do_mmap looks at the length before the file's mode: EINVAL, not EACCES.
        // SAFETY: a zero-length mapping is refused before anything is mapped.
        let empty = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                0,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                kfd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        assert_eq!(empty, libc::MAP_FAILED);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EINVAL),
            "a zero-length writable mapping of a read-only /dev/kfd"
        );
        assert_eq!(map(libc::PROT_READ), Ok(()));
        assert_eq!(
            rustix::fs::fallocate(&kfd, FallocateFlags::empty(), 0, 4096),
            Err(Errno::BADF)
        );
        let render = std::fs::File::open(format!("/dev/dri/renderD{minor}"))
            .expect("open the render node read-only");
        // SAFETY: as above; the call fails before anything is mapped.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                render.as_raw_fd(),
                1 << 32,
            )
        };
        assert_eq!(at, libc::MAP_FAILED);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EACCES),
            "a shared writable mapping of a read-only render node"
        );
    });
    result.expect("attach");
}

/// The environment variable that makes this test binary the program of
/// [`opening_and_closing_smi_fds_leaves_the_supervisor_flat`]: the number of rounds.
const SMI_ROUNDS: &str = "KFD_EMU_TEST_SMI_ROUNDS";

/// Whether two fds of this process are the same open file (`kcmp(KCMP_FILE)`, which the
/// filter lets through without a round trip, unlike `fstat`).
fn same_file(a: &impl AsRawFd, b: &impl AsRawFd) -> bool {
    const KCMP_FILE: libc::c_long = 0;
    let pid = libc::c_long::from(rustix::process::getpid().as_raw_nonzero().get());
    // SAFETY: kcmp takes plain integers and only compares kernel objects.
    let same = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid,
            pid,
            KCMP_FILE,
            libc::c_long::from(a.as_raw_fd()),
            libc::c_long::from(b.as_raw_fd()),
        )
    };
    same == 0
}

/// With it set as well, [`smi_rounds_role`] prints a line and waits for one on stdin
/// before and after its rounds (so that the supervisor's fds can be counted there).
const SMI_PAUSE: &str = "KFD_EMU_TEST_SMI_PAUSE";

/// Under [`SMI_PAUSE`]: prints `what` and waits for a line on stdin.
fn pause(what: &str) {
    if std::env::var_os(SMI_PAUSE).is_some() {
        use std::io::Write;
        println!("{what}");
        let _ = std::io::stdout().flush();
        let _ = std::io::stdin().lines().next();
    }
}

/// The number of fds process `pid` has open, when this process may look
/// (`/proc/<pid>/fd` of the non-dumpable supervisor needs `CAP_SYS_PTRACE`).
fn fd_count(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// With it set as well, [`smi_rounds_role`] races its SMI opens with a thread making fds of
/// its own in the SMI range.
const SMI_RACE: &str = "KFD_EMU_TEST_SMI_RACE";

/// The traced program of the SMI test (runs only under [`SMI_ROUNDS`]): opens `/dev/kfd`,
/// acquires every GPU's VM, then opens and closes an SMI event fd of the first GPU that many
/// times; panics naming the round whose `SMI_EVENTS` failed.
#[test]
fn smi_rounds_role() {
    let Ok(rounds) = std::env::var(SMI_ROUNDS) else {
        return;
    };
    let rounds: usize = rounds.parse().expect("a round count");
    let kfd = Kfd::open().expect("open the emulated /dev/kfd");
    let topology = kfd_ioctl::topology::Topology::read().expect("the emulated topology");
    let mut gpus = Vec::new();
    for node in topology.gpus() {
        let gpu = node.gpu_id.expect("a GPU node has a gpu_id");
        kfd.acquire_vm(gpu, node.properties.drm_render_minor as u32)
            .expect("acquire_vm");
        gpus.push(gpu);
    }
    pause("SMI WARM");
    let (pipe, _writer) = rustix::pipe::pipe().expect("pipe");
    let racing = std::env::var_os(SMI_RACE).is_some();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (replaced, made) = std::thread::scope(|scope| {
        // With SMI_RACE: another thread keeps putting its own pipe at the lowest free number
        // of the SMI range (fcntl F_DUPFD), checks that the number still holds it, and
        // closes it again.
        let racer = scope.spawn(|| {
            let (mut replaced, mut made) = (0u32, 0u32);
            while racing && !done.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(fd) = rustix::io::fcntl_dupfd_cloexec(&pipe, 944) else {
                    continue;
                };
                made += 1;
                // Held for a while, looked at more than once: a replacement at any time
                // while it is held is seen.
                let seen = (0..8).any(|_| !same_file(&fd, &pipe));
                replaced += u32::from(seen);
            }
            (replaced, made)
        });
        for round in 0..rounds {
            match kfd.smi_events(gpus[0]) {
                Ok(smi) => {
                    let fd = smi.as_fd().as_raw_fd();
                    assert!((944..1008).contains(&fd), "round {round}: SMI fd at {fd}");
                    drop(smi);
                }
                Err(err) => panic!("round {round}: SMI_EVENTS failed: {err}"),
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        racer.join().expect("racer")
    });
    drop(pipe);
    pause("SMI AFTER");
    println!("RACER made {made} fds, {replaced} replaced");
    assert_eq!(
        replaced, 0,
        "{replaced} of {made} of the program's own fds were replaced"
    );
    println!("SMI ROUNDS DONE");
}

/// SMI event fds opened and closed in a loop leave nothing behind in the supervisor
/// (`kfd_smi_ev_release` frees the kernel's client when its fd's last reference goes): with
/// `kfd-emu run` and its program at an fd limit of 1024, 1 200 rounds all succeed, and (where
/// this test may read the supervisor's `/proc/<pid>/fd`: as root) its fd count is the same
/// after them as before. (Before the
/// fix every round kept a pipe end in the supervisor until an event was emitted on that GPU,
/// so the rounds failed after about 1 000: the program's ioctls fell through to the real
/// kernel, ENOTTY on the memfd.)
#[test]
fn opening_and_closing_smi_fds_leaves_the_supervisor_flat() {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"));
    command
        .args(["run", "--machine", "mi300x", "--"])
        .arg(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "smi_rounds_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SMI_ROUNDS, "1200");
    // SAFETY: the hook runs between fork and exec and only calls setrlimit(2), which is
    // async-signal-safe, on a local struct.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            let limit = libc::rlimit {
                rlim_cur: 1024,
                rlim_max: 1024,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    use std::io::{BufRead, Write};
    let mut child = command
        .env(SMI_PAUSE, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kfd-emu run");
    let supervisor = child.id();
    let mut input = child.stdin.take().expect("stdin");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut counts = Vec::new();
    let mut done = false;
    for line in lines.by_ref().map_while(Result::ok) {
        if line.ends_with("SMI WARM") || line.ends_with("SMI AFTER") {
            counts.push(fd_count(supervisor));
            writeln!(input, "go").expect("stdin");
        }
        done |= line.contains("SMI ROUNDS DONE");
    }
    drop(input);
    let status = child.wait().expect("wait");
    assert!(status.success() && done, "{status:?}, done: {done}");
    eprintln!("kfd-emu's fds before and after 1200 SMI rounds: {counts:?}");
    if let [Some(before), Some(after)] = counts[..] {
        // A worker may hold a transient fd (a caller's memory file) at either look.
        assert!(
            after <= before + 2,
            "kfd-emu held {before} fds before 1200 SMI rounds and {after} after"
        );
    }
}

/// An SMI event fd goes at a free number of the SMI range without ever replacing an fd the
/// program put there itself meanwhile: 3 000 SMI_EVENTS under `kfd-emu run` while another
/// thread keeps making (`fcntl(F_DUPFD, 944)`), checking and closing its own fds in that
/// range. (Before the fix the emulator picked a free number from `/proc/<pid>/fd` and a
/// worker filled it later with ADDFD in replace mode: the racing thread's fd was replaced.)
#[test]
fn an_smi_fd_never_replaces_a_programs_own_fd() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .args(["run", "--machine", "mi300x", "--"])
        .arg(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "smi_rounds_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SMI_ROUNDS, "3000")
        .env(SMI_RACE, "1")
        .output()
        .expect("kfd-emu run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("SMI ROUNDS DONE"),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The environment variable that makes this test binary the program of
/// [`a_stand_ins_ioctl_fails_cleanly_when_the_supervisor_has_no_fd_left`].
const EXHAUST: &str = "KFD_EMU_TEST_EXHAUST";

/// The program of the test below (runs only under [`EXHAUST`]): attached to a model in this
/// process (so the supervisor shares its fd table), it opens `/dev/kfd`, fills the table up
/// to a lowered limit, and asks GET_VERSION; prints the errno it got.
#[test]
fn exhaust_role() {
    if std::env::var_os(EXHAUST).is_none() {
        return;
    }
    let model = Model::new(ModelConfig::default()).expect("model");
    let got = kfd_emu::supervisor::run_attached(model, || {
        let kfd = Kfd::open().expect("open the emulated /dev/kfd");
        let mut limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let before = limit;
        limit.current = Some(512);
        rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).expect("setrlimit");
        let mut fillers = Vec::new();
        // A supervisor thread may close a transient fd of its own (the duplicate of a call
        // just served) after the table was filled: then the call finds a free number and
        // succeeds, and the table is filled again.
        let mut got = Ok(());
        for _ in 0..20 {
            while let Ok(fd) = rustix::io::dup(kfd.as_fd()) {
                fillers.push(fd);
            }
            got = kfd
                .get_version()
                .map(|_| ())
                .map_err(|e| e.errno().map(|errno| errno.raw_os_error()));
            if got.is_err() {
                break;
            }
        }
        drop(fillers);
        rustix::process::setrlimit(rustix::process::Resource::Nofile, before).expect("setrlimit");
        got
    })
    .expect("attach");
    println!("EXHAUST GOT {got:?}");
}

/// When the supervisor cannot duplicate a stand-in's fd because its own fd table is full, the
/// stand-in's ioctl fails with EMFILE, as an allocation the kernel cannot make would; it never
/// runs natively on the stand-in's memfd. (Before the fix it did: ENOTTY.)
#[test]
fn a_stand_ins_ioctl_fails_cleanly_when_the_supervisor_has_no_fd_left() {
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "exhaust_role", "--nocapture", "--test-threads=1"])
        .env(EXHAUST, "1")
        .output()
        .expect("the exhausting program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains(&format!("EXHAUST GOT Err(Some({}))", libc::EMFILE)),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
