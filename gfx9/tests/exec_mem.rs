//! The memory instructions against LLVM-assembled snippets: SMEM, GLOBAL, FLAT (apertures),
//! SCRATCH and MUBUF scratch agreeing on the swizzled layout, MUBUF addressing and range
//! checks, DS (LDS) and its atomics and cross-lane forms; EXEC-masked lanes untouched; a
//! fault stops the wave with its address.

mod common;

use common::{CODE, DATA, TestMemory, run, run_ok};
use kfd_gfx9::exec::{ExecError, LANES, Wave};

/// Sets VGPR `r` of every lane to `f(lane)`.
fn lanes(w: &mut Wave, r: usize, f: impl Fn(usize) -> u32) {
    for lane in 0..LANES {
        w.vgpr[r][lane] = f(lane);
    }
}

/// Sets the VGPR pair `r, r+1` of every lane to the 64-bit `f(lane)`.
fn lanes64(w: &mut Wave, r: usize, f: impl Fn(usize) -> u64) {
    for lane in 0..LANES {
        let v = f(lane);
        w.vgpr[r][lane] = v as u32;
        w.vgpr[r + 1][lane] = (v >> 32) as u32;
    }
}

fn put32(m: &TestMemory, addr: u64, v: u32) {
    m.put(addr, &v.to_le_bytes());
}

fn put64(m: &TestMemory, addr: u64, v: u64) {
    m.put(addr, &v.to_le_bytes());
}

/// A buffer resource: base, stride, num_records, and word 3.
fn vsharp(w: &mut Wave, s: usize, base: u64, stride: u32, num_records: u32, word3: u32) {
    w.sgpr[s] = base as u32;
    w.sgpr[s + 1] = (base >> 32) as u32 & 0xffff | stride << 16;
    w.sgpr[s + 2] = num_records;
    w.sgpr[s + 3] = word3;
}

/// Word 3 of the scratch V# ROCr 5.2 builds for gfx9 (`AqlQueue::InitScratchSRD`):
/// ELEMENT_SIZE 1 (4 bytes), INDEX_STRIDE 3 (64), ADD_TID_ENABLE; SWIZZLE_ENABLE is bit 63
/// (word 1 bit 31).
const SCRATCH_WORD3: u32 = 1 << 19 | 3 << 21 | 1 << 23;

// ---------------------------------------------------------------------------------------
// SMEM

#[test]
fn s_load_reads_dwords_at_base_plus_offset_with_the_low_bits_ignored() {
    let Some(r) = run_ok(
        "s_load_dword s4, s[0:1], 0x8\n\
         s_load_dwordx2 s[6:7], s[0:1], s2\n\
         s_load_dwordx4 s[8:11], s[0:1], 0x3\n\
         s_load_dwordx8 s[12:19], s[0:1], 0x0\n\
         s_load_dwordx16 s[20:35], s[0:1], -0x4\n\
         s_endpgm",
        |w, m| {
            w.sgpr[0] = DATA as u32 + 0x100;
            w.sgpr[1] = (DATA >> 32) as u32;
            w.sgpr[2] = 0x10;
            for i in 0..32u32 {
                put32(m, DATA + 0xfc + 4 * u64::from(i), 0x1000 + i);
            }
        },
    ) else {
        return;
    };
    let s = &r.wave.sgpr;
    // DATA+0x100 is dword 1 of the table (0x1001).
    assert_eq!(s[4], 0x1003);
    assert_eq!(&s[6..8], &[0x1005, 0x1006]);
    // Offset 3: the low two bits are ignored, so dword 1 onwards.
    assert_eq!(&s[8..12], &[0x1001, 0x1002, 0x1003, 0x1004]);
    assert_eq!(
        s[12..20],
        (0..8).map(|i| 0x1001 + i).collect::<Vec<_>>()[..]
    );
    assert_eq!(
        s[20..36],
        (0..16).map(|i| 0x1000 + i).collect::<Vec<_>>()[..]
    );
}

#[test]
fn s_store_writes_dwords_and_s_dcache_ops_do_nothing() {
    let Some(r) = run_ok(
        "s_store_dword s4, s[0:1], 0x0\n\
         s_store_dwordx2 s[6:7], s[0:1], 0x8\n\
         s_store_dwordx4 s[8:11], s[0:1], 0x10 glc\n\
         s_dcache_wb\n\
         s_dcache_inv\n\
         s_dcache_wb_vol\n\
         s_dcache_inv_vol\n\
         s_load_dword s20, s[0:1], 0x1c\n\
         s_endpgm",
        |w, _| {
            w.sgpr[0] = DATA as u32;
            w.sgpr[1] = (DATA >> 32) as u32;
            for i in 4..12 {
                w.sgpr[i] = 0xa0 + i as u32;
            }
        },
    ) else {
        return;
    };
    let m = &r.mem;
    assert_eq!(m.u32(DATA), 0xa4);
    assert_eq!(m.u32(DATA + 4), 0, "a single dword store wrote more");
    assert_eq!((m.u32(DATA + 8), m.u32(DATA + 12)), (0xa6, 0xa7));
    let x4: Vec<u32> = (0..4).map(|i| m.u32(DATA + 0x10 + 4 * i)).collect();
    assert_eq!(x4, [0xa8, 0xa9, 0xaa, 0xab]);
    // The store is visible to the next load (no cache in between).
    assert_eq!(r.wave.sgpr[20], 0xab);
}

#[test]
fn s_buffer_load_reads_zero_past_num_records_and_s_buffer_store_drops_there() {
    let Some(r) = run_ok(
        "s_buffer_load_dwordx4 s[8:11], s[4:7], 0x8\n\
         s_buffer_load_dword s12, s[4:7], s2\n\
         s_buffer_store_dwordx2 s[14:15], s[4:7], 0x0c\n\
         s_endpgm",
        |w, m| {
            // 16 bytes of records at DATA+0x40.
            w.sgpr[4] = DATA as u32 + 0x40;
            w.sgpr[5] = (DATA >> 32) as u32;
            w.sgpr[6] = 16;
            w.sgpr[7] = 0;
            w.sgpr[2] = 4;
            w.sgpr[14] = 0x77;
            w.sgpr[15] = 0x88;
            for i in 0..8 {
                put32(m, DATA + 0x40 + 4 * i, 0x500 + i as u32);
            }
        },
    ) else {
        return;
    };
    // Offset 8: dwords 2 and 3 are in range, 4 and 5 (bytes 16..24) are not.
    assert_eq!(&r.wave.sgpr[8..12], &[0x502, 0x503, 0, 0]);
    assert_eq!(r.wave.sgpr[12], 0x501);
    // The store's first dword (offset 12) is in range, its second (16) is dropped.
    assert_eq!(r.mem.u32(DATA + 0x4c), 0x77);
    assert_eq!(r.mem.u32(DATA + 0x50), 0x504);
}

#[test]
fn s_memrealtime_counts_at_100_mhz_and_s_memtime_is_monotonic() {
    let asm = "s_memrealtime s[2:3]\n s_memtime s[4:5]\n s_endpgm";
    let read = |r: &common::Run| {
        let t = |i: usize| u64::from(r.wave.sgpr[i]) | u64::from(r.wave.sgpr[i + 1]) << 32;
        (t(2), t(4))
    };
    let before_first = std::time::Instant::now();
    let Some(a) = run_ok(asm, |_, _| {}) else {
        return;
    };
    let after_first = std::time::Instant::now();
    let b = run_ok(asm, |_, _| {}).unwrap();
    let after_second = std::time::Instant::now();
    let (a, b) = (read(&a), read(&b));
    assert!(a.1 >= a.0 && b.0 >= a.1 && b.1 >= b.0, "{a:?} then {b:?}");
    // The ticks between the two first reads lie within the wall time around them (+1 tick of
    // truncation each side).
    let ticks = b.0 - a.0;
    let most = (after_second - before_first).as_nanos() as u64 / 10 + 1;
    assert!(ticks <= most, "{ticks} ticks in at most {most}");
    let least = (after_second - after_first).as_nanos() as u64 / 10;
    // The second run's assembling alone takes milliseconds: its read comes after
    // `after_first` plus that, so at least the assembler's time passed. Bound loosely: half.
    assert!(
        ticks + 1 >= least / 2,
        "{ticks} ticks, expected about {least}"
    );
}

#[test]
fn s_load_from_unmapped_memory_stops_the_wave_with_the_address() {
    let Some(r) = run(
        "s_nop 0\n s_load_dwordx2 s[2:3], s[0:1], 0x10\n s_endpgm",
        |w, _| {
            w.sgpr[0] = 0;
            w.sgpr[1] = 0x7;
            w.sgpr[2] = 0x1234;
        },
    ) else {
        return;
    };
    match r.end {
        Err(ExecError::Memory { pc, fault }) => {
            assert_eq!(pc, CODE + 4);
            assert_eq!(fault.addr, 0x7_0000_0010);
            assert!(!fault.write);
        }
        other => panic!("expected a memory fault, got {other:?}"),
    }
    assert_eq!(
        r.wave.sgpr[2], 0x1234,
        "a faulting load wrote its destination"
    );
}

// ---------------------------------------------------------------------------------------
// GLOBAL

#[test]
fn global_loads_extend_and_d16_forms_keep_the_other_half() {
    let Some(r) = run_ok(
        "global_load_ubyte v10, v[2:3], off\n\
         global_load_sbyte v11, v[2:3], off\n\
         global_load_ushort v12, v[2:3], off offset:2\n\
         global_load_sshort v13, v[2:3], off offset:2\n\
         global_load_ubyte_d16 v14, v[2:3], off\n\
         global_load_ubyte_d16_hi v15, v[2:3], off\n\
         global_load_sbyte_d16 v16, v[2:3], off\n\
         global_load_sbyte_d16_hi v17, v[2:3], off\n\
         global_load_short_d16 v18, v[2:3], off offset:2\n\
         global_load_short_d16_hi v19, v[2:3], off offset:2\n\
         s_endpgm",
        |w, m| {
            lanes64(w, 2, |_| DATA);
            m.put(DATA, &[0x85, 0x00, 0x34, 0x92]);
            for r in 14..20 {
                lanes(w, r, |_| 0xaaaa_bbbb);
            }
        },
    ) else {
        return;
    };
    let v = |i: usize| r.wave.vgpr[i][0];
    assert_eq!(v(10), 0x85);
    assert_eq!(v(11), 0xffff_ff85);
    assert_eq!(v(12), 0x9234);
    assert_eq!(v(13), 0xffff_9234);
    assert_eq!(v(14), 0xaaaa_0085);
    assert_eq!(v(15), 0x0085_bbbb);
    assert_eq!(v(16), 0xaaaa_ff85);
    assert_eq!(v(17), 0xff85_bbbb);
    assert_eq!(v(18), 0xaaaa_9234);
    assert_eq!(v(19), 0x9234_bbbb);
}

#[test]
fn global_dword_loads_and_stores_per_lane_with_saddr_and_masked_lanes_untouched() {
    let Some(r) = run_ok(
        "global_load_dword v4, v0, s[0:1] offset:-4\n\
         global_load_dwordx2 v[6:7], v[2:3], off offset:8\n\
         global_load_dwordx3 v[8:10], v0, s[0:1]\n\
         global_load_dwordx4 v[12:15], v[2:3], off\n\
         global_store_dwordx4 v0, v[12:15], s[0:1] offset:0x800\n\
         global_store_dword v[2:3], v4, off offset:0xc40\n\
         global_store_byte v0, v20, s[2:3]\n\
         global_store_short v0, v20, s[2:3] offset:4\n\
         global_store_byte_d16_hi v0, v20, s[2:3] offset:8\n\
         global_store_short_d16_hi v0, v20, s[2:3] offset:12\n\
         s_endpgm",
        |w, m| {
            w.exec = 0xffff_ffff_ffff_fffe; // lane 0 off
            w.sgpr[0] = DATA as u32;
            w.sgpr[1] = (DATA >> 32) as u32;
            w.sgpr[2] = DATA as u32 + 0x1400;
            w.sgpr[3] = (DATA >> 32) as u32;
            lanes(w, 0, |l| 16 * l as u32 + 4);
            lanes64(w, 2, |l| DATA + 16 * l as u64 + 4);
            lanes(w, 20, |_| 0x1122_3344);
            lanes(w, 4, |_| 0xdead);
            for i in 0..0x800 {
                put32(m, DATA + 4 * i, 0x100 + i as u32);
            }
        },
    ) else {
        return;
    };
    let v = |i: usize, l: usize| r.wave.vgpr[i][l];
    let m = &r.mem;
    for l in 1..64 {
        let dw = 4 * l as u32 + 0x100; // dword index of lane's DATA + 16 l
        assert_eq!(v(4, l), dw, "lane {l}");
        assert_eq!((v(6, l), v(7, l)), (dw + 3, dw + 4));
        assert_eq!((v(8, l), v(9, l), v(10, l)), (dw + 1, dw + 2, dw + 3));
        assert_eq!(
            (v(12, l), v(13, l), v(14, l), v(15, l)),
            (dw + 1, dw + 2, dw + 3, dw + 4)
        );
        let at = DATA + 16 * l as u64 + 4;
        assert_eq!(m.u32(at + 0x800 + 12), dw + 4);
        assert_eq!(m.u32(at + 0xc40), dw);
    }
    // Lane 0: no register written, no memory written.
    assert_eq!(v(4, 0), 0xdead);
    assert_eq!(v(12, 0), 0);
    assert_eq!(m.u32(DATA + 4 + 0x800), 0x100 + (4 + 0x800) / 4);
    // The sub-dword stores of lane 1 (at DATA + 20 + 0x1400...): each writes only its bytes.
    let at = DATA + 20 + 0x1400;
    let old = |a: u64| 0x100 + ((a - DATA) / 4) as u32;
    assert_eq!(m.u32(at), (old(at) & !0xff) | 0x44);
    assert_eq!(m.u32(at + 4), (old(at + 4) & !0xffff) | 0x3344);
    assert_eq!(m.u32(at + 8), (old(at + 8) & !0xff) | 0x22);
    assert_eq!(m.u32(at + 12), (old(at + 12) & !0xffff) | 0x1122);
}

#[test]
fn unit_stride_lanes_read_and_write_as_one_run_and_fault_at_the_first_unmapped_page() {
    // Lanes at consecutive dwords are read and written in one Memory call per page (the
    // executor coalesces them); the effects are the per-lane ones: values land in their
    // lanes, and a run reaching an unmapped page stores the lanes before it and faults at
    // the page's first byte (DATA's 1 MiB region ends at DATA + 0x10_0000).
    let end = DATA + 0x10_0000;
    let Some(r) = run(
        "global_load_dword v1, v[2:3], off\n\
         global_store_dword v[4:5], v1, off offset:-256\n\
         s_endpgm",
        |w, m| {
            for l in 0..64u64 {
                m.put(DATA + 4 * l, &(0x700 + l as u32).to_le_bytes());
            }
            lanes64(w, 2, |l| DATA + 4 * l as u64);
            // Lanes 0..31 end exactly at the region's end; lanes 32.. are past it.
            lanes64(w, 4, |l| end + 128 + 4 * l as u64);
            w.exec = !(1 << 5); // lane 5 off: two runs
        },
    ) else {
        return;
    };
    for l in 0..64 {
        let want = if l == 5 { 0 } else { 0x700 + l as u32 };
        assert_eq!(r.wave.vgpr[1][l], want, "lane {l}");
    }
    match r.end {
        Err(ExecError::Memory { fault, .. }) => {
            assert_eq!(fault.addr, end);
            assert!(fault.write);
        }
        other => panic!("expected a memory fault, got {other:?}"),
    }
    for l in 0..32u64 {
        let want = if l == 5 { 0 } else { 0x700 + l as u32 };
        assert_eq!(r.mem.u32(end - 128 + 4 * l), want, "lane {l}'s store");
    }
}

#[test]
fn a_global_load_from_unmapped_memory_faults_without_writing_registers() {
    let Some(r) = run(
        "global_load_dword v1, v[2:3], off offset:4\n s_endpgm",
        |w, _| {
            lanes64(w, 2, |l| if l == 7 { 0x9_0000_0000 } else { DATA });
            lanes(w, 1, |_| 0x5555);
        },
    ) else {
        return;
    };
    match r.end {
        Err(ExecError::Memory { pc, fault }) => {
            assert_eq!(pc, CODE);
            assert_eq!(fault.addr, 0x9_0000_0004);
            assert!(!fault.write);
        }
        other => panic!("expected a memory fault, got {other:?}"),
    }
    assert!(r.wave.vgpr[1].iter().all(|&v| v == 0x5555));
}

#[test]
fn a_global_store_to_unmapped_memory_faults_as_a_write() {
    let Some(r) = run("global_store_dword v[2:3], v1, off\n s_endpgm", |w, _| {
        lanes64(w, 2, |_| 0x9_0000_0100);
    }) else {
        return;
    };
    match r.end {
        Err(ExecError::Memory { fault, .. }) => {
            assert_eq!(fault.addr, 0x9_0000_0100);
            assert!(fault.write);
        }
        other => panic!("expected a memory fault, got {other:?}"),
    }
}

#[test]
fn loads_with_acc_fill_agprs() {
    let Some(r) = run_ok(
        "global_load_dwordx2 a[2:3], v[0:1], off\n\
         global_store_dword v[0:1], a2, off offset:16\n\
         s_endpgm",
        |w, m| {
            lanes64(w, 0, |_| DATA);
            put64(m, DATA, 0x2222_2222_1111_1111);
        },
    ) else {
        return;
    };
    assert_eq!(
        (r.wave.agpr[2][5], r.wave.agpr[3][5]),
        (0x1111_1111, 0x2222_2222)
    );
    assert_eq!(r.wave.vgpr[2][5], 0, "the VGPRs stayed untouched");
    assert_eq!(r.mem.u32(DATA + 16), 0x1111_1111);
}

/// One 32-bit global atomic with return on lane `l`'s own dword (initial `init(l)`, data
/// `data(l)`): the memory after, and the value returned.
fn atomic32(
    op: &str,
    init: impl Fn(usize) -> u32,
    data: impl Fn(usize) -> u32,
) -> Option<(Vec<u32>, Vec<u32>)> {
    let r = run_ok(
        &format!("global_atomic_{op} v1, v[2:3], v4, off glc\n s_endpgm"),
        |w, m| {
            lanes64(w, 2, |l| DATA + 4 * l as u64);
            lanes(w, 4, &data);
            for l in 0..LANES {
                put32(m, DATA + 4 * l as u64, init(l));
            }
        },
    )?;
    let mem = (0..LANES).map(|l| r.mem.u32(DATA + 4 * l as u64)).collect();
    Some((mem, r.wave.vgpr[1].to_vec()))
}

#[test]
fn global_atomics_32_bit_compute_as_the_guide_says_and_return_the_old_value() {
    let init = |l: usize| [0u32, 5, 7, 0xffff_fff0, 0x8000_0000][l % 5];
    let data = |l: usize| [3u32, 5, 0xffff_fffe, 0x10, 1][l % 5];
    type F = fn(u32, u32) -> u32;
    let cases: &[(&str, F)] = &[
        ("swap", |_, d| d),
        ("add", |m, d| m.wrapping_add(d)),
        ("sub", |m, d| m.wrapping_sub(d)),
        ("smin", |m, d| (m as i32).min(d as i32) as u32),
        ("umin", |m, d| m.min(d)),
        ("smax", |m, d| (m as i32).max(d as i32) as u32),
        ("umax", |m, d| m.max(d)),
        ("and", |m, d| m & d),
        ("or", |m, d| m | d),
        ("xor", |m, d| m ^ d),
        ("inc", |m, d| if m >= d { 0 } else { m + 1 }),
        ("dec", |m, d| if m == 0 || m > d { d } else { m - 1 }),
    ];
    for &(op, f) in cases {
        let Some((mem, ret)) = atomic32(op, init, data) else {
            return;
        };
        for l in 0..LANES {
            assert_eq!(mem[l], f(init(l), data(l)), "{op} lane {l}");
            assert_eq!(ret[l], init(l), "{op} returned, lane {l}");
        }
    }
}

#[test]
fn global_atomic_without_glc_returns_nothing_and_all_lanes_on_one_address_add_up() {
    let Some(r) = run_ok(
        "global_atomic_add v[2:3], v4, off\n\
         global_atomic_add v5, v[2:3], v4, off glc\n\
         s_endpgm",
        |w, _| {
            w.exec = 0x0000_ffff_0000_ffff;
            lanes64(w, 2, |_| DATA);
            lanes(w, 4, |l| l as u32);
            lanes(w, 1, |_| 0x77);
        },
    ) else {
        return;
    };
    let active: Vec<u32> = (0..64)
        .filter(|l| (0x0000_ffff_0000_ffffu64 >> l) & 1 == 1)
        .collect();
    let sum: u32 = active.iter().sum();
    assert_eq!(r.mem.u32(DATA), 2 * sum);
    assert!(r.wave.vgpr[1].iter().all(|&v| v == 0x77));
    // The returning atomic: each active lane got the running total before its own add, in
    // lane order (lanes run one after another).
    let mut total = sum;
    for &l in &active {
        assert_eq!(r.wave.vgpr[5][l as usize], total, "lane {l}");
        total += l;
    }
    assert_eq!(r.wave.vgpr[5][16], 0, "masked lane written");
}

#[test]
fn global_cmpswap_takes_the_new_value_then_the_compare_value() {
    let Some(r) = run_ok(
        "global_atomic_cmpswap v1, v[2:3], v[4:5], off glc\n\
         global_atomic_cmpswap_x2 v[6:7], v[8:9], v[10:13], off glc\n\
         s_endpgm",
        |w, m| {
            lanes64(w, 2, |l| DATA + 4 * l as u64);
            lanes(w, 4, |_| 0xaaaa);
            // Even lanes compare equal.
            lanes(w, 5, |l| if l % 2 == 0 { 10 + l as u32 } else { 0 });
            lanes64(w, 8, |l| DATA + 0x1000 + 8 * l as u64);
            lanes64(w, 10, |_| 0xbbbb_0000_cccc);
            lanes64(w, 12, |l| if l % 2 == 1 { 1 << 40 | l as u64 } else { 0 });
            for l in 0..64 {
                put32(m, DATA + 4 * l, 10 + l as u32);
                put64(m, DATA + 0x1000 + 8 * l, 1 << 40 | l);
            }
        },
    ) else {
        return;
    };
    for l in 0..64usize {
        let m32 = r.mem.u32(DATA + 4 * l as u64);
        assert_eq!(
            m32,
            if l % 2 == 0 { 0xaaaa } else { 10 + l as u32 },
            "lane {l}"
        );
        assert_eq!(r.wave.vgpr[1][l], 10 + l as u32);
        let m64 = r.mem.u64(DATA + 0x1000 + 8 * l as u64);
        let init = 1u64 << 40 | l as u64;
        assert_eq!(m64, if l % 2 == 1 { 0xbbbb_0000_cccc } else { init });
        let ret = u64::from(r.wave.vgpr[6][l]) | u64::from(r.wave.vgpr[7][l]) << 32;
        assert_eq!(ret, init);
    }
}

#[test]
fn global_atomics_64_bit() {
    type F = fn(u64, u64) -> u64;
    let init = |l: usize| [5u64, u64::MAX - 1, 1 << 33, 0][l % 4];
    let data = |l: usize| [7u64, 3, 1 << 32, 9][l % 4];
    let cases: &[(&str, F)] = &[
        ("swap_x2", |_, d| d),
        ("add_x2", |m, d| m.wrapping_add(d)),
        ("sub_x2", |m, d| m.wrapping_sub(d)),
        ("smin_x2", |m, d| (m as i64).min(d as i64) as u64),
        ("umin_x2", |m, d| m.min(d)),
        ("smax_x2", |m, d| (m as i64).max(d as i64) as u64),
        ("umax_x2", |m, d| m.max(d)),
        ("and_x2", |m, d| m & d),
        ("or_x2", |m, d| m | d),
        ("xor_x2", |m, d| m ^ d),
        ("inc_x2", |m, d| if m >= d { 0 } else { m + 1 }),
        ("dec_x2", |m, d| if m == 0 || m > d { d } else { m - 1 }),
    ];
    for &(op, f) in cases {
        let Some(r) = run_ok(
            &format!("global_atomic_{op} v[0:1], v[2:3], v[4:5], off glc\n s_endpgm"),
            |w, m| {
                lanes64(w, 2, |l| DATA + 8 * l as u64);
                lanes64(w, 4, data);
                for l in 0..LANES {
                    put64(m, DATA + 8 * l as u64, init(l));
                }
            },
        ) else {
            return;
        };
        for l in 0..LANES {
            assert_eq!(
                r.mem.u64(DATA + 8 * l as u64),
                f(init(l), data(l)),
                "{op} {l}"
            );
            let ret = u64::from(r.wave.vgpr[0][l]) | u64::from(r.wave.vgpr[1][l]) << 32;
            assert_eq!(ret, init(l), "{op} returned, lane {l}");
        }
    }
}

#[test]
fn global_float_atomics_add_f32_pk_add_f16_and_f64_add_min_max() {
    let Some(r) = run_ok(
        "global_atomic_add_f32 v[0:1], v2, off offset:0\n\
         global_atomic_pk_add_f16 v3, v[0:1], v4, off offset:8 glc\n\
         global_atomic_add_f64 v[6:7], v[0:1], v[8:9], off offset:16 glc\n\
         global_atomic_min_f64 v[0:1], v[8:9], off offset:24\n\
         global_atomic_max_f64 v[0:1], v[8:9], off offset:32\n\
         s_endpgm",
        |w, m| {
            w.exec = 1;
            lanes64(w, 0, |_| DATA);
            lanes(w, 2, |_| 1.25f32.to_bits());
            // f16 (1.0, 2.5) + (0.5, -3.0)
            lanes(w, 4, |_| 0xc200_3800);
            lanes64(w, 8, |_| 2.5f64.to_bits());
            put32(m, DATA, 0.5f32.to_bits());
            put32(m, DATA + 8, 0x4100_3c00);
            put64(m, DATA + 16, 1.0f64.to_bits());
            put64(m, DATA + 24, 4.0f64.to_bits());
            put64(m, DATA + 32, 4.0f64.to_bits());
        },
    ) else {
        return;
    };
    let m = &r.mem;
    assert_eq!(f32::from_bits(m.u32(DATA)), 1.75);
    // (1.0 + 0.5, 2.5 - 3.0) = (1.5, -0.5): f16 0x3e00, 0xb800.
    assert_eq!(m.u32(DATA + 8), 0xb800_3e00);
    assert_eq!(r.wave.vgpr[3][0], 0x4100_3c00);
    assert_eq!(f64::from_bits(m.u64(DATA + 16)), 3.5);
    assert_eq!(
        u64::from(r.wave.vgpr[6][0]) | u64::from(r.wave.vgpr[7][0]) << 32,
        1.0f64.to_bits()
    );
    assert_eq!(f64::from_bits(m.u64(DATA + 24)), 2.5);
    assert_eq!(f64::from_bits(m.u64(DATA + 32)), 4.0);
}

// ---------------------------------------------------------------------------------------
// FLAT: apertures

const SHARED: u64 = 0x1000_0000_0000;
const PRIVATE: u64 = 0x2000_0000_0000;
/// The wave's scratch slot: FLAT_SCRATCH, and the scratch V#'s base + soffset.
const SLOT: u64 = DATA + 0x8_0000;

fn apertures(w: &mut Wave) {
    w.apertures.shared_base = SHARED;
    w.apertures.private_base = PRIVATE;
    w.flat_scratch = SLOT;
}

#[test]
fn flat_addresses_pick_lds_private_or_global_by_aperture() {
    let Some(r) = run_ok(
        "flat_store_dword v[0:1], v10 offset:4\n\
         flat_store_dword v[2:3], v11\n\
         flat_store_dword v[4:5], v12\n\
         flat_load_dword v20, v[0:1] offset:4\n\
         flat_load_dword v21, v[2:3]\n\
         flat_load_dword v22, v[4:5]\n\
         flat_atomic_add v23, v[0:1], v10 offset:4 glc\n\
         s_endpgm",
        |w, _| {
            apertures(w);
            lanes64(w, 0, |l| SHARED + 8 * l as u64);
            lanes64(w, 2, |l| PRIVATE + 16 + 4 * (l as u64 % 2));
            lanes64(w, 4, |l| DATA + 4 * l as u64);
            lanes(w, 10, |l| 0x100 + l as u32);
            lanes(w, 11, |l| 0x200 + l as u32);
            lanes(w, 12, |l| 0x300 + l as u32);
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        let lds = u32::from_le_bytes(r.lds[8 * l + 4..8 * l + 8].try_into().unwrap());
        assert_eq!(
            lds,
            2 * (0x100 + l as u32),
            "LDS after the atomic, lane {l}"
        );
        assert_eq!(r.wave.vgpr[20][l], 0x100 + l as u32);
        assert_eq!(r.wave.vgpr[23][l], 0x100 + l as u32);
        // Private offset 16 (20 in odd lanes): dword 4 (5) of the lane, swizzled.
        let at = SLOT + ((4 + l as u64 % 2) * 64 + l as u64) * 4;
        assert_eq!(r.mem.u32(at), 0x200 + l as u32);
        assert_eq!(r.wave.vgpr[21][l], 0x200 + l as u32);
        assert_eq!(r.mem.u32(DATA + 4 * l as u64), 0x300 + l as u32);
        assert_eq!(r.wave.vgpr[22][l], 0x300 + l as u32);
    }
}

// ---------------------------------------------------------------------------------------
// SCRATCH and MUBUF scratch: one layout

#[test]
fn buffer_scratch_dwords_of_consecutive_lanes_go_as_one_run_and_fault_per_lane() {
    // With ROCr's scratch V# the lanes' same dword sits side by side, so the executor reads
    // and writes them in one Memory call; the effects stay the per-lane ones: EXEC-off lanes
    // untouched, and a run reaching past DATA's 1 MiB region stores the lanes before the
    // region's end and faults at its first unmapped byte.
    let end = DATA + 0x10_0000;
    let Some(r) = run(
        "buffer_store_dword v1, off, s[0:3], s8 offset:4\n\
         buffer_load_dword v2, off, s[0:3], s8 offset:4\n\
         buffer_store_dword v1, off, s[0:3], s9\n\
         s_endpgm",
        |w, _| {
            vsharp(w, 0, DATA, 0, 0x10_0000, SCRATCH_WORD3);
            w.sgpr[1] |= 1 << 31; // SWIZZLE_ENABLE
            w.sgpr[8] = 0x100;
            // Lane l's dword 0 at end - 128 + 4l: lanes 32.. are past the end.
            w.sgpr[9] = 0x10_0000 - 128;
            lanes(w, 1, |l| 0x900 + l as u32);
            lanes(w, 2, |_| 0x5555);
            w.exec = !(1 << 9);
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        let want = if l == 9 { 0x5555 } else { 0x900 + l as u32 };
        assert_eq!(r.wave.vgpr[2][l], want, "lane {l}");
        let stored = if l == 9 { 0 } else { 0x900 + l as u32 };
        // Dword 1 (offset 4) of lane l: (1 * 64 + l) * 4 past the wave's base.
        assert_eq!(
            r.mem.u32(DATA + 0x100 + 256 + 4 * l as u64),
            stored,
            "lane {l}"
        );
    }
    match r.end {
        Err(ExecError::Memory { fault, .. }) => {
            assert_eq!(fault.addr, end);
            assert!(fault.write);
        }
        other => panic!("expected a memory fault, got {other:?}"),
    }
    for l in 0..32u64 {
        let want = if l == 9 { 0 } else { 0x900 + l as u32 };
        assert_eq!(r.mem.u32(end - 128 + 4 * l), want, "lane {l}'s store");
    }
}

#[test]
fn scratch_stores_read_back_through_the_rocr_scratch_buffer_resource() {
    // Stored by scratch_* (FLAT_SCRATCH), loaded by buffer_* with ROCr's scratch V#, base
    // the queue's scratch and soffset the wave's offset in it.
    let Some(r) = run_ok(
        "scratch_store_dwordx2 v0, v[2:3], off offset:8\n\
         scratch_store_dword off, v4, s9 offset:-4\n\
         buffer_load_dwordx2 v[10:11], v0, s[0:3], s8 offen offset:8\n\
         buffer_load_dword v12, off, s[0:3], s8 offset:28\n\
         s_endpgm",
        |w, _| {
            apertures(w);
            vsharp(w, 0, DATA, 0, 0x10_0000, SCRATCH_WORD3);
            w.sgpr[1] |= 1 << 31; // SWIZZLE_ENABLE
            w.sgpr[8] = (SLOT - DATA) as u32;
            w.sgpr[9] = 32;
            lanes(w, 0, |l| 4 * (l as u32 % 3));
            lanes(w, 2, |l| 0xa000 + l as u32);
            lanes(w, 3, |l| 0xb000 + l as u32);
            lanes(w, 4, |l| 0xc000 + l as u32);
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        let base = 8 + 4 * (l as u64 % 3);
        // The bytes sit where the swizzle puts them: dword d of lane l at (d * 64 + l) * 4.
        let at = |off: u64| SLOT + (off / 4 * 64 + l as u64) * 4;
        assert_eq!(r.mem.u32(at(base)), 0xa000 + l as u32, "lane {l}");
        assert_eq!(r.mem.u32(at(base + 4)), 0xb000 + l as u32);
        assert_eq!(r.mem.u32(at(28)), 0xc000 + l as u32);
        assert_eq!(r.wave.vgpr[10][l], 0xa000 + l as u32);
        assert_eq!(r.wave.vgpr[11][l], 0xb000 + l as u32);
        assert_eq!(r.wave.vgpr[12][l], 0xc000 + l as u32);
    }
}

#[test]
fn buffer_scratch_stores_read_back_through_scratch_and_flat_private_loads() {
    let Some(r) = run_ok(
        "buffer_store_dword v2, v0, s[0:3], s8 offen offset:4\n\
         buffer_store_short v3, v0, s[0:3], s8 offen offset:10\n\
         scratch_load_dword v10, v0, off offset:4\n\
         scratch_load_sshort v11, v0, off offset:10\n\
         flat_load_dword v12, v[4:5] offset:4\n\
         s_endpgm",
        |w, _| {
            apertures(w);
            vsharp(w, 0, DATA, 0, 0x10_0000, SCRATCH_WORD3);
            w.sgpr[1] |= 1 << 31;
            w.sgpr[8] = (SLOT - DATA) as u32;
            lanes(w, 0, |l| 16 * (l as u32 % 2));
            lanes(w, 2, |l| 0x1234_0000 + l as u32);
            lanes(w, 3, |l| 0xf000 + l as u32);
            lanes64(w, 4, |l| PRIVATE + 16 * (l as u64 % 2));
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        assert_eq!(r.wave.vgpr[10][l], 0x1234_0000 + l as u32, "lane {l}");
        assert_eq!(r.wave.vgpr[11][l], 0xffff_f000 + l as u32);
        assert_eq!(r.wave.vgpr[12][l], 0x1234_0000 + l as u32);
    }
}

// ---------------------------------------------------------------------------------------
// MUBUF

#[test]
fn buffer_raw_loads_return_zero_per_dword_past_num_records_and_stores_drop_there() {
    let Some(r) = run_ok(
        "buffer_load_dwordx4 v[10:13], v0, s[0:3], s8 offen offset:4\n\
         buffer_load_ubyte v14, v0, s[0:3], s8 offen offset:4\n\
         buffer_store_dwordx4 v[20:23], v1, s[0:3], s8 offen\n\
         s_endpgm",
        |w, m| {
            // 0x98 bytes of records at DATA+0x100; SOFFSET 0x40 moves the address but not
            // the check.
            vsharp(w, 0, DATA + 0x100, 0, 0x98, 0);
            w.sgpr[8] = 0x40;
            lanes(w, 0, |l| 4 * l as u32);
            lanes(w, 1, |l| 16 * l as u32);
            for r in 20..24 {
                lanes(w, r, |l| 0x7700 + 16 * l as u32 + r as u32);
            }
            for i in 0..0x200 {
                put32(m, DATA + 0x140 + 4 * i, i as u32);
            }
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        let off = 4 * l as u64 + 4;
        for k in 0..4u64 {
            let o = off + 4 * k;
            let want = if o + 4 <= 0x98 { (o / 4) as u32 } else { 0 };
            assert_eq!(r.wave.vgpr[10 + k as usize][l], want, "lane {l} dword {k}");
            // Lane 9's store: its first two dwords (0x90, 0x94) fit, the others drop.
            let so = 16 * l as u64 + 4 * k;
            let stored = r.mem.u32(DATA + 0x140 + so);
            if so + 4 > 0x98 {
                assert_eq!(stored, (so / 4) as u32, "lane {l} dword {k} not dropped");
            } else {
                assert_eq!(
                    stored,
                    0x7700 + 16 * l as u32 + 20 + k as u32,
                    "lane {l} {k}"
                );
            }
        }
        let want = if off < 0x98 {
            (off / 4) as u32 & 0xff
        } else {
            0
        };
        assert_eq!(r.wave.vgpr[14][l], want, "ubyte lane {l}");
    }
}

#[test]
fn buffer_structured_indexes_scale_by_stride_and_check_the_index() {
    let Some(r) = run_ok(
        "buffer_load_dword v10, v[0:1], s[0:3], 0 idxen offen offset:2\n\
         buffer_load_dword v11, v0, s[0:3], 0 idxen offset:4\n\
         s_endpgm",
        |w, m| {
            // 10 records of 12 bytes.
            vsharp(w, 0, DATA, 12, 10, 0);
            lanes(w, 0, |l| l as u32);
            lanes(w, 1, |_| 2);
            for i in 0..64 {
                put32(m, DATA + 4 * i, 0x100 + i as u32);
            }
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        let ok = l < 10;
        let at = 12 * l as u64 + 4;
        let want = |a: u64| if ok { 0x100 + (a / 4) as u32 } else { 0 };
        assert_eq!(r.wave.vgpr[10][l], want(at), "lane {l}");
        assert_eq!(r.wave.vgpr[11][l], want(at));
    }
}

#[test]
fn buffer_atomics_return_in_vdata_and_do_nothing_out_of_range() {
    let Some(r) = run_ok(
        "buffer_atomic_add v2, v0, s[0:3], 0 offen glc\n\
         buffer_atomic_cmpswap v[4:5], v0, s[0:3], 0 offen offset:0x400 glc\n\
         buffer_atomic_umax_x2 v[6:7], v0, s[0:3], 0 offen offset:0x800\n\
         s_endpgm",
        |w, m| {
            vsharp(w, 0, DATA, 0, 0xc00, 0);
            w.exec = 0xffff_ffff_ffff_fff7;
            // Lane 63's offset is out of range for every op.
            lanes(w, 0, |l| if l == 63 { 0x1000 } else { 8 * l as u32 });
            lanes(w, 2, |_| 5);
            lanes(w, 4, |_| 0x99);
            lanes(w, 5, |l| if l % 2 == 0 { 7 } else { 0 });
            lanes64(w, 6, |l| 100 + l as u64);
            for l in 0..64 {
                put32(m, DATA + 8 * l, 1);
                put32(m, DATA + 0x400 + 8 * l, 7);
                put64(m, DATA + 0x800 + 8 * l, 150);
            }
        },
    ) else {
        return;
    };
    for l in 0..63usize {
        let a = DATA + 8 * l as u64;
        if l == 3 {
            assert_eq!(r.mem.u32(a), 1);
            assert_eq!(r.wave.vgpr[2][l], 5, "masked lane's VDATA written");
            continue;
        }
        assert_eq!(r.mem.u32(a), 6, "lane {l}");
        assert_eq!(r.wave.vgpr[2][l], 1);
        assert_eq!(r.mem.u32(a + 0x400), if l % 2 == 0 { 0x99 } else { 7 });
        assert_eq!(r.wave.vgpr[4][l], 7);
        assert_eq!(r.mem.u64(a + 0x800), 150u64.max(100 + l as u64));
        assert_eq!(r.wave.vgpr[6][l], 100 + l as u32, "no GLC: VDATA kept");
    }
    // Out of range: returns 0, changes nothing (the memory past the records is untouched).
    assert_eq!(r.wave.vgpr[2][63], 0);
    assert_eq!(r.wave.vgpr[4][63], 0);
    assert_eq!(r.mem.u32(DATA + 0x1000), 0);
}

#[test]
fn buffer_d16_loads_and_stores() {
    let Some(r) = run_ok(
        "buffer_load_ubyte_d16 v1, off, s[0:3], 0\n\
         buffer_load_sbyte_d16_hi v2, off, s[0:3], 0\n\
         buffer_load_short_d16_hi v3, off, s[0:3], 0 offset:2\n\
         buffer_load_sbyte v4, off, s[0:3], 0\n\
         buffer_load_sshort v5, off, s[0:3], 0 offset:2\n\
         buffer_store_short_d16_hi v6, off, s[0:3], 0 offset:8\n\
         buffer_store_byte_d16_hi v6, off, s[0:3], 0 offset:12\n\
         s_endpgm",
        |w, m| {
            w.exec = 1;
            vsharp(w, 0, DATA, 0, 64, 0);
            m.put(DATA, &[0xf0, 0, 0x01, 0x80]);
            lanes(w, 1, |_| 0x1111_2222);
            lanes(w, 2, |_| 0x1111_2222);
            lanes(w, 3, |_| 0x1111_2222);
            lanes(w, 6, |_| 0xabcd_0000);
        },
    ) else {
        return;
    };
    let v = |i: usize| r.wave.vgpr[i][0];
    assert_eq!(v(1), 0x1111_00f0);
    assert_eq!(v(2), 0xfff0_2222);
    assert_eq!(v(3), 0x8001_2222);
    assert_eq!(v(4), 0xffff_fff0);
    assert_eq!(v(5), 0xffff_8001);
    assert_eq!(r.mem.u32(DATA + 8), 0xabcd);
    // Bits 23:16.
    assert_eq!(r.mem.u32(DATA + 12), 0xcd);
}

#[test]
fn buffer_cache_controls_do_nothing() {
    let Some(r) = run_ok("buffer_wbinvl1\n buffer_wbinvl1_vol\n s_endpgm", |_, _| {}) else {
        return;
    };
    // Two 8-byte MUBUF no-ops and s_endpgm.
    assert_eq!(r.wave.pc, CODE + 20);
}

/// Word 3 of a typed V#: DST_SEL X Y Z W (4 5 6 7: identity), NUM_FORMAT, DATA_FORMAT
/// (ROCr's `SQ_BUF_RSRC_WORD3`; `BUF_NUM_FORMAT_*`, `BUF_DATA_FORMAT_*`).
fn typed_word3(num: u32, data: u32) -> u32 {
    4 | 5 << 3 | 6 << 6 | 7 << 9 | num << 12 | data << 15
}

#[test]
fn buffer_format_loads_convert_by_the_resources_data_and_number_formats() {
    // Structured buffer of 4-byte records (STRIDE 4), lane l reads record l (IDXEN).
    let rgba = [0u8, 51, 255, 128];
    let Some(r) = run_ok(
        // 8_8_8_8 UNORM: four channels; 16_16 SINT: two, Z = 0, W = 1 (integer);
        // 32 FLOAT with DST_SEL = W X 1 0; 10_11_11 FLOAT.
        "buffer_load_format_xyzw v[4:7], v0, s[0:3], 0 idxen\n\
         buffer_load_format_xyzw v[8:11], v0, s[4:7], 0 idxen\n\
         buffer_load_format_xyzw v[12:15], v0, s[8:11], 0 idxen\n\
         buffer_load_format_xyz v[16:18], v0, s[12:15], 0 idxen\n\
         buffer_load_format_x v19, v0, s[0:3], 0 idxen offset:4\n\
         s_endpgm",
        |w, m| {
            lanes(w, 0, |l| l as u32);
            vsharp(w, 0, DATA, 4, 64, typed_word3(0, 10));
            vsharp(w, 4, DATA + 0x400, 4, 64, typed_word3(5, 5));
            // DST_SEL X = W (7), Y = X (4), Z = 1, W = 0.
            let sel = 7 | 4 << 3 | 1 << 6;
            vsharp(w, 8, DATA + 0x800, 4, 64, sel | 7 << 12 | 4 << 15);
            vsharp(w, 12, DATA + 0xc00, 4, 64, typed_word3(7, 6));
            for l in 0..64u64 {
                m.put(DATA + 4 * l, &rgba.map(|b| b.wrapping_add(l as u8 & 1)));
                // 16_16: X = -l, Y = l << 4.
                put32(
                    m,
                    DATA + 0x400 + 4 * l,
                    (-(l as i32)) as u32 & 0xffff | (l as u32) << 20,
                );
                put32(m, DATA + 0x800 + 4 * l, (l as f32).to_bits());
                // 10_11_11 FLOAT: X = 1.0, Y = 2.0 (uf11), Z = 0.5 (uf10).
                put32(
                    m,
                    DATA + 0xc00 + 4 * l,
                    15 << 6 | (16 << 6) << 11 | (14 << 5) << 22,
                );
            }
        },
    ) else {
        return;
    };
    for l in 0..64usize {
        let v = |i: usize| r.wave.vgpr[i][l];
        let f = |i: usize| f32::from_bits(v(i));
        let odd = l as u32 & 1;
        let unorm = |b: u8| (f64::from(b.wrapping_add(odd as u8)) / 255.0) as f32;
        assert_eq!(
            [f(4), f(5), f(6), f(7)],
            rgba.map(unorm),
            "lane {l}: 8_8_8_8 UNORM"
        );
        assert_eq!(
            [v(8), v(9), v(10), v(11)],
            [(-(l as i32)) as u32, (l as u32) << 4, 0, 1]
        );
        assert_eq!(
            [v(12), v(13), v(14), v(15)],
            [1.0f32, l as f32, 1.0, 0.0].map(f32::to_bits)
        );
        assert_eq!([f(16), f(17), f(18)], [1.0, 2.0, 0.5]);
        // offset:4 with STRIDE 4: record l + 1's bytes (lane 63: past the data, zeros).
        let next = ((l + 1) & 1) as f64 / 255.0;
        assert_eq!(f(19), next as f32, "lane {l}");
    }
}

#[test]
fn buffer_format_stores_convert_and_write_only_their_components() {
    let Some(r) = run_ok(
        // 8_8_8_8 UNORM, two channels: bytes 2 and 3 keep their old values.
        "buffer_store_format_xy v[2:3], off, s[0:3], 0\n\
         buffer_store_format_xyzw v[4:7], off, s[4:7], 0\n\
         buffer_store_format_d16_xy v8, off, s[8:11], 0\n\
         buffer_store_format_d16_hi_x v9, off, s[12:15], 0 offset:8\n\
         s_endpgm",
        |w, m| {
            w.exec = 1;
            vsharp(w, 0, DATA, 0, 64, typed_word3(0, 10));
            m.put(DATA, &[9, 9, 9, 9]);
            lanes(w, 2, |_| 0.5f32.to_bits());
            lanes(w, 3, |_| 7.0f32.to_bits()); // clamps to 1.0
            // 16_16_16_16 SINT: saturating to 16 bits.
            vsharp(w, 4, DATA + 0x100, 0, 64, typed_word3(5, 12));
            lanes(w, 4, |_| 5);
            lanes(w, 5, |_| (-70_000i32) as u32);
            lanes(w, 6, |_| 70_000);
            lanes(w, 7, |_| (-1i32) as u32);
            // 16_16 FLOAT from packed halves: 1.5 and -2.0 (f16 0x3e00, 0xc000).
            vsharp(w, 8, DATA + 0x200, 0, 64, typed_word3(7, 5));
            lanes(w, 8, |_| 0xc000_3e00);
            // 32 FLOAT from the high half: f16 0x3c00 is 1.0.
            vsharp(w, 12, DATA + 0x200, 0, 64, typed_word3(7, 4));
            lanes(w, 9, |_| 0x3c00_1234);
        },
    ) else {
        return;
    };
    assert_eq!(r.mem.bytes(DATA, 4), [128, 255, 9, 9]);
    assert_eq!(r.mem.u64(DATA + 0x100), 0xffff_7fff_8000_0005);
    assert_eq!(r.mem.u32(DATA + 0x200), 0xc000_3e00);
    assert_eq!(r.mem.u32(DATA + 0x208), 1.0f32.to_bits());
}

#[test]
fn buffer_format_d16_loads_pack_halves_and_keep_the_rest() {
    let Some(r) = run_ok(
        // 16_16_16_16 UNORM: xyz into v[2:3] (v3's high half kept), hi_x into v4's high half.
        "buffer_load_format_d16_xyz v[2:3], off, s[0:3], 0\n\
         buffer_load_format_d16_hi_x v4, off, s[0:3], 0\n\
         buffer_load_format_d16_x v5, off, s[4:7], 0\n\
         buffer_load_format_x v6, off, s[0:3], 0 offset:512\n\
         s_endpgm",
        |w, m| {
            w.exec = 1;
            vsharp(w, 0, DATA, 0, 64, typed_word3(0, 12));
            // UNORM 16: 0xffff = 1.0, 0 = 0, 0x8000 ~ 0.50000763 (f16 0x3800).
            put64(m, DATA, 0x1234_8000_0000_ffff);
            lanes(w, 3, |_| 0xaaaa_bbbb);
            lanes(w, 4, |_| 0xcccc_dddd);
            // 32 UINT in d16: the low 16 bits.
            vsharp(w, 4, DATA + 0x100, 0, 64, typed_word3(4, 4));
            put32(m, DATA + 0x100, 0x0001_2345);
            lanes(w, 5, |_| 0xeeee_ffff);
            lanes(w, 6, |_| 0x7777);
        },
    ) else {
        return;
    };
    let v = |i: usize| r.wave.vgpr[i][0];
    assert_eq!(v(2), 0x0000_3c00, "x = 1.0, y = 0.0");
    assert_eq!(v(3), 0xaaaa_3800, "z = 0.5, high half kept");
    assert_eq!(v(4), 0x3c00_dddd);
    assert_eq!(v(5), 0xeeee_2345);
    // Past NUM_RECORDS (64 bytes): the element reads 0.
    assert_eq!(v(6), 0);
}

// ---------------------------------------------------------------------------------------
// DS

#[test]
fn ds_writes_and_reads_of_every_width() {
    let Some(r) = run_ok(
        "ds_write_b8 v0, v1 offset:0\n\
         ds_write_b16 v0, v1 offset:2\n\
         ds_write_b32 v0, v1 offset:4\n\
         ds_write_b64 v0, v[2:3] offset:8\n\
         ds_write_b96 v0, v[4:6] offset:16\n\
         ds_write_b128 v0, v[4:7] offset:32\n\
         ds_read_u8 v10, v0 offset:0\n\
         ds_read_i8 v11, v0 offset:0\n\
         ds_read_u16 v12, v0 offset:2\n\
         ds_read_i16 v13, v0 offset:2\n\
         ds_read_b32 v14, v0 offset:4\n\
         ds_read_b64 v[16:17], v0 offset:8\n\
         ds_read_b96 v[20:22], v0 offset:16\n\
         ds_read_b128 v[24:27], v0 offset:32\n\
         s_endpgm",
        |w, _| {
            lanes(w, 0, |l| 64 * l as u32);
            lanes(w, 1, |l| 0x8182_8384 + l as u32);
            lanes(w, 2, |l| 0x200 + l as u32);
            lanes(w, 3, |l| 0x300 + l as u32);
            for r in 4..8 {
                lanes(w, r, |l| (r as u32) << 12 | l as u32);
            }
        },
    ) else {
        return;
    };
    let v = |i: usize, l: usize| r.wave.vgpr[i][l];
    for l in 0..LANES {
        let x = 0x8182_8384 + l as u32;
        assert_eq!(v(10, l), x & 0xff);
        assert_eq!(v(11, l), (x as u8) as i8 as i32 as u32);
        assert_eq!(v(12, l), x & 0xffff);
        assert_eq!(v(13, l), (x as u16) as i16 as i32 as u32);
        assert_eq!(v(14, l), x);
        assert_eq!((v(16, l), v(17, l)), (0x200 + l as u32, 0x300 + l as u32));
        for k in 0..3 {
            assert_eq!(v(20 + k, l), ((4 + k as u32) << 12) | l as u32);
        }
        for k in 0..4 {
            assert_eq!(v(24 + k, l), ((4 + k as u32) << 12) | l as u32);
        }
        // The b96 store wrote 12 bytes, not 16.
        assert_eq!(&r.lds[64 * l + 28..64 * l + 32], &[0; 4]);
    }
}

#[test]
fn ds_read2_write2_use_element_sized_offsets_and_st64() {
    let Some(r) = run_ok(
        "ds_write2_b32 v0, v1, v2 offset0:1 offset1:3\n\
         ds_write2st64_b32 v0, v1, v2 offset0:1 offset1:2\n\
         ds_write2_b64 v0, v[4:5], v[6:7] offset0:4 offset1:5\n\
         ds_read2_b32 v[10:11], v0 offset0:3 offset1:1\n\
         ds_read2st64_b32 v[12:13], v0 offset0:2 offset1:1\n\
         ds_read2_b64 v[14:17], v0 offset0:5 offset1:4\n\
         s_endpgm",
        |w, _| {
            w.exec = 0b11;
            lanes(w, 0, |l| 0x1000 * l as u32);
            lanes(w, 1, |l| 0x11 + l as u32);
            lanes(w, 2, |l| 0x22 + l as u32);
            lanes64(w, 4, |l| 0x4444_0000_0000 + l as u64);
            lanes64(w, 6, |l| 0x6666_0000_0000 + l as u64);
        },
    ) else {
        return;
    };
    let lds32 = |a: usize| u32::from_le_bytes(r.lds[a..a + 4].try_into().unwrap());
    for l in 0..2usize {
        let b = 0x1000 * l;
        assert_eq!(lds32(b + 4), 0x11 + l as u32);
        assert_eq!(lds32(b + 12), 0x22 + l as u32);
        assert_eq!(lds32(b + 256), 0x11 + l as u32);
        assert_eq!(lds32(b + 512), 0x22 + l as u32);
        assert_eq!(lds32(b + 32), 0x4444_0000_0000u64 as u32 + l as u32);
        assert_eq!(lds32(b + 44), 0x6666);
        let v = |i: usize| r.wave.vgpr[i][l];
        assert_eq!((v(10), v(11)), (0x22 + l as u32, 0x11 + l as u32));
        assert_eq!((v(12), v(13)), (0x22 + l as u32, 0x11 + l as u32));
        assert_eq!(
            (v(14), v(15), v(16), v(17)),
            (l as u32, 0x6666, l as u32, 0x4444)
        );
    }
    assert_eq!(lds32(0x2000 + 4), 0, "lane 2 is masked off");
}

#[test]
fn ds_out_of_range_reads_zero_and_drops_writes_per_dword() {
    let Some(r) = run_ok(
        "ds_write_b64 v0, v[2:3]\n\
         ds_read_b64 v[4:5], v0\n\
         ds_add_rtn_u32 v6, v0, v2 offset:4\n\
         s_endpgm",
        |w, _| {
            w.exec = 1;
            // The harness's LDS is 64 KiB: the first dword fits, the second does not.
            lanes(w, 0, |_| 0xfffc);
            lanes(w, 2, |_| 0xaaaa);
            lanes(w, 3, |_| 0xbbbb);
            lanes(w, 6, |_| 0x1234);
        },
    ) else {
        return;
    };
    assert_eq!(&r.lds[0xfffc..], &0xaaaau32.to_le_bytes());
    assert_eq!((r.wave.vgpr[4][0], r.wave.vgpr[5][0]), (0xaaaa, 0));
    assert_eq!(r.wave.vgpr[6][0], 0, "an out-of-range atomic returns 0");
}

#[test]
fn ds_atomics_compute_and_return_as_the_guide_says() {
    type F = fn(u32, u32, u32) -> u32;
    let init = |l: usize| [0u32, 5, 9, 0xffff_fff0, 0x8000_0000][l % 5];
    let d0 = |l: usize| [3u32, 5, 0xffff_fffe, 0x10, 0x0f0f_0000][l % 5];
    let d1 = |l: usize| [0u32, 0x0f0f, 9, 0xffff_fff0, 0x1234][l % 5];
    let cases: &[(&str, &str, bool, F)] = &[
        ("ds_add_u32", "ds_add_rtn_u32", false, |m, d, _| {
            m.wrapping_add(d)
        }),
        ("ds_sub_u32", "ds_sub_rtn_u32", false, |m, d, _| {
            m.wrapping_sub(d)
        }),
        ("ds_rsub_u32", "ds_rsub_rtn_u32", false, |m, d, _| {
            d.wrapping_sub(m)
        }),
        ("ds_inc_u32", "ds_inc_rtn_u32", false, |m, d, _| {
            if m >= d { 0 } else { m + 1 }
        }),
        ("ds_dec_u32", "ds_dec_rtn_u32", false, |m, d, _| {
            if m == 0 || m > d { d } else { m - 1 }
        }),
        ("ds_min_i32", "ds_min_rtn_i32", false, |m, d, _| {
            (m as i32).min(d as i32) as u32
        }),
        ("ds_max_i32", "ds_max_rtn_i32", false, |m, d, _| {
            (m as i32).max(d as i32) as u32
        }),
        ("ds_min_u32", "ds_min_rtn_u32", false, |m, d, _| m.min(d)),
        ("ds_max_u32", "ds_max_rtn_u32", false, |m, d, _| m.max(d)),
        ("ds_and_b32", "ds_and_rtn_b32", false, |m, d, _| m & d),
        ("ds_or_b32", "ds_or_rtn_b32", false, |m, d, _| m | d),
        ("ds_xor_b32", "ds_xor_rtn_b32", false, |m, d, _| m ^ d),
        ("ds_mskor_b32", "ds_mskor_rtn_b32", true, |m, d, e| {
            (m & !d) | e
        }),
        // DS_CMPST: DATA0 is the compare value, DATA1 the one stored.
        ("ds_cmpst_b32", "ds_cmpst_rtn_b32", true, |m, d, e| {
            if m == d { e } else { m }
        }),
        ("ds_write_b32", "ds_wrxchg_rtn_b32", false, |_, d, _| d),
    ];
    for &(plain, rtn, two, f) in cases {
        let data = if two { "v1, v2" } else { "v1" };
        // Fill both regions with `init`, then one op on each.
        let asm = format!(
            "ds_write_b32 v0, v5\n ds_write_b32 v4, v5\n \
             {plain} v0, {data}\n {rtn} v3, v4, {data}\n s_endpgm"
        );
        let Some(r) = run_ok(&asm, |w, _| {
            w.exec = !(1 << 7);
            lanes(w, 0, |l| 4 * l as u32);
            lanes(w, 4, |l| 0x400 + 4 * l as u32);
            lanes(w, 5, init);
            lanes(w, 1, d0);
            lanes(w, 2, d1);
            lanes(w, 3, |_| 0xeeee);
        }) else {
            return;
        };
        let lds = |a: usize| u32::from_le_bytes(r.lds[a..a + 4].try_into().unwrap());
        for l in 0..LANES {
            if l == 7 {
                assert_eq!(
                    (lds(4 * l), lds(0x400 + 4 * l)),
                    (0, 0),
                    "{plain}: masked lane"
                );
                assert_eq!(r.wave.vgpr[3][l], 0xeeee);
                continue;
            }
            let want = f(init(l), d0(l), d1(l));
            assert_eq!(lds(4 * l), want, "{plain} lane {l}");
            assert_eq!(lds(0x400 + 4 * l), want, "{rtn} lane {l}");
            assert_eq!(
                r.wave.vgpr[3][l],
                init(l),
                "{rtn} returns the old value, lane {l}"
            );
        }
    }
}

#[test]
fn ds_float_atomics_and_the_64_bit_add() {
    let Some(r) = run_ok(
        "ds_write_b32 v0, v10 offset:0\n\
         ds_write_b32 v0, v10 offset:4\n\
         ds_write_b32 v0, v10 offset:8\n\
         ds_write_b32 v0, v10 offset:12\n\
         ds_write_b32 v0, v10 offset:16\n\
         ds_write_b64 v0, v[12:13] offset:24\n\
         ds_add_f32 v0, v11 offset:0\n\
         ds_add_rtn_f32 v20, v0, v11 offset:4\n\
         ds_min_f32 v0, v11 offset:8\n\
         ds_max_f32 v0, v11 offset:12\n\
         ds_cmpst_f32 v0, v14, v11 offset:16\n\
         ds_add_u64 v0, v[12:13] offset:24\n\
         s_endpgm",
        |w, _| {
            w.exec = 0b11;
            lanes(w, 0, |l| 64 * l as u32);
            lanes(w, 10, |_| 2.0f32.to_bits());
            lanes(w, 11, |l| [0.5f32, 3.0][l % 2].to_bits());
            lanes64(w, 12, |_| 0x1_8000_0000);
            // -0.0 == 2.0? no; lane 1 compares 2.0 == 2.0.
            lanes(w, 14, |l| [(-0.0f32).to_bits(), 2.0f32.to_bits()][l % 2]);
        },
    ) else {
        return;
    };
    let f = |a: usize| f32::from_le_bytes(r.lds[a..a + 4].try_into().unwrap());
    for l in 0..2usize {
        let b = 64 * l;
        let d = [0.5f32, 3.0][l];
        assert_eq!(f(b), 2.0 + d);
        assert_eq!(f(b + 4), 2.0 + d);
        assert_eq!(f32::from_bits(r.wave.vgpr[20][l]), 2.0);
        assert_eq!(f(b + 8), d.min(2.0));
        assert_eq!(f(b + 12), d.max(2.0));
        assert_eq!(f(b + 16), if l == 1 { d } else { 2.0 });
        let q = u64::from_le_bytes(r.lds[b + 24..b + 32].try_into().unwrap());
        assert_eq!(q, 0x3_0000_0000);
    }
}

#[test]
fn ds_swizzle_quad_perm_and_bitmask_modes() {
    let Some(r) = run_ok(
        "ds_swizzle_b32 v1, v0 offset:swizzle(QUAD_PERM,1,0,3,2)\n\
         ds_swizzle_b32 v2, v0 offset:swizzle(BITMASK_PERM,\"01pip\")\n\
         ds_swizzle_b32 v3, v0 offset:swizzle(SWAP,16)\n\
         s_endpgm",
        |w, _| {
            w.exec = !(1 << 5);
            lanes(w, 0, |l| 100 + l as u32);
            lanes(w, 1, |_| 0xeeee);
        },
    ) else {
        return;
    };
    let v = |i: usize, l: usize| r.wave.vgpr[i][l];
    let src = |l: usize| if l == 5 { 0 } else { 100 + l as u32 };
    for l in 0..LANES {
        if l == 5 {
            assert_eq!(v(1, l), 0xeeee, "masked lane written");
            continue;
        }
        let q = (l & !3) | [1, 0, 3, 2][l & 3];
        assert_eq!(v(1, l), src(q), "quad perm lane {l}");
        // "01pip": bit 4 forced 0, bit 3 forced 1, bit 2 kept, bit 1 inverted, bit 0 kept
        // (LLVM: and_mask 0b00111, or_mask 0b01000, xor_mask 0b00010).
        let b = ((((l & 0x1f) & 0b00111) | 0b01000) ^ 0b00010) | (l & 0x20);
        assert_eq!(v(2, l), src(b), "bitmask lane {l}");
        assert_eq!(v(3, l), src(l ^ 16), "swap 16 lane {l}");
    }
}

#[test]
fn ds_permute_pushes_and_bpermute_pulls_under_exec() {
    let Some(r) = run_ok(
        "ds_permute_b32 v3, v0, v1\n\
         ds_bpermute_b32 v4, v0, v1 offset:4\n\
         s_endpgm",
        |w, _| {
            w.exec = !(1u64 << 10);
            // Lane l names lane 63 - l (bytes), with high bits that must be ignored.
            lanes(w, 0, |l| 0x1000 | (4 * (63 - l as u32)));
            lanes(w, 1, |l| 500 + l as u32);
            lanes(w, 3, |_| 0xeeee);
            lanes(w, 4, |_| 0xeeee);
        },
    ) else {
        return;
    };
    for l in 0..LANES {
        if l == 10 {
            assert_eq!((r.wave.vgpr[3][l], r.wave.vgpr[4][l]), (0xeeee, 0xeeee));
            continue;
        }
        // Permute: lane 63-l receives lane l's value; lane 53 would receive masked lane 10's.
        let from = 63 - l;
        assert_eq!(
            r.wave.vgpr[3][l],
            if from == 10 { 0 } else { 500 + from as u32 },
            "permute {l}"
        );
        // Bpermute with offset 4: lane l reads lane (63 - l + 1) % 64.
        let from = (64 - l) % 64;
        assert_eq!(
            r.wave.vgpr[4][l],
            if from == 10 { 0 } else { 500 + from as u32 },
            "bpermute {l}"
        );
    }
}

#[test]
fn gds_is_not_modelled() {
    // gfx90a has no GDS and LLVM refuses the bit there: the gfx900 encoding of
    // `ds_add_u32 v0, v1 gds` (GDS, bit 16 of the first dword).
    let Some(r) = run(".long 0xd8010000, 0x00000100\n s_endpgm", |_, _| {}) else {
        return;
    };
    assert!(
        matches!(r.end, Err(ExecError::Unimplemented { pc: CODE, .. })),
        "{:?}",
        r.end
    );
}

#[test]
fn ds_d16_reads_keep_the_other_half_and_d16_hi_writes_take_the_high_half() {
    let Some(r) = run_ok(
        "ds_write_b32 v0, v1\n\
         ds_read_u8_d16 v10, v0\n\
         ds_read_u8_d16_hi v11, v0\n\
         ds_read_i8_d16 v12, v0\n\
         ds_read_i8_d16_hi v13, v0\n\
         ds_read_u16_d16 v14, v0 offset:2\n\
         ds_read_u16_d16_hi v15, v0 offset:2\n\
         ds_write_b8_d16_hi v0, v2 offset:8\n\
         ds_write_b16_d16_hi v0, v2 offset:12\n\
         s_endpgm",
        |w, _| {
            w.exec = 1;
            lanes(w, 1, |_| 0x8123_4596);
            lanes(w, 2, |_| 0xabcd_ef01);
            for r in 10..16 {
                lanes(w, r, |_| 0x5555_7777);
            }
        },
    ) else {
        return;
    };
    let v = |i: usize| r.wave.vgpr[i][0];
    assert_eq!(v(10), 0x5555_0096);
    assert_eq!(v(11), 0x0096_7777);
    assert_eq!(v(12), 0x5555_ff96);
    assert_eq!(v(13), 0xff96_7777);
    assert_eq!(v(14), 0x5555_8123);
    assert_eq!(v(15), 0x8123_7777);
    assert_eq!(&r.lds[8..16], &[0xcd, 0, 0, 0, 0xcd, 0xab, 0, 0]);
}

#[test]
fn ds_64_bit_atomics_compute_and_return_as_the_guide_says() {
    type F = fn(u64, u64, u64) -> u64;
    let init = |l: usize| [5u64, u64::MAX - 1, 1 << 33, 0][l % 4];
    // Lanes 1 and 3 (mod 4) compare equal for cmpst.
    let d0 = |l: usize| [7u64, u64::MAX - 1, 1 << 32, 0][l % 4];
    let d1 = |l: usize| [1u64 << 40, 0xff, 1 << 33, 0][l % 4];
    let cases: &[(&str, &str, bool, F)] = &[
        ("ds_add_u64", "ds_add_rtn_u64", false, |m, d, _| {
            m.wrapping_add(d)
        }),
        ("ds_sub_u64", "ds_sub_rtn_u64", false, |m, d, _| {
            m.wrapping_sub(d)
        }),
        ("ds_rsub_u64", "ds_rsub_rtn_u64", false, |m, d, _| {
            d.wrapping_sub(m)
        }),
        ("ds_inc_u64", "ds_inc_rtn_u64", false, |m, d, _| {
            if m >= d { 0 } else { m + 1 }
        }),
        ("ds_dec_u64", "ds_dec_rtn_u64", false, |m, d, _| {
            if m == 0 || m > d { d } else { m - 1 }
        }),
        ("ds_min_i64", "ds_min_rtn_i64", false, |m, d, _| {
            (m as i64).min(d as i64) as u64
        }),
        ("ds_max_i64", "ds_max_rtn_i64", false, |m, d, _| {
            (m as i64).max(d as i64) as u64
        }),
        ("ds_min_u64", "ds_min_rtn_u64", false, |m, d, _| m.min(d)),
        ("ds_max_u64", "ds_max_rtn_u64", false, |m, d, _| m.max(d)),
        ("ds_and_b64", "ds_and_rtn_b64", false, |m, d, _| m & d),
        ("ds_or_b64", "ds_or_rtn_b64", false, |m, d, _| m | d),
        ("ds_xor_b64", "ds_xor_rtn_b64", false, |m, d, _| m ^ d),
        ("ds_mskor_b64", "ds_mskor_rtn_b64", true, |m, d, e| {
            (m & !d) | e
        }),
        ("ds_cmpst_b64", "ds_cmpst_rtn_b64", true, |m, d, e| {
            if m == d { e } else { m }
        }),
        ("ds_write_b64", "ds_wrxchg_rtn_b64", false, |_, d, _| d),
    ];
    for &(plain, rtn, two, f) in cases {
        let data = if two { "v[2:3], v[4:5]" } else { "v[2:3]" };
        let asm = format!(
            "ds_write_b64 v0, v[8:9]\n ds_write_b64 v1, v[8:9]\n \
             {plain} v0, {data}\n {rtn} v[6:7], v1, {data}\n s_endpgm"
        );
        let Some(r) = run_ok(&asm, |w, _| {
            lanes(w, 0, |l| 8 * l as u32);
            lanes(w, 1, |l| 0x800 + 8 * l as u32);
            lanes64(w, 8, init);
            lanes64(w, 2, d0);
            lanes64(w, 4, |l| if l % 8 < 4 { d1(l) } else { init(l) });
        }) else {
            return;
        };
        let lds = |a: usize| u64::from_le_bytes(r.lds[a..a + 8].try_into().unwrap());
        for l in 0..LANES {
            let e = if l % 8 < 4 { d1(l) } else { init(l) };
            let want = f(init(l), d0(l), e);
            assert_eq!(lds(8 * l), want, "{plain} lane {l}");
            assert_eq!(lds(0x800 + 8 * l), want, "{rtn} lane {l}");
            let ret = u64::from(r.wave.vgpr[6][l]) | u64::from(r.wave.vgpr[7][l]) << 32;
            assert_eq!(ret, init(l), "{rtn} returns the old value, lane {l}");
        }
    }
}

#[test]
fn ds_float_64_atomics_and_the_returning_f32_forms() {
    let Some(r) = run_ok(
        "ds_write_b64 v0, v[2:3] offset:0\n\
         ds_write_b64 v0, v[2:3] offset:8\n\
         ds_write_b64 v0, v[2:3] offset:16\n\
         ds_write_b64 v0, v[2:3] offset:24\n\
         ds_write_b32 v0, v6 offset:32\n\
         ds_write_b32 v0, v6 offset:36\n\
         ds_write_b32 v0, v6 offset:40\n\
         ds_add_f64 v0, v[4:5] offset:0\n\
         ds_add_rtn_f64 v[10:11], v0, v[4:5] offset:8\n\
         ds_min_rtn_f64 v[12:13], v0, v[4:5] offset:16\n\
         ds_cmpst_rtn_f64 v[14:15], v0, v[2:3], v[4:5] offset:24\n\
         ds_min_rtn_f32 v16, v0, v7 offset:32\n\
         ds_max_rtn_f32 v17, v0, v7 offset:36\n\
         ds_cmpst_rtn_f32 v18, v0, v6, v7 offset:40\n\
         s_endpgm",
        |w, _| {
            w.exec = 1;
            lanes64(w, 2, |_| 3.0f64.to_bits());
            lanes64(w, 4, |_| (-1.5f64).to_bits());
            lanes(w, 6, |_| 3.0f32.to_bits());
            lanes(w, 7, |_| 8.0f32.to_bits());
        },
    ) else {
        return;
    };
    let f64at = |a: usize| f64::from_le_bytes(r.lds[a..a + 8].try_into().unwrap());
    let f32at = |a: usize| f32::from_le_bytes(r.lds[a..a + 4].try_into().unwrap());
    let v64 = |i: usize| {
        f64::from_bits(u64::from(r.wave.vgpr[i][0]) | u64::from(r.wave.vgpr[i + 1][0]) << 32)
    };
    let v32 = |i: usize| f32::from_bits(r.wave.vgpr[i][0]);
    assert_eq!(f64at(0), 1.5);
    assert_eq!((f64at(8), v64(10)), (1.5, 3.0));
    assert_eq!((f64at(16), v64(12)), (-1.5, 3.0));
    assert_eq!((f64at(24), v64(14)), (-1.5, 3.0));
    assert_eq!((f32at(32), v32(16)), (3.0, 3.0));
    assert_eq!((f32at(36), v32(17)), (8.0, 3.0));
    assert_eq!((f32at(40), v32(18)), (8.0, 3.0));
}

#[test]
fn ds_wrxchg2_returns_both_old_values_and_wrap_wraps() {
    let Some(r) = run_ok(
        "ds_write2_b32 v0, v1, v2 offset0:1 offset1:4\n\
         ds_wrxchg2_rtn_b32 v[10:11], v0, v3, v4 offset0:1 offset1:4\n\
         ds_wrxchg2st64_rtn_b64 v[12:15], v0, v[6:7], v[8:9] offset0:1 offset1:2\n\
         ds_write_b32 v0, v1 offset:64\n\
         ds_write_b32 v0, v2 offset:68\n\
         ds_wrap_rtn_b32 v16, v0, v5, v3 offset:64\n\
         ds_wrap_rtn_b32 v17, v0, v5, v3 offset:68\n\
         s_endpgm",
        |w, _| {
            w.exec = 1;
            lanes(w, 0, |_| 0x1000);
            lanes(w, 1, |_| 10);
            lanes(w, 2, |_| 3);
            lanes(w, 3, |_| 100);
            lanes(w, 4, |_| 200);
            lanes(w, 5, |_| 5);
            lanes64(w, 6, |_| 0x6666_0000_0001);
            lanes64(w, 8, |_| 0x8888_0000_0002);
        },
    ) else {
        return;
    };
    let lds32 = |a: usize| u32::from_le_bytes(r.lds[a..a + 4].try_into().unwrap());
    let lds64 = |a: usize| u64::from_le_bytes(r.lds[a..a + 8].try_into().unwrap());
    let v = |i: usize| r.wave.vgpr[i][0];
    assert_eq!((v(10), v(11)), (10, 3));
    assert_eq!((lds32(0x1004), lds32(0x1010)), (100, 200));
    // st64 b64: offsets 1 and 2 × 64 × 8 bytes, both held zero before.
    assert_eq!((v(12), v(13), v(14), v(15)), (0, 0, 0, 0));
    assert_eq!(
        (lds64(0x1000 + 512), lds64(0x1000 + 1024)),
        (0x6666_0000_0001, 0x8888_0000_0002)
    );
    // MEM >= DATA0 (10 >= 5): MEM - DATA0; else (3 < 5): MEM + DATA1.
    assert_eq!((v(16), v(17)), (10, 3));
    assert_eq!((lds32(0x1040), lds32(0x1044)), (5, 103));
}

#[test]
fn masked_lanes_never_fault_and_flat_lds_reads_past_the_allocation_read_zero() {
    let Some(r) = run_ok(
        "global_load_dword v1, v[2:3], off\n\
         global_store_dword v[2:3], v1, off offset:64\n\
         flat_load_dword v4, v[6:7]\n\
         s_endpgm",
        |w, m| {
            w.exec = 0b1;
            w.apertures.shared_base = SHARED;
            // Lanes 1..64 point at unmapped memory: masked, they must not fault.
            lanes64(w, 2, |l| if l == 0 { DATA } else { 0xdead_0000 });
            // Lane 0 reads LDS at 64 KiB, just past the harness's allocation.
            lanes64(w, 6, |_| SHARED + 0x1_0000);
            lanes(w, 4, |_| 0x4444);
            put32(m, DATA, 0x1234);
        },
    ) else {
        return;
    };
    assert_eq!(r.wave.vgpr[1][0], 0x1234);
    assert_eq!(r.mem.u32(DATA + 64), 0x1234);
    assert_eq!(r.wave.vgpr[4][0], 0);
    assert_eq!(r.wave.vgpr[4][1], 0x4444);
}

#[test]
fn global_f32_atomic_add_flushes_denormals_where_ds_add_f32_keeps_them() {
    let Some(r) = run_ok(
        "global_atomic_add_f32 v5, v[2:3], v1, off glc\n\
         ds_add_rtn_f32 v6, v0, v1\n\
         s_endpgm",
        |w, _| {
            w.exec = 1;
            lanes64(w, 2, |_| DATA);
            lanes(w, 0, |_| 0);
            lanes(w, 1, |_| 1); // the smallest subnormal
        },
    ) else {
        return;
    };
    assert_eq!(r.mem.u32(DATA), 0);
    assert_eq!(u32::from_le_bytes(r.lds[..4].try_into().unwrap()), 1);
}

#[test]
fn gfx942_scratch_adds_the_vgpr_only_with_sve() {
    let Some(r) = common::run_on(
        kfd_gfx9::exec::Target::Gfx942,
        "gfx942",
        "scratch_store_dword v0, v1, s0 offset:4\n\
         scratch_load_dword v2, off, s0 offset:4\n\
         scratch_load_dword v3, off, off offset:12\n\
         s_endpgm",
        |w, _| {
            w.exec = 0b11;
            w.flat_scratch = SLOT;
            w.sgpr[0] = 8;
            lanes(w, 0, |l| 4 * l as u32);
            lanes(w, 1, |l| 0x100 + l as u32);
        },
    ) else {
        return;
    };
    assert_eq!(r.end, Ok(kfd_gfx9::exec::Flow::End), "{:?}", r.wave);
    // Lane 0 stored at private 12, lane 1 at 16 (SADDR 8 + VGPR + 4).
    assert_eq!(r.mem.u32(SLOT + (3 * 64) * 4), 0x100);
    assert_eq!(r.mem.u32(SLOT + (4 * 64 + 1) * 4), 0x101);
    // Without SVE lane 0 reads private 12 (its own store), lane 1 its untouched dword 3.
    assert_eq!((r.wave.vgpr[2][0], r.wave.vgpr[2][1]), (0x100, 0));
    assert_eq!((r.wave.vgpr[3][0], r.wave.vgpr[3][1]), (0x100, 0));
}
