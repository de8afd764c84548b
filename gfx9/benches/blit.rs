//! The interpreter's vector memory throughput on ROCr's blit kernel: the main loop of ROCr
//! 5.2.3's `CopyAligned` (`kBlitKernelSource` in `src/core/runtime/amd_blit_kernel.cpp`, its
//! phase 2: `flat_load_dwordx4`, the 64-bit address advanced with `v_add_co`/`v_addc_co`,
//! `flat_store_dwordx4`, `v_cmp_lt_u64` against the phase's end, `s_cbranch_vccz`), which
//! ROCr runs for `hsa_amd_memory_async_copy` of 1 MiB and more between GPU-visible buffers
//! and for `hsa_memory_copy` (rocrtst's `Memory_Async_Copy`). The grid is ROCr's:
//! `64 × 4 × CUs` work-items in workgroups of 64 (`BlitKernel::SubmitLinearCopyCommand`),
//! here for 60 CUs (radeon-vii), each wave striding over the buffer by the whole grid's
//! 16 bytes per work-item. Written for gfx90a and assembled with `llvm-mc-19 -mcpu=gfx90a`
//! (the source is in the comment of [`CODE_WORDS`]).
//!
//! Criterion prints bytes copied per second of the bench thread's CPU time (`threads: 1`);
//! the baseline in the same run is a plain `copy_from_slice` of the same bytes between the
//! same two buffers, and the ratio (interpreter time / memcpy time) is printed last.
//!
//! Measured (2026-12-02, the shared 2-core VM at a load average of 2–11, CPU time, 16 MiB):
//! - before (main `b542281`, lanes gathered into per-lane arrays, then one `Memory` call
//!   per page): 34.3 ms, 466 MiB/s; `memcpy` 0.69 ms in the same run: **49.8×**;
//! - after (the bulk path, `exec/mem/mod.rs`): 22.2 ms, 719 MiB/s; `memcpy` 0.63 ms in the
//!   same run: **35.5×** (1.54× faster).
//!
//! What is left of the loop's time (perf, after): the `v_add_co`/`v_addc_co` carries
//! (`valu::fast::carry`, 23 %), this bench's own `Memory` (its mutex and the copies: 33 %),
//! the memory instructions themselves (about 12 %).

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kfd_gfx9::dispatch::{Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch, run};
use kfd_gfx9::exec::{Apertures, Fault, Memory, Target};

#[path = "common/mod.rs"]
mod common;
use common::cpu_time;

const CODE: u64 = 0x1_0000_0000;
const KERNARG: u64 = CODE + 0x1000;
const SRC: u64 = 0x2_0000_0000;
const DST: u64 = 0x3_0000_0000;
/// Bytes copied per dispatch.
const LEN: usize = 16 << 20;
/// ROCr's grid for a GPU of 60 CUs: `64 * 4 * num_cus_` work-items (`num_cus_` is
/// `NumFComputeCores / 4`).
const ITEMS: u32 = 64 * 4 * 60;

/// ```text
///   s_load_dwordx4 s[4:7], s[0:1], 0x0     // src, dst
///   s_load_dwordx2 s[8:9], s[0:1], 0x10    // src end
///   s_load_dword s10, s[0:1], 0x18         // work-items
///   s_waitcnt lgkmcnt(0)
///   s_lshl_b32 s2, s2, 6
///   v_add_co_u32 v0, vcc, s2, v0
///   s_lshl_b32 s11, s10, 4
///   v_lshlrev_b32 v1, 4, v0
///   v_mov_b32 v3, s5
///   v_add_co_u32 v2, vcc, s4, v1
///   v_addc_co_u32 v3, vcc, v3, 0, vcc
///   v_mov_b32 v5, s7
///   v_add_co_u32 v4, vcc, s6, v1
///   v_addc_co_u32 v5, vcc, v5, 0, vcc
/// LOOP:
///   v_cmp_lt_u64 vcc, v[2:3], s[8:9]
///   s_cbranch_vccz DONE
///   flat_load_dwordx4 v[8:11], v[2:3]
///   v_add_co_u32 v2, vcc, v2, s11
///   v_addc_co_u32 v3, vcc, v3, 0, vcc
///   s_waitcnt vmcnt(0)
///   flat_store_dwordx4 v[4:5], v[8:11]
///   v_add_co_u32 v4, vcc, v4, s11
///   v_addc_co_u32 v5, vcc, v5, 0, vcc
///   s_branch LOOP
/// DONE:
///   s_endpgm
/// ```
const CODE_WORDS: [u32; 37] = [
    0xC00A0100, 0x00000000, 0xC0060200, 0x00000010, 0xC0020280, 0x00000018, 0xBF8CC07F, 0x8E028602,
    0x32000002, 0x8E0B840A, 0x24020084, 0x7E060205, 0x32040204, 0xD11C6A03, 0x01A90103, 0x7E0A0207,
    0x32080206, 0xD11C6A05, 0x01A90105, 0xD0E9006A, 0x00001102, 0xBF86000E, 0xDC5C0000, 0x08000002,
    0xD1196A02, 0x00001702, 0xD11C6A03, 0x01A90103, 0xBF8C0F70, 0xDC7C0000, 0x00000804, 0xD1196A04,
    0x00001704, 0xD11C6A05, 0x01A90105, 0xBF82FFEF, 0xBF810000,
];

/// The code and kernarg page, the source buffer (read-only) and the destination buffer.
struct Mem {
    code: Vec<u8>,
    src: Vec<u8>,
    dst: Mutex<Vec<u8>>,
}

/// `buf`'s range at `addr` within a region of `len` bytes at `base`.
fn within(base: u64, len: usize, addr: u64, n: usize) -> Option<std::ops::Range<usize>> {
    let off = usize::try_from(addr.checked_sub(base)?).ok()?;
    (off.checked_add(n)? <= len).then_some(off..off + n)
}

impl Memory for Mem {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let n = buf.len();
        if let Some(r) = within(CODE, self.code.len(), addr, n) {
            buf.copy_from_slice(&self.code[r]);
        } else if let Some(r) = within(SRC, self.src.len(), addr, n) {
            buf.copy_from_slice(&self.src[r]);
        } else {
            return Err(Fault { addr, write: false });
        }
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let mut dst = self.dst.lock().expect("not poisoned");
        let r = within(DST, dst.len(), addr, data.len()).ok_or(Fault { addr, write: true })?;
        dst[r].copy_from_slice(data);
        Ok(())
    }
    fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        Err(Fault { addr, write: true })
    }
}

fn setup() -> (Mem, Dispatch) {
    let mut code: Vec<u8> = CODE_WORDS.iter().flat_map(|w| w.to_le_bytes()).collect();
    code.resize(0x1000, 0);
    for v in [SRC, DST, SRC + LEN as u64] {
        code.extend_from_slice(&v.to_le_bytes());
    }
    code.extend_from_slice(&ITEMS.to_le_bytes());
    code.resize(0x2000, 0);
    let src = (0..LEN).map(|i| (i * 7 + i / 4096) as u8).collect();
    let mem = Mem {
        code,
        src,
        dst: Mutex::new(vec![0; LEN]),
    };
    // RSRC2: USER_SGPR 2 (the kernarg pointer, from the user data), TGID_X_EN.
    let kd = KernelDescriptor::from_registers(0, 2 << 1 | 1 << 7, 0).expect("descriptor");
    let mut user = [0u32; 16];
    user[0] = KERNARG as u32;
    user[1] = (KERNARG >> 32) as u32;
    let d = Dispatch {
        target: Target::Gfx90a,
        kd,
        entry: CODE,
        grid: [ITEMS, 1, 1],
        workgroup: [64, 1, 1],
        kernarg: KERNARG,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: 0,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: Some(user),
    };
    (mem, d)
}

fn bench(c: &mut Criterion) {
    let (mem, d) = setup();
    let one_thread = RunOptions { threads: 1 };
    run(&d, &mem, &one_thread, &NoObserver).expect("runs");
    assert!(
        *mem.dst.lock().expect("not poisoned") == mem.src,
        "the kernel copies the buffer"
    );
    let mut g = c.benchmark_group("blit");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("copy_aligned_16MiB_1_thread", |b| {
        b.iter_custom(|n| {
            cpu_time(n, || {
                black_box(run(&d, &mem, &one_thread, &NoObserver).expect("runs"));
            })
        })
    });
    g.bench_function("memcpy_16MiB", |b| {
        b.iter_custom(|n| {
            cpu_time(n, || {
                let mut dst = mem.dst.lock().expect("not poisoned");
                dst.copy_from_slice(black_box(&mem.src));
                black_box(&*dst);
            })
        })
    });
    g.finish();
    ratio::report("blit", "copy_aligned_16MiB_1_thread", "memcpy_16MiB", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
