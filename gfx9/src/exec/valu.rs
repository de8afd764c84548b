//! The vector ALU: VOP1, VOP2, VOPC, VOP3 and VOP3P ("AMD Instinct MI200 ISA", chapter 6
//! "Vector ALU Operations"; the per-opcode descriptions of chapter 12's VOP tables). Every
//! lane operation runs only in lanes EXEC enables.

use super::{Ctx, ExecError, Flow, LANES, Ty, Wave, illegal, unimplemented};
use crate::inst::Inst;
use crate::opcode::{Encoding, Opcode, Vop1Op};
use crate::operand::Operand;

/// Executes one vector ALU instruction found at `pc`.
pub(super) fn execute(
    w: &mut Wave,
    _ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    match (inst.op, inst.encoding) {
        (Opcode::Vop1(Vop1Op::VMovB32), Encoding::Vop1) => {
            let src = w
                .vsrc32(inst.src[0], Ty::B32)
                .ok_or_else(|| illegal(inst, pc, "no source"))?;
            let Operand::Vgpr(d) = inst.dst[0] else {
                return Err(illegal(inst, pc, "not a VGPR destination"));
            };
            for lane in 0..LANES {
                if w.active(lane) {
                    let v = w.lane32(src, lane);
                    w.vgpr[usize::from(d)][lane] = v;
                }
            }
            Ok(Flow::Continue)
        }
        _ => Err(unimplemented(inst, pc)),
    }
}
