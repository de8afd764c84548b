//! The gfx11-only operations ([`Gfx11Op`]): the 32-bit saveexec family of wave32, the
//! returning `s_sendmsg_rtn`, VOPD's pairs (run as their two VALU operations), and the
//! scheduling hints and counter waits that have nothing
//! to act on here. Sources: the "AMD RDNA3 Instruction Set Architecture" guide, SOP1/SOPK/
//! SOPP opcode descriptions.

use super::wave::{Ctx, ExecError, Flow, MessageRtn, Ty, Wave, illegal, unimplemented};
use crate::inst::Inst;
use crate::opcode::Gfx11Op;
use crate::operand::Operand;

/// `s_sendmsg_rtn` message ids (LLVM `SIDefines.h`, `ID_GET_REALTIME`...).
const MSG_RTN_GET_REALTIME: i32 = 131;

/// Executes a gfx11-only operation found at `pc`.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: Gfx11Op,
) -> Result<Flow, ExecError> {
    use Gfx11Op::*;
    match op {
        Vopd => vopd(w, ctx, inst, pc),
        SAndSaveexecB32 | SOrSaveexecB32 | SXorSaveexecB32 | SNandSaveexecB32 | SNorSaveexecB32
        | SXnorSaveexecB32 | SAndNot0SaveexecB32 | SOrNot0SaveexecB32 | SAndNot1SaveexecB32
        | SOrNot1SaveexecB32 | SAndNot0WrexecB32 | SAndNot1WrexecB32 => saveexec32(w, inst, pc, op),
        // Every access completes before the next instruction (see `exec::mem`), and the
        // hints (`s_delay_alu`: "insert delay ... between dependent ALU ops"; `s_clause`) only
        // schedule: nothing to wait for or act on.
        SWaitcntVscnt
        | SWaitcntVmcnt
        | SWaitcntExpcnt
        | SWaitcntLgkmcnt
        | SDelayAlu
        | SClause
        | SWaitcntDepctr
        | SSetInstPrefetchDistance
        | SWaitIdle
        | SGl1Inv
        | BufferGl0Inv
        | BufferGl1Inv => Ok(Flow::Continue),
        // The realtime clock (as `s_memrealtime`): the shader's own clock, no SPI involved.
        SSendmsgRtnB32 | SSendmsgRtnB64 if inst.imm == MSG_RTN_GET_REALTIME => {
            let t = super::mem::realtime();
            let ok = if op == SSendmsgRtnB64 {
                w.write_scalar64(inst.dst[0], t)
            } else {
                w.write_scalar32(inst.dst[0], t as u32)
            };
            if !ok {
                return Err(illegal(
                    inst,
                    pc,
                    "a destination that is not a scalar register",
                ));
            }
            Ok(Flow::Continue)
        }
        // The other messages are the SPI's to answer (the doorbell, the first-level trap
        // handler's TBA and TMA, the draw/dispatch id, the context save's go): the
        // dispatcher asks its observer ([`Flow::MessageRtn`]).
        SSendmsgRtnB32 | SSendmsgRtnB64 => Ok(Flow::MessageRtn(MessageRtn {
            msg: (inst.imm & 0xff) as u16,
            dst: inst.dst[0],
            wide: op == SSendmsgRtnB64,
            pc,
        })),
        VFmamkF32 | VFmaakF32 => Err(unimplemented(inst, pc)),
    }
}

/// The 32-bit saveexec family: `D = EXEC_LO; EXEC_LO = f(S0, EXEC_LO); SCC = EXEC_LO != 0`
/// (the `wrexec` forms: `D` is the new EXEC_LO). EXEC_HI is not touched (zero in wave32).
fn saveexec32(w: &mut Wave, inst: &Inst, pc: u64, op: Gfx11Op) -> Result<Flow, ExecError> {
    use Gfx11Op::*;
    let s = w
        .read_scalar32(inst.src[0], Ty::B32)
        .ok_or_else(|| illegal(inst, pc, "a source that is not scalar"))?;
    let e = w.exec as u32;
    let new = match op {
        SAndSaveexecB32 => s & e,
        SOrSaveexecB32 => s | e,
        SXorSaveexecB32 => s ^ e,
        SNandSaveexecB32 => !(s & e),
        SNorSaveexecB32 => !(s | e),
        SXnorSaveexecB32 => !(s ^ e),
        SAndNot0SaveexecB32 | SAndNot0WrexecB32 => !s & e,
        SOrNot0SaveexecB32 => !s | e,
        SAndNot1SaveexecB32 | SAndNot1WrexecB32 => s & !e,
        SOrNot1SaveexecB32 => s | !e,
        _ => return Err(unimplemented(inst, pc)),
    };
    let wrexec = matches!(op, SAndNot0WrexecB32 | SAndNot1WrexecB32);
    if !w.write_scalar32(inst.dst[0], if wrexec { new } else { e }) {
        return Err(illegal(
            inst,
            pc,
            "a destination that is not a scalar register",
        ));
    }
    w.exec = (w.exec & !0xffff_ffff) | u64::from(new);
    w.scc = new != 0;
    Ok(Flow::Continue)
}

/// A VOPD pair: "the two operations read their sources before either writes" (RDNA3 guide,
/// "VOPD"). Run by the vector ALU one after the other, X first; when Y reads X's destination
/// (LLVM never pairs such operations, hand-written code may: `v_dual_mov_b32 v0, v1 ::
/// v_dual_mov_b32 v1, v0` swaps), Y runs with that register's old value put back, and X's
/// result is written after it.
fn vopd(w: &mut Wave, ctx: &mut Ctx<'_>, inst: &Inst, pc: u64) -> Result<Flow, ExecError> {
    let Some([x, y]) = crate::gfx11::vopd_ops(inst) else {
        return Err(unimplemented(inst, pc));
    };
    let Operand::Vgpr(dx) = x.dst[0] else {
        return Err(illegal(inst, pc, "VDSTX is not a VGPR"));
    };
    let dx = usize::from(dx);
    let old = w.vgpr[dx];
    super::valu::execute(w, ctx, &x, pc)?;
    if y.src.contains(&x.dst[0]) {
        let new = std::mem::replace(&mut w.vgpr[dx], old);
        super::valu::execute(w, ctx, &y, pc)?;
        w.vgpr[dx] = new;
    } else {
        super::valu::execute(w, ctx, &y, pc)?;
    }
    Ok(Flow::Continue)
}
