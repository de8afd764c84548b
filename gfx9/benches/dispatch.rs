//! The dispatcher's throughput: a grid of 64 workgroups of 256 work-items (4 waves each) runs
//! a kernel of 256 `v_mov_b32 v1, v0` and `s_endpgm` (hand-encoded, VOP1 / SOPP) on one
//! thread, and the same on two; each run is 64 × 4 × 257 wave-instructions. The baseline in
//! the same run is a plain Rust loop doing the same work: for each wave, 256 times, copy 64
//! lanes of one register array into another under an EXEC mask. The ratio says how many
//! times slower than plain Rust a wave-instruction of the interpreter is (decode cached,
//! wave setup and scheduling included); criterion prints the wave-instructions per second.

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kfd_gfx9::dispatch::{Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch, run};
use kfd_gfx9::exec::{Apertures, Fault, Memory, Target};

const CODE: u64 = 0x1_0000_0000;
const MOVES: usize = 256;
const GROUPS: u32 = 64;
const ITEMS: u32 = 256;
/// `v_mov_b32_e32 v1, v0` (VOP1: 0x7E << 25, vdst 1, op 1, src0 256 + 0).
const V_MOV_V1_V0: u32 = 0x7E02_0300;
/// `s_endpgm`.
const S_ENDPGM: u32 = 0xBF81_0000;

/// The kernel's code at CODE, read-only.
struct Code(Vec<u8>);

impl Memory for Code {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: false };
        let off = usize::try_from(addr.checked_sub(CODE).ok_or(fault)?).map_err(|_| fault)?;
        let src = self.0.get(off..off + buf.len()).ok_or(fault)?;
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

fn setup() -> (Code, Dispatch) {
    let mut words = vec![V_MOV_V1_V0; MOVES];
    words.push(S_ENDPGM);
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.resize(bytes.len().next_multiple_of(4096), 0);
    // RSRC2: USER_SGPR 0, TGID_X_EN.
    let kd = KernelDescriptor::from_registers(0, 1 << 7, 0).expect("descriptor");
    let d = Dispatch {
        target: Target::Gfx90a,
        kd,
        entry: CODE,
        grid: [GROUPS * ITEMS, 1, 1],
        workgroup: [ITEMS, 1, 1],
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: 0,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: None,
    };
    (Code(bytes), d)
}

/// The baseline: the same register copies in plain Rust.
fn plain(waves: usize) -> u64 {
    let mut v0 = vec![[0u32; 64]; waves];
    let mut v1 = vec![[0u32; 64]; waves];
    for (w, regs) in v0.iter_mut().enumerate() {
        for (lane, r) in regs.iter_mut().enumerate() {
            *r = (w * 64 + lane) as u32;
        }
    }
    let exec = black_box(u64::MAX);
    for w in 0..waves {
        for _ in 0..MOVES {
            // One wave-instruction: 64 lanes under EXEC, which the compiler may vectorize;
            // `black_box` keeps each instruction from being folded away.
            let src = black_box(&v0[w]);
            let dst = &mut v1[w];
            for lane in 0..64 {
                if exec >> lane & 1 == 1 {
                    dst[lane] = src[lane];
                }
            }
            black_box(dst);
        }
    }
    v1.iter().map(|r| u64::from(r[63])).sum()
}

fn bench(c: &mut Criterion) {
    let (code, d) = setup();
    let waves = (GROUPS * ITEMS / 64) as usize;
    let mut g = c.benchmark_group("dispatch");
    g.throughput(Throughput::Elements((waves * (MOVES + 1)) as u64));
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(2));
    g.bench_function("interpreter_1_thread", |b| {
        b.iter(|| run(&d, &code, &RunOptions { threads: 1 }, &NoObserver).expect("runs"))
    });
    g.bench_function("interpreter_2_threads", |b| {
        b.iter(|| run(&d, &code, &RunOptions { threads: 2 }, &NoObserver).expect("runs"))
    });
    g.bench_function("plain_rust", |b| b.iter(|| plain(black_box(waves))));
    g.finish();
    ratio::report("dispatch", "interpreter_1_thread", "plain_rust", None);
    ratio::report("dispatch", "interpreter_2_threads", "plain_rust", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
