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
