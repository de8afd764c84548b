//! The encoder (`kfd_gfx9::asm`) held to LLVM 19: every constructor's words are the bytes
//! `llvm-mc-19 -show-encoding` gives the same instruction for gfx90a and gfx942; the kernel
//! descriptor is byte for byte what `.amdhsa_kernel` assembles to for gfx906, gfx90a and
//! gfx942; and a whole hand-assembled kernel with a loop decodes with the crate's own decoder,
//! instruction by instruction, and runs on `dispatch::run` to the values it should compute.
//! LLVM missing is a skip outside CI and a failure under `CI=true`.

mod common;

use std::process::Command;

use common::TestMemory;
use kfd_gfx9::asm::{self, DescriptorBuilder, Program, Saddr};
use kfd_gfx9::dispatch::{self, Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch};
use kfd_gfx9::exec::{Apertures, Target};
use kfd_gfx9::{Operand, SoppOp, decode};

use Operand::{Int, Literal, Sgpr, Vgpr};

fn llvm(tool: &str) -> bool {
    if std::path::Path::new("/usr/bin").join(tool).exists() {
        true
    } else {
        kfd_skip::prerequisite(format!("{tool} is missing (Debian llvm-19)"));
        false
    }
}

const VCC: Operand = Operand::Special(kfd_gfx9::Special::VccLo);

/// (LLVM's syntax, our words) for every constructor, with operands that exercise each field.
fn cases() -> Vec<(&'static str, Vec<u32>)> {
    let u = |r: asm::Result<asm::Words>| r.expect("encodes");
    vec![
        (
            "s_load_dword s8, s[0:1], 0x10",
            u(asm::s_load_dword(8, 0, 0x10)),
        ),
        (
            "s_load_dwordx2 s[4:5], s[2:3], 0x8",
            u(asm::s_load_dwordx2(4, 2, 8)),
        ),
        (
            "s_load_dwordx4 s[4:7], s[0:1], 0xfffff",
            u(asm::s_load_dwordx4(4, 0, 0xfffff)),
        ),
        ("s_mov_b32 s9, 7", u(asm::s_mov_b32(Sgpr(9), Int(7)))),
        ("s_mov_b32 s9, -16", u(asm::s_mov_b32(Sgpr(9), Int(-16)))),
        (
            "s_mov_b32 m0, 0x12345678",
            u(asm::s_mov_b32(
                Operand::Special(kfd_gfx9::Special::M0),
                Literal(0x1234_5678),
            )),
        ),
        ("s_movk_i32 s9, 0x1234", u(asm::s_movk_i32(Sgpr(9), 0x1234))),
        (
            "s_add_u32 s4, s4, 0x12345",
            u(asm::s_add_u32(Sgpr(4), Sgpr(4), Literal(0x12345))),
        ),
        (
            "s_addc_u32 s5, s5, 0",
            u(asm::s_addc_u32(Sgpr(5), Sgpr(5), Int(0))),
        ),
        (
            "s_lshl_b32 s3, s2, 8",
            u(asm::s_lshl_b32(Sgpr(3), Sgpr(2), Int(8))),
        ),
        (
            "s_mul_i32 s3, s2, s101",
            u(asm::s_mul_i32(Sgpr(3), Sgpr(2), Sgpr(101))),
        ),
        (
            "s_cmp_lt_u32 s3, s8",
            u(asm::s_cmp_lt_u32(Sgpr(3), Sgpr(8))),
        ),
        (
            "s_cmp_eq_u32 s3, 0x10000",
            u(asm::s_cmp_eq_u32(Sgpr(3), Literal(0x10000))),
        ),
        (
            "s_cbranch_scc0 -3",
            asm::sopp(SoppOp::SCbranchScc0, (-3i16) as u16),
        ),
        ("s_cbranch_scc1 5", asm::sopp(SoppOp::SCbranchScc1, 5)),
        ("s_branch 2", asm::sopp(SoppOp::SBranch, 2)),
        (
            "s_waitcnt lgkmcnt(0)",
            u(asm::s_waitcnt(None, None, Some(0))),
        ),
        ("s_waitcnt vmcnt(0)", u(asm::s_waitcnt(Some(0), None, None))),
        (
            "s_waitcnt vmcnt(37) expcnt(2) lgkmcnt(3)",
            u(asm::s_waitcnt(Some(37), Some(2), Some(3))),
        ),
        ("s_endpgm", asm::s_endpgm()),
        ("v_mov_b32_e32 v4, s6", u(asm::v_mov_b32(4, Sgpr(6)))),
        (
            "v_mov_b32_e32 v255, 0xdeadbeef",
            u(asm::v_mov_b32(255, Literal(0xdead_beef))),
        ),
        (
            "v_and_b32_e32 v0, 0x3ff, v0",
            u(asm::v_and_b32(0, Literal(0x3ff), 0)),
        ),
        ("v_add_u32_e32 v1, s3, v0", u(asm::v_add_u32(1, Sgpr(3), 0))),
        (
            "v_lshlrev_b32_e32 v2, s8, v1",
            u(asm::v_lshlrev_b32(2, Sgpr(8), 1)),
        ),
        (
            "v_lshlrev_b32_e32 v3, 2, v1",
            u(asm::v_lshlrev_b32(3, Int(2), 1)),
        ),
        (
            "v_lshrrev_b32_e32 v3, 26, v200",
            u(asm::v_lshrrev_b32(3, Int(26), 200)),
        ),
        (
            "v_add_co_u32_e32 v4, vcc, s4, v2",
            u(asm::v_add_co_u32(4, Sgpr(4), 2)),
        ),
        (
            "v_addc_co_u32_e32 v5, vcc, v6, v3, vcc",
            u(asm::v_addc_co_u32(5, Vgpr(6), 3)),
        ),
        (
            "v_add_co_u32_e64 v4, s[10:11], s4, v2",
            u(asm::v_add_co_u32_e64(4, Sgpr(10), Sgpr(4), Vgpr(2))),
        ),
        (
            "v_add_co_u32_e64 v4, vcc, v1, -1",
            u(asm::v_add_co_u32_e64(4, VCC, Vgpr(1), Int(-1))),
        ),
        (
            "v_addc_co_u32_e64 v5, s[10:11], v6, v3, s[10:11]",
            u(asm::v_addc_co_u32_e64(
                5,
                Sgpr(10),
                Vgpr(6),
                Vgpr(3),
                Sgpr(10),
            )),
        ),
        (
            "global_load_dword v4, v2, s[4:5]",
            u(asm::global_load_dword(4, 2, Saddr::Sgpr(4), 0)),
        ),
        (
            "global_load_dword v4, v[2:3], off offset:4095",
            u(asm::global_load_dword(4, 2, Saddr::Off, 4095)),
        ),
        (
            "global_load_dwordx4 v[4:7], v[2:3], off offset:-16",
            u(asm::global_load_dwordx4(4, 2, Saddr::Off, -16)),
        ),
        (
            "global_load_dwordx4 v[8:11], v1, s[100:101] offset:-4096",
            u(asm::global_load_dwordx4(8, 1, Saddr::Sgpr(100), -4096)),
        ),
        (
            "global_store_dword v3, v4, s[6:7]",
            u(asm::global_store_dword(3, 4, Saddr::Sgpr(6), 0)),
        ),
        (
            "global_store_dword v[2:3], v9, off offset:64",
            u(asm::global_store_dword(2, 9, Saddr::Off, 64)),
        ),
        (
            "global_store_dwordx4 v[2:3], v[4:7], off offset:16",
            u(asm::global_store_dwordx4(2, 4, Saddr::Off, 16)),
        ),
        (
            "global_store_dwordx4 v7, v[4:7], s[2:3]",
            u(asm::global_store_dwordx4(7, 4, Saddr::Sgpr(2), 0)),
        ),
    ]
}

/// The bytes of each line's `; encoding: [..]` in `llvm-mc -show-encoding`'s output.
fn encodings(mcpu: &str, lines: &[&str]) -> Vec<Vec<u8>> {
    let out = Command::new("llvm-mc-19")
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-show-encoding",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(lines.join("\n").as_bytes())?;
            c.wait_with_output()
        })
        .expect("running llvm-mc-19");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("encoding: [").nth(1))
        .map(|e| {
            e.trim_end_matches(']')
                .split(',')
                .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).expect("hex"))
                .collect()
        })
        .collect()
}

#[test]
fn every_constructor_encodes_as_llvm_mc_does_on_gfx90a_and_gfx942() {
    if !llvm("llvm-mc-19") {
        return;
    }
    let cases = cases();
    let lines: Vec<&str> = cases.iter().map(|c| c.0).collect();
    for mcpu in ["gfx90a", "gfx942"] {
        let want = encodings(mcpu, &lines);
        assert_eq!(want.len(), cases.len(), "{mcpu}: one encoding a line");
        for ((text, words), bytes) in cases.iter().zip(&want) {
            let ours: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(&ours, bytes, "{mcpu}: {text}");
            // And the decoder reads it back as the same instruction and length.
            let inst = decode(words).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(usize::from(inst.dwords), words.len(), "{text}");
            let mnemonic = text.split_whitespace().next().expect("mnemonic");
            let name = inst.op.to_string();
            assert!(
                mnemonic.starts_with(name.trim_end_matches("_e32")),
                "{text} decodes as {name}"
            );
        }
    }
}

/// The descriptor `.amdhsa_kernel` assembles for `mcpu` with these directives (the entry
/// offset is a relocation in the object: 0 there).
fn llvm_descriptor(mcpu: &str, directives: &str) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("kfd-gfx9-kd-{}-{mcpu}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let (s, o, bin) = (dir.join("k.s"), dir.join("k.o"), dir.join("kd.bin"));
    std::fs::write(
        &s,
        format!(
            ".amdgcn_target \"amdgcn-amd-amdhsa--{mcpu}:xnack-\"\n.text\n.p2align 8\nk:\n\
             s_endpgm\n.rodata\n.p2align 6\n.amdhsa_kernel k\n{directives}\n.end_amdhsa_kernel\n"
        ),
    )
    .expect("write");
    let ok = Command::new("llvm-mc-19")
        .args([
            "-triple",
            "amdgcn-amd-amdhsa",
            &format!("-mcpu={mcpu}"),
            "-mattr=-xnack",
        ])
        .args(["-filetype=obj", "-o"])
        .arg(&o)
        .arg(&s)
        .status()
        .expect("llvm-mc-19")
        .success();
    assert!(ok, "{mcpu}: {directives}");
    let ok = Command::new("llvm-objcopy-19")
        .args(["-O", "binary", "--only-section=.rodata"])
        .arg(&o)
        .arg(&bin)
        .status()
        .expect("llvm-objcopy-19")
        .success();
    assert!(ok);
    let kd = std::fs::read(&bin).expect("read");
    let _ = std::fs::remove_dir_all(&dir);
    kd
}

#[test]
fn the_descriptor_is_what_amdhsa_kernel_assembles_to() {
    if !llvm("llvm-mc-19") || !llvm("llvm-objcopy-19") {
        return;
    }
    for (mcpu, target) in [
        ("gfx906", Target::Gfx906),
        ("gfx90a", Target::Gfx90a),
        ("gfx942", Target::Gfx942),
    ] {
        for (vgprs, sgprs, kernarg, lds, wg_ids, wi_ids) in [
            (1u32, 1u32, 0u32, 0u32, 1u8, 0u8),
            (8, 16, 24, 0, 1, 0),
            (9, 17, 64, 4096, 2, 1),
            (33, 100, 256, 65536, 3, 2),
        ] {
            let unified = target != Target::Gfx906;
            let accum = vgprs.next_multiple_of(4);
            let mut directives = format!(
                ".amdhsa_next_free_vgpr {vgprs}\n.amdhsa_next_free_sgpr {sgprs}\n\
                 .amdhsa_reserve_vcc 0\n.amdhsa_reserve_xnack_mask 0\n\
                 .amdhsa_user_sgpr_kernarg_segment_ptr 1\n.amdhsa_user_sgpr_dispatch_ptr 1\n\
                 .amdhsa_kernarg_size {kernarg}\n.amdhsa_group_segment_fixed_size {lds}\n\
                 .amdhsa_system_sgpr_workgroup_id_x {}\n.amdhsa_system_sgpr_workgroup_id_y {}\n\
                 .amdhsa_system_sgpr_workgroup_id_z {}\n.amdhsa_system_vgpr_workitem_id {wi_ids}\n",
                u8::from(wg_ids > 0),
                u8::from(wg_ids > 1),
                u8::from(wg_ids > 2),
            );
            if target != Target::Gfx942 {
                directives.push_str(".amdhsa_reserve_flat_scratch 0\n");
            }
            if unified {
                directives.push_str(&format!(".amdhsa_accum_offset {accum}\n"));
            }
            let want = llvm_descriptor(mcpu, &directives);
            // LLVM 19 counts six more SGPRs on gfx942 (its FLAT_SCRATCH and XNACK_MASK
            // reservation, which the directives cannot turn off there).
            let extra = if target == Target::Gfx942 { 6 } else { 0 };
            // The default accumulator offset is the one LLVM's directive gives: no AGPRs.
            let ours = DescriptorBuilder::new(target)
                .vgprs(vgprs)
                .sgprs(sgprs + extra)
                .kernarg_size(kernarg)
                .group_segment(lds)
                .dispatch_ptr()
                .kernarg_segment_ptr()
                .workgroup_ids(wg_ids)
                .workitem_ids(wi_ids)
                .build()
                .expect("builds");
            assert_eq!(&ours[..], &want[..], "{mcpu} v{vgprs} s{sgprs}");
            let kd = KernelDescriptor::parse(&ours).expect("parses");
            assert_eq!(kd.kernarg_size, kernarg);
        }
    }
    let agprs = DescriptorBuilder::new(Target::Gfx90a)
        .vgprs(16)
        .accum_offset(8)
        .build()
        .expect("builds");
    assert_eq!(agprs[44], 1, "ACCUM_OFFSET 8: AGPRs from v8");
    let with_entry = DescriptorBuilder::new(Target::Gfx90a)
        .entry_offset(-256)
        .build()
        .expect("builds");
    let kd = KernelDescriptor::parse(&with_entry).expect("parses");
    assert_eq!(kd.kernel_code_entry_byte_offset, -256);
    assert_eq!(kd.entry(0x1_0000_1000), 0x1_0000_0f00);
}

const CODE: u64 = common::CODE;
const DATA: u64 = common::DATA;

/// A loop kernel: work-item `i` adds `i` to `kernarg.start` `kernarg.rounds` times (a scalar
/// loop counter, `s_cmp` and a backward branch) and stores the sum at `out + 4 i`, and the
/// 64-bit address arithmetic goes through the carry forms.
fn loop_kernel() -> Vec<u32> {
    let u = |r: asm::Result<asm::Words>| r.expect("encodes");
    let mut p = Program::new();
    p.push(u(asm::s_load_dwordx2(4, 0, 0))) // out
        .push(u(asm::s_load_dwordx2(6, 0, 8))) // start, rounds
        .push(u(asm::v_and_b32(0, Literal(0x3ff), 0)))
        .push(u(asm::s_lshl_b32(Sgpr(3), Sgpr(2), Int(6))))
        .push(u(asm::v_add_u32(1, Sgpr(3), 0))) // i
        .push(u(asm::s_waitcnt(None, None, Some(0))))
        .push(u(asm::v_mov_b32(2, Sgpr(6)))) // sum
        .push(u(asm::s_mov_b32(Sgpr(8), Int(0)))); // round
    let top = p.label();
    let done = p.label();
    p.bind(top).expect("bind");
    p.push(u(asm::s_cmp_lt_u32(Sgpr(8), Sgpr(7))))
        .branch(SoppOp::SCbranchScc0, done)
        .push(u(asm::v_add_u32(2, Vgpr(1), 2)))
        .push(u(asm::s_add_u32(Sgpr(8), Sgpr(8), Int(1))))
        .branch(SoppOp::SBranch, top);
    p.bind(done).expect("bind");
    // out + 4 i as a 64-bit address: v[3:4] = s[4:5] + (i << 2).
    p.push(u(asm::v_lshlrev_b32(5, Int(2), 1)))
        .push(u(asm::v_mov_b32(6, Sgpr(5))))
        .push(u(asm::v_add_co_u32(3, Sgpr(4), 5)))
        .push(u(asm::v_addc_co_u32_e64(4, VCC, Vgpr(6), Int(0), VCC)))
        .push(u(asm::global_store_dword(3, 2, Saddr::Off, 0)))
        .push(u(asm::s_waitcnt(Some(0), None, None)))
        .push(asm::s_endpgm());
    p.finish().expect("finishes")
}

#[test]
fn a_hand_assembled_kernel_decodes_whole_and_runs() {
    let code = loop_kernel();
    let mut at = 0;
    while at < code.len() {
        let inst = decode(&code[at..]).unwrap_or_else(|e| panic!("dword {at}: {e}"));
        at += usize::from(inst.dwords);
    }
    assert_eq!(at, code.len());

    let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
    for target in [Target::Gfx90a, Target::Gfx942] {
        let mem = TestMemory::with_code(&bytes);
        let kd_at = DATA + 0x8_0000;
        let kernarg = DATA + 0x9_0000;
        let out = DATA;
        let raw = DescriptorBuilder::new(target)
            .vgprs(8)
            .sgprs(16)
            .kernarg_segment_ptr()
            .kernarg_size(16)
            .entry_offset(CODE as i64 - kd_at as i64)
            .build()
            .expect("builds");
        mem.put(kd_at, &raw);
        let mut args = out.to_le_bytes().to_vec();
        args.extend(100u32.to_le_bytes());
        args.extend(3u32.to_le_bytes());
        mem.put(kernarg, &args);
        let kd = KernelDescriptor::parse(&raw).expect("parses");
        let d = Dispatch {
            target,
            kd,
            entry: kd.entry(kd_at),
            grid: [200, 1, 1],
            workgroup: [64, 1, 1],
            kernarg,
            dispatch_ptr: 0,
            queue_ptr: 0,
            dispatch_id: 0,
            private_segment_size: 0,
            group_segment_size: 0,
            scratch: Scratch::default(),
            apertures: Apertures::default(),
            user_data: None,
        };
        dispatch::run(&d, &mem, &RunOptions { threads: 2 }, &NoObserver).expect("runs");
        for i in 0..200u32 {
            assert_eq!(
                mem.u32(out + 4 * u64::from(i)),
                100 + 3 * i,
                "{target:?} item {i}"
            );
        }
        // Past the grid: nothing written.
        assert_eq!(mem.u32(out + 4 * 200), 0);
    }
}
