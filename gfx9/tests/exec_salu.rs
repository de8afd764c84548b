//! The scalar ALU and program control (SOP2, SOPK, SOP1, SOPC, SOPP) against LLVM-assembled
//! snippets: every opcode of the scalar tables runs with expected results — the destination
//! and SCC, chosen so that the usual mistakes (carry vs overflow, SCC from the low half of a
//! 64-bit result, unmasked shift amounts, a sign-extended unsigned immediate, a clobbered
//! SCC) give another answer — plus a counted loop, a call and return, the saveexec family,
//! the hardware registers and the flows (`s_trap`, `s_sleep`, `s_barrier`...).
//!
//! Values follow the per-opcode descriptions of the "AMD Instinct MI200 ISA" guide, chapter
//! 12 (SOP2, SOPK, SOP1, SOPC, SOPP), which a real MI200 executes.

mod common;

use common::{CODE, TestMemory, assemble, run, run_ok};
use kfd_gfx9::exec::{CodeCache, Ctx, ExecError, Flow, GprIdx, Round, Wave, execute, hwreg, step};
use kfd_gfx9::{Opcode, Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp, decode};

/// What every scalar register not set by a case holds, so an unwritten destination shows.
const SENTINEL: u32 = 0xdead_beef;

/// Runs `asm` then `s_endpgm` with `s0.. = init` (the rest [`SENTINEL`]) and SCC = `scc`.
fn exec(asm: &str, init: &[u32], scc: bool) -> Option<Wave> {
    let r = run_ok(&format!("{asm}\ns_endpgm"), |w, _| {
        w.sgpr = [SENTINEL; kfd_gfx9::exec::SGPRS];
        w.sgpr[..init.len()].copy_from_slice(init);
        w.scc = scc;
    })?;
    Some(r.wave)
}

/// After `asm` (sources from `init`, SCC = `scc_in`), each `(register, value)` of `want`
/// holds and SCC is `scc_out`. `false` when LLVM is missing (the test is skipped).
#[track_caller]
fn case(asm: &str, init: &[u32], scc_in: bool, want: &[(usize, u32)], scc_out: bool) -> bool {
    let Some(w) = exec(asm, init, scc_in) else {
        return false;
    };
    for &(reg, value) in want {
        assert_eq!(
            w.sgpr[reg], value,
            "{asm} with s0.. = {init:#x?}, SCC {scc_in}: s{reg} = {:#x}, expected {value:#x}",
            w.sgpr[reg]
        );
    }
    assert_eq!(
        w.scc, scc_out,
        "{asm} with s0.. = {init:#x?}, SCC {scc_in}: SCC"
    );
    true
}

/// `lo, hi` halves of a 64-bit value.
fn pair(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// Runs a table of 32-bit SOP2 cases `(mnemonic, s0, s1, scc in, s4 result, scc out)`.
#[track_caller]
fn sop2_32(cases: &[(&str, u32, u32, bool, u32, bool)]) {
    for &(op, a, b, scc_in, d, scc_out) in cases {
        if !case(
            &format!("{op} s4, s0, s1"),
            &[a, b],
            scc_in,
            &[(4, d)],
            scc_out,
        ) {
            return;
        }
    }
}

/// A table of 64-bit SOP2 cases `(asm, s[0:1], s[2:3], scc in, s[4:5] result, scc out)`.
#[track_caller]
fn sop2_64(cases: &[(&str, u64, u64, bool, u64, bool)]) {
    for &(asm, a, b, scc_in, d, scc_out) in cases {
        let [a0, a1] = pair(a);
        let [b0, b1] = pair(b);
        let [d0, d1] = pair(d);
        if !case(asm, &[a0, a1, b0, b1], scc_in, &[(4, d0), (5, d1)], scc_out) {
            return;
        }
    }
}

#[test]
fn add_and_subtract_set_carry_or_signed_overflow() {
    sop2_32(&[
        // Unsigned: SCC is the carry / borrow.
        ("s_add_u32", 0xffff_ffff, 2, false, 1, true),
        ("s_add_u32", 1, 2, true, 3, false),
        ("s_sub_u32", 1, 2, false, 0xffff_ffff, true),
        ("s_sub_u32", 5, 3, true, 2, false),
        // Signed: SCC is overflow, not carry (-1 + 1 carries but does not overflow).
        ("s_add_i32", 0x7fff_ffff, 1, false, 0x8000_0000, true),
        ("s_add_i32", 0xffff_ffff, 1, true, 0, false),
        ("s_sub_i32", 0x8000_0000, 1, false, 0x7fff_ffff, true),
        ("s_sub_i32", 0, 1, true, 0xffff_ffff, false),
        // With carry-in from SCC.
        ("s_addc_u32", 0xffff_ffff, 0, true, 0, true),
        ("s_addc_u32", 1, 2, true, 4, false),
        ("s_addc_u32", 0xffff_fffe, 1, false, 0xffff_ffff, false),
        ("s_subb_u32", 0, 0, true, 0xffff_ffff, true),
        ("s_subb_u32", 5, 2, true, 2, false),
        ("s_subb_u32", 2, 2, false, 0, false),
    ]);
}

#[test]
fn min_max_set_scc_when_s0_is_chosen() {
    sop2_32(&[
        ("s_min_i32", 0xffff_ffff, 1, false, 0xffff_ffff, true),
        ("s_min_i32", 1, 0xffff_ffff, true, 0xffff_ffff, false),
        ("s_min_i32", 3, 3, true, 3, false),
        ("s_min_u32", 0xffff_ffff, 1, true, 1, false),
        ("s_min_u32", 1, 5, false, 1, true),
        ("s_max_i32", 0xffff_ffff, 1, true, 1, false),
        ("s_max_i32", 1, 0xffff_ffff, false, 1, true),
        ("s_max_u32", 0xffff_ffff, 1, false, 0xffff_ffff, true),
        ("s_max_u32", 3, 3, false, 3, true),
        ("s_max_i32", 3, 3, false, 3, true),
        ("s_min_u32", 3, 3, true, 3, false),
    ]);
}

#[test]
fn logic_b32_sets_scc_to_result_nonzero_and_cselect_keeps_it() {
    sop2_32(&[
        ("s_cselect_b32", 7, 9, true, 7, true),
        ("s_cselect_b32", 7, 9, false, 9, false),
        ("s_and_b32", 0xf0f0, 0x0ff0, false, 0x00f0, true),
        ("s_and_b32", 0xf0, 0x0f, true, 0, false),
        ("s_or_b32", 0xf0, 0x0f, false, 0xff, true),
        ("s_or_b32", 0, 0, true, 0, false),
        ("s_xor_b32", 0xff, 0x0f, false, 0xf0, true),
        ("s_xor_b32", 5, 5, true, 0, false),
        ("s_andn2_b32", 0xff, 0x0f, false, 0xf0, true),
        ("s_andn2_b32", 0x0f, 0xff, true, 0, false),
        ("s_orn2_b32", 0, 0xffff_fff0, false, 0xf, true),
        ("s_orn2_b32", 0, 0xffff_ffff, true, 0, false),
        ("s_nand_b32", 0xffff_0000, 0xffff_ffff, false, 0xffff, true),
        ("s_nand_b32", 0xffff_ffff, 0xffff_ffff, true, 0, false),
        ("s_nor_b32", 0xffff_0000, 0, false, 0xffff, true),
        ("s_nor_b32", 0xffff_0000, 0xffff, true, 0, false),
        (
            "s_xnor_b32",
            0xffff_ffff,
            0xffff_fff0,
            false,
            0xffff_fff0,
            true,
        ),
        ("s_xnor_b32", 0xf0f0_f0f0, 0x0f0f_0f0f, true, 0, false),
    ]);
}

#[test]
fn shifts_mask_the_amount_to_five_bits() {
    sop2_32(&[
        ("s_lshl_b32", 1, 33, false, 2, true),
        ("s_lshl_b32", 0x8000_0000, 1, true, 0, false),
        ("s_lshr_b32", 0x8000_0000, 63, false, 1, true),
        ("s_lshr_b32", 1, 1, true, 0, false),
        ("s_ashr_i32", 0x8000_0000, 4, false, 0xf800_0000, true),
        ("s_ashr_i32", 0x8000_0000, 35, false, 0xf000_0000, true),
        ("s_ashr_i32", 0x4000_0000, 31, true, 0, false),
    ]);
}

#[test]
fn bit_fields_b32() {
    sop2_32(&[
        // s_bfm_b32: ((1 << S0[4:0]) - 1) << S1[4:0]; SCC untouched.
        ("s_bfm_b32", 4, 8, true, 0xf00, true),
        ("s_bfm_b32", 36, 40, false, 0xf00, false),
        ("s_bfm_b32", 0, 5, true, 0, true),
        ("s_bfm_b32", 31, 1, false, 0xffff_fffe, false),
        // s_bfe_u32: offset S1[4:0], width S1[22:16].
        ("s_bfe_u32", 0x1234_5678, 8 << 16 | 4, false, 0x67, true),
        ("s_bfe_u32", 0x1234_5678, 4, true, 0, false),
        (
            "s_bfe_u32",
            0x1234_5678,
            40 << 16 | 36,
            false,
            0x0123_4567,
            true,
        ),
        // s_bfe_i32: the field sign-extended from its top bit.
        ("s_bfe_i32", 0xf0, 4 << 16 | 4, false, 0xffff_ffff, true),
        ("s_bfe_i32", 0x70, 4 << 16 | 4, false, 7, true),
        (
            "s_bfe_i32",
            0x8000_0000,
            32 << 16 | 4,
            false,
            0xf800_0000,
            true,
        ),
        ("s_bfe_i32", 0xf0, 4, true, 0, false),
    ]);
}

#[test]
fn multiplies_leave_scc_alone() {
    sop2_32(&[
        ("s_mul_i32", 0xffff_ffff, 3, true, 0xffff_fffd, true),
        ("s_mul_i32", 0x1_0000, 0x1_0000, false, 0, false),
        (
            "s_mul_hi_u32",
            0xffff_ffff,
            0xffff_ffff,
            true,
            0xffff_fffe,
            true,
        ),
        ("s_mul_hi_u32", 0x8000_0000, 4, false, 2, false),
        ("s_mul_hi_i32", 0xffff_ffff, 0xffff_ffff, true, 0, true),
        ("s_mul_hi_i32", 0x8000_0000, 2, false, 0xffff_ffff, false),
    ]);
}

#[test]
fn absdiff_shift_add_and_pack() {
    sop2_32(&[
        ("s_absdiff_i32", 3, 10, false, 7, true),
        ("s_absdiff_i32", 0xffff_fffb, 5, false, 10, true),
        ("s_absdiff_i32", 7, 7, true, 0, false),
        // 32-bit arithmetic, as the guide's D = S0 - S1; if D < 0 then D = -D.
        ("s_absdiff_i32", 0x7fff_ffff, 0x8000_0000, false, 1, true),
        // (S0 << n) + S1, SCC = carry out of the whole 64-bit sum.
        ("s_lshl1_add_u32", 3, 4, true, 10, false),
        ("s_lshl1_add_u32", 0x8000_0000, 0, false, 0, true),
        ("s_lshl2_add_u32", 1, 1, true, 5, false),
        ("s_lshl2_add_u32", 0x4000_0000, 1, false, 1, true),
        ("s_lshl3_add_u32", 2, 1, true, 17, false),
        ("s_lshl3_add_u32", 0x2000_0000, 0, false, 0, true),
        ("s_lshl4_add_u32", 1, 1, true, 17, false),
        ("s_lshl4_add_u32", 1, 0xffff_fff0, false, 0, true),
        (
            "s_pack_ll_b32_b16",
            0x1111_aaaa,
            0x2222_bbbb,
            true,
            0xbbbb_aaaa,
            true,
        ),
        (
            "s_pack_lh_b32_b16",
            0x1111_aaaa,
            0x2222_bbbb,
            false,
            0x2222_aaaa,
            false,
        ),
        (
            "s_pack_hh_b32_b16",
            0x1111_aaaa,
            0x2222_bbbb,
            true,
            0x2222_1111,
            true,
        ),
    ]);
}

#[test]
fn sop2_b64_uses_both_halves() {
    const HI: u64 = 0xffff_ffff_0000_0000;
    sop2_64(&[
        (
            "s_cselect_b64 s[4:5], s[0:1], s[2:3]",
            HI,
            5,
            true,
            HI,
            true,
        ),
        (
            "s_cselect_b64 s[4:5], s[0:1], s[2:3]",
            HI,
            5,
            false,
            5,
            false,
        ),
        // A result nonzero only in its high half sets SCC.
        (
            "s_and_b64 s[4:5], s[0:1], s[2:3]",
            HI,
            0x0000_ffff_0000_ffff,
            false,
            0x0000_ffff_0000_0000,
            true,
        ),
        ("s_and_b64 s[4:5], s[0:1], s[2:3]", HI, !HI, true, 0, false),
        (
            "s_or_b64 s[4:5], s[0:1], s[2:3]",
            0,
            1 << 40,
            false,
            1 << 40,
            true,
        ),
        (
            "s_xor_b64 s[4:5], s[0:1], s[2:3]",
            HI,
            HI | 1,
            false,
            1,
            true,
        ),
        ("s_xor_b64 s[4:5], s[0:1], s[2:3]", HI, HI, true, 0, false),
        (
            "s_andn2_b64 s[4:5], s[0:1], s[2:3]",
            u64::MAX,
            !HI,
            false,
            HI,
            true,
        ),
        ("s_orn2_b64 s[4:5], s[0:1], s[2:3]", 0, !HI, false, HI, true),
        (
            "s_nand_b64 s[4:5], s[0:1], s[2:3]",
            HI,
            u64::MAX,
            false,
            !HI,
            true,
        ),
        ("s_nor_b64 s[4:5], s[0:1], s[2:3]", !HI, 0, false, HI, true),
        ("s_nor_b64 s[4:5], s[0:1], s[2:3]", !HI, HI, true, 0, false),
        ("s_xnor_b64 s[4:5], s[0:1], s[2:3]", HI, 0, false, !HI, true),
        // An inline integer constant is sign-extended to 64 bits.
        (
            "s_and_b64 s[4:5], s[0:1], -1",
            HI | 7,
            0,
            false,
            HI | 7,
            true,
        ),
    ]);
}

#[test]
fn shifts_b64_mask_the_amount_to_six_bits() {
    sop2_64(&[
        (
            "s_lshl_b64 s[4:5], s[0:1], s2",
            1,
            127,
            false,
            1 << 63,
            true,
        ),
        ("s_lshl_b64 s[4:5], s[0:1], s2", 1, 32, false, 1 << 32, true),
        ("s_lshl_b64 s[4:5], s[0:1], s2", 1 << 63, 1, true, 0, false),
        (
            "s_lshr_b64 s[4:5], s[0:1], s2",
            1 << 63,
            127,
            false,
            1,
            true,
        ),
        (
            "s_lshr_b64 s[4:5], s[0:1], s2",
            1 << 40,
            8,
            false,
            1 << 32,
            true,
        ),
        (
            "s_ashr_i64 s[4:5], s[0:1], s2",
            1 << 63,
            4,
            false,
            0xf800_0000_0000_0000,
            true,
        ),
        ("s_ashr_i64 s[4:5], s[0:1], s2", 1 << 62, 63, true, 0, false),
    ]);
}

#[test]
fn bit_fields_b64() {
    sop2_64(&[
        // s_bfm_b64 takes two 32-bit sources: s0 = 40 bits wide, s1 = 8 up.
        (
            "s_bfm_b64 s[4:5], s0, s1",
            8 << 32 | 40,
            0,
            true,
            0x0000_ffff_ffff_ff00,
            true,
        ),
        (
            "s_bfe_u64 s[4:5], s[0:1], s2",
            0x1234_5678_9abc_def0,
            16 << 16 | 28,
            false,
            0x6789,
            true,
        ),
        (
            "s_bfe_u64 s[4:5], s[0:1], s2",
            0x1234_5678_9abc_def0,
            40 << 16 | 72,
            false,
            0x78_9abc_def0 >> 8 | 0x56 << 32,
            true,
        ),
        ("s_bfe_u64 s[4:5], s[0:1], s2", u64::MAX, 8, true, 0, false),
        (
            "s_bfe_i64 s[4:5], s[0:1], s2",
            0x8000_0000,
            32 << 16,
            false,
            0xffff_ffff_8000_0000,
            true,
        ),
        (
            "s_bfe_i64 s[4:5], s[0:1], s2",
            1 << 63,
            64 << 16 | 60,
            false,
            0xffff_ffff_ffff_fff8,
            true,
        ),
    ]);
}

#[test]
fn sopk_immediates_sign_extend_except_unsigned_compares() {
    for (asm, s0, scc_in, want, scc_out) in [
        ("s_movk_i32 s4, 0x8000", 0, true, 0xffff_8000, true),
        ("s_cmovk_i32 s4, 5", 0, true, 5, true),
        ("s_cmovk_i32 s4, 5", 0, false, SENTINEL, false),
        (
            "s_addk_i32 s0, 1\ns_mov_b32 s4, s0",
            0x7fff_ffff,
            false,
            0x8000_0000,
            true,
        ),
        (
            "s_addk_i32 s0, 1\ns_mov_b32 s4, s0",
            0xffff_ffff,
            true,
            0,
            false,
        ),
        (
            "s_addk_i32 s0, 0xffff\ns_mov_b32 s4, s0",
            0,
            true,
            0xffff_ffff,
            false,
        ),
        (
            "s_mulk_i32 s0, -2\ns_mov_b32 s4, s0",
            3,
            true,
            0xffff_fffa,
            true,
        ),
        (
            "s_mulk_i32 s0, 0x4000\ns_mov_b32 s4, s0",
            0x4_0000,
            false,
            0,
            false,
        ),
    ] {
        if !case(asm, &[s0], scc_in, &[(4, want)], scc_out) {
            return;
        }
    }
    for (asm, s0, scc) in [
        ("s_cmpk_eq_i32 s0, -1", 0xffff_ffff, true),
        ("s_cmpk_eq_i32 s0, 5", 4, false),
        ("s_cmpk_lg_i32 s0, 5", 5, false),
        ("s_cmpk_lg_i32 s0, 5", 4, true),
        ("s_cmpk_gt_i32 s0, -5", 0, true),
        ("s_cmpk_gt_i32 s0, 0", 0x8000_0000, false),
        ("s_cmpk_ge_i32 s0, 0x7fff", 0x7fff, true),
        ("s_cmpk_ge_i32 s0, -1", 0xffff_fffe, false),
        ("s_cmpk_lt_i32 s0, 0", 0x8000_0000, true),
        ("s_cmpk_lt_i32 s0, -2", 0xffff_ffff, false),
        ("s_cmpk_le_i32 s0, -1", 0, false),
        ("s_cmpk_le_i32 s0, -1", 0xffff_ffff, true),
        // The unsigned compares zero-extend SIMM16: 0xffff is 65535, not -1.
        ("s_cmpk_eq_u32 s0, 0xffff", 0xffff_ffff, false),
        ("s_cmpk_eq_u32 s0, 0xffff", 0xffff, true),
        ("s_cmpk_lg_u32 s0, 1", 0, true),
        ("s_cmpk_lg_u32 s0, 0xffff", 0xffff, false),
        ("s_cmpk_gt_u32 s0, 0x8000", 0xffff_8000, true),
        ("s_cmpk_gt_u32 s0, 0xffff", 0xffff, false),
        ("s_cmpk_ge_u32 s0, 0xfffe", 0xffff, true),
        ("s_cmpk_ge_u32 s0, 0xffff", 0xfffe, false),
        ("s_cmpk_lt_u32 s0, 0xffff", 0x1_0000, false),
        ("s_cmpk_lt_u32 s0, 0xffff", 0, true),
        ("s_cmpk_le_u32 s0, 0", 0, true),
        ("s_cmpk_le_u32 s0, 0x8000", 0xffff_ffff, false),
    ] {
        // SCC starts opposite to the expected outcome, so a compare that does not write it
        // fails.
        if !case(asm, &[s0], !scc, &[], scc) {
            return;
        }
    }
}

#[test]
fn sop1_moves_and_bit_operations() {
    // (asm, s0, s1, scc in, s4 result, scc out)
    let cases: &[(&str, u32, u32, bool, u32, bool)] = &[
        ("s_mov_b32 s4, s0", 0x1234, 0, true, 0x1234, true),
        ("s_mov_b32 s4, 1.0", 0, 0, false, 0x3f80_0000, false),
        ("s_mov_b32 s4, src_scc", 0, 0, true, 1, true),
        ("s_cmov_b32 s4, s0", 7, 0, true, 7, true),
        ("s_cmov_b32 s4, s0", 7, 0, false, SENTINEL, false),
        ("s_not_b32 s4, s0", 0xffff_ffff, 0, true, 0, false),
        ("s_not_b32 s4, s0", 0xffff_0000, 0, false, 0xffff, true),
        ("s_wqm_b32 s4, s0", 0x0010_8001, 0, false, 0x00f0_f00f, true),
        ("s_wqm_b32 s4, s0", 0, 0, true, 0, false),
        ("s_brev_b32 s4, s0", 1, 0, false, 0x8000_0000, false),
        ("s_brev_b32 s4, s0", 0x0000_00f0, 0, true, 0x0f00_0000, true),
        ("s_bcnt0_i32_b32 s4, s0", 0xffff_ffff, 0, true, 0, false),
        ("s_bcnt0_i32_b32 s4, s0", 0xffff_fff0, 0, false, 4, true),
        ("s_bcnt1_i32_b32 s4, s0", 0x0f0f, 0, false, 8, true),
        ("s_bcnt1_i32_b32 s4, s0", 0, 0, true, 0, false),
        ("s_ff0_i32_b32 s4, s0", 0x0000_ffff, 0, false, 16, false),
        (
            "s_ff0_i32_b32 s4, s0",
            0xffff_ffff,
            0,
            true,
            0xffff_ffff,
            true,
        ),
        ("s_ff1_i32_b32 s4, s0", 0x0001_0000, 0, true, 16, true),
        ("s_ff1_i32_b32 s4, s0", 0, 0, false, 0xffff_ffff, false),
        ("s_flbit_i32_b32 s4, s0", 0x0001_0000, 0, false, 15, false),
        ("s_flbit_i32_b32 s4, s0", 0, 0, true, 0xffff_ffff, true),
        ("s_flbit_i32 s4, s0", 0x4000_0000, 0, false, 1, false),
        ("s_flbit_i32 s4, s0", 0xc000_0000, 0, false, 2, false),
        ("s_flbit_i32 s4, s0", 1, 0, false, 31, false),
        (
            "s_flbit_i32 s4, s0",
            0xffff_ffff,
            0,
            false,
            0xffff_ffff,
            false,
        ),
        ("s_flbit_i32 s4, s0", 0, 0, true, 0xffff_ffff, true),
        (
            "s_sext_i32_i8 s4, s0",
            0x1234_5680,
            0,
            true,
            0xffff_ff80,
            true,
        ),
        ("s_sext_i32_i8 s4, s0", 0x1234_567f, 0, false, 0x7f, false),
        (
            "s_sext_i32_i16 s4, s0",
            0x0001_8000,
            0,
            false,
            0xffff_8000,
            false,
        ),
        // The destination is read: one bit changes (S0[4:0] picks it).
        (
            "s_mov_b32 s4, -1\ns_bitset0_b32 s4, s0",
            33,
            0,
            true,
            0xffff_fffd,
            true,
        ),
        (
            "s_mov_b32 s4, 0\ns_bitset1_b32 s4, s0",
            31,
            0,
            false,
            0x8000_0000,
            false,
        ),
        ("s_abs_i32 s4, s0", 0xffff_fffb, 0, false, 5, true),
        ("s_abs_i32 s4, s0", 0x8000_0000, 0, false, 0x8000_0000, true),
        ("s_abs_i32 s4, s0", 0, 0, true, 0, false),
        ("s_quadmask_b32 s4, s0", 0x0010_8001, 0, false, 0x29, true),
        ("s_quadmask_b32 s4, s0", 0, 0, true, 0, false),
    ];
    for &(asm, a, b, scc_in, d, scc_out) in cases {
        if !case(asm, &[a, b], scc_in, &[(4, d)], scc_out) {
            return;
        }
    }
}

#[test]
fn sop1_b64_operations() {
    const HI: u64 = 0xffff_ffff_0000_0000;
    // (asm, s[0:1], scc in, s[4:5] result, scc out); s[4:5] results of the _i32_b64 forms
    // are 32-bit (s5 keeps the sentinel).
    let wide: &[(&str, u64, bool, u64, bool)] = &[
        ("s_mov_b64 s[4:5], s[0:1]", HI | 3, false, HI | 3, false),
        (
            "s_mov_b64 s[4:5], 1.0",
            0,
            true,
            0x3ff0_0000_0000_0000,
            true,
        ),
        ("s_mov_b64 s[4:5], -2", 0, false, u64::MAX - 1, false),
        ("s_cmov_b64 s[4:5], s[0:1]", HI, true, HI, true),
        ("s_not_b64 s[4:5], s[0:1]", HI, false, !HI, true),
        ("s_not_b64 s[4:5], s[0:1]", u64::MAX, true, 0, false),
        (
            "s_wqm_b64 s[4:5], s[0:1]",
            1 << 60 | 2,
            false,
            0xf << 60 | 0xf,
            true,
        ),
        ("s_brev_b64 s[4:5], s[0:1]", 1, false, 1 << 63, false),
        (
            "s_bitreplicate_b64_b32 s[4:5], s0",
            0x8000_0001,
            true,
            0xc000_0000_0000_0003,
            true,
        ),
        (
            "s_quadmask_b64 s[4:5], s[0:1]",
            1 << 63,
            false,
            0x8000,
            true,
        ),
        ("s_quadmask_b64 s[4:5], s[0:1]", 0, true, 0, false),
        (
            "s_mov_b64 s[4:5], -1\ns_bitset0_b64 s[4:5], s0",
            63,
            false,
            !(1 << 63),
            false,
        ),
        (
            "s_mov_b64 s[4:5], 0\ns_bitset1_b64 s[4:5], s0",
            64 + 32,
            true,
            1 << 32,
            true,
        ),
    ];
    for &(asm, a, scc_in, d, scc_out) in wide {
        let [a0, a1] = pair(a);
        let [d0, d1] = pair(d);
        if !case(asm, &[a0, a1], scc_in, &[(4, d0), (5, d1)], scc_out) {
            return;
        }
    }
    case(
        "s_cmov_b64 s[4:5], s[0:1]",
        &[1, 2],
        false,
        &[(4, SENTINEL), (5, SENTINEL)],
        false,
    );
    let narrow: &[(&str, u64, bool, u32, bool)] = &[
        (
            "s_bcnt0_i32_b64 s4, s[0:1]",
            0xffff_ffff_0000_ffff,
            false,
            16,
            true,
        ),
        ("s_bcnt0_i32_b64 s4, s[0:1]", u64::MAX, true, 0, false),
        (
            "s_bcnt1_i32_b64 s4, s[0:1]",
            0xffff_ffff_0000_0001,
            false,
            33,
            true,
        ),
        ("s_ff0_i32_b64 s4, s[0:1]", 0xffff_ffff, true, 32, true),
        ("s_ff0_i32_b64 s4, s[0:1]", u64::MAX, false, u32::MAX, false),
        ("s_ff1_i32_b64 s4, s[0:1]", 1 << 32, false, 32, false),
        ("s_ff1_i32_b64 s4, s[0:1]", 0, true, u32::MAX, true),
        ("s_flbit_i32_b64 s4, s[0:1]", 1, false, 63, false),
        ("s_flbit_i32_b64 s4, s[0:1]", 1 << 63, true, 0, true),
        ("s_flbit_i32_b64 s4, s[0:1]", 0, false, u32::MAX, false),
        (
            "s_flbit_i32_i64 s4, s[0:1]",
            0xffff_ffff_7fff_ffff,
            false,
            32,
            false,
        ),
        ("s_flbit_i32_i64 s4, s[0:1]", 1, true, 63, true),
        (
            "s_flbit_i32_i64 s4, s[0:1]",
            u64::MAX,
            false,
            u32::MAX,
            false,
        ),
    ];
    for &(asm, a, scc_in, d, scc_out) in narrow {
        let [a0, a1] = pair(a);
        if !case(asm, &[a0, a1], scc_in, &[(4, d), (5, SENTINEL)], scc_out) {
            return;
        }
    }
}

#[test]
fn an_odd_sgpr_pair_names_the_even_pair_below() {
    // s_mov_b64 with SDST = 5 and SSRC0 = 3 (LLVM's assembler refuses odd pairs; the
    // hardware ignores bit 0 of a 64-bit SGPR operand): s[4:5] = s[2:3].
    let word = 0xbe80_0000u32 | 5 << 16 | 1 << 8 | 3;
    case(
        &format!(".long {word:#x}"),
        &[0, 0, 0x1111, 0x2222],
        false,
        &[(4, 0x1111), (5, 0x2222)],
        false,
    );
}

#[test]
fn saveexec_family_saves_exec_and_sets_scc() {
    const E: u64 = 0xffff_0000_0000_ff00;
    const S: u64 = 0x0f0f_0f0f_0f0f_0f0f;
    for (op, new_exec, saved) in [
        ("s_and_saveexec_b64", 0x0f0f_0000_0000_0f00, E),
        ("s_or_saveexec_b64", 0xffff_0f0f_0f0f_ff0f, E),
        ("s_xor_saveexec_b64", 0xf0f0_0f0f_0f0f_f00f, E),
        ("s_andn2_saveexec_b64", 0x0000_0f0f_0f0f_000f, E),
        ("s_orn2_saveexec_b64", 0x0f0f_ffff_ffff_0fff, E),
        ("s_nand_saveexec_b64", 0xf0f0_ffff_ffff_f0ff, E),
        ("s_nor_saveexec_b64", 0x0000_f0f0_f0f0_00f0, E),
        ("s_xnor_saveexec_b64", 0x0f0f_f0f0_f0f0_0ff0, E),
        ("s_andn1_saveexec_b64", 0xf0f0_0000_0000_f000, E),
        ("s_orn1_saveexec_b64", 0xffff_f0f0_f0f0_fff0, E),
        // The wrexec forms write the new EXEC to D.
        (
            "s_andn1_wrexec_b64",
            0xf0f0_0000_0000_f000,
            0xf0f0_0000_0000_f000,
        ),
        (
            "s_andn2_wrexec_b64",
            0x0000_0f0f_0f0f_000f,
            0x0000_0f0f_0f0f_000f,
        ),
    ] {
        let Some(r) = run_ok(&format!("{op} s[4:5], s[0:1]\ns_endpgm"), |w, _| {
            w.sgpr[..2].copy_from_slice(&pair(S));
            w.exec = E;
        }) else {
            return;
        };
        assert_eq!(r.wave.exec, new_exec, "{op}: EXEC");
        assert_eq!(r.wave.sgpr[4..6], pair(saved), "{op}: D");
        assert!(r.wave.scc, "{op}: SCC = EXEC != 0");
    }
    // No lane left: EXEC = 0, SCC = 0, D = the old EXEC; then s_cbranch_execz skips.
    let Some(r) = run_ok(
        "s_and_saveexec_b64 s[4:5], s[0:1]\n\
         s_cbranch_execz skip\n\
         s_mov_b32 s6, 1\n\
         skip:\n\
         s_mov_b64 exec, s[4:5]\n\
         s_endpgm",
        |w, _| {
            w.sgpr[6] = 0;
            w.exec = E;
            w.scc = true;
        },
    ) else {
        return;
    };
    assert!(!r.wave.scc);
    assert_eq!(r.wave.sgpr[6], 0, "s_cbranch_execz was taken");
    assert_eq!(r.wave.exec, E, "EXEC restored from the saved copy");
}

#[test]
fn sopc_compares_signed_unsigned_64_bit_and_bits() {
    for (asm, a, b, scc) in [
        ("s_cmp_eq_i32 s0, s1", 3, 4, false),
        ("s_cmp_lg_i32 s0, s1", 3, 4, true),
        ("s_cmp_gt_i32 s0, s1", 0xffff_ffff, 1, false),
        ("s_cmp_ge_i32 s0, s1", 5, 5, true),
        ("s_cmp_lt_i32 s0, s1", 0xffff_ffff, 1, true),
        ("s_cmp_le_i32 s0, s1", 0x8000_0000, 0, true),
        ("s_cmp_eq_u32 s0, s1", 3, 3, true),
        ("s_cmp_lg_u32 s0, s1", 3, 3, false),
        ("s_cmp_gt_u32 s0, s1", 0xffff_ffff, 1, true),
        ("s_cmp_ge_u32 s0, s1", 0, 0xffff_ffff, false),
        ("s_cmp_lt_u32 s0, s1", 0xffff_ffff, 1, false),
        ("s_cmp_le_u32 s0, s1", 0x8000_0000, 0, false),
        ("s_cmp_eq_u32 s0, 0x12345678", 0x1234_5678, 0, true),
        // Bit S1[4:0] of S0.
        ("s_bitcmp0_b32 s0, s1", 0xffff_fffd, 33, true),
        ("s_bitcmp1_b32 s0, s1", 0xffff_fffd, 33, false),
        ("s_bitcmp1_b32 s0, s1", 0x8000_0000, 31, true),
        ("s_bitcmp0_b32 s0, s1", 0x8000_0000, 31, false),
    ] {
        if !case(asm, &[a, b], !scc, &[], scc) {
            return;
        }
    }
    for (asm, a, b, scc) in [
        // Equal low halves, different high halves.
        ("s_cmp_eq_u64 s[0:1], s[2:3]", 1, 1 << 32 | 1, false),
        ("s_cmp_lg_u64 s[0:1], s[2:3]", 1, 1 << 32 | 1, true),
        ("s_cmp_eq_u64 s[0:1], s[2:3]", HI, HI, true),
        // Bit S1[5:0] of the 64-bit S0.
        ("s_bitcmp0_b64 s[0:1], s2", 1 << 63, 127, false),
        ("s_bitcmp1_b64 s[0:1], s2", 1 << 63, 63, true),
        ("s_bitcmp1_b64 s[0:1], s2", 1 << 31, 63, false),
        ("s_bitcmp0_b64 s[0:1], s2", 1 << 31, 32, true),
    ] {
        let [a0, a1] = pair(a);
        let [b0, b1] = pair(b);
        if !case(asm, &[a0, a1, b0, b1], !scc, &[], scc) {
            return;
        }
    }
}

const HI: u64 = 0xffff_ffff_0000_0000;

#[test]
fn a_loop_counts_with_s_cmp_and_s_cbranch() {
    // Sum 1..=10 into s1, and add 0xffffffff five times to the 64-bit s[2:3] with
    // s_add_u32/s_addc_u32 (the carry chain), counting s0 down to zero.
    let Some(w) = exec(
        "s_mov_b32 s0, 10\n\
         s_mov_b32 s1, 0\n\
         s_mov_b64 s[2:3], 0\n\
         s_mov_b32 s4, 0\n\
         loop:\n\
         s_add_u32 s1, s1, s0\n\
         s_cmp_le_u32 s0, 5\n\
         s_cbranch_scc1 skip\n\
         s_add_u32 s2, s2, -1\n\
         s_addc_u32 s3, s3, 0\n\
         skip:\n\
         s_add_u32 s4, s4, 1\n\
         s_sub_u32 s0, s0, 1\n\
         s_cmp_lg_u32 s0, 0\n\
         s_cbranch_scc1 loop",
        &[],
        false,
    ) else {
        return;
    };
    assert_eq!(w.sgpr[1], 55);
    assert_eq!(
        u64::from(w.sgpr[2]) | u64::from(w.sgpr[3]) << 32,
        5 * 0xffff_ffff
    );
    assert_eq!(w.sgpr[4], 10, "iterations");
    assert!(!w.scc);
}

#[test]
fn call_and_return_with_swappc_setpc_and_s_call() {
    // s_getpc + a PC-relative offset computes the function's address; s_swappc calls it
    // (saving the return address), s_setpc returns; then s_call_b64 calls it again.
    let Some(w) = exec(
        "s_getpc_b64 s[0:1]\n\
         after:\n\
         s_add_u32 s0, s0, func-after\n\
         s_addc_u32 s1, s1, 0\n\
         s_mov_b64 s[8:9], s[0:1]\n\
         s_swappc_b64 s[30:31], s[0:1]\n\
         ret1:\n\
         s_mov_b64 s[10:11], s[30:31]\n\
         s_call_b64 s[30:31], func\n\
         ret2:\n\
         s_add_u32 s5, s5, 100\n\
         s_endpgm\n\
         func:\n\
         s_add_u32 s4, s4, 1\n\
         s_setpc_b64 s[30:31]",
        &[0, 0, 0, 0, 0, 0],
        false,
    ) else {
        return;
    };
    // s_getpc_b64 at CODE gives CODE + 4 (the next instruction), `after`.
    let after = CODE + 4;
    // After: s_add_u32 with a literal (8), s_addc (4), s_mov_b64 (4), s_swappc (4).
    let ret1 = after + 8 + 4 + 4 + 4;
    let func = u64::from(w.sgpr[8]) | u64::from(w.sgpr[9]) << 32;
    // ret1: s_mov_b64 (4), s_call (4), s_add with a literal (8), s_endpgm (4).
    assert_eq!(func, ret1 + 4 + 4 + 8 + 4, "func's address");
    assert_eq!(w.sgpr[10..12], pair(ret1), "s_swappc saved PC + 4");
    assert_eq!(w.sgpr[30..32], pair(ret1 + 8), "s_call_b64 saved PC + 4");
    assert_eq!(w.sgpr[4], 2, "the function ran twice");
    assert_eq!(w.sgpr[5], 100, "each return came back to its caller");
}

#[test]
fn s_rfe_b64_jumps_and_leaves_privileged_mode() {
    let Some(r) = run_ok(
        "s_getpc_b64 s[0:1]\n\
         after:\n\
         s_add_u32 s0, s0, target-after\n\
         s_addc_u32 s1, s1, 0\n\
         s_rfe_b64 s[0:1]\n\
         s_mov_b32 s4, 1\n\
         target:\n\
         s_endpgm",
        |w, _| {
            w.sgpr[4] = 0;
            w.hwreg[hwreg::STATUS] = 1 << 5;
        },
    ) else {
        return;
    };
    assert_eq!(r.wave.sgpr[4], 0, "skipped to the target");
    assert_eq!(
        r.wave.hwreg[hwreg::STATUS] & 1 << 5,
        0,
        "STATUS.PRIV cleared"
    );
}

#[test]
fn movrels_and_movreld_index_sgprs_by_m0() {
    let Some(r) = run_ok(
        "s_movrels_b32 s4, s10\n\
         s_mov_b32 m0, 2\n\
         s_movrels_b64 s[6:7], s[10:11]\n\
         s_mov_b32 m0, 5\n\
         s_movreld_b32 s20, s0\n\
         s_mov_b32 m0, 6\n\
         s_movreld_b64 s[20:21], s[0:1]\n\
         s_endpgm",
        |w, _| {
            for (i, r) in w.sgpr.iter_mut().enumerate() {
                *r = i as u32 * 0x100;
            }
            w.sgpr[0] = 0xaaaa;
            w.sgpr[1] = 0xbbbb;
            w.m0 = 3;
        },
    ) else {
        return;
    };
    let s = &r.wave.sgpr;
    assert_eq!(s[4], 13 * 0x100, "s4 = s[10 + 3]");
    assert_eq!((s[6], s[7]), (12 * 0x100, 13 * 0x100), "s[6:7] = s[12:13]");
    assert_eq!(s[25], 0xaaaa, "s[20 + 5] = s0");
    assert_eq!((s[26], s[27]), (0xaaaa, 0xbbbb), "s[26:27] = s[0:1]");
    assert_eq!(s[20], 20 * 0x100, "the base is not written");

    // An index past the SGPRs, or an odd one for a pair, stops the wave.
    for (asm, m0) in [
        ("s_movrels_b32 s4, s10", 92),
        ("s_movrels_b64 s[4:5], s[10:11]", 1),
    ] {
        let Some(r) = run(&format!("{asm}\ns_endpgm"), |w, _| w.m0 = m0) else {
            return;
        };
        match r.end {
            Err(ExecError::Illegal { pc, .. }) => assert_eq!(pc, CODE),
            other => panic!("{asm} with M0 {m0}: {other:?}"),
        }
    }
}

#[test]
fn getreg_and_setreg_reach_fields_of_the_hardware_registers() {
    let Some(r) = run_ok(
        "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0xff\n\
         s_setreg_b32 hwreg(HW_REG_MODE, 0, 2), s0\n\
         s_getreg_b32 s4, hwreg(HW_REG_MODE)\n\
         s_getreg_b32 s5, hwreg(HW_REG_STATUS, 0, 1)\n\
         s_getreg_b32 s6, hwreg(HW_REG_STATUS, 9, 2)\n\
         s_getreg_b32 s7, hwreg(HW_REG_HW_ID, 8, 4)\n\
         s_getreg_b32 s8, hwreg(HW_REG_SH_MEM_BASES)\n\
         s_setreg_b32 hwreg(HW_REG_HW_ID), s0\n\
         s_getreg_b32 s9, hwreg(HW_REG_HW_ID)\n\
         s_setreg_b32 hwreg(HW_REG_TRAPSTS, 4, 8), s1\n\
         s_endpgm",
        |w, _| {
            w.sgpr[0] = 0xffff_fffe;
            w.sgpr[1] = 0x1234_56ab;
            w.hwreg[hwreg::MODE] = 0x300;
            w.hwreg[hwreg::HW_ID] = 0xabcd;
            w.hwreg[hwreg::TRAPSTS] = 0xf000_000f;
            w.apertures.private_base = 0x1000_0000_0000_0000;
            w.apertures.shared_base = 0x2000_0000_0000_0000;
            w.scc = true;
            w.exec = 0;
            w.vcc = 1;
        },
    ) else {
        return;
    };
    let w = &r.wave;
    // Bits 7:4 = 0xf (only the field's 4 bits of 0xff), bits 1:0 = 2 (of s0 = ...fe); the
    // rest kept.
    assert_eq!(w.hwreg[hwreg::MODE], 0x3f2);
    assert_eq!(w.sgpr[4], 0x3f2);
    assert_eq!(w.mode().round_f32(), Round::MinusInf);
    assert_eq!(w.mode().round_f64_f16(), Round::NearestEven);
    assert!(w.mode().denorm_f32().input && w.mode().denorm_f32().output);
    assert!(w.mode().dx10_clamp() && w.mode().ieee());
    assert_eq!(w.sgpr[5], 1, "STATUS.SCC reads the live SCC");
    assert_eq!(w.sgpr[6], 1, "STATUS.EXECZ set, VCCZ clear");
    assert_eq!(w.sgpr[7], 0xb, "HW_ID[11:8]");
    assert_eq!(
        w.sgpr[8], 0x2000_1000,
        "SH_MEM_BASES: shared 31:16, private 15:0"
    );
    assert_eq!(w.sgpr[9], 0xabcd, "HW_ID is read-only");
    assert_eq!(w.hwreg[hwreg::TRAPSTS], 0xf000_0abf, "TRAPSTS[11:4] = 0xab");
}

#[test]
fn gpr_index_mode_lives_in_mode_and_m0() {
    let Some(r) = run_ok(
        "s_set_gpr_idx_on s0, gpr_idx(SRC0,DST)\n\
         s_getreg_b32 s4, hwreg(HW_REG_MODE, 27, 1)\n\
         s_mov_b32 s5, m0\n\
         s_set_gpr_idx_mode gpr_idx(SRC1)\n\
         s_mov_b32 s6, m0\n\
         s_set_gpr_idx_idx s1\n\
         s_endpgm",
        |w, _| {
            w.sgpr[0] = 0x105;
            w.sgpr[1] = 0x1ff;
            w.m0 = 0xffff_0f00;
            w.scc = true;
        },
    ) else {
        return;
    };
    let w = &r.wave;
    assert_eq!(w.sgpr[4], 1, "MODE.GPR_IDX_EN");
    assert_eq!(
        w.sgpr[5], 0xffff_9f05,
        "M0[7:0] = index, M0[15:12] = SRC0|DST"
    );
    assert_eq!(
        w.sgpr[6], 0xffff_2f05,
        "s_set_gpr_idx_mode sets M0[15:12] only"
    );
    assert_eq!(w.m0, 0xffff_2fff, "s_set_gpr_idx_idx sets M0[7:0] only");
    assert_eq!(
        w.gpr_idx(),
        Some(GprIdx {
            index: 0xff,
            mask: GprIdx::SRC1
        })
    );
    assert!(w.scc, "SCC untouched");
    let Some(r) = run_ok(
        "s_set_gpr_idx_on s0, 15\ns_set_gpr_idx_off\ns_endpgm",
        |_, _| {},
    ) else {
        return;
    };
    assert_eq!(r.wave.gpr_idx(), None);
    assert_eq!(r.wave.m0, 0xf000, "s_set_gpr_idx_off leaves M0");
}

#[test]
fn conditional_branches_follow_scc_vcc_exec_and_the_debug_bits() {
    // (branch, wave setup, taken)
    type Setup = fn(&mut Wave);
    let cases: &[(&str, Setup, bool)] = &[
        ("s_cbranch_scc0", |w| w.scc = false, true),
        ("s_cbranch_scc0", |w| w.scc = true, false),
        ("s_cbranch_scc1", |w| w.scc = true, true),
        ("s_cbranch_scc1", |w| w.scc = false, false),
        ("s_cbranch_vccz", |w| w.vcc = 0, true),
        ("s_cbranch_vccz", |w| w.vcc = 1 << 63, false),
        ("s_cbranch_vccnz", |w| w.vcc = 1 << 63, true),
        ("s_cbranch_vccnz", |w| w.vcc = 0, false),
        ("s_cbranch_execz", |w| w.exec = 0, true),
        ("s_cbranch_execz", |w| w.exec = 1 << 40, false),
        ("s_cbranch_execnz", |w| w.exec = 1 << 40, true),
        ("s_cbranch_execnz", |w| w.exec = 0, false),
        ("s_branch", |_| {}, true),
        // STATUS.COND_DBG_SYS (21) / COND_DBG_USER (20): clear unless a debugger sets them.
        ("s_cbranch_cdbgsys", |_| {}, false),
        ("s_cbranch_cdbgsys", |w| w.hwreg[2] = 1 << 21, true),
        ("s_cbranch_cdbguser", |w| w.hwreg[2] = 1 << 21, false),
        ("s_cbranch_cdbguser", |w| w.hwreg[2] = 1 << 20, true),
        ("s_cbranch_cdbgsys_or_user", |w| w.hwreg[2] = 1 << 20, true),
        ("s_cbranch_cdbgsys_or_user", |_| {}, false),
        (
            "s_cbranch_cdbgsys_and_user",
            |w| w.hwreg[2] = 1 << 20,
            false,
        ),
        ("s_cbranch_cdbgsys_and_user", |w| w.hwreg[2] = 3 << 20, true),
    ];
    for &(branch, setup, taken) in cases {
        // Forward over one instruction, and a backward branch to a label before it.
        let asm = format!(
            "s_branch start\n\
             back:\n\
             s_mov_b32 s5, 1\n\
             s_endpgm\n\
             start:\n\
             {branch} over\n\
             s_mov_b32 s4, 1\n\
             over:\n\
             {branch} back\n\
             s_endpgm"
        );
        let Some(r) = run_ok(&asm, |w, _| {
            w.sgpr[4] = 0;
            w.sgpr[5] = 0;
            setup(w);
        }) else {
            return;
        };
        assert_eq!(r.wave.sgpr[4], u32::from(!taken), "{branch} forward");
        assert_eq!(r.wave.sgpr[5], u32::from(taken), "{branch} backward");
    }
}

/// Steps `asm` as one wave until `s_endpgm` or an error; every flow it returned.
fn flows(asm: &str, setup: impl FnOnce(&mut Wave)) -> Option<(Vec<Flow>, Wave)> {
    let code = assemble(asm)?;
    let mem = TestMemory::with_code(&code);
    let mut wave = Wave::new(kfd_gfx9::exec::Target::Gfx90a, CODE);
    setup(&mut wave);
    let (mut lds, mut cache) = (vec![0u8; 1024], CodeCache::new());
    let mut out = Vec::new();
    for _ in 0..1000 {
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        let flow = step(&mut wave, &mut ctx).expect("runs");
        out.push(flow);
        if matches!(flow, Flow::End | Flow::Trap(_)) {
            break;
        }
    }
    Some((out, wave))
}

#[test]
fn program_control_flows() {
    let Some((f, w)) = flows(
        "s_nop 3\n\
         s_waitcnt vmcnt(0) lgkmcnt(0)\n\
         s_setkill 0\n\
         s_wakeup\n\
         s_ttracedata\n\
         s_incperflevel 1\n\
         s_decperflevel 1\n\
         s_sendmsg sendmsg(MSG_INTERRUPT)\n\
         s_setprio 2\n\
         s_sleep 0\n\
         s_sleep 1\n\
         s_barrier\n\
         s_sethalt 1\n\
         s_sethalt 0\n\
         s_sendmsghalt sendmsg(MSG_INTERRUPT)\n\
         s_endpgm_saved",
        |w| w.scc = true,
    ) else {
        return;
    };
    use Flow::*;
    let mut expected = vec![Continue; 10];
    // s_sendmsg sendmsg(MSG_INTERRUPT): the message (id 1) goes to the dispatcher.
    expected[7] = Message(1);
    expected.extend([Yield, Barrier, Yield, Continue, Yield, End]);
    assert_eq!(f, expected);
    assert_eq!(
        w.hwreg[hwreg::STATUS],
        2 << 3 | 1 << 13,
        "USER_PRIO = 2, HALT (set again by s_sendmsghalt)"
    );
    assert!(w.scc);
    assert_eq!(
        w.sgpr,
        [0; kfd_gfx9::exec::SGPRS],
        "no scalar register changed"
    );
    for (asm, want) in [
        ("s_endpgm_ordered_ps_done", vec![End]),
        ("s_setkill 1\ns_nop 0", vec![End]),
        // In a trap handler (STATUS.PRIV) a halt does not stop the wave.
        ("s_sethalt 1\ns_endpgm", vec![Continue, End]),
    ] {
        let Some((f, _)) = flows(asm, |w| w.hwreg[hwreg::STATUS] = 1 << 5) else {
            return;
        };
        assert_eq!(f, want, "{asm}");
    }
}

#[test]
fn s_trap_stops_at_the_trap_with_the_handler_inputs_set() {
    // The trap id is SIMM16[7:0]; TTMP0/TTMP1 = PC[31:0] / PC[47:32] | id << 16, with PC
    // the s_trap itself; STATUS.PRIV set.
    let Some(r) = run("s_nop 0\ns_trap 0x11f\ns_endpgm", |_, _| {}) else {
        return;
    };
    assert_eq!(r.end, Ok(Flow::Trap(0x1f)));
    let at = CODE + 4;
    assert_eq!(r.wave.pc, at, "the PC is the s_trap's");
    assert_eq!(r.wave.ttmp[0], at as u32);
    assert_eq!(r.wave.ttmp[1], (at >> 32) as u32 | 0x1f << 16);
    assert_eq!(r.wave.hwreg[hwreg::STATUS] & 1 << 5, 1 << 5, "STATUS.PRIV");
}

#[test]
fn status_and_ib_sts_take_writes_only_in_the_trap_handler() {
    // Outside the trap handler s_setreg of STATUS and IB_STS is dropped; with STATUS.PRIV
    // it is written (SCC with it).
    let asm = "s_setreg_imm32_b32 hwreg(HW_REG_IB_STS), 0x8000\n\
               s_setreg_imm32_b32 hwreg(HW_REG_STATUS), 0x21\n\
               s_endpgm";
    let Some(user) = run(asm, |_, _| {}) else {
        return;
    };
    assert_eq!(user.wave.hwreg[hwreg::IB_STS], 0);
    assert_eq!(user.wave.hwreg[hwreg::STATUS], 0);
    assert!(!user.wave.scc);
    let Some(trap) = run(asm, |w, _| w.hwreg[hwreg::STATUS] = 1 << 5) else {
        return;
    };
    assert_eq!(trap.wave.hwreg[hwreg::IB_STS], 0x8000);
    assert_eq!(trap.wave.hwreg[hwreg::STATUS] & 1 << 5, 1 << 5);
    assert!(trap.wave.scc, "STATUS.SCC written");
}

#[test]
fn s_icache_inv_makes_rewritten_code_visible() {
    // The first instruction is rewritten after it ran once; the loop comes back to it past
    // s_icache_inv, which must drop the decoded copy.
    let asm = "start:\n\
               s_mov_b32 s0, 1\n\
               s_cmp_eq_u32 s1, 0\n\
               s_cbranch_scc0 done\n\
               s_mov_b32 s1, 1\n\
               s_icache_inv\n\
               s_branch start\n\
               done:\n\
               s_endpgm";
    let (Some(code), Some(patch)) = (assemble(asm), assemble("s_mov_b32 s0, 2")) else {
        return;
    };
    let mem = TestMemory::with_code(&code);
    let mut wave = Wave::new(kfd_gfx9::exec::Target::Gfx90a, CODE);
    let (mut lds, mut cache) = (vec![0u8; 1024], CodeCache::new());
    for i in 0..100 {
        if i == 1 {
            mem.put(CODE, &patch);
        }
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        if step(&mut wave, &mut ctx) == Ok(Flow::End) {
            break;
        }
    }
    assert_eq!(wave.sgpr[0], 2, "the rewritten s_mov_b32 ran");
}

/// Every opcode of the scalar tables executes: none stops the wave as unimplemented (the
/// decoded encodings name s2 as destination and s4/s2 as sources).
#[test]
fn every_scalar_opcode_executes() {
    let mut words = Vec::new();
    for &op in Sop2Op::ALL {
        words.push(vec![
            0x8000_0000 | u32::from(op.raw()) << 23 | 2 << 16 | 4 << 8 | 2,
        ]);
    }
    for &op in SopkOp::ALL {
        let mut w = vec![0xb000_0000 | u32::from(op.raw()) << 23 | 2 << 16 | 0x10];
        if op == SopkOp::SSetregImm32B32 {
            w.push(0);
        }
        words.push(w);
    }
    for &op in Sop1Op::ALL {
        words.push(vec![0xbe80_0000 | 2 << 16 | u32::from(op.raw()) << 8 | 4]);
    }
    for &op in SopcOp::ALL {
        words.push(vec![0xbf00_0000 | u32::from(op.raw()) << 16 | 4 << 8 | 2]);
    }
    for &op in SoppOp::ALL {
        words.push(vec![0xbf80_0000 | u32::from(op.raw()) << 16]);
    }
    let mem = TestMemory::with_code(&[0; 4]);
    let mut executed = 0;
    for w in &words {
        let inst = decode(w).expect("a table opcode decodes");
        assert!(matches!(
            inst.op,
            Opcode::Sop2(_) | Opcode::Sopk(_) | Opcode::Sop1(_) | Opcode::Sopc(_) | Opcode::Sopp(_)
        ));
        let mut wave = Wave::new(kfd_gfx9::exec::Target::Gfx90a, CODE + 4);
        let (mut lds, mut cache) = (vec![0u8; 64], CodeCache::new());
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        let result = execute(&mut wave, &mut ctx, &inst, CODE);
        assert!(result.is_ok(), "{}: {result:?}", inst.op);
        executed += 1;
    }
    let total = Sop2Op::ALL.len()
        + SopkOp::ALL.len()
        + Sop1Op::ALL.len()
        + SopcOp::ALL.len()
        + SoppOp::ALL.len();
    assert_eq!(executed, total);
    assert!(total >= 178, "{total} scalar opcodes");
}

/// The branch stack of `s_cbranch_i_fork`/`s_cbranch_join`: each side of a divergent fork
/// runs once with its lanes, the smaller side first, and the stack unwinds at the join.
#[test]
fn fork_and_join_run_each_side_with_its_lanes() {
    const PROGRAM: &str = "s_getreg_b32 s40, hwreg(HW_REG_MODE, 29, 3)\n\
         s_cbranch_i_fork vcc, taken\n\
         s_or_b64 s[42:43], s[42:43], exec\n\
         s_add_u32 s44, s44, 1\n\
         s_branch join\n\
         taken:\n\
         s_or_b64 s[46:47], s[46:47], exec\n\
         s_add_u32 s45, s45, 1\n\
         join:\n\
         s_cbranch_join s40\n\
         s_getreg_b32 s41, hwreg(HW_REG_MODE, 29, 3)\n\
         s_endpgm";
    // (vcc, the fall-through side's EXEC, the taken side's EXEC, EXEC after the join)
    for (vcc, fall, taken, after) in [
        // 3 lanes pass, 5 fail: the pass side (smaller or equal) runs first, then the
        // join pops the fail side, which continues past the join.
        (0x07u64, 0xf8u64, 0x07u64, 0xf8u64),
        // 5 pass, 3 fail: the fail side runs first; the join pops the taken side.
        (0x1f, 0xe0, 0x1f, 0x1f),
        // Uniform: a plain branch, nothing pushed, each side not run is not run.
        (0xff, 0, 0xff, 0xff),
        (0x100, 0xff, 0, 0xff),
    ] {
        let Some(r) = run_ok(PROGRAM, |w, _| {
            w.sgpr = [0; kfd_gfx9::exec::SGPRS];
            w.exec = 0xff;
            w.vcc = vcc;
        }) else {
            return;
        };
        let s = &r.wave.sgpr;
        let get = |i: usize| u64::from(s[i]) | u64::from(s[i + 1]) << 32;
        assert_eq!(get(42), fall, "vcc {vcc:#x}: fall-through lanes");
        assert_eq!(get(46), taken, "vcc {vcc:#x}: taken lanes");
        assert_eq!(
            s[44],
            u32::from(fall != 0),
            "vcc {vcc:#x}: fall-through runs"
        );
        assert_eq!(
            s[45],
            u32::from(taken != 0),
            "vcc {vcc:#x}: taken side runs"
        );
        assert_eq!(r.wave.exec, after, "vcc {vcc:#x}: EXEC after the join");
        assert_eq!((s[40], s[41]), (0, 0), "vcc {vcc:#x}: CSP back to 0");
    }
    // s_cbranch_g_fork takes the target as an address; a divergent fork pushes the side that
    // waits at SGPR[CSP * 4] = s[0:3]: its EXEC, then its PC.
    let Some(r) = run_ok(
        "s_getpc_b64 s[10:11]\n\
         after:\n\
         s_add_u32 s10, s10, target-after\n\
         s_addc_u32 s11, s11, 0\n\
         s_cbranch_g_fork s[12:13], s[10:11]\n\
         s_endpgm\n\
         target:\n\
         s_endpgm",
        |w, _| {
            w.exec = 0xff;
            w.sgpr[12] = 0x0f;
            w.sgpr[13] = 0;
        },
    ) else {
        return;
    };
    let s = &r.wave.sgpr;
    assert_eq!(r.wave.exec, 0x0f, "the pass side (a tie) runs first");
    assert_eq!(r.wave.pc, CODE + 28, "at the target's s_endpgm, past it");
    assert_eq!((s[0], s[1]), (0xf0, 0), "the waiting side's EXEC");
    assert_eq!(
        u64::from(s[2]) | u64::from(s[3]) << 32,
        CODE + 20,
        "the waiting side's PC: after the fork"
    );
    assert_eq!(r.wave.hwreg[hwreg::MODE] >> 29, 1, "CSP = 1");
}

#[test]
fn s_setvskip_drops_vector_instructions_until_cleared() {
    let Some(r) = run_ok(
        "s_setvskip s0, s1\n\
         v_mov_b32 v0, 7\n\
         s_mov_b32 s4, 1\n\
         s_setvskip 0, 0\n\
         v_mov_b32 v1, 9\n\
         s_endpgm",
        |w, _| {
            w.sgpr[0] = 1 << 3;
            w.sgpr[1] = 35;
        },
    ) else {
        return;
    };
    assert!(
        r.wave.vgpr[0].iter().all(|&v| v == 0),
        "skipped under VSKIP"
    );
    assert_eq!(r.wave.sgpr[4], 1, "scalar instructions still run");
    assert!(
        r.wave.vgpr[1].iter().all(|&v| v == 9),
        "runs once VSKIP is clear"
    );
    assert_eq!(r.wave.hwreg[hwreg::MODE] & 1 << 28, 0);
}

#[test]
fn vskip_drops_a_vector_instruction_the_code_cache_has_planned() {
    // The v_add runs three times from the same cached slot: planned at its first run
    // (`exec::steps`), skipped on the second under VSKIP, run again on the third. One lane
    // on (the lane-by-lane path) and every lane (the array path).
    for exec in [1, u64::MAX] {
        let Some(r) = run_ok(
            "s_mov_b32 s6, 0\n\
             LOOP:\n\
             v_add_u32 v0, 1, v0\n\
             s_add_u32 s6, s6, 1\n\
             s_cmp_eq_u32 s6, 1\n\
             s_cbranch_scc0 NOT1\n\
             s_setvskip s0, s1\n\
             NOT1:\n\
             s_cmp_eq_u32 s6, 2\n\
             s_cbranch_scc0 NOT2\n\
             s_setvskip 0, 0\n\
             NOT2:\n\
             s_cmp_lt_u32 s6, 3\n\
             s_cbranch_scc1 LOOP\n\
             s_endpgm",
            |w, _| {
                w.exec = exec;
                w.sgpr[0] = 1 << 3;
                w.sgpr[1] = 35;
            },
        ) else {
            return;
        };
        assert_eq!(r.wave.sgpr[6], 3, "three iterations");
        for (lane, &v) in r.wave.vgpr[0].iter().enumerate() {
            let want = if exec >> lane & 1 == 1 { 2 } else { 0 };
            assert_eq!(v, want, "exec {exec:#x}, lane {lane}: run twice of three");
        }
    }
}

#[test]
fn a_literal_widens_by_the_operand_signedness() {
    // A 32-bit literal in a 64-bit operand: zero-extended for bitwise and unsigned operands,
    // sign-extended for the signed S0 of s_ashr_i64 / s_bfe_i64 / s_flbit_i32_i64.
    // (asm, s4, s5, SCC); s0 = 64 << 16 (a bit field of 64 bits at 0).
    let cases: &[(&str, u32, u32, bool)] = &[
        ("s_mov_b64 s[4:5], 0x80000000", 0x8000_0000, 0, false),
        ("s_or_b64 s[4:5], 0xffffff38, 0", 0xffff_ff38, 0, true),
        ("s_lshr_b64 s[4:5], 0x80000000, 4", 0x0800_0000, 0, true),
        (
            "s_ashr_i64 s[4:5], 0x80000000, 4",
            0xf800_0000,
            0xffff_ffff,
            true,
        ),
        (
            "s_bfe_i64 s[4:5], 0x80000000, s0",
            0x8000_0000,
            0xffff_ffff,
            true,
        ),
        ("s_bfe_u64 s[4:5], 0x80000000, s0", 0x8000_0000, 0, true),
        (
            "s_flbit_i32_i64 s4, 0xffffff00\ns_mov_b32 s5, 0",
            56,
            0,
            false,
        ),
    ];
    for &(asm, lo, hi, scc) in cases {
        if !case(asm, &[64 << 16], false, &[(4, lo), (5, hi)], scc) {
            return;
        }
    }
}

/// The scalar unit is the same on every gfx9 target: a loop, a call and return, the
/// saveexec family and a bit-field op assembled for gfx906, gfx908, gfx90a and gfx942 give
/// the same registers.
#[test]
fn the_scalar_unit_runs_alike_on_every_gfx9_target() {
    const PROGRAM: &str = "s_mov_b32 s0, 10\n\
         s_mov_b32 s1, 0\n\
         loop:\n\
         s_lshl2_add_u32 s1, s0, s1\n\
         s_sub_u32 s0, s0, 1\n\
         s_cmp_lg_u32 s0, 0\n\
         s_cbranch_scc1 loop\n\
         s_getpc_b64 s[2:3]\n\
         after:\n\
         s_add_u32 s2, s2, func-after\n\
         s_addc_u32 s3, s3, 0\n\
         s_swappc_b64 s[30:31], s[2:3]\n\
         s_andn2_saveexec_b64 s[6:7], s[8:9]\n\
         s_bfe_i32 s10, s1, 0x40004\n\
         s_endpgm\n\
         func:\n\
         s_mul_i32 s1, s1, 3\n\
         s_setpc_b64 s[30:31]";
    use kfd_gfx9::exec::Target;
    for (target, mcpu) in [
        (Target::Gfx906, "gfx906"),
        (Target::Gfx908, "gfx908"),
        (Target::Gfx90a, "gfx90a"),
        (Target::Gfx942, "gfx942"),
    ] {
        let Some(r) = common::run_on(target, mcpu, PROGRAM, |w, _| {
            w.exec = 0xffff_0000;
            w.sgpr[8] = 0xffff_ffff;
            w.sgpr[9] = 0;
        }) else {
            return;
        };
        assert_eq!(r.end, Ok(Flow::End), "{mcpu}");
        let s = &r.wave.sgpr;
        // 4 * (10 + 9 + ... + 1) = 220, times 3 in the function.
        assert_eq!(s[1], 660, "{mcpu}");
        assert_eq!(r.wave.exec, 0xffff, "{mcpu}: s[8:9] & !EXEC");
        assert_eq!((s[6], s[7]), (0xffff_0000, 0), "{mcpu}: the saved EXEC");
        // 660 = 0x294: bits 7:4 = 0x9, sign-extended from 4 bits: -7.
        assert_eq!(s[10], (-7i32) as u32, "{mcpu}");
    }
}
