//! FLAT and GLOBAL loads and stores held to their per-lane meaning whichever path runs them:
//! a wave whose enabled lanes form one block with consecutive addresses goes to memory in one
//! bulk access (`exec/mem/access.rs`, `bulk_load` / `bulk_store`), any other shape lane by
//! lane. Random instructions (byte, short and dword..dwordx4 loads and stores, `flat_`,
//! `global_` with a VGPR pair and with SADDR), EXEC masks (full, a block, scattered, none)
//! and lane addresses (consecutive from anywhere around a mapped window's edges, misaligned,
//! one lane out of line, scattered, descending, wrapping past 2^64) are run on the
//! interpreter and compared with a model written here from the MI200 guide's per-lane
//! definitions (chapter 10, "Flat Memory Instructions"): each enabled lane in lane order
//! moves its bytes, split where they cross a 4 KiB page (the `Memory` trait's unit); the first
//! piece outside the window stops the wave with that piece's address; a load then writes no
//! register, a store leaves the pieces before it written. Needs no LLVM (the instructions
//! come from `kfd_gfx9::asm`).

mod common;

use common::TestMemory;
use kfd_gfx9::asm::{self, Saddr};
use kfd_gfx9::exec::{
    Apertures, CodeCache, Ctx, ExecError, Fault, Flow, LANES, Target, Wave, step,
};
use kfd_gfx9::opcode::FlatOp;

const CODE: u64 = 0x1_0000_0000;
/// The mapped window: four pages.
const WINDOW: u64 = 0x5_0000_0000;
const WINDOW_LEN: u64 = 4 * 4096;
const PAGE: u64 = 4096;
/// Registers: the address (v2 or v[2:3]), the data (v8..v11), SADDR s[10:11].
const VADDR: u8 = 2;
const VDATA: u8 = 8;
const SBASE: u8 = 10;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Seg {
    Flat,
    GlobalPair,
    GlobalSaddr,
}

/// An opcode's size in memory, signedness (loads) and whether it stores.
fn shape(op: FlatOp) -> (usize, bool, bool) {
    use FlatOp::*;
    match op {
        LoadUbyte => (1, false, false),
        LoadSbyte => (1, true, false),
        LoadUshort => (2, false, false),
        LoadSshort => (2, true, false),
        LoadDword => (4, false, false),
        LoadDwordx2 => (8, false, false),
        LoadDwordx3 => (12, false, false),
        LoadDwordx4 => (16, false, false),
        StoreByte => (1, false, true),
        StoreShort => (2, false, true),
        StoreDword => (4, false, true),
        StoreDwordx2 => (8, false, true),
        StoreDwordx3 => (12, false, true),
        StoreDwordx4 => (16, false, true),
        _ => unreachable!("not in the test's list"),
    }
}

const OPS: [FlatOp; 14] = [
    FlatOp::LoadUbyte,
    FlatOp::LoadSbyte,
    FlatOp::LoadUshort,
    FlatOp::LoadSshort,
    FlatOp::LoadDword,
    FlatOp::LoadDwordx2,
    FlatOp::LoadDwordx3,
    FlatOp::LoadDwordx4,
    FlatOp::StoreByte,
    FlatOp::StoreShort,
    FlatOp::StoreDword,
    FlatOp::StoreDwordx2,
    FlatOp::StoreDwordx3,
    FlatOp::StoreDwordx4,
];

/// The instruction's two dwords: `global_*` from the assembler, `flat_*` the same fields with
/// SEG 0 and no SADDR (the FLAT encoding; its offset is 12 bits unsigned).
fn encode(op: FlatOp, seg: Seg, offset: i16) -> Vec<u32> {
    let (_, _, store) = shape(op);
    let (vdst, vdata) = if store { (0, VDATA) } else { (VDATA, 0) };
    let saddr = match seg {
        Seg::GlobalSaddr => Saddr::Sgpr(SBASE),
        _ => Saddr::Off,
    };
    let mut w = asm::global(op, vdst, VADDR, vdata, saddr, offset).expect("encodes");
    if seg == Seg::Flat {
        w[0] &= !(3 << 14);
        w[1] &= !(0x7f << 16);
    }
    w
}

/// One random case.
#[derive(Debug, Clone)]
struct Case {
    op: FlatOp,
    seg: Seg,
    offset: i16,
    exec: u64,
    /// Each lane's address as the instruction computes it (offset included).
    addr: [u64; LANES],
    sbase: u64,
}

fn random_case(r: &mut Rng) -> Case {
    let op = OPS[r.below(OPS.len() as u64) as usize];
    let (bytes, _, _) = shape(op);
    let seg = [Seg::Flat, Seg::GlobalPair, Seg::GlobalSaddr][r.below(3) as usize];
    let offset = match seg {
        Seg::Flat => r.below(64) as i16 * 4,
        _ => r.below(512) as i16 - 256,
    };
    let exec = match r.below(6) {
        0 | 1 => u64::MAX,
        2 => {
            let first = r.below(64);
            let n = 1 + r.below(64 - first);
            (u64::MAX >> (64 - n)) << first
        }
        3 => r.next() & r.next(),
        4 => 1 << r.below(64),
        _ => 0,
    };
    // Consecutive from around the window's edges (any alignment), or not.
    let edge = [WINDOW, WINDOW + PAGE, WINDOW + WINDOW_LEN][r.below(3) as usize];
    let start = edge
        .wrapping_sub(LANES as u64 * bytes as u64)
        .wrapping_add(r.below(2 * LANES as u64 * bytes as u64));
    let mut addr = [0u64; LANES];
    match r.below(6) {
        0..=2 => {
            for (l, a) in addr.iter_mut().enumerate() {
                *a = start.wrapping_add((l * bytes) as u64);
            }
        }
        3 => {
            for (l, a) in addr.iter_mut().enumerate() {
                *a = start.wrapping_add((l * bytes) as u64);
            }
            addr[r.below(64) as usize] ^= 1 << r.below(13);
        }
        4 => {
            for a in addr.iter_mut() {
                *a = (WINDOW - PAGE).wrapping_add(r.below(WINDOW_LEN + 2 * PAGE));
            }
        }
        _ => {
            // Descending, or wrapping past the top of the address space.
            let top = r.below(2) == 0;
            for (l, a) in addr.iter_mut().enumerate() {
                *a = if top {
                    (u64::MAX - 500).wrapping_add((l * bytes) as u64)
                } else {
                    (WINDOW + WINDOW_LEN).wrapping_sub(((l + 1) * bytes) as u64)
                };
            }
        }
    }
    // SADDR: the base is shared and the VGPR a 32-bit unsigned offset (then the
    // instruction's): each address is what that sum makes of it.
    let sbase = addr[0] & !0xffff_ffff;
    if seg == Seg::GlobalSaddr {
        let imm = i64::from(offset) as u64;
        for a in addr.iter_mut() {
            let v = a.wrapping_sub(sbase).wrapping_sub(imm) as u32;
            *a = sbase.wrapping_add(u64::from(v)).wrapping_add(imm);
        }
    }
    Case {
        op,
        seg,
        offset,
        exec,
        addr,
        sbase,
    }
}

/// Sets up the wave's registers for `c`, with data registers filled from `r`.
fn wave_for(c: &Case, r: &mut Rng) -> Wave {
    let mut w = Wave::new(Target::Gfx90a, CODE);
    w.exec = c.exec;
    // An LDS and a private aperture elsewhere: nothing here is in them.
    w.apertures = Apertures {
        shared_base: 0x1000_0000_0000,
        private_base: 0x2000_0000_0000,
        ..Apertures::default()
    };
    w.sgpr[SBASE as usize] = c.sbase as u32;
    w.sgpr[SBASE as usize + 1] = (c.sbase >> 32) as u32;
    for lane in 0..LANES {
        let base = c.addr[lane].wrapping_sub(i64::from(c.offset) as u64);
        match c.seg {
            Seg::GlobalSaddr => {
                w.vgpr[VADDR as usize][lane] = base.wrapping_sub(c.sbase) as u32;
            }
            _ => {
                w.vgpr[VADDR as usize][lane] = base as u32;
                w.vgpr[VADDR as usize + 1][lane] = (base >> 32) as u32;
            }
        }
        for k in 0..4 {
            w.vgpr[VDATA as usize + k][lane] = r.next() as u32;
        }
    }
    w
}

/// The pieces of an access of `len` bytes at `a`, split at pages as the interpreter hands
/// them to `Memory`.
fn pieces(a: u64, len: usize) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    let mut done = 0;
    while done < len {
        let at = a.wrapping_add(done as u64);
        let n = ((PAGE - at % PAGE) as usize).min(len - done);
        out.push((at, n));
        done += n;
    }
    out
}

fn in_window(a: u64, n: usize) -> bool {
    a >= WINDOW
        && a.checked_add(n as u64)
            .is_some_and(|e| e <= WINDOW + WINDOW_LEN)
}

/// The guide's per-lane meaning: the registers and window after the instruction, and its
/// fault.
fn model(c: &Case, w: &Wave, window: &[u8]) -> (Vec<[u32; LANES]>, Vec<u8>, Option<Fault>) {
    let (bytes, signed, store) = shape(c.op);
    let mut regs: Vec<[u32; LANES]> = (0..4).map(|k| w.vgpr[VDATA as usize + k]).collect();
    let mut mem = window.to_vec();
    let lanes = (0..LANES).filter(|&l| c.exec >> l & 1 == 1);
    if store {
        for lane in lanes {
            let mut data = Vec::new();
            for reg in &regs[..bytes.div_ceil(4)] {
                data.extend_from_slice(&reg[lane].to_le_bytes());
            }
            let mut done = 0;
            for (at, n) in pieces(c.addr[lane], bytes) {
                if !in_window(at, n) {
                    return (
                        regs,
                        mem,
                        Some(Fault {
                            addr: at,
                            write: true,
                        }),
                    );
                }
                let o = (at - WINDOW) as usize;
                mem[o..o + n].copy_from_slice(&data[done..done + n]);
                done += n;
            }
        }
        return (regs, mem, None);
    }
    let mut loaded = regs.clone();
    for lane in lanes {
        let mut data = Vec::new();
        for (at, n) in pieces(c.addr[lane], bytes) {
            if !in_window(at, n) {
                return (
                    regs,
                    mem,
                    Some(Fault {
                        addr: at,
                        write: false,
                    }),
                );
            }
            let o = (at - WINDOW) as usize;
            data.extend_from_slice(&mem[o..o + n]);
        }
        match (bytes, signed) {
            (1, false) => loaded[0][lane] = u32::from(data[0]),
            (1, true) => loaded[0][lane] = data[0] as i8 as i32 as u32,
            (2, false) => loaded[0][lane] = u32::from(u16::from_le_bytes([data[0], data[1]])),
            (2, true) => loaded[0][lane] = i16::from_le_bytes([data[0], data[1]]) as i32 as u32,
            _ => {
                for (k, d) in data.chunks_exact(4).enumerate() {
                    loaded[k][lane] = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                }
            }
        }
    }
    regs = loaded;
    (regs, mem, None)
}

/// Runs `c` on the interpreter: the registers and window after, and its fault.
fn interpret(c: &Case, w: &mut Wave, window: &[u8]) -> (Vec<[u32; LANES]>, Vec<u8>, Option<Fault>) {
    let mut code: Vec<u8> = encode(c.op, c.seg, c.offset)
        .iter()
        .chain(&asm::s_endpgm())
        .flat_map(|d| d.to_le_bytes())
        .collect();
    code.resize(4096, 0);
    let mem = TestMemory::default();
    mem.map(CODE, code);
    mem.map(WINDOW, window.to_vec());
    let mut lds = vec![0u8; 64 << 10];
    let mut cache = CodeCache::for_target(Target::Gfx90a);
    let mut ctx = Ctx {
        mem: &mem,
        lds: &mut lds,
        code: &mut cache,
    };
    let fault = match step(w, &mut ctx) {
        Ok(Flow::Continue) => None,
        Err(ExecError::Memory { pc, fault }) => {
            assert_eq!(pc, CODE, "{c:?}");
            Some(fault)
        }
        other => panic!("{c:?}: {other:?}"),
    };
    assert!(lds.iter().all(|&b| b == 0), "{c:?}: LDS written");
    let regs = (0..4).map(|k| w.vgpr[VDATA as usize + k]).collect();
    (regs, mem.bytes(WINDOW, WINDOW_LEN as usize), fault)
}

#[test]
fn loads_and_stores_of_any_lanes_and_addresses_match_the_per_lane_definition() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let window: Vec<u8> = (0..WINDOW_LEN).map(|i| (i * 13 + i / 4096) as u8).collect();
    let (mut bulk, mut faults) = (0, 0);
    for _ in 0..4000 {
        let c = random_case(&mut r);
        let mut w = wave_for(&c, &mut r);
        let before = w.clone();
        let want = model(&c, &before, &window);
        let got = interpret(&c, &mut w, &window);
        assert_eq!(got.2, want.2, "fault of {c:?}");
        assert!(got.0 == want.0, "registers after {c:?}");
        assert!(got.1 == want.1, "memory after {c:?}");
        // Nothing else in the wave moved.
        assert_eq!(w.vgpr[..VDATA as usize], before.vgpr[..VDATA as usize]);
        let (bytes, _, _) = shape(c.op);
        let lanes: Vec<usize> = (0..LANES).filter(|&l| c.exec >> l & 1 == 1).collect();
        bulk += usize::from(
            !lanes.is_empty()
                && lanes.windows(2).all(|p| {
                    p[1] == p[0] + 1 && c.addr[p[1]] == c.addr[p[0]].wrapping_add(bytes as u64)
                }),
        );
        faults += usize::from(want.2.is_some());
    }
    // The cases cover both paths, and faults on both.
    assert!(bulk > 1000 && faults > 1000, "bulk {bulk}, faults {faults}");
}

#[test]
fn a_block_in_the_lds_aperture_goes_to_lds_not_to_global_memory() {
    // 64 consecutive dwords whose flat addresses are in the shared aperture: LDS, even
    // though they would make one bulk global access.
    let lds_base = WINDOW & !0xffff_ffff;
    let c = Case {
        op: FlatOp::StoreDword,
        seg: Seg::Flat,
        offset: 0,
        exec: u64::MAX,
        addr: std::array::from_fn(|l| lds_base + 0x100 + 4 * l as u64),
        sbase: 0,
    };
    let mut r = Rng(7);
    let mut w = wave_for(&c, &mut r);
    w.apertures.shared_base = lds_base;
    let code: Vec<u8> = encode(c.op, c.seg, 0)
        .iter()
        .chain(&asm::s_endpgm())
        .flat_map(|d| d.to_le_bytes())
        .collect();
    let mem = TestMemory::with_code(&code);
    mem.map(WINDOW, vec![0; WINDOW_LEN as usize]);
    let mut lds = vec![0u8; 64 << 10];
    let mut cache = CodeCache::for_target(Target::Gfx90a);
    let mut ctx = Ctx {
        mem: &mem,
        lds: &mut lds,
        code: &mut cache,
    };
    assert_eq!(step(&mut w, &mut ctx), Ok(Flow::Continue));
    for lane in 0..LANES {
        let at = 0x100 + 4 * lane;
        let v = u32::from_le_bytes(lds[at..at + 4].try_into().expect("4 bytes"));
        assert_eq!(v, w.vgpr[VDATA as usize][lane], "lane {lane}");
    }
    assert!(
        mem.bytes(WINDOW, WINDOW_LEN as usize)
            .iter()
            .all(|&b| b == 0),
        "global memory written"
    );
}

/// Runs the one instruction `words` on `w` over a memory holding the code and `window`: its
/// fault (`None`: it completed), the window after.
fn step_one(words: &[u32], w: &mut Wave, window: &[u8]) -> (Option<Fault>, Vec<u8>) {
    let mut code: Vec<u8> = words
        .iter()
        .chain(&asm::s_endpgm())
        .flat_map(|d| d.to_le_bytes())
        .collect();
    code.resize(4096, 0);
    let mem = TestMemory::default();
    mem.map(CODE, code);
    mem.map(WINDOW, window.to_vec());
    let mut lds = vec![0u8; 64 << 10];
    let mut cache = CodeCache::for_target(w.target);
    let mut ctx = Ctx {
        mem: &mem,
        lds: &mut lds,
        code: &mut cache,
    };
    w.pc = CODE;
    let fault = match step(w, &mut ctx) {
        Ok(Flow::Continue) => None,
        Err(ExecError::Memory { pc, fault }) => {
            assert_eq!(pc, CODE);
            Some(fault)
        }
        other => panic!("{other:?}"),
    };
    (fault, mem.bytes(WINDOW, WINDOW_LEN as usize))
}

/// `buffer_*` untyped loads and stores (MUBUF) of a whole wave against the same instruction
/// run lane by lane (EXEC one lane at a time, in lane order, stopping at the first fault; a
/// faulting load writes no register): random V#s (base around the window, stride, swizzle,
/// element size and index stride, ADD_TID, NUM_RECORDS cutting a block), IDXEN/OFFEN,
/// SOFFSET, instruction offsets, EXEC masks and lane indices/offsets (consecutive or not).
/// The encoding is the MUBUF one (`llvm-mc-19 -mcpu=gfx90a`: `buffer_load_dwordx4 v[8:11],
/// v2, s[12:15], s4 offen offset:16` is `0xe05c1010 0x04030802`).
#[test]
fn buffer_loads_and_stores_of_a_wave_match_the_same_run_lane_by_lane() {
    const OPS: [(u32, usize, bool); 14] = [
        (16, 1, false),
        (17, 1, false),
        (18, 2, false),
        (19, 2, false),
        (20, 4, false),
        (21, 8, false),
        (22, 12, false),
        (23, 16, false),
        (24, 1, true),
        (26, 2, true),
        (28, 4, true),
        (29, 8, true),
        (30, 12, true),
        (31, 16, true),
    ];
    let mut r = Rng(0x0123_4567_89ab_cdef);
    let window: Vec<u8> = (0..WINDOW_LEN).map(|i| (i * 29 + i / 4096) as u8).collect();
    let (mut whole, mut faults) = (0, 0);
    for _ in 0..1200 {
        let (op, bytes, store) = OPS[r.below(OPS.len() as u64) as usize];
        let (idxen, offen) = (r.below(2) == 1, r.below(4) != 0);
        let offset = (r.below(64) as u32 * [1, 4, 16][r.below(3) as usize]) & 0xfff;
        let words = [
            0xe000_0000 | op << 18 | u32::from(idxen) << 13 | u32::from(offen) << 12 | offset,
            4 << 24 | 3 << 16 | u32::from(VDATA) << 8 | u32::from(VADDR),
        ];
        let mut w = Wave::new(Target::Gfx90a, CODE);
        w.exec = match r.below(5) {
            0..=2 => u64::MAX,
            3 => {
                let first = r.below(64);
                (u64::MAX >> (64 - 1 - r.below(64 - first))) << first
            }
            _ => r.next() | r.next(),
        };
        // The V#: base below the window's edges, stride, NUM_RECORDS, word 3's swizzle
        // fields and ADD_TID.
        let base = [WINDOW, WINDOW + WINDOW_LEN - 1024][r.below(2) as usize] - r.below(512);
        let stride = [0, 4, 16, bytes as u64, r.below(64)][r.below(5) as usize];
        let swizzle = r.below(4) == 0;
        w.sgpr[12] = base as u32;
        w.sgpr[13] = (base >> 32) as u32 | (stride as u32) << 16 | u32::from(swizzle) << 31;
        w.sgpr[14] =
            [u32::MAX, 512 + r.below(1024) as u32, r.below(64) as u32][r.below(3) as usize];
        w.sgpr[15] = (r.next() as u32 & 0x1f) << 19;
        w.sgpr[4] = [0, r.below(256) as u32][r.below(2) as usize];
        let consecutive = r.below(3) != 0;
        let (i0, o0) = (r.below(8) as u32, r.below(256) as u32);
        for lane in 0..LANES {
            let l = lane as u32;
            let (index, off) = if consecutive {
                (i0 + l, o0 + l * bytes as u32)
            } else {
                (r.below(80) as u32, r.below(1200) as u32)
            };
            let mut v = VADDR as usize;
            if idxen {
                w.vgpr[v][lane] = index;
                v += 1;
            }
            if offen {
                w.vgpr[v][lane] = off;
            }
            for k in 0..4 {
                w.vgpr[VDATA as usize + k][lane] = r.next() as u32;
            }
        }
        let before = w.clone();
        // Lane by lane.
        let mut one = before.clone();
        let mut mem = window.clone();
        let mut want_fault = None;
        for lane in (0..LANES).filter(|&l| before.exec >> l & 1 == 1) {
            one.exec = 1 << lane;
            let (fault, after) = step_one(&words, &mut one, &mem);
            mem = after;
            if fault.is_some() {
                want_fault = fault;
                break;
            }
        }
        let mut want_regs: Vec<[u32; LANES]> =
            (0..4).map(|k| one.vgpr[VDATA as usize + k]).collect();
        if want_fault.is_some() && !store {
            want_regs = (0..4).map(|k| before.vgpr[VDATA as usize + k]).collect();
        }
        // The whole wave.
        let (fault, got_mem) = step_one(&words, &mut w, &window);
        let got_regs: Vec<[u32; LANES]> = (0..4).map(|k| w.vgpr[VDATA as usize + k]).collect();
        let what = format!(
            "op {op} idxen {idxen} offen {offen} offset {offset} exec {:#x} V# {:x?} soffset {}",
            before.exec,
            &before.sgpr[12..16],
            before.sgpr[4]
        );
        assert_eq!(fault, want_fault, "fault of {what}");
        assert!(got_regs == want_regs, "registers after {what}");
        assert!(got_mem == mem, "memory after {what}");
        whole += usize::from(before.exec == u64::MAX && consecutive && !swizzle);
        faults += usize::from(fault.is_some());
    }
    assert!(
        whole > 150 && faults > 100,
        "whole {whole}, faults {faults}"
    );
}
