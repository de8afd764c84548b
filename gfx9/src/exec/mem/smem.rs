//! SMEM: scalar loads and stores through the scalar data cache ("AMD Instinct MI200 ISA",
//! chapter 7 "Scalar Memory Operations", and the SMEM opcode table of chapter 12).
//!
//! - `s_load_dword*`/`s_store_dword*`: `ADDR = SGPR[SBASE] + OFFSET + SGPR[SOFFSET]` (IMM: the
//!   21-bit signed offset; SOE or IMM clear: an SGPR offset), the low two bits ignored
//!   (chapter 7, "Alignment and Bounds Checking": scalar memory addresses are dword aligned).
//! - `s_buffer_*`: the base, and the byte limit NUM_RECORDS, from the 128-bit buffer resource
//!   in SGPR[SBASE..SBASE+3] (the V#'s layout of chapter 9's "Buffer Resource"); a dword
//!   whose offset is not wholly below NUM_RECORDS reads 0 and is not written ("Alignment and
//!   Bounds Checking": scalar buffer accesses are range-checked against the resource).
//! - `s_memtime` / `s_memrealtime`: a 64-bit monotonic counter at 100 MHz, the frequency of
//!   the real `s_memrealtime` clock (HIP reports it as `hipDeviceAttributeWallClockRate`,
//!   100 000 kHz). `s_memtime` counts the shader clock on hardware; an interpreter has no
//!   meaningful core clock, so it returns the same 100 MHz count (monotonic and shared by
//!   every wave, which is what `clock64()` users rely on).
//! - `s_dcache_inv`/`_wb`/`_vol`/`s_dcache_discard*`/`s_atc_probe*`: no scalar cache or
//!   translation cache is modelled, nothing to do.
//! - `s_atomic_*` and `s_buffer_atomic_*` (32-bit, and `_x2` 64-bit): the address as a load's
//!   (8-byte aligned for `_x2`; a buffer's whole operand below NUM_RECORDS, else nothing is
//!   done and nothing returned), one atomic read-modify-write of the memory
//!   ([`Memory::atomic`](crate::exec::Memory::atomic)) with the data in SDATA (`cmpswap`:
//!   the new value in the first half of SDATA, the compare value in the second, as the
//!   buffer and flat `cmpswap`s), the value before written back to SDATA when GLC is set
//!   (the guide's "returns the pre-op value if GLC = 1"). `inc` wraps to 0 past the data,
//!   `dec` to the data at 0 or above it (the guide's `ATOMIC_INC`/`ATOMIC_DEC`).
//!
//! Not executed: `s_scratch_load*`/`s_scratch_store*` stop the wave as
//! [`ExecError::Unimplemented`]. The guides name them in the SMEM opcode table but do not say
//! how their address is formed. LLVM's AMDGPU assembler reference (the GFX9 operand pages,
//! `sbase` of the scalar scratch forms) says only that SBASE "is ignored by H/W and
//! flat_scratch is supplied instead"; what the offset means against FLAT_SCRATCH — a raw
//! byte offset in the wave's slot, or a per-wave offset in the lane-swizzled private layout
//! vector scratch uses ([`super::scratch_addr`]) — and how it is range-checked is written
//! nowhere we can cite, and a guess would silently read the wrong private bytes. LLVM selects
//! them for no IR (only its assembler knows them); `tests/exec_mem_fuzz.rs` lists every
//! memory opcode that does not execute, and these six are exactly those.

use super::access::{read_global, write_global};
use crate::exec::wave::{Ctx, ExecError, Ty, Wave, illegal, unimplemented};
use crate::inst::Inst;
use crate::opcode::SmemOp;
use crate::operand::{Operand, Special};
use std::sync::OnceLock;
use std::time::Instant;

/// The `s_memtime`/`s_memrealtime` counter frequency, Hz.
pub const REALTIME_HZ: u64 = 100_000_000;

/// The 100 MHz count since the first use in this process.
pub(crate) fn realtime() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let ns = EPOCH.get_or_init(Instant::now).elapsed().as_nanos();
    (ns / (1_000_000_000 / u128::from(REALTIME_HZ))) as u64
}

/// Scalar register `i` of a multi-register scalar operand starting at `op`, in a file of
/// `sgprs` SGPRs ([`Wave::sgpr_limit`]).
fn scalar_at(op: Operand, i: usize, sgprs: usize) -> Option<Operand> {
    let next = |n: u8, limit: usize| {
        let k = usize::from(n) + i;
        (k < limit).then_some(k as u8)
    };
    Some(match (op, i) {
        (Operand::Sgpr(n), _) => Operand::Sgpr(next(n, sgprs)?),
        (Operand::Ttmp(n), _) => Operand::Ttmp(next(n, 16)?),
        (other, 0) => other,
        (Operand::Special(s), 1) => Operand::Special(match s {
            Special::VccLo => Special::VccHi,
            Special::ExecLo => Special::ExecHi,
            Special::FlatScratchLo => Special::FlatScratchHi,
            Special::XnackMaskLo => Special::XnackMaskHi,
            _ => return None,
        }),
        _ => return None,
    })
}

/// Reads `n` consecutive scalar registers from `op`.
fn read_regs(w: &Wave, op: Operand, n: usize, out: &mut [u32]) -> Option<()> {
    for (i, v) in out.iter_mut().enumerate().take(n) {
        *v = w.read_scalar32(scalar_at(op, i, w.sgpr_limit())?, Ty::B32)?;
    }
    Some(())
}

/// Executes one SMEM instruction.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: SmemOp,
) -> Result<(), ExecError> {
    use SmemOp::*;
    if op.raw() >= 64 {
        return atomic(w, ctx, inst, pc, op.raw());
    }
    let (dwords, buffer, store) = match op {
        SLoadDword => (1, false, false),
        SLoadDwordx2 => (2, false, false),
        SLoadDwordx4 => (4, false, false),
        SLoadDwordx8 => (8, false, false),
        SLoadDwordx16 => (16, false, false),
        SBufferLoadDword => (1, true, false),
        SBufferLoadDwordx2 => (2, true, false),
        SBufferLoadDwordx4 => (4, true, false),
        SBufferLoadDwordx8 => (8, true, false),
        SBufferLoadDwordx16 => (16, true, false),
        SStoreDword => (1, false, true),
        SStoreDwordx2 => (2, false, true),
        SStoreDwordx4 => (4, false, true),
        SBufferStoreDword => (1, true, true),
        SBufferStoreDwordx2 => (2, true, true),
        SBufferStoreDwordx4 => (4, true, true),
        SMemtime | SMemrealtime => {
            if !w.write_scalar64(inst.dst[0], realtime()) {
                return Err(illegal(inst, pc, "not a 64-bit scalar destination"));
            }
            return Ok(());
        }
        SDcacheInv | SDcacheWb | SDcacheInvVol | SDcacheWbVol | SDcacheDiscard
        | SDcacheDiscardX2 | SAtcProbe | SAtcProbeBuffer => return Ok(()),
        SScratchLoadDword | SScratchLoadDwordx2 | SScratchLoadDwordx4 | SScratchStoreDword
        | SScratchStoreDwordx2 | SScratchStoreDwordx4 => return Err(unimplemented(inst, pc)),
        // The atomics (64 and above) went to `atomic` above.
        _ => return Err(unimplemented(inst, pc)),
    };
    let soffset = match inst.src[1] {
        Operand::None => 0,
        op => w
            .read_scalar32(op, Ty::B32)
            .ok_or_else(|| illegal(inst, pc, "a vector offset"))?,
    };
    // The address of the first dword, and for buffers the byte limit of its offsets.
    let (addr, limit) = if buffer {
        let mut v = [0u32; 4];
        read_regs(w, inst.src[0], 4, &mut v)
            .ok_or_else(|| illegal(inst, pc, "no buffer resource quad"))?;
        let base = u64::from(v[0]) | u64::from(v[1] & 0xffff) << 32;
        // Buffer offsets are unsigned: IMM's 20 bits plus the SGPR, within 32 bits.
        let offset = (inst.imm as u32).wrapping_add(soffset) & !3;
        (base.wrapping_add(u64::from(offset)), Some((offset, v[2])))
    } else {
        let base = w
            .read_scalar64(inst.src[0], Ty::B64)
            .ok_or_else(|| illegal(inst, pc, "no base pair"))?;
        let a = base
            .wrapping_add(i64::from(inst.imm) as u64)
            .wrapping_add(u64::from(soffset));
        (a & !3, None)
    };
    let in_range = |i: usize| match limit {
        None => true,
        Some((offset, records)) => u64::from(offset) + 4 * i as u64 + 4 <= u64::from(records),
    };
    let fault = |fault| ExecError::Memory { pc, fault };
    let mut data = [0u32; 16];
    if store {
        read_regs(w, inst.dst[0], dwords, &mut data)
            .ok_or_else(|| illegal(inst, pc, "the data registers run past the file"))?;
        let n = (0..dwords).take_while(|&i| in_range(i)).count();
        let bytes: Vec<u8> = data[..n].iter().flat_map(|d| d.to_le_bytes()).collect();
        write_global(ctx.mem, addr, &bytes).map_err(fault)?;
        return Ok(());
    }
    if scalar_at(inst.dst[0], dwords - 1, w.sgpr_limit()).is_none() {
        return Err(illegal(inst, pc, "the destination runs past the file"));
    }
    let n = (0..dwords).take_while(|&i| in_range(i)).count();
    let mut bytes = [0u8; 64];
    read_global(ctx.mem, addr, &mut bytes[..4 * n]).map_err(fault)?;
    for (i, d) in data.iter_mut().enumerate().take(n) {
        let b = &bytes[4 * i..4 * i + 4];
        *d = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    for (i, &d) in data.iter().enumerate().take(dwords) {
        let Some(dst) = scalar_at(inst.dst[0], i, w.sgpr_limit()) else {
            return Err(illegal(inst, pc, "the destination runs past the file"));
        };
        if !w.write_scalar32(dst, d) {
            return Err(illegal(inst, pc, "not a scalar destination"));
        }
    }
    Ok(())
}

/// An SMEM atomic (`raw` opcode 64 and above; see the module docs).
fn atomic(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    raw: u16,
) -> Result<(), ExecError> {
    // 64..=76 buffer, 96..=108 buffer _x2, 128..=140, 160..=172 _x2.
    let (buffer, x2, f) = (raw < 128, raw & 32 != 0, raw & 31);
    if f > 12 {
        return Err(unimplemented(inst, pc));
    }
    let dwords = if x2 { 2 } else { 1 };
    let cmpswap = f == 1;
    let mut data = [0u32; 4];
    let n = if cmpswap { 2 * dwords } else { dwords };
    read_regs(w, inst.dst[0], n, &mut data)
        .ok_or_else(|| illegal(inst, pc, "the data registers run past the file"))?;
    let soffset = match inst.src[1] {
        Operand::None => 0,
        op => w
            .read_scalar32(op, Ty::B32)
            .ok_or_else(|| illegal(inst, pc, "a vector offset"))?,
    };
    let size = 4 * dwords as u64;
    let addr = if buffer {
        let mut v = [0u32; 4];
        read_regs(w, inst.src[0], 4, &mut v)
            .ok_or_else(|| illegal(inst, pc, "no buffer resource quad"))?;
        let base = u64::from(v[0]) | u64::from(v[1] & 0xffff) << 32;
        let offset = (inst.imm as u32).wrapping_add(soffset) & !(size as u32 - 1);
        if u64::from(offset) + size > u64::from(v[2]) {
            return Ok(());
        }
        base.wrapping_add(u64::from(offset))
    } else {
        let base = w
            .read_scalar64(inst.src[0], Ty::B64)
            .ok_or_else(|| illegal(inst, pc, "no base pair"))?;
        base.wrapping_add(i64::from(inst.imm) as u64)
            .wrapping_add(u64::from(soffset))
            & !(size - 1)
    };
    let join = |lo: u32, hi: u32| u64::from(lo) | if x2 { u64::from(hi) << 32 } else { 0 };
    let src = join(data[0], data[1]);
    let cmp = if x2 {
        join(data[2], data[3])
    } else {
        u64::from(data[1])
    };
    let bits = 32 * dwords as u32;
    let mask = if x2 { u64::MAX } else { u64::from(u32::MAX) };
    let signed = |v: u64| ((v << (64 - bits)) as i64) >> (64 - bits);
    let mut op = |old: u64| -> u64 {
        let new = match f {
            0 => src,
            1 => {
                if old == cmp {
                    src
                } else {
                    old
                }
            }
            2 => old.wrapping_add(src),
            3 => old.wrapping_sub(src),
            4 => {
                if signed(src) < signed(old) {
                    src
                } else {
                    old
                }
            }
            5 => old.min(src),
            6 => {
                if signed(src) > signed(old) {
                    src
                } else {
                    old
                }
            }
            7 => old.max(src),
            8 => old & src,
            9 => old | src,
            10 => old ^ src,
            11 => {
                if old >= src {
                    0
                } else {
                    old + 1
                }
            }
            _ => {
                if old == 0 || old > src {
                    src
                } else {
                    old - 1
                }
            }
        };
        new & mask
    };
    let old = ctx
        .mem
        .atomic(addr, size as u8, &mut op)
        .map_err(|fault| ExecError::Memory { pc, fault })?;
    if inst.mods.glc {
        for i in 0..dwords {
            let Some(dst) = scalar_at(inst.dst[0], i, w.sgpr_limit()) else {
                return Err(illegal(inst, pc, "the destination runs past the file"));
            };
            if !w.write_scalar32(dst, (old >> (32 * i)) as u32) {
                return Err(illegal(inst, pc, "not a scalar destination"));
            }
        }
    }
    Ok(())
}
