//! SMEM atomics (`s_atomic_*`, `s_buffer_atomic_*`) against LLVM 19's encodings: each
//! operation's result in memory, the pre-op value returned with GLC and nothing returned
//! without, 64-bit `_x2` forms, `cmpswap`'s data/compare order, a buffer atomic past
//! NUM_RECORDS doing nothing. (ROCr's own trap handler sets its queue's error with
//! `s_atomic_swap_x2`.)

mod common;

use common::{DATA, run_ok};

#[test]
fn scalar_atomics_update_memory_and_return_the_old_value_with_glc() {
    let asm = "s_mov_b32 s4, 5\n\
               s_atomic_add s4, s[2:3], 0x0 glc\n\
               s_mov_b32 s8, 100\n s_mov_b32 s9, 0\n s_mov_b32 s10, 15\n s_mov_b32 s11, 0\n\
               s_atomic_cmpswap_x2 s[8:11], s[2:3], 0x8 glc\n\
               s_mov_b32 s12, 7\n s_mov_b32 s13, 1\n\
               s_atomic_swap_x2 s[12:13], s[2:3], 0x10\n\
               s_mov_b32 s5, 3\n s_atomic_inc s5, s[2:3], 0x18 glc\n\
               s_mov_b32 s6, 9\n s_atomic_dec s6, s[2:3], 0x1c glc\n\
               s_mov_b32 s7, -1\n s_atomic_smin s7, s[2:3], 0x20\n\
               s_mov_b32 s14, -1\n s_atomic_umin s14, s[2:3], 0x24\n\
               s_mov_b32 s16, 200\n s_mov_b32 s17, 0\n s_mov_b32 s18, 14\n s_mov_b32 s19, 0\n\
               s_atomic_cmpswap_x2 s[16:19], s[2:3], 0x8 glc\n\
               s_mov_b32 s20, 0\n s_mov_b32 s21, 2\n s_mov_b32 s22, 0x40\n s_mov_b32 s23, 0\n\
               s_mov_b32 s24, 1\n s_buffer_atomic_add s24, s[20:23], 0x3c glc\n\
               s_mov_b32 s25, 1\n s_buffer_atomic_add s25, s[20:23], 0x40 glc\n\
               s_endpgm";
    let Some(r) = run_ok(asm, |w, mem| {
        let mut page = vec![0u8; 4096];
        page[0..4].copy_from_slice(&10u32.to_le_bytes());
        page[8..16].copy_from_slice(&15u64.to_le_bytes());
        page[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        page[0x18..0x1c].copy_from_slice(&3u32.to_le_bytes());
        page[0x1c..0x20].copy_from_slice(&0u32.to_le_bytes());
        page[0x20..0x24].copy_from_slice(&5u32.to_le_bytes());
        page[0x24..0x28].copy_from_slice(&5u32.to_le_bytes());
        page[0x3c..0x40].copy_from_slice(&40u32.to_le_bytes());
        page[0x40..0x44].copy_from_slice(&50u32.to_le_bytes());
        mem.map(DATA, page);
        w.sgpr[2] = DATA as u32;
        w.sgpr[3] = (DATA >> 32) as u32;
    }) else {
        return;
    };
    let (m, s) = (&r.mem, &r.wave.sgpr);
    assert_eq!((m.u32(DATA), s[4]), (15, 10), "add, the old value with GLC");
    // cmpswap_x2: s[8:9] the new value, s[10:11] the compare value; it matched.
    assert_eq!((s[8], s[9]), (15, 0), "the old value");
    // swap_x2 without GLC: memory written, s[12:13] kept.
    assert_eq!(m.u64(DATA + 16), 7 | 1 << 32);
    assert_eq!((s[12], s[13]), (7, 1));
    assert_eq!(
        (m.u32(DATA + 0x18), s[5]),
        (0, 3),
        "inc wraps past the data"
    );
    assert_eq!(
        (m.u32(DATA + 0x1c), s[6]),
        (9, 0),
        "dec at 0 takes the data"
    );
    assert_eq!(m.u32(DATA + 0x20), u32::MAX, "smin: -1 < 5");
    assert_eq!(m.u32(DATA + 0x24), 5, "umin: 5 < 0xffffffff");
    // The second cmpswap compared 14 against 100: no change, the old value returned.
    assert_eq!((m.u64(DATA + 8), s[16]), (100, 100));
    // The buffer's NUM_RECORDS is 0x40: the dword at 0x3c is inside, 0x40 is not.
    assert_eq!((m.u32(DATA + 0x3c), s[24]), (41, 40));
    assert_eq!(
        (m.u32(DATA + 0x40), s[25]),
        (50, 1),
        "out of range: nothing done"
    );
}
