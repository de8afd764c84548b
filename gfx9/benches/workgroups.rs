//! The dispatcher's cost per workgroup, for grids of many small workgroups (kfdtest's
//! `KFDGWSTest.Semaphore` and `KFDQMTest.QueuePriority*` dispatch 262 144 workgroups of one
//! work-item each). The same 1 048 576 wave-instructions run two ways on one thread:
//!
//! * `many_small_workgroups`: 262 144 one-wave workgroups (one work-item each) of
//!   3 × `s_add_u32 s0, s0, 1` and `s_endpgm`;
//! * `one_big_workgroup` (the baseline): one workgroup of 16 waves, each running 65 535
//!   `s_add_u32` and `s_endpgm`.
//!
//! The ratio is what starting, scheduling and ending a workgroup costs on top of its
//! instructions: (ratio − 1) × 4 instructions' time per workgroup. `many_small_2_threads`
//! shows the hand-off between two threads.
//!
//! Times are CPU time (the calling thread's for the one-thread runs, the process's for the
//! two-thread one: the work both threads did), not wall time, so that other work on a shared
//! machine does not move the ratio.

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kfd_gfx9::dispatch::{Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch, run};
use kfd_gfx9::exec::{Apertures, Fault, Memory, Target};
use rustix::time::{ClockId, clock_gettime};
use std::time::Duration;

const SMALL: u64 = 0x1_0000_0000;
const BIG: u64 = 0x2_0000_0000;
const GROUPS: u32 = 262_144;
const SMALL_BODY: usize = 3;
const BIG_BODY: usize = 65_535;
/// `s_add_u32 s0, s0, 1` (SOP2, llvm-mc-19 -mcpu=gfx90a: `[0x00,0x81,0x00,0x80]`).
const S_ADD: u32 = 0x8000_8100;
/// `s_endpgm`.
const S_ENDPGM: u32 = 0xBF81_0000;

/// Two kernels' code, read-only.
struct Code {
    small: Vec<u8>,
    big: Vec<u8>,
}

fn code(body: usize) -> Vec<u8> {
    let mut words = vec![S_ADD; body];
    words.push(S_ENDPGM);
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.resize(bytes.len().next_multiple_of(4096), 0);
    bytes
}

impl Memory for Code {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: false };
        let (base, bytes) = if addr >= BIG {
            (BIG, &self.big)
        } else {
            (SMALL, &self.small)
        };
        let off = usize::try_from(addr.checked_sub(base).ok_or(fault)?).map_err(|_| fault)?;
        let src = bytes.get(off..off + buf.len()).ok_or(fault)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&self, addr: u64, _: &[u8]) -> Result<(), Fault> {
        Err(Fault { addr, write: true })
    }
    fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        Err(Fault { addr, write: true })
    }
}

fn dispatch(entry: u64, grid: u32, workgroup: u32) -> Dispatch {
    // RSRC2: no user SGPRs, TGID_X_EN.
    let kd = KernelDescriptor::from_registers(0, 1 << 7, 0).expect("descriptor");
    Dispatch {
        target: Target::Gfx90a,
        kd,
        entry,
        grid: [grid, 1, 1],
        workgroup: [workgroup, 1, 1],
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: 0,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: None,
    }
}

fn bench(c: &mut Criterion) {
    let mem = Code {
        small: code(SMALL_BODY),
        big: code(BIG_BODY),
    };
    let many = dispatch(SMALL, GROUPS, 1);
    let big = dispatch(BIG, 1024, 1024);
    let instructions = u64::from(GROUPS) * (SMALL_BODY as u64 + 1);
    assert_eq!(instructions, 16 * (BIG_BODY as u64 + 1), "the same work");
    let one = RunOptions { threads: 1 };
    let check = |d: &Dispatch, opts: &RunOptions| {
        let s = run(d, &mem, opts, &NoObserver).expect("runs");
        assert_eq!(s.instructions, instructions);
    };
    let mut g = c.benchmark_group("workgroups");
    g.throughput(Throughput::Elements(instructions));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    let cpu = |clock: ClockId, d: &Dispatch, opts: &RunOptions, iters: u64| {
        let start = clock_gettime(clock);
        for _ in 0..iters {
            check(d, opts);
        }
        let end = clock_gettime(clock);
        let ns = |t: rustix::time::Timespec| t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128;
        Duration::from_nanos((ns(end) - ns(start)) as u64)
    };
    g.bench_function("many_small_workgroups", |b| {
        b.iter_custom(|n| cpu(ClockId::ThreadCPUTime, &many, &one, n))
    });
    g.bench_function("one_big_workgroup", |b| {
        b.iter_custom(|n| cpu(ClockId::ThreadCPUTime, &big, &one, n))
    });
    g.bench_function("many_small_2_threads", |b| {
        b.iter_custom(|n| {
            cpu(
                ClockId::ProcessCPUTime,
                &many,
                &RunOptions { threads: 2 },
                n,
            )
        })
    });
    g.finish();
    ratio::report(
        "workgroups",
        "many_small_workgroups",
        "one_big_workgroup",
        None,
    );
    ratio::report(
        "workgroups",
        "many_small_2_threads",
        "one_big_workgroup",
        None,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
