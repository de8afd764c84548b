//! The execution core against LLVM-assembled snippets: fetch, decode, the PC, branches and
//! the operand plumbing every family shares.

mod common;

use common::{CODE, run, run_ok};
use kfd_gfx9::exec::{ExecError, Flow};

#[test]
fn moves_and_a_backward_loop_run_to_s_endpgm() {
    // s1 counts down from 5 with s_cbranch_scc1 taken while SCC says "not yet"... here only
    // with moves and unconditional/conditional branches the core implements.
    let Some(r) = run_ok(
        "s_mov_b32 s0, 0x1234\n\
         s_mov_b64 s[2:3], -1\n\
         s_branch skip\n\
         s_mov_b32 s0, 0\n\
         skip:\n\
         v_mov_b32 v1, s0\n\
         s_cbranch_scc1 bad\n\
         s_endpgm\n\
         bad:\n\
         s_mov_b32 s0, 0xbad\n\
         s_endpgm",
        |_, _| {},
    ) else {
        return;
    };
    assert_eq!(r.wave.sgpr[0], 0x1234);
    assert_eq!((r.wave.sgpr[2], r.wave.sgpr[3]), (u32::MAX, u32::MAX));
    assert!(r.wave.vgpr[1].iter().all(|&v| v == 0x1234));
}

#[test]
fn exec_masks_vector_writes() {
    let Some(r) = run_ok("v_mov_b32 v0, 7\ns_endpgm", |w, _| w.exec = 0x5) else {
        return;
    };
    assert_eq!(&r.wave.vgpr[0][..4], &[7, 0, 7, 0]);
}

#[test]
fn running_off_the_code_is_a_memory_error_with_its_pc() {
    // No s_endpgm: the wave runs through zeros (v_cndmask_b32 v0, s0, v0, vcc: VOP2 opcode 0)
    // to the end of the mapped page and faults fetching past it.
    let Some(r) = run("s_nop 0", |_, _| {}) else {
        return;
    };
    match r.end {
        Err(ExecError::Memory { pc, fault }) => {
            assert_eq!(pc, CODE + 4096);
            assert!(!fault.write);
        }
        Err(ExecError::Unimplemented { pc, .. }) => assert_eq!(pc, CODE + 4),
        other => panic!("expected a fetch fault or an unimplemented zero word, got {other:?}"),
    }
    assert_ne!(r.end, Ok(Flow::End));
}

/// A hostile kernel jumping through more code pages than the decode cache holds: every jump
/// lands right (the cache starts afresh instead of growing), and the cache never holds more
/// than its bound of pages.
#[test]
fn code_spread_over_many_pages_runs_with_a_bounded_decode_cache() {
    use common::TestMemory;
    use kfd_gfx9::exec::{CodeCache, Ctx, Target, Wave, step};
    let pages = CodeCache::MAX_PAGES as u64 * 2 + 7;
    let base = 0x4_0000_0000u64;
    // Page k: s_add_u32 s0, s0, 1 ; s_setpc_b64 s[2:3]  — s[2:3] is set to the next page by
    // the host loop below (the wave's own arithmetic is not what is tested here).
    let add = 0x8000_8100u32; // s_add_u32 s0, s0, 1
    let setpc = 0xbe80_1d02u32; // s_setpc_b64 s[2:3]
    let endpgm = 0xbf81_0000u32;
    let mut image = vec![0u8; (pages * 4096) as usize];
    for k in 0..pages {
        let at = (k * 4096) as usize;
        let last = k == pages - 1;
        let words = [add, if last { endpgm } else { setpc }];
        for (i, w) in words.iter().enumerate() {
            image[at + 4 * i..at + 4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
    let mem = TestMemory::default();
    mem.map(base, image);
    let mut wave = Wave::new(Target::Gfx90a, base);
    let mut lds = vec![0u8; 0];
    let mut cache = CodeCache::new();
    let mut max_pages = 0;
    for _ in 0..pages * 2 + 10 {
        // The next page, for this page's s_setpc.
        let next = (wave.pc & !4095) + 4096;
        wave.sgpr[2] = next as u32;
        wave.sgpr[3] = (next >> 32) as u32;
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        let flow = step(&mut wave, &mut ctx).expect("every page runs");
        max_pages = max_pages.max(cache.pages());
        if flow == kfd_gfx9::exec::Flow::End {
            break;
        }
    }
    assert_eq!(u64::from(wave.sgpr[0]), pages, "one add per page");
    assert!(
        max_pages <= CodeCache::MAX_PAGES,
        "{max_pages} pages cached"
    );
}
