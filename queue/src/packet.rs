//! SDMA packet encoding.
//!
//! The layouts are the kernel's `drivers/gpu/drm/amd/amdgpu/vega10_sdma_pkt_open.h` (SDMA
//! 4.x: gfx9), which `sdma_v4_4_2` (gfx94x), `navi10_sdma_pkt_open.h` (SDMA 5.x: gfx10) and
//! `sdma_v6_0_0_pkt_open.h` (SDMA 6.x: gfx11) keep for every packet here: same opcodes, same
//! dwords, same fields. The later headers add cache-policy bits (`cpv`, `cache_policy`),
//! which these encoders leave 0 (the default policy). What differs per generation is how much
//! one packet may move ([`SdmaGeneration::copy_max_bytes`]).
//!
//! ```
//! use kfd_queue::packet::{self, SdmaGeneration};
//!
//! // FENCE: header (op 5, mtype 3), address low and high, data.
//! assert_eq!(packet::fence(0x1234_5678_9000, 7), [0x0003_0005, 0x5678_9000, 0x1234, 7]);
//! // A copy larger than one packet may carry is refused.
//! let generation = SdmaGeneration::Sdma4;
//! assert!(packet::copy_linear(generation, 0, 0x1000, generation.copy_max_bytes() + 1).is_none());
//! ```

use kfd_ioctl::topology::GfxTargetVersion;

/// `SDMA_OP_NOP`.
pub const OP_NOP: u32 = 0;
/// `SDMA_OP_COPY`.
pub const OP_COPY: u32 = 1;
/// `SDMA_OP_WRITE`.
pub const OP_WRITE: u32 = 2;
/// `SDMA_OP_FENCE`.
pub const OP_FENCE: u32 = 5;
/// `SDMA_OP_TRAP`.
pub const OP_TRAP: u32 = 6;
/// `SDMA_OP_POLL_REGMEM`.
pub const OP_POLL_REGMEM: u32 = 8;
/// `SDMA_OP_ATOMIC`.
pub const OP_ATOMIC: u32 = 10;
/// `SDMA_OP_CONST_FILL`.
pub const OP_CONST_FILL: u32 = 11;
/// `SDMA_OP_TIMESTAMP`.
pub const OP_TIMESTAMP: u32 = 13;
/// `SDMA_OP_GCR_REQ` (SDMA 5.0 and later).
pub const OP_GCR_REQ: u32 = 17;
/// `SDMA_SUBOP_COPY_LINEAR_SUB_WIND` (ROCr's `SDMA_SUBOP_COPY_LINEAR_RECT`).
pub const SUBOP_COPY_LINEAR_SUB_WIND: u32 = 4;
/// `SDMA_SUBOP_WRITE_LINEAR`.
pub const SUBOP_WRITE_LINEAR: u32 = 0;
/// `SDMA_SUBOP_USER_GCR` (ROCr's `BuildGCRCommand`; the kernel's ring uses sub-op 0).
pub const SUBOP_USER_GCR: u32 = 1;
/// `SDMA_SUBOP_COPY_LINEAR`.
pub const SUBOP_COPY_LINEAR: u32 = 0;
/// `SDMA_SUBOP_TIMESTAMP_GET_GLOBAL`.
pub const SUBOP_TIMESTAMP_GET_GLOBAL: u32 = 2;

/// The SDMA generation of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SdmaGeneration {
    /// SDMA 4.x (gfx9 before gfx94x): `sdma_v4_0.c`.
    Sdma4,
    /// SDMA 4.4.2 (gfx94x, gfx950): `sdma_v4_4_2.c`.
    Sdma4_4_2,
    /// SDMA 5.x (gfx10): `sdma_v5_0.c`, `sdma_v5_2.c`.
    Sdma5,
    /// SDMA 6.x and later (gfx11, gfx12): `sdma_v6_0.c`; SDMA 7 keeps these packets.
    Sdma6,
}

impl SdmaGeneration {
    /// The generation of a GFX version; `None` before gfx9 (SDMA 2/3 use other layouts).
    pub fn of(gfx: GfxTargetVersion) -> Option<SdmaGeneration> {
        match (gfx.major, gfx.minor) {
            (9, 4..) => Some(SdmaGeneration::Sdma4_4_2),
            (9, _) => Some(SdmaGeneration::Sdma4),
            (10, _) => Some(SdmaGeneration::Sdma5),
            (11.., _) => Some(SdmaGeneration::Sdma6),
            _ => None,
        }
    }

    /// The most bytes one COPY_LINEAR moves: `copy_max_bytes` of the kernel's buffer funcs
    /// (0x400000 for 4.x, 4.4.2, 5.x and 6.x), which the 22-bit `count` of SDMA 4.x also
    /// bounds.
    pub fn copy_max_bytes(self) -> u64 {
        0x40_0000
    }

    /// The most bytes one CONSTANT_FILL writes: `fill_max_bytes` (0x400000 likewise).
    pub fn fill_max_bytes(self) -> u64 {
        0x40_0000
    }
}

fn lo(addr: u64) -> u32 {
    addr as u32
}

fn hi(addr: u64) -> u32 {
    (addr >> 32) as u32
}

/// NOP with `count` dwords of padding after the header.
pub fn nop(count: u16) -> Vec<u32> {
    let count = u32::from(count) & 0x3FFF;
    let mut p = vec![OP_NOP | count << 16];
    p.resize(1 + count as usize, 0);
    p
}

/// COPY_LINEAR of `bytes` bytes from `src` to `dst` (`SDMA_PKT_COPY_LINEAR`: `count` is
/// bytes - 1); `None` for 0 bytes or more than [`SdmaGeneration::copy_max_bytes`].
pub fn copy_linear(generation: SdmaGeneration, dst: u64, src: u64, bytes: u64) -> Option<[u32; 7]> {
    if bytes == 0 || bytes > generation.copy_max_bytes() {
        return None;
    }
    Some([
        OP_COPY | SUBOP_COPY_LINEAR << 8,
        (bytes - 1) as u32,
        0,
        lo(src),
        hi(src),
        lo(dst),
        hi(dst),
    ])
}

/// One side of a COPY_LINEAR_SUB_WIND: a pitched surface and where the rectangle starts in
/// it, all in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pitched {
    /// The surface's GPU address (4-aligned).
    pub base: u64,
    /// The rectangle's origin: x (below 2^14), y (below 2^14), z (below 2^11).
    pub origin: [u32; 3],
    /// Elements per row (1 to 2^19).
    pub pitch: u32,
    /// Elements per slice (1 to 2^28).
    pub slice: u32,
}

/// COPY_LINEAR_SUB_WIND: a rectangle of `extent` elements of `1 << element` bytes (element
/// 0 to 4) from `src` to `dst` (`SDMA_PKT_COPY_LINEAR_SUB_WIND` of `vega10_sdma_pkt_open.h`,
/// ROCr 5.2.3's `SDMA_PKT_COPY_LINEAR_RECT` and `BuildCopyRectCommand`: offsets in elements,
/// pitches and the extent minus one; 14-bit x and y, 11-bit z, 19-bit pitch, 28-bit slice
/// pitch). `None` for a field out of its range or a misaligned base.
pub fn copy_sub_window(
    element: u32,
    dst: Pitched,
    src: Pitched,
    extent: [u32; 3],
) -> Option<[u32; 13]> {
    let side_fits = |p: &Pitched| {
        p.base.is_multiple_of(4)
            && p.origin[0] < 1 << 14
            && p.origin[1] < 1 << 14
            && p.origin[2] < 1 << 11
            && (1..=1 << 19).contains(&p.pitch)
            && (1..=1 << 28).contains(&p.slice)
    };
    let extent_fits = (1..=1 << 14).contains(&extent[0])
        && (1..=1 << 14).contains(&extent[1])
        && (1..=1 << 11).contains(&extent[2]);
    if element > 4 || !side_fits(&dst) || !side_fits(&src) || !extent_fits {
        return None;
    }
    let side = |p: &Pitched| {
        [
            lo(p.base),
            hi(p.base),
            p.origin[0] | p.origin[1] << 16,
            p.origin[2] | (p.pitch - 1) << 13,
            p.slice - 1,
        ]
    };
    let (s, d) = (side(&src), side(&dst));
    Some([
        OP_COPY | SUBOP_COPY_LINEAR_SUB_WIND << 8 | element << 29,
        s[0],
        s[1],
        s[2],
        s[3],
        s[4],
        d[0],
        d[1],
        d[2],
        d[3],
        d[4],
        (extent[0] - 1) | (extent[1] - 1) << 16,
        extent[2] - 1,
    ])
}

/// CONSTANT_FILL of `bytes` bytes at `dst` with the dword `value` (`SDMA_PKT_CONSTANT_FILL`,
/// `fillsize` 2: dwords; `count` is bytes - 1, as the kernel's `emit_fill_buffer` and Mesa
/// encode it: the engine fills whole dwords and ignores `count`'s two low bits, so ROCr's
/// `(dwords - 1) * 4` fills the same dwords); `None` for 0 bytes, more than
/// [`SdmaGeneration::fill_max_bytes`], or a count or address that is not dword aligned.
pub fn constant_fill(
    generation: SdmaGeneration,
    dst: u64,
    value: u32,
    bytes: u64,
) -> Option<[u32; 5]> {
    if bytes == 0
        || bytes > generation.fill_max_bytes()
        || !bytes.is_multiple_of(4)
        || !dst.is_multiple_of(4)
    {
        return None;
    }
    Some([
        OP_CONST_FILL | 2 << 30,
        lo(dst),
        hi(dst),
        value,
        (bytes - 1) as u32,
    ])
}

/// FENCE: writes the dword `data` at `addr` (dword aligned) once everything before it is done
/// (`SDMA_PKT_FENCE`, `mtype` 3 as `sdma_v4_0_ring_emit_fence` sets it).
pub fn fence(addr: u64, data: u32) -> [u32; 4] {
    [OP_FENCE | 3 << 16, lo(addr) & !3, hi(addr), data]
}

/// The most dwords one WRITE_LINEAR carries: its 20-bit `count` (dwords - 1).
pub const WRITE_MAX_DWORDS: usize = 1 << 20;

/// WRITE_LINEAR: the `data` dwords at `dst` (dword aligned), in order (`SDMA_PKT_WRITE_UNTILED`
/// of `vega10_sdma_pkt_open.h`, the same in `navi10_` and `sdma_v6_0_0_pkt_open.h`: header,
/// address, `count` = dwords - 1, the data; what kfdtest's `SDMAWriteDataPacket` and the
/// kernel's `sdma_v*_ring_test_ring` emit). `None` for no data or more than
/// [`WRITE_MAX_DWORDS`].
pub fn write_linear(dst: u64, data: &[u32]) -> Option<Vec<u32>> {
    if data.is_empty() || data.len() > WRITE_MAX_DWORDS {
        return None;
    }
    let mut p = Vec::with_capacity(4 + data.len());
    p.extend([
        OP_WRITE | SUBOP_WRITE_LINEAR << 8,
        lo(dst) & !3,
        hi(dst),
        (data.len() - 1) as u32,
    ]);
    p.extend_from_slice(data);
    Some(p)
}

/// GCR_REQ: writes back the GPU's L2 (and, with `invalidate`, invalidates L2, L1 and L0),
/// over all addresses, as ROCr 5.2.3's `BlitSdma::BuildGCRCommand` does around its copies on
/// SDMA 5+ (`SDMA_PKT_GCR`: dword 2 holds `GCR_CONTROL` bits 16-31, GL2_WB at 31,
/// GL2_INV 30, GL1_INV 25, GLV_INV 24, GLK_INV 23, GLK_WB 22). `None` before SDMA 5.0,
/// which has no such packet.
pub fn gcr_req(generation: SdmaGeneration, invalidate: bool) -> Option<[u32; 5]> {
    if matches!(
        generation,
        SdmaGeneration::Sdma4 | SdmaGeneration::Sdma4_4_2
    ) {
        return None;
    }
    let mut control = 1 << 31 | 1 << 22;
    if invalidate {
        control |= 1 << 30 | 1 << 25 | 1 << 24 | 1 << 23;
    }
    Some([OP_GCR_REQ | SUBOP_USER_GCR << 8, 0, control, 0, 0])
}

/// TRAP: an interrupt with `int_context` (28 bits: KFD takes it as an event id).
pub fn trap(int_context: u32) -> [u32; 2] {
    [OP_TRAP, int_context & 0x0FFF_FFFF]
}

/// How POLL_REGMEM compares the polled value (masked) with the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollFunc {
    /// Always true.
    Always = 0,
    /// `<`.
    Less = 1,
    /// `<=`.
    LessEqual = 2,
    /// `==`.
    Equal = 3,
    /// `!=`.
    NotEqual = 4,
    /// `>=`.
    GreaterEqual = 5,
    /// `>`.
    Greater = 6,
}

/// POLL_REGMEM on memory: waits until `(*addr & mask) func value` (`mem_poll` 1), polling
/// every `interval` (in 160-clock units) up to `retry_count` times (0xFFF: forever).
pub fn poll_memory(
    addr: u64,
    value: u32,
    mask: u32,
    func: PollFunc,
    interval: u16,
    retry_count: u16,
) -> [u32; 6] {
    [
        OP_POLL_REGMEM | (func as u32) << 28 | 1 << 31,
        lo(addr) & !3,
        hi(addr),
        value,
        mask,
        u32::from(interval) | (u32::from(retry_count) & 0xFFF) << 16,
    ]
}

/// The 64-bit atomic operations of `SDMA_PKT_ATOMIC` (`operation`: the TC atomic opcodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// `TC_OP_ATOMIC_SWAP_RTN_64`.
    Swap64 = 39,
    /// `TC_OP_ATOMIC_CMPSWAP_RTN_64`: store `src` when the memory holds `cmp`.
    CompareSwap64 = 40,
    /// `TC_OP_ATOMIC_ADD_RTN_64` (what ROCr's SDMA blits use).
    Add64 = 47,
}

/// ATOMIC `op` on the 8 bytes at `addr` (8-aligned) with `src` (and `cmp`).
pub fn atomic(op: AtomicOp, addr: u64, src: u64, cmp: u64) -> [u32; 8] {
    [
        OP_ATOMIC | (op as u32) << 25,
        lo(addr) & !7,
        hi(addr),
        lo(src),
        hi(src),
        lo(cmp),
        hi(cmp),
        0,
    ]
}

/// TIMESTAMP GET_GLOBAL: writes the 64-bit global GPU timestamp at `addr` (8-aligned).
pub fn timestamp(addr: u64) -> [u32; 3] {
    [
        OP_TIMESTAMP | SUBOP_TIMESTAMP_GET_GLOBAL << 8,
        lo(addr) & !7,
        hi(addr),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field positions of `vega10_sdma_pkt_open.h`, spelled out.
    #[test]
    fn packets_put_their_fields_where_the_kernel_header_says() {
        let c = copy_linear(SdmaGeneration::Sdma4, 0x1_2345_6780, 0xA_0000_1000, 4096).unwrap();
        assert_eq!(
            c,
            [0x0000_0001, 4095, 0, 0x0000_1000, 0xA, 0x2345_6780, 0x1]
        );
        let f = constant_fill(SdmaGeneration::Sdma6, 0x10_0000_0040, 0xDEAD_BEEF, 64).unwrap();
        assert_eq!(f, [0x8000_000B, 0x40, 0x10, 0xDEAD_BEEF, 63]);
        assert_eq!(trap(0x1234_5678), [6, 0x0234_5678]);
        let p = poll_memory(0x2000_0007, 5, 0xFF, PollFunc::Equal, 10, 0xFFF);
        assert_eq!(p, [0xB000_0008, 0x2000_0004, 0, 5, 0xFF, 0x0FFF_000A]);
        let a = atomic(AtomicOp::Add64, 0x3000_0008, 0x1_0000_0002, 0);
        assert_eq!(a, [(47 << 25) | 10, 0x3000_0008, 0, 2, 1, 0, 0, 0]);
        assert_eq!(timestamp(0x4000_0010), [0x20D, 0x4000_0010, 0]);
        assert_eq!(nop(2), [2 << 16, 0, 0]);
        let w = write_linear(0x5_0000_1003, &[7, 8, 9]).unwrap();
        assert_eq!(w, [2, 0x1000, 5, 2, 7, 8, 9], "count is dwords - 1");
        assert!(write_linear(0, &[]).is_none());
    }

    /// ROCr's rectangle copy, field by field.
    #[test]
    fn sub_window_copies_put_their_fields_where_rocr_does() {
        let src = Pitched {
            base: 0x1_0000_1000,
            origin: [2, 1, 0],
            pitch: 16,
            slice: 1,
        };
        let dst = Pitched {
            base: 0x2000,
            origin: [1, 2, 3],
            pitch: 32,
            slice: 32 * 8,
        };
        let p = copy_sub_window(2, dst, src, [16, 3, 1]).unwrap();
        assert_eq!(
            p,
            [
                1 | 4 << 8 | 2 << 29,
                0x1000,
                1,
                2 | 1 << 16,
                15 << 13,
                0,
                0x2000,
                0,
                1 | 2 << 16,
                3 | 31 << 13,
                255,
                15 | 2 << 16,
                0
            ]
        );
        assert!(copy_sub_window(5, dst, src, [1, 1, 1]).is_none());
        assert!(copy_sub_window(0, dst, src, [1 << 14, 1, 1]).is_some());
        assert!(copy_sub_window(0, dst, src, [(1 << 14) + 1, 1, 1]).is_none());
        let odd = Pitched { base: 2, ..src };
        assert!(copy_sub_window(0, dst, odd, [1, 1, 1]).is_none());
    }

    /// GCR_REQ exists from SDMA 5.0 on, in ROCr's `SDMA_PKT_GCR` bit positions.
    #[test]
    fn the_cache_flush_packet_is_sdma5_and_later() {
        assert!(gcr_req(SdmaGeneration::Sdma4, true).is_none());
        assert!(gcr_req(SdmaGeneration::Sdma4_4_2, false).is_none());
        for g in [SdmaGeneration::Sdma5, SdmaGeneration::Sdma6] {
            assert_eq!(
                gcr_req(g, false).unwrap(),
                [17 | 1 << 8, 0, 0x8040_0000, 0, 0]
            );
            assert_eq!(gcr_req(g, true).unwrap()[2], 0xC3C0_0000);
        }
    }

    #[test]
    fn sizes_outside_a_packets_range_are_refused() {
        let g = SdmaGeneration::Sdma4_4_2;
        assert!(copy_linear(g, 0, 0, 0).is_none());
        assert!(copy_linear(g, 0, 0, g.copy_max_bytes()).is_some());
        assert!(copy_linear(g, 0, 0, g.copy_max_bytes() + 1).is_none());
        assert!(constant_fill(g, 0, 0, 6).is_none());
        assert!(constant_fill(g, 2, 0, 8).is_none());
    }

    #[test]
    fn generations_follow_the_gfx_version() {
        let v = |major, minor, stepping| GfxTargetVersion {
            major,
            minor,
            stepping,
        };
        assert_eq!(SdmaGeneration::of(v(9, 0, 6)), Some(SdmaGeneration::Sdma4));
        assert_eq!(
            SdmaGeneration::of(v(9, 4, 2)),
            Some(SdmaGeneration::Sdma4_4_2)
        );
        assert_eq!(SdmaGeneration::of(v(10, 3, 0)), Some(SdmaGeneration::Sdma5));
        assert_eq!(SdmaGeneration::of(v(11, 0, 0)), Some(SdmaGeneration::Sdma6));
        assert_eq!(SdmaGeneration::of(v(8, 0, 3)), None);
    }
}
