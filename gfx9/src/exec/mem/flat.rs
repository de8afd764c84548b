//! FLAT, GLOBAL and SCRATCH ("AMD Instinct MI200 ISA", chapter 10 "Flat Memory
//! Instructions", and the FLAT, GLOBAL and SCRATCH opcode tables of chapter 12).
//!
//! Addresses, per lane (chapter 10's "Addressing", "Global" and "Scratch" sections):
//! - `flat_*`: the 64-bit VGPR pair ADDR plus the 12-bit unsigned offset, then classified by
//!   aperture ("Addressing": the flat address space holds the LDS and private apertures, SH_MEM_BASES
//!   places them; each spans 4 GiB at a 4 GiB-aligned base): high 32 bits equal to the
//!   shared aperture's → LDS at the low 32 bits; equal to the private aperture's → the
//!   lane's private memory at the low 32 bits; anything else → global memory. An aperture
//!   whose base is 0 (unset) matches nothing.
//! - `global_*`: with SADDR, the SGPR pair plus the zero-extended 32-bit VGPR ADDR plus the
//!   13-bit signed offset; with SADDR `off`, the 64-bit VGPR pair plus the offset.
//! - `scratch_*`: a 32-bit private offset, the SGPR SADDR (or, SADDR `off`, the VGPR ADDR)
//!   plus the 13-bit signed offset, in the lane's private memory. gfx942 adds both when its
//!   SVE bit (bit 13, the LDS bit's position) is set, and with SADDR `off` and SVE clear uses
//!   the offset alone (as LLVM 19 encodes `scratch_* v, v, s` / `off, off` for gfx942; the
//!   "AMD Instinct MI300 ISA" guide's SCRATCH format, its SVE field).
//!
//! Private memory is reached through FLAT_SCRATCH, swizzled per lane (see
//! [`super::scratch_addr`]).
//!
//! Loads to LDS: before gfx942, the LDS bit (bit 13) on `global_`/`scratch_`
//! `load_{ubyte,sbyte,ushort,sshort,dword}`; on gfx942, the opcodes
//! `global_load_lds_{ubyte,sbyte,ushort,sshort,dword}` and their `scratch_` forms (FLAT
//! opcodes 38..42; the "AMD Instinct MI300 ISA" guide's GLOBAL and SCRATCH opcode tables;
//! LLVM's `__builtin_amdgcn_global_load_lds`). The address is the segment's load address,
//! and each enabled lane's data, extended to a dword, goes to LDS at
//! `M0[15:0] + offset + lane * 4` as MUBUF's loads to LDS do (see `mubuf.rs`), no VGPR
//! written. The LDS bit anywhere else (the `flat_` segment, other opcodes, gfx942's
//! `global_`) and the `flat_` segment's opcodes 38..42 are [`ExecError::Illegal`].

use super::access::{
    Access, Half, Rmw, Shape, atomic_operands, bulk_load, bulk_store, exec_block, file, file_mut,
    lds_dma_addr, read_global, read_lds, read_private, rmw_lds, vreg, write_global, write_lds,
    write_private,
};
use crate::exec::wave::{Ctx, ExecError, LANES, Memory, Target, Ty, Wave, illegal};
use crate::inst::Inst;
use crate::opcode::{FlatOp, Segment};
use crate::operand::Operand;

/// Where one lane's access goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    /// A global virtual address.
    Global(u64),
    /// An LDS byte address.
    Lds(u64),
    /// A byte offset in the lane's private memory.
    Private(u64),
}

/// What a FLAT opcode does.
fn access(op: FlatOp) -> Access {
    use FlatOp::*;
    let at = |rmw| Access::Atomic { rmw, wide: false };
    let at2 = |rmw| Access::Atomic { rmw, wide: true };
    match op {
        LoadUbyte => Access::Load(Shape::new(1, false, Half::Full)),
        LoadSbyte => Access::Load(Shape::new(1, true, Half::Full)),
        LoadUshort => Access::Load(Shape::new(2, false, Half::Full)),
        LoadSshort => Access::Load(Shape::new(2, true, Half::Full)),
        LoadDword => Access::Load(Shape::dwords(1)),
        LoadDwordx2 => Access::Load(Shape::dwords(2)),
        LoadDwordx3 => Access::Load(Shape::dwords(3)),
        LoadDwordx4 => Access::Load(Shape::dwords(4)),
        LoadUbyteD16 => Access::Load(Shape::new(1, false, Half::Lo)),
        LoadUbyteD16Hi => Access::Load(Shape::new(1, false, Half::Hi)),
        LoadSbyteD16 => Access::Load(Shape::new(1, true, Half::Lo)),
        LoadSbyteD16Hi => Access::Load(Shape::new(1, true, Half::Hi)),
        LoadShortD16 => Access::Load(Shape::new(2, false, Half::Lo)),
        LoadShortD16Hi => Access::Load(Shape::new(2, false, Half::Hi)),
        StoreByte => Access::Store(Shape::new(1, false, Half::Full)),
        StoreByteD16Hi => Access::Store(Shape::new(1, false, Half::Hi)),
        StoreShort => Access::Store(Shape::new(2, false, Half::Full)),
        StoreShortD16Hi => Access::Store(Shape::new(2, false, Half::Hi)),
        StoreDword => Access::Store(Shape::dwords(1)),
        StoreDwordx2 => Access::Store(Shape::dwords(2)),
        StoreDwordx3 => Access::Store(Shape::dwords(3)),
        StoreDwordx4 => Access::Store(Shape::dwords(4)),
        AtomicSwap => at(Rmw::Swap),
        AtomicCmpswap => at(Rmw::Cmpswap),
        AtomicAdd => at(Rmw::Add),
        AtomicSub => at(Rmw::Sub),
        AtomicSmin => at(Rmw::Smin),
        AtomicUmin => at(Rmw::Umin),
        AtomicSmax => at(Rmw::Smax),
        AtomicUmax => at(Rmw::Umax),
        AtomicAnd => at(Rmw::And),
        AtomicOr => at(Rmw::Or),
        AtomicXor => at(Rmw::Xor),
        AtomicInc => at(Rmw::Inc),
        AtomicDec => at(Rmw::Dec),
        AtomicAddF32 => at(Rmw::AddF32Ftz),
        AtomicPkAddF16 => at(Rmw::PkAddF16),
        AtomicAddF64 => at2(Rmw::AddF),
        AtomicMinF64 => at2(Rmw::MinF),
        AtomicMaxF64 => at2(Rmw::MaxF),
        AtomicSwapX2 => at2(Rmw::Swap),
        AtomicCmpswapX2 => at2(Rmw::Cmpswap),
        AtomicAddX2 => at2(Rmw::Add),
        AtomicSubX2 => at2(Rmw::Sub),
        AtomicSminX2 => at2(Rmw::Smin),
        AtomicUminX2 => at2(Rmw::Umin),
        AtomicSmaxX2 => at2(Rmw::Smax),
        AtomicUmaxX2 => at2(Rmw::Umax),
        AtomicAndX2 => at2(Rmw::And),
        AtomicOrX2 => at2(Rmw::Or),
        AtomicXorX2 => at2(Rmw::Xor),
        AtomicIncX2 => at2(Rmw::Inc),
        AtomicDecX2 => at2(Rmw::Dec),
        // The loads to LDS read as loads do (`execute` sends their data to LDS).
        LoadLdsUbyte => Access::Load(Shape::new(1, false, Half::Full)),
        LoadLdsSbyte => Access::Load(Shape::new(1, true, Half::Full)),
        LoadLdsUshort => Access::Load(Shape::new(2, false, Half::Full)),
        LoadLdsSshort => Access::Load(Shape::new(2, true, Half::Full)),
        LoadLdsDword => Access::Load(Shape::dwords(1)),
    }
}

/// Whether `op` takes the LDS bit before gfx942: the byte, short and dword loads of the
/// `global_`/`scratch_` segments (the LLVM 19 assembler's `lds` modifier for gfx906/gfx90a).
fn lds_bit_load(op: FlatOp) -> bool {
    use FlatOp::*;
    matches!(
        op,
        LoadUbyte | LoadSbyte | LoadUshort | LoadSshort | LoadDword
    )
}

/// Whether `op` is one of gfx942's loads to LDS.
fn to_lds(op: FlatOp) -> bool {
    use FlatOp::*;
    matches!(
        op,
        LoadLdsUbyte | LoadLdsSbyte | LoadLdsUshort | LoadLdsSshort | LoadLdsDword
    )
}

/// Whether the 64-bit flat address `addr` lies in the 4 GiB aperture at `base`.
fn in_aperture(addr: u64, base: u64) -> bool {
    base != 0 && addr >> 32 == base >> 32
}

/// Executes one FLAT, GLOBAL or SCRATCH instruction.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    seg: Segment,
    op: FlatOp,
) -> Result<(), ExecError> {
    // gfx942 reuses bit 13 of scratch instructions as SVE (the VGPR address is used), not LDS;
    // gfx11's decoder puts its SVE bit there too (gfx11 has no LDS bit).
    let sve = matches!(w.target, Target::Gfx942 | Target::Gfx11) && seg == Segment::Scratch;
    let lds_bit = inst.mods.lds && !sve;
    if lds_bit && (w.target == Target::Gfx942 || seg == Segment::Flat || !lds_bit_load(op)) {
        return Err(illegal(
            inst,
            pc,
            "the LDS bit on a FLAT instruction without a load to LDS",
        ));
    }
    if to_lds(op) && seg == Segment::Flat {
        return Err(illegal(inst, pc, "no flat_ load to LDS"));
    }
    if !(lds_bit || to_lds(op)) && bulk(w, ctx.mem, inst, seg, access(op)) {
        return Ok(());
    }
    let locs = lane_locs(w, inst, pc, seg)?;
    let acc = inst.mods.acc;
    let scratch = (w.flat_scratch, if w.wave32 { 32 } else { LANES });
    let mem = ctx.mem;
    let fault = |fault| ExecError::Memory { pc, fault };
    let exec = w.exec;
    let lanes = || (0..LANES).filter(move |&l| exec >> l & 1 == 1);
    if let (true, Access::Load(shape)) = (lds_bit || to_lds(op), access(op)) {
        let mut dwords = [0u32; LANES];
        for lane in lanes() {
            let mut raw = [0u8; 16];
            let buf = &mut raw[..shape.bytes];
            match locs[lane] {
                Loc::Global(a) => read_global(mem, a, buf).map_err(fault)?,
                Loc::Lds(a) => read_lds(ctx.lds, a, buf),
                Loc::Private(p) => read_private(mem, scratch, lane, p, buf).map_err(fault)?,
            }
            dwords[lane] = shape.value32(&raw);
        }
        for lane in lanes() {
            let at = lds_dma_addr(w.m0, inst.imm as u32, lane);
            write_lds(ctx.lds, at, &dwords[lane].to_le_bytes());
        }
        return Ok(());
    }
    match access(op) {
        Access::Load(shape) => {
            let d = vreg(inst, pc, inst.dst[0], shape.regs())?;
            let mut got = [[0u8; 16]; LANES];
            let mut lane = 0;
            while lane < LANES {
                if exec >> lane & 1 == 0 {
                    lane += 1;
                    continue;
                }
                if let Some((addr, n)) = run(&locs, exec, lane, shape.bytes, scratch) {
                    let mut buf = [0u8; LANES * 16];
                    let buf = &mut buf[..n * shape.bytes];
                    if read_global(mem, addr, buf).is_ok() {
                        for (i, b) in buf.chunks_exact(shape.bytes).enumerate() {
                            got[lane + i][..shape.bytes].copy_from_slice(b);
                        }
                        lane += n;
                        continue;
                    }
                    // A fault: lane by lane, so the fault is the first faulting lane's.
                }
                let buf = &mut got[lane][..shape.bytes];
                match locs[lane] {
                    Loc::Global(a) => read_global(mem, a, buf).map_err(fault)?,
                    Loc::Lds(a) => read_lds(ctx.lds, a, buf),
                    Loc::Private(p) => read_private(mem, scratch, lane, p, buf).map_err(fault)?,
                }
                lane += 1;
            }
            let f = file_mut(w, acc);
            for lane in lanes() {
                shape.put(f, d, lane, &got[lane]);
            }
        }
        Access::Store(shape) => {
            let s = vreg(inst, pc, inst.src[1], shape.regs())?;
            let mut lane = 0;
            while lane < LANES {
                if exec >> lane & 1 == 0 {
                    lane += 1;
                    continue;
                }
                if let Some((addr, n)) = run(&locs, exec, lane, shape.bytes, scratch) {
                    let mut buf = [0u8; LANES * 16];
                    let buf = &mut buf[..n * shape.bytes];
                    for (i, b) in buf.chunks_exact_mut(shape.bytes).enumerate() {
                        b.copy_from_slice(&shape.get(file(w, acc), s, lane + i)[..shape.bytes]);
                    }
                    if write_global(mem, addr, buf).is_ok() {
                        lane += n;
                        continue;
                    }
                }
                let data = shape.get(file(w, acc), s, lane);
                let data = &data[..shape.bytes];
                match locs[lane] {
                    Loc::Global(a) => write_global(mem, a, data).map_err(fault)?,
                    Loc::Lds(a) => write_lds(ctx.lds, a, data),
                    Loc::Private(p) => write_private(mem, scratch, lane, p, data).map_err(fault)?,
                }
                lane += 1;
            }
        }
        Access::Atomic { rmw, wide } => {
            let s = vreg(inst, pc, inst.src[1], Access::atomic_data_regs(rmw, wide))?;
            let n = if wide { 2 } else { 1 };
            let d = if inst.mods.glc {
                Some(vreg(inst, pc, inst.dst[0], n)?)
            } else {
                None
            };
            let size = 4 * n;
            let mut olds = [0u64; LANES];
            for lane in lanes() {
                let (a, b) = atomic_operands(file(w, acc), s, lane, rmw, wide);
                let mut f = |old| rmw.apply(wide, old, a, b);
                olds[lane] = match locs[lane] {
                    Loc::Global(addr) => mem.atomic(addr, size as u8, &mut f).map_err(fault)?,
                    // An LDS-aperture atomic is the DS unit's: `ds_add_f32` keeps denormals.
                    Loc::Lds(addr) => {
                        let rmw = if rmw == Rmw::AddF32Ftz {
                            Rmw::AddF
                        } else {
                            rmw
                        };
                        rmw_lds(ctx.lds, addr, size, &mut |old| rmw.apply(wide, old, a, b))
                    }
                    // Private memory is the lane's own: a read and a write are atomic enough
                    // (and a 64-bit value's dwords are not adjacent once swizzled).
                    Loc::Private(p) => {
                        let mut raw = [0u8; 8];
                        read_private(mem, scratch, lane, p, &mut raw[..size]).map_err(fault)?;
                        let old = u64::from_le_bytes(raw);
                        let new = f(old).to_le_bytes();
                        write_private(mem, scratch, lane, p, &new[..size]).map_err(fault)?;
                        old
                    }
                };
            }
            if let Some(d) = d {
                let f = file_mut(w, acc);
                for lane in lanes() {
                    f[d][lane] = olds[lane] as u32;
                    if wide {
                        f[d + 1][lane] = (olds[lane] >> 32) as u32;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The bulk path of a whole-register load or store (module docs): when EXEC enables one
/// block of lanes whose global addresses follow each other (ROCr's blit and fill kernels,
/// any unit-stride copy), the whole block is one [`bulk_load`] / [`bulk_store`]. `false`
/// when the instruction is not of that shape or the access faults: the per-lane path then
/// runs it, with every check and fault as before.
fn bulk(w: &mut Wave, mem: &dyn Memory, inst: &Inst, seg: Segment, access: Access) -> bool {
    let (Access::Load(shape) | Access::Store(shape)) = access else {
        return false;
    };
    if shape.half != Half::Full {
        return false;
    }
    let Some(block) = exec_block(w.exec) else {
        return false;
    };
    let Some(start) = bulk_start(w, inst, seg, shape.bytes, block) else {
        return false;
    };
    let acc = inst.mods.acc;
    match access {
        Access::Load(_) => match vreg(inst, 0, inst.dst[0], shape.regs()) {
            Ok(d) => bulk_load(mem, start, shape, file_mut(w, acc), d, block),
            Err(_) => false,
        },
        Access::Store(_) => match vreg(inst, 0, inst.src[1], shape.regs()) {
            Ok(s) => bulk_store(mem, start, shape, file(w, acc), s, block),
            Err(_) => false,
        },
        Access::Atomic { .. } => false,
    }
}

/// The global address of lane `first`'s access when the `n` lanes from `first` reach global
/// memory at consecutive addresses `bytes` apart ([`lane_locs`]'s addresses, none in the LDS
/// or private aperture); `None` otherwise (scratch, a register out of the file, a gap).
fn bulk_start(
    w: &Wave,
    inst: &Inst,
    seg: Segment,
    bytes: usize,
    (first, n): (usize, usize),
) -> Option<u64> {
    let imm = i64::from(inst.imm) as u64;
    // The address registers: a VGPR pair, or a VGPR offset from the SADDR pair.
    let (a, base) = match (seg, inst.src[2]) {
        (Segment::Flat, _) | (Segment::Global, Operand::None) => {
            (vreg(inst, 0, inst.src[0], 2).ok()?, None)
        }
        (Segment::Global, saddr) => (
            vreg(inst, 0, inst.src[0], 1).ok()?,
            Some(w.read_scalar64(saddr, Ty::B64)?),
        ),
        (Segment::Scratch, _) => return None,
    };
    let v = &w.vgpr;
    let lanes = first..first + n;
    let step = bytes as u64;
    let start = match base {
        None => {
            let (lo, hi) = (&v[a][lanes.clone()], &v[a + 1][lanes]);
            let start = (u64::from(lo[0]) | u64::from(hi[0]) << 32).wrapping_add(imm);
            let mut next = start;
            for (&l, &h) in lo.iter().zip(hi) {
                if (u64::from(l) | u64::from(h) << 32).wrapping_add(imm) != next {
                    return None;
                }
                next = next.wrapping_add(step);
            }
            start
        }
        Some(b) => {
            let off = &v[a][lanes];
            let start = b.wrapping_add(u64::from(off[0])).wrapping_add(imm);
            let mut next = start;
            for &o in off {
                if b.wrapping_add(u64::from(o)).wrapping_add(imm) != next {
                    return None;
                }
                next = next.wrapping_add(step);
            }
            start
        }
    };
    let next = start.wrapping_add(step * n as u64);
    if seg == Segment::Flat {
        // The run spans less than 1 KiB: its first and last bytes name every 4 GiB aperture
        // it touches.
        let last = next.wrapping_sub(1);
        let ap = w.apertures;
        if [start, last]
            .iter()
            .any(|&x| in_aperture(x, ap.shared_base) || in_aperture(x, ap.private_base))
        {
            return None;
        }
    }
    Some(start)
}

/// The global address of `lane`'s access of `bytes` when it is one memory access: a global
/// one, or a dword of private memory (wider or unaligned private accesses are split).
fn global_addr(loc: Loc, lane: usize, bytes: usize, scratch: (u64, usize)) -> Option<u64> {
    match loc {
        Loc::Global(a) => Some(a),
        Loc::Private(p) if bytes == 4 && p.is_multiple_of(4) => Some(
            super::access::scratch_addr_in(scratch.0, lane, p, scratch.1),
        ),
        _ => None,
    }
}

/// A run of enabled lanes from `first` whose accesses follow each other in global memory
/// (a coalesced access: unit-stride global addresses, or the same private dword, which the
/// swizzle puts side by side): its address and lane count, when more than one lane.
fn run(
    locs: &[Loc; LANES],
    exec: u64,
    first: usize,
    bytes: usize,
    scratch: (u64, usize),
) -> Option<(u64, usize)> {
    let start = global_addr(locs[first], first, bytes, scratch)?;
    let mut n = 1;
    while first + n < LANES
        && exec >> (first + n) & 1 == 1
        && global_addr(locs[first + n], first + n, bytes, scratch)
            == Some(start.wrapping_add((n * bytes) as u64))
    {
        n += 1;
    }
    (n > 1).then_some((start, n))
}

/// Each enabled lane's target (disabled lanes: unspecified).
fn lane_locs(w: &Wave, inst: &Inst, pc: u64, seg: Segment) -> Result<[Loc; LANES], ExecError> {
    let imm = i64::from(inst.imm) as u64;
    let mut locs = [Loc::Global(0); LANES];
    let pair =
        |a: usize, lane: usize| u64::from(w.vgpr[a][lane]) | u64::from(w.vgpr[a + 1][lane]) << 32;
    let active = (0..LANES).filter(|&l| w.active(l));
    match (seg, inst.src[2]) {
        (Segment::Flat, _) => {
            let a = vreg(inst, pc, inst.src[0], 2)?;
            let ap = w.apertures;
            for lane in active {
                let addr = pair(a, lane).wrapping_add(imm);
                locs[lane] = if in_aperture(addr, ap.shared_base) {
                    Loc::Lds(addr & 0xffff_ffff)
                } else if in_aperture(addr, ap.private_base) {
                    Loc::Private(addr & 0xffff_ffff)
                } else {
                    Loc::Global(addr)
                };
            }
        }
        (Segment::Global, Operand::None) => {
            let a = vreg(inst, pc, inst.src[0], 2)?;
            for lane in active {
                locs[lane] = Loc::Global(pair(a, lane).wrapping_add(imm));
            }
        }
        (Segment::Global, saddr) => {
            let a = vreg(inst, pc, inst.src[0], 1)?;
            let base = w
                .read_scalar64(saddr, Ty::B64)
                .ok_or_else(|| illegal(inst, pc, "SADDR is not a scalar pair"))?;
            for lane in active {
                let addr = base.wrapping_add(u64::from(w.vgpr[a][lane]));
                locs[lane] = Loc::Global(addr.wrapping_add(imm));
            }
        }
        (Segment::Scratch, saddr) => {
            // gfx9: SADDR, else the VGPR. gfx942 and gfx11: SADDR (or nothing) plus, with
            // SVE, the VGPR.
            let use_vgpr = if matches!(w.target, Target::Gfx942 | Target::Gfx11) {
                inst.mods.lds
            } else {
                saddr == Operand::None
            };
            let base = match saddr {
                Operand::None => 0,
                s => w
                    .read_scalar32(s, Ty::B32)
                    .ok_or_else(|| illegal(inst, pc, "SADDR is not a scalar register"))?,
            };
            let a = if use_vgpr {
                Some(vreg(inst, pc, inst.src[0], 1)?)
            } else {
                None
            };
            for lane in active {
                let v = a.map_or(0, |a| w.vgpr[a][lane]);
                let p = base.wrapping_add(v).wrapping_add(imm as u32);
                locs[lane] = Loc::Private(u64::from(p));
            }
        }
    }
    Ok(locs)
}
