//! The last memory forms, against LLVM-assembled snippets (gfx906, gfx90a, gfx942 where they
//! differ): loads to LDS (MUBUF's LDS bit, gfx942's `global_load_lds_*`/`scratch_load_lds_*`),
//! MTBUF `tbuffer_*` with the formats in the instruction, `ds_read/write_addtid_b32` and the
//! `lds_direct` operand. Every expected value is computed here from the guide's formulas
//! (`LDS_ADDR = M0[15:0] + inst_offset + lane * 4`, the format conversions), not read back
//! through the interpreter.

mod common;

use common::{DATA, TestMemory, run_on};
use kfd_gfx9::exec::{ExecError, Flow, LANES, Target, Wave, scratch_addr};

/// Sets VGPR `r` of every lane to `f(lane)`.
fn lanes(w: &mut Wave, r: usize, f: impl Fn(usize) -> u32) {
    for lane in 0..LANES {
        w.vgpr[r][lane] = f(lane);
    }
}

fn put32(m: &TestMemory, addr: u64, v: u32) {
    m.put(addr, &v.to_le_bytes());
}

/// A buffer resource: base, stride, num_records, and word 3.
fn vsharp(w: &mut Wave, s: usize, base: u64, stride: u32, num_records: u32, word3: u32) {
    w.sgpr[s] = base as u32;
    w.sgpr[s + 1] = (base >> 32) as u32 & 0xffff | stride << 16;
    w.sgpr[s + 2] = num_records;
    w.sgpr[s + 3] = word3;
}

/// The LDS dword at byte `at`.
fn lds32(lds: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(lds[at..at + 4].try_into().unwrap())
}

/// The targets a snippet runs on, with their `-mcpu`.
const GFX906: (Target, &str) = (Target::Gfx906, "gfx906");
const GFX90A: (Target, &str) = (Target::Gfx90a, "gfx90a");
const GFX942: (Target, &str) = (Target::Gfx942, "gfx942");

/// Runs `asm` on `target` and asserts it reached `s_endpgm`; `None` without LLVM.
fn run_ok_on(
    (target, mcpu): (Target, &str),
    asm: &str,
    setup: impl FnOnce(&mut Wave, &TestMemory),
) -> Option<common::Run> {
    let r = run_on(target, mcpu, asm, setup)?;
    assert_eq!(r.end, Ok(Flow::End), "{mcpu}:\n{asm}\n{:?}", r.wave);
    Some(r)
}

// ---------------------------------------------------------------------------------------
// Loads to LDS

/// A byte pattern with every sign: byte `i` of the source buffer.
fn pattern(i: u64) -> u8 {
    (i as u8).wrapping_mul(37).wrapping_add(0x85)
}

#[test]
fn buffer_loads_to_lds_put_one_extended_dword_per_lane_at_m0_offset_and_lane() {
    // The memory address is the usual one (VGPR offset + OFFSET, or the index times STRIDE);
    // the LDS address is M0[15:0] + OFFSET + lane * 4, whatever VADDR says. Lanes past
    // NUM_RECORDS write 0; lanes EXEC disables write nothing; no VGPR is written.
    let asm = "s_mov_b32 m0, 0x10100\n\
               ds_write_b32 v9, v8\n\
               ds_write_b32 v9, v8 offset:0x200\n\
               buffer_load_dword v0, s[0:3], 0 offen offset:8 lds\n\
               s_mov_b32 m0, 0x400\n\
               buffer_load_ubyte v1, s[0:3], 0 idxen lds\n\
               s_mov_b32 m0, 0x600\n\
               buffer_load_sbyte v1, s[0:3], 0 idxen offset:1 lds\n\
               s_mov_b32 m0, 0x800\n\
               buffer_load_ushort v1, s[0:3], 0 idxen offset:2 lds\n\
               s_mov_b32 m0, 0xa00\n\
               buffer_load_sshort v1, s[0:3], 0 idxen offset:2 lds\n\
               s_endpgm";
    for target in [GFX906, GFX90A, GFX942] {
        let Some(r) = run_ok_on(target, asm, |w, m| {
            // Raw reads: lane l at byte 4 * l (+ OFFSET 8); structured: record l, STRIDE 4.
            vsharp(w, 0, DATA, 4, 0xf0, 0);
            lanes(w, 0, |l| 4 * l as u32);
            lanes(w, 1, |l| l as u32);
            // The LDS dwords the lanes EXEC disables must keep: 0xdeadbeef at m0's target
            // (0x108 + 4 l) and at 0x308 + 4 l; v9 covers lanes' slots by lane.
            lanes(w, 8, |_| 0xdead_beef);
            lanes(w, 9, |l| 0x108 + 4 * l as u32);
            for i in 0..0x200 {
                m.put(DATA + i, &[pattern(i)]);
            }
        }) else {
            return;
        };
        let byte = |i: u64| pattern(i);
        let dword = |i: u64| u32::from_le_bytes([byte(i), byte(i + 1), byte(i + 2), byte(i + 3)]);
        for l in 0..LANES {
            let lu = l as u64;
            // The dword load: memory offset 4 l + 8 within NUM_RECORDS (0xf0) up to lane 57.
            let want = if 4 * lu + 8 + 4 <= 0xf0 {
                dword(4 * lu + 8)
            } else {
                0
            };
            assert_eq!(
                lds32(&r.lds, 0x108 + 4 * l),
                want,
                "{:?} lane {l}",
                target.0
            );
            // Structured loads check the index against NUM_RECORDS (0xf0 records): all in.
            let rec = 4 * lu;
            assert_eq!(lds32(&r.lds, 0x400 + 4 * l), u32::from(byte(rec)));
            assert_eq!(
                lds32(&r.lds, 0x601 + 4 * l),
                byte(rec + 1) as i8 as i32 as u32
            );
            let short = u16::from_le_bytes([byte(rec + 2), byte(rec + 3)]);
            assert_eq!(lds32(&r.lds, 0x802 + 4 * l), u32::from(short));
            assert_eq!(lds32(&r.lds, 0xa02 + 4 * l), short as i16 as i32 as u32);
            // The VDATA/VADDR registers are not written.
            assert_eq!(r.wave.vgpr[0][l], 4 * l as u32);
            assert_eq!(r.wave.vgpr[1][l], l as u32);
        }
        // The second ds_write's copy (0x308..) is outside every load's LDS range: untouched.
        assert_eq!(lds32(&r.lds, 0x308), 0xdead_beef);
    }
}

#[test]
fn buffer_loads_to_lds_skip_disabled_lanes_and_other_opcodes_are_illegal() {
    let asm = "s_mov_b32 m0, 0\n\
               ds_write_b32 v9, v8\n\
               buffer_load_dword v0, s[0:3], 0 offen lds\n\
               s_endpgm";
    let Some(r) = run_ok_on(GFX90A, asm, |w, m| {
        vsharp(w, 0, DATA, 0, 0x1000, 0);
        lanes(w, 0, |l| 4 * l as u32);
        lanes(w, 8, |_| 0x5555_5555);
        lanes(w, 9, |l| 4 * l as u32);
        w.exec = 0xf0f0_f0f0_f0f0_f0f0;
        for l in 0..64 {
            put32(m, DATA + 4 * l, 0x1000 + l as u32);
        }
    }) else {
        return;
    };
    for l in 0..LANES {
        let want = if r.wave.exec >> l & 1 == 1 {
            0x1000 + l as u32
        } else {
            // ds_write_b32 ran under the same EXEC: never written.
            0
        };
        assert_eq!(lds32(&r.lds, 4 * l), want, "lane {l}");
    }
    // buffer_load_dwordx2 with the LDS bit (LLVM refuses to assemble it): MUBUF opcode 21,
    // LDS bit 16; VADDR v0, VDATA v1, SRSRC s[0:3], SOFFSET 0 (128).
    let Some(r) = run_on(
        Target::Gfx90a,
        "gfx90a",
        ".long 0xe0550000, 0x80000100\ns_endpgm",
        |w, _| vsharp(w, 0, DATA, 0, 0x1000, 0),
    ) else {
        return;
    };
    assert!(
        matches!(r.end, Err(ExecError::Illegal { pc, .. }) if pc == common::CODE),
        "{:?}",
        r.end
    );
}

#[test]
fn gfx906_and_gfx908_buffer_load_format_x_to_lds_writes_the_converted_x() {
    // 8_8_8_8 UNORM records of 4 bytes (IDXEN, STRIDE 4): lane l's X is byte 0 of record l,
    // as an f32, at M0 + 4 l; records past NUM_RECORDS (60) write 0.
    let asm = "s_mov_b32 m0, 0x40\n\
               buffer_load_format_x v0, s[0:3], 0 idxen lds\n\
               s_endpgm";
    for target in [GFX906, (Target::Gfx908, "gfx908")] {
        let Some(r) = run_ok_on(target, asm, |w, m| {
            vsharp(w, 0, DATA, 4, 60, word3(0, 10));
            lanes(w, 0, |l| l as u32);
            for l in 0..64u64 {
                m.put(DATA + 4 * l, &[(3 * l) as u8, 1, 2, 3]);
            }
        }) else {
            return;
        };
        for l in 0..LANES {
            let want = if l < 60 {
                (f64::from(3 * l as u8) / 255.0) as f32
            } else {
                0.0
            };
            assert_eq!(lds32(&r.lds, 0x40 + 4 * l), want.to_bits(), "lane {l}");
        }
    }
    // gfx90a has no typed load to LDS (LLVM refuses `lds` there): the gfx906 encoding.
    let Some(r) = run_on(
        Target::Gfx90a,
        "gfx90a",
        ".long 0xe0012000, 0x01000000\ns_endpgm",
        |w, _| vsharp(w, 0, DATA, 4, 60, word3(0, 10)),
    ) else {
        return;
    };
    assert!(
        matches!(r.end, Err(ExecError::Illegal { .. })),
        "{:?}",
        r.end
    );
}

#[test]
fn gfx942_global_and_scratch_loads_to_lds() {
    // global_load_lds_*: the address as global loads form it (VGPR pair, or SADDR + VGPR
    // offset), the instruction offset (signed) added to both addresses.
    let slot = DATA + 0x8_0000;
    let asm = "s_mov_b32 m0, 0x100\n\
               global_load_lds_dword v[2:3], off offset:8\n\
               s_mov_b32 m0, 0x300\n\
               global_load_lds_sbyte v4, s[4:5] offset:-4\n\
               s_mov_b32 m0, 0x500\n\
               global_load_lds_ushort v4, s[4:5]\n\
               s_mov_b32 m0, 0x700\n\
               scratch_load_lds_dword v5, off offset:4\n\
               s_mov_b32 m0, 0x900\n\
               scratch_load_lds_ubyte off, s6 offset:8\n\
               s_endpgm";
    let Some(r) = run_ok_on(GFX942, asm, |w, m| {
        for l in 0..LANES {
            let a = DATA + 8 * l as u64;
            w.vgpr[2][l] = a as u32;
            w.vgpr[3][l] = (a >> 32) as u32;
        }
        w.sgpr[4] = (DATA + 0x1000) as u32;
        w.sgpr[5] = ((DATA + 0x1000) >> 32) as u32;
        lanes(w, 4, |l| 4 + 2 * l as u32);
        for i in 0..0x2000 {
            m.put(DATA + i, &[pattern(i)]);
        }
        // Private memory: lane l's dwords at 4 and 8 (v5 = 0 for every lane).
        w.flat_scratch = slot;
        w.sgpr[6] = 0;
        for l in 0..LANES {
            put32(m, scratch_addr(slot, l, 4), 0x7000 + l as u32);
            put32(m, scratch_addr(slot, l, 8), 0xf0 + l as u32);
        }
    }) else {
        return;
    };
    let byte = |i: u64| pattern(i);
    for l in 0..LANES {
        let lu = l as u64;
        let d = 8 * lu + 8;
        let dword = u32::from_le_bytes([byte(d), byte(d + 1), byte(d + 2), byte(d + 3)]);
        assert_eq!(lds32(&r.lds, 0x108 + 4 * l), dword, "lane {l}");
        // -4 wraps the LDS address below M0: 0x300 - 4 + 4 l.
        let sb = byte(0x1000 + 4 + 2 * lu - 4) as i8 as i32 as u32;
        assert_eq!(lds32(&r.lds, 0x2fc + 4 * l), sb, "lane {l}");
        let s = 0x1000 + 4 + 2 * lu;
        let us = u32::from(u16::from_le_bytes([byte(s), byte(s + 1)]));
        assert_eq!(lds32(&r.lds, 0x500 + 4 * l), us);
        assert_eq!(lds32(&r.lds, 0x704 + 4 * l), 0x7000 + l as u32);
        // The ubyte of 0xf0 + l.
        assert_eq!(lds32(&r.lds, 0x908 + 4 * l), (0xf0 + l as u32) & 0xff);
    }
}

#[test]
fn gfx9_global_and_scratch_loads_with_the_lds_bit_go_to_lds() {
    // Before gfx942 the loads to LDS are the ordinary global_/scratch_ byte, short and dword
    // loads with the LDS bit; the VDST field names no register.
    let slot = DATA + 0x8_0000;
    let asm = "s_mov_b32 m0, 0x100\n\
               global_load_dword v[2:3], off offset:8 lds\n\
               s_mov_b32 m0, 0x300\n\
               global_load_sshort v4, s[4:5] offset:-8 lds\n\
               s_mov_b32 m0, 0x500\n\
               scratch_load_ubyte off, s6 offset:4 lds\n\
               s_endpgm";
    for target in [GFX906, GFX90A] {
        let Some(r) = run_ok_on(target, asm, |w, m| {
            for l in 0..LANES {
                let a = DATA + 8 * l as u64;
                w.vgpr[2][l] = a as u32;
                w.vgpr[3][l] = (a >> 32) as u32;
            }
            w.sgpr[4] = (DATA + 0x1000) as u32;
            w.sgpr[5] = ((DATA + 0x1000) >> 32) as u32;
            lanes(w, 4, |l| 8 + 2 * l as u32);
            for i in 0..0x2000 {
                m.put(DATA + i, &[pattern(i)]);
            }
            w.flat_scratch = slot;
            w.sgpr[6] = 0;
            for l in 0..LANES {
                put32(m, scratch_addr(slot, l, 4), 0x80 + l as u32);
            }
        }) else {
            return;
        };
        let byte = |i: u64| pattern(i);
        for l in 0..LANES {
            let lu = l as u64;
            let d = 8 * lu + 8;
            let dword = u32::from_le_bytes([byte(d), byte(d + 1), byte(d + 2), byte(d + 3)]);
            assert_eq!(
                lds32(&r.lds, 0x108 + 4 * l),
                dword,
                "{:?} lane {l}",
                target.0
            );
            let s = 0x1000 + 2 * lu;
            let short = i16::from_le_bytes([byte(s), byte(s + 1)]);
            assert_eq!(lds32(&r.lds, 0x2f8 + 4 * l), short as i32 as u32);
            assert_eq!(lds32(&r.lds, 0x504 + 4 * l), (0x80 + l as u32) & 0xff);
            // The registers the VDST field would name keep their values.
            assert_eq!(r.wave.vgpr[0][l], 0);
        }
    }
    // A dwordx2 with the LDS bit (LLVM refuses it): global_load_dwordx2 v[0:1], v[2:3], off
    // with bit 13 set.
    let Some(r) = run_on(
        Target::Gfx90a,
        "gfx90a",
        ".long 0xdc54a000, 0x007f0002\ns_endpgm",
        |_, _| {},
    ) else {
        return;
    };
    assert!(
        matches!(r.end, Err(ExecError::Illegal { .. })),
        "{:?}",
        r.end
    );
}

// ---------------------------------------------------------------------------------------
// MTBUF

/// Word 3 of a V#: identity DST_SEL (X Y Z W = 4 5 6 7) and the given formats.
fn word3(num: u32, data: u32) -> u32 {
    4 | 5 << 3 | 6 << 6 | 7 << 9 | num << 12 | data << 15
}

#[test]
fn tbuffer_loads_convert_by_the_instructions_formats_not_the_resources() {
    // The V# says 32 UINT; the instructions say 8_8_8_8 UNORM, 16_16 SINT, 32_32 FLOAT and
    // (d16) 16 FLOAT.
    let asm = "tbuffer_load_format_xyzw v[4:7], v0, s[0:3], 0 format:[BUF_DATA_FORMAT_8_8_8_8,BUF_NUM_FORMAT_UNORM] idxen\n\
               tbuffer_load_format_xy v[8:9], v0, s[0:3], 0 format:[BUF_DATA_FORMAT_16_16,BUF_NUM_FORMAT_SINT] idxen offset:4\n\
               tbuffer_load_format_xyz v[10:12], v0, s[4:7], 0 format:[BUF_DATA_FORMAT_32_32,BUF_NUM_FORMAT_FLOAT] idxen\n\
               tbuffer_load_format_d16_x v13, v0, s[0:3], 0 format:[BUF_DATA_FORMAT_16,BUF_NUM_FORMAT_FLOAT] idxen offset:6\n\
               s_endpgm";
    for target in [GFX906, GFX90A, GFX942] {
        let Some(r) = run_ok_on(target, asm, |w, m| {
            lanes(w, 0, |l| l as u32);
            lanes(w, 13, |_| 0xabcd_0000);
            vsharp(w, 0, DATA, 8, 64, word3(4, 4));
            vsharp(w, 4, DATA + 0x400, 8, 64, word3(4, 4));
            for l in 0..64u64 {
                m.put(DATA + 8 * l, &[l as u8, 255, 0, 128]);
                // 16_16: X = -l, Y = 3 l (SINT); Y as f16: 3 l subnormal units, exact.
                put32(
                    m,
                    DATA + 8 * l + 4,
                    (-(l as i32)) as u32 & 0xffff | (3 * l as u32) << 16,
                );
                put32(m, DATA + 0x400 + 8 * l, (l as f32 * 0.5).to_bits());
                put32(m, DATA + 0x400 + 8 * l + 4, (-(l as f32)).to_bits());
            }
        }) else {
            return;
        };
        for l in 0..LANES {
            let v = |i: usize| r.wave.vgpr[i][l];
            let unorm = |b: u8| (f64::from(b) / 255.0) as f32;
            assert_eq!(
                [v(4), v(5), v(6), v(7)],
                [l as u8, 255, 0, 128].map(|b| unorm(b).to_bits()),
                "{:?} lane {l}",
                target.0
            );
            assert_eq!([v(8), v(9)], [(-(l as i32)) as u32, 3 * l as u32]);
            // 32_32 FLOAT has no Z: it reads 0.
            assert_eq!(
                [v(10), v(11), v(12)],
                [(l as f32 * 0.5).to_bits(), (-(l as f32)).to_bits(), 0]
            );
            // d16 16 FLOAT at byte 6: the f16 3 l as it is, the high half kept.
            assert_eq!(v(13), 0xabcd_0000 | (3 * l as u32), "lane {l}");
        }
    }
}

#[test]
fn tbuffer_stores_convert_and_write_only_their_components() {
    let asm = "tbuffer_store_format_xy v[2:3], off, s[0:3], 0 format:[BUF_DATA_FORMAT_8_8_8_8,BUF_NUM_FORMAT_UNORM]\n\
               tbuffer_store_format_xyzw v[4:7], off, s[0:3], 0 format:[BUF_DATA_FORMAT_16_16_16_16,BUF_NUM_FORMAT_SINT] offset:8\n\
               tbuffer_store_format_d16_x v8, off, s[0:3], 0 format:[BUF_DATA_FORMAT_32,BUF_NUM_FORMAT_FLOAT] offset:16\n\
               s_endpgm";
    for target in [GFX906, GFX90A, GFX942] {
        let Some(r) = run_ok_on(target, asm, |w, m| {
            w.exec = 1;
            // The V# says 32 FLOAT: it must not matter.
            vsharp(w, 0, DATA, 0, 64, word3(7, 4));
            m.put(DATA, &[9, 9, 9, 9]);
            lanes(w, 2, |_| 0.5f32.to_bits());
            lanes(w, 3, |_| 7.0f32.to_bits()); // clamps to 1.0
            lanes(w, 4, |_| 5);
            lanes(w, 5, |_| (-70_000i32) as u32);
            lanes(w, 6, |_| 70_000);
            lanes(w, 7, |_| (-1i32) as u32);
            lanes(w, 8, |_| 0xabcd_3c00); // f16 1.0 in the low half
        }) else {
            return;
        };
        // 0.5 * 255 = 127.5 rounds to even 128; 1.0 is 255; bytes 2, 3 keep 9.
        assert_eq!(r.mem.bytes(DATA, 4), [128, 255, 9, 9], "{:?}", target.0);
        assert_eq!(r.mem.u64(DATA + 8), 0xffff_7fff_8000_0005);
        assert_eq!(r.mem.u32(DATA + 16), 1.0f32.to_bits());
    }
}

// ---------------------------------------------------------------------------------------
// DS addtid

#[test]
fn ds_addtid_writes_and_reads_at_m0_plus_offset_plus_lane_times_4() {
    // M0[15:0] is the base (bits above are ignored); no VGPR address.
    let asm = "s_mov_b32 m0, 0x30200\n\
               ds_write_addtid_b32 v1 offset:16\n\
               ds_read_b32 v2, v3\n\
               s_mov_b32 m0, 0x200\n\
               ds_read_addtid_b32 v4 offset:20\n\
               s_endpgm";
    for target in [GFX906, GFX90A, GFX942] {
        let Some(r) = run_ok_on(target, asm, |w, _| {
            w.exec = !0x8000_0000_0000_0001;
            lanes(w, 1, |l| 0x1111 * (l as u32 + 1));
            lanes(w, 3, |l| 0x210 + 4 * l as u32);
            lanes(w, 4, |_| 0x7777);
        }) else {
            return;
        };
        for l in 0..LANES {
            let on = r.wave.exec >> l & 1 == 1;
            let written = if on { 0x1111 * (l as u32 + 1) } else { 0 };
            assert_eq!(lds32(&r.lds, 0x210 + 4 * l), written, "lane {l}");
            if on {
                assert_eq!(r.wave.vgpr[2][l], written);
                // offset 20: the next lane's slot (lane 62 reads lane 63's, never written).
                assert_eq!(r.wave.vgpr[4][l], lds32(&r.lds, 0x214 + 4 * l));
            } else {
                assert_eq!(r.wave.vgpr[4][l], 0x7777);
            }
        }
        assert_eq!(r.wave.vgpr[4][1], 0x1111 * 3);
    }
}

// ---------------------------------------------------------------------------------------
// lds_direct

#[test]
fn lds_direct_broadcasts_the_lds_value_m0_names_on_gfx906_and_gfx908() {
    // LDS bytes 0x40.. = 0x80 0x81 0xfe 0xff; M0[18:16] is the type, M0[15:0] the address.
    let asm = "ds_write_b32 v0, v1\n\
               s_mov_b32 m0, 0x40\n\
               v_mov_b32 v2, lds_direct\n\
               s_mov_b32 m0, 0x10042\n\
               v_mov_b32 v3, lds_direct\n\
               s_mov_b32 m0, 0x20040\n\
               v_mov_b32 v4, lds_direct\n\
               s_mov_b32 m0, 0x40041\n\
               v_mov_b32 v5, lds_direct\n\
               s_mov_b32 m0, 0x50042\n\
               v_add_u32 v6, lds_direct, v7\n\
               s_mov_b32 m0, 0x2fff0\n\
               v_mov_b32 v8, lds_direct\n\
               s_endpgm";
    for target in [GFX906, (Target::Gfx908, "gfx908")] {
        let Some(r) = run_ok_on(target, asm, |w, _| {
            lanes(w, 0, |_| 0x40);
            lanes(w, 1, |_| 0xfffe_8180);
            lanes(w, 7, |l| l as u32);
            lanes(w, 8, |_| 1);
        }) else {
            return;
        };
        for l in 0..LANES {
            let v = |i: usize| r.wave.vgpr[i][l];
            assert_eq!(v(2), 0x80, "unsigned byte");
            assert_eq!(v(3), 0xfffe, "unsigned short");
            assert_eq!(v(4), 0xfffe_8180, "dword");
            assert_eq!(v(5), 0x81u8 as i8 as i32 as u32, "signed byte");
            assert_eq!(
                v(6),
                (0xfffe_u16 as i16 as i32 as u32).wrapping_add(l as u32)
            );
            // 0xfff0 is inside the 64 KiB LDS, never written: 0.
            assert_eq!(v(8), 0);
        }
    }
}

#[test]
fn lds_direct_is_illegal_on_gfx90a_and_with_an_unused_type() {
    // v_mov_b32_e32 v2, src 254 (LLVM will not assemble lds_direct for gfx90a).
    let Some(r) = run_on(
        Target::Gfx90a,
        "gfx90a",
        ".long 0x7e0402fe\ns_endpgm",
        |_, _| {},
    ) else {
        return;
    };
    assert!(
        matches!(r.end, Err(ExecError::Illegal { .. })),
        "{:?}",
        r.end
    );
    let Some(r) = run_on(
        Target::Gfx906,
        "gfx906",
        "s_mov_b32 m0, 0x30000\nv_mov_b32 v2, lds_direct\ns_endpgm",
        |_, _| {},
    ) else {
        return;
    };
    assert!(
        matches!(r.end, Err(ExecError::Illegal { .. })),
        "{:?}",
        r.end
    );
}
