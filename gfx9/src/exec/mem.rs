//! Memory instructions: SMEM (scalar loads and stores through the scalar cache), DS (LDS and
//! its atomics), FLAT / GLOBAL / SCRATCH, and MUBUF (buffer resources) ("AMD Instinct MI200
//! ISA", chapters 7 "Scalar Memory Operations", 9 "Vector Memory Buffer Instructions", 10
//! "Flat Memory Instructions" and 11 "Data Share Operations").

use super::{Ctx, ExecError, Flow, Wave, unimplemented};
use crate::inst::Inst;

/// Executes one memory instruction found at `pc`.
pub(super) fn execute(
    _w: &mut Wave,
    _ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    Err(unimplemented(inst, pc))
}
