//! What the memory families share: global access split at pages, the private (scratch)
//! swizzle, LDS access with its range rule, register-file selection (VGPR/AGPR), the access
//! shapes (widths, d16 halves) and the atomic read-modify-write operations.

use crate::exec::wave::{ExecError, Fault, LANES, Memory, VGPRS, Wave, illegal};
use crate::inst::Inst;
use crate::operand::Operand;

/// Bytes of one page: global accesses are split where they cross one, so a [`Memory`]
/// never sees an access spanning two pages.
pub(super) const PAGE: u64 = 4096;

/// Reads `buf.len()` bytes at `addr`, one call per page touched.
pub(in crate::exec) fn read_global(
    mem: &dyn Memory,
    addr: u64,
    buf: &mut [u8],
) -> Result<(), Fault> {
    let mut done = 0;
    while done < buf.len() {
        let a = addr.wrapping_add(done as u64);
        let n = ((PAGE - (a % PAGE)) as usize).min(buf.len() - done);
        mem.read(a, &mut buf[done..done + n])?;
        done += n;
    }
    Ok(())
}

/// Writes `data` at `addr`, one call per page touched.
pub(in crate::exec) fn write_global(mem: &dyn Memory, addr: u64, data: &[u8]) -> Result<(), Fault> {
    let mut done = 0;
    while done < data.len() {
        let a = addr.wrapping_add(done as u64);
        let n = ((PAGE - (a % PAGE)) as usize).min(data.len() - done);
        mem.write(a, &data[done..done + n])?;
        done += n;
    }
    Ok(())
}

/// The enabled lanes when EXEC enables one unbroken block of them: its first lane and its
/// length (a full wave, or a partial wave's leading lanes, or a loop's remaining ones).
pub(super) fn exec_block(exec: u64) -> Option<(usize, usize)> {
    if exec == 0 {
        return None;
    }
    let first = exec.trailing_zeros();
    let m = exec >> first;
    (m & m.wrapping_add(1) == 0).then_some((first as usize, m.count_ones() as usize))
}

/// The bulk form of a whole-register load (a [`Shape`] of [`Half::Full`]) of `n` lanes from
/// `first` whose accesses follow each other in global memory from `start` (lane
/// `first + i` at `start + i * shape.bytes`): one [`read_global`] of the whole run (one
/// [`Memory`] call per page instead of one per lane), the bytes then put in registers `d..`
/// of `file`. What the per-lane loads would leave in the registers; `false` (nothing
/// written) when the read faults, and the caller redoes it lane by lane, so that the fault is
/// the first faulting lane's, as before.
pub(super) fn bulk_load(
    mem: &dyn Memory,
    start: u64,
    shape: Shape,
    file: &mut [[u32; LANES]],
    d: usize,
    (first, n): (usize, usize),
) -> bool {
    debug_assert!(shape.half == Half::Full && first + n <= LANES);
    let mut raw = [0u8; LANES * 16];
    let buf = &mut raw[..n * shape.bytes];
    if read_global(mem, start, buf).is_err() {
        return false;
    }
    let regs = &mut file[d..d + shape.regs()];
    match shape.bytes {
        4 => put_dwords::<4>(buf, regs, first),
        8 => put_dwords::<8>(buf, regs, first),
        12 => put_dwords::<12>(buf, regs, first),
        16 => put_dwords::<16>(buf, regs, first),
        _ => {
            for (i, c) in buf.chunks_exact(shape.bytes).enumerate() {
                regs[0][first + i] = match (c, shape.signed) {
                    (&[b], false) => u32::from(b),
                    (&[b], true) => b as i8 as i32 as u32,
                    (&[a, b], false) => u32::from(u16::from_le_bytes([a, b])),
                    (&[a, b], true) => i16::from_le_bytes([a, b]) as i32 as u32,
                    _ => 0,
                };
            }
        }
    }
    true
}

/// The bulk form of a whole-register store (see [`bulk_load`]): the `n` lanes' data from
/// registers `s..` of `file` gathered into one buffer and written with one [`write_global`].
/// `false` when the write faults (the pages before the faulting one written, as the per-lane
/// stores of their lanes would have): the caller redoes it lane by lane, which writes the
/// same bytes again and stops at the first faulting lane, as before.
pub(super) fn bulk_store(
    mem: &dyn Memory,
    start: u64,
    shape: Shape,
    file: &[[u32; LANES]],
    s: usize,
    (first, n): (usize, usize),
) -> bool {
    debug_assert!(shape.half == Half::Full && first + n <= LANES);
    let mut raw = [0u8; LANES * 16];
    let buf = &mut raw[..n * shape.bytes];
    let regs = &file[s..s + shape.regs()];
    match shape.bytes {
        4 => get_dwords::<4>(buf, regs, first),
        8 => get_dwords::<8>(buf, regs, first),
        12 => get_dwords::<12>(buf, regs, first),
        16 => get_dwords::<16>(buf, regs, first),
        b => {
            for (i, c) in buf.chunks_exact_mut(b).enumerate() {
                c.copy_from_slice(&regs[0][first + i].to_le_bytes()[..b]);
            }
        }
    }
    write_global(mem, start, buf).is_ok()
}

/// Lane `first + i`'s `B / 4` dwords from `buf[i * B..]` into `regs[0..B / 4]`.
#[inline]
fn put_dwords<const B: usize>(buf: &[u8], regs: &mut [[u32; LANES]], first: usize) {
    for (i, c) in buf.chunks_exact(B).enumerate() {
        for (k, reg) in regs.iter_mut().enumerate().take(B / 4) {
            let w = &c[4 * k..4 * k + 4];
            reg[first + i] = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        }
    }
}

/// Lane `first + i`'s `B / 4` dwords from `regs[0..B / 4]` into `buf[i * B..]`.
#[inline]
fn get_dwords<const B: usize>(buf: &mut [u8], regs: &[[u32; LANES]], first: usize) {
    for (i, c) in buf.chunks_exact_mut(B).enumerate() {
        for (k, reg) in regs.iter().enumerate().take(B / 4) {
            c[4 * k..4 * k + 4].copy_from_slice(&reg[first + i].to_le_bytes());
        }
    }
}

/// The global address of byte `offset` of `lane`'s private memory, for a wave whose scratch
/// slot starts at `base`.
///
/// gfx9 interleaves private memory per dword across the 64 lanes of a wave: dword `d` of lane
/// `l` is at `base + (d * 64 + l) * 4`. That is the swizzled buffer addressing of the guide
/// (chapter 9, "Buffer Addressing", "Swizzled Buffer Addressing": `buffer_offset = (index_msb *
/// stride + offset_msb * element_size) * index_stride + index_lsb * element_size +
/// offset_lsb`) with the scratch V# ROCr 5.2 builds for gfx9 (`AqlQueue::InitScratchSRD` in
/// `amd_aql_queue.cpp`: STRIDE 0, SWIZZLE_ENABLE 1, ELEMENT_SIZE 1 = 4 bytes, INDEX_STRIDE 3
/// = 64, ADD_TID_ENABLE 1, so index = lane), and the guide's chapter 10 scratch addressing of
/// FLAT private-aperture and `scratch_*` accesses from the FLAT_SCRATCH base ("10.5 Scratch":
/// the per-lane private address is swizzled in dwords across the wave). The kernel's prologue
/// sets FLAT_SCRATCH to the queue's scratch base plus the wave's offset, the same sum the
/// MUBUF form adds as `srd.base + soffset`, so the two forms agree byte for byte.
pub fn scratch_addr(base: u64, lane: usize, offset: u64) -> u64 {
    scratch_addr_in(base, lane, offset, LANES)
}

/// [`scratch_addr`] for a wave of `lanes` lanes: a wave32 wave (gfx11) interleaves its
/// private memory across its 32 lanes (dword `d` of lane `l` at `base + (d * 32 + l) * 4`:
/// the RDNA3 guide's "Scratch" addressing swizzles by the wave's size, as the index stride
/// of ROCr's scratch V# follows the wave size).
pub fn scratch_addr_in(base: u64, lane: usize, offset: u64, lanes: usize) -> u64 {
    base.wrapping_add((offset / 4) * 4 * lanes as u64 + lane as u64 * 4 + offset % 4)
}

/// Reads `buf.len()` bytes of `lane`'s private memory at `offset`, dword piece by piece.
pub(super) fn read_private(
    mem: &dyn Memory,
    (base, lanes): (u64, usize),
    lane: usize,
    offset: u64,
    buf: &mut [u8],
) -> Result<(), Fault> {
    let mut done = 0;
    while done < buf.len() {
        let p = offset.wrapping_add(done as u64);
        let n = (4 - (p % 4) as usize).min(buf.len() - done);
        mem.read(
            scratch_addr_in(base, lane, p, lanes),
            &mut buf[done..done + n],
        )?;
        done += n;
    }
    Ok(())
}

/// Writes `data` to `lane`'s private memory at `offset`, dword piece by piece.
pub(super) fn write_private(
    mem: &dyn Memory,
    (base, lanes): (u64, usize),
    lane: usize,
    offset: u64,
    data: &[u8],
) -> Result<(), Fault> {
    let mut done = 0;
    while done < data.len() {
        let p = offset.wrapping_add(done as u64);
        let n = (4 - (p % 4) as usize).min(data.len() - done);
        mem.write(scratch_addr_in(base, lane, p, lanes), &data[done..done + n])?;
        done += n;
    }
    Ok(())
}

/// Reads LDS bytes at `addr`; each dword (or smaller piece) that does not lie wholly inside
/// the allocation reads as zero.
pub(super) fn read_lds(lds: &[u8], addr: u64, buf: &mut [u8]) {
    for (i, chunk) in buf.chunks_mut(4).enumerate() {
        let start = addr.saturating_add(4 * i as u64);
        let end = start.saturating_add(chunk.len() as u64);
        if end <= lds.len() as u64 {
            chunk.copy_from_slice(&lds[start as usize..end as usize]);
        } else {
            chunk.fill(0);
        }
    }
}

/// Writes LDS bytes at `addr`; each dword (or smaller piece) that does not lie wholly inside
/// the allocation is dropped.
pub(super) fn write_lds(lds: &mut [u8], addr: u64, data: &[u8]) {
    for (i, chunk) in data.chunks(4).enumerate() {
        let start = addr.saturating_add(4 * i as u64);
        let end = start.saturating_add(chunk.len() as u64);
        if end <= lds.len() as u64 {
            lds[start as usize..end as usize].copy_from_slice(chunk);
        }
    }
}

/// The LDS dword at `addr`: [`read_lds`] of 4 bytes (0 when it does not lie wholly inside
/// the allocation) without the byte-slice copy, for the dword accesses of whole waves.
#[inline]
pub(super) fn lds_dword(lds: &[u8], addr: u64) -> u32 {
    let Ok(start) = usize::try_from(addr) else {
        return 0;
    };
    match start.checked_add(4).and_then(|end| lds.get(start..end)) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// [`write_lds`] of one dword: dropped when it does not lie wholly inside the allocation.
#[inline]
pub(super) fn set_lds_dword(lds: &mut [u8], addr: u64, v: u32) {
    let Ok(start) = usize::try_from(addr) else {
        return;
    };
    if let Some(bytes) = start.checked_add(4).and_then(|end| lds.get_mut(start..end)) {
        bytes.copy_from_slice(&v.to_le_bytes());
    }
}

/// An LDS read-modify-write of `size` (4 or 8) bytes: the old value, or 0 with nothing
/// written when out of range. (A workgroup's waves run on one thread: no other access can
/// come between the read and the write.)
pub(super) fn rmw_lds(
    lds: &mut [u8],
    addr: u64,
    size: usize,
    f: &mut dyn FnMut(u64) -> u64,
) -> u64 {
    let end = addr.saturating_add(size as u64);
    if end > lds.len() as u64 {
        return 0;
    }
    let range = addr as usize..end as usize;
    let mut raw = [0u8; 8];
    raw[..size].copy_from_slice(&lds[range.clone()]);
    let old = u64::from_le_bytes(raw);
    lds[range].copy_from_slice(&f(old).to_le_bytes()[..size]);
    old
}

/// The LDS byte address where `lane`'s dword of a load to LDS (MUBUF's LDS bit, gfx942's
/// `global_load_lds_*` / `scratch_load_lds_*`) or of `ds_read/write_addtid_b32` goes:
/// `M0[15:0] + inst_offset + lane * 4`, wrapping at 32 bits. The Vega and MI200 guides'
/// "Buffer Load to LDS" address (`LDS_base + LDS_offset + inst_offset + TID * 4`, LDS_offset
/// from M0\[15:0\], LDS_base the workgroup's allocation, which is offset 0 of
/// [`Ctx::lds`](crate::exec::Ctx::lds)) and their DS_READ/WRITE_ADDTID_B32 descriptions (the
/// address is M0's base plus the instruction offset plus the lane id times 4; no VGPR
/// address). The instruction offset is the 12-bit MUBUF or 16-bit DS offset, or the FLAT
/// forms' signed 13-bit one (LLVM's `llvm.amdgcn.global.load.lds`: "imm offset (applied to
/// both global and LDS address)").
pub(super) fn lds_dma_addr(m0: u32, inst_offset: u32, lane: usize) -> u64 {
    u64::from(
        (m0 & 0xffff)
            .wrapping_add(inst_offset)
            .wrapping_add(4 * lane as u32),
    )
}

/// Where a sub-dword load lands in its VGPR, or which half a sub-dword store takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Half {
    /// The whole register: loads extend to 32 bits, stores take the low bytes.
    Full,
    /// D16: bits 15:0 (a load keeps bits 31:16).
    Lo,
    /// D16_HI: bits 31:16 (a load keeps bits 15:0; a store takes bits 31:16).
    Hi,
}

/// The data of a load or store: its size in memory, its extension and its place in the
/// registers (the guide's chapter 9, "16-bit Memory Operations", for the D16 forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// Bytes in memory: 1, 2, 4, 8, 12 or 16.
    pub(super) bytes: usize,
    /// Sign-extend (byte and short loads).
    pub(super) signed: bool,
    /// Which part of the register.
    pub(super) half: Half,
}

impl Shape {
    pub(super) const fn new(bytes: usize, signed: bool, half: Half) -> Self {
        Self {
            bytes,
            signed,
            half,
        }
    }

    /// Dwords of `bytes` (n dwords), or a byte/short (one dword register).
    pub(super) const fn dwords(n: usize) -> Self {
        Self::new(4 * n, false, Half::Full)
    }

    /// The registers it occupies.
    pub(super) fn regs(self) -> usize {
        self.bytes.div_ceil(4)
    }

    /// Writes loaded bytes into register file `file` from register `r` in `lane`.
    pub(super) fn put(self, file: &mut [[u32; LANES]], r: usize, lane: usize, data: &[u8; 16]) {
        if self.bytes >= 4 {
            for i in 0..self.bytes / 4 {
                let d = &data[4 * i..4 * i + 4];
                file[r + i][lane] = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
            }
            return;
        }
        let v = self.value32(data);
        let old = file[r][lane];
        file[r][lane] = match self.half {
            Half::Full => v,
            Half::Lo => (old & 0xffff_0000) | (v & 0xffff),
            Half::Hi => (old & 0xffff) | (v << 16),
        };
    }

    /// The first dword of loaded bytes, a byte or short zero- or sign-extended to 32 bits.
    pub(super) fn value32(self, data: &[u8; 16]) -> u32 {
        match (self.bytes.min(4), self.signed) {
            (1, false) => u32::from(data[0]),
            (1, true) => data[0] as i8 as i32 as u32,
            (2, false) => u32::from(u16::from_le_bytes([data[0], data[1]])),
            (2, true) => i16::from_le_bytes([data[0], data[1]]) as i32 as u32,
            _ => u32::from_le_bytes([data[0], data[1], data[2], data[3]]),
        }
    }

    /// The bytes to store from register file `file`, register `r`, in `lane`.
    pub(super) fn get(self, file: &[[u32; LANES]], r: usize, lane: usize) -> [u8; 16] {
        let mut out = [0u8; 16];
        if self.bytes >= 4 {
            for i in 0..self.bytes / 4 {
                out[4 * i..4 * i + 4].copy_from_slice(&file[r + i][lane].to_le_bytes());
            }
        } else {
            let v = match self.half {
                Half::Hi => file[r][lane] >> 16,
                Half::Full | Half::Lo => file[r][lane],
            };
            out[..4].copy_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// The register file a memory instruction's data uses: the AGPRs when its ACC bit is set
/// (gfx90a), else the VGPRs.
pub(super) fn file(w: &Wave, acc: bool) -> &[[u32; LANES]] {
    if acc { &w.agpr } else { &w.vgpr }
}

/// As [`file`], writable.
pub(super) fn file_mut(w: &mut Wave, acc: bool) -> &mut [[u32; LANES]] {
    if acc { &mut w.agpr } else { &mut w.vgpr }
}

/// The first register of a vector operand spanning `n` registers, checked against the file.
pub(super) fn vreg(inst: &Inst, pc: u64, op: Operand, n: usize) -> Result<usize, ExecError> {
    match op {
        Operand::Vgpr(r) if usize::from(r) + n <= VGPRS => Ok(usize::from(r)),
        Operand::Vgpr(_) => Err(illegal(inst, pc, "a register range past v255")),
        _ => Err(illegal(inst, pc, "not a vector register")),
    }
}

/// What a vector memory (FLAT or MUBUF) opcode does with its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// A load into VDST (FLAT) / VDATA (MUBUF).
    Load(Shape),
    /// A store from DATA (FLAT) / VDATA (MUBUF).
    Store(Shape),
    /// An atomic on a 32-bit or `wide` 64-bit value; with GLC it returns the old value.
    Atomic {
        /// The operation.
        rmw: Rmw,
        /// 64-bit.
        wide: bool,
    },
}

impl Access {
    /// The data registers an atomic reads: one value, two for cmpswap.
    pub(super) fn atomic_data_regs(rmw: Rmw, wide: bool) -> usize {
        let one = if wide { 2 } else { 1 };
        if rmw == Rmw::Cmpswap { 2 * one } else { one }
    }
}

/// Runs an atomic on a lane's data registers `s` (DATA[0] = the operand or cmpswap's new
/// value, DATA[1] = cmpswap's compare value, as the guide's FLAT/MUBUF ATOMIC_CMPSWAP
/// descriptions order them) against `old`.
pub(super) fn atomic_operands(
    f: &[[u32; LANES]],
    s: usize,
    lane: usize,
    rmw: Rmw,
    wide: bool,
) -> (u64, u64) {
    let get = |r: usize| {
        if wide {
            u64::from(f[r][lane]) | u64::from(f[r + 1][lane]) << 32
        } else {
            u64::from(f[r][lane])
        }
    };
    let a = get(s);
    let b = if rmw == Rmw::Cmpswap {
        get(s + if wide { 2 } else { 1 })
    } else {
        0
    };
    (a, b)
}

/// A read-modify-write operation of the atomics (FLAT, MUBUF and DS share them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rmw {
    /// `MEM = DATA`.
    Swap,
    /// `MEM = (MEM == cmp) ? src : MEM`, `a` = src, `b` = cmp.
    Cmpswap,
    /// `MEM = (MEM & ~a) | b` (DS_MSKOR).
    Mskor,
    /// `MEM + DATA`.
    Add,
    /// `MEM - DATA`.
    Sub,
    /// `DATA - MEM`.
    Rsub,
    /// Signed minimum.
    Smin,
    /// Unsigned minimum.
    Umin,
    /// Signed maximum.
    Smax,
    /// Unsigned maximum.
    Umax,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise xor.
    Xor,
    /// `MEM = (MEM >= DATA) ? 0 : MEM + 1` (unsigned).
    Inc,
    /// `MEM = (MEM == 0 || MEM > DATA) ? DATA : MEM - 1` (unsigned).
    Dec,
    /// f32 (or f64) addition.
    AddF,
    /// f32 addition flushing denormal operands and results to (signed) zero: the global
    /// memory FP32 atomic adder's fixed mode, whatever the wave's MODE says (LLVM lowers
    /// `atomicrmw fadd float` to `global_atomic_add_f32` only for functions whose f32 denormal
    /// mode is preserve-sign, and f64 only for IEEE: `fpModeMatchesGlobalFPAtomicMode` in
    /// SIISelLowering.cpp). DS's `ds_add_f32` uses [`Rmw::AddF`].
    AddF32Ftz,
    /// f32 (or f64) minimum.
    MinF,
    /// f32 (or f64) maximum.
    MaxF,
    /// Float compare and store: `MEM = (MEM == cmp) ? src : MEM` compared as floats.
    CmpswapF,
    /// Two packed f16 additions.
    PkAddF16,
}

impl Rmw {
    /// The new value of a `wide` (64-bit) or 32-bit location holding `old`, with data `a` and
    /// (cmpswap, mskor) `b`. The guide's FLAT/MUBUF/DS atomic descriptions (chapter 12).
    pub(super) fn apply(self, wide: bool, old: u64, a: u64, b: u64) -> u64 {
        let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
        let (old, a, b) = (old & mask, a & mask, b & mask);
        let signed = |v: u64| {
            if wide {
                v as i64
            } else {
                i64::from(v as u32 as i32)
            }
        };
        let float = |x: u64, y: u64, f32op: fn(f32, f32) -> f32, f64op: fn(f64, f64) -> f64| {
            if wide {
                f64op(f64::from_bits(x), f64::from_bits(y)).to_bits()
            } else {
                u64::from(f32op(f32::from_bits(x as u32), f32::from_bits(y as u32)).to_bits())
            }
        };
        let new = match self {
            Self::Swap => a,
            Self::Cmpswap => {
                if old == b {
                    a
                } else {
                    old
                }
            }
            Self::Mskor => (old & !a) | b,
            Self::Add => old.wrapping_add(a),
            Self::Sub => old.wrapping_sub(a),
            Self::Rsub => a.wrapping_sub(old),
            Self::Smin => {
                if signed(a) < signed(old) {
                    a
                } else {
                    old
                }
            }
            Self::Smax => {
                if signed(a) > signed(old) {
                    a
                } else {
                    old
                }
            }
            Self::Umin => old.min(a),
            Self::Umax => old.max(a),
            Self::And => old & a,
            Self::Or => old | a,
            Self::Xor => old ^ a,
            Self::Inc => {
                if old >= a {
                    0
                } else {
                    old + 1
                }
            }
            Self::Dec => {
                if old == 0 || old > a {
                    a
                } else {
                    old - 1
                }
            }
            Self::AddF => float(old, a, |x, y| x + y, |x, y| x + y),
            Self::AddF32Ftz => {
                let ftz = |x: f32| {
                    if x.is_subnormal() {
                        0.0f32.copysign(x)
                    } else {
                        x
                    }
                };
                let sum = ftz(f32::from_bits(old as u32)) + ftz(f32::from_bits(a as u32));
                u64::from(ftz(sum).to_bits())
            }
            Self::MinF => float(old, a, f32::min, f64::min),
            Self::MaxF => float(old, a, f32::max, f64::max),
            Self::CmpswapF => {
                let equal = if wide {
                    f64::from_bits(old) == f64::from_bits(b)
                } else {
                    f32::from_bits(old as u32) == f32::from_bits(b as u32)
                };
                if equal { a } else { old }
            }
            Self::PkAddF16 => {
                let lo = f16_add(old as u16, a as u16);
                let hi = f16_add((old >> 16) as u16, (a >> 16) as u16);
                u64::from(lo) | u64::from(hi) << 16
            }
        };
        new & mask
    }
}

/// An f16 addition, correctly rounded to nearest even: the sum of two f16 values computed in
/// f32 and rounded once more to f16 equals the exactly rounded sum (f32's 24 bits are at
/// least 2 × 11 + 2, so the double rounding is innocuous).
pub(super) fn f16_add(a: u16, b: u16) -> u16 {
    f32_to_f16(f16_to_f32(a) + f16_to_f32(b))
}

/// The f32 value of f16 bits (exact).
pub(super) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        // Subnormal: man × 2^-24, exact in f32.
        (0, m) => {
            let v = m as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// f32 to f16 bits, rounding to nearest even (overflow to infinity, NaN kept quiet).
pub(super) fn f32_to_f16(f: f32) -> u16 {
    let bits = f.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    // The value as a 24-bit significand (implicit bit included) times 2^(exp - 150).
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let (sig, shift) = if e <= 0 {
        // Subnormal or zero in f16: shift so the result counts units of 2^-24.
        if exp == 0 {
            return sign;
        }
        (man | 0x80_0000, (14 - e) as u32)
    } else {
        (man | 0x80_0000, 13)
    };
    if shift > 24 {
        return sign;
    }
    let half = 1u32 << (shift - 1);
    let rest = sig & ((1u32 << shift) - 1);
    let mut q = sig >> shift;
    if rest > half || (rest == half && q & 1 == 1) {
        q += 1;
    }
    if e <= 0 {
        // q counts 2^-24 units: a carry into bit 10 is the smallest normal, as encoded.
        sign | q as u16
    } else {
        // q holds the implicit bit at 10; a carry to bit 11 bumps the exponent.
        let v = ((e as u32) << 10) + (q - 0x400);
        if v >= 0x7c00 {
            sign | 0x7c00
        } else {
            sign | v as u16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_conversions_round_trip_and_round_to_nearest_even() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f32_to_f16(f) & 0x7c00 == 0x7c00 && f32_to_f16(f) & 0x3ff != 0);
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#x} -> {f}");
            }
        }
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even 1.0.
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        // Halfway between 0 and the smallest subnormal rounds to 0; just above, to it.
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0);
        assert_eq!(f32_to_f16(2f32.powi(-25) * 1.0001), 1);
        assert_eq!(f16_add(0x3c00, 0x3c00), 0x4000);
    }

    #[test]
    fn the_global_f32_atomic_add_flushes_denormals_and_ds_add_keeps_them() {
        let tiny = f32::from_bits(1); // the smallest subnormal
        let one = u64::from(1.0f32.to_bits());
        let t = u64::from(tiny.to_bits());
        assert_eq!(Rmw::AddF32Ftz.apply(false, 0, t, 0), 0);
        assert_eq!(Rmw::AddF32Ftz.apply(false, one, t, 0), one);
        assert_eq!(Rmw::AddF.apply(false, 0, t, 0), t);
        // A normal sum of two subnormals is flushed operand by operand first.
        let half_min = u64::from(f32::from_bits(0x0040_0000).to_bits());
        assert_eq!(Rmw::AddF32Ftz.apply(false, half_min, half_min, 0), 0);
        assert_eq!(Rmw::AddF.apply(false, half_min, half_min, 0), 0x0080_0000);
    }

    #[test]
    fn inc_and_dec_wrap_as_the_guide_says() {
        assert_eq!(Rmw::Inc.apply(false, 4, 5, 0), 5);
        assert_eq!(Rmw::Inc.apply(false, 5, 5, 0), 0);
        assert_eq!(Rmw::Dec.apply(false, 0, 5, 0), 5);
        assert_eq!(Rmw::Dec.apply(false, 9, 5, 0), 5);
        assert_eq!(Rmw::Dec.apply(false, 3, 5, 0), 2);
        assert_eq!(
            Rmw::Smin.apply(false, 1, u64::from(u32::MAX), 0),
            u64::from(u32::MAX)
        );
        assert_eq!(Rmw::Umin.apply(false, 1, u64::from(u32::MAX), 0), 1);
    }

    #[test]
    fn scratch_dwords_interleave_across_lanes() {
        assert_eq!(scratch_addr(0x1000, 0, 0), 0x1000);
        assert_eq!(scratch_addr(0x1000, 1, 0), 0x1004);
        assert_eq!(scratch_addr(0x1000, 0, 4), 0x1100);
        assert_eq!(scratch_addr(0x1000, 3, 6), 0x1000 + 256 + 12 + 2);
    }
}
