//! DS: LDS reads, writes and atomics, and the cross-lane `ds_swizzle_b32`, `ds_permute_b32`
//! and `ds_bpermute_b32` ("AMD Instinct MI200 ISA", chapter 11 "Data Share Operations", 11.3.3
//! "Data Share Indexed and Atomic Access", and the DS opcode table of chapter 12).
//!
//! The address of lane *i* is `VGPR[ADDR][i] + OFFSET` (`offset1:offset0` as one 16-bit
//! offset), or for the `read2`/`write2` forms two addresses `ADDR + OFFSET0 * size` and
//! `ADDR + OFFSET1 * size` (`st64`: × 64 more); `ds_read/write_addtid_b32` address by M0
//! and the lane id instead (see `access::lds_dma_addr`). See the module above for the range
//! rule. GDS (the GDS bit) is not modelled and stops the wave as unimplemented, except for the
//! global wave sync instructions (`ds_gws_*`, GDS only), which [`gws`] executes on the GPU's
//! [`Gws`](crate::gws::Gws).

use super::access::{
    Half, Rmw, Shape, file, file_mut, lds_dma_addr, lds_dword, read_lds, rmw_lds, set_lds_dword,
    vreg, write_lds,
};
use crate::exec::wave::{Ctx, ExecError, Flow, LANES, Wave, illegal, unimplemented};
use crate::gws::GwsOp;
use crate::inst::Inst;
use crate::opcode::DsOp;

/// What a DS opcode does.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Load `Shape` into VDST.
    Read(Shape),
    /// Two loads of `size` bytes at OFFSET0/OFFSET1 × size (× 64 with `st64`).
    Read2 {
        size: usize,
        st64: bool,
    },
    /// Store DATA0.
    Write(Shape),
    /// Two stores (DATA0, DATA1).
    Write2 {
        size: usize,
        st64: bool,
    },
    /// An atomic; `two`: reads DATA1 too; `rtn`: returns the old value to VDST.
    Atomic {
        rmw: Rmw,
        wide: bool,
        two: bool,
        rtn: bool,
    },
    /// Two exchanges at OFFSET0/OFFSET1 × size (× 64 with `st64`): DATA0 and DATA1 stored,
    /// the old values returned to VDST and the registers after.
    Xchg2 {
        size: usize,
        st64: bool,
    },
    /// `ds_wrap_rtn_b32`: `MEM = (MEM >= DATA0) ? MEM - DATA0 : MEM + DATA1`.
    Wrap,
    Swizzle,
    Permute,
    Bpermute,
    Nop,
    /// `ds_read_addtid_b32` / `ds_write_addtid_b32` (`write`): a dword at
    /// [`lds_dma_addr`]`(M0, OFFSET, lane)`, no VGPR address.
    Addtid {
        write: bool,
    },
}

fn kind(op: DsOp) -> Kind {
    use DsOp::*;
    let at = |rmw, rtn| Kind::Atomic {
        rmw,
        wide: false,
        two: false,
        rtn,
    };
    let at2 = |rmw, rtn| Kind::Atomic {
        rmw,
        wide: false,
        two: true,
        rtn,
    };
    let wide = |rmw, rtn| Kind::Atomic {
        rmw,
        wide: true,
        two: false,
        rtn,
    };
    let wide2 = |rmw, rtn| Kind::Atomic {
        rmw,
        wide: true,
        two: true,
        rtn,
    };
    match op {
        DsReadB32 => Kind::Read(Shape::dwords(1)),
        DsReadB64 => Kind::Read(Shape::dwords(2)),
        DsReadB96 => Kind::Read(Shape::dwords(3)),
        DsReadB128 => Kind::Read(Shape::dwords(4)),
        DsReadU8 => Kind::Read(Shape::new(1, false, Half::Full)),
        DsReadI8 => Kind::Read(Shape::new(1, true, Half::Full)),
        DsReadU16 => Kind::Read(Shape::new(2, false, Half::Full)),
        DsReadI16 => Kind::Read(Shape::new(2, true, Half::Full)),
        DsRead2B32 => Kind::Read2 {
            size: 4,
            st64: false,
        },
        DsRead2st64B32 => Kind::Read2 {
            size: 4,
            st64: true,
        },
        DsRead2B64 => Kind::Read2 {
            size: 8,
            st64: false,
        },
        DsWriteB8 => Kind::Write(Shape::new(1, false, Half::Full)),
        DsWriteB16 => Kind::Write(Shape::new(2, false, Half::Full)),
        DsWriteB32 => Kind::Write(Shape::dwords(1)),
        DsWriteB64 => Kind::Write(Shape::dwords(2)),
        DsWriteB96 => Kind::Write(Shape::dwords(3)),
        DsWriteB128 => Kind::Write(Shape::dwords(4)),
        DsWrite2B32 => Kind::Write2 {
            size: 4,
            st64: false,
        },
        DsWrite2st64B32 => Kind::Write2 {
            size: 4,
            st64: true,
        },
        DsWrite2B64 => Kind::Write2 {
            size: 8,
            st64: false,
        },
        DsAddU32 => at(Rmw::Add, false),
        DsSubU32 => at(Rmw::Sub, false),
        DsRsubU32 => at(Rmw::Rsub, false),
        DsIncU32 => at(Rmw::Inc, false),
        DsDecU32 => at(Rmw::Dec, false),
        DsMinI32 => at(Rmw::Smin, false),
        DsMaxI32 => at(Rmw::Smax, false),
        DsMinU32 => at(Rmw::Umin, false),
        DsMaxU32 => at(Rmw::Umax, false),
        DsAndB32 => at(Rmw::And, false),
        DsOrB32 => at(Rmw::Or, false),
        DsXorB32 => at(Rmw::Xor, false),
        DsMskorB32 => at2(Rmw::Mskor, false),
        DsCmpstB32 => at2(Rmw::Cmpswap, false),
        DsCmpstF32 => at2(Rmw::CmpswapF, false),
        DsMinF32 => at(Rmw::MinF, false),
        DsMaxF32 => at(Rmw::MaxF, false),
        DsAddF32 => at(Rmw::AddF, false),
        DsAddRtnU32 => at(Rmw::Add, true),
        DsSubRtnU32 => at(Rmw::Sub, true),
        DsRsubRtnU32 => at(Rmw::Rsub, true),
        DsIncRtnU32 => at(Rmw::Inc, true),
        DsDecRtnU32 => at(Rmw::Dec, true),
        DsMinRtnI32 => at(Rmw::Smin, true),
        DsMaxRtnI32 => at(Rmw::Smax, true),
        DsMinRtnU32 => at(Rmw::Umin, true),
        DsMaxRtnU32 => at(Rmw::Umax, true),
        DsAndRtnB32 => at(Rmw::And, true),
        DsOrRtnB32 => at(Rmw::Or, true),
        DsXorRtnB32 => at(Rmw::Xor, true),
        DsMskorRtnB32 => at2(Rmw::Mskor, true),
        DsCmpstRtnB32 => at2(Rmw::Cmpswap, true),
        DsWrxchgRtnB32 => at(Rmw::Swap, true),
        DsAddRtnF32 => at(Rmw::AddF, true),
        DsCmpstRtnF32 => at2(Rmw::CmpswapF, true),
        DsMinRtnF32 => at(Rmw::MinF, true),
        DsMaxRtnF32 => at(Rmw::MaxF, true),
        DsWrapRtnB32 => Kind::Wrap,
        DsWrxchg2RtnB32 => Kind::Xchg2 {
            size: 4,
            st64: false,
        },
        DsWrxchg2st64RtnB32 => Kind::Xchg2 {
            size: 4,
            st64: true,
        },
        DsWrxchg2RtnB64 => Kind::Xchg2 {
            size: 8,
            st64: false,
        },
        DsWrxchg2st64RtnB64 => Kind::Xchg2 {
            size: 8,
            st64: true,
        },
        DsReadU8D16 => Kind::Read(Shape::new(1, false, Half::Lo)),
        DsReadU8D16Hi => Kind::Read(Shape::new(1, false, Half::Hi)),
        DsReadI8D16 => Kind::Read(Shape::new(1, true, Half::Lo)),
        DsReadI8D16Hi => Kind::Read(Shape::new(1, true, Half::Hi)),
        DsReadU16D16 => Kind::Read(Shape::new(2, false, Half::Lo)),
        DsReadU16D16Hi => Kind::Read(Shape::new(2, false, Half::Hi)),
        DsWriteB8D16Hi => Kind::Write(Shape::new(1, false, Half::Hi)),
        DsWriteB16D16Hi => Kind::Write(Shape::new(2, false, Half::Hi)),
        DsRead2st64B64 => Kind::Read2 {
            size: 8,
            st64: true,
        },
        DsWrite2st64B64 => Kind::Write2 {
            size: 8,
            st64: true,
        },
        DsAddU64 => wide(Rmw::Add, false),
        DsSubU64 => wide(Rmw::Sub, false),
        DsRsubU64 => wide(Rmw::Rsub, false),
        DsIncU64 => wide(Rmw::Inc, false),
        DsDecU64 => wide(Rmw::Dec, false),
        DsMinI64 => wide(Rmw::Smin, false),
        DsMaxI64 => wide(Rmw::Smax, false),
        DsMinU64 => wide(Rmw::Umin, false),
        DsMaxU64 => wide(Rmw::Umax, false),
        DsAndB64 => wide(Rmw::And, false),
        DsOrB64 => wide(Rmw::Or, false),
        DsXorB64 => wide(Rmw::Xor, false),
        DsMskorB64 => wide2(Rmw::Mskor, false),
        DsCmpstB64 => wide2(Rmw::Cmpswap, false),
        DsCmpstF64 => wide2(Rmw::CmpswapF, false),
        DsMinF64 => wide(Rmw::MinF, false),
        DsMaxF64 => wide(Rmw::MaxF, false),
        DsAddF64 => wide(Rmw::AddF, false),
        DsAddRtnU64 => wide(Rmw::Add, true),
        DsSubRtnU64 => wide(Rmw::Sub, true),
        DsRsubRtnU64 => wide(Rmw::Rsub, true),
        DsIncRtnU64 => wide(Rmw::Inc, true),
        DsDecRtnU64 => wide(Rmw::Dec, true),
        DsMinRtnI64 => wide(Rmw::Smin, true),
        DsMaxRtnI64 => wide(Rmw::Smax, true),
        DsMinRtnU64 => wide(Rmw::Umin, true),
        DsMaxRtnU64 => wide(Rmw::Umax, true),
        DsAndRtnB64 => wide(Rmw::And, true),
        DsOrRtnB64 => wide(Rmw::Or, true),
        DsXorRtnB64 => wide(Rmw::Xor, true),
        DsMskorRtnB64 => wide2(Rmw::Mskor, true),
        DsWrxchgRtnB64 => wide(Rmw::Swap, true),
        DsCmpstRtnB64 => wide2(Rmw::Cmpswap, true),
        DsCmpstRtnF64 => wide2(Rmw::CmpswapF, true),
        DsMinRtnF64 => wide(Rmw::MinF, true),
        DsMaxRtnF64 => wide(Rmw::MaxF, true),
        DsAddRtnF64 => wide(Rmw::AddF, true),
        DsSwizzleB32 => Kind::Swizzle,
        DsPermuteB32 => Kind::Permute,
        DsBpermuteB32 => Kind::Bpermute,
        DsNop => Kind::Nop,
        DsWriteAddtidB32 => Kind::Addtid { write: true },
        DsReadAddtidB32 => Kind::Addtid { write: false },
        // Executed by `gws`, never reached here.
        DsGwsSemaReleaseAll | DsGwsInit | DsGwsSemaV | DsGwsSemaBr | DsGwsSemaP | DsGwsBarrier => {
            Kind::Nop
        }
    }
}

/// Executes a global wave sync instruction (`ds_gws_*`, [`crate::gws`]) on the GPU's
/// resources the [`Memory`](crate::exec::Memory) gives: resource `(M0[21:16] + OFFSET) mod
/// 64`, the value (`ds_gws_init`, `_sema_br`, `_barrier`) DATA0 — the ADDR field's VGPR —
/// of the first lane EXEC enables (lane 0 when none is: the guide's `find_first_valid` with
/// an empty mask is our choice). The instruction does not depend on EXEC otherwise.
///
/// A queue without GWS (the `Memory` gives none), or the encoding without the GDS bit (the
/// guide: "GDS only"; LLVM cannot assemble it), stops the wave with
/// [`ExecError::Illegal`]: what the hardware does with a GWS instruction of a VMID that has
/// no GWS entries (`pm_map_process_v9` maps such a process with `num_gws = 0`) is not
/// documented, and an error the queue reports is more use to a program than a hang.
pub(super) fn gws(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: DsOp,
) -> Result<Flow, ExecError> {
    let Some(gws_op) = op.gws() else {
        return Err(unimplemented(inst, pc));
    };
    if !inst.mods.gds {
        return Err(illegal(inst, pc, "a GWS instruction without the GDS bit"));
    }
    let Some(unit) = ctx.mem.gws() else {
        return Err(illegal(
            inst,
            pc,
            "a GWS instruction on a queue without GWS",
        ));
    };
    let value = match gws_op {
        GwsOp::Init | GwsOp::SemaBr | GwsOp::Barrier => {
            let r = vreg(inst, pc, inst.src[0], 1)?;
            let lane = if w.exec == 0 {
                0
            } else {
                w.exec.trailing_zeros() as usize
            };
            w.vgpr[r][lane]
        }
        _ => 0,
    };
    let rid = (w.m0 >> 16 & 0x3f) as usize + (inst.imm as u32 & 0xffff) as usize;
    Ok(match unit.execute(gws_op, rid, value) {
        None => Flow::Continue,
        Some(wait) => Flow::GwsWait(wait),
    })
}

/// Executes one DS instruction.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: DsOp,
) -> Result<(), ExecError> {
    if inst.mods.gds {
        return Err(unimplemented(inst, pc));
    }
    let kind = kind(op);
    if let Kind::Nop = kind {
        return Ok(());
    }
    let acc = inst.mods.acc;
    let offset = inst.imm as u32 & 0xffff;
    let (offset0, offset1) = (u64::from(offset & 0xff), u64::from(offset >> 8));
    let addr_reg = vreg(inst, pc, inst.src[0], 1)?;
    let exec = w.exec;
    let active = move |lane: usize| exec >> lane & 1 == 1;
    let addr = |w: &Wave, lane: usize| u64::from(w.vgpr[addr_reg][lane]);
    match kind {
        Kind::Nop => {}
        Kind::Read(shape) if shape.bytes.is_multiple_of(4) => {
            // Whole dwords: each register read straight from LDS (as `read_lds` would, a
            // dword out of range reads 0) without the per-lane byte buffers.
            let d = vreg(inst, pc, inst.dst[0], shape.regs())?;
            let base: [u32; LANES] = w.vgpr[addr_reg];
            let f = file_mut(w, acc);
            for i in 0..shape.bytes / 4 {
                let reg = &mut f[d + i];
                for (lane, &a) in base.iter().enumerate().filter(|&(l, _)| active(l)) {
                    let at = u64::from(a) + u64::from(offset) + 4 * i as u64;
                    reg[lane] = lds_dword(ctx.lds, at);
                }
            }
        }
        Kind::Read(shape) => {
            let d = vreg(inst, pc, inst.dst[0], shape.regs())?;
            for lane in (0..LANES).filter(|&l| active(l)) {
                let mut buf = [0u8; 16];
                read_lds(
                    ctx.lds,
                    addr(w, lane) + u64::from(offset),
                    &mut buf[..shape.bytes],
                );
                shape.put(file_mut(w, acc), d, lane, &buf);
            }
        }
        Kind::Read2 { size, st64 } => {
            let d = vreg(inst, pc, inst.dst[0], 2 * size / 4)?;
            let scale = size as u64 * if st64 { 64 } else { 1 };
            let shape = Shape::dwords(size / 4);
            for lane in (0..LANES).filter(|&l| active(l)) {
                let a = addr(w, lane);
                let mut buf = [0u8; 16];
                read_lds(ctx.lds, a + offset0 * scale, &mut buf[..size]);
                read_lds(ctx.lds, a + offset1 * scale, &mut buf[size..2 * size]);
                let mut second = [0u8; 16];
                second[..size].copy_from_slice(&buf[size..2 * size]);
                shape.put(file_mut(w, acc), d, lane, &buf);
                shape.put(file_mut(w, acc), d + size / 4, lane, &second);
            }
        }
        Kind::Write(shape) if shape.bytes.is_multiple_of(4) => {
            // Whole dwords, lane by lane in order (a later lane's write to the same address
            // wins, as with `write_lds`).
            let s = vreg(inst, pc, inst.src[1], shape.regs())?;
            let f = file(w, acc);
            for (lane, &a) in w.vgpr[addr_reg].iter().enumerate() {
                if !active(lane) {
                    continue;
                }
                for i in 0..shape.bytes / 4 {
                    let at = u64::from(a) + u64::from(offset) + 4 * i as u64;
                    set_lds_dword(ctx.lds, at, f[s + i][lane]);
                }
            }
        }
        Kind::Write(shape) => {
            let s = vreg(inst, pc, inst.src[1], shape.regs())?;
            for lane in (0..LANES).filter(|&l| active(l)) {
                let data = shape.get(file(w, acc), s, lane);
                write_lds(
                    ctx.lds,
                    addr(w, lane) + u64::from(offset),
                    &data[..shape.bytes],
                );
            }
        }
        Kind::Write2 { size, st64 } => {
            let s0 = vreg(inst, pc, inst.src[1], size / 4)?;
            let s1 = vreg(inst, pc, inst.src[2], size / 4)?;
            let scale = size as u64 * if st64 { 64 } else { 1 };
            let shape = Shape::dwords(size / 4);
            for lane in (0..LANES).filter(|&l| active(l)) {
                let a = addr(w, lane);
                let d0 = shape.get(file(w, acc), s0, lane);
                let d1 = shape.get(file(w, acc), s1, lane);
                write_lds(ctx.lds, a + offset0 * scale, &d0[..size]);
                write_lds(ctx.lds, a + offset1 * scale, &d1[..size]);
            }
        }
        Kind::Atomic {
            rmw,
            wide,
            two,
            rtn,
        } => {
            let n = if wide { 2 } else { 1 };
            let s0 = vreg(inst, pc, inst.src[1], n)?;
            let s1 = if two {
                Some(vreg(inst, pc, inst.src[2], n)?)
            } else {
                None
            };
            let d = if rtn {
                Some(vreg(inst, pc, inst.dst[0], n)?)
            } else {
                None
            };
            let read = |w: &Wave, r: usize, lane: usize| {
                let f = file(w, acc);
                let lo = u64::from(f[r][lane]);
                if wide {
                    lo | u64::from(f[r + 1][lane]) << 32
                } else {
                    lo
                }
            };
            for lane in (0..LANES).filter(|&l| active(l)) {
                let data0 = read(w, s0, lane);
                let data1 = s1.map_or(0, |r| read(w, r, lane));
                // DS_CMPST: DATA0 is the compare value, DATA1 the new one; DS_MSKOR: DATA0
                // the mask, DATA1 the bits to set (the guide's DS opcode descriptions).
                let (a, b) = match rmw {
                    Rmw::Cmpswap | Rmw::CmpswapF => (data1, data0),
                    _ => (data0, data1),
                };
                let old = rmw_lds(
                    ctx.lds,
                    addr(w, lane) + u64::from(offset),
                    4 * n,
                    &mut |old| rmw.apply(wide, old, a, b),
                );
                if let Some(d) = d {
                    let f = file_mut(w, acc);
                    f[d][lane] = old as u32;
                    if wide {
                        f[d + 1][lane] = (old >> 32) as u32;
                    }
                }
            }
        }
        Kind::Xchg2 { size, st64 } => {
            let n = size / 4;
            let s0 = vreg(inst, pc, inst.src[1], n)?;
            let s1 = vreg(inst, pc, inst.src[2], n)?;
            let d = vreg(inst, pc, inst.dst[0], 2 * n)?;
            let scale = size as u64 * if st64 { 64 } else { 1 };
            let shape = Shape::dwords(n);
            for lane in (0..LANES).filter(|&l| active(l)) {
                let a = addr(w, lane);
                let (d0, d1) = (
                    shape.get(file(w, acc), s0, lane),
                    shape.get(file(w, acc), s1, lane),
                );
                let mut old = [0u8; 16];
                read_lds(ctx.lds, a + offset0 * scale, &mut old[..size]);
                write_lds(ctx.lds, a + offset0 * scale, &d0[..size]);
                let mut old1 = [0u8; 16];
                read_lds(ctx.lds, a + offset1 * scale, &mut old1[..size]);
                write_lds(ctx.lds, a + offset1 * scale, &d1[..size]);
                shape.put(file_mut(w, acc), d, lane, &old);
                shape.put(file_mut(w, acc), d + n, lane, &old1);
            }
        }
        Kind::Wrap => {
            let s0 = vreg(inst, pc, inst.src[1], 1)?;
            let s1 = vreg(inst, pc, inst.src[2], 1)?;
            let d = vreg(inst, pc, inst.dst[0], 1)?;
            for lane in (0..LANES).filter(|&l| active(l)) {
                let (a, b) = (file(w, acc)[s0][lane], file(w, acc)[s1][lane]);
                let old = rmw_lds(ctx.lds, addr(w, lane) + u64::from(offset), 4, &mut |m| {
                    let m = m as u32;
                    u64::from(if m >= a { m - a } else { m.wrapping_add(b) })
                });
                file_mut(w, acc)[d][lane] = old as u32;
            }
        }
        Kind::Swizzle => swizzle(w, inst, pc, offset)?,
        Kind::Addtid { write } => {
            // DS_WRITE_ADDTID_B32 stores DATA0, DS_READ_ADDTID_B32 returns to VDST.
            let r = vreg(inst, pc, if write { inst.src[1] } else { inst.dst[0] }, 1)?;
            for lane in (0..LANES).filter(|&l| active(l)) {
                let at = lds_dma_addr(w.m0, offset, lane);
                if write {
                    write_lds(ctx.lds, at, &file(w, acc)[r][lane].to_le_bytes());
                } else {
                    let mut buf = [0u8; 4];
                    read_lds(ctx.lds, at, &mut buf);
                    file_mut(w, acc)[r][lane] = u32::from_le_bytes(buf);
                }
            }
        }
        Kind::Permute | Kind::Bpermute => {
            let d = vreg(inst, pc, inst.dst[0], 1)?;
            let s = vreg(inst, pc, inst.src[1], 1)?;
            // The lane an address names: (ADDR + OFFSET) / 4, modulo 64 (the guide,
            // DS_PERMUTE_B32 / DS_BPERMUTE_B32: "high-order bits are ignored").
            let target = |w: &Wave, lane: usize| {
                (w.vgpr[addr_reg][lane].wrapping_add(offset) / 4) as usize % LANES
            };
            let mut tmp = [0u32; LANES];
            if let Kind::Permute = kind {
                // Each enabled lane sends its DATA0 to the lane its address names; where two
                // send to one, the higher-numbered sender wins.
                for lane in (0..LANES).filter(|&l| active(l)) {
                    tmp[target(w, lane)] = file(w, acc)[s][lane];
                }
            } else {
                // Each lane fetches DATA0 of the lane its address names, 0 from a disabled one.
                for (lane, t) in tmp.iter_mut().enumerate() {
                    let from = target(w, lane);
                    if active(from) {
                        *t = file(w, acc)[s][from];
                    }
                }
            }
            let f = file_mut(w, acc);
            for lane in (0..LANES).filter(|&l| active(l)) {
                f[d][lane] = tmp[lane];
            }
        }
    }
    Ok(())
}

/// `ds_swizzle_b32`: lanes exchange DATA0 without touching LDS, as OFFSET selects (the guide,
/// DS_SWIZZLE_B32): bit 15 set, the quad-permute mode (within each group of four lanes, lane
/// `k` takes lane `offset[2k+1:2k]`); bit 15 clear, the bit-mask mode within each half-wave
/// (lane `i` takes lane `((i & and_mask) | or_mask) ^ xor_mask`, masks in bits 4:0, 9:5 and
/// 14:10). A lane reading a disabled lane gets 0. (The FFT and rotate modes at offsets
/// 0xe000/0xc000 are gfx10's; on gfx9 those offsets have bit 15 set and are quad permutes.)
fn swizzle(w: &mut Wave, inst: &Inst, pc: u64, offset: u32) -> Result<(), ExecError> {
    let acc = inst.mods.acc;
    let d = vreg(inst, pc, inst.dst[0], 1)?;
    // The swizzled data is the ADDR register (the instruction has no DATA0: LLVM's
    // `DS_1A_RET` form), always a VGPR.
    let s = vreg(inst, pc, inst.src[0], 1)?;
    let mut tmp = [0u32; LANES];
    for (lane, t) in tmp.iter_mut().enumerate() {
        let from = if offset & 0x8000 != 0 {
            let k = lane & 3;
            (lane & !3) | (offset as usize >> (2 * k) & 3)
        } else {
            let and = offset as usize & 0x1f;
            let or = offset as usize >> 5 & 0x1f;
            let xor = offset as usize >> 10 & 0x1f;
            ((((lane & 0x1f) & and) | or) ^ xor) | (lane & 0x20)
        };
        if w.active(from) {
            *t = w.vgpr[s][from];
        }
    }
    let exec = w.exec;
    let f = file_mut(w, acc);
    for (lane, &t) in tmp.iter().enumerate() {
        if exec >> lane & 1 == 1 {
            f[d][lane] = t;
        }
    }
    Ok(())
}
