//! The gfx11 (RDNA3) front end held to LLVM 19 (`-mcpu=gfx1100`) and run: every entry of
//! its opcode tables is the operation `llvm-mc-19 --disassemble` names for its number;
//! assembled snippets decode to the expected [`Inst`] (operands, `null`/M0 codes, literals in
//! VOP3, modifiers, memory fields); whole programs decode instruction by instruction as
//! `llvm-objdump-19` lists them; and wave32 kernels run on the dispatcher with the lane masks
//! 32 bits wide (VCC_LO, single-SGPR carries and compare results, EXEC_LO), the work-item ids
//! packed in `v0`, waves of 32 work-items, and private memory swizzled across 32 lanes;
//! VOPD pairs read both halves' sources before either writes; and `tests/kernels/gfx11.cl`,
//! compiled by clang-19 for gfx1100 (VOPD, VOP3 literals, `s_delay_alu` as LLVM emits them),
//! runs and agrees with the host. A gfx11 wave's `s_trap` enters the trap handler its
//! observer names with the trap entry's TTMP0/1, and `s_sendmsg_rtn` gets the observer's
//! answers (the doorbell, the TMA) in its destination, as kfdtest's gfx11 `TrapHandlerIsa`
//! needs them.

mod common;
mod kernels;

use common::{CODE, DATA, TestMemory};
use kfd_gfx9::dispatch::{
    Dispatch, DispatchError, KernelDescriptor, NoObserver, Observer, RunOptions, Scratch, run,
};
use kfd_gfx9::exec::{Apertures, ExecError, Flow, Target, Wave};
use kfd_gfx9::gfx11::{self, Gfx11Op};
use kfd_gfx9::{
    DsOp, Encoding, FlatOp, Inst, Opcode, Operand, Segment, SmemOp, Sop1Op, Sop2Op, SoppOp,
    Special, Vop1Op, Vop2Op, Vop3Op, VopcOp,
};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `llvm-mc-19` for gfx1100 on `input` with `args`; `None` (a skip) without it.
fn mc(args: &[&str], input: &str) -> Option<String> {
    mc_both(args, input).map(|(out, _)| out)
}

/// As [`mc`], with its standard error (the disassembler's warnings).
fn mc_both(args: &[&str], input: &str) -> Option<(String, String)> {
    if !std::path::Path::new("/usr/bin/llvm-mc-19").exists() {
        kfd_skip::prerequisite("llvm-mc-19 is missing (Debian llvm-19)");
        return None;
    }
    let mut child = Command::new("llvm-mc-19")
        .args(["-triple=amdgcn", "-mcpu=gfx1100"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("llvm-mc-19 runs");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(input.as_bytes()).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    Some((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `(text, dwords)` per instruction of `-show-encoding` output.
fn encodings(out: &str) -> Vec<(String, Vec<u32>)> {
    out.lines()
        .filter_map(|l| {
            let (text, enc) = l.split_once("; encoding: [")?;
            let bytes: Vec<u8> = enc
                .trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).unwrap())
                .collect();
            let words = bytes
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            Some((text.trim().to_string(), words))
        })
        .collect()
}

/// The mnemonic of a disassembled line, without the `_e32`/`_e64`/`_dpp` form suffix.
fn mnemonic(text: &str) -> &str {
    let m = text.split_whitespace().next().unwrap_or("");
    m.strip_suffix("_e32")
        .or_else(|| m.strip_suffix("_e64"))
        .or_else(|| m.strip_suffix("_dpp"))
        .unwrap_or(m)
}

/// Words of each encoding with plausible operands, the first one LLVM accepts naming the
/// opcode (LLVM refuses fields an opcode does not use; the variants clear them).
fn variants(enc: Encoding, op: u32) -> Vec<Vec<u32>> {
    match enc {
        Encoding::Sop2 => vec![vec![0x8000_0000 | op << 23 | 1 << 16 | 2 << 8 | 3]],
        Encoding::Sopk => vec![vec![0xb000_0000 | op << 23 | 1 << 16 | 0x10]],
        Encoding::Sop1 => vec![
            vec![0xbe80_0000 | 2 << 16 | op << 8 | 4],
            vec![0xbe80_0000 | op << 8 | 0x80],
        ],
        Encoding::Sopc => vec![vec![0xbf00_0000 | op << 16 | 1 << 8 | 2]],
        Encoding::Sopp => vec![vec![0xbf80_0000 | op << 16]],
        Encoding::Smem => vec![vec![0xf400_0000 | op << 18 | 2 << 6, 0xf800_0010]],
        Encoding::Vop2 => vec![
            vec![op << 25 | 1 << 17 | 3 << 9 | 0x102],
            vec![op << 25 | 1 << 17 | 3 << 9 | 0x102, 0x4000_0000],
        ],
        Encoding::Vop1 => vec![
            vec![0x7e00_0000 | 1 << 17 | op << 9 | 0x102],
            vec![0x7e00_0000 | op << 9],
        ],
        Encoding::Vopc => vec![vec![0x7c00_0000 | op << 17 | 3 << 9 | 0x102]],
        Encoding::Vop3a => {
            let w0 = 0xd400_0000 | op << 16 | 2;
            vec![
                vec![w0, 0x106 << 9 | 0x102],
                vec![w0, 0x102],
                vec![w0 | 106 << 8, 0x106 << 9 | 0x102],
                vec![w0, 0x104 << 18 | 0x106 << 9 | 0x102],
                vec![w0 | 106 << 8, 0x104 << 18 | 0x106 << 9 | 0x102],
                vec![w0, 0x6a << 18 | 0x106 << 9 | 0x102],
            ]
        }
        Encoding::Vop3p => {
            let w0 = 0xcc00_0000 | op << 16 | 1;
            vec![
                vec![w0 | 1 << 14, 3 << 27 | 0x103 << 9 | 0x102],
                vec![w0, 0x103 << 9 | 0x102],
                vec![w0 | 1 << 14, 3 << 27 | 0x104 << 18 | 0x103 << 9 | 0x102],
                vec![w0, 0x104 << 18 | 0x103 << 9 | 0x102],
            ]
        }
        Encoding::Ds => {
            let w0 = 0xd800_0000 | op << 18;
            vec![
                vec![w0, 4 << 24 | 3 << 16 | 2 << 8 | 1],
                vec![w0, 2 << 8 | 1],
                vec![w0, 4 << 24 | 1],
                vec![w0 | 1 << 17, 0],
            ]
        }
        Encoding::Flat => vec![
            vec![0xdc00_0000 | op << 18, 4 << 24 | 0x7c << 16 | 6 << 8 | 2],
            vec![
                0xdc00_0000 | op << 18 | 2 << 16,
                4 << 24 | 0x7c << 16 | 6 << 8 | 2,
            ],
        ],
        Encoding::Mubuf => vec![vec![0xe000_0000 | op << 18, 3 << 24 | 1 << 16 | 1 << 8 | 2]],
        _ => vec![],
    }
}

#[test]
fn every_table_entry_is_the_opcode_llvm_disassembles() {
    let table: Vec<_> = gfx11::table().collect();
    assert!(table.len() > 900, "{} entries", table.len());
    // Each variant followed by `s_nop 7; s_nop 6` as a marker: the lines before a marker are
    // that variant's disassembly (LLVM skips what it cannot decode, with a warning; an
    // instruction short of its literal takes the `s_nop 7` as it, the `s_nop 6` remains).
    let marker = [0xbf80_0007u32, 0xbf80_0006];
    let tries: Vec<Vec<Vec<u32>>> = table
        .iter()
        .map(|&(enc, raw, _, _)| variants(enc, u32::from(raw)))
        .collect();
    let input: String = tries
        .iter()
        .flatten()
        .map(|words| {
            let b: Vec<String> = words
                .iter()
                .chain(&marker)
                .flat_map(|w| w.to_le_bytes())
                .map(|b| format!("{b:#04x}"))
                .collect();
            format!("{}\n", b.join(" "))
        })
        .collect();
    let Some(out) = mc(&["--disassemble", "-show-encoding"], &input) else {
        return;
    };
    let mut chunks: Vec<Vec<(String, usize)>> = vec![Vec::new()];
    for (text, words) in encodings(&out) {
        if text == "s_nop 7" {
            continue;
        }
        if text == "s_nop 6" {
            chunks.push(Vec::new());
        } else if let Some(c) = chunks.last_mut() {
            c.push((mnemonic(&text).to_string(), words.len()));
        }
    }
    let total: usize = tries.iter().map(Vec::len).sum();
    assert_eq!(chunks.len(), total + 1, "a chunk per variant");
    let mut chunks = chunks.into_iter();
    let mut unchecked = Vec::new();
    for ((enc, raw, name, op), words) in table.iter().zip(&tries) {
        let mut named = None;
        for w in words {
            let chunk = chunks.next().unwrap();
            if named.is_none()
                && let [(m, len)] = chunk.as_slice()
                && *len == w.len()
            {
                named = Some((m.clone(), w.clone()));
            }
        }
        let Some((llvm, w)) = named else {
            unchecked.push(*name);
            continue;
        };
        assert_eq!(llvm, *name, "{enc:?} {raw:#x}");
        // And the decoder gives the entry's operation for those words.
        let inst = gfx11::decode(&w).unwrap_or_else(|e| panic!("{name}: {e}"));
        match (inst.op, *op) {
            (Opcode::Flat(_, a), Opcode::Flat(_, b)) => assert_eq!(a, b, "{name}"),
            // v_fmamk/v_fmaak decode to v_fma_f32 with their literal.
            (
                Opcode::Vop3(Vop3Op::VFmaF32),
                Opcode::Gfx11(Gfx11Op::VFmamkF32 | Gfx11Op::VFmaakF32),
            ) => {}
            (got, want) => assert_eq!(got, want, "{name}"),
        }
        assert_eq!(usize::from(inst.dwords), w.len(), "{name}: length");
    }
    assert_eq!(unchecked, Vec::<&str>::new(), "entries LLVM did not decode");
}

/// Assembles `asm` (one instruction per line) and decodes each instruction.
fn decoded(asm: &str) -> Option<Vec<(String, Inst)>> {
    let out = mc(&["-show-encoding"], asm)?;
    Some(
        encodings(&out)
            .into_iter()
            .map(|(text, words)| {
                let inst = gfx11::decode(&words).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(usize::from(inst.dwords), words.len(), "{text}: length");
                (text, inst)
            })
            .collect(),
    )
}

#[test]
fn assembled_instructions_decode_to_the_expected_inst() {
    let asm = "s_add_u32 s1, s2, 0x12345
s_mov_b32 m0, s1
s_mov_b32 null, s105
s_and_saveexec_b32 s4, vcc_lo
s_load_b64 s[2:3], s[0:1], 0x10
s_load_b32 s2, s[4:5], s7 offset:0x20 glc
v_add_nc_u32_e64 v2, v2, 1
v_add_co_u32 v1, s5, v2, v3
v_add_co_ci_u32_e32 v1, vcc_lo, v2, v3, vcc_lo
v_cmp_eq_u32_e64 s7, v1, v2
v_cmpx_gt_u32_e32 16, v0
v_fma_f32 v1, -v2, |v3|, 0x1234 clamp
v_fmaak_f32 v1, v2, v3, 0x40000000
v_cndmask_b32_e32 v3, 1, v4, vcc_lo
ds_store_b32 v1, v2 offset:16
ds_gws_init v1 offset:4 gds
flat_load_b32 v1, v[2:3] offset:16 glc slc
global_load_b32 v1, v2, s[4:5] offset:-16
global_store_b32 v[1:2], v3, off offset:8
scratch_load_b32 v1, v2, off offset:8
scratch_store_b32 off, v4, s4 offset:12
s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s4
s_waitcnt_vscnt null, 0x0
s_delay_alu instid0(VALU_DEP_1)
s_endpgm";
    let Some(d) = decoded(asm) else { return };
    let insts: Vec<Inst> = d.iter().map(|(_, i)| *i).collect();
    let sp = Operand::Special;
    // s_add_u32 with a literal.
    assert_eq!(insts[0].op, Opcode::Sop2(Sop2Op::SAddU32));
    assert_eq!(insts[0].src[1], Operand::Literal(0x12345));
    // M0 is 125, null 124, s105 an SGPR.
    assert_eq!(insts[1].dst[0], sp(Special::M0));
    assert_eq!(insts[2].dst[0], sp(Special::Null));
    assert_eq!(insts[2].src[0], Operand::Sgpr(105));
    assert_eq!(insts[3].op, Opcode::Gfx11(Gfx11Op::SAndSaveexecB32));
    assert_eq!(insts[3].src[0], sp(Special::VccLo));
    // SMEM: the immediate offset, the SGPR offset (null: none).
    assert_eq!(insts[4].op, Opcode::Smem(SmemOp::SLoadDwordx2));
    assert_eq!((insts[4].imm, insts[4].src[1]), (0x10, Operand::None));
    assert_eq!(
        insts[5].src,
        [Operand::Sgpr(4), Operand::Sgpr(7), Operand::None]
    );
    assert_eq!(insts[5].imm, 0x20);
    assert!(insts[5].mods.glc);
    // The VOP3 form of v_add_nc_u32 is gfx9's v_add_u32.
    assert_eq!(insts[6].op, Opcode::Vop2(Vop2Op::VAddU32));
    assert_eq!(insts[6].src[1], Operand::Int(1));
    // VOP3SD: the carry-out SGPR.
    assert_eq!(insts[7].op, Opcode::Vop2(Vop2Op::VAddCoU32));
    assert_eq!(insts[7].encoding, Encoding::Vop3b);
    assert_eq!(insts[7].dst, [Operand::Vgpr(1), Operand::Sgpr(5)]);
    assert_eq!(insts[8].op, Opcode::Vop2(Vop2Op::VAddcCoU32));
    assert_eq!(insts[8].src[2], sp(Special::VccLo));
    assert_eq!(insts[9].dst[0], Operand::Sgpr(7));
    // gfx11's v_cmpx writes EXEC only.
    assert_eq!(insts[10].op, Opcode::Vopc(VopcOp::VCmpxGtU32));
    assert_eq!(insts[10].dst[0], sp(Special::ExecLo));
    // A literal in VOP3, the modifiers.
    assert_eq!(insts[11].op, Opcode::Vop3(Vop3Op::VFmaF32));
    assert_eq!(insts[11].src[2], Operand::Literal(0x1234));
    assert!(insts[11].mods.clamp);
    assert_eq!((insts[11].mods.neg, insts[11].mods.abs), (1, 2));
    // v_fmaak_f32: v_fma_f32 with K as source 2.
    assert_eq!(insts[12].op, Opcode::Vop3(Vop3Op::VFmaF32));
    assert_eq!(
        insts[12].src,
        [
            Operand::Vgpr(2),
            Operand::Vgpr(3),
            Operand::Literal(0x4000_0000)
        ]
    );
    assert_eq!(insts[13].op, Opcode::Vop2(Vop2Op::VCndmaskB32));
    assert_eq!(insts[13].src[2], sp(Special::VccLo));
    assert_eq!(insts[14].op, Opcode::Ds(DsOp::DsWriteB32));
    assert_eq!(insts[14].imm, 16);
    assert_eq!(insts[15].op, Opcode::Ds(DsOp::DsGwsInit));
    assert!(insts[15].mods.gds);
    assert_eq!(insts[16].op, Opcode::Flat(Segment::Flat, FlatOp::LoadDword));
    assert_eq!(insts[16].imm, 16);
    assert!(insts[16].mods.glc && insts[16].mods.slc);
    assert_eq!(
        insts[17].op,
        Opcode::Flat(Segment::Global, FlatOp::LoadDword)
    );
    assert_eq!((insts[17].imm, insts[17].src[2]), (-16, Operand::Sgpr(4)));
    assert_eq!(
        insts[18].op,
        Opcode::Flat(Segment::Global, FlatOp::StoreDword)
    );
    assert_eq!(insts[18].src[2], Operand::None);
    // Scratch: SVE (the VGPR address used) kept in `mods.lds`, SADDR.
    assert_eq!(
        insts[19].op,
        Opcode::Flat(Segment::Scratch, FlatOp::LoadDword)
    );
    assert!(insts[19].mods.lds);
    assert_eq!(insts[19].src[2], Operand::None);
    assert!(!insts[20].mods.lds);
    assert_eq!(insts[20].src[2], Operand::Sgpr(4));
    assert_eq!(insts[21].imm & 0x3f, 20, "hwreg id FLAT_SCR_LO");
    assert_eq!(insts[22].op, Opcode::Gfx11(Gfx11Op::SWaitcntVscnt));
    assert_eq!(insts[23].op, Opcode::Gfx11(Gfx11Op::SDelayAlu));
    assert_eq!(insts[24].op, Opcode::Sopp(SoppOp::SEndpgm));
}

#[test]
fn unknown_and_unsupported_encodings_are_typed_errors() {
    use kfd_gfx9::DecodeError;
    // VOPD's v_dual_mul_dx9_zero_f32 (OPX 7, not modelled), an unknown SOP1 opcode,
    // a truncated VOP3, a truncated VOPD.
    assert!(matches!(
        gfx11::decode(&[0xc9c8_0002, 0x0104_0d05]),
        Err(DecodeError::Unsupported {
            what: "VOPD operation",
            ..
        })
    ));
    assert!(matches!(
        gfx11::decode(&[0xca08_0102]),
        Err(DecodeError::Truncated { needed: 2, .. })
    ));
    assert!(matches!(
        gfx11::decode(&[0xbe80_ff00]),
        Err(DecodeError::UnknownOpcode {
            encoding: Encoding::Sop1,
            op: 0xff,
            ..
        })
    ));
    // DPP8 (SRC0 233), and DPP16's reserved gfx9 control wave_shl (0x130).
    assert!(matches!(
        gfx11::decode(&[0x7e02_02e9, 0]),
        Err(DecodeError::Unsupported { .. })
    ));
    assert!(matches!(
        gfx11::decode(&[0x7e02_02fa, 0xff01_3002]),
        Err(DecodeError::IllegalOperand { code: 0x130 })
    ));
    assert!(matches!(
        gfx11::decode(&[0xd613_0001]),
        Err(DecodeError::Truncated { needed: 2, .. })
    ));
    assert!(matches!(
        gfx11::decode(&[]),
        Err(DecodeError::Truncated { .. })
    ));
}

/// A gfx11 kernel's `.text` and 64-byte descriptor, assembled by llvm-mc-19 from `body` and
/// the `.amdhsa_kernel` `directives`.
fn kernel(body: &str, directives: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let src = format!(
        ".amdgcn_target \"amdgcn-amd-amdhsa--gfx1100\"\n.text\n.globl k\n.p2align 8\n\
         .type k,@function\nk:\n{body}\n.rodata\n.p2align 6\n.amdhsa_kernel k\n\
         .amdhsa_next_free_vgpr 32\n.amdhsa_next_free_sgpr 32\n{directives}\n\
         .end_amdhsa_kernel\n"
    );
    let text = common::assemble_for("gfx1100", &src)?;
    let dir = std::env::temp_dir().join(format!(
        "kfd-gfx11-kd-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (s, o, b) = (dir.join("k.s"), dir.join("k.o"), dir.join("kd.bin"));
    std::fs::write(&s, &src).unwrap();
    let ok = Command::new("llvm-mc-19")
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
            "-filetype=obj",
            "-o",
        ])
        .arg(&o)
        .arg(&s)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let ok = Command::new("llvm-objcopy-19")
        .args(["-O", "binary", "--only-section=.rodata"])
        .arg(&o)
        .arg(&b)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let kd = std::fs::read(&b).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some((text, kd))
}

/// Where the descriptor goes; kernel arguments; scratch.
const DESC: u64 = 0x1_8000_0000;
const KERNARG: u64 = 0x3_0000_1000;
const SCRATCH: u64 = 0x7_0000_0000;

/// The memory (code, descriptor, kernarg = `args` dwords) and the dispatch of `grid`
/// work-items in groups of `wg` on gfx11.
fn setup(
    text: &[u8],
    kd: &[u8],
    args: &[u64],
    grid: [u32; 3],
    wg: [u32; 3],
) -> (TestMemory, Dispatch) {
    let mem = TestMemory::with_code(text);
    let mut kd = kd.to_vec();
    kd[16..24].copy_from_slice(&(CODE.wrapping_sub(DESC) as i64).to_le_bytes());
    let mut page = kd.clone();
    page.resize(4096, 0);
    mem.map(DESC, page);
    let mut ka: Vec<u8> = args.iter().flat_map(|a| a.to_le_bytes()).collect();
    ka.resize(4096, 0);
    mem.map(KERNARG, ka);
    mem.map(SCRATCH, vec![0; 1 << 20]);
    let parsed = KernelDescriptor::parse_for(&kd, Target::Gfx11).expect("descriptor");
    let d = Dispatch {
        target: Target::Gfx11,
        kd: parsed,
        entry: parsed.entry(DESC),
        grid,
        workgroup: wg,
        kernarg: KERNARG,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: parsed.private_segment_fixed_size,
        group_segment_size: parsed.group_segment_fixed_size,
        scratch: Scratch {
            srd: [0; 4],
            base: SCRATCH,
            wave_bytes: 4096,
            slots: 64,
        },
        apertures: Apertures {
            shared_base: 0x1000_0000_0000_0000,
            private_base: 0x2000_0000_0000_0000,
            ..Apertures::default()
        },
        user_data: None,
    };
    (mem, d)
}

const WAVE32: &str = ".amdhsa_wavefront_size32 1
.amdhsa_user_sgpr_kernarg_segment_ptr 1
.amdhsa_system_sgpr_workgroup_id_x 1";

/// out[i] = in[i] + i * 3 for i < n, per work-item, wave32: global loads and stores with an
/// SGPR base, VOP3 literals, the work-item id packed in v0 and the workgroup id in s2.
#[test]
fn a_wave32_kernel_runs_every_work_item_once() {
    let body = "
  s_load_b128 s[4:7], s[0:1], 0x0
  s_load_b32 s8, s[0:1], 0x10
  v_and_b32 v0, 0x3ff, v0
  s_lshl_b32 s9, s2, 6
  v_add_nc_u32 v1, s9, v0
  s_waitcnt lgkmcnt(0)
  v_cmp_gt_u32_e32 vcc_lo, s8, v1
  s_and_saveexec_b32 s10, vcc_lo
  s_cbranch_execz .Ldone
  v_lshlrev_b32 v2, 2, v1
  global_load_b32 v3, v2, s[4:5]
  v_mul_lo_u32 v4, v1, 3
  s_waitcnt vmcnt(0)
  v_add_nc_u32 v3, v3, v4
  global_store_b32 v2, v3, s[6:7]
.Ldone:
  s_endpgm";
    let Some((text, kd)) = kernel(body, WAVE32) else {
        return;
    };
    let (inp, out) = (DATA, DATA + 0x1000);
    let n = 100u32;
    let (mem, d) = setup(
        &text,
        &kd,
        &[inp, out, u64::from(n)],
        [128, 1, 1],
        [64, 1, 1],
    );
    assert!(d.kd.wave32());
    assert_eq!(d.waves_per_group(), 2, "64 work-items are two wave32 waves");
    let input: Vec<u8> = (0..128u32).flat_map(|i| (i * 1000).to_le_bytes()).collect();
    mem.put(inp, &input);
    let stats = run(&d, &mem, &RunOptions { threads: 2 }, &NoObserver).expect("runs");
    assert_eq!(stats.waves, 4);
    for i in 0..128u32 {
        let want = if i < n { i * 1000 + i * 3 } else { 0 };
        assert_eq!(mem.u32(out + 4 * u64::from(i)), want, "item {i}");
    }
}

/// Runs `asm` as one wave32 wave with every lane on; the wave after it.
fn wave32(asm: &str, setup: impl FnOnce(&mut Wave, &TestMemory)) -> Option<common::Run> {
    let r = common::run_on(Target::Gfx11, "gfx1100", asm, |w, m| {
        w.wave32 = true;
        w.exec = u64::from(u32::MAX);
        setup(w, m);
    })?;
    assert_eq!(r.end, Ok(Flow::End), "{:?}", r.wave);
    Some(r)
}

/// Lane masks are 32 bits in wave32: a compare into an SGPR writes it alone (its pair's
/// second register keeps its value), a carry-out too, VCC_HI is not written, EXEC_HI stays
/// zero, and `s_cbranch_vccz` looks at VCC_LO only.
#[test]
fn wave32_lane_masks_are_one_register() {
    let asm = "
  v_mov_b32 v0, 0
  v_mbcnt_lo_u32_b32 v0, -1, v0
  v_cmp_gt_u32_e64 s6, 5, v0
  v_cmp_gt_u32_e32 vcc_lo, 9, v0
  v_add_co_u32 v1, s8, v0, -3
  v_add_co_ci_u32_e64 v2, s10, v0, 0, s8
  v_cndmask_b32_e64 v3, 10, 20, s6
  s_mov_b32 exec_hi, -1
  s_mov_b32 s12, exec_hi
  s_and_saveexec_b32 s14, s6
  v_mov_b32 v4, 7
  s_mov_b32 exec_lo, s14
  s_mov_b32 vcc_lo, 0
  s_mov_b32 s16, 1
  s_cbranch_vccz .Lz
  s_mov_b32 s16, 2
.Lz:
  s_endpgm";
    let Some(r) = wave32(asm, |w, _| {
        for s in [7, 9, 11, 15] {
            w.sgpr[s] = 0xdead_beef;
        }
        w.vcc = 0xaaaa_aaaa_0000_0000;
    }) else {
        return;
    };
    let w = &r.wave;
    assert_eq!(w.sgpr[6], 0x1f, "lanes 0..5");
    assert_eq!(w.sgpr[7], 0xdead_beef, "s7 is not part of a wave32 mask");
    assert_eq!(
        w.vcc,
        0xaaaa_aaaa_0000_0000 & !0xffff_ffff,
        "vcc_lo cleared last"
    );
    // v0 - 3 carries out for lanes 3.. (unsigned wrap below).
    assert_eq!(w.sgpr[8], !0b111u32);
    assert_eq!(w.sgpr[9], 0xdead_beef);
    assert_eq!(w.sgpr[10], 0, "v0 + 0 + carry never carries out");
    assert_eq!(w.sgpr[11], 0xdead_beef);
    for lane in 0..32 {
        let l = lane as u32;
        assert_eq!(w.vgpr[1][lane], l.wrapping_sub(3));
        assert_eq!(w.vgpr[2][lane], l + u32::from(l >= 3));
        assert_eq!(w.vgpr[3][lane], if l < 5 { 20 } else { 10 });
        assert_eq!(w.vgpr[4][lane], if l < 5 { 7 } else { 0 });
    }
    assert_eq!(w.sgpr[12], 0, "exec_hi stays zero in wave32");
    assert_eq!(w.sgpr[14], u32::MAX, "the saved EXEC_LO");
    assert_eq!(w.sgpr[15], 0xdead_beef);
    assert_eq!(w.exec, u64::from(u32::MAX));
    assert_eq!(w.sgpr[16], 1, "vccz: VCC_LO is zero");
}

/// gfx11's `v_cmpx` writes EXEC alone (no SGPR result, gfx9 wrote VCC too).
#[test]
fn wave32_cmpx_writes_exec_only() {
    let asm = "
  v_mov_b32 v0, 0
  v_mbcnt_lo_u32_b32 v0, -1, v0
  v_cmpx_gt_u32_e32 12, v0
  s_mov_b32 s0, exec_lo
  s_endpgm";
    let Some(r) = wave32(asm, |w, _| w.vcc = 0x1234) else {
        return;
    };
    assert_eq!(r.wave.sgpr[0], 0xfff);
    assert_eq!(r.wave.vcc, 0x1234);
}

/// FLAT_SCRATCH is a hardware register on gfx11 (`s_setreg` of HW_REG_FLAT_SCR_LO/HI, as
/// the kernel prolog and kfdtest's scratch shader write it), and a wave32 wave's private
/// memory interleaves its dwords across 32 lanes.
#[test]
fn wave32_scratch_is_swizzled_by_32_lanes() {
    let asm = "
  s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s0
  s_setreg_b32 hwreg(HW_REG_FLAT_SCR_HI), s1
  s_getreg_b32 s2, hwreg(HW_REG_FLAT_SCR_HI)
  v_mov_b32 v0, 0
  v_mbcnt_lo_u32_b32 v0, -1, v0
  v_add_nc_u32 v1, 0x100, v0
  scratch_store_b32 off, v1, off offset:4
  s_endpgm";
    let base = DATA + 0x8000;
    let Some(r) = wave32(asm, |w, _| {
        w.sgpr[0] = base as u32;
        w.sgpr[1] = (base >> 32) as u32;
    }) else {
        return;
    };
    assert_eq!(r.wave.flat_scratch, base);
    assert_eq!(r.wave.sgpr[2], (base >> 32) as u32);
    // Dword 1 of lane l is at base + (1 * 32 + l) * 4.
    for l in 0..32u64 {
        assert_eq!(r.mem.u32(base + (32 + l) * 4), 0x100 + l as u32, "lane {l}");
    }
    assert_eq!(r.mem.u32(base + 64 * 4), 0, "nothing past lane 31");
}

/// The work-item ids of a 2-D wave32 workgroup: packed in v0 (X bits 0–9, Y 10–19), each
/// wave of 32 work-items starting where the last ended, the partial last wave's lanes off.
#[test]
fn wave32_work_item_ids_are_packed_in_v0() {
    let Some((text, kd)) = kernel(
        "s_endpgm",
        ".amdhsa_wavefront_size32 1\n.amdhsa_system_vgpr_workitem_id 1",
    ) else {
        return;
    };
    let (_, d) = setup(&text, &kd, &[], [10, 5, 1], [10, 5, 1]);
    assert_eq!(d.waves_per_group(), 2);
    let w0 = d.wave_setup([0, 0, 0], 0, 0);
    let w1 = d.wave_setup([0, 0, 0], 1, 1);
    assert!(w0.wave32 && w1.wave32);
    assert_eq!(w0.exec, u64::from(u32::MAX));
    assert_eq!(w1.exec, (1 << 18) - 1, "50 items: 32 + 18");
    for lane in 0..32 {
        let item = lane as u32;
        assert_eq!(w0.vgpr[0][lane], (item % 10) | ((item / 10) << 10));
    }
    for lane in 0..18 {
        let item = 32 + lane as u32;
        assert_eq!(w1.vgpr[0][lane], (item % 10) | ((item / 10) << 10));
    }
}

/// A wave64 gfx11 kernel (no `.amdhsa_wavefront_size32`) still runs 64 lanes.
#[test]
fn gfx11_wave64_kernels_run_64_lanes() {
    let Some((text, kd)) = kernel("s_endpgm", ".amdhsa_wavefront_size32 0") else {
        return;
    };
    let (_, d) = setup(&text, &kd, &[], [100, 1, 1], [100, 1, 1]);
    assert!(!d.kd.wave32());
    assert_eq!(d.waves_per_group(), 2);
    assert_eq!(d.wave_setup([0, 0, 0], 1, 1).exec, (1 << 36) - 1);
}

/// gfx9 targets still refuse a wave32 descriptor.
#[test]
fn wave32_descriptors_are_refused_on_gfx9() {
    let mut kd = [0u8; 64];
    kd[57] = 1 << 2;
    assert!(KernelDescriptor::parse_for(&kd, Target::Gfx90a).is_err());
    assert!(
        KernelDescriptor::parse_for(&kd, Target::Gfx11)
            .unwrap()
            .wave32()
    );
}

/// Programs decode instruction by instruction where `llvm-objdump-19` says each starts, with
/// the opcode it names: the instructions kfdtest's gfx11 shaders use (its `ShaderStore.cpp`,
/// LLVM-assembled for gfx1100) in programs of our own.
#[test]
fn shader_programs_decode_as_llvm_lists_them() {
    let asm = "
  s_mov_b32 m0, 0
  s_mov_b32 exec_lo, 1
  s_movk_i32 s18, 0x5678
  v_mov_b32 v0, s2
  v_mov_b32 v2, 0x5678
.Lloop:
  s_load_b32 s16, s[0:1], 0x0 glc
  s_waitcnt lgkmcnt(0)
  s_cmp_eq_i32 s16, s18
  s_cbranch_scc0 .Lloop
  s_add_u32 s2, s0, 8
  s_addc_u32 s3, s1, 0
  s_and_b32 s4, s4, 0xffff
  s_or_b32 s5, s5, 1
  s_lshr_b32 s6, s6, 2
  s_and_b64 s[8:9], s[8:9], exec
  s_cmp_le_i32 s4, 3
  s_cbranch_scc1 .Lloop
  s_cbranch_vccnz .Lloop
  s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s4
  s_getreg_b32 s7, hwreg(HW_REG_MODE)
  v_add_co_u32 v4, vcc_lo, v0, v1
  v_add_co_ci_u32_e64 v5, null, v1, 0, vcc_lo
  v_cmp_lt_u32_e32 vcc_lo, v0, v1
  v_cmp_eq_u32_e64 s10, v0, v1
  v_add_nc_u32_e64 v2, v2, 1
  v_lshlrev_b32 v3, 2, v0
  v_cvt_f32_i32 v6, v0
  v_add_f32 v6, 1.0, v6
  v_mul_f32 v6, v6, v6
  v_exp_f32 v7, v6
  v_log_f32 v7, v7
  v_sqrt_f32 v7, v7
  v_rsq_f32 v7, v7
  flat_load_b32 v4, v[0:1] glc dlc
  flat_load_b64 v[4:5], v[0:1]
  flat_store_b32 v[2:3], v4 slc
  flat_atomic_add_u32 v4, v[0:1], v2 glc
  s_waitcnt_vscnt null, 0x0
  ds_gws_init v0 gds
  ds_gws_sema_v gds
  ds_gws_sema_p gds
  s_nop 0
  s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)
  s_trap 2
  s_branch .Lloop
  s_endpgm";
    let Some(out) = mc(&["-show-encoding"], asm) else {
        return;
    };
    let mut table = BTreeMap::new();
    for (enc, raw, name, op) in gfx11::table() {
        table.insert((format!("{enc:?}"), raw), (name, op));
    }
    let listed = encodings(&out);
    assert!(listed.len() > 40);
    let words: Vec<u32> = listed.iter().flat_map(|(_, w)| w.clone()).collect();
    let mut at = 0;
    for (text, w) in &listed {
        let inst = gfx11::decode(&words[at..]).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(usize::from(inst.dwords), w.len(), "{text}");
        at += w.len();
        // The decoded operation is the table entry LLVM's mnemonic names.
        let name = mnemonic(text);
        let want = table
            .values()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is in the tables"))
            .1;
        match (inst.op, want) {
            (Opcode::Flat(_, a), Opcode::Flat(_, b)) => assert_eq!(a, b, "{text}"),
            (got, want) => assert_eq!(got, want, "{text}"),
        }
    }
    assert_eq!(at, words.len());
    let _ = (Vop1Op::VMovB32, Sop1Op::SMovB32);
}

#[test]
fn vopd_pairs_decode_into_their_two_operations() {
    let asm = "v_dual_mov_b32 v1, v2 :: v_dual_add_f32 v4, v5, v6
v_dual_fmac_f32 v1, v2, v3 :: v_dual_add_nc_u32 v6, v7, v8
v_dual_fmaak_f32 v1, v2, v3, 0x40000000 :: v_dual_fmamk_f32 v4, v5, 0x40000000, v6
v_dual_cndmask_b32 v1, v2, v3 :: v_dual_lshlrev_b32 v4, v5, v6
v_dual_mul_f32 v1, s2, v3 :: v_dual_and_b32 v4, 0x1234, v6";
    let Some(d) = decoded(asm) else { return };
    let halves: Vec<[Inst; 2]> = d
        .iter()
        .map(|(t, i)| gfx11::vopd_ops(i).unwrap_or_else(|| panic!("{t}")))
        .collect();
    let v = Operand::Vgpr;
    let op = |h: &Inst| h.op;
    assert_eq!(op(&halves[0][0]), Opcode::Vop1(Vop1Op::VMovB32));
    assert_eq!((halves[0][0].dst[0], halves[0][0].src[0]), (v(1), v(2)));
    assert_eq!(op(&halves[0][1]), Opcode::Vop2(Vop2Op::VAddF32));
    assert_eq!(halves[0][1].dst[0], v(4));
    assert_eq!(halves[0][1].src[..2], [v(5), v(6)]);
    assert_eq!(op(&halves[1][0]), Opcode::Vop2(Vop2Op::VFmacF32));
    assert_eq!(op(&halves[1][1]), Opcode::Vop2(Vop2Op::VAddU32));
    assert_eq!(halves[1][1].dst[0], v(6));
    let k = Operand::Literal(0x4000_0000);
    assert_eq!(halves[2][0].src, [v(2), v(3), k]);
    assert_eq!(halves[2][1].src, [v(5), k, v(6)]);
    assert_eq!(d[2].1.dwords, 3, "one shared literal");
    assert_eq!(halves[3][0].src[2], Operand::Special(Special::VccLo));
    assert_eq!(op(&halves[3][1]), Opcode::Vop2(Vop2Op::VLshlrevB32));
    assert_eq!(halves[4][0].src[0], Operand::Sgpr(2));
    assert_eq!(halves[4][1].src[0], Operand::Literal(0x1234));
    assert_eq!(op(&halves[4][1]), Opcode::Vop2(Vop2Op::VAndB32));
}

/// VOPD's halves read their sources before either writes: the second half sees the first's
/// destination as it was (a swap through two moves), arithmetic pairs compute both.
#[test]
fn vopd_halves_read_before_either_writes() {
    let asm = "
  v_mov_b32 v0, 0
  v_mbcnt_lo_u32_b32 v0, -1, v0
  v_add_nc_u32 v1, 100, v0
  v_cvt_f32_u32 v2, v0
  v_mov_b32 v3, 2.0
  v_mov_b32 v5, 3
  v_mov_b32 v6, 4
  v_dual_mul_f32 v8, v2, v3 :: v_dual_add_nc_u32 v7, v5, v6
  v_dual_fmaak_f32 v10, v2, v3, 0x40400000 :: v_dual_fmamk_f32 v9, v3, 0x40400000, v2
  v_dual_mov_b32 v0, v1 :: v_dual_mov_b32 v1, v0
  s_endpgm";
    let Some(r) = wave32(asm, |_, _| {}) else {
        return;
    };
    for lane in 0..32usize {
        let l = lane as f32;
        let w = &r.wave;
        assert_eq!(f32::from_bits(w.vgpr[8][lane]), l * 2.0);
        assert_eq!(w.vgpr[7][lane], 7);
        assert_eq!(f32::from_bits(w.vgpr[10][lane]), l * 2.0 + 3.0);
        assert_eq!(f32::from_bits(w.vgpr[9][lane]), 2.0 * 3.0 + l);
        assert_eq!(
            (w.vgpr[0][lane], w.vgpr[1][lane]),
            (100 + lane as u32, lane as u32)
        );
    }
}

/// Runs `kernel` of `gfx11.cl` over `grid` work-items in groups of 64; the memory after it.
fn launch11(
    kernel: &str,
    args: &[kernels::Arg],
    buffers: Vec<Vec<u8>>,
    grid: u32,
) -> Option<(kernels::Mem, kfd_gfx9::dispatch::Stats)> {
    let obj = kernels::build_gfx11()?;
    let l = kernels::Launch {
        target: Target::Gfx11,
        kernel,
        args,
        buffers,
        grid: [grid, 1, 1],
        workgroup: [64, 1, 1],
        dynamic_lds: 0,
    };
    let (mem, d) = l.prepare(&obj);
    assert!(d.kd.wave32(), "clang's gfx1100 default is wave32");
    let stats = run(&d, &mem, &RunOptions { threads: 2 }, &NoObserver)
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    Some((mem, stats))
}

fn u32s(m: &kernels::Mem, i: usize, n: usize) -> Vec<u32> {
    m.bytes(kernels::buffer(i), 4 * n)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn input(n: u32) -> Vec<u32> {
    let mut x = 0x1234_5678_9abc_def1u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 16) as u32
        })
        .collect()
}

fn le(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn a_compiled_gfx1100_kernel_uses_vopd_and_runs() {
    use kernels::Arg;
    let n = 1000u32;
    let x: Vec<f32> = input(n)
        .iter()
        .map(|&v| (v % 2000) as f32 / 16.0 - 60.0)
        .collect();
    let y: Vec<f32> = input(n).iter().map(|&v| (v % 777) as f32 / 8.0).collect();
    let bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|f| f.to_le_bytes()).collect() };
    let Some((mem, stats)) = launch11(
        "axpy2",
        &[Arg::Buf(0), Arg::Buf(1), Arg::F32(1.5), Arg::U32(n)],
        vec![bytes(&y), bytes(&x)],
        1024,
    ) else {
        return;
    };
    assert_eq!(stats.waves, 32, "1024 work-items in waves of 32");
    let got = u32s(&mem, 0, n as usize);
    for i in 0..n as usize {
        let (xi, yi) = (x[i], y[i]);
        let u = 1.5f32 * xi + yi;
        let v = xi * 3.0 - yi * 0.5;
        let want = u * v + (u - v) * 2.0;
        assert_eq!(got[i], want.to_bits(), "y[{i}]");
    }
    // The compiler paired operations into VOPD: the test ran some.
    let obj = kernels::build_gfx11().unwrap();
    let words: Vec<u32> = obj
        .image
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(
        words.iter().any(|&w| w >> 26 == 0b11_0010),
        "gfx11.cl has no VOPD at all"
    );
}

#[test]
fn compiled_gfx1100_integer_lds_divergence_and_atomic_kernels_agree_with_the_host() {
    use kernels::Arg;
    let n = 512u32;
    let inp = input(n);
    // ints
    let Some((mem, _)) = launch11(
        "ints",
        &[Arg::Buf(0), Arg::Buf(1), Arg::U32(n)],
        vec![vec![0; 4 * n as usize], le(&inp)],
        n,
    ) else {
        return;
    };
    let got = u32s(&mem, 0, n as usize);
    for (i, &v) in inp.iter().enumerate() {
        let mut s = 0u32;
        for k in 0..(v & 7) {
            s = s.wrapping_add((v >> k) ^ k.wrapping_mul(0x9e37_79b9));
        }
        let want = s
            .wrapping_add(v / 7)
            .wrapping_add((v % 13).wrapping_mul(v & 0xff))
            .wrapping_add(v << 3);
        assert_eq!(got[i], want, "ints[{i}]");
    }
    // wg_sum: 8 workgroups of 64 (two waves each, joined by s_barrier).
    let small: Vec<u32> = inp.iter().map(|v| v & 0xffff).collect();
    let (mem, _) = launch11(
        "wg_sum",
        &[Arg::Buf(0), Arg::Buf(1)],
        vec![vec![0; 64], le(&small)],
        n,
    )
    .unwrap();
    let got = u32s(&mem, 0, 8);
    for g in 0..8 {
        let want: u32 = small[g * 64..g * 64 + 64].iter().sum();
        assert_eq!(got[g], want, "group {g}");
    }
    // diverge: the ballot is a wave32 mask of the wave's 32 work-items.
    let (mem, _) = launch11(
        "diverge",
        &[Arg::Buf(0), Arg::Buf(1)],
        vec![vec![0; 8 * n as usize], le(&inp)],
        n,
    )
    .unwrap();
    let got = u32s(&mem, 0, 2 * n as usize);
    for (i, &v) in inp.iter().enumerate() {
        let r = if v & 1 == 1 {
            v.wrapping_mul(3).wrapping_add(1)
        } else {
            v / 2
        };
        assert_eq!(got[2 * i], r, "diverge[{i}]");
        let wave = i / 32 * 32;
        let ballot = (0..32).fold(0u32, |b, l| b | (inp[wave + l] & 1) << l);
        assert_eq!(got[2 * i + 1], ballot, "ballot of work-item {i}");
    }
    // atomics
    let (mem, _) = launch11(
        "atomics",
        &[Arg::Buf(0), Arg::Buf(1)],
        vec![le(&[0, 0, u32::MAX]), le(&small)],
        n,
    )
    .unwrap();
    let got = u32s(&mem, 0, 3);
    assert_eq!(got[0], small.iter().sum::<u32>());
    assert_eq!(got[1], *small.iter().max().unwrap());
    assert_eq!(got[2], *small.iter().min().unwrap());
}

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn u32(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

/// The operand bits of an encoding's first dword (the opcode and encoding bits kept).
fn operand_bits(enc: Encoding) -> u32 {
    match enc {
        Encoding::Sop2 | Encoding::Sopk => 0x007f_ffff,
        Encoding::Sop1 => 0x007f_00ff,
        Encoding::Sopc | Encoding::Sopp => 0x0000_ffff,
        Encoding::Smem => 0x0000_7fff,
        Encoding::Vop2 => 0x01ff_ffff,
        Encoding::Vop1 => 0x01fe_01ff,
        Encoding::Vopc => 0x0001_ffff,
        Encoding::Ds => 0x0003_ffff,
        _ => 0x0000_ffff,
    }
}

/// Random operands around every table opcode: no input panics, and wherever the decoder
/// takes an encoding that LLVM also decodes, both read the same length (literals, the VOPD
/// K, the 64-bit forms) and the same operation.
#[test]
fn random_operands_decode_as_llvm_reads_them() {
    let table: Vec<_> = gfx11::table().collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut samples = Vec::new();
    for round in 0..6 {
        for &(enc, raw, name, _) in &table {
            let base = &variants(enc, u32::from(raw))[0];
            let w0 = base[0] ^ (rng.u32() & operand_bits(enc));
            // Round 0 keeps the literal dword a value no inline constant has (LLVM re-encodes
            // an inlinable literal as the constant, one dword shorter); later rounds random.
            let words = [
                w0,
                rng.u32(),
                if round == 0 { 0x1234_5679 } else { rng.u32() },
            ];
            if let Ok(inst) = gfx11::decode(&words) {
                samples.push((name, words[..usize::from(inst.dwords)].to_vec(), inst));
            }
        }
    }
    // And words of no particular encoding: decoded or refused, never a panic.
    for _ in 0..200_000 {
        let words = [rng.u32(), rng.u32(), rng.u32()];
        if let Ok(inst) = gfx11::decode(&words) {
            assert!((1..=3).contains(&inst.dwords));
        }
    }
    // Two `s_nop 7` then `s_nop 6`: an instruction LLVM reads longer than the decoder
    // (at most 3 dwords) eats only `s_nop 7`s.
    let marker = [0xbf80_0007u32, 0xbf80_0007, 0xbf80_0006];
    let input: String = samples
        .iter()
        .map(|(_, w, _)| {
            let b: Vec<String> = w
                .iter()
                .chain(&marker)
                .flat_map(|w| w.to_le_bytes())
                .map(|b| format!("{b:#04x}"))
                .collect();
            format!("{}\n", b.join(" "))
        })
        .collect();
    let Some((out, err)) = mc_both(&["--disassemble", "-show-encoding"], &input) else {
        return;
    };
    // LLVM refuses an instruction with a warning at its first byte (`<stdin>:LINE:1:`) and
    // goes on at the next dword.
    let refused_lines: std::collections::BTreeSet<usize> = err
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("<stdin>:")?;
            let (line, rest) = rest.split_once(':')?;
            rest.starts_with("1:").then(|| line.parse().ok())?
        })
        .collect();
    let mut chunks: Vec<Vec<(String, usize)>> = vec![Vec::new()];
    for (text, words) in encodings(&out) {
        if text == "s_nop 7" {
            continue;
        }
        if text == "s_nop 6" {
            chunks.push(Vec::new());
        } else if let Some(c) = chunks.last_mut() {
            c.push((text, words.len()));
        }
    }
    assert_eq!(chunks.len(), samples.len() + 1);
    let strip = |m: &str| {
        let m = mnemonic(m).to_string();
        ["flat_", "global_", "scratch_"]
            .iter()
            .find_map(|p| m.strip_prefix(p).map(String::from))
            .unwrap_or(m)
    };
    let (mut agreed, mut refused, mut wrong) = (0, 0, Vec::new());
    for (line, ((name, words, inst), chunk)) in samples.iter().zip(chunks).enumerate() {
        if refused_lines.contains(&(line + 1)) {
            refused += 1;
            continue;
        }
        match chunk.as_slice() {
            [(text, len)] => {
                // LLVM re-encodes a float inline constant of a 16-bit integer operation as a
                // literal (its f16 bits): one dword longer, the same value read.
                let f16_const = inst.src.iter().any(|o| matches!(o, Operand::Float(_)))
                    && *len == words.len() + 1
                    && name.contains("16");
                if (*len != words.len() && !f16_const) || strip(text) != strip(name) {
                    wrong.push(format!(
                        "{words:08x?}: ours {name} ({}), LLVM {text} ({len})",
                        words.len()
                    ));
                } else {
                    agreed += 1;
                }
            }
            // LLVM refused (it checks operand classes the decoder leaves to execution).
            _ => refused += 1,
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
    assert!(agreed > 2500, "{agreed} agreed, {refused} refused by LLVM");
}

/// DPP16 in wave32 (gfx10+'s controls): row_shr within each 16-lane row (the row's first
/// lane keeps its old value), row_xmask (lane `i ^ n` of the row), row_share (lane n of the
/// row), quad_perm; the source modifiers; FI is refused.
#[test]
fn wave32_dpp16_moves_lanes_within_rows() {
    let asm = "
  v_mov_b32 v0, 0
  v_mbcnt_lo_u32_b32 v0, -1, v0
  v_mov_b32 v1, 77
  v_mov_b32_dpp v1, v0 row_shr:1 row_mask:0xf bank_mask:0xf
  v_add_nc_u32_dpp v2, v0, v0 row_xmask:5 row_mask:0xf bank_mask:0xf
  v_mov_b32_dpp v3, v0 row_share:3 row_mask:0xf bank_mask:0xf
  v_mov_b32_dpp v4, v0 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
  v_cvt_f32_u32 v5, v0
  v_add_f32_dpp v6, -v5, v5 row_mirror row_mask:0xf bank_mask:0xf
  v_cmp_gt_u32_dpp vcc_lo, v0, v0 row_ror:1 row_mask:0xf bank_mask:0xf
  s_mov_b32 s0, vcc_lo
  s_endpgm";
    let Some(r) = wave32(asm, |_, _| {}) else {
        return;
    };
    let w = &r.wave;
    let mut cmp = 0u32;
    for lane in 0..32usize {
        let (row, i) = (lane & 16, lane & 15);
        let l = lane as u32;
        let want1 = if i >= 1 { l - 1 } else { 77 };
        assert_eq!(w.vgpr[1][lane], want1, "row_shr lane {lane}");
        assert_eq!(
            w.vgpr[2][lane],
            (row + (i ^ 5)) as u32 + l,
            "row_xmask lane {lane}"
        );
        assert_eq!(w.vgpr[3][lane], (row + 3) as u32, "row_share lane {lane}");
        assert_eq!(w.vgpr[4][lane], l ^ 1, "quad_perm lane {lane}");
        let mirrored = (row + 15 - i) as f32;
        assert_eq!(
            f32::from_bits(w.vgpr[6][lane]),
            -mirrored + l as f32,
            "lane {lane}"
        );
        // row_ror:1: the source is lane (i + 15) % 16 of the row... rotated right by one.
        let src = (row + (i + 16 - 1) % 16) as u32;
        if src > l {
            cmp |= 1 << lane;
        }
    }
    assert_eq!(w.sgpr[0], cmp);
    let fi = [0x7e02_02fa, 0xff05_5302]; // v_mov_b32_dpp v1, v2 row_share:3 fi:1
    assert!(matches!(
        gfx11::decode(&fi),
        Err(kfd_gfx9::DecodeError::Unsupported { .. })
    ));
}

/// A compiled gfx1100 kernel whose array lives in scratch: its prolog's `s_setreg` of
/// FLAT_SCRATCH and the `scratch_*` accesses, each wave32 wave in its own slot.
#[test]
fn a_compiled_gfx1100_kernel_keeps_its_array_in_scratch() {
    use kernels::Arg;
    let n = 256u32;
    let inp = input(n);
    let Some(obj) = kernels::build_gfx11() else {
        return;
    };
    let kd_at = obj.symbols["priv.kd"] as usize;
    let kd = KernelDescriptor::parse_for(&obj.image[kd_at..kd_at + 64], Target::Gfx11).unwrap();
    assert!(
        kd.private_segment_fixed_size >= 160,
        "the array is in scratch"
    );
    let (mem, _) = launch11(
        "priv",
        &[Arg::Buf(0), Arg::Buf(1)],
        vec![vec![0; 4 * n as usize], le(&inp)],
        n,
    )
    .unwrap();
    let got = u32s(&mem, 0, n as usize);
    for (i, &v) in inp.iter().enumerate() {
        let a = |k: u32| v.wrapping_mul(k).wrapping_add(k);
        let idx = v % 40;
        assert_eq!(got[i], a(idx).wrapping_add(a((idx + 7) % 40)), "priv[{i}]");
    }
}

/// The SPI and the first-level trap handler as an embedder models them for gfx11: a trap
/// goes to `handler` with TTMP12 = STATUS; `s_sendmsg_rtn` MSG_RTN_GET_DOORBELL answers
/// 0x52a (bits above 9:0 set, which the handler masks off) and MSG_RTN_GET_TMA
/// 0x1234_5678_9abc, anything else nothing; traps, questions and messages (with M0 and
/// STATUS.PRIV) recorded.
#[derive(Default)]
struct Spi11 {
    handler: u64,
    traps: Mutex<Vec<(u16, u32, u32)>>,
    asked: Mutex<Vec<u16>>,
    messages: Mutex<Vec<(u16, u32, bool)>>,
}

impl Observer for Spi11 {
    fn trap(&self, _: [u32; 3], _: u32, w: &mut Wave, trap_id: u16) -> bool {
        self.traps
            .lock()
            .unwrap()
            .push((trap_id, w.ttmp[0], w.ttmp[1]));
        w.ttmp[12] = w.read_hwreg(2);
        w.pc = self.handler;
        true
    }
    fn message(&self, _: [u32; 3], _: u32, w: &mut Wave, simm16: u16) {
        let privileged = w.read_hwreg(2) & 1 << 5 != 0;
        self.messages
            .lock()
            .unwrap()
            .push((simm16, w.m0, privileged));
    }
    fn message_rtn(&self, _: [u32; 3], _: u32, _: &Wave, msg: u16) -> Option<u64> {
        self.asked.lock().unwrap().push(msg);
        match msg {
            128 => Some(0x52a),
            130 => Some(0x1234_5678_9abc),
            _ => None,
        }
    }
}

/// kfdtest's gfx11 `TrapHandlerIsa` path on a wave32 wave: `s_trap 2` enters the handler
/// with TTMP0/1 = the `s_trap`'s PC and trap id 2 and STATUS.PRIV set; its
/// `s_sendmsg_rtn_b32 MSG_RTN_GET_DOORBELL` gets the doorbell in its SDST (masked to 9:0 by
/// the handler) and `s_sendmsg_rtn_b64 MSG_RTN_GET_TMA` a register pair; its MSG_INTERRUPT
/// (PRIV) names the doorbell with trap code 2; it steps past the `s_trap`, restores M0 and
/// STATUS (SCC with it) and returns with `s_rfe_b64`, which clears PRIV. A message no one
/// answers (MSG_RTN_GET_DDID without an observer) stops the wave as unimplemented.
#[test]
fn a_gfx11_trap_handler_gets_the_doorbell_from_sendmsg_rtn_and_returns() {
    let body = "s_branch main
handler:
  s_sendmsg_rtn_b32 ttmp3, sendmsg(MSG_RTN_GET_DOORBELL)
  s_waitcnt lgkmcnt(0)
  s_and_b32 ttmp3, ttmp3, 0x3ff
  s_mov_b32 ttmp2, m0
  s_sendmsg_rtn_b64 ttmp[14:15], sendmsg(MSG_RTN_GET_TMA)
  s_waitcnt lgkmcnt(0)
  s_mov_b32 m0, ttmp14
  s_sendmsg sendmsg(MSG_INTERRUPT)
  s_mov_b32 m0, ttmp15
  s_sendmsg sendmsg(MSG_INTERRUPT)
  s_or_b32 ttmp3, ttmp3, 0x800
  s_mov_b32 m0, ttmp3
  s_sendmsg sendmsg(MSG_INTERRUPT)
  s_waitcnt lgkmcnt(0)
  s_mov_b32 m0, ttmp2
  s_add_u32 ttmp0, ttmp0, 4
  s_addc_u32 ttmp1, ttmp1, 0
  s_and_b32 ttmp1, ttmp1, 0xffff
  s_setreg_b32 hwreg(HW_REG_STATUS), ttmp12
  s_rfe_b64 ttmp[0:1]
main:
  s_mov_b32 m0, 7
  s_cmp_eq_u32 0, 0
  s_trap 2
  s_cselect_b32 s10, 1, 2
  s_sendmsg sendmsg(MSG_INTERRUPT)
  s_mov_b32 m0, s10
  s_sendmsg sendmsg(MSG_INTERRUPT)
  s_endpgm";
    let Some((text, kd)) = kernel(body, WAVE32) else {
        return;
    };
    let (mem, d) = setup(&text, &kd, &[0], [32, 1, 1], [32, 1, 1]);
    assert!(d.kd.wave32());
    let obs = Spi11 {
        handler: CODE + 4,
        ..Spi11::default()
    };
    run(&d, &mem, &RunOptions { threads: 1 }, &obs).expect("the wave goes on past its trap");
    let traps = obs.traps.into_inner().unwrap();
    let [(2, lo, hi)] = traps[..] else {
        panic!("one s_trap 2: {traps:?}");
    };
    assert_eq!(hi >> 16, 2, "the trap id in TTMP1[23:16]");
    let at = u64::from(hi & 0xffff) << 32 | u64::from(lo);
    let off = (at - CODE) as usize;
    assert_eq!(
        text[off..off + 4],
        0xbf90_0002u32.to_le_bytes(),
        "TTMP0/1 name the s_trap 2"
    );
    assert_eq!(*obs.asked.lock().unwrap(), [128, 130]);
    assert_eq!(
        *obs.messages.lock().unwrap(),
        [
            // The TMA's two halves, then doorbell 0x12a with trap code 2: from the handler.
            (1, 0x5678_9abc, true),
            (1, 0x1234, true),
            (1, 0x92a, true),
            // Past the trap: M0 restored, SCC as before it (1), PRIV cleared by s_rfe_b64.
            (1, 7, false),
            (1, 1, false),
        ]
    );
    // Nothing answers MSG_RTN_GET_DDID: the wave stops at it.
    let Some((text, kd)) = kernel(
        "s_sendmsg_rtn_b32 s5, sendmsg(MSG_RTN_GET_DDID)\n s_endpgm",
        WAVE32,
    ) else {
        return;
    };
    let (mem, d) = setup(&text, &kd, &[0], [32, 1, 1], [32, 1, 1]);
    match run(&d, &mem, &RunOptions { threads: 1 }, &NoObserver) {
        Err(DispatchError::Wave {
            error: ExecError::Unimplemented { pc, op },
            ..
        }) => {
            assert_eq!(pc, CODE);
            assert_eq!(op, Opcode::Gfx11(Gfx11Op::SSendmsgRtnB32));
        }
        other => panic!("{other:?}"),
    }
}

/// Halts the wave at a trap (as a first-level handler with no second level does for trap
/// id 0: STATUS.HALT, `s_rfe_b64`), counts messages, cancels once asked `after` times.
struct HaltAtTrap {
    asked: AtomicUsize,
    after: usize,
    messages: AtomicUsize,
}

impl Observer for HaltAtTrap {
    fn cancelled(&self) -> bool {
        self.asked.fetch_add(1, Ordering::SeqCst) + 1 >= self.after
    }
    fn message(&self, _: [u32; 3], _: u32, _: &mut Wave, _: u16) {
        self.messages.fetch_add(1, Ordering::SeqCst);
    }
    fn trap(&self, _: [u32; 3], _: u32, w: &mut Wave, _: u16) -> bool {
        w.hwreg[2] = (w.hwreg[2] | 1 << 13) & !(1 << 5);
        w.pc += 4;
        true
    }
}

/// A wave its trap observer leaves halted runs nothing more (no message, no `s_endpgm`):
/// only a cancel ends the dispatch.
#[test]
fn a_wave_its_trap_handler_halts_stays_halted() {
    let Some((text, kd)) = kernel(
        "s_trap 0\n s_sendmsg sendmsg(MSG_INTERRUPT)\n s_endpgm",
        WAVE32,
    ) else {
        return;
    };
    let (mem, d) = setup(&text, &kd, &[0], [32, 1, 1], [32, 1, 1]);
    let obs = HaltAtTrap {
        asked: AtomicUsize::new(0),
        after: 5,
        messages: AtomicUsize::new(0),
    };
    assert_eq!(
        run(&d, &mem, &RunOptions { threads: 1 }, &obs),
        Err(DispatchError::Cancelled)
    );
    assert_eq!(obs.messages.load(Ordering::SeqCst), 0);
}
