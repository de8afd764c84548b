//! The interpreter's hot loop allocates nothing: once the code cache holds a kernel, a loop of
//! VALU operations on both the fast and the general path (f32 fma/mul/compare/select, a
//! transcendental, the f32 division sequence), LDS writes and reads, global loads and stores
//! and scalar loop control runs its thousands of instructions without one heap allocation
//! (counted by a global allocator, per thread). An allocation per instruction would cost the
//! interpreter more than most instructions' work.

mod common;

use common::{CODE, DATA, TestMemory, assemble};
use kfd_gfx9::exec::{CodeCache, Ctx, Flow, Target, Wave, step};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call forwards to `System`, which upholds GlobalAlloc's contract; the counter
// is a thread-local `Cell` with a const initialiser (no allocation, no reentrancy).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout (through `alloc` above).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: as `dealloc`; the caller guarantees `new_size` is valid for the layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

const LOOP: &str = "
    s_mov_b32 s4, 200
    v_lshlrev_b32 v10, 2, v0
    v_mov_b32 v11, 0
    v_mov_b32 v14, s1
loop:
    v_cvt_f32_u32 v1, v0
    v_fma_f32 v2, v1, 0.5, v3
    v_mul_f32_e64 v3, |v2|, -v1
    v_cmp_lt_f32 vcc, v2, v3
    v_cndmask_b32 v4, v2, v3, vcc
    v_exp_f32 v5, v4
    v_div_scale_f32 v6, vcc, v4, v1, v4
    v_rcp_f32 v7, v6
    v_add_co_u32 v12, vcc, s0, v10
    v_addc_co_u32 v13, vcc, v14, v11, vcc
    global_load_dword v8, v[12:13], off
    s_waitcnt vmcnt(0)
    v_add_u32 v8, v8, v0
    global_store_dword v[12:13], v8, off
    ds_write_b32 v10, v8
    ds_read_b32 v9, v10 offset:4
    s_waitcnt lgkmcnt(0)
    s_sub_u32 s4, s4, 1
    s_cmp_lg_u32 s4, 0
    s_cbranch_scc1 loop
    s_endpgm
";

fn fresh(wave: &mut Wave) {
    *wave = Wave::new(Target::Gfx90a, CODE);
    wave.hwreg[1] = 0xf0; // keep denormals
    wave.sgpr[0] = DATA as u32;
    wave.sgpr[1] = (DATA >> 32) as u32;
    for l in 0..64 {
        wave.vgpr[0][l] = l as u32;
    }
}

/// Runs the wave to `s_endpgm`; the instructions executed.
fn run(wave: &mut Wave, mem: &TestMemory, lds: &mut [u8], cache: &mut CodeCache) -> usize {
    let mut n = 0;
    loop {
        let mut ctx = Ctx {
            mem,
            lds: &mut *lds,
            code: &mut *cache,
        };
        n += 1;
        match step(wave, &mut ctx) {
            Ok(Flow::Continue) => {}
            Ok(Flow::End) => return n,
            other => panic!("the loop stopped: {other:?} at {:#x}", wave.pc),
        }
        assert!(n < 100_000, "the loop does not end");
    }
}

#[test]
fn a_cached_kernel_runs_without_allocating() {
    let Some(code) = assemble(LOOP) else { return };
    let mem = TestMemory::with_code(&code);
    let mut lds = vec![0u8; 64 << 10];
    let mut cache = CodeCache::new();
    let mut wave = Wave::new(Target::Gfx90a, CODE);
    fresh(&mut wave);
    // The first run decodes (the cache allocates its page): the counter sees that.
    let first = allocs();
    run(&mut wave, &mem, &mut lds, &mut cache);
    assert!(allocs() > first, "the counter counts nothing");
    fresh(&mut wave);
    let before = allocs();
    let executed = run(&mut wave, &mem, &mut lds, &mut cache);
    let during = allocs() - before;
    assert!(executed > 200 * 19, "{executed} instructions");
    assert_eq!(during, 0, "{during} allocations in {executed} instructions");
    // The loop computed: after both runs every lane's dword holds 400 additions of its lane
    // number.
    for l in 0..64u64 {
        assert_eq!(mem.u32(DATA + 4 * l), 400 * l as u32);
    }
}
