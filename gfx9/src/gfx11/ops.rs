//! The operations gfx11 has and gfx9 does not ([`Gfx11Op`]): what the executor's gfx11 room
//! (`exec::gfx11`) runs.

/// A gfx11-only operation (the "AMD RDNA3 Instruction Set Architecture" guide's opcode
/// tables; names are LLVM's mnemonics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gfx11Op {
    /// `s_and_saveexec_b32`: `D = EXEC_LO; EXEC_LO = S0 & EXEC_LO; SCC = EXEC_LO != 0`.
    SAndSaveexecB32,
    /// `s_or_saveexec_b32`.
    SOrSaveexecB32,
    /// `s_xor_saveexec_b32`.
    SXorSaveexecB32,
    /// `s_nand_saveexec_b32`.
    SNandSaveexecB32,
    /// `s_nor_saveexec_b32`.
    SNorSaveexecB32,
    /// `s_xnor_saveexec_b32`.
    SXnorSaveexecB32,
    /// `s_and_not0_saveexec_b32`: `EXEC_LO = ~S0 & EXEC_LO`.
    SAndNot0SaveexecB32,
    /// `s_or_not0_saveexec_b32`: `EXEC_LO = ~S0 | EXEC_LO`.
    SOrNot0SaveexecB32,
    /// `s_and_not1_saveexec_b32`: `EXEC_LO = S0 & ~EXEC_LO`.
    SAndNot1SaveexecB32,
    /// `s_or_not1_saveexec_b32`: `EXEC_LO = S0 | ~EXEC_LO`.
    SOrNot1SaveexecB32,
    /// `s_and_not0_wrexec_b32`: `EXEC_LO = ~S0 & EXEC_LO; D = EXEC_LO`.
    SAndNot0WrexecB32,
    /// `s_and_not1_wrexec_b32`: `EXEC_LO = S0 & ~EXEC_LO; D = EXEC_LO`.
    SAndNot1WrexecB32,
    /// `s_sendmsg_rtn_b32`: a message whose answer comes back in SDST (the message id in
    /// [`Inst::imm`](crate::Inst::imm)).
    SSendmsgRtnB32,
    /// `s_sendmsg_rtn_b64`.
    SSendmsgRtnB64,
    /// `s_waitcnt_vscnt`: wait for vector stores (every access has completed here).
    SWaitcntVscnt,
    /// `s_waitcnt_vmcnt`.
    SWaitcntVmcnt,
    /// `s_waitcnt_expcnt`.
    SWaitcntExpcnt,
    /// `s_waitcnt_lgkmcnt`.
    SWaitcntLgkmcnt,
    /// `s_delay_alu`: a scheduling hint of the instruction dependencies that follow.
    SDelayAlu,
    /// `s_clause`: the next instructions form a clause (a scheduling hint).
    SClause,
    /// `s_waitcnt_depctr`: wait for dependency counters.
    SWaitcntDepctr,
    /// `s_set_inst_prefetch_distance`: the instruction prefetch distance.
    SSetInstPrefetchDistance,
    /// `s_wait_idle`: wait until the wave's accesses have completed.
    SWaitIdle,
    /// `s_gl1_inv`: invalidate the GL1 cache.
    SGl1Inv,
    /// `buffer_gl0_inv`: invalidate the GL0 cache.
    BufferGl0Inv,
    /// `buffer_gl1_inv`: invalidate the GL1 cache.
    BufferGl1Inv,
    /// `v_fmamk_f32` (decodes to `v_fma_f32` with the literal as source 1; never executed as
    /// itself).
    VFmamkF32,
    /// `v_fmaak_f32` (decodes to `v_fma_f32` with the literal as source 2).
    VFmaakF32,
    /// VOPD: `v_dual_<x> :: v_dual_<y>`, two VALU operations that read their sources
    /// together ([`Encoding::Vopd`](crate::Encoding::Vopd); the pair's fields in the `Inst`:
    /// `dst` VDSTX, VDSTY; `src` SRC0X, SRC0Y, the literal K; `imm` VSRC1X bits 0–7, VSRC1Y
    /// 8–15, OPX 16–19, OPY 20–24; [`vopd_ops`](crate::gfx11::vopd_ops) splits it).
    Vopd,
}

impl Gfx11Op {
    /// The LLVM assembler's mnemonic.
    pub fn mnemonic(self) -> &'static str {
        use Gfx11Op::*;
        match self {
            SAndSaveexecB32 => "s_and_saveexec_b32",
            SOrSaveexecB32 => "s_or_saveexec_b32",
            SXorSaveexecB32 => "s_xor_saveexec_b32",
            SNandSaveexecB32 => "s_nand_saveexec_b32",
            SNorSaveexecB32 => "s_nor_saveexec_b32",
            SXnorSaveexecB32 => "s_xnor_saveexec_b32",
            SAndNot0SaveexecB32 => "s_and_not0_saveexec_b32",
            SOrNot0SaveexecB32 => "s_or_not0_saveexec_b32",
            SAndNot1SaveexecB32 => "s_and_not1_saveexec_b32",
            SOrNot1SaveexecB32 => "s_or_not1_saveexec_b32",
            SAndNot0WrexecB32 => "s_and_not0_wrexec_b32",
            SAndNot1WrexecB32 => "s_and_not1_wrexec_b32",
            SSendmsgRtnB32 => "s_sendmsg_rtn_b32",
            SSendmsgRtnB64 => "s_sendmsg_rtn_b64",
            SWaitcntVscnt => "s_waitcnt_vscnt",
            SWaitcntVmcnt => "s_waitcnt_vmcnt",
            SWaitcntExpcnt => "s_waitcnt_expcnt",
            SWaitcntLgkmcnt => "s_waitcnt_lgkmcnt",
            SDelayAlu => "s_delay_alu",
            SClause => "s_clause",
            SWaitcntDepctr => "s_waitcnt_depctr",
            SSetInstPrefetchDistance => "s_set_inst_prefetch_distance",
            SWaitIdle => "s_wait_idle",
            SGl1Inv => "s_gl1_inv",
            BufferGl0Inv => "buffer_gl0_inv",
            BufferGl1Inv => "buffer_gl1_inv",
            VFmamkF32 => "v_fmamk_f32",
            VFmaakF32 => "v_fmaak_f32",
            Vopd => "v_dual",
        }
    }
}
