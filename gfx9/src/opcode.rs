//! Opcode tables, one per encoding, with the numbers of the "AMD Instinct MI200 Instruction Set
//! Architecture" guide, chapter "Microcode Formats": each encoding's section there lists its
//! opcodes (SOP2, SOPK, SOP1, SOPC, SOPP, SMEM, VOP2, VOP1, VOPC, VOP3A/VOP3B, VOP3P, DS,
//! FLAT/GLOBAL/SCRATCH, MUBUF). A number absent from a table decodes to
//! [`DecodeError::UnknownOpcode`](crate::DecodeError::UnknownOpcode): the tables hold what clang
//! emits for ordinary kernels and their close relatives, and grow as the interpreter does.
//! [`Gfx11Op`] holds what gfx11 (RDNA3) adds, which `crate::gfx11`'s tables decode to.

use std::fmt;

/// Defines one encoding's opcode enum: variant = number, with its LLVM mnemonic.
macro_rules! opcodes {
    ($(#[$meta:meta])* $name:ident { $($var:ident = $num:literal $mn:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum $name {
            $(#[doc = concat!("`", $mn, "` (", stringify!($num), ")")] $var = $num,)*
        }

        impl $name {
            /// Every opcode of the table, in number order.
            pub const ALL: &[Self] = &[$(Self::$var,)*];

            /// The opcode with encoding number `op`, if the table has it.
            pub fn from_raw(op: u16) -> Option<Self> {
                match op {
                    $($num => Some(Self::$var),)*
                    _ => None,
                }
            }

            /// The opcode's number in its encoding.
            pub fn raw(self) -> u16 {
                self as u16
            }

            /// The LLVM assembler's mnemonic.
            pub fn mnemonic(self) -> &'static str {
                match self {
                    $(Self::$var => $mn,)*
                }
            }
        }
    };
}

opcodes! {
    /// SOP2: two scalar sources, a scalar destination (7-bit opcode).
    Sop2Op {
        SAddU32 = 0 "s_add_u32", SSubU32 = 1 "s_sub_u32", SAddI32 = 2 "s_add_i32",
        SSubI32 = 3 "s_sub_i32", SAddcU32 = 4 "s_addc_u32", SSubbU32 = 5 "s_subb_u32",
        SMinI32 = 6 "s_min_i32", SMinU32 = 7 "s_min_u32", SMaxI32 = 8 "s_max_i32",
        SMaxU32 = 9 "s_max_u32", SCselectB32 = 10 "s_cselect_b32", SCselectB64 = 11 "s_cselect_b64",
        SAndB32 = 12 "s_and_b32", SAndB64 = 13 "s_and_b64", SOrB32 = 14 "s_or_b32",
        SOrB64 = 15 "s_or_b64", SXorB32 = 16 "s_xor_b32", SXorB64 = 17 "s_xor_b64",
        SAndn2B32 = 18 "s_andn2_b32", SAndn2B64 = 19 "s_andn2_b64", SOrn2B32 = 20 "s_orn2_b32",
        SOrn2B64 = 21 "s_orn2_b64", SNandB32 = 22 "s_nand_b32", SNandB64 = 23 "s_nand_b64",
        SNorB32 = 24 "s_nor_b32", SNorB64 = 25 "s_nor_b64", SXnorB32 = 26 "s_xnor_b32",
        SXnorB64 = 27 "s_xnor_b64", SLshlB32 = 28 "s_lshl_b32", SLshlB64 = 29 "s_lshl_b64",
        SLshrB32 = 30 "s_lshr_b32", SLshrB64 = 31 "s_lshr_b64", SAshrI32 = 32 "s_ashr_i32",
        SAshrI64 = 33 "s_ashr_i64", SBfmB32 = 34 "s_bfm_b32", SBfmB64 = 35 "s_bfm_b64",
        SMulI32 = 36 "s_mul_i32", SBfeU32 = 37 "s_bfe_u32", SBfeI32 = 38 "s_bfe_i32",
        SBfeU64 = 39 "s_bfe_u64", SBfeI64 = 40 "s_bfe_i64", SAbsdiffI32 = 42 "s_absdiff_i32",
        SMulHiU32 = 44 "s_mul_hi_u32", SMulHiI32 = 45 "s_mul_hi_i32",
        SLshl1AddU32 = 46 "s_lshl1_add_u32", SLshl2AddU32 = 47 "s_lshl2_add_u32",
        SLshl3AddU32 = 48 "s_lshl3_add_u32", SLshl4AddU32 = 49 "s_lshl4_add_u32",
        SPackLlB32B16 = 50 "s_pack_ll_b32_b16", SPackLhB32B16 = 51 "s_pack_lh_b32_b16",
        SPackHhB32B16 = 52 "s_pack_hh_b32_b16", SCbranchGFork = 41 "s_cbranch_g_fork",
    }
}

opcodes! {
    /// SOPK: a scalar register and a 16-bit immediate (5-bit opcode).
    SopkOp {
        SMovkI32 = 0 "s_movk_i32", SCmovkI32 = 1 "s_cmovk_i32", SCmpkEqI32 = 2 "s_cmpk_eq_i32",
        SCmpkLgI32 = 3 "s_cmpk_lg_i32", SCmpkGtI32 = 4 "s_cmpk_gt_i32", SCmpkGeI32 = 5 "s_cmpk_ge_i32",
        SCmpkLtI32 = 6 "s_cmpk_lt_i32", SCmpkLeI32 = 7 "s_cmpk_le_i32", SCmpkEqU32 = 8 "s_cmpk_eq_u32",
        SCmpkLgU32 = 9 "s_cmpk_lg_u32", SCmpkGtU32 = 10 "s_cmpk_gt_u32", SCmpkGeU32 = 11 "s_cmpk_ge_u32",
        SCmpkLtU32 = 12 "s_cmpk_lt_u32", SCmpkLeU32 = 13 "s_cmpk_le_u32", SAddkI32 = 14 "s_addk_i32",
        SMulkI32 = 15 "s_mulk_i32", SGetregB32 = 17 "s_getreg_b32", SSetregB32 = 18 "s_setreg_b32",
        SSetregImm32B32 = 20 "s_setreg_imm32_b32", SCallB64 = 21 "s_call_b64",
        SCbranchIFork = 16 "s_cbranch_i_fork",
    }
}

opcodes! {
    /// SOP1: one scalar source, a scalar destination (8-bit opcode).
    Sop1Op {
        SMovB32 = 0 "s_mov_b32", SMovB64 = 1 "s_mov_b64", SCmovB32 = 2 "s_cmov_b32",
        SCmovB64 = 3 "s_cmov_b64", SNotB32 = 4 "s_not_b32", SNotB64 = 5 "s_not_b64",
        SWqmB32 = 6 "s_wqm_b32", SWqmB64 = 7 "s_wqm_b64", SBrevB32 = 8 "s_brev_b32",
        SBrevB64 = 9 "s_brev_b64", SBcnt0I32B32 = 10 "s_bcnt0_i32_b32",
        SBcnt0I32B64 = 11 "s_bcnt0_i32_b64", SBcnt1I32B32 = 12 "s_bcnt1_i32_b32",
        SBcnt1I32B64 = 13 "s_bcnt1_i32_b64", SFf0I32B32 = 14 "s_ff0_i32_b32",
        SFf0I32B64 = 15 "s_ff0_i32_b64", SFf1I32B32 = 16 "s_ff1_i32_b32",
        SFf1I32B64 = 17 "s_ff1_i32_b64", SFlbitI32B32 = 18 "s_flbit_i32_b32",
        SFlbitI32B64 = 19 "s_flbit_i32_b64", SFlbitI32 = 20 "s_flbit_i32",
        SFlbitI32I64 = 21 "s_flbit_i32_i64", SSextI32I8 = 22 "s_sext_i32_i8",
        SSextI32I16 = 23 "s_sext_i32_i16", SBitset0B32 = 24 "s_bitset0_b32",
        SBitset0B64 = 25 "s_bitset0_b64", SBitset1B32 = 26 "s_bitset1_b32",
        SBitset1B64 = 27 "s_bitset1_b64", SGetpcB64 = 28 "s_getpc_b64", SSetpcB64 = 29 "s_setpc_b64",
        SSwappcB64 = 30 "s_swappc_b64", SRfeB64 = 31 "s_rfe_b64",
        SAndSaveexecB64 = 32 "s_and_saveexec_b64", SOrSaveexecB64 = 33 "s_or_saveexec_b64",
        SXorSaveexecB64 = 34 "s_xor_saveexec_b64", SAndn2SaveexecB64 = 35 "s_andn2_saveexec_b64",
        SOrn2SaveexecB64 = 36 "s_orn2_saveexec_b64", SNandSaveexecB64 = 37 "s_nand_saveexec_b64",
        SNorSaveexecB64 = 38 "s_nor_saveexec_b64", SXnorSaveexecB64 = 39 "s_xnor_saveexec_b64",
        SQuadmaskB32 = 40 "s_quadmask_b32", SQuadmaskB64 = 41 "s_quadmask_b64",
        SMovrelsB32 = 42 "s_movrels_b32", SMovrelsB64 = 43 "s_movrels_b64",
        SMovreldB32 = 44 "s_movreld_b32", SMovreldB64 = 45 "s_movreld_b64",
        SAbsI32 = 48 "s_abs_i32", SAndn1SaveexecB64 = 51 "s_andn1_saveexec_b64",
        SOrn1SaveexecB64 = 52 "s_orn1_saveexec_b64", SAndn1WrexecB64 = 53 "s_andn1_wrexec_b64",
        SAndn2WrexecB64 = 54 "s_andn2_wrexec_b64", SBitreplicateB64B32 = 55 "s_bitreplicate_b64_b32",
        SSetGprIdxIdx = 50 "s_set_gpr_idx_idx", SCbranchJoin = 46 "s_cbranch_join",
    }
}

opcodes! {
    /// SOPC: two scalar sources compared into SCC (7-bit opcode).
    SopcOp {
        SCmpEqI32 = 0 "s_cmp_eq_i32", SCmpLgI32 = 1 "s_cmp_lg_i32", SCmpGtI32 = 2 "s_cmp_gt_i32",
        SCmpGeI32 = 3 "s_cmp_ge_i32", SCmpLtI32 = 4 "s_cmp_lt_i32", SCmpLeI32 = 5 "s_cmp_le_i32",
        SCmpEqU32 = 6 "s_cmp_eq_u32", SCmpLgU32 = 7 "s_cmp_lg_u32", SCmpGtU32 = 8 "s_cmp_gt_u32",
        SCmpGeU32 = 9 "s_cmp_ge_u32", SCmpLtU32 = 10 "s_cmp_lt_u32", SCmpLeU32 = 11 "s_cmp_le_u32",
        SBitcmp0B32 = 12 "s_bitcmp0_b32", SBitcmp1B32 = 13 "s_bitcmp1_b32",
        SBitcmp0B64 = 14 "s_bitcmp0_b64", SBitcmp1B64 = 15 "s_bitcmp1_b64",
        SCmpEqU64 = 18 "s_cmp_eq_u64", SCmpLgU64 = 19 "s_cmp_lg_u64",
        SSetGprIdxOn = 17 "s_set_gpr_idx_on", SSetvskip = 16 "s_setvskip",
    }
}

opcodes! {
    /// SOPP: program control with a 16-bit immediate (7-bit opcode).
    SoppOp {
        SNop = 0 "s_nop", SEndpgm = 1 "s_endpgm", SBranch = 2 "s_branch", SWakeup = 3 "s_wakeup",
        SCbranchScc0 = 4 "s_cbranch_scc0", SCbranchScc1 = 5 "s_cbranch_scc1",
        SCbranchVccz = 6 "s_cbranch_vccz", SCbranchVccnz = 7 "s_cbranch_vccnz",
        SCbranchExecz = 8 "s_cbranch_execz", SCbranchExecnz = 9 "s_cbranch_execnz",
        SBarrier = 10 "s_barrier", SSetkill = 11 "s_setkill", SWaitcnt = 12 "s_waitcnt",
        SSethalt = 13 "s_sethalt", SSleep = 14 "s_sleep", SSetprio = 15 "s_setprio",
        SSendmsg = 16 "s_sendmsg", SSendmsghalt = 17 "s_sendmsghalt", STrap = 18 "s_trap",
        SIcacheInv = 19 "s_icache_inv", SIncperflevel = 20 "s_incperflevel",
        SDecperflevel = 21 "s_decperflevel", STtracedata = 22 "s_ttracedata",
        SEndpgmSaved = 27 "s_endpgm_saved", SSetGprIdxOff = 28 "s_set_gpr_idx_off",
        SSetGprIdxMode = 29 "s_set_gpr_idx_mode",
        SCbranchCdbgsys = 23 "s_cbranch_cdbgsys", SCbranchCdbguser = 24 "s_cbranch_cdbguser",
        SCbranchCdbgsysOrUser = 25 "s_cbranch_cdbgsys_or_user",
        SCbranchCdbgsysAndUser = 26 "s_cbranch_cdbgsys_and_user",
        SEndpgmOrderedPsDone = 30 "s_endpgm_ordered_ps_done",
    }
}

opcodes! {
    /// SMEM: scalar memory (8-bit opcode).
    SmemOp {
        SLoadDword = 0 "s_load_dword", SLoadDwordx2 = 1 "s_load_dwordx2",
        SLoadDwordx4 = 2 "s_load_dwordx4", SLoadDwordx8 = 3 "s_load_dwordx8",
        SLoadDwordx16 = 4 "s_load_dwordx16", SBufferLoadDword = 8 "s_buffer_load_dword",
        SBufferLoadDwordx2 = 9 "s_buffer_load_dwordx2", SBufferLoadDwordx4 = 10 "s_buffer_load_dwordx4",
        SBufferLoadDwordx8 = 11 "s_buffer_load_dwordx8", SBufferLoadDwordx16 = 12 "s_buffer_load_dwordx16",
        SStoreDword = 16 "s_store_dword", SStoreDwordx2 = 17 "s_store_dwordx2",
        SStoreDwordx4 = 18 "s_store_dwordx4", SDcacheInv = 32 "s_dcache_inv",
        SDcacheWb = 33 "s_dcache_wb", SDcacheInvVol = 34 "s_dcache_inv_vol",
        SDcacheWbVol = 35 "s_dcache_wb_vol", SMemtime = 36 "s_memtime",
        SMemrealtime = 37 "s_memrealtime",
        SScratchLoadDword = 5 "s_scratch_load_dword", SScratchLoadDwordx2 = 6 "s_scratch_load_dwordx2",
        SScratchLoadDwordx4 = 7 "s_scratch_load_dwordx4", SScratchStoreDword = 21 "s_scratch_store_dword",
        SScratchStoreDwordx2 = 22 "s_scratch_store_dwordx2", SScratchStoreDwordx4 = 23 "s_scratch_store_dwordx4",
        SBufferStoreDword = 24 "s_buffer_store_dword", SBufferStoreDwordx2 = 25 "s_buffer_store_dwordx2",
        SBufferStoreDwordx4 = 26 "s_buffer_store_dwordx4", SAtcProbe = 38 "s_atc_probe",
        SAtcProbeBuffer = 39 "s_atc_probe_buffer", SDcacheDiscard = 40 "s_dcache_discard",
        SDcacheDiscardX2 = 41 "s_dcache_discard_x2",
        SBufferAtomicSwap = 64 "s_buffer_atomic_swap", SBufferAtomicCmpswap = 65 "s_buffer_atomic_cmpswap",
        SBufferAtomicAdd = 66 "s_buffer_atomic_add", SBufferAtomicSub = 67 "s_buffer_atomic_sub",
        SBufferAtomicSmin = 68 "s_buffer_atomic_smin", SBufferAtomicUmin = 69 "s_buffer_atomic_umin",
        SBufferAtomicSmax = 70 "s_buffer_atomic_smax", SBufferAtomicUmax = 71 "s_buffer_atomic_umax",
        SBufferAtomicAnd = 72 "s_buffer_atomic_and", SBufferAtomicOr = 73 "s_buffer_atomic_or",
        SBufferAtomicXor = 74 "s_buffer_atomic_xor", SBufferAtomicInc = 75 "s_buffer_atomic_inc",
        SBufferAtomicDec = 76 "s_buffer_atomic_dec", SBufferAtomicSwapX2 = 96 "s_buffer_atomic_swap_x2",
        SBufferAtomicCmpswapX2 = 97 "s_buffer_atomic_cmpswap_x2", SBufferAtomicAddX2 = 98 "s_buffer_atomic_add_x2",
        SBufferAtomicSubX2 = 99 "s_buffer_atomic_sub_x2", SBufferAtomicSminX2 = 100 "s_buffer_atomic_smin_x2",
        SBufferAtomicUminX2 = 101 "s_buffer_atomic_umin_x2", SBufferAtomicSmaxX2 = 102 "s_buffer_atomic_smax_x2",
        SBufferAtomicUmaxX2 = 103 "s_buffer_atomic_umax_x2", SBufferAtomicAndX2 = 104 "s_buffer_atomic_and_x2",
        SBufferAtomicOrX2 = 105 "s_buffer_atomic_or_x2", SBufferAtomicXorX2 = 106 "s_buffer_atomic_xor_x2",
        SBufferAtomicIncX2 = 107 "s_buffer_atomic_inc_x2", SBufferAtomicDecX2 = 108 "s_buffer_atomic_dec_x2",
        SAtomicSwap = 128 "s_atomic_swap", SAtomicCmpswap = 129 "s_atomic_cmpswap",
        SAtomicAdd = 130 "s_atomic_add", SAtomicSub = 131 "s_atomic_sub",
        SAtomicSmin = 132 "s_atomic_smin", SAtomicUmin = 133 "s_atomic_umin",
        SAtomicSmax = 134 "s_atomic_smax", SAtomicUmax = 135 "s_atomic_umax",
        SAtomicAnd = 136 "s_atomic_and", SAtomicOr = 137 "s_atomic_or",
        SAtomicXor = 138 "s_atomic_xor", SAtomicInc = 139 "s_atomic_inc",
        SAtomicDec = 140 "s_atomic_dec", SAtomicSwapX2 = 160 "s_atomic_swap_x2",
        SAtomicCmpswapX2 = 161 "s_atomic_cmpswap_x2", SAtomicAddX2 = 162 "s_atomic_add_x2",
        SAtomicSubX2 = 163 "s_atomic_sub_x2", SAtomicSminX2 = 164 "s_atomic_smin_x2",
        SAtomicUminX2 = 165 "s_atomic_umin_x2", SAtomicSmaxX2 = 166 "s_atomic_smax_x2",
        SAtomicUmaxX2 = 167 "s_atomic_umax_x2", SAtomicAndX2 = 168 "s_atomic_and_x2",
        SAtomicOrX2 = 169 "s_atomic_or_x2", SAtomicXorX2 = 170 "s_atomic_xor_x2",
        SAtomicIncX2 = 171 "s_atomic_inc_x2", SAtomicDecX2 = 172 "s_atomic_dec_x2",
    }
}

opcodes! {
    /// VOP2: `vdst = src0 op vsrc1` (6-bit opcode; in VOP3 as 0x100 + op).
    Vop2Op {
        VCndmaskB32 = 0 "v_cndmask_b32", VAddF32 = 1 "v_add_f32", VSubF32 = 2 "v_sub_f32",
        VSubrevF32 = 3 "v_subrev_f32", VFmacF64 = 4 "v_fmac_f64", VMulF32 = 5 "v_mul_f32",
        VMulI32I24 = 6 "v_mul_i32_i24", VMulHiI32I24 = 7 "v_mul_hi_i32_i24",
        VMulU32U24 = 8 "v_mul_u32_u24", VMulHiU32U24 = 9 "v_mul_hi_u32_u24",
        VMinF32 = 10 "v_min_f32", VMaxF32 = 11 "v_max_f32", VMinI32 = 12 "v_min_i32",
        VMaxI32 = 13 "v_max_i32", VMinU32 = 14 "v_min_u32", VMaxU32 = 15 "v_max_u32",
        VLshrrevB32 = 16 "v_lshrrev_b32", VAshrrevI32 = 17 "v_ashrrev_i32",
        VLshlrevB32 = 18 "v_lshlrev_b32", VAndB32 = 19 "v_and_b32", VOrB32 = 20 "v_or_b32",
        VXorB32 = 21 "v_xor_b32", VMacF32 = 22 "v_mac_f32", VMadmkF32 = 23 "v_madmk_f32",
        VMadakF32 = 24 "v_madak_f32", VAddCoU32 = 25 "v_add_co_u32", VSubCoU32 = 26 "v_sub_co_u32",
        VSubrevCoU32 = 27 "v_subrev_co_u32", VAddcCoU32 = 28 "v_addc_co_u32",
        VSubbCoU32 = 29 "v_subb_co_u32", VSubbrevCoU32 = 30 "v_subbrev_co_u32",
        VAddF16 = 31 "v_add_f16", VSubF16 = 32 "v_sub_f16", VSubrevF16 = 33 "v_subrev_f16",
        VMulF16 = 34 "v_mul_f16", VAddU16 = 38 "v_add_u16", VSubU16 = 39 "v_sub_u16",
        VMulLoU16 = 41 "v_mul_lo_u16", VLshlrevB16 = 42 "v_lshlrev_b16",
        VLshrrevB16 = 43 "v_lshrrev_b16", VAshrrevI16 = 44 "v_ashrrev_i16",
        VAddU32 = 52 "v_add_u32", VSubU32 = 53 "v_sub_u32", VSubrevU32 = 54 "v_subrev_u32",
        VFmacF32 = 59 "v_fmac_f32", VXnorB32 = 61 "v_xnor_b32",
        VMacF16 = 35 "v_mac_f16", VMadmkF16 = 36 "v_madmk_f16", VMadakF16 = 37 "v_madak_f16",
        VSubrevU16 = 40 "v_subrev_u16", VMaxF16 = 45 "v_max_f16", VMinF16 = 46 "v_min_f16",
        VMaxU16 = 47 "v_max_u16", VMaxI16 = 48 "v_max_i16", VMinU16 = 49 "v_min_u16",
        VMinI16 = 50 "v_min_i16", VLdexpF16 = 51 "v_ldexp_f16", VDot2cF32F16 = 55 "v_dot2c_f32_f16",
        VDot2cI32I16 = 56 "v_dot2c_i32_i16", VDot4cI32I8 = 57 "v_dot4c_i32_i8",
        VDot8cI32I4 = 58 "v_dot8c_i32_i4", VPkFmacF16 = 60 "v_pk_fmac_f16",
    }
}

opcodes! {
    /// VOP1: `vdst = op src0` (8-bit opcode; in VOP3 as 0x140 + op).
    Vop1Op {
        VNop = 0 "v_nop", VMovB32 = 1 "v_mov_b32", VReadfirstlaneB32 = 2 "v_readfirstlane_b32",
        VCvtI32F64 = 3 "v_cvt_i32_f64", VCvtF64I32 = 4 "v_cvt_f64_i32",
        VCvtF32I32 = 5 "v_cvt_f32_i32", VCvtF32U32 = 6 "v_cvt_f32_u32",
        VCvtU32F32 = 7 "v_cvt_u32_f32", VCvtI32F32 = 8 "v_cvt_i32_f32",
        VCvtF16F32 = 10 "v_cvt_f16_f32", VCvtF32F16 = 11 "v_cvt_f32_f16",
        VCvtF32F64 = 15 "v_cvt_f32_f64", VCvtF64F32 = 16 "v_cvt_f64_f32",
        VCvtU32F64 = 21 "v_cvt_u32_f64", VCvtF64U32 = 22 "v_cvt_f64_u32",
        VTruncF64 = 23 "v_trunc_f64", VCeilF64 = 24 "v_ceil_f64", VRndneF64 = 25 "v_rndne_f64",
        VFloorF64 = 26 "v_floor_f64", VFractF32 = 27 "v_fract_f32", VTruncF32 = 28 "v_trunc_f32",
        VCeilF32 = 29 "v_ceil_f32", VRndneF32 = 30 "v_rndne_f32", VFloorF32 = 31 "v_floor_f32",
        VExpF32 = 32 "v_exp_f32", VLogF32 = 33 "v_log_f32", VRcpF32 = 34 "v_rcp_f32",
        VRcpIflagF32 = 35 "v_rcp_iflag_f32", VRsqF32 = 36 "v_rsq_f32", VRcpF64 = 37 "v_rcp_f64",
        VRsqF64 = 38 "v_rsq_f64", VSqrtF32 = 39 "v_sqrt_f32", VSqrtF64 = 40 "v_sqrt_f64",
        VSinF32 = 41 "v_sin_f32", VCosF32 = 42 "v_cos_f32", VNotB32 = 43 "v_not_b32",
        VBfrevB32 = 44 "v_bfrev_b32", VFfbhU32 = 45 "v_ffbh_u32", VFfblB32 = 46 "v_ffbl_b32",
        VFfbhI32 = 47 "v_ffbh_i32", VFrexpExpI32F64 = 48 "v_frexp_exp_i32_f64",
        VFrexpMantF64 = 49 "v_frexp_mant_f64", VFractF64 = 50 "v_fract_f64",
        VFrexpExpI32F32 = 51 "v_frexp_exp_i32_f32", VFrexpMantF32 = 52 "v_frexp_mant_f32",
        VCvtRpiI32F32 = 12 "v_cvt_rpi_i32_f32", VCvtFlrI32F32 = 13 "v_cvt_flr_i32_f32",
        VCvtOffF32I4 = 14 "v_cvt_off_f32_i4", VCvtF32Ubyte0 = 17 "v_cvt_f32_ubyte0",
        VCvtF32Ubyte1 = 18 "v_cvt_f32_ubyte1", VCvtF32Ubyte2 = 19 "v_cvt_f32_ubyte2",
        VCvtF32Ubyte3 = 20 "v_cvt_f32_ubyte3", VClrexcp = 53 "v_clrexcp",
        VCvtF16U16 = 57 "v_cvt_f16_u16", VCvtF16I16 = 58 "v_cvt_f16_i16",
        VCvtU16F16 = 59 "v_cvt_u16_f16", VCvtI16F16 = 60 "v_cvt_i16_f16", VRcpF16 = 61 "v_rcp_f16",
        VSqrtF16 = 62 "v_sqrt_f16", VRsqF16 = 63 "v_rsq_f16", VLogF16 = 64 "v_log_f16",
        VExpF16 = 65 "v_exp_f16", VFrexpMantF16 = 66 "v_frexp_mant_f16",
        VFrexpExpI16F16 = 67 "v_frexp_exp_i16_f16", VFloorF16 = 68 "v_floor_f16",
        VCeilF16 = 69 "v_ceil_f16", VTruncF16 = 70 "v_trunc_f16", VRndneF16 = 71 "v_rndne_f16",
        VFractF16 = 72 "v_fract_f16", VSinF16 = 73 "v_sin_f16", VCosF16 = 74 "v_cos_f16",
        VExpLegacyF32 = 75 "v_exp_legacy_f32", VLogLegacyF32 = 76 "v_log_legacy_f32",
        VCvtNormI16F16 = 77 "v_cvt_norm_i16_f16", VCvtNormU16F16 = 78 "v_cvt_norm_u16_f16",
        VSatPkU8I16 = 79 "v_sat_pk_u8_i16", VSwapB32 = 81 "v_swap_b32",
        VAccvgprMovB32 = 82 "v_accvgpr_mov_b32", VMovB64 = 56 "v_mov_b64",
    }
}

opcodes! {
    /// VOPC: compare two sources per lane into VCC (or an SGPR pair in VOP3), the `cmpx` forms
    /// also into EXEC (8-bit opcode; in VOP3 as the same number).
    VopcOp {
        VCmpClassF32 = 0x10 "v_cmp_class_f32",
        VCmpxClassF32 = 0x11 "v_cmpx_class_f32",
        VCmpClassF64 = 0x12 "v_cmp_class_f64",
        VCmpxClassF64 = 0x13 "v_cmpx_class_f64",
        VCmpClassF16 = 0x14 "v_cmp_class_f16",
        VCmpxClassF16 = 0x15 "v_cmpx_class_f16",
        VCmpFF16 = 0x20 "v_cmp_f_f16",
        VCmpLtF16 = 0x21 "v_cmp_lt_f16",
        VCmpEqF16 = 0x22 "v_cmp_eq_f16",
        VCmpLeF16 = 0x23 "v_cmp_le_f16",
        VCmpGtF16 = 0x24 "v_cmp_gt_f16",
        VCmpLgF16 = 0x25 "v_cmp_lg_f16",
        VCmpGeF16 = 0x26 "v_cmp_ge_f16",
        VCmpOF16 = 0x27 "v_cmp_o_f16",
        VCmpUF16 = 0x28 "v_cmp_u_f16",
        VCmpNgeF16 = 0x29 "v_cmp_nge_f16",
        VCmpNlgF16 = 0x2a "v_cmp_nlg_f16",
        VCmpNgtF16 = 0x2b "v_cmp_ngt_f16",
        VCmpNleF16 = 0x2c "v_cmp_nle_f16",
        VCmpNeqF16 = 0x2d "v_cmp_neq_f16",
        VCmpNltF16 = 0x2e "v_cmp_nlt_f16",
        VCmpTruF16 = 0x2f "v_cmp_tru_f16",
        VCmpxFF16 = 0x30 "v_cmpx_f_f16",
        VCmpxLtF16 = 0x31 "v_cmpx_lt_f16",
        VCmpxEqF16 = 0x32 "v_cmpx_eq_f16",
        VCmpxLeF16 = 0x33 "v_cmpx_le_f16",
        VCmpxGtF16 = 0x34 "v_cmpx_gt_f16",
        VCmpxLgF16 = 0x35 "v_cmpx_lg_f16",
        VCmpxGeF16 = 0x36 "v_cmpx_ge_f16",
        VCmpxOF16 = 0x37 "v_cmpx_o_f16",
        VCmpxUF16 = 0x38 "v_cmpx_u_f16",
        VCmpxNgeF16 = 0x39 "v_cmpx_nge_f16",
        VCmpxNlgF16 = 0x3a "v_cmpx_nlg_f16",
        VCmpxNgtF16 = 0x3b "v_cmpx_ngt_f16",
        VCmpxNleF16 = 0x3c "v_cmpx_nle_f16",
        VCmpxNeqF16 = 0x3d "v_cmpx_neq_f16",
        VCmpxNltF16 = 0x3e "v_cmpx_nlt_f16",
        VCmpxTruF16 = 0x3f "v_cmpx_tru_f16",
        VCmpFF32 = 0x40 "v_cmp_f_f32",
        VCmpLtF32 = 0x41 "v_cmp_lt_f32",
        VCmpEqF32 = 0x42 "v_cmp_eq_f32",
        VCmpLeF32 = 0x43 "v_cmp_le_f32",
        VCmpGtF32 = 0x44 "v_cmp_gt_f32",
        VCmpLgF32 = 0x45 "v_cmp_lg_f32",
        VCmpGeF32 = 0x46 "v_cmp_ge_f32",
        VCmpOF32 = 0x47 "v_cmp_o_f32",
        VCmpUF32 = 0x48 "v_cmp_u_f32",
        VCmpNgeF32 = 0x49 "v_cmp_nge_f32",
        VCmpNlgF32 = 0x4a "v_cmp_nlg_f32",
        VCmpNgtF32 = 0x4b "v_cmp_ngt_f32",
        VCmpNleF32 = 0x4c "v_cmp_nle_f32",
        VCmpNeqF32 = 0x4d "v_cmp_neq_f32",
        VCmpNltF32 = 0x4e "v_cmp_nlt_f32",
        VCmpTruF32 = 0x4f "v_cmp_tru_f32",
        VCmpxFF32 = 0x50 "v_cmpx_f_f32",
        VCmpxLtF32 = 0x51 "v_cmpx_lt_f32",
        VCmpxEqF32 = 0x52 "v_cmpx_eq_f32",
        VCmpxLeF32 = 0x53 "v_cmpx_le_f32",
        VCmpxGtF32 = 0x54 "v_cmpx_gt_f32",
        VCmpxLgF32 = 0x55 "v_cmpx_lg_f32",
        VCmpxGeF32 = 0x56 "v_cmpx_ge_f32",
        VCmpxOF32 = 0x57 "v_cmpx_o_f32",
        VCmpxUF32 = 0x58 "v_cmpx_u_f32",
        VCmpxNgeF32 = 0x59 "v_cmpx_nge_f32",
        VCmpxNlgF32 = 0x5a "v_cmpx_nlg_f32",
        VCmpxNgtF32 = 0x5b "v_cmpx_ngt_f32",
        VCmpxNleF32 = 0x5c "v_cmpx_nle_f32",
        VCmpxNeqF32 = 0x5d "v_cmpx_neq_f32",
        VCmpxNltF32 = 0x5e "v_cmpx_nlt_f32",
        VCmpxTruF32 = 0x5f "v_cmpx_tru_f32",
        VCmpFF64 = 0x60 "v_cmp_f_f64",
        VCmpLtF64 = 0x61 "v_cmp_lt_f64",
        VCmpEqF64 = 0x62 "v_cmp_eq_f64",
        VCmpLeF64 = 0x63 "v_cmp_le_f64",
        VCmpGtF64 = 0x64 "v_cmp_gt_f64",
        VCmpLgF64 = 0x65 "v_cmp_lg_f64",
        VCmpGeF64 = 0x66 "v_cmp_ge_f64",
        VCmpOF64 = 0x67 "v_cmp_o_f64",
        VCmpUF64 = 0x68 "v_cmp_u_f64",
        VCmpNgeF64 = 0x69 "v_cmp_nge_f64",
        VCmpNlgF64 = 0x6a "v_cmp_nlg_f64",
        VCmpNgtF64 = 0x6b "v_cmp_ngt_f64",
        VCmpNleF64 = 0x6c "v_cmp_nle_f64",
        VCmpNeqF64 = 0x6d "v_cmp_neq_f64",
        VCmpNltF64 = 0x6e "v_cmp_nlt_f64",
        VCmpTruF64 = 0x6f "v_cmp_tru_f64",
        VCmpxFF64 = 0x70 "v_cmpx_f_f64",
        VCmpxLtF64 = 0x71 "v_cmpx_lt_f64",
        VCmpxEqF64 = 0x72 "v_cmpx_eq_f64",
        VCmpxLeF64 = 0x73 "v_cmpx_le_f64",
        VCmpxGtF64 = 0x74 "v_cmpx_gt_f64",
        VCmpxLgF64 = 0x75 "v_cmpx_lg_f64",
        VCmpxGeF64 = 0x76 "v_cmpx_ge_f64",
        VCmpxOF64 = 0x77 "v_cmpx_o_f64",
        VCmpxUF64 = 0x78 "v_cmpx_u_f64",
        VCmpxNgeF64 = 0x79 "v_cmpx_nge_f64",
        VCmpxNlgF64 = 0x7a "v_cmpx_nlg_f64",
        VCmpxNgtF64 = 0x7b "v_cmpx_ngt_f64",
        VCmpxNleF64 = 0x7c "v_cmpx_nle_f64",
        VCmpxNeqF64 = 0x7d "v_cmpx_neq_f64",
        VCmpxNltF64 = 0x7e "v_cmpx_nlt_f64",
        VCmpxTruF64 = 0x7f "v_cmpx_tru_f64",
        VCmpFI16 = 0xa0 "v_cmp_f_i16",
        VCmpLtI16 = 0xa1 "v_cmp_lt_i16",
        VCmpEqI16 = 0xa2 "v_cmp_eq_i16",
        VCmpLeI16 = 0xa3 "v_cmp_le_i16",
        VCmpGtI16 = 0xa4 "v_cmp_gt_i16",
        VCmpNeI16 = 0xa5 "v_cmp_ne_i16",
        VCmpGeI16 = 0xa6 "v_cmp_ge_i16",
        VCmpTI16 = 0xa7 "v_cmp_t_i16",
        VCmpFU16 = 0xa8 "v_cmp_f_u16",
        VCmpLtU16 = 0xa9 "v_cmp_lt_u16",
        VCmpEqU16 = 0xaa "v_cmp_eq_u16",
        VCmpLeU16 = 0xab "v_cmp_le_u16",
        VCmpGtU16 = 0xac "v_cmp_gt_u16",
        VCmpNeU16 = 0xad "v_cmp_ne_u16",
        VCmpGeU16 = 0xae "v_cmp_ge_u16",
        VCmpTU16 = 0xaf "v_cmp_t_u16",
        VCmpxFI16 = 0xb0 "v_cmpx_f_i16",
        VCmpxLtI16 = 0xb1 "v_cmpx_lt_i16",
        VCmpxEqI16 = 0xb2 "v_cmpx_eq_i16",
        VCmpxLeI16 = 0xb3 "v_cmpx_le_i16",
        VCmpxGtI16 = 0xb4 "v_cmpx_gt_i16",
        VCmpxNeI16 = 0xb5 "v_cmpx_ne_i16",
        VCmpxGeI16 = 0xb6 "v_cmpx_ge_i16",
        VCmpxTI16 = 0xb7 "v_cmpx_t_i16",
        VCmpxFU16 = 0xb8 "v_cmpx_f_u16",
        VCmpxLtU16 = 0xb9 "v_cmpx_lt_u16",
        VCmpxEqU16 = 0xba "v_cmpx_eq_u16",
        VCmpxLeU16 = 0xbb "v_cmpx_le_u16",
        VCmpxGtU16 = 0xbc "v_cmpx_gt_u16",
        VCmpxNeU16 = 0xbd "v_cmpx_ne_u16",
        VCmpxGeU16 = 0xbe "v_cmpx_ge_u16",
        VCmpxTU16 = 0xbf "v_cmpx_t_u16",
        VCmpFI32 = 0xc0 "v_cmp_f_i32",
        VCmpLtI32 = 0xc1 "v_cmp_lt_i32",
        VCmpEqI32 = 0xc2 "v_cmp_eq_i32",
        VCmpLeI32 = 0xc3 "v_cmp_le_i32",
        VCmpGtI32 = 0xc4 "v_cmp_gt_i32",
        VCmpNeI32 = 0xc5 "v_cmp_ne_i32",
        VCmpGeI32 = 0xc6 "v_cmp_ge_i32",
        VCmpTI32 = 0xc7 "v_cmp_t_i32",
        VCmpFU32 = 0xc8 "v_cmp_f_u32",
        VCmpLtU32 = 0xc9 "v_cmp_lt_u32",
        VCmpEqU32 = 0xca "v_cmp_eq_u32",
        VCmpLeU32 = 0xcb "v_cmp_le_u32",
        VCmpGtU32 = 0xcc "v_cmp_gt_u32",
        VCmpNeU32 = 0xcd "v_cmp_ne_u32",
        VCmpGeU32 = 0xce "v_cmp_ge_u32",
        VCmpTU32 = 0xcf "v_cmp_t_u32",
        VCmpxFI32 = 0xd0 "v_cmpx_f_i32",
        VCmpxLtI32 = 0xd1 "v_cmpx_lt_i32",
        VCmpxEqI32 = 0xd2 "v_cmpx_eq_i32",
        VCmpxLeI32 = 0xd3 "v_cmpx_le_i32",
        VCmpxGtI32 = 0xd4 "v_cmpx_gt_i32",
        VCmpxNeI32 = 0xd5 "v_cmpx_ne_i32",
        VCmpxGeI32 = 0xd6 "v_cmpx_ge_i32",
        VCmpxTI32 = 0xd7 "v_cmpx_t_i32",
        VCmpxFU32 = 0xd8 "v_cmpx_f_u32",
        VCmpxLtU32 = 0xd9 "v_cmpx_lt_u32",
        VCmpxEqU32 = 0xda "v_cmpx_eq_u32",
        VCmpxLeU32 = 0xdb "v_cmpx_le_u32",
        VCmpxGtU32 = 0xdc "v_cmpx_gt_u32",
        VCmpxNeU32 = 0xdd "v_cmpx_ne_u32",
        VCmpxGeU32 = 0xde "v_cmpx_ge_u32",
        VCmpxTU32 = 0xdf "v_cmpx_t_u32",
        VCmpFI64 = 0xe0 "v_cmp_f_i64",
        VCmpLtI64 = 0xe1 "v_cmp_lt_i64",
        VCmpEqI64 = 0xe2 "v_cmp_eq_i64",
        VCmpLeI64 = 0xe3 "v_cmp_le_i64",
        VCmpGtI64 = 0xe4 "v_cmp_gt_i64",
        VCmpNeI64 = 0xe5 "v_cmp_ne_i64",
        VCmpGeI64 = 0xe6 "v_cmp_ge_i64",
        VCmpTI64 = 0xe7 "v_cmp_t_i64",
        VCmpFU64 = 0xe8 "v_cmp_f_u64",
        VCmpLtU64 = 0xe9 "v_cmp_lt_u64",
        VCmpEqU64 = 0xea "v_cmp_eq_u64",
        VCmpLeU64 = 0xeb "v_cmp_le_u64",
        VCmpGtU64 = 0xec "v_cmp_gt_u64",
        VCmpNeU64 = 0xed "v_cmp_ne_u64",
        VCmpGeU64 = 0xee "v_cmp_ge_u64",
        VCmpTU64 = 0xef "v_cmp_t_u64",
        VCmpxFI64 = 0xf0 "v_cmpx_f_i64",
        VCmpxLtI64 = 0xf1 "v_cmpx_lt_i64",
        VCmpxEqI64 = 0xf2 "v_cmpx_eq_i64",
        VCmpxLeI64 = 0xf3 "v_cmpx_le_i64",
        VCmpxGtI64 = 0xf4 "v_cmpx_gt_i64",
        VCmpxNeI64 = 0xf5 "v_cmpx_ne_i64",
        VCmpxGeI64 = 0xf6 "v_cmpx_ge_i64",
        VCmpxTI64 = 0xf7 "v_cmpx_t_i64",
        VCmpxFU64 = 0xf8 "v_cmpx_f_u64",
        VCmpxLtU64 = 0xf9 "v_cmpx_lt_u64",
        VCmpxEqU64 = 0xfa "v_cmpx_eq_u64",
        VCmpxLeU64 = 0xfb "v_cmpx_le_u64",
        VCmpxGtU64 = 0xfc "v_cmpx_gt_u64",
        VCmpxNeU64 = 0xfd "v_cmpx_ne_u64",
        VCmpxGeU64 = 0xfe "v_cmpx_ge_u64",
        VCmpxTU64 = 0xff "v_cmpx_t_u64",
    }
}

opcodes! {
    /// VOP3-only operations (10-bit VOP3 opcode, 0x1c0 and up).
    Vop3Op {
        VMadLegacyF32 = 0x1c0 "v_mad_legacy_f32", VMadF32 = 0x1c1 "v_mad_f32",
        VMadI32I24 = 0x1c2 "v_mad_i32_i24", VMadU32U24 = 0x1c3 "v_mad_u32_u24",
        VBfeU32 = 0x1c8 "v_bfe_u32", VBfeI32 = 0x1c9 "v_bfe_i32", VBfiB32 = 0x1ca "v_bfi_b32",
        VFmaF32 = 0x1cb "v_fma_f32", VFmaF64 = 0x1cc "v_fma_f64",
        VAlignbitB32 = 0x1ce "v_alignbit_b32", VAlignbyteB32 = 0x1cf "v_alignbyte_b32",
        VMin3F32 = 0x1d0 "v_min3_f32", VMin3I32 = 0x1d1 "v_min3_i32", VMin3U32 = 0x1d2 "v_min3_u32",
        VMax3F32 = 0x1d3 "v_max3_f32", VMax3I32 = 0x1d4 "v_max3_i32", VMax3U32 = 0x1d5 "v_max3_u32",
        VMed3F32 = 0x1d6 "v_med3_f32", VMed3I32 = 0x1d7 "v_med3_i32", VMed3U32 = 0x1d8 "v_med3_u32",
        VDivFixupF32 = 0x1de "v_div_fixup_f32", VDivFixupF64 = 0x1df "v_div_fixup_f64",
        VDivScaleF32 = 0x1e0 "v_div_scale_f32", VDivScaleF64 = 0x1e1 "v_div_scale_f64",
        VDivFmasF32 = 0x1e2 "v_div_fmas_f32", VDivFmasF64 = 0x1e3 "v_div_fmas_f64",
        VMadU64U32 = 0x1e8 "v_mad_u64_u32", VMadI64I32 = 0x1e9 "v_mad_i64_i32",
        VLshlAddU32 = 0x1fd "v_lshl_add_u32", VAddLshlU32 = 0x1fe "v_add_lshl_u32",
        VAdd3U32 = 0x1ff "v_add3_u32", VLshlOrB32 = 0x200 "v_lshl_or_b32",
        VAndOrB32 = 0x201 "v_and_or_b32", VOr3B32 = 0x202 "v_or3_b32",
        VAddF64 = 0x280 "v_add_f64", VMulF64 = 0x281 "v_mul_f64", VMinF64 = 0x282 "v_min_f64",
        VMaxF64 = 0x283 "v_max_f64", VLdexpF64 = 0x284 "v_ldexp_f64",
        VMulLoU32 = 0x285 "v_mul_lo_u32", VMulHiU32 = 0x286 "v_mul_hi_u32",
        VMulHiI32 = 0x287 "v_mul_hi_i32", VLdexpF32 = 0x288 "v_ldexp_f32",
        VReadlaneB32 = 0x289 "v_readlane_b32", VWritelaneB32 = 0x28a "v_writelane_b32",
        VBcntU32B32 = 0x28b "v_bcnt_u32_b32", VMbcntLoU32B32 = 0x28c "v_mbcnt_lo_u32_b32",
        VMbcntHiU32B32 = 0x28d "v_mbcnt_hi_u32_b32", VLshlrevB64 = 0x28f "v_lshlrev_b64",
        VLshrrevB64 = 0x290 "v_lshrrev_b64", VAshrrevI64 = 0x291 "v_ashrrev_i64",
        VBfmB32 = 0x293 "v_bfm_b32", VAddI32 = 0x29c "v_add_i32", VSubI32 = 0x29d "v_sub_i32",
        VCubeidF32 = 0x1c4 "v_cubeid_f32", VCubescF32 = 0x1c5 "v_cubesc_f32",
        VCubetcF32 = 0x1c6 "v_cubetc_f32", VCubemaF32 = 0x1c7 "v_cubema_f32", VLerpU8 = 0x1cd "v_lerp_u8",
        VSadU8 = 0x1d9 "v_sad_u8", VSadHiU8 = 0x1da "v_sad_hi_u8", VSadU16 = 0x1db "v_sad_u16",
        VSadU32 = 0x1dc "v_sad_u32", VCvtPkU8F32 = 0x1dd "v_cvt_pk_u8_f32",
        VPermB32 = 0x1ed "v_perm_b32", VMadU32U16 = 0x1f1 "v_mad_u32_u16",
        VMadI32I16 = 0x1f2 "v_mad_i32_i16", VXadU32 = 0x1f3 "v_xad_u32",
        VMin3F16 = 0x1f4 "v_min3_f16", VMin3I16 = 0x1f5 "v_min3_i16", VMin3U16 = 0x1f6 "v_min3_u16",
        VMax3F16 = 0x1f7 "v_max3_f16", VMax3I16 = 0x1f8 "v_max3_i16", VMax3U16 = 0x1f9 "v_max3_u16",
        VMed3F16 = 0x1fa "v_med3_f16", VMed3I16 = 0x1fb "v_med3_i16", VMed3U16 = 0x1fc "v_med3_u16",
        VMadF16 = 0x203 "v_mad_f16", VMadU16 = 0x204 "v_mad_u16", VMadI16 = 0x205 "v_mad_i16",
        VFmaF16 = 0x206 "v_fma_f16", VDivFixupF16 = 0x207 "v_div_fixup_f16",
        VTrigPreopF64 = 0x292 "v_trig_preop_f64", VCvtPknormI16F32 = 0x294 "v_cvt_pknorm_i16_f32",
        VCvtPknormU16F32 = 0x295 "v_cvt_pknorm_u16_f32", VCvtPkrtzF16F32 = 0x296 "v_cvt_pkrtz_f16_f32",
        VCvtPkU16U32 = 0x297 "v_cvt_pk_u16_u32", VCvtPkI16I32 = 0x298 "v_cvt_pk_i16_i32",
        VLshlAddU64 = 0x208 "v_lshl_add_u64", VAddI16 = 0x29e "v_add_i16", VSubI16 = 0x29f "v_sub_i16", VPackB32F16 = 0x2a0 "v_pack_b32_f16",
    }
}

impl Vop3Op {
    /// How many of the three source fields the operation reads.
    pub fn sources(self) -> usize {
        use Vop3Op::*;
        match self {
            VAddF64 | VMulF64 | VMinF64 | VMaxF64 | VLdexpF64 | VMulLoU32 | VMulHiU32
            | VMulHiI32 | VLdexpF32 | VReadlaneB32 | VWritelaneB32 | VBcntU32B32
            | VMbcntLoU32B32 | VMbcntHiU32B32 | VLshlrevB64 | VLshrrevB64 | VAshrrevI64
            | VBfmB32 | VAddI32 | VSubI32 | VTrigPreopF64 | VCvtPknormI16F32 | VCvtPknormU16F32
            | VCvtPkrtzF16F32 | VCvtPkU16U32 | VCvtPkI16I32 | VAddI16 | VSubI16 | VPackB32F16 => 2,
            _ => 3,
        }
    }

    /// Whether the operation is VOP3B: a scalar destination (carry or flags) besides VDST.
    pub fn is_vop3b(self) -> bool {
        matches!(
            self,
            Self::VDivScaleF32 | Self::VDivScaleF64 | Self::VMadU64U32 | Self::VMadI64I32
        )
    }
}

opcodes! {
    /// VOP3P: packed math (7-bit opcode); 0x40 and up are VOP3P-MAI (the matrix multiplies,
    /// named like LLVM's mnemonics, and the AGPR moves).
    #[allow(non_camel_case_types)]
    Vop3pOp {
        VPkMadI16 = 0 "v_pk_mad_i16", VPkMulLoU16 = 1 "v_pk_mul_lo_u16", VPkAddI16 = 2 "v_pk_add_i16",
        VPkSubI16 = 3 "v_pk_sub_i16", VPkLshlrevB16 = 4 "v_pk_lshlrev_b16",
        VPkLshrrevB16 = 5 "v_pk_lshrrev_b16", VPkAshrrevI16 = 6 "v_pk_ashrrev_i16",
        VPkMaxI16 = 7 "v_pk_max_i16", VPkMinI16 = 8 "v_pk_min_i16", VPkMadU16 = 9 "v_pk_mad_u16",
        VPkAddU16 = 10 "v_pk_add_u16", VPkSubU16 = 11 "v_pk_sub_u16", VPkMaxU16 = 12 "v_pk_max_u16",
        VPkMinU16 = 13 "v_pk_min_u16", VPkFmaF16 = 14 "v_pk_fma_f16", VPkAddF16 = 15 "v_pk_add_f16",
        VPkMulF16 = 16 "v_pk_mul_f16", VPkMinF16 = 17 "v_pk_min_f16", VPkMaxF16 = 18 "v_pk_max_f16",
        VFmaMixF32 = 32 "v_fma_mix_f32", VFmaMixloF16 = 33 "v_fma_mixlo_f16",
        VFmaMixhiF16 = 34 "v_fma_mixhi_f16", VDot2F32F16 = 35 "v_dot2_f32_f16",
        VDot2I32I16 = 38 "v_dot2_i32_i16", VDot2U32U16 = 39 "v_dot2_u32_u16",
        VDot4I32I8 = 40 "v_dot4_i32_i8", VDot4U32U8 = 41 "v_dot4_u32_u8",
        VDot8I32I4 = 42 "v_dot8_i32_i4", VDot8U32U4 = 43 "v_dot8_u32_u4", VPkFmaF32 = 48 "v_pk_fma_f32",
        VPkMulF32 = 49 "v_pk_mul_f32", VPkAddF32 = 50 "v_pk_add_f32", VPkMovB32 = 51 "v_pk_mov_b32",
        VAccvgprReadB32 = 0x58 "v_accvgpr_read_b32", VAccvgprWriteB32 = 0x59 "v_accvgpr_write_b32",
        VMfmaF32_32x32x1f32 = 0x40 "v_mfma_f32_32x32x1f32",
        VMfmaF32_16x16x1f32 = 0x41 "v_mfma_f32_16x16x1f32",
        VMfmaF32_4x4x1f32 = 0x42 "v_mfma_f32_4x4x1f32",
        VMfmaF32_32x32x2f32 = 0x44 "v_mfma_f32_32x32x2f32",
        VMfmaF32_16x16x4f32 = 0x45 "v_mfma_f32_16x16x4f32",
        VMfmaF32_32x32x4f16 = 0x48 "v_mfma_f32_32x32x4f16",
        VMfmaF32_16x16x4f16 = 0x49 "v_mfma_f32_16x16x4f16",
        VMfmaF32_4x4x4f16 = 0x4a "v_mfma_f32_4x4x4f16",
        VMfmaF32_32x32x8f16 = 0x4c "v_mfma_f32_32x32x8f16",
        VMfmaF32_16x16x16f16 = 0x4d "v_mfma_f32_16x16x16f16",
        VMfmaI32_32x32x4i8 = 0x50 "v_mfma_i32_32x32x4i8",
        VMfmaI32_16x16x4i8 = 0x51 "v_mfma_i32_16x16x4i8",
        VMfmaI32_4x4x4i8 = 0x52 "v_mfma_i32_4x4x4i8",
        VMfmaI32_32x32x8i8 = 0x54 "v_mfma_i32_32x32x8i8",
        VMfmaI32_16x16x16i8 = 0x55 "v_mfma_i32_16x16x16i8",
        VMfmaF32_32x32x4bf16_1k = 0x63 "v_mfma_f32_32x32x4bf16_1k",
        VMfmaF32_16x16x4bf16_1k = 0x64 "v_mfma_f32_16x16x4bf16_1k",
        VMfmaF32_4x4x4bf16_1k = 0x65 "v_mfma_f32_4x4x4bf16_1k",
        VMfmaF32_32x32x8bf16_1k = 0x66 "v_mfma_f32_32x32x8bf16_1k",
        VMfmaF32_16x16x16bf16_1k = 0x67 "v_mfma_f32_16x16x16bf16_1k",
        VMfmaF32_32x32x2bf16 = 0x68 "v_mfma_f32_32x32x2bf16",
        VMfmaF32_16x16x2bf16 = 0x69 "v_mfma_f32_16x16x2bf16",
        VMfmaF32_4x4x2bf16 = 0x6b "v_mfma_f32_4x4x2bf16",
        VMfmaF32_32x32x4bf16 = 0x6c "v_mfma_f32_32x32x4bf16",
        VMfmaF32_16x16x8bf16 = 0x6d "v_mfma_f32_16x16x8bf16",
        VMfmaF64_16x16x4f64 = 0x6e "v_mfma_f64_16x16x4f64",
        VMfmaF64_4x4x4f64 = 0x6f "v_mfma_f64_4x4x4f64",
    }
}

impl Vop3pOp {
    /// Whether the operation is a VOP3P-MAI matrix multiply (`v_mfma_*`, opcode 0x40 and up
    /// but the AGPR moves).
    pub fn is_mfma(self) -> bool {
        self.raw() >= 0x40 && !matches!(self, Self::VAccvgprReadB32 | Self::VAccvgprWriteB32)
    }

    /// How many of the three source fields the operation reads.
    pub fn sources(self) -> usize {
        use Vop3pOp::*;
        match self {
            VPkMadI16 | VPkMadU16 | VPkFmaF16 | VFmaMixF32 | VFmaMixloF16 | VFmaMixhiF16
            | VPkFmaF32 | VDot2F32F16 | VDot2I32I16 | VDot2U32U16 | VDot4I32I8 | VDot4U32U8
            | VDot8I32I4 | VDot8U32U4 => 3,
            VAccvgprReadB32 | VAccvgprWriteB32 => 1,
            _ if self.is_mfma() => 3,
            _ => 2,
        }
    }
}

opcodes! {
    /// DS: local (LDS) and global data share memory (8-bit opcode).
    DsOp {
        DsAddU32 = 0 "ds_add_u32", DsSubU32 = 1 "ds_sub_u32", DsMinI32 = 5 "ds_min_i32",
        DsMaxI32 = 6 "ds_max_i32", DsMinU32 = 7 "ds_min_u32", DsMaxU32 = 8 "ds_max_u32",
        DsAndB32 = 9 "ds_and_b32", DsOrB32 = 10 "ds_or_b32", DsXorB32 = 11 "ds_xor_b32",
        DsWriteB32 = 13 "ds_write_b32", DsWrite2B32 = 14 "ds_write2_b32",
        DsWrite2st64B32 = 15 "ds_write2st64_b32", DsNop = 20 "ds_nop", DsAddF32 = 21 "ds_add_f32",
        DsWriteB8 = 30 "ds_write_b8", DsWriteB16 = 31 "ds_write_b16",
        DsAddRtnU32 = 32 "ds_add_rtn_u32", DsWrxchgRtnB32 = 45 "ds_wrxchg_rtn_b32",
        DsReadB32 = 54 "ds_read_b32", DsRead2B32 = 55 "ds_read2_b32",
        DsRead2st64B32 = 56 "ds_read2st64_b32", DsReadI8 = 57 "ds_read_i8", DsReadU8 = 58 "ds_read_u8",
        DsReadI16 = 59 "ds_read_i16", DsReadU16 = 60 "ds_read_u16", DsSwizzleB32 = 61 "ds_swizzle_b32",
        DsPermuteB32 = 62 "ds_permute_b32", DsBpermuteB32 = 63 "ds_bpermute_b32",
        DsAddU64 = 64 "ds_add_u64", DsWriteB64 = 77 "ds_write_b64", DsWrite2B64 = 78 "ds_write2_b64",
        DsReadB64 = 118 "ds_read_b64", DsRead2B64 = 119 "ds_read2_b64",
        DsWriteB96 = 222 "ds_write_b96", DsWriteB128 = 223 "ds_write_b128",
        DsReadB96 = 254 "ds_read_b96", DsReadB128 = 255 "ds_read_b128",
        DsRsubU32 = 2 "ds_rsub_u32", DsIncU32 = 3 "ds_inc_u32", DsDecU32 = 4 "ds_dec_u32",
        DsMskorB32 = 12 "ds_mskor_b32", DsCmpstB32 = 16 "ds_cmpst_b32", DsCmpstF32 = 17 "ds_cmpst_f32",
        DsMinF32 = 18 "ds_min_f32", DsMaxF32 = 19 "ds_max_f32", DsSubRtnU32 = 33 "ds_sub_rtn_u32",
        DsRsubRtnU32 = 34 "ds_rsub_rtn_u32", DsIncRtnU32 = 35 "ds_inc_rtn_u32",
        DsDecRtnU32 = 36 "ds_dec_rtn_u32", DsMinRtnI32 = 37 "ds_min_rtn_i32",
        DsMaxRtnI32 = 38 "ds_max_rtn_i32", DsMinRtnU32 = 39 "ds_min_rtn_u32",
        DsMaxRtnU32 = 40 "ds_max_rtn_u32", DsAndRtnB32 = 41 "ds_and_rtn_b32",
        DsOrRtnB32 = 42 "ds_or_rtn_b32", DsXorRtnB32 = 43 "ds_xor_rtn_b32",
        DsMskorRtnB32 = 44 "ds_mskor_rtn_b32", DsCmpstRtnB32 = 48 "ds_cmpst_rtn_b32",
        DsAddRtnF32 = 53 "ds_add_rtn_f32",
        DsWrxchg2RtnB32 = 46 "ds_wrxchg2_rtn_b32", DsWrxchg2st64RtnB32 = 47 "ds_wrxchg2st64_rtn_b32",
        DsCmpstRtnF32 = 49 "ds_cmpst_rtn_f32", DsMinRtnF32 = 50 "ds_min_rtn_f32",
        DsMaxRtnF32 = 51 "ds_max_rtn_f32", DsWrapRtnB32 = 52 "ds_wrap_rtn_b32",
        DsSubU64 = 65 "ds_sub_u64", DsRsubU64 = 66 "ds_rsub_u64", DsIncU64 = 67 "ds_inc_u64",
        DsDecU64 = 68 "ds_dec_u64", DsMinI64 = 69 "ds_min_i64", DsMaxI64 = 70 "ds_max_i64",
        DsMinU64 = 71 "ds_min_u64", DsMaxU64 = 72 "ds_max_u64", DsAndB64 = 73 "ds_and_b64",
        DsOrB64 = 74 "ds_or_b64", DsXorB64 = 75 "ds_xor_b64", DsMskorB64 = 76 "ds_mskor_b64",
        DsWrite2st64B64 = 79 "ds_write2st64_b64", DsCmpstB64 = 80 "ds_cmpst_b64",
        DsCmpstF64 = 81 "ds_cmpst_f64", DsMinF64 = 82 "ds_min_f64", DsMaxF64 = 83 "ds_max_f64",
        DsWriteB8D16Hi = 84 "ds_write_b8_d16_hi", DsWriteB16D16Hi = 85 "ds_write_b16_d16_hi",
        DsReadU8D16 = 86 "ds_read_u8_d16", DsReadU8D16Hi = 87 "ds_read_u8_d16_hi",
        DsReadI8D16 = 88 "ds_read_i8_d16", DsReadI8D16Hi = 89 "ds_read_i8_d16_hi",
        DsReadU16D16 = 90 "ds_read_u16_d16", DsReadU16D16Hi = 91 "ds_read_u16_d16_hi",
        DsAddF64 = 92 "ds_add_f64", DsAddRtnU64 = 96 "ds_add_rtn_u64", DsSubRtnU64 = 97 "ds_sub_rtn_u64",
        DsRsubRtnU64 = 98 "ds_rsub_rtn_u64", DsIncRtnU64 = 99 "ds_inc_rtn_u64",
        DsDecRtnU64 = 100 "ds_dec_rtn_u64", DsMinRtnI64 = 101 "ds_min_rtn_i64",
        DsMaxRtnI64 = 102 "ds_max_rtn_i64", DsMinRtnU64 = 103 "ds_min_rtn_u64",
        DsMaxRtnU64 = 104 "ds_max_rtn_u64", DsAndRtnB64 = 105 "ds_and_rtn_b64",
        DsOrRtnB64 = 106 "ds_or_rtn_b64", DsXorRtnB64 = 107 "ds_xor_rtn_b64",
        DsMskorRtnB64 = 108 "ds_mskor_rtn_b64", DsWrxchgRtnB64 = 109 "ds_wrxchg_rtn_b64",
        DsWrxchg2RtnB64 = 110 "ds_wrxchg2_rtn_b64", DsWrxchg2st64RtnB64 = 111 "ds_wrxchg2st64_rtn_b64",
        DsCmpstRtnB64 = 112 "ds_cmpst_rtn_b64", DsCmpstRtnF64 = 113 "ds_cmpst_rtn_f64",
        DsMinRtnF64 = 114 "ds_min_rtn_f64", DsMaxRtnF64 = 115 "ds_max_rtn_f64",
        DsRead2st64B64 = 120 "ds_read2st64_b64", DsAddRtnF64 = 124 "ds_add_rtn_f64",
        DsWriteAddtidB32 = 29 "ds_write_addtid_b32", DsReadAddtidB32 = 182 "ds_read_addtid_b32",
        DsGwsSemaReleaseAll = 152 "ds_gws_sema_release_all", DsGwsInit = 153 "ds_gws_init",
        DsGwsSemaV = 154 "ds_gws_sema_v", DsGwsSemaBr = 155 "ds_gws_sema_br",
        DsGwsSemaP = 156 "ds_gws_sema_p", DsGwsBarrier = 157 "ds_gws_barrier",
    }
}

impl DsOp {
    /// The global wave sync operation this opcode is (152–157, "GDS only"), if it is one.
    pub fn gws(self) -> Option<crate::gws::GwsOp> {
        use crate::gws::GwsOp;
        Some(match self {
            Self::DsGwsSemaReleaseAll => GwsOp::SemaReleaseAll,
            Self::DsGwsInit => GwsOp::Init,
            Self::DsGwsSemaV => GwsOp::SemaV,
            Self::DsGwsSemaBr => GwsOp::SemaBr,
            Self::DsGwsSemaP => GwsOp::SemaP,
            Self::DsGwsBarrier => GwsOp::Barrier,
            _ => return None,
        })
    }
}

opcodes! {
    /// FLAT, GLOBAL and SCRATCH: one opcode table, the segment field picks the address space
    /// (7-bit opcode). Mnemonics here omit the `flat_`/`global_`/`scratch_` prefix.
    FlatOp {
        LoadUbyte = 16 "load_ubyte", LoadSbyte = 17 "load_sbyte", LoadUshort = 18 "load_ushort",
        LoadSshort = 19 "load_sshort", LoadDword = 20 "load_dword", LoadDwordx2 = 21 "load_dwordx2",
        LoadDwordx3 = 22 "load_dwordx3", LoadDwordx4 = 23 "load_dwordx4",
        StoreByte = 24 "store_byte", StoreByteD16Hi = 25 "store_byte_d16_hi",
        StoreShort = 26 "store_short", StoreShortD16Hi = 27 "store_short_d16_hi",
        StoreDword = 28 "store_dword", StoreDwordx2 = 29 "store_dwordx2",
        StoreDwordx3 = 30 "store_dwordx3", StoreDwordx4 = 31 "store_dwordx4",
        AtomicSwap = 64 "atomic_swap", AtomicCmpswap = 65 "atomic_cmpswap", AtomicAdd = 66 "atomic_add",
        AtomicSub = 67 "atomic_sub", AtomicSmin = 68 "atomic_smin", AtomicUmin = 69 "atomic_umin",
        AtomicSmax = 70 "atomic_smax", AtomicUmax = 71 "atomic_umax", AtomicAnd = 72 "atomic_and",
        AtomicOr = 73 "atomic_or", AtomicXor = 74 "atomic_xor", AtomicInc = 75 "atomic_inc",
        AtomicDec = 76 "atomic_dec", AtomicAddF32 = 77 "atomic_add_f32",
        AtomicPkAddF16 = 78 "atomic_pk_add_f16", AtomicAddF64 = 79 "atomic_add_f64",
        AtomicMinF64 = 80 "atomic_min_f64", AtomicMaxF64 = 81 "atomic_max_f64",
        AtomicSwapX2 = 96 "atomic_swap_x2", AtomicCmpswapX2 = 97 "atomic_cmpswap_x2",
        AtomicAddX2 = 98 "atomic_add_x2", AtomicSubX2 = 99 "atomic_sub_x2",
        AtomicSminX2 = 100 "atomic_smin_x2", AtomicUminX2 = 101 "atomic_umin_x2",
        AtomicSmaxX2 = 102 "atomic_smax_x2", AtomicUmaxX2 = 103 "atomic_umax_x2",
        AtomicAndX2 = 104 "atomic_and_x2", AtomicOrX2 = 105 "atomic_or_x2",
        AtomicXorX2 = 106 "atomic_xor_x2", AtomicIncX2 = 107 "atomic_inc_x2",
        AtomicDecX2 = 108 "atomic_dec_x2",
        LoadUbyteD16 = 32 "load_ubyte_d16", LoadUbyteD16Hi = 33 "load_ubyte_d16_hi",
        LoadSbyteD16 = 34 "load_sbyte_d16", LoadSbyteD16Hi = 35 "load_sbyte_d16_hi",
        LoadShortD16 = 36 "load_short_d16", LoadShortD16Hi = 37 "load_short_d16_hi",
        LoadLdsUbyte = 38 "load_lds_ubyte", LoadLdsSbyte = 39 "load_lds_sbyte",
        LoadLdsUshort = 40 "load_lds_ushort", LoadLdsSshort = 41 "load_lds_sshort",
        LoadLdsDword = 42 "load_lds_dword",
    }
}

opcodes! {
    /// MUBUF: untyped buffer memory (7-bit opcode).
    MubufOp {
        BufferLoadFormatX = 0 "buffer_load_format_x", BufferStoreFormatX = 4 "buffer_store_format_x",
        BufferLoadUbyte = 16 "buffer_load_ubyte", BufferLoadSbyte = 17 "buffer_load_sbyte",
        BufferLoadUshort = 18 "buffer_load_ushort", BufferLoadSshort = 19 "buffer_load_sshort",
        BufferLoadDword = 20 "buffer_load_dword", BufferLoadDwordx2 = 21 "buffer_load_dwordx2",
        BufferLoadDwordx3 = 22 "buffer_load_dwordx3", BufferLoadDwordx4 = 23 "buffer_load_dwordx4",
        BufferStoreByte = 24 "buffer_store_byte", BufferStoreShort = 26 "buffer_store_short",
        BufferStoreDword = 28 "buffer_store_dword", BufferStoreDwordx2 = 29 "buffer_store_dwordx2",
        BufferStoreDwordx3 = 30 "buffer_store_dwordx3", BufferStoreDwordx4 = 31 "buffer_store_dwordx4",
        BufferWbinvl1 = 62 "buffer_wbinvl1", BufferWbinvl1Vol = 63 "buffer_wbinvl1_vol",
        BufferAtomicSwap = 64 "buffer_atomic_swap", BufferAtomicCmpswap = 65 "buffer_atomic_cmpswap",
        BufferAtomicAdd = 66 "buffer_atomic_add",
        BufferLoadFormatXy = 1 "buffer_load_format_xy", BufferLoadFormatXyz = 2 "buffer_load_format_xyz",
        BufferLoadFormatXyzw = 3 "buffer_load_format_xyzw", BufferStoreFormatXy = 5 "buffer_store_format_xy",
        BufferStoreFormatXyz = 6 "buffer_store_format_xyz", BufferStoreFormatXyzw = 7 "buffer_store_format_xyzw",
        BufferStoreByteD16Hi = 25 "buffer_store_byte_d16_hi", BufferStoreShortD16Hi = 27 "buffer_store_short_d16_hi",
        BufferLoadUbyteD16 = 32 "buffer_load_ubyte_d16", BufferLoadUbyteD16Hi = 33 "buffer_load_ubyte_d16_hi",
        BufferLoadSbyteD16 = 34 "buffer_load_sbyte_d16", BufferLoadSbyteD16Hi = 35 "buffer_load_sbyte_d16_hi",
        BufferLoadShortD16 = 36 "buffer_load_short_d16", BufferLoadShortD16Hi = 37 "buffer_load_short_d16_hi",
        BufferWbl2 = 40 "buffer_wbl2", BufferInvl2 = 41 "buffer_invl2",
        BufferAtomicSub = 67 "buffer_atomic_sub", BufferAtomicSmin = 68 "buffer_atomic_smin",
        BufferAtomicUmin = 69 "buffer_atomic_umin", BufferAtomicSmax = 70 "buffer_atomic_smax",
        BufferAtomicUmax = 71 "buffer_atomic_umax", BufferAtomicAnd = 72 "buffer_atomic_and",
        BufferAtomicOr = 73 "buffer_atomic_or", BufferAtomicXor = 74 "buffer_atomic_xor",
        BufferAtomicInc = 75 "buffer_atomic_inc", BufferAtomicDec = 76 "buffer_atomic_dec",
        BufferAtomicAddF32 = 77 "buffer_atomic_add_f32", BufferAtomicPkAddF16 = 78 "buffer_atomic_pk_add_f16",
        BufferAtomicAddF64 = 79 "buffer_atomic_add_f64", BufferAtomicMinF64 = 80 "buffer_atomic_min_f64",
        BufferAtomicMaxF64 = 81 "buffer_atomic_max_f64", BufferAtomicSwapX2 = 96 "buffer_atomic_swap_x2",
        BufferAtomicCmpswapX2 = 97 "buffer_atomic_cmpswap_x2", BufferAtomicAddX2 = 98 "buffer_atomic_add_x2",
        BufferAtomicSubX2 = 99 "buffer_atomic_sub_x2", BufferAtomicSminX2 = 100 "buffer_atomic_smin_x2",
        BufferAtomicUminX2 = 101 "buffer_atomic_umin_x2", BufferAtomicSmaxX2 = 102 "buffer_atomic_smax_x2",
        BufferAtomicUmaxX2 = 103 "buffer_atomic_umax_x2", BufferAtomicAndX2 = 104 "buffer_atomic_and_x2",
        BufferAtomicOrX2 = 105 "buffer_atomic_or_x2", BufferAtomicXorX2 = 106 "buffer_atomic_xor_x2",
        BufferAtomicIncX2 = 107 "buffer_atomic_inc_x2", BufferAtomicDecX2 = 108 "buffer_atomic_dec_x2",
        BufferLoadFormatD16X = 8 "buffer_load_format_d16_x", BufferLoadFormatD16Xy = 9 "buffer_load_format_d16_xy",
        BufferLoadFormatD16Xyz = 10 "buffer_load_format_d16_xyz", BufferLoadFormatD16Xyzw = 11 "buffer_load_format_d16_xyzw",
        BufferStoreFormatD16X = 12 "buffer_store_format_d16_x", BufferStoreFormatD16Xy = 13 "buffer_store_format_d16_xy",
        BufferStoreFormatD16Xyz = 14 "buffer_store_format_d16_xyz", BufferStoreFormatD16Xyzw = 15 "buffer_store_format_d16_xyzw",
        BufferLoadFormatD16HiX = 38 "buffer_load_format_d16_hi_x", BufferStoreFormatD16HiX = 39 "buffer_store_format_d16_hi_x",
    }
}

opcodes! {
    /// MTBUF: typed buffer memory, the data and number formats in the instruction (4-bit
    /// opcode; the "AMD Instinct MI200 ISA" guide's MTBUF opcode table).
    MtbufOp {
        TbufferLoadFormatX = 0 "tbuffer_load_format_x", TbufferLoadFormatXy = 1 "tbuffer_load_format_xy",
        TbufferLoadFormatXyz = 2 "tbuffer_load_format_xyz", TbufferLoadFormatXyzw = 3 "tbuffer_load_format_xyzw",
        TbufferStoreFormatX = 4 "tbuffer_store_format_x", TbufferStoreFormatXy = 5 "tbuffer_store_format_xy",
        TbufferStoreFormatXyz = 6 "tbuffer_store_format_xyz", TbufferStoreFormatXyzw = 7 "tbuffer_store_format_xyzw",
        TbufferLoadFormatD16X = 8 "tbuffer_load_format_d16_x", TbufferLoadFormatD16Xy = 9 "tbuffer_load_format_d16_xy",
        TbufferLoadFormatD16Xyz = 10 "tbuffer_load_format_d16_xyz", TbufferLoadFormatD16Xyzw = 11 "tbuffer_load_format_d16_xyzw",
        TbufferStoreFormatD16X = 12 "tbuffer_store_format_d16_x", TbufferStoreFormatD16Xy = 13 "tbuffer_store_format_d16_xy",
        TbufferStoreFormatD16Xyz = 14 "tbuffer_store_format_d16_xyz", TbufferStoreFormatD16Xyzw = 15 "tbuffer_store_format_d16_xyzw",
    }
}

/// The microcode format an instruction was encoded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// SOP2 (32 bits, + literal).
    Sop2,
    /// SOPK (32 bits; `s_setreg_imm32_b32` + a 32-bit immediate).
    Sopk,
    /// SOP1 (32 bits, + literal).
    Sop1,
    /// SOPC (32 bits, + literal).
    Sopc,
    /// SOPP (32 bits).
    Sopp,
    /// SMEM (64 bits).
    Smem,
    /// VOP2 (32 bits, + literal).
    Vop2,
    /// VOP1 (32 bits, + literal).
    Vop1,
    /// VOPC (32 bits, + literal).
    Vopc,
    /// VOP3A (64 bits): three sources, abs/neg/omod/clamp/op_sel modifiers.
    Vop3a,
    /// VOP3B (64 bits): a scalar destination (carry, flags) instead of abs/op_sel.
    Vop3b,
    /// VOP3P (64 bits): packed math.
    Vop3p,
    /// VOP1, VOP2 or VOPC with DPP controls (SRC0 = 250; 64 bits): a cross-lane source
    /// permutation ([`Inst::dpp`](crate::Inst::dpp)).
    Dpp,
    /// VOP1, VOP2 or VOPC with SDWA controls (SRC0 = 249; 64 bits): sub-dword operand and
    /// result selects ([`Inst::sdwa`](crate::Inst::sdwa)).
    Sdwa,
    /// DS (64 bits).
    Ds,
    /// FLAT, GLOBAL or SCRATCH (64 bits).
    Flat,
    /// MUBUF (64 bits).
    Mubuf,
    /// MTBUF (64 bits): a typed buffer access, DFMT/NFMT in [`Inst::imm`](crate::Inst::imm).
    Mtbuf,
    /// gfx11 VOPD (64 bits, + literal): two VALU operations issued together
    /// ([`Gfx11Op::Vopd`](crate::gfx11::Gfx11Op::Vopd)).
    Vopd,
}

/// Which address space a FLAT-encoded instruction uses (its SEG field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Segment {
    /// SEG 0: `flat_*`, the address picks the aperture.
    Flat,
    /// SEG 1: `scratch_*`, private memory.
    Scratch,
    /// SEG 2: `global_*`, global memory.
    Global,
}

/// A decoded operation: the encoding family's opcode.
///
/// VOP1, VOP2 and VOPC operations keep their own opcode when encoded as VOP3 (the
/// [`Encoding`] says which form was used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A SOP2 operation.
    Sop2(Sop2Op),
    /// A SOPK operation.
    Sopk(SopkOp),
    /// A SOP1 operation.
    Sop1(Sop1Op),
    /// A SOPC operation.
    Sopc(SopcOp),
    /// A SOPP operation.
    Sopp(SoppOp),
    /// An SMEM operation.
    Smem(SmemOp),
    /// A VOP2 operation (VOP2 or VOP3 encoding).
    Vop2(Vop2Op),
    /// A VOP1 operation (VOP1 or VOP3 encoding).
    Vop1(Vop1Op),
    /// A VOPC operation (VOPC or VOP3 encoding).
    Vopc(VopcOp),
    /// A VOP3-only operation.
    Vop3(Vop3Op),
    /// A VOP3P operation.
    Vop3p(Vop3pOp),
    /// A DS operation.
    Ds(DsOp),
    /// A FLAT-encoded operation in the given segment.
    Flat(Segment, FlatOp),
    /// A MUBUF operation.
    Mubuf(MubufOp),
    /// An MTBUF operation.
    Mtbuf(MtbufOp),
    /// A gfx11-only operation ([`crate::gfx11`]).
    Gfx11(Gfx11Op),
}

impl fmt::Display for Opcode {
    /// The LLVM mnemonic, without the `_e32`/`_e64` form suffix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            Self::Sop2(op) => op.mnemonic(),
            Self::Sopk(op) => op.mnemonic(),
            Self::Sop1(op) => op.mnemonic(),
            Self::Sopc(op) => op.mnemonic(),
            Self::Sopp(op) => op.mnemonic(),
            Self::Smem(op) => op.mnemonic(),
            Self::Vop2(op) => op.mnemonic(),
            Self::Vop1(op) => op.mnemonic(),
            Self::Vopc(op) => op.mnemonic(),
            Self::Vop3(op) => op.mnemonic(),
            Self::Vop3p(op) => op.mnemonic(),
            Self::Ds(op) => op.mnemonic(),
            Self::Mubuf(op) => op.mnemonic(),
            Self::Mtbuf(op) => op.mnemonic(),
            Self::Gfx11(op) => op.mnemonic(),
            Self::Flat(seg, op) => {
                let prefix = match seg {
                    Segment::Flat => "flat_",
                    Segment::Scratch => "scratch_",
                    Segment::Global => "global_",
                };
                return write!(f, "{prefix}{}", op.mnemonic());
            }
        };
        f.write_str(name)
    }
}

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
