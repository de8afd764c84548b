//! The cost of one compare-and-swap run inside a traced program (`CpuWake::cas`, what a GPU
//! atomic on USERPTR or SVM memory in system memory costs under `kfd-emu run`), against the
//! `process_vm_readv` + `process_vm_writev` pair a GPU atomic there was before, in the same
//! run, on a dword of `tests/clients/cas_target.c` (waiting in a `read` on its stdin, which
//! each stop interrupts and restarts):
//!
//! * `cas/process_vm_pair`: the baseline, a 4-byte read and write of the dword;
//! * `cas/in_stopped_thread`: back-to-back compare-and-swaps (the tracer keeps the thread
//!   stopped for the next one, as for the lanes of a wave and a mismatch's retry): the stub
//!   run under `PTRACE_SYSEMU` and the hand-over between the caller and the tracer;
//! * `cas/first_in_a_stop`: one after a pause longer than the tracer keeps the thread (the
//!   thread runs on): the `PTRACE_INTERRUPT`, the stop, the signal mask and registers
//!   saved and given back.
//!
//! Prints both ratios. Each compare-and-swap writes the value it found (no change the
//! program could see). Skipped, with the reason printed, without a C compiler. On the shared
//! 2-core development VM at a load average of 12–15 (Dec 2026, three runs): the pair 6–7 µs,
//! in a stopped thread 0.12–0.24 ms (20–50×), the first in a stop 0.3–1 ms: the three
//! threads' hand-overs (engine → tracer → tracee → tracer → engine) wait for a core.

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_emu::backend::{Backend, Caller, CpuWaker, OpenAction};
use kfd_emu::supervisor::spawn_command;

/// A backend that only keeps the tracer's waker.
#[derive(Default)]
struct Fake {
    waker: Mutex<Option<CpuWaker>>,
    set: Condvar,
}

impl Backend for Fake {
    fn open(&self, _: &dyn Caller, _: &str, _: i32, _: u32) -> OpenAction {
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

fn build() -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/cas_target.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cas_target_bench");
    match Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
    {
        Ok(s) if s.success() => Some(out),
        other => {
            println!("cas: skipped: cc failed ({other:?})");
            None
        }
    }
}

fn pair(pid: nix::unistd::Pid, addr: u64) {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv, process_vm_writev};
    let remote = [RemoteIoVec {
        base: addr as usize,
        len: 4,
    }];
    let mut word = [0u8; 4];
    process_vm_readv(pid, &mut [std::io::IoSliceMut::new(&mut word)], &remote).unwrap();
    process_vm_writev(pid, &[std::io::IoSlice::new(&word)], &remote).unwrap();
}

fn bench(c: &mut Criterion) {
    let Some(program) = build() else {
        return;
    };
    let fake = Arc::new(Fake::default());
    // Close-on-exec: the program must hold no end but its stdin and stdout.
    let (stdin_read, stdin_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let (stdout_read, stdout_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let mut command = Command::new(&program);
    command
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write));
    let backend: Arc<dyn Backend> = fake.clone();
    let runner = std::thread::spawn(move || spawn_command(backend, &mut command));
    let mut stdout = BufReader::new(std::fs::File::from(stdout_read));
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let pid: i32 = words[1].parse().unwrap();
    let addr = u64::from_str_radix(words[3].trim_start_matches("0x"), 16).unwrap() + 4;
    let waker = {
        let mut w = fake.waker.lock().unwrap();
        while w.is_none() {
            w = fake.set.wait(w).unwrap();
        }
        Arc::clone(w.as_ref().unwrap())
    };
    let word = 7;

    let mut group = c.benchmark_group("cas");
    group.bench_function("process_vm_pair", |b| {
        b.iter(|| pair(nix::unistd::Pid::from_raw(pid), addr));
    });
    group.bench_function("in_stopped_thread", |b| {
        b.iter(|| assert_eq!(waker.cas(pid, addr, 4, word, word), Ok(word)));
    });
    group.sample_size(20);
    group.bench_function("first_in_a_stop", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Longer than the tracer keeps a thread stopped for the next request.
                std::thread::sleep(Duration::from_millis(3));
                let start = Instant::now();
                assert_eq!(waker.cas(pid, addr, 4, word, word), Ok(word));
                total += start.elapsed();
            }
            total
        });
    });
    group.finish();
    ratio::report("cas", "in_stopped_thread", "process_vm_pair", None);
    ratio::report("cas", "first_in_a_stop", "process_vm_pair", None);

    drop(stdin_write);
    let _ = runner.join();
}

criterion_group!(benches, bench);
criterion_main!(benches);
