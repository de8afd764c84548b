//! MUBUF: untyped buffer loads, stores and atomics through a 128-bit buffer resource ("AMD
//! Instinct MI200 ISA", chapter 9 "Vector Memory Buffer Instructions", and the MUBUF opcode
//! table of chapter 12).
//!
//! The buffer resource (V#, chapter 9's "Buffer Resource"; the gfx9 bit layout of ROCr's
//! `SQ_BUF_RSRC_WORD0..3` in `registers.h`): BASE 47:0, STRIDE 61:48, SWIZZLE_ENABLE 63,
//! NUM_RECORDS 95:64, ELEMENT_SIZE 116:115 (2 << n bytes), INDEX_STRIDE 118:117 (8 << n),
//! ADD_TID_ENABLE 119.
//!
//! Address ("Buffer Addressing"), per lane and per dword of the data:
//! - `index = (IDXEN ? VGPR[VADDR] : 0) + (ADD_TID_ENABLE ? lane : 0)`;
//!   `offset = (OFFEN ? VGPR[VADDR + IDXEN] : 0) + OFFSET` (+ 4 per further dword);
//! - linear: `buffer_offset = index * STRIDE + offset`; swizzled: `(index / index_stride *
//!   STRIDE + offset / element_size * element_size) * index_stride + index % index_stride *
//!   element_size + offset % element_size`;
//! - `address = BASE + SGPR[SOFFSET] + buffer_offset`.
//!
//! Range checking ("Buffer Addressing", "Range Checking"), with an out-of-range load returning 0 and an
//! out-of-range store or atomic doing nothing (an atomic returns 0): a private (scratch)
//! buffer — ADD_TID_ENABLE without IDXEN — is not checked; with IDXEN (a structured buffer)
//! a lane is out of range when `index >= NUM_RECORDS`; otherwise (a raw buffer) each dword
//! (or the byte/short) is out of range unless it lies wholly below `NUM_RECORDS` bytes of
//! offset (the SGPR offset is not part of the check). Loads/stores of several dwords are
//! checked per dword; atomics all or nothing.
//!
//! Typed accesses (`buffer_load_format_*`, `buffer_store_format_*` and their d16 forms)
//! convert each lane's element by the V#'s DATA_FORMAT / NUM_FORMAT / DST_SEL ([`format`](super::format));
//! an element is read only when all of it is in range (else its channels are 0).
//!
//! MTBUF (`tbuffer_load/store_format_*` and their d16 forms; the guide's "Typed Buffer
//! Instructions" and the MTBUF microcode format) address memory as MUBUF does and convert
//! like the typed MUBUF forms, with DATA_FORMAT and NUM_FORMAT taken from the instruction's
//! DFMT and NFMT fields instead of the V# (our reading: DST_SEL still comes from the V#,
//! whose word 3 MTBUF does not otherwise use).
//!
//! Loads to LDS (the LDS bit on `buffer_load_{ubyte,sbyte,ushort,sshort,dword}`, and on
//! gfx906/gfx908 `buffer_load_format_x` too, whose converted X channel is the dword, as
//! llvm-mc-19 accepts `lds` there and not for gfx90a/gfx942; the Vega
//! and MI200 guides' "Buffer Load to LDS" / "Loads to LDS"): the memory address is formed
//! as for any load, and instead of VDATA each enabled lane's data goes to LDS at
//! `LDS_ADDR = LDS_base + LDS_offset + inst_offset + TID * 4`, where LDS_base is the
//! workgroup's allocation (offset 0 of [`Ctx::lds`]), LDS_offset is M0\[15:0\] (the
//! byte offset LLVM's `buffer_load ... lds` puts in M0: `llvm.amdgcn.raw.buffer.load.lds`,
//! "LDS base offset"), inst_offset the instruction's OFFSET and TID the lane. Each lane
//! writes one dword there; a byte or short is zero- or sign-extended to it as the opcode
//! says (the signed forms exist for nothing else; AMD's rocRoller holds hardware to the same
//! layout: a byte per work-item lands dword-aligned, LDS reading `0, 0, 0, 0, 1, 0, 0, 0,
//! 2, ...` — ROCm/rocm-libraries PR 5084, "Sub-dword BufferToLDS load", its
//! `Direct2LDSTileCopyTest`), an out-of-range element writes 0 as a
//! load returns 0, and LDS outside the allocation drops the write. Any other opcode with
//! the LDS bit is [`ExecError::Illegal`].
//!
//! `buffer_wbinvl1*`, `buffer_wbl2` and `buffer_invl2` do nothing: no cache is modelled.

use super::access::{
    Access, Half, Rmw, Shape, atomic_operands, bulk_load, bulk_store, exec_block, file, file_mut,
    lds_dma_addr, vreg, write_lds,
};
use super::format::Format;
use crate::exec::wave::{Ctx, ExecError, LANES, Target, Ty, Wave, illegal};
use crate::inst::Inst;
use crate::opcode::{MtbufOp, MubufOp};
use crate::operand::Operand;

/// A buffer resource's fields (the 128-bit V#).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferResource {
    /// BASE: the buffer's byte address.
    pub base: u64,
    /// STRIDE: bytes per record.
    pub stride: u64,
    /// SWIZZLE_ENABLE.
    pub swizzle: bool,
    /// NUM_RECORDS: records (structured) or bytes (raw).
    pub num_records: u32,
    /// The swizzle element size in bytes (2, 4, 8, 16).
    pub element_size: u64,
    /// The swizzle index stride (8, 16, 32, 64).
    pub index_stride: u64,
    /// ADD_TID_ENABLE: the lane id is added to the index.
    pub add_tid: bool,
}

impl BufferResource {
    /// Decodes the four dwords of a V#.
    pub fn from_dwords(v: [u32; 4]) -> Self {
        Self {
            base: u64::from(v[0]) | u64::from(v[1] & 0xffff) << 32,
            stride: u64::from(v[1] >> 16 & 0x3fff),
            swizzle: v[1] >> 31 == 1,
            num_records: v[2],
            element_size: 2 << (v[3] >> 19 & 3),
            index_stride: 8 << (v[3] >> 21 & 3),
            add_tid: v[3] >> 23 & 1 == 1,
        }
    }

    /// The buffer offset of byte `offset` of record `index` ("Buffer Addressing").
    pub fn buffer_offset(&self, index: u64, offset: u64) -> u64 {
        if self.swizzle {
            let (es, is) = (self.element_size, self.index_stride);
            ((index / is) * self.stride + (offset / es) * es)
                .wrapping_mul(is)
                .wrapping_add((index % is) * es + offset % es)
        } else {
            (index * self.stride).wrapping_add(offset)
        }
    }
}

/// What a MUBUF opcode is.
enum Kind {
    /// A load, store or atomic.
    Access(Access),
    /// A cache control: nothing to do.
    Nop,
    /// A typed (`*_format_*`) access, converted by the V#'s formats ([`format`](super::format)).
    Format(Typed),
}

/// A typed access: load or store, how many channels, and the d16 packing.
#[derive(Debug, Clone, Copy)]
struct Typed {
    store: bool,
    /// Channels X.. (1 to 4).
    count: usize,
    /// 16-bit channels two to a VGPR.
    d16: bool,
    /// `_d16_hi_x`: the one channel in the high half.
    hi: bool,
}

impl Typed {
    fn kind(store: bool, count: usize, d16: bool) -> Kind {
        Kind::Format(Self {
            store,
            count,
            d16,
            hi: false,
        })
    }

    /// The VGPRs of the data.
    fn regs(self) -> usize {
        if self.d16 {
            self.count.div_ceil(2)
        } else {
            self.count
        }
    }
}

/// What a MUBUF opcode does.
fn kind(op: MubufOp) -> Kind {
    use MubufOp::*;
    let at = |rmw| Kind::Access(Access::Atomic { rmw, wide: false });
    let at2 = |rmw| Kind::Access(Access::Atomic { rmw, wide: true });
    let load = |s| Kind::Access(Access::Load(s));
    let store = |s| Kind::Access(Access::Store(s));
    match op {
        BufferLoadUbyte => load(Shape::new(1, false, Half::Full)),
        BufferLoadSbyte => load(Shape::new(1, true, Half::Full)),
        BufferLoadUshort => load(Shape::new(2, false, Half::Full)),
        BufferLoadSshort => load(Shape::new(2, true, Half::Full)),
        BufferLoadDword => load(Shape::dwords(1)),
        BufferLoadDwordx2 => load(Shape::dwords(2)),
        BufferLoadDwordx3 => load(Shape::dwords(3)),
        BufferLoadDwordx4 => load(Shape::dwords(4)),
        BufferLoadUbyteD16 => load(Shape::new(1, false, Half::Lo)),
        BufferLoadUbyteD16Hi => load(Shape::new(1, false, Half::Hi)),
        BufferLoadSbyteD16 => load(Shape::new(1, true, Half::Lo)),
        BufferLoadSbyteD16Hi => load(Shape::new(1, true, Half::Hi)),
        BufferLoadShortD16 => load(Shape::new(2, false, Half::Lo)),
        BufferLoadShortD16Hi => load(Shape::new(2, false, Half::Hi)),
        BufferStoreByte => store(Shape::new(1, false, Half::Full)),
        BufferStoreByteD16Hi => store(Shape::new(1, false, Half::Hi)),
        BufferStoreShort => store(Shape::new(2, false, Half::Full)),
        BufferStoreShortD16Hi => store(Shape::new(2, false, Half::Hi)),
        BufferStoreDword => store(Shape::dwords(1)),
        BufferStoreDwordx2 => store(Shape::dwords(2)),
        BufferStoreDwordx3 => store(Shape::dwords(3)),
        BufferStoreDwordx4 => store(Shape::dwords(4)),
        BufferAtomicSwap => at(Rmw::Swap),
        BufferAtomicCmpswap => at(Rmw::Cmpswap),
        BufferAtomicAdd => at(Rmw::Add),
        BufferAtomicSub => at(Rmw::Sub),
        BufferAtomicSmin => at(Rmw::Smin),
        BufferAtomicUmin => at(Rmw::Umin),
        BufferAtomicSmax => at(Rmw::Smax),
        BufferAtomicUmax => at(Rmw::Umax),
        BufferAtomicAnd => at(Rmw::And),
        BufferAtomicOr => at(Rmw::Or),
        BufferAtomicXor => at(Rmw::Xor),
        BufferAtomicInc => at(Rmw::Inc),
        BufferAtomicDec => at(Rmw::Dec),
        BufferAtomicAddF32 => at(Rmw::AddF32Ftz),
        BufferAtomicPkAddF16 => at(Rmw::PkAddF16),
        BufferAtomicAddF64 => at2(Rmw::AddF),
        BufferAtomicMinF64 => at2(Rmw::MinF),
        BufferAtomicMaxF64 => at2(Rmw::MaxF),
        BufferAtomicSwapX2 => at2(Rmw::Swap),
        BufferAtomicCmpswapX2 => at2(Rmw::Cmpswap),
        BufferAtomicAddX2 => at2(Rmw::Add),
        BufferAtomicSubX2 => at2(Rmw::Sub),
        BufferAtomicSminX2 => at2(Rmw::Smin),
        BufferAtomicUminX2 => at2(Rmw::Umin),
        BufferAtomicSmaxX2 => at2(Rmw::Smax),
        BufferAtomicUmaxX2 => at2(Rmw::Umax),
        BufferAtomicAndX2 => at2(Rmw::And),
        BufferAtomicOrX2 => at2(Rmw::Or),
        BufferAtomicXorX2 => at2(Rmw::Xor),
        BufferAtomicIncX2 => at2(Rmw::Inc),
        BufferAtomicDecX2 => at2(Rmw::Dec),
        BufferWbinvl1 | BufferWbinvl1Vol | BufferWbl2 | BufferInvl2 => Kind::Nop,
        BufferLoadFormatX => Typed::kind(false, 1, false),
        BufferLoadFormatXy => Typed::kind(false, 2, false),
        BufferLoadFormatXyz => Typed::kind(false, 3, false),
        BufferLoadFormatXyzw => Typed::kind(false, 4, false),
        BufferStoreFormatX => Typed::kind(true, 1, false),
        BufferStoreFormatXy => Typed::kind(true, 2, false),
        BufferStoreFormatXyz => Typed::kind(true, 3, false),
        BufferStoreFormatXyzw => Typed::kind(true, 4, false),
        BufferLoadFormatD16X => Typed::kind(false, 1, true),
        BufferLoadFormatD16Xy => Typed::kind(false, 2, true),
        BufferLoadFormatD16Xyz => Typed::kind(false, 3, true),
        BufferLoadFormatD16Xyzw => Typed::kind(false, 4, true),
        BufferStoreFormatD16X => Typed::kind(true, 1, true),
        BufferStoreFormatD16Xy => Typed::kind(true, 2, true),
        BufferStoreFormatD16Xyz => Typed::kind(true, 3, true),
        BufferStoreFormatD16Xyzw => Typed::kind(true, 4, true),
        BufferLoadFormatD16HiX | BufferStoreFormatD16HiX => Kind::Format(Typed {
            store: op == BufferStoreFormatD16HiX,
            count: 1,
            d16: true,
            hi: true,
        }),
    }
}

/// What an MTBUF opcode does: a typed access, its formats from the instruction.
fn mtbuf_kind(op: MtbufOp) -> Kind {
    let raw = usize::from(op.raw());
    // 0..3 loads, 4..7 stores, 8..11 d16 loads, 12..15 d16 stores; X.. XYZW in the low bits.
    Typed::kind(raw & 4 != 0, (raw & 3) + 1, raw & 8 != 0)
}

/// Executes one MUBUF instruction.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: MubufOp,
) -> Result<(), ExecError> {
    run(w, ctx, inst, pc, kind(op), None)
}

/// Executes one MTBUF instruction: DFMT and NFMT from `imm` (see [`Inst`]).
pub(super) fn execute_mtbuf(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: MtbufOp,
) -> Result<(), ExecError> {
    if inst.mods.lds {
        return Err(illegal(inst, pc, "MTBUF has no load to LDS"));
    }
    let formats = (inst.imm as u32 >> 12 & 15, inst.imm as u32 >> 16 & 7);
    run(w, ctx, inst, pc, mtbuf_kind(op), Some(formats))
}

/// A buffer access of `kind`; `formats` (DFMT, NFMT) replace the V#'s DATA_FORMAT and
/// NUM_FORMAT (MTBUF).
fn run(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    kind: Kind,
    formats: Option<(u32, u32)>,
) -> Result<(), ExecError> {
    if let Kind::Nop = kind {
        return Ok(());
    }
    // Whether the data goes to LDS, and whether it is a typed load's X (gfx906/gfx908) rather
    // than a byte, short or dword.
    let to_lds = match kind {
        _ if !inst.mods.lds => None,
        Kind::Access(Access::Load(shape)) if shape.bytes <= 4 && shape.half == Half::Full => {
            Some(false)
        }
        Kind::Format(Typed {
            store: false,
            count: 1,
            d16: false,
            hi: false,
        }) if matches!(w.target, Target::Gfx906 | Target::Gfx908) && formats.is_none() => {
            Some(true)
        }
        _ => {
            return Err(illegal(
                inst,
                pc,
                "the LDS bit on an opcode without a load to LDS",
            ));
        }
    };
    let (Operand::Sgpr(q) | Operand::Ttmp(q)) = inst.src[1] else {
        return Err(illegal(inst, pc, "SRSRC is not a register quad"));
    };
    let mut v = [0u32; 4];
    for (i, d) in v.iter_mut().enumerate() {
        let reg = match inst.src[1] {
            Operand::Ttmp(_) => Operand::Ttmp(q + i as u8),
            _ => Operand::Sgpr(q + i as u8),
        };
        *d = w
            .read_scalar32(reg, Ty::B32)
            .ok_or_else(|| illegal(inst, pc, "SRSRC runs past the register file"))?;
    }
    let rsrc = BufferResource::from_dwords(v);
    let soffset = u64::from(
        w.read_scalar32(inst.src[2], Ty::B32)
            .ok_or_else(|| illegal(inst, pc, "SOFFSET is not scalar"))?,
    );
    let (idxen, offen) = (inst.mods.idxen, inst.mods.offen);
    let vaddr = if idxen || offen {
        Some(vreg(
            inst,
            pc,
            inst.src[0],
            usize::from(idxen) + usize::from(offen),
        )?)
    } else {
        None
    };
    let exec = w.exec;
    let lanes = || (0..LANES).filter(move |&l| exec >> l & 1 == 1);
    // Each lane's index and byte offset.
    let mut index = [0u64; LANES];
    let mut offset = [0u64; LANES];
    for lane in lanes() {
        let v = |k: usize| vaddr.map_or(0, |a| u64::from(w.vgpr[a + k][lane]));
        index[lane] = if idxen { v(0) } else { 0 } + if rsrc.add_tid { lane as u64 } else { 0 };
        // OFFSET is 12 bits unsigned (as decoded).
        offset[lane] =
            if offen { v(usize::from(idxen)) } else { 0 } + u64::from(inst.imm as u32 & 0xfff);
    }
    let unchecked = rsrc.add_tid && !idxen;
    // The address of `bytes` bytes at `extra` past the lane's offset, or None out of range.
    let addr = |lane: usize, extra: u64, bytes: u64| -> Option<u64> {
        let (i, o) = (index[lane], offset[lane] + extra);
        let ok = unchecked
            || if idxen {
                i < u64::from(rsrc.num_records)
            } else {
                o + bytes <= u64::from(rsrc.num_records)
            };
        ok.then(|| {
            rsrc.base
                .wrapping_add(soffset)
                .wrapping_add(rsrc.buffer_offset(i, o))
        })
    };
    if let Some(typed) = to_lds {
        let what = match (typed, kind) {
            (true, _) => LdsData::FormatX(Format::from_word3(v[3])),
            (false, Kind::Access(Access::Load(shape))) => LdsData::Raw(shape),
            _ => return Err(illegal(inst, pc, "no load to LDS")),
        };
        return load_to_lds(w, ctx, inst, pc, what, &addr);
    }
    let access = match kind {
        Kind::Access(access) => access,
        Kind::Format(typed) => {
            let word3 = match formats {
                Some((dfmt, nfmt)) => v[3] & 0xfff | nfmt << 12 | dfmt << 15,
                None => v[3],
            };
            let fmt = Format::from_word3(word3);
            return typed_access(w, ctx, inst, pc, typed, fmt, &addr);
        }
        Kind::Nop => return Ok(()),
    };
    // A run of enabled lanes from `first` whose dword accesses (a one-dword shape) sit side
    // by side in memory — ROCr's swizzled scratch puts the lanes' same dword so — read or
    // written in one Memory call per page: its address and lane count, when more than one.
    let dword = matches!(access, Access::Load(s) | Access::Store(s) if s.bytes == 4);
    let run = |first: usize| -> Option<(u64, usize)> {
        let start = addr(first, 0, 4).filter(|_| dword)?;
        let mut n = 1;
        while first + n < LANES
            && exec >> (first + n) & 1 == 1
            && addr(first + n, 0, 4) == Some(start.wrapping_add(4 * n as u64))
        {
            n += 1;
        }
        (n > 1).then_some((start, n))
    };
    let mem = ctx.mem;
    let fault = |fault| ExecError::Memory { pc, fault };
    let acc = inst.mods.acc;
    // A block of enabled lanes whose every piece is in range and follows the previous lane's
    // in memory: one bulk access (a fault: lane by lane below, as before).
    if let Access::Load(shape) | Access::Store(shape) = access
        && shape.half == Half::Full
        && let Some(block) = exec_block(exec)
        && let Some(start) = bulk_start(&addr, shape.bytes, block)
        && let Ok(r) = vreg(inst, pc, inst.dst[0], shape.regs())
    {
        let done = match access {
            Access::Load(_) => bulk_load(mem, start, shape, file_mut(w, acc), r, block),
            _ => bulk_store(mem, start, shape, file(w, acc), r, block),
        };
        if done {
            return Ok(());
        }
    }
    match access {
        Access::Load(shape) => {
            let d = vreg(inst, pc, inst.dst[0], shape.regs())?;
            let mut got = [[0u8; 16]; LANES];
            let mut lane = 0;
            while lane < LANES {
                if exec >> lane & 1 == 0 {
                    lane += 1;
                    continue;
                }
                if let Some((start, n)) = run(lane) {
                    let mut buf = [0u8; 4 * LANES];
                    let buf = &mut buf[..4 * n];
                    if super::access::read_global(mem, start, buf).is_ok() {
                        for (i, b) in buf.chunks_exact(4).enumerate() {
                            got[lane + i][..4].copy_from_slice(b);
                        }
                        lane += n;
                        continue;
                    }
                    // A fault: lane by lane, so the fault is the first faulting lane's.
                }
                for (k, piece) in got[lane][..shape.bytes].chunks_mut(4).enumerate() {
                    if let Some(a) = addr(lane, 4 * k as u64, piece.len() as u64) {
                        super::access::read_global(mem, a, piece).map_err(fault)?;
                    }
                }
                lane += 1;
            }
            let f = file_mut(w, acc);
            for lane in lanes() {
                shape.put(f, d, lane, &got[lane]);
            }
        }
        Access::Store(shape) => {
            let s = vreg(inst, pc, inst.dst[0], shape.regs())?;
            let mut lane = 0;
            while lane < LANES {
                if exec >> lane & 1 == 0 {
                    lane += 1;
                    continue;
                }
                if let Some((start, n)) = run(lane) {
                    let mut buf = [0u8; 4 * LANES];
                    let buf = &mut buf[..4 * n];
                    for (i, b) in buf.chunks_exact_mut(4).enumerate() {
                        b.copy_from_slice(&shape.get(file(w, acc), s, lane + i)[..4]);
                    }
                    if super::access::write_global(mem, start, buf).is_ok() {
                        lane += n;
                        continue;
                    }
                }
                let data = shape.get(file(w, acc), s, lane);
                for (k, piece) in data[..shape.bytes].chunks(4).enumerate() {
                    if let Some(a) = addr(lane, 4 * k as u64, piece.len() as u64) {
                        super::access::write_global(mem, a, piece).map_err(fault)?;
                    }
                }
                lane += 1;
            }
        }
        Access::Atomic { rmw, wide } => {
            // VDATA holds the data and, with GLC, receives the old value (the guide's
            // MUBUF atomics: "RETURN_DATA = tmp" into the first VDATA registers).
            let s = vreg(inst, pc, inst.dst[0], Access::atomic_data_regs(rmw, wide))?;
            let size = if wide { 8 } else { 4 };
            let mut olds = [0u64; LANES];
            for lane in lanes() {
                let (a, b) = atomic_operands(file(w, acc), s, lane, rmw, wide);
                if let Some(at) = addr(lane, 0, size) {
                    olds[lane] = mem
                        .atomic(at, size as u8, &mut |old| rmw.apply(wide, old, a, b))
                        .map_err(fault)?;
                }
            }
            if inst.mods.glc {
                let f = file_mut(w, acc);
                for lane in lanes() {
                    f[s][lane] = olds[lane] as u32;
                    if wide {
                        f[s + 1][lane] = (olds[lane] >> 32) as u32;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The address of lane `first`'s access when, for each of the `n` lanes from `first`, every
/// piece the per-lane path would move (the dwords of its `bytes`, `addr(lane, 4k, len)`) is in
/// range and lies right after the previous one: the block is then one run of memory. `None`
/// otherwise (a piece out of range, which the per-lane path skips; a swizzle or stride
/// that scatters them).
fn bulk_start(
    addr: &dyn Fn(usize, u64, u64) -> Option<u64>,
    bytes: usize,
    (first, n): (usize, usize),
) -> Option<u64> {
    let start = addr(first, 0, bytes.min(4) as u64)?;
    let mut next = start;
    for lane in first..first + n {
        for k in 0..bytes.div_ceil(4) {
            let len = (bytes - 4 * k).min(4) as u64;
            if addr(lane, 4 * k as u64, len) != Some(next) {
                return None;
            }
            next = next.wrapping_add(len);
        }
    }
    Some(start)
}

/// What a load to LDS reads per lane.
enum LdsData {
    /// A byte, short or dword, extended to a dword.
    Raw(Shape),
    /// `buffer_load_format_x` (gfx906/gfx908): the element's X channel as the V#'s formats
    /// convert it.
    FormatX(Format),
}

/// A load to LDS: each enabled lane's data at its buffer address (`addr(lane, byte, len)`,
/// `None` out of range: 0), one dword per lane at [`lds_dma_addr`] with the instruction's
/// OFFSET.
fn load_to_lds(
    w: &Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    what: LdsData,
    addr: &dyn Fn(usize, u64, u64) -> Option<u64>,
) -> Result<(), ExecError> {
    let fault = |fault| ExecError::Memory { pc, fault };
    let read = |lane: usize, bytes: usize, raw: &mut [u8; 16]| -> Result<bool, ExecError> {
        let mut in_range = true;
        for k in 0..bytes.div_ceil(4) {
            let len = (bytes - 4 * k).min(4);
            match addr(lane, 4 * k as u64, len as u64) {
                Some(at) => super::access::read_global(ctx.mem, at, &mut raw[4 * k..4 * k + len])
                    .map_err(fault)?,
                None => in_range = false,
            }
        }
        Ok(in_range)
    };
    let mut dwords = [0u32; LANES];
    for lane in (0..LANES).filter(|&l| w.active(l)) {
        let mut raw = [0u8; 16];
        dwords[lane] = match what {
            LdsData::Raw(shape) => {
                read(lane, shape.bytes, &mut raw)?;
                shape.value32(&raw)
            }
            LdsData::FormatX(fmt) => {
                if fmt.reserved() {
                    return Err(illegal(
                        inst,
                        pc,
                        "a buffer resource with the reserved NUM_FORMAT 6",
                    ));
                }
                let size = fmt.layout().map_or(0, |(size, _)| size);
                if size > 0 && read(lane, size, &mut raw)? {
                    fmt.load(&raw[..size])[0]
                } else {
                    0
                }
            }
        };
    }
    // Every lane's read succeeded: now the LDS writes (a faulting load writes nothing).
    let inst_offset = inst.imm as u32 & 0xfff;
    for lane in (0..LANES).filter(|&l| w.active(l)) {
        let at = lds_dma_addr(w.m0, inst_offset, lane);
        write_lds(ctx.lds, at, &dwords[lane].to_le_bytes());
    }
    Ok(())
}

/// A typed load or store ([`format`](super::format)): each enabled lane's element at its buffer address
/// (`addr(lane, byte, len)`, `None` out of range), converted by `fmt`.
fn typed_access(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    t: Typed,
    fmt: Format,
    addr: &dyn Fn(usize, u64, u64) -> Option<u64>,
) -> Result<(), ExecError> {
    if fmt.reserved() {
        return Err(illegal(
            inst,
            pc,
            "a buffer resource with the reserved NUM_FORMAT 6",
        ));
    }
    let r = vreg(inst, pc, inst.dst[0], t.regs())?;
    let acc = inst.mods.acc;
    let fault = |fault| ExecError::Memory { pc, fault };
    // INVALID / RESERVED data formats: every element out of range.
    let size = fmt.layout().map_or(0, |(size, _)| size);
    let exec = w.exec;
    for lane in (0..LANES).filter(|&l| exec >> l & 1 == 1) {
        // The element's 4-byte pieces and their addresses.
        let pieces = (0..size.div_ceil(4)).map(|k| {
            let len = (size - 4 * k).min(4);
            (k, len, addr(lane, 4 * k as u64, len as u64))
        });
        if t.store {
            let f = file(w, acc);
            let mut vals = [0u32; 4];
            for (c, v) in vals.iter_mut().enumerate().take(t.count) {
                *v = if t.hi {
                    fmt.widen_d16((f[r][lane] >> 16) as u16)
                } else if t.d16 {
                    fmt.widen_d16((f[r + c / 2][lane] >> (16 * (c % 2))) as u16)
                } else {
                    f[r + c][lane]
                };
            }
            let (bytes, write) = fmt.store(&vals, t.count);
            for (k, len, at) in pieces {
                let (Some(at), range) = (at, 4 * k..4 * k + len) else {
                    continue;
                };
                if write[range.clone()].iter().all(|&b| b) {
                    super::access::write_global(ctx.mem, at, &bytes[range]).map_err(fault)?;
                    continue;
                }
                for b in range.filter(|&b| write[b]) {
                    let one = at + (b - 4 * k) as u64;
                    super::access::write_global(ctx.mem, one, &bytes[b..=b]).map_err(fault)?;
                }
            }
            continue;
        }
        let mut raw = [0u8; 16];
        let mut in_range = size > 0;
        for (k, len, at) in pieces {
            match at {
                Some(at) => super::access::read_global(ctx.mem, at, &mut raw[4 * k..4 * k + len])
                    .map_err(fault)?,
                None => in_range = false,
            }
        }
        let ch = if in_range {
            fmt.load(&raw[..size])
        } else {
            [0; 4]
        };
        let f = file_mut(w, acc);
        if t.hi {
            f[r][lane] = f[r][lane] & 0xffff | u32::from(fmt.narrow_d16(ch[0])) << 16;
        } else if t.d16 {
            for (c, &v) in ch.iter().enumerate().take(t.count) {
                let (reg, half) = (r + c / 2, 16 * (c % 2) as u32);
                let keep = f[reg][lane] & !(0xffff << half);
                f[reg][lane] = keep | u32::from(fmt.narrow_d16(v)) << half;
            }
        } else {
            for (c, &v) in ch.iter().enumerate().take(t.count) {
                f[r + c][lane] = v;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzled_offsets_follow_the_guide_formula() {
        // STRIDE 16, SWIZZLE_ENABLE, ELEMENT_SIZE 1 (4 bytes), INDEX_STRIDE 1 (16).
        let r = BufferResource::from_dwords([0, 16 << 16 | 1 << 31, 64, 1 << 19 | 1 << 21]);
        assert_eq!((r.stride, r.element_size, r.index_stride), (16, 4, 16));
        // index 17 = 1 * 16 + 1, offset 6 = 1 * 4 + 2:
        // (1 * 16 + 1 * 4) * 16 + 1 * 4 + 2.
        assert_eq!(r.buffer_offset(17, 6), 326);
        // Linear: index * stride + offset.
        let linear = BufferResource::from_dwords([0, 16 << 16, 64, 0]);
        assert_eq!(linear.buffer_offset(17, 6), 278);
    }

    #[test]
    fn rocr_scratch_resource_swizzles_dwords_across_lanes() {
        // AqlQueue::InitScratchSRD for gfx9: SWIZZLE_ENABLE, ELEMENT_SIZE 1, INDEX_STRIDE 3,
        // ADD_TID_ENABLE, STRIDE 0.
        let word3 = 1 << 19 | 3 << 21 | 1 << 23;
        let r = BufferResource::from_dwords([0x1000, 1 << 31, 0x10_0000, word3]);
        assert_eq!((r.element_size, r.index_stride, r.stride), (4, 64, 0));
        assert!(r.swizzle && r.add_tid);
        for (lane, off) in [(0u64, 0u64), (5, 0), (5, 4), (63, 9)] {
            assert_eq!(
                r.base + r.buffer_offset(lane, off),
                crate::exec::mem::access::scratch_addr(0x1000, lane as usize, off)
            );
        }
    }
}
