//! The tracer's compare-and-swaps in a traced process (`CpuWake::cas`, what GPU atomics on
//! process memory use under `kfd-emu run`), against a fake backend that only keeps the
//! waker: run on a thread of `tests/clients/cas_target.c` while it increments a dword with a
//! locked instruction, and while it waits in a `read` that must restart.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use kfd_emu::backend::{Backend, Caller, CasError, CpuWaker, OpenAction};
use kfd_emu::supervisor::spawn_command;

/// Keeps the waker; holds an open of `/emu-test/block` until `released`.
#[derive(Default)]
struct Fake {
    waker: Mutex<Option<CpuWaker>>,
    set: Condvar,
    /// (an open of `/emu-test/block` is held, it may go on).
    block: Mutex<(bool, bool)>,
    block_changed: Condvar,
}

impl Backend for Fake {
    fn open(&self, _: &dyn Caller, path: &str, _: i32, _: u32) -> OpenAction {
        if path == "/emu-test/block" {
            let mut block = self.block.lock().unwrap();
            block.0 = true;
            self.block_changed.notify_all();
            while !block.1 {
                block = self.block_changed.wait(block).unwrap();
            }
        }
        OpenAction::Continue
    }

    fn ioctl(
        &self,
        _: &dyn Caller,
        _: std::os::fd::BorrowedFd<'_>,
        _: u32,
        _: u64,
    ) -> Option<kfd_emu::backend::IoctlResult> {
        None
    }

    fn cpu_faults(&self, waker: Option<CpuWaker>) {
        *self.waker.lock().unwrap() = waker;
        self.set.notify_all();
    }

    fn process_exited(&self, _: i32) {}
}

impl Fake {
    fn waker(&self) -> CpuWaker {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut waker = self.waker.lock().unwrap();
        loop {
            if let Some(w) = waker.as_ref() {
                return Arc::clone(w);
            }
            assert!(Instant::now() < deadline, "the tracer gave no waker");
            waker = self
                .set
                .wait_timeout(waker, Duration::from_millis(50))
                .unwrap()
                .0;
        }
    }
}

/// The program, built once (the tests run at once: each building it would run the other's
/// half-written file).
fn build() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_once).clone()
}

fn build_once() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/cas_target.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cas_target");
    let status = Command::new("cc")
        .args(["-Wall", "-Werror", "-O1", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("running cc");
    assert!(status.success(), "building {} failed", src.display());
    out
}

fn read_word(pid: i32, addr: u64, size: usize) -> u64 {
    let mut bytes = [0u8; 8];
    let path = format!("/proc/{pid}/mem");
    let file = std::fs::File::open(path).unwrap();
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes[..size], addr).unwrap();
    u64::from_le_bytes(bytes)
}

fn hex(word: &str) -> u64 {
    u64::from_str_radix(word.trim_start_matches("0x"), 16).unwrap()
}

/// The program started under the tracer with `args`, once it printed its pid and pages.
struct Started {
    fake: Arc<Fake>,
    pid: i32,
    page: u64,
    ro: u64,
    stdin: std::fs::File,
    stdout: BufReader<std::fs::File>,
    runner: std::thread::JoinHandle<
        Result<std::process::ExitStatus, kfd_emu::supervisor::SupervisorError>,
    >,
}

fn start(args: &[String]) -> Started {
    let program = build();
    let fake = Arc::new(Fake::default());
    // Close-on-exec: the program must hold no end but its stdin and stdout.
    let (stdin_read, stdin_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let (stdout_read, stdout_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let mut command = Command::new(&program);
    command
        .args(args)
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write));
    let backend: Arc<dyn Backend> = fake.clone();
    let runner = std::thread::spawn(move || spawn_command(backend, &mut command));
    let mut stdout = BufReader::new(std::fs::File::from(stdout_read));
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        (words[0], words[2], words[4]),
        ("pid", "page", "ro"),
        "{line}"
    );
    Started {
        fake,
        pid: words[1].parse().unwrap(),
        page: hex(words[3]),
        ro: hex(words[5]),
        stdin: std::fs::File::from(stdin_write),
        stdout,
        runner,
    }
}

/// 3000 increments made as the model's GPU atomics make them (read, then compare-and-swap
/// until one matches), run by the program's own thread while it makes 20 million with
/// `lock add`: none is lost. Then the compare-and-swap's answers: a mismatch returns the
/// value and writes nothing, a match returns it and writes, 4 and 8 bytes; a read-only page
/// and an unmapped address are `Fault` (the program never sees the `SIGSEGV`), a misaligned
/// one too. The program's `read`, interrupted meanwhile, restarts and gets its line. While
/// its only thread waits in an `open` the supervisor received (and holds), no thread can
/// stop: a request is withdrawn after its wait with `NoThread`, and never runs later. Signals
/// sent meanwhile are each handled once.
#[test]
fn compare_and_swaps_run_in_the_program_are_atomic_with_its_locked_instructions() {
    let Started {
        fake,
        pid,
        page,
        ro,
        mut stdin,
        mut stdout,
        runner,
    } = start(&[]);
    let mut line = String::new();
    let waker = fake.waker();

    for _ in 0..3000 {
        let mut old = read_word(pid, page, 4);
        loop {
            let now = waker
                .cas(pid, page, 4, old, (old + 1) & 0xffff_ffff)
                .unwrap();
            if now == old {
                break;
            }
            old = now;
        }
    }

    // A signal sent while the program runs compare-and-swaps (blocked meanwhile) is handled
    // once each, after.
    for sent in 1..=30u64 {
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::USR1,
        )
        .unwrap();
        for _ in 0..5 {
            let old = read_word(pid, page, 4);
            let _ = waker.cas(pid, page, 4, old, old).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while read_word(pid, page + 16, 4) != sent {
            assert!(Instant::now() < deadline, "SIGUSR1 {sent} not handled");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    assert_eq!(waker.cas(pid, page + 4, 4, 5, 9), Ok(7));
    assert_eq!(read_word(pid, page + 4, 4), 7);
    assert_eq!(waker.cas(pid, page + 4, 4, 7, 9), Ok(7));
    assert_eq!(read_word(pid, page + 4, 4), 9);
    let (was, new) = (0x1122_3344_5566_7788, 0xdead_beef_cafe_f00d);
    assert_eq!(waker.cas(pid, page + 8, 8, 1, new), Ok(was));
    assert_eq!(waker.cas(pid, page + 8, 8, was, new), Ok(was));
    assert_eq!(waker.cas(pid, ro, 4, 0, 1), Err(CasError::Fault));
    assert_eq!(read_word(pid, ro, 4), 0);
    assert_eq!(waker.cas(pid, 8, 4, 0, 1), Err(CasError::Fault));
    assert_eq!(waker.cas(pid, page + 2, 4, 0, 1), Err(CasError::Fault));

    stdin.write_all(b"go\n").unwrap();
    {
        let mut block = fake.block.lock().unwrap();
        while !block.0 {
            block = fake.block_changed.wait(block).unwrap();
        }
    }
    let start = Instant::now();
    assert_eq!(waker.cas(pid, page + 4, 4, 9, 11), Err(CasError::NoThread));
    assert!(
        start.elapsed() >= Duration::from_millis(200),
        "{:?}",
        start.elapsed()
    );
    fake.block.lock().unwrap().1 = true;
    fake.block_changed.notify_all();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, format!("value {} 9 {new:#x}\n", 20_000_000 + 3000));
    let status = runner.join().unwrap().unwrap();
    assert!(status.success(), "{status:?}");
}

/// Four threads make GPU-atomic-style increments at once (as a dispatch's workers do, each
/// posting its own compare-and-swaps) while two threads of the program make 20 million each
/// with `lock add`: every one of the 4 × 1500 lands exactly once (none lost, none doubled).
/// Both program threads stop for the first requests, before any stub is mapped: only one
/// may run them (two mapped two stubs, and the first's answers were then read against the
/// second's: `NoThread` for a compare-and-swap that had landed).
#[test]
fn concurrent_requesters_each_land_once() {
    const THREADS: u64 = 4;
    const EACH: u64 = 1500;
    const ADDERS: u64 = 2;
    let Started {
        fake,
        pid,
        page,
        mut stdin,
        mut stdout,
        runner,
        ..
    } = start(&[ADDERS.to_string()]);
    let mut line = String::new();
    let waker = fake.waker();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let waker = Arc::clone(&waker);
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    let mut old = read_word(pid, page, 4);
                    loop {
                        let now = waker
                            .cas(pid, page, 4, old, (old + 1) & 0xffff_ffff)
                            .expect("a thread of the program runs it");
                        if now == old {
                            break;
                        }
                        old = now;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // The program's open of /emu-test/block goes straight on.
    fake.block.lock().unwrap().1 = true;
    stdin.write_all(b"go\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let value: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(value, ADDERS * 20_000_000 + THREADS * EACH, "{line}");
    let status = runner.join().unwrap().unwrap();
    assert!(status.success(), "{status:?}");
}
