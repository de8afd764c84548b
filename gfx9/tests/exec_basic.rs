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
