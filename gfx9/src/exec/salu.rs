//! The scalar ALU and program control: SOP2, SOPK, SOP1, SOPC and SOPP ("AMD Instinct MI200
//! ISA", chapter 4 "Program Flow Control" and chapter 5 "Scalar ALU Operations"; the per-opcode
//! descriptions of chapter 12's SOP2/SOPK/SOP1/SOPC/SOPP tables).

use super::{Ctx, ExecError, Flow, Ty, Wave, illegal, unimplemented};
use crate::inst::Inst;
use crate::opcode::{Opcode, Sop1Op, SoppOp};

/// Executes one scalar instruction found at `pc`.
pub(super) fn execute(
    w: &mut Wave,
    _ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    match inst.op {
        Opcode::Sopp(op) => sopp(w, inst, pc, op),
        Opcode::Sop1(Sop1Op::SMovB32) => {
            let v = w
                .read_scalar32(inst.src[0], Ty::B32)
                .ok_or_else(|| illegal(inst, pc, "a vector source"))?;
            if !w.write_scalar32(inst.dst[0], v) {
                return Err(illegal(inst, pc, "not a scalar destination"));
            }
            Ok(Flow::Continue)
        }
        Opcode::Sop1(Sop1Op::SMovB64) => {
            let v = w
                .read_scalar64(inst.src[0], Ty::B64)
                .ok_or_else(|| illegal(inst, pc, "a vector source"))?;
            if !w.write_scalar64(inst.dst[0], v) {
                return Err(illegal(inst, pc, "not a 64-bit scalar destination"));
            }
            Ok(Flow::Continue)
        }
        _ => Err(unimplemented(inst, pc)),
    }
}

/// SOPP: program control. Branch targets are `pc + 4 + simm16 * 4` (the guide, "s_branch":
/// `PC = PC + signext(SIMM16 * 4) + 4`, PC being the branch's own address).
fn sopp(w: &mut Wave, inst: &Inst, pc: u64, op: SoppOp) -> Result<Flow, ExecError> {
    let target = pc
        .wrapping_add(4)
        .wrapping_add((i64::from(inst.imm) * 4) as u64);
    let taken = match op {
        SoppOp::SEndpgm => return Ok(Flow::End),
        SoppOp::SNop | SoppOp::SWaitcnt => return Ok(Flow::Continue),
        SoppOp::SBarrier => return Ok(Flow::Barrier),
        SoppOp::SBranch => true,
        SoppOp::SCbranchScc0 => !w.scc,
        SoppOp::SCbranchScc1 => w.scc,
        SoppOp::SCbranchVccz => w.vcc == 0,
        SoppOp::SCbranchVccnz => w.vcc != 0,
        SoppOp::SCbranchExecz => w.exec == 0,
        SoppOp::SCbranchExecnz => w.exec != 0,
        _ => return Err(unimplemented(inst, pc)),
    };
    if taken {
        w.pc = target;
    }
    Ok(Flow::Continue)
}
