//! The decoder against LLVM, gfx90a: instructions assembled by `llvm-mc -show-encoding`
//! decode to the expected [`Inst`]; every opcode of every table decodes to the mnemonic
//! LLVM's disassembler gives the same encoding (which checks the tables' numbers); 8 000
//! random encodings agree with LLVM on opcode, length, operands, modifiers and offsets
//! wherever both decode them; and clang-compiled OpenCL and HIP kernels' `.text` decodes
//! whole, on `llvm-objdump`'s instruction boundaries, with the mnemonics, operands, memory
//! offsets and branch distances `llvm-objdump` prints.
//!
//! LLVM 19 (Debian's `llvm-19` and `clang-19`) is a prerequisite: missing, the tests fail
//! under `CI=true` and otherwise skip with the reason (`kfd_skip::prerequisite`).

use kfd_gfx9::{
    Decoder, DsOp, Encoding, FlatOp, Inst, Modifiers, MtbufOp, MubufOp, Opcode, Operand, Segment,
    SmemOp, Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp, Special, Vop1Op, Vop2Op, Vop3Op, Vop3pOp,
    VopcOp, decode,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MCPU: &str = "gfx90a";

/// The first of `names` found in /usr/bin, or a skip (a CI failure) naming them.
fn tool(names: &[&str]) -> Option<PathBuf> {
    let found = names
        .iter()
        .map(|n| Path::new("/usr/bin").join(n))
        .find(|p| p.exists());
    if found.is_none() {
        kfd_skip::prerequisite(format!("{} is missing (Debian llvm-19/clang-19)", names[0]));
    }
    found
}

fn llvm_mc() -> Option<PathBuf> {
    // Not the unversioned llvm-mc: on Debian it may be another LLVM (14 on the machine these
    // tests were written on), whose gfx90a tables and output differ.
    tool(&["llvm-mc-19"])
}

/// Runs llvm-mc on `input` with `args`; returns each `(text, encoding bytes)` line it printed.
fn run_mc(mc: &Path, args: &[&str], input: &str) -> Vec<(String, Vec<u8>)> {
    parse_mc(&mc_output(mc, args, input).0)
}

/// llvm-mc's stdout and stderr for `input`.
fn mc_output(mc: &Path, args: &[&str], input: &str) -> (String, String) {
    let mut child = Command::new(mc)
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={MCPU}"),
            "-show-encoding",
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("llvm-mc starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_string();
    // Written from a thread: llvm-mc's output may fill its pipes before it has read it all.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("llvm-mc runs");
    writer
        .join()
        .expect("writer thread")
        .expect("llvm-mc reads its input");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn parse_mc(stdout: &str) -> Vec<(String, Vec<u8>)> {
    stdout
        .lines()
        .filter_map(|line| {
            let (text, enc) = line.split_once("; encoding: [")?;
            let bytes = enc
                .trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).expect("hex"))
                .collect();
            Some((text.trim().to_string(), bytes))
        })
        .collect()
}

fn dwords(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// LLVM's mnemonic without the form suffix (`_e32`, `_e64`, `_dpp`, `_sdwa`), as `Opcode`'s
/// Display prints it.
fn base_mnemonic(text: &str) -> &str {
    let m = text.split_whitespace().next().unwrap_or("");
    ["_e32", "_e64", "_dpp", "_sdwa"]
        .iter()
        .find_map(|s| m.strip_suffix(s))
        .unwrap_or(m)
}

fn inst(op: Opcode, encoding: Encoding, dst: [Operand; 2], src: [Operand; 3]) -> Inst {
    Inst {
        op,
        encoding,
        dst,
        src,
        imm: 0,
        mods: Modifiers::default(),
        dwords: if matches!(
            encoding,
            Encoding::Sop2
                | Encoding::Sopk
                | Encoding::Sop1
                | Encoding::Sopc
                | Encoding::Sopp
                | Encoding::Vop1
                | Encoding::Vop2
                | Encoding::Vopc
        ) {
            1
        } else {
            2
        },
    }
}

#[test]
fn assembled_instructions_decode_to_the_expected_inst() {
    use Operand::{Int, Literal, None as No, Sgpr as S, Vgpr as V};
    let Some(mc) = llvm_mc() else { return };
    let vcc = Operand::Special(Special::VccLo);
    let exec = Operand::Special(Special::ExecLo);
    let with = |mut i: Inst, f: &dyn Fn(&mut Inst)| {
        f(&mut i);
        i
    };
    let cases: Vec<(&str, Inst)> = vec![
        (
            "s_add_u32 s0, s1, 0x1234",
            with(
                inst(
                    Opcode::Sop2(Sop2Op::SAddU32),
                    Encoding::Sop2,
                    [S(0), No],
                    [S(1), Literal(0x1234), No],
                ),
                &|i| i.dwords = 2,
            ),
        ),
        (
            "s_mul_i32 s3, -16, 64",
            inst(
                Opcode::Sop2(Sop2Op::SMulI32),
                Encoding::Sop2,
                [S(3), No],
                [Int(-16), Int(64), No],
            ),
        ),
        (
            "s_lshl_b64 s[6:7], 1, s3",
            inst(
                Opcode::Sop2(Sop2Op::SLshlB64),
                Encoding::Sop2,
                [S(6), No],
                [Int(1), S(3), No],
            ),
        ),
        (
            "s_and_saveexec_b64 s[2:3], vcc",
            inst(
                Opcode::Sop1(Sop1Op::SAndSaveexecB64),
                Encoding::Sop1,
                [S(2), No],
                [vcc, No, No],
            ),
        ),
        (
            "s_mov_b64 exec, s[4:5]",
            inst(
                Opcode::Sop1(Sop1Op::SMovB64),
                Encoding::Sop1,
                [exec, No],
                [S(4), No, No],
            ),
        ),
        (
            "s_mov_b32 m0, -1",
            inst(
                Opcode::Sop1(Sop1Op::SMovB32),
                Encoding::Sop1,
                [Operand::Special(Special::M0), No],
                [Int(-1), No, No],
            ),
        ),
        (
            "s_movk_i32 s5, 0xfff0",
            with(
                inst(
                    Opcode::Sopk(SopkOp::SMovkI32),
                    Encoding::Sopk,
                    [S(5), No],
                    [No; 3],
                ),
                &|i| i.imm = -16,
            ),
        ),
        (
            "s_cmpk_lg_u32 s9, 7",
            with(
                inst(
                    Opcode::Sopk(SopkOp::SCmpkLgU32),
                    Encoding::Sopk,
                    [No, No],
                    [S(9), No, No],
                ),
                &|i| i.imm = 7,
            ),
        ),
        (
            "s_cmp_lt_u32 s2, s3",
            inst(
                Opcode::Sopc(SopcOp::SCmpLtU32),
                Encoding::Sopc,
                [No, No],
                [S(2), S(3), No],
            ),
        ),
        (
            "s_cbranch_scc1 -3",
            with(
                inst(
                    Opcode::Sopp(SoppOp::SCbranchScc1),
                    Encoding::Sopp,
                    [No, No],
                    [No; 3],
                ),
                &|i| i.imm = -3,
            ),
        ),
        (
            "s_waitcnt vmcnt(0) lgkmcnt(0)",
            with(
                inst(
                    Opcode::Sopp(SoppOp::SWaitcnt),
                    Encoding::Sopp,
                    [No, No],
                    [No; 3],
                ),
                &|i| i.imm = 0x70,
            ),
        ),
        (
            "s_barrier",
            inst(
                Opcode::Sopp(SoppOp::SBarrier),
                Encoding::Sopp,
                [No, No],
                [No; 3],
            ),
        ),
        (
            "s_endpgm",
            inst(
                Opcode::Sopp(SoppOp::SEndpgm),
                Encoding::Sopp,
                [No, No],
                [No; 3],
            ),
        ),
        // The scalar forms whose fields are not the usual slots: the hwreg field stays in
        // `imm` and the value is the literal; SSRC1 of s_set_gpr_idx_on is the raw mode;
        // the fork/join and index forms write no SGPR.
        (
            "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3",
            with(
                inst(
                    Opcode::Sopk(SopkOp::SSetregImm32B32),
                    Encoding::Sopk,
                    [No, No],
                    [Literal(3), No, No],
                ),
                &|i| {
                    i.imm = 1 | 4 << 6 | 1 << 11;
                    i.dwords = 2;
                },
            ),
        ),
        (
            "s_set_gpr_idx_on s2, gpr_idx(SRC0,DST)",
            with(
                inst(
                    Opcode::Sopc(SopcOp::SSetGprIdxOn),
                    Encoding::Sopc,
                    [No, No],
                    [S(2), No, No],
                ),
                &|i| i.imm = 9,
            ),
        ),
        (
            "s_set_gpr_idx_idx s3",
            inst(
                Opcode::Sop1(Sop1Op::SSetGprIdxIdx),
                Encoding::Sop1,
                [No, No],
                [S(3), No, No],
            ),
        ),
        (
            "s_cbranch_i_fork s[4:5], 3",
            with(
                inst(
                    Opcode::Sopk(SopkOp::SCbranchIFork),
                    Encoding::Sopk,
                    [No, No],
                    [S(4), No, No],
                ),
                &|i| i.imm = 3,
            ),
        ),
        (
            "s_cbranch_g_fork s[0:1], s[2:3]",
            inst(
                Opcode::Sop2(Sop2Op::SCbranchGFork),
                Encoding::Sop2,
                [No, No],
                [S(0), S(2), No],
            ),
        ),
        (
            "s_cbranch_join s6",
            inst(
                Opcode::Sop1(Sop1Op::SCbranchJoin),
                Encoding::Sop1,
                [No, No],
                [S(6), No, No],
            ),
        ),
        (
            "s_load_dwordx2 s[0:1], s[4:5], 0x8",
            with(
                inst(
                    Opcode::Smem(SmemOp::SLoadDwordx2),
                    Encoding::Smem,
                    [S(0), No],
                    [S(4), No, No],
                ),
                &|i| i.imm = 8,
            ),
        ),
        (
            "s_load_dword s1, s[2:3], s4",
            inst(
                Opcode::Smem(SmemOp::SLoadDword),
                Encoding::Smem,
                [S(1), No],
                [S(2), S(4), No],
            ),
        ),
        (
            "s_load_dwordx4 s[8:11], s[2:3], 0x10 glc",
            with(
                inst(
                    Opcode::Smem(SmemOp::SLoadDwordx4),
                    Encoding::Smem,
                    [S(8), No],
                    [S(2), No, No],
                ),
                &|i| {
                    i.imm = 16;
                    i.mods.glc = true;
                },
            ),
        ),
        (
            "v_add_co_u32_e32 v1, vcc, s2, v1",
            inst(
                Opcode::Vop2(Vop2Op::VAddCoU32),
                Encoding::Vop2,
                [V(1), vcc],
                [S(2), V(1), No],
            ),
        ),
        (
            "v_addc_co_u32_e32 v7, vcc, v1, v5, vcc",
            inst(
                Opcode::Vop2(Vop2Op::VAddcCoU32),
                Encoding::Vop2,
                [V(7), vcc],
                [V(1), V(5), vcc],
            ),
        ),
        (
            "v_add_co_u32_e64 v1, s[4:5], v2, v3",
            inst(
                Opcode::Vop2(Vop2Op::VAddCoU32),
                Encoding::Vop3b,
                [V(1), S(4)],
                [V(2), V(3), No],
            ),
        ),
        (
            "v_cndmask_b32_e32 v0, 1.0, v2, vcc",
            inst(
                Opcode::Vop2(Vop2Op::VCndmaskB32),
                Encoding::Vop2,
                [V(0), No],
                [Operand::Float(kfd_gfx9::FloatConst::One), V(2), vcc],
            ),
        ),
        (
            "v_cndmask_b32_e64 v0, 0, -1, s[2:3]",
            inst(
                Opcode::Vop2(Vop2Op::VCndmaskB32),
                Encoding::Vop3a,
                [V(0), No],
                [Int(0), Int(-1), S(2)],
            ),
        ),
        (
            "v_lshlrev_b32_e32 v0, 2, v0",
            inst(
                Opcode::Vop2(Vop2Op::VLshlrevB32),
                Encoding::Vop2,
                [V(0), No],
                [Int(2), V(0), No],
            ),
        ),
        (
            "v_mul_f32_e64 v1, -|v2|, s3 clamp mul:2",
            with(
                inst(
                    Opcode::Vop2(Vop2Op::VMulF32),
                    Encoding::Vop3a,
                    [V(1), No],
                    [V(2), S(3), No],
                ),
                &|i| {
                    i.mods.abs = 1;
                    i.mods.neg = 1;
                    i.mods.clamp = true;
                    i.mods.omod = 1;
                },
            ),
        ),
        (
            "v_madmk_f32 v0, v1, 0x41200000, v2",
            with(
                inst(
                    Opcode::Vop2(Vop2Op::VMadmkF32),
                    Encoding::Vop2,
                    [V(0), No],
                    [V(1), V(2), Literal(0x4120_0000)],
                ),
                &|i| i.dwords = 2,
            ),
        ),
        (
            "v_mov_b32_e32 v3, 0x3f800001",
            with(
                inst(
                    Opcode::Vop1(Vop1Op::VMovB32),
                    Encoding::Vop1,
                    [V(3), No],
                    [Literal(0x3f80_0001), No, No],
                ),
                &|i| i.dwords = 2,
            ),
        ),
        (
            "v_readfirstlane_b32 s4, v7",
            inst(
                Opcode::Vop1(Vop1Op::VReadfirstlaneB32),
                Encoding::Vop1,
                [S(4), No],
                [V(7), No, No],
            ),
        ),
        (
            "v_cvt_f64_f32_e32 v[0:1], v0",
            inst(
                Opcode::Vop1(Vop1Op::VCvtF64F32),
                Encoding::Vop1,
                [V(0), No],
                [V(0), No, No],
            ),
        ),
        (
            "v_cmp_nlt_f32_e32 vcc, 0, v0",
            inst(
                Opcode::Vopc(VopcOp::VCmpNltF32),
                Encoding::Vopc,
                [vcc, No],
                [Int(0), V(0), No],
            ),
        ),
        (
            "v_cmp_gt_i32_e64 s[0:1], v1, 5",
            inst(
                Opcode::Vopc(VopcOp::VCmpGtI32),
                Encoding::Vop3a,
                [S(0), No],
                [V(1), Int(5), No],
            ),
        ),
        (
            "v_mad_u64_u32 v[0:1], s[2:3], v2, v3, v[4:5]",
            inst(
                Opcode::Vop3(Vop3Op::VMadU64U32),
                Encoding::Vop3b,
                [V(0), S(2)],
                [V(2), V(3), V(4)],
            ),
        ),
        (
            "v_fma_f64 v[0:1], v[2:3], s[4:5], 1.0",
            inst(
                Opcode::Vop3(Vop3Op::VFmaF64),
                Encoding::Vop3a,
                [V(0), No],
                [V(2), S(4), Operand::Float(kfd_gfx9::FloatConst::One)],
            ),
        ),
        (
            "v_mul_lo_u32 v1, v2, s3",
            inst(
                Opcode::Vop3(Vop3Op::VMulLoU32),
                Encoding::Vop3a,
                [V(1), No],
                [V(2), S(3), No],
            ),
        ),
        (
            "v_readlane_b32 s8, v2, s3",
            inst(
                Opcode::Vop3(Vop3Op::VReadlaneB32),
                Encoding::Vop3a,
                [S(8), No],
                [V(2), S(3), No],
            ),
        ),
        (
            "v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]",
            with(
                inst(
                    Opcode::Vop3p(Vop3pOp::VPkFmaF32),
                    Encoding::Vop3p,
                    [V(0), No],
                    [V(2), V(4), V(6)],
                ),
                &|i| i.mods.op_sel_hi = 7,
            ),
        ),
        (
            "v_pk_add_f16 v0, v1, v2 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0] neg_hi:[0,1]",
            with(
                inst(
                    Opcode::Vop3p(Vop3pOp::VPkAddF16),
                    Encoding::Vop3p,
                    [V(0), No],
                    [V(1), V(2), No],
                ),
                &|i| {
                    i.mods.op_sel = 1;
                    i.mods.op_sel_hi = 2 | 4;
                    i.mods.neg = 1;
                    i.mods.neg_hi = 2;
                },
            ),
        ),
        (
            "ds_write_b32 v6, v1 offset:8",
            with(
                inst(
                    Opcode::Ds(DsOp::DsWriteB32),
                    Encoding::Ds,
                    [V(0), No],
                    [V(6), V(1), V(0)],
                ),
                &|i| i.imm = 8,
            ),
        ),
        (
            "ds_write_addtid_b32 v3 offset:12",
            with(
                inst(
                    Opcode::Ds(DsOp::DsWriteAddtidB32),
                    Encoding::Ds,
                    [V(0), No],
                    [V(0), V(3), V(0)],
                ),
                &|i| i.imm = 12,
            ),
        ),
        // MTBUF: OFFSET | DFMT << 12 | NFMT << 16 in imm.
        (
            "tbuffer_load_format_xyzw v[4:7], v2, s[8:11], s1 format:[BUF_DATA_FORMAT_32_32_32_32,BUF_NUM_FORMAT_FLOAT] idxen offset:12 glc",
            with(
                inst(
                    Opcode::Mtbuf(MtbufOp::TbufferLoadFormatXyzw),
                    Encoding::Mtbuf,
                    [V(4), No],
                    [V(2), S(8), S(1)],
                ),
                &|i| {
                    i.imm = 12 | 14 << 12 | 7 << 16;
                    i.mods.idxen = true;
                    i.mods.glc = true;
                },
            ),
        ),
        (
            "buffer_load_ubyte v1, s[4:7], 0 offen offset:4 lds",
            with(
                inst(
                    Opcode::Mubuf(MubufOp::BufferLoadUbyte),
                    Encoding::Mubuf,
                    [V(0), No],
                    [V(1), S(4), Operand::Int(0)],
                ),
                &|i| {
                    i.imm = 4;
                    i.mods.offen = true;
                    i.mods.lds = true;
                },
            ),
        ),
        (
            "ds_read2_b32 v[0:1], v2 offset0:1 offset1:2",
            with(
                inst(
                    Opcode::Ds(DsOp::DsRead2B32),
                    Encoding::Ds,
                    [V(0), No],
                    [V(2), V(0), V(0)],
                ),
                &|i| i.imm = 0x201,
            ),
        ),
        (
            "global_load_dword v1, v0, s[0:1] offset:-16",
            with(
                inst(
                    Opcode::Flat(Segment::Global, FlatOp::LoadDword),
                    Encoding::Flat,
                    [V(1), No],
                    [V(0), V(0), S(0)],
                ),
                &|i| i.imm = -16,
            ),
        ),
        (
            "global_store_dwordx4 v[4:5], v[8:11], off glc slc",
            with(
                inst(
                    Opcode::Flat(Segment::Global, FlatOp::StoreDwordx4),
                    Encoding::Flat,
                    [V(0), No],
                    [V(4), V(8), No],
                ),
                &|i| {
                    i.mods.glc = true;
                    i.mods.slc = true;
                },
            ),
        ),
        (
            "global_atomic_add v0, v[2:3], v4, off glc",
            with(
                inst(
                    Opcode::Flat(Segment::Global, FlatOp::AtomicAdd),
                    Encoding::Flat,
                    [V(0), No],
                    [V(2), V(4), No],
                ),
                &|i| i.mods.glc = true,
            ),
        ),
        (
            "flat_load_dwordx2 v[0:1], v[2:3] offset:4095",
            with(
                inst(
                    Opcode::Flat(Segment::Flat, FlatOp::LoadDwordx2),
                    Encoding::Flat,
                    [V(0), No],
                    [V(2), V(0), No],
                ),
                &|i| i.imm = 4095,
            ),
        ),
        (
            "scratch_store_dword off, v1, s2 offset:-4",
            with(
                inst(
                    Opcode::Flat(Segment::Scratch, FlatOp::StoreDword),
                    Encoding::Flat,
                    [V(0), No],
                    [V(0), V(1), S(2)],
                ),
                &|i| i.imm = -4,
            ),
        ),
        (
            "buffer_load_dword v1, v2, s[4:7], s8 offen offset:12",
            with(
                inst(
                    Opcode::Mubuf(MubufOp::BufferLoadDword),
                    Encoding::Mubuf,
                    [V(1), No],
                    [V(2), S(4), S(8)],
                ),
                &|i| {
                    i.imm = 12;
                    i.mods.offen = true;
                },
            ),
        ),
        // DPP: DPP_CTRL | BOUND_CTRL << 9 | BANK_MASK << 10 | ROW_MASK << 14 in imm.
        (
            "v_mov_b32_dpp v0, v1 row_shr:1 bound_ctrl:0",
            with(
                inst(
                    Opcode::Vop1(Vop1Op::VMovB32),
                    Encoding::Dpp,
                    [V(0), No],
                    [V(1), No, No],
                ),
                &|i| i.imm = 0x111 | 1 << 9 | 0xf << 10 | 0xf << 14,
            ),
        ),
        (
            "v_add_f32_dpp v0, -v1, |v2| quad_perm:[1,0,3,2] row_mask:0xa bank_mask:0x5",
            with(
                inst(
                    Opcode::Vop2(Vop2Op::VAddF32),
                    Encoding::Dpp,
                    [V(0), No],
                    [V(1), V(2), No],
                ),
                &|i| {
                    i.imm = 0xb1 | 0x5 << 10 | 0xa << 14;
                    i.mods.neg = 1;
                    i.mods.abs = 2;
                },
            ),
        ),
        // SDWA: DST_SEL | DST_UNUSED << 3 | SRC0_SEL << 5 | SRC0_SEXT << 8 | SRC1_SEL << 9 |
        // SRC1_SEXT << 12 in imm.
        (
            "v_cmp_eq_u32_sdwa s[2:3], v1, v2 src0_sel:BYTE_0 src1_sel:WORD_1",
            with(
                inst(
                    Opcode::Vopc(VopcOp::VCmpEqU32),
                    Encoding::Sdwa,
                    [S(2), No],
                    [V(1), V(2), No],
                ),
                &|i| i.imm = 6 | 5 << 9,
            ),
        ),
        (
            "v_add_co_u32_sdwa v0, vcc, sext(v1), v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1 src1_sel:WORD_0",
            with(
                inst(
                    Opcode::Vop2(Vop2Op::VAddCoU32),
                    Encoding::Sdwa,
                    [V(0), vcc],
                    [V(1), V(2), No],
                ),
                &|i| i.imm = 5 | 2 << 3 | 1 << 5 | 1 << 8 | 4 << 9,
            ),
        ),
        (
            "v_mov_b32_sdwa v0, s1 dst_sel:BYTE_0 dst_unused:UNUSED_SEXT src0_sel:WORD_1",
            with(
                inst(
                    Opcode::Vop1(Vop1Op::VMovB32),
                    Encoding::Sdwa,
                    [V(0), No],
                    [S(1), No, No],
                ),
                &|i| i.imm = 1 << 3 | 5 << 5 | 6 << 9,
            ),
        ),
        (
            "v_accvgpr_read_b32 v0, a1",
            with(
                inst(
                    Opcode::Vop3p(Vop3pOp::VAccvgprReadB32),
                    Encoding::Vop3p,
                    [V(0), No],
                    [V(1), No, No],
                ),
                // LLVM sets the OP_SEL_HI bits of VOP3P-MAI encodings.
                &|i| i.mods.op_sel_hi = 7,
            ),
        ),
    ];
    let source: String = cases.iter().map(|(asm, _)| format!("{asm}\n")).collect();
    let encoded = run_mc(&mc, &[], &source);
    assert_eq!(
        encoded.len(),
        cases.len(),
        "llvm-mc encoded every case: {encoded:?}"
    );
    for ((asm, expected), (_, bytes)) in cases.iter().zip(&encoded) {
        let words = dwords(bytes);
        let got = decode(&words).unwrap_or_else(|e| panic!("{asm}: {e}"));
        assert_eq!(&got, expected, "{asm} ({words:08x?})");
        assert_eq!(usize::from(got.dwords), words.len(), "{asm}: length");
        // One dword short is a truncation error, never a wrong answer.
        assert!(
            decode(&words[..words.len() - 1]).is_err(),
            "{asm}: truncated"
        );
    }
}

/// One encoding per table entry, register fields chosen so that every opcode has a legal
/// (aligned) operand set; the second dword (and a literal for the ops that need one) follow.
fn table_encodings() -> Vec<(Opcode, Vec<u32>)> {
    let mut all = Vec::new();
    for &op in Sop2Op::ALL {
        all.push((
            Opcode::Sop2(op),
            vec![0x8000_0000 | u32::from(op.raw()) << 23 | 4 << 8 | 2],
        ));
    }
    for &op in SopkOp::ALL {
        let mut words = vec![0xb000_0000 | u32::from(op.raw()) << 23 | 2 << 16 | 0x10];
        if op == SopkOp::SSetregImm32B32 {
            words.push(0);
        }
        all.push((Opcode::Sopk(op), words));
    }
    for &op in Sop1Op::ALL {
        all.push((
            Opcode::Sop1(op),
            vec![0xbe80_0000 | 2 << 16 | u32::from(op.raw()) << 8 | 4],
        ));
    }
    for &op in SopcOp::ALL {
        all.push((
            Opcode::Sopc(op),
            vec![0xbf00_0000 | u32::from(op.raw()) << 16 | 4 << 8 | 2],
        ));
    }
    for &op in SoppOp::ALL {
        all.push((
            Opcode::Sopp(op),
            vec![0xbf80_0000 | u32::from(op.raw()) << 16],
        ));
    }
    for &op in SmemOp::ALL {
        all.push((
            Opcode::Smem(op),
            vec![0xc002_0000 | u32::from(op.raw()) << 18 | 4 << 6 | 1, 0x10],
        ));
    }
    for &op in Vop2Op::ALL {
        let mut words = vec![u32::from(op.raw()) << 25 | 2 << 17 | 4 << 9 | (256 + 6)];
        if matches!(
            op,
            Vop2Op::VMadmkF32 | Vop2Op::VMadakF32 | Vop2Op::VMadmkF16 | Vop2Op::VMadakF16
        ) {
            words.push(0x3f80_0000);
        }
        all.push((Opcode::Vop2(op), words));
    }
    for &op in Vop1Op::ALL {
        all.push((
            Opcode::Vop1(op),
            vec![0x7e00_0000 | 2 << 17 | u32::from(op.raw()) << 9 | (256 + 4)],
        ));
    }
    for &op in VopcOp::ALL {
        all.push((
            Opcode::Vopc(op),
            vec![0x7c00_0000 | u32::from(op.raw()) << 17 | 4 << 9 | (256 + 6)],
        ));
    }
    let vop3_srcs = (256 + 4) | (256 + 6) << 9 | (256 + 8) << 18;
    for &op in Vop3Op::ALL {
        all.push((
            Opcode::Vop3(op),
            vec![0xd000_0000 | u32::from(op.raw()) << 16 | 2, vop3_srcs],
        ));
    }
    for &op in Vop3pOp::ALL {
        all.push((
            Opcode::Vop3p(op),
            vec![
                0xd380_4000 | u32::from(op.raw()) << 16 | 2,
                vop3_srcs | 3 << 27,
            ],
        ));
    }
    for &op in DsOp::ALL {
        // The GWS opcodes exist only with the GDS bit ("GDS only").
        let gds = u32::from(op.gws().is_some()) << 16;
        all.push((
            Opcode::Ds(op),
            vec![
                0xd800_0000 | u32::from(op.raw()) << 17 | gds,
                2 | 4 << 8 | 6 << 16 | 8 << 24,
            ],
        ));
    }
    for &op in FlatOp::ALL {
        for (seg, bits) in [
            (Segment::Flat, 0),
            (Segment::Scratch, 1),
            (Segment::Global, 2),
        ] {
            all.push((
                Opcode::Flat(seg, op),
                vec![
                    0xdc00_0000 | u32::from(op.raw()) << 18 | bits << 14,
                    2 | 4 << 8 | 0x7f << 16 | 8 << 24,
                ],
            ));
        }
    }
    for &op in MubufOp::ALL {
        all.push((
            Opcode::Mubuf(op),
            vec![
                0xe000_1000 | u32::from(op.raw()) << 18,
                2 | 4 << 8 | 1 << 16 | 128 << 24,
            ],
        ));
    }
    for &op in MtbufOp::ALL {
        // DFMT 4 (32), NFMT 7 (FLOAT), OFFEN.
        all.push((
            Opcode::Mtbuf(op),
            vec![
                0xe800_1000 | u32::from(op.raw()) << 15 | 4 << 19 | 7 << 23,
                2 | 4 << 8 | 1 << 16 | 128 << 24,
            ],
        ));
    }
    all
}

/// The operand fields of an encoding, as `(dword, mask)`.
fn operand_fields(op: &Opcode) -> Vec<(usize, u32)> {
    match op {
        Opcode::Sop2(_) | Opcode::Sopc(_) => vec![(0, 0xff), (0, 0xff00)],
        Opcode::Sop1(_) => vec![(0, 0xff), (0, 0x7f << 16)],
        Opcode::Sopk(_) => vec![(0, 0x7f << 16), (0, 0xffff)],
        Opcode::Sopp(_) => vec![(0, 0xffff)],
        Opcode::Smem(_) => vec![(0, 0x3f), (0, 0x7f << 6), (0, 1 << 17), (1, 0x1f_ffff)],
        Opcode::Vop2(_) => vec![(0, 0x1ff), (0, 0xff << 9), (0, 0xff << 17)],
        Opcode::Vopc(_) => vec![(0, 0x1ff), (0, 0xff << 9)],
        Opcode::Vop1(_) => vec![(0, 0x1ff), (0, 0xff << 17)],
        Opcode::Vop3(_) | Opcode::Vop3p(_) => {
            vec![(0, 0xff), (1, 0x1ff), (1, 0x1ff << 9), (1, 0x1ff << 18)]
        }
        Opcode::Ds(_) | Opcode::Flat(..) => {
            vec![(1, 0xff), (1, 0xff << 8), (1, 0xff << 16), (1, 0xff << 24)]
        }
        Opcode::Mubuf(_) | Opcode::Mtbuf(_) => {
            vec![(0, 1 << 12), (1, 0xff), (1, 0xff << 8), (1, 0x1f << 16)]
        }
        // gfx11-only operations have no gfx9 encoding (tests/gfx11.rs holds them).
        Opcode::Gfx11(_) => vec![],
    }
}

#[test]
fn every_table_opcode_is_the_one_llvm_disassembles() {
    let Some(mc) = llvm_mc() else { return };
    let encodings = table_encodings();
    // LLVM's disassembler refuses nonzero fields an opcode does not use (the hardware ignores
    // them, and so does the decoder): each table encoding is tried with every subset of its
    // operand fields cleared, and the first variant LLVM accepts is compared.
    let variants: Vec<Vec<Vec<u32>>> = encodings
        .iter()
        .map(|(op, words)| {
            let fields = operand_fields(op);
            (0..1u32 << fields.len())
                .map(|clear| {
                    let mut w = words.clone();
                    for (i, &(dword, mask)) in fields.iter().enumerate() {
                        if clear >> i & 1 == 1 {
                            w[dword] &= !mask;
                        }
                    }
                    w
                })
                .collect()
        })
        .collect();
    // Each variant is followed by a marker, `s_nop 7`: LLVM re-encodes what it disassembles
    // and skips what it cannot, so its output is matched by position: the lines before each
    // marker are that variant's disassembly.
    let marker = 0xbf80_0007u32;
    let input: String = variants
        .iter()
        .flatten()
        .map(|words| {
            let bytes: Vec<String> = words
                .iter()
                .chain([&marker])
                .flat_map(|w| w.to_le_bytes())
                .map(|b| format!("{b:#04x}"))
                .collect();
            format!("{}\n", bytes.join(" "))
        })
        .collect();
    let disassembled = run_mc(&mc, &["-disassemble"], &input);
    let mut chunks = vec![Vec::new()];
    for (text, bytes) in &disassembled {
        if text == "s_nop 7" {
            chunks.push(Vec::new());
        } else if let Some(chunk) = chunks.last_mut() {
            chunk.push((base_mnemonic(text).to_string(), bytes.len() / 4));
        }
    }
    let total: usize = variants.iter().map(Vec::len).sum();
    assert_eq!(chunks.len(), total + 1, "one chunk per variant");
    let mut chunks = chunks.into_iter();
    let mut checked = 0;
    let mut llvm_rejects = Vec::new();
    for ((op, _), tries) in encodings.iter().zip(&variants) {
        let mut accepted = None;
        for words in tries {
            let inst = decode(words).unwrap_or_else(|e| panic!("{op}: {e}"));
            assert_eq!(inst.op, *op, "{words:08x?}");
            assert_eq!(usize::from(inst.dwords), words.len(), "{op}: length");
            let chunk = chunks.next().expect("a chunk per variant");
            if let [(mnemonic, len)] = chunk.as_slice()
                && *len == words.len()
                && accepted.is_none()
            {
                accepted = Some((mnemonic.clone(), words.clone()));
            }
        }
        match accepted {
            Some((mnemonic, words)) => {
                assert_eq!(op.to_string(), mnemonic, "{words:08x?}");
                checked += 1;
            }
            None => llvm_rejects.push(op.to_string()),
        }
    }
    // LLVM has no gfx90a scratch atomics (and no flat form of the two float atomics that are
    // global-only): those combinations are the only encodings it may refuse.
    // v_mov_b64 and v_lshl_add_u64 are gfx940's (MI300), in numbers gfx90a leaves unused;
    // tests/exec_valu.rs assembles and runs them for gfx942.
    // The loads to LDS (FLAT opcodes 38..42) are gfx940's too, and none has a flat_ form.
    llvm_rejects.retain(|m| {
        !(m.starts_with("scratch_atomic")
            || m.contains("_load_lds_")
            || m == "v_mov_b64"
            || m == "v_lshl_add_u64"
            || m == "flat_atomic_add_f32"
            || m == "flat_atomic_pk_add_f16")
    });
    assert_eq!(
        llvm_rejects,
        Vec::<String>::new(),
        "encodings LLVM does not decode"
    );
    assert!(checked > 400, "only {checked} opcodes checked");
}

/// Runs `cmd`, which must succeed; its stdout.
fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("tool runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A scratch directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("kfd-gfx9-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// The LLVM 19 tools the code-object tests use, or `None` (a recorded skip, a CI failure).
fn code_object_tools() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let (clang, objcopy, objdump) = (
        tool(&["clang-19"]),
        tool(&["llvm-objcopy-19"]),
        tool(&["llvm-objdump-19"]),
    );
    Some((clang?, objcopy?, objdump?))
}

#[test]
fn a_compiled_kernel_decodes_as_llvm_objdump_lists_it() {
    let Some((clang, objcopy, objdump)) = code_object_tools() else {
        return;
    };
    let dir = TempDir::new("opencl");
    let (src, obj) = (dir.0.join("k.cl"), dir.0.join("k.o"));
    std::fs::write(&src, KERNEL).expect("write kernel");
    run(Command::new(&clang)
        .args(["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa"])
        .arg(format!("-mcpu={MCPU}"))
        .args(["-O2", "-nogpulib", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    check_code_object(&obj, &objcopy, &objdump);
}

/// The same for HIP: device code compiled as `hipcc` would (`-x hip --offload-arch`), through
/// LLVM IR since the object step of a HIP device build needs `lld`, which Debian's clang-19
/// does not bring.
#[test]
fn a_compiled_hip_kernel_decodes_as_llvm_objdump_lists_it() {
    let Some((clang, objcopy, objdump)) = code_object_tools() else {
        return;
    };
    let dir = TempDir::new("hip");
    let (src, ir, obj) = (dir.0.join("k.hip"), dir.0.join("k.ll"), dir.0.join("k.o"));
    std::fs::write(&src, HIP_KERNEL).expect("write kernel");
    run(Command::new(&clang)
        .args(["-x", "hip", &format!("--offload-arch={MCPU}")])
        .args([
            "-nogpulib",
            "-nogpuinc",
            "--cuda-device-only",
            "-O2",
            "-S",
            "-emit-llvm",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&ir));
    run(Command::new(&clang)
        .args(["-target", "amdgcn-amd-amdhsa", &format!("-mcpu={MCPU}")])
        .args(["-nogpulib", "-O2", "-c"])
        .arg(&ir)
        .arg("-o")
        .arg(&obj));
    check_code_object(&obj, &objcopy, &objdump);
}

/// `obj`'s `.text` decodes whole, instruction by instruction as `llvm-objdump` lists it:
/// boundaries, mnemonics, operands, memory offsets and branch distances.
fn check_code_object(obj: &Path, objcopy: &Path, objdump: &Path) {
    let text = obj.with_extension("text");
    run(Command::new(objcopy)
        .args(["-O", "binary", "--only-section=.text"])
        .arg(obj)
        .arg(&text));
    let listing = run(Command::new(objdump)
        .arg("-d")
        .arg(format!("--mcpu={MCPU}"))
        .arg(obj));
    let words = dwords(&std::fs::read(&text).expect("read .text"));

    // objdump lines: "\tmnemonic operands   // 0000000000A8: C0020002 00000010 [<sym>]"
    let listed: Vec<(usize, String)> = String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|line| {
            let (text, tail) = line.split_once("// ")?;
            let (addr, _) = tail.split_once(':')?;
            let at = usize::from_str_radix(addr.trim(), 16).ok()?;
            Some((at / 4, text.trim().to_string()))
        })
        .collect();
    let expected: Vec<(usize, String)> = listed
        .iter()
        .map(|(at, text)| (*at, base_mnemonic(text).to_string()))
        .collect();
    assert!(
        expected.len() > 40,
        "objdump listed {} instructions",
        expected.len()
    );
    let decoded: Vec<(usize, String)> = Decoder::new(&words)
        .map(|(at, inst)| {
            let inst = inst.unwrap_or_else(|e| panic!("dword {at} ({:#010x}): {e}", words[at]));
            (at, inst.op.to_string())
        })
        .collect();
    assert_eq!(decoded, expected);

    // The operands: each one the decoder says the instruction reads or writes is in
    // objdump's operand text (registers by their first number, constants by value), and so
    // are memory offsets and branch distances.
    let texts: std::collections::HashMap<usize, &str> =
        listed.iter().map(|(at, t)| (*at, t.as_str())).collect();
    let mut operands_checked = 0;
    for (at, inst) in Decoder::new(&words) {
        let inst = inst.expect("decoded above");
        let text = texts[&at];
        let (mnemonic, rest) = text.split_once(' ').unwrap_or((text, ""));
        let tokens: Vec<&str> = rest.split([',', ' ']).filter(|t| !t.is_empty()).collect();
        for operand in used_operands(&inst, mnemonic) {
            assert!(
                mentions(&tokens, operand),
                "{text}: {operand:?} not among {tokens:?} ({inst:?})"
            );
            operands_checked += 1;
        }
        let offset = format!("offset:{}", inst.imm);
        let memory = matches!(
            inst.encoding,
            Encoding::Smem | Encoding::Ds | Encoding::Flat | Encoding::Mubuf
        );
        let two_address = inst.encoding == Encoding::Ds
            && ["read2", "write2", "wrxchg2"]
                .iter()
                .any(|w| mnemonic.contains(w));
        if two_address {
            // ds_read2/write2: two 8-bit offsets, printed when nonzero.
            for (name, value) in [("offset0", inst.imm & 0xff), ("offset1", inst.imm >> 8)] {
                let token = format!("{name}:{value}");
                assert_eq!(
                    value != 0,
                    tokens.contains(&token.as_str()),
                    "{text}: {token}"
                );
            }
        } else if memory && inst.imm != 0 && inst.encoding != Encoding::Smem {
            assert!(tokens.contains(&offset.as_str()), "{text}: {offset}");
        }
        if mnemonic.starts_with("s_cbranch") || mnemonic == "s_branch" {
            // objdump prints SIMM16 unsigned: -8 dwords is 65528.
            let simm16 = (inst.imm as u16).to_string();
            assert_eq!(tokens.first(), Some(&simm16.as_str()), "{text}");
        }
    }
    assert!(
        operands_checked > 100,
        "only {operands_checked} operands checked"
    );
}

/// The operands of `inst` that LLVM prints: all of them for the ALU encodings; for memory
/// the address, and the data or destination the operation moves.
fn used_operands(inst: &Inst, mnemonic: &str) -> Vec<Operand> {
    let loads = ["load", "read", "atomic"]
        .iter()
        .any(|w| mnemonic.contains(w));
    let stores = ["store", "write", "atomic"]
        .iter()
        .any(|w| mnemonic.contains(w));
    // An atomic returns the old value only with GLC; a load to LDS has no data register.
    let returns = loads && (!mnemonic.contains("atomic") || inst.mods.glc) && !inst.mods.lds;
    let mut out = Vec::new();
    match inst.encoding {
        // Cache write-back and invalidation take no operands.
        Encoding::Mubuf if mnemonic.contains("wb") || mnemonic.contains("inv") => {}
        Encoding::Ds => {
            out.push(inst.src[0]);
            if stores {
                out.push(inst.src[1]);
            }
            if returns {
                out.push(inst.dst[0]);
            }
        }
        Encoding::Flat => {
            // Scratch with an SGPR address reads no VGPR address.
            let scratch_saddr = matches!(inst.op, Opcode::Flat(Segment::Scratch, _))
                && inst.src[2] != Operand::None;
            if !scratch_saddr {
                out.push(inst.src[0]);
            }
            out.push(inst.src[2]);
            if stores {
                out.push(inst.src[1]);
            }
            if returns {
                out.push(inst.dst[0]);
            }
        }
        Encoding::Mubuf | Encoding::Mtbuf => {
            if inst.mods.offen || inst.mods.idxen {
                out.push(inst.src[0]);
            }
            out.extend([inst.src[1], inst.src[2]]);
            if (stores && !inst.mods.lds) || returns {
                out.push(inst.dst[0]);
            }
        }
        _ => {
            out.extend(inst.dst);
            out.extend(inst.src);
        }
    }
    out.retain(|o| *o != Operand::None);
    out
}

/// Where the modifier bits disagree with LLVM's text: clamp and the output modifier of VOP3,
/// the cache bits (GLC, SLC, SCC) of FLAT and MUBUF, MUBUF's OFFEN/IDXEN/LDS and the GLC of
/// SMEM loads and stores; and the FLAT/MUBUF/DS offsets.
fn modifier_mismatch(inst: &Inst, tokens: &[&str]) -> Option<String> {
    let has = |t: &str| tokens.contains(&t);
    let m = &inst.mods;
    let mut checks = vec![("clamp", m.clamp)];
    if inst.encoding == Encoding::Vop3a || inst.encoding == Encoding::Vop3b {
        checks.extend([
            ("mul:2", m.omod == 1),
            ("mul:4", m.omod == 2),
            ("div:2", m.omod == 3),
        ]);
    }
    if matches!(
        inst.encoding,
        Encoding::Flat | Encoding::Mubuf | Encoding::Mtbuf
    ) {
        checks.extend([("glc", m.glc), ("slc", m.slc), ("scc", m.scc)]);
    }
    if inst.encoding == Encoding::Mtbuf {
        if let Some(problem) = mtbuf_mismatch(inst, tokens) {
            return Some(problem);
        }
        checks.extend([("offen", m.offen), ("idxen", m.idxen)]);
    }
    // VOP3 source modifiers: source i's token is negated (-x, neg(x)) and under abs (|x|,
    // abs(x)) as NEG and ABS bit i say (negative constants print a sign of their own).
    // (LLVM prints no neg/abs for the 16-bit integer op_sel forms, v_min3_u16 and the like,
    // whatever the bits say.)
    let int16 = ["_u16", "_i16", "_b16"]
        .iter()
        .any(|s| inst.op.to_string().ends_with(s));
    let vop3 = matches!(inst.encoding, Encoding::Vop3a | Encoding::Vop3b);
    let sub_dword = matches!(inst.encoding, Encoding::Dpp | Encoding::Sdwa);
    // DPP/SDWA forms of integer operations print no modifiers either.
    let float_op = ["_f16", "_f32", "_f64"]
        .iter()
        .any(|s| inst.op.to_string().contains(s));
    if (vop3 && !int16) || (sub_dword && float_op) {
        let dsts = inst.dst.iter().filter(|d| **d != Operand::None).count();
        for (i, src) in inst.src.iter().enumerate() {
            if *src == Operand::None {
                continue;
            }
            let Some(token) = tokens.get(dsts + i) else {
                return Some(format!("no token for source {i}"));
            };
            let negative_constant = match src {
                Operand::Int(k) => *k < 0,
                Operand::Float(f) => f.value() < 0.0,
                _ => false,
            };
            let neg = token.starts_with('-') || token.starts_with("neg(");
            if !negative_constant && neg != (m.neg >> i & 1 == 1) {
                return Some(format!("source {i} ({token}): neg bit {}", m.neg >> i & 1));
            }
            let abs = token.contains('|') || token.contains("abs(");
            if abs != (m.abs >> i & 1 == 1) {
                return Some(format!("source {i} ({token}): abs bit {}", m.abs >> i & 1));
            }
        }
    }
    let mnemonic = inst.op.to_string();
    let two_address = inst.encoding == Encoding::Ds
        && ["read2", "write2", "wrxchg2"]
            .iter()
            .any(|w| mnemonic.contains(w));
    if two_address {
        for (name, value) in [("offset0", inst.imm & 0xff), ("offset1", inst.imm >> 8)] {
            let token = format!("{name}:{value}");
            if (value != 0) != tokens.contains(&token.as_str()) {
                return Some(format!("decoded {token}"));
            }
        }
    } else if matches!(
        inst.encoding,
        Encoding::Flat | Encoding::Mubuf | Encoding::Ds
    ) {
        let offset = format!("offset:{}", inst.imm);
        let printed = tokens.iter().find(|t| t.starts_with("offset:"));
        if printed != (inst.imm != 0).then_some(&offset.as_str()) {
            return Some(format!("decoded {offset}"));
        }
    }
    // SMEM prints its byte offset in hex, signed, alone or as offset:.
    let smem_data =
        inst.encoding == Encoding::Smem && ["load", "store"].iter().any(|w| mnemonic.contains(w));
    if smem_data && inst.imm != 0 {
        let hex = if inst.imm < 0 {
            format!("-{:#x}", inst.imm.unsigned_abs())
        } else {
            format!("{:#x}", inst.imm)
        };
        let printed = tokens
            .iter()
            .any(|t| t.strip_prefix("offset:").unwrap_or(t) == hex);
        if !printed {
            return Some(format!("decoded offset {hex}"));
        }
    }
    if let Some(problem) = dpp_sdwa_mismatch(inst, tokens) {
        return Some(problem);
    }
    match inst.encoding {
        Encoding::Mubuf => checks.extend([("offen", m.offen), ("idxen", m.idxen), ("lds", m.lds)]),
        // Only SMEM's loads and stores have a GLC to print (s_memtime, s_dcache_* ignore it).
        Encoding::Smem
            if ["load", "store"]
                .iter()
                .any(|w| inst.op.to_string().contains(w)) =>
        {
            checks.push(("glc", m.glc))
        }
        _ => {}
    }
    checks
        .into_iter()
        .find(|&(token, set)| has(token) != set)
        .map(|(token, set)| format!("{token}: decoded {set}"))
}

/// Where MTBUF's offset or formats disagree with LLVM's text: `offset:N` (the low 12 bits of
/// `imm`), and `format:[BUF_DATA_FORMAT_*,BUF_NUM_FORMAT_*]`, each name printed unless it is
/// the default (DFMT 1, NFMT 0).
fn mtbuf_mismatch(inst: &Inst, tokens: &[&str]) -> Option<String> {
    const DFMT: [&str; 16] = [
        "INVALID",
        "8",
        "16",
        "8_8",
        "32",
        "16_16",
        "10_11_11",
        "11_11_10",
        "10_10_10_2",
        "2_10_10_10",
        "8_8_8_8",
        "32_32",
        "16_16_16_16",
        "32_32_32",
        "32_32_32_32",
        "RESERVED_15",
    ];
    const NFMT: [&str; 8] = [
        "UNORM",
        "SNORM",
        "USCALED",
        "SSCALED",
        "UINT",
        "SINT",
        "RESERVED_6",
        "FLOAT",
    ];
    let imm = inst.imm as u32;
    let offset = imm & 0xfff;
    let printed = tokens.iter().find(|t| t.starts_with("offset:"));
    if printed.map(|t| t.to_string()) != (offset != 0).then(|| format!("offset:{offset}")) {
        return Some(format!("decoded offset {offset}"));
    }
    let names: Vec<&str> = tokens
        .iter()
        .map(|t| t.trim_start_matches("format:").trim_matches(['[', ']']))
        .collect();
    let (dfmt, nfmt) = ((imm >> 12 & 15) as usize, (imm >> 16 & 7) as usize);
    for (name, shown) in [
        (format!("BUF_DATA_FORMAT_{}", DFMT[dfmt]), dfmt != 1),
        (format!("BUF_NUM_FORMAT_{}", NFMT[nfmt]), nfmt != 0),
    ] {
        if names.contains(&name.as_str()) != shown {
            return Some(format!("decoded {name}"));
        }
    }
    None
}

/// Where the DPP controls or SDWA selects disagree with LLVM's text (`row_shr:1`,
/// `quad_perm:[..]`, `row_mask:0x..`, `bank_mask:0x..`, `bound_ctrl:1`; `dst_sel:..`,
/// `dst_unused:..`, `src0_sel:..`, `src1_sel:..`, `sext(..)`, and SDWA's clamp/omod).
fn dpp_sdwa_mismatch(inst: &Inst, tokens: &[&str]) -> Option<String> {
    let has = |t: &str| tokens.contains(&t);
    if let Some(d) = inst.dpp() {
        let c = d.ctrl;
        let n = c & 15;
        let ctrl = match c {
            0..=0xff => format!(
                "quad_perm:[{},{},{},{}]",
                c & 3,
                c >> 2 & 3,
                c >> 4 & 3,
                c >> 6 & 3
            ),
            0x101..=0x10f => format!("row_shl:{n}"),
            0x111..=0x11f => format!("row_shr:{n}"),
            0x121..=0x12f => format!("row_ror:{n}"),
            0x130 => "wave_shl:1".into(),
            0x134 => "wave_rol:1".into(),
            0x138 => "wave_shr:1".into(),
            0x13c => "wave_ror:1".into(),
            0x140 => "row_mirror".into(),
            0x141 => "row_half_mirror".into(),
            0x142 => "row_bcast:15".into(),
            0x143 => "row_bcast:31".into(),
            _ => format!("row_newbcast:{n}"),
        };
        // quad_perm:[a,b,c,d] was split at its commas: look in the rejoined text.
        if !tokens.join(",").contains(&ctrl) {
            return Some(format!("decoded {ctrl}"));
        }
        let expected = [
            format!("row_mask:{:#x}", d.row_mask),
            format!("bank_mask:{:#x}", d.bank_mask),
        ];
        if let Some(t) = expected.iter().find(|t| !has(t)) {
            return Some(format!("decoded {t}"));
        }
        if has("bound_ctrl:1") != d.bound_ctrl {
            return Some(format!("decoded bound_ctrl {}", d.bound_ctrl));
        }
    }
    if let Some(s) = inst.sdwa() {
        let name = |sel: u8| match sel {
            0..=3 => format!("BYTE_{sel}"),
            4 | 5 => format!("WORD_{}", sel - 4),
            _ => "DWORD".into(),
        };
        let mut expected = vec![format!("src0_sel:{}", name(s.src0_sel))];
        if inst.src[1] != Operand::None {
            expected.push(format!("src1_sel:{}", name(s.src1_sel)));
        }
        if !matches!(inst.op, Opcode::Vopc(_)) {
            expected.push(format!("dst_sel:{}", name(s.dst_sel)));
            let unused = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE"];
            expected.push(format!("dst_unused:{}", unused[usize::from(s.dst_unused)]));
        }
        if let Some(t) = expected.iter().find(|t| !has(t)) {
            return Some(format!("decoded {t}"));
        }
        let sexts = tokens.iter().filter(|t| t.contains("sext(")).count();
        if sexts != usize::from(s.src0_sext) + usize::from(s.src1_sext) {
            return Some(format!("decoded sext {} {}", s.src0_sext, s.src1_sext));
        }
        let m = &inst.mods;
        for (token, set) in [
            ("clamp", m.clamp),
            ("mul:2", m.omod == 1),
            ("mul:4", m.omod == 2),
            ("div:2", m.omod == 3),
        ] {
            if has(token) != set {
                return Some(format!("{token}: decoded {set}"));
            }
        }
    }
    None
}

/// The IEEE half-precision encoding of an inline float constant.
fn f16_bits(f: kfd_gfx9::FloatConst) -> u16 {
    use kfd_gfx9::FloatConst::*;
    match f {
        Half => 0x3800,
        NegHalf => 0xb800,
        One => 0x3c00,
        NegOne => 0xbc00,
        Two => 0x4000,
        NegTwo => 0xc000,
        Four => 0x4400,
        NegFour => 0xc400,
        InvTwoPi => 0x3118,
    }
}

/// Whether objdump's operand `tokens` name `operand`.
fn mentions(tokens: &[&str], operand: Operand) -> bool {
    // Modifiers wrap an operand: -v1, |v1|, -|v1|, neg(64), abs(v1); LLVM appends comments.
    let bare = |t: &str| -> String {
        let t = t.split("/*").next().unwrap_or(t).trim_start_matches('-');
        let t = t.strip_prefix("sext(").unwrap_or(t);
        let t = t
            .strip_prefix("neg(")
            .or_else(|| t.strip_prefix("abs("))
            .unwrap_or(t);
        t.trim_end_matches(')')
            .trim_matches('|')
            .trim_start_matches('-')
            .to_string()
    };
    let any = |names: &[String]| {
        tokens.iter().any(|t| {
            let t = bare(t);
            names
                .iter()
                .any(|n| t == *n || t.starts_with(&format!("{n}:")))
        })
    };
    // A register range `prefix[a:b]` holding `n`, starting at most 3 below it.
    let in_range = |prefix: &str, n: u8| {
        tokens.iter().any(|t| {
            let t = bare(t);
            let Some(range) = t
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('['))
                .and_then(|r| r.strip_suffix(']'))
            else {
                return false;
            };
            let Some((a, b)) = range.split_once(':') else {
                return false;
            };
            let (Ok(a), Ok(b)) = (a.parse::<u8>(), b.parse::<u8>()) else {
                return false;
            };
            a <= n && n <= b && n - a <= 3
        })
    };
    match operand {
        Operand::None => true,
        // A multi-dword SGPR operand is aligned (pairs even, wider tuples to 4): LLVM prints
        // field 9 of a pair as s[8:9], as the hardware reads it; the decoder keeps the field
        // (the width is the opcode's), so a range that starts at most 3 below it matches.
        Operand::Sgpr(n) => any(&[format!("s{n}")]) || in_range("s", n),
        // With the ACC bit, memory data registers are AGPRs (a5, a[6:7]).
        Operand::Vgpr(n) => any(&[
            format!("v{n}"),
            format!("v[{n}"),
            format!("a{n}"),
            format!("a[{n}"),
        ]),
        Operand::Ttmp(n) => any(&[format!("ttmp{n}")]) || in_range("ttmp", n),
        Operand::Special(s) => {
            let names: &[&str] = match s {
                Special::VccLo => &["vcc", "vcc_lo"],
                Special::VccHi => &["vcc_hi"],
                Special::ExecLo => &["exec", "exec_lo"],
                Special::ExecHi => &["exec_hi"],
                Special::M0 => &["m0"],
                Special::Scc => &["scc", "src_scc"],
                Special::Vccz => &["vccz", "src_vccz"],
                Special::Execz => &["execz", "src_execz"],
                _ => return true,
            };
            any(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        }
        // By magnitude: a negative constant and a negated one print alike.
        Operand::Int(k) => any(&[k.unsigned_abs().to_string()]),
        // By value, or (LLVM's choice for 16-bit integer operations) as its f16 bits.
        Operand::Float(f) => tokens.iter().any(|t| {
            let t = bare(t);
            t.parse::<f64>()
                .is_ok_and(|v| (v - f.value().abs()).abs() < 1e-6)
                || t.eq_ignore_ascii_case(&format!("{:#x}", f16_bits(f)))
        }),
        Operand::Literal(x) => tokens.iter().any(|t| {
            let t = bare(t);
            t.eq_ignore_ascii_case(&format!("{x:#x}")) || t == x.to_string()
        }),
    }
}

/// HIP kernels: a saxpy and a dot product with a shared-memory reduction and an f64 atomic.
const HIP_KERNEL: &str = r#"
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
__global__ void saxpy(float *y, const float *x, float a, int n) {
    int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
    if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void dot(double *out, const double *x, const double *y, int n) {
    __shared__ double part[256];
    int t = __builtin_amdgcn_workitem_id_x();
    double s = 0;
    for (int i = t; i < n; i += 256) s += x[i] * y[i];
    part[t] = s;
    __builtin_amdgcn_s_barrier();
    if (t == 0) {
        double sum = 0;
        for (int k = 0; k < 256; k++) sum += part[k];
        __atomic_fetch_add(out, sum, __ATOMIC_RELAXED);
    }
}
"#;

/// Kernels with loads, stores, LDS, barriers, branches and loops, f32/f64 FMA, integer and
/// float division (the `v_div_*`, `v_rcp_*`, `v_mul_hi_*` sequences), a reduction over LDS,
/// calls (`s_swappc_b64`) and atomics.
const KERNEL: &str = r#"
__kernel void axpy(__global float *y, __global const float *x, float a, __global int *count,
                   __local float *tmp, __global double *d, __global uint *u) {
    uint i = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workgroup_id_x() * 256u;
    tmp[__builtin_amdgcn_workitem_id_x()] = x[i];
    __builtin_amdgcn_s_barrier();
    float v = tmp[255u - __builtin_amdgcn_workitem_id_x()];
    if (v > 0.0f) y[i] = a * v + y[i];
    else y[i] = v * v;
    d[i] = d[i] * 2.5 + (double)v;
    u[i] = (u[i] * 3u + i) >> 2 | (i << 5);
    int k = (int)i;
    u[i + 1u] = (uint)(k * -7 - 3) < 100u ? 1u : 2u;
    __atomic_fetch_add(count, k, __ATOMIC_RELAXED);
}
__kernel void divide(__global int *q, __global const int *a, __global const int *b, __global uint *uq, __global double *dq, __global float *fq, int n) {
    uint i = __builtin_amdgcn_workitem_id_x() + __builtin_amdgcn_workgroup_id_x() * 64u;
    if ((int)i >= n) return;
    q[i] = a[i] / b[i] + a[i] % 7;
    uq[i] = (uint)a[i] / (uint)b[i];
    dq[i] = (double)a[i] / (double)b[i];
    fq[i] = (float)a[i] / (float)b[i];
    long s = 0;
    for (int k = 0; k < n; k++) s += (long)a[k] * b[k];
    ((__global long *)dq)[i + 1] = s;
}
__kernel void reduce(__global float *out, __global const float *in, __local float *tmp, __global uint *ctr) {
    uint t = __builtin_amdgcn_workitem_id_x();
    uint i = t + __builtin_amdgcn_workgroup_id_x() * 256u;
    tmp[t] = in[i] + in[i + 1];
    __builtin_amdgcn_s_barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (t < s) tmp[t] += tmp[t + s];
        __builtin_amdgcn_s_barrier();
    }
    if (t == 0) { out[__builtin_amdgcn_workgroup_id_x()] = tmp[0]; __atomic_fetch_add(ctr, 1u, __ATOMIC_SEQ_CST); }
    float m = fmax(in[i], 0.5f);
    out[i + 4096] = __builtin_amdgcn_readfirstlane((int)m) + sqrt(m) + exp2(m);
}
"#;

#[test]
fn random_encodings_decode_as_llvm_disassembles_them() {
    let Some(mc) = llvm_mc() else { return };
    // (fixed high bits, their count) of the encodings decoded here.
    const PREFIXES: &[(u32, u32)] = &[
        (0b10, 2),
        (0b1011, 4),
        (0b1_0111_1101, 9),
        (0b1_0111_1110, 9),
        (0b1_0111_1111, 9),
        (0b11_0000, 6),
        (0b0, 1),
        (0b011_1111, 7),
        (0b011_1110, 7),
        (0b11_0100, 6),
        (0b1_1010_0111, 9),
        (0b11_0110, 6),
        (0b11_0111, 6),
        (0b11_1000, 6),
        (0b11_1010, 6),
    ];
    let mut rng = kfd_skip::Rng(0x1ee7_c0de_0009_0a0a);
    let samples: Vec<[u32; 2]> = (0..8_000)
        .map(|_| {
            let (value, len) = rng.pick(PREFIXES);
            let low = 32 - len;
            let mut w0 = value << low | (rng.next() as u32 & ((1u32 << low) - 1));
            // llvm-mc 19 crashes (SIGSEGV) disassembling some VOP3P-MAI (MFMA) encodings,
            // opcodes 0x40 and up, which this decoder leaves unsupported anyway.
            if w0 >> 23 == 0x1a7 {
                w0 &= !(0x40 << 16);
            }
            // A fifth of the VOP1/VOP2/VOPC samples take the DPP (250) or SDWA (249) form,
            // which random SRC0 fields reach too rarely to test.
            if w0 >> 31 == 0 && rng.chance(20) {
                w0 = w0 & !0x1ff | if rng.chance(50) { 250 } else { 249 };
            }
            [w0, rng.next() as u32]
        })
        .collect();
    // llvm-mc 19 crashes (SIGSEGV) on a few random encodings besides MFMA: samples go in
    // batches, and a batch that crashes it is left out (most may not be).
    let (mut agreed, mut mismatches, mut crashed) = (0, Vec::new(), 0);
    let batches: Vec<&[[u32; 2]]> = samples.chunks(500).collect();
    for batch in &batches {
        match compare_with_llvm(&mc, batch) {
            Some((a, m)) => {
                agreed += a;
                mismatches.extend(m);
            }
            None => crashed += 1,
        }
    }
    assert!(
        crashed * 4 <= batches.len(),
        "llvm-mc crashed on {crashed} batches"
    );
    assert_eq!(mismatches, Vec::<String>::new());
    assert!(agreed > 1_000, "only {agreed} samples decoded by both");
}

/// Disassembles `samples` with llvm-mc and compares each one both decode: returns how many
/// agree and the disagreements, or `None` when llvm-mc crashed.
fn compare_with_llvm(mc: &Path, samples: &[[u32; 2]]) -> Option<(usize, Vec<String>)> {
    // One sample a line, then `s_nop 7` (which a sample's second dword may swallow as its
    // own second dword) and the marker `s_nop 6`; a warning at column 1 of a line means LLVM
    // refused the sample's first dword.
    let pad = 0xbf80_0007u32;
    let marker = 0xbf80_0006u32;
    let input: String = samples
        .iter()
        .map(|words| {
            let bytes: Vec<String> = words
                .iter()
                .chain([&pad, &marker])
                .flat_map(|w| w.to_le_bytes())
                .map(|b| format!("{b:#04x}"))
                .collect();
            format!("{}\n", bytes.join(" "))
        })
        .collect();
    let (stdout, stderr) = mc_output(mc, &["-disassemble"], &input);
    if stderr.contains("Stack dump") {
        return None;
    }
    let refused: std::collections::HashSet<usize> = stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("<stdin>:")?;
            let (line, rest) = rest.split_once(':')?;
            rest.starts_with("1:").then(|| line.parse::<usize>().ok())?
        })
        .collect();
    let mut chunks = vec![Vec::new()];
    for (text, bytes) in parse_mc(&stdout) {
        if text == "s_nop 6" {
            chunks.push(Vec::new());
        } else if let Some(chunk) = chunks.last_mut() {
            chunk.push((text.clone(), dwords(&bytes)));
        }
    }
    assert_eq!(chunks.len(), samples.len() + 1, "one chunk per sample");
    let (mut agreed, mut mismatches) = (0, Vec::new());
    for (i, (words, chunk)) in samples.iter().zip(&chunks).enumerate() {
        let Ok(inst) = decode(words) else { continue };
        if refused.contains(&(i + 1)) {
            continue;
        }
        let Some((text, encoding)) = chunk.first() else {
            continue;
        };
        let mnemonic = base_mnemonic(text);
        // LLVM prints what it decoded re-encoded, sometimes in another form (an inline
        // constant of a 16-bit integer operation as a literal): lengths are compared when the
        // re-encoding starts with the sample's first dword.
        let len = if encoding.first() == Some(&words[0]) {
            encoding.len()
        } else {
            usize::from(inst.dwords)
        };
        if (inst.op.to_string(), usize::from(inst.dwords)) == (mnemonic.to_string(), len) {
            agreed += 1;
            // LLVM flags operands it considers invalid for the opcode in a comment (an SGPR
            // source of v_readfirstlane_b32, an inline constant for s_setpc_b64, a 64-bit DPP
            // control other than row_newbcast: "DP ALU dpp only supports row_newbcast");
            // those are not compared.
            if text.contains("/*") {
                continue;
            }
            // The operands, as in the compiled-kernel test; of SMEM, only the loads' and
            // stores' (s_memtime, s_dcache_* ignore their fields).
            let checked = inst.encoding != Encoding::Smem
                || ["load", "store"].iter().any(|w| mnemonic.contains(w));
            let (full, rest) = text.split_once(' ').unwrap_or((text, ""));
            let tokens: Vec<&str> = rest.split([',', ' ']).filter(|t| !t.is_empty()).collect();
            if let Some(problem) = modifier_mismatch(&inst, &tokens) {
                mismatches.push(format!("{words:08x?}: {text}: {problem}"));
            }
            for operand in used_operands(&inst, full).into_iter().filter(|_| checked) {
                if !mentions(&tokens, operand) {
                    mismatches.push(format!("{words:08x?}: {text}: {operand:?} ({inst:?})"));
                }
            }
        } else {
            mismatches.push(format!(
                "{words:08x?}: ours {} ({}), llvm {mnemonic} ({len})",
                inst.op, inst.dwords
            ));
        }
    }
    Some((agreed, mismatches))
}
