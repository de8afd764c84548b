//! The kernel's first-level trap handler, as its effect on a wave that executed `s_trap`, the
//! SPI's answers to gfx11's `s_sendmsg_rtn`, and which `s_sendmsg` a message id is on each
//! target ([`message`]).
//!
//! With CWSR on (`cwsr_enable`, the default), every KFD queue's trap handler base (TBA, in
//! the MQD) is the kernel's CWSR trap handler, copied into the process's CWSR area
//! (`kfd_process_init_cwsr_dgpu`: at `SVM_CWSR_BASE`, `kfd_flat_memory.c`), and its TMA is
//! `KFD_CWSR_TMA_OFFSET` into that area, where `kfd_process_set_trap_handler` writes the
//! second-level TBA and TMA SET_TRAP_HANDLER gives (`tma[0]`, `tma[1]`) and
//! `kfd_process_set_trap_debug_flag` the process's `debug_trap_enabled` (`tma[2]`). The
//! handler is `cwsr_trap_handler_gfx9.asm` on GC 9 and `cwsr_trap_handler_gfx10.asm` on GC
//! 10 and 11 (built for gfx11 with `ASIC_FAMILY=CHIP_PLUM_BONITO`: `HAVE_SENDMSG_RTN`,
//! `SW_SA_TRAP`, no `HAVE_XNACK`). Its non-context-save path is what an `s_trap` takes, and
//! is modelled here as what it leaves in the wave ([`enter`]); the context save path (the
//! `SAVECTX` exception) is the queue's preemption, modelled by the dispatcher's pause.
//!
//! What the hardware's trap entry did before (kfd-gfx9's `s_trap`): TTMP0 = PC[31:0], TTMP1 =
//! {HT (24), trap id (23:16), PC[47:32]} with PC the `s_trap`, STATUS.PRIV set (the same
//! layout on gfx9 and gfx11: the handlers' `S_SAVE_PC_HI_TRAP_ID_MASK` 0xff0000 and
//! `S_SAVE_PC_HI_HT_MASK` 0x1000000).
//!
//! - **gfx9** (`L_SKIP_RESTORE` → `L_FETCH_2ND_TRAP`): TTMP12 = STATUS without SPI_PRIO;
//!   IB_STS's RCNT and FIRST_REPLAY saved into TTMP11[31:26] and cleared
//!   (`TTMP11_SAVE_RCNT_FIRST_REPLAY_SHIFT`); TTMP11[23] = the debug trap flag
//!   (`TTMP11_DEBUG_TRAP_ENABLED_SHIFT`); TTMP2/3 = the second-level TBA, TTMP14/15 its
//!   TMA; with a second-level TBA the wave jumps there. Without one (`L_NO_NEXT_TRAP`) the
//!   `s_trap` is stepped over: PC + 4, IB_STS and STATUS restored, `s_rfe_b64`.
//! - **gfx11** (`L_SKIP_RESTORE` → `L_NOT_HALTED` → `L_FETCH_2ND_TRAP`): TTMP12 = STATUS
//!   without SPI_PRIO and ECC_ERR (`S_STATUS_ALWAYS_CLEAR_MASK`); TTMP15 = TRAPSTS
//!   (`s_save_trapsts`); the `SW_SA_TRAP` checks of TTMP1[30] (`s_barrier`) and TTMP1[31]
//!   (wait for a context save) find both clear (an `s_trap` sets neither); the wave is not
//!   halted (a halted wave executes nothing), so every check on the way (`PERF_SNAPSHOT`,
//!   the non-maskable and maskable exceptions, the trap id, `MODE.DEBUG_EN`, `SAVECTX`)
//!   ends at `L_FETCH_2ND_TRAP`, which on gfx11 does not touch IB_STS (no `HAVE_XNACK`): the
//!   first-level TMA from `s_sendmsg_rtn_b64 MSG_RTN_GET_TMA` (<< 8, sign-extended from bit
//!   47), TTMP11[23] = the debug trap flag, TTMP2/3 = the second-level TBA, TTMP14/15 its
//!   TMA, and the jump. Without a second-level TBA (`L_NO_NEXT_TRAP`): a trap id names an
//!   `s_trap`, stepped over (PC + 4); a host trap (HT) returns to its PC; anything else
//!   halts the wave (STATUS.HALT) with its PC rewound by 8; then TTMP1 &= 0xffff, STATUS
//!   restored, `s_rfe_b64`.
//!
//! The SPI's `s_sendmsg_rtn` answers ([`message_rtn`]; RDNA3 ISA guide, `S_SENDMSG_RTN_B32`,
//! message ids from LLVM's `SIDefines.h`): `MSG_RTN_GET_DOORBELL` the wave's queue doorbell
//! id (bits 9:0: kfdtest's and ROCr's handlers mask it so), `MSG_RTN_GET_TBA` and
//! `MSG_RTN_GET_TMA` the first-level TBA and TMA registers (the address >> 8) of a discrete
//! GPU's process (`SVM_CWSR_BASE`, `+ KFD_CWSR_TMA_OFFSET`; an APU's CWSR area is wherever its
//! process mapped it, which the model does not place: no answer). `MSG_RTN_GET_DDID` (the
//! draw/dispatch id) and `MSG_RTN_SAVE_WAVE` (the context save's go) are not modelled.
//! `MSG_RTN_GET_REALTIME` is the wave's own clock (kfd-gfx9 answers it). The model keeps no
//! memory at the CWSR area's GPU address: a handler that reads the first-level TMA itself
//! faults where the hardware's would not (the kernel's handler, which does, is this module).

use kfd_gfx9::exec::{Target, Wave, hwreg};

/// What the first-level handler reads from its TMA when a wave traps: the second-level TBA
/// and TMA SET_TRAP_HANDLER gave (`tma[0]`, `tma[1]`, 0 when none) and the process's
/// `debug_trap_enabled` (`tma[2]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tma {
    pub tba: u64,
    pub tma: u64,
    pub debug_trap_enabled: bool,
}

/// `SQ_WAVE_STATUS` fields: SCC (0), SPI_PRIO (2:1), PRIV (5), HALT (13), ECC_ERR (17).
const STATUS_SCC: u32 = 1;
const STATUS_SPI_PRIO: u32 = 0x6;
const STATUS_PRIV: u32 = 1 << 5;
const STATUS_HALT: u32 = 1 << 13;
const STATUS_ECC_ERR: u32 = 1 << 17;
/// `SQ_WAVE_IB_STS.FIRST_REPLAY` (15) and `.RCNT` (20:16), saved in TTMP11 bits 31:26 on gfx9
/// (`TTMP11_SAVE_RCNT_FIRST_REPLAY_SHIFT` 26).
const IB_STS_RCNT_FIRST_REPLAY: u32 = 0x001f_8000;
const TTMP11_SAVE_SHIFT: u32 = 26;
/// `TTMP11_DEBUG_TRAP_ENABLED_MASK` (bit 23), both handlers.
const TTMP11_DEBUG_TRAP_ENABLED: u32 = 1 << 23;
/// TTMP1's `S_SAVE_PC_HI_TRAP_ID_MASK` and `S_SAVE_PC_HI_HT_MASK`.
const TTMP1_TRAP_ID: u32 = 0x00ff_0000;
const TTMP1_HT: u32 = 0x0100_0000;

/// What an `s_sendmsg` asks for, as far as the model acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Message {
    /// `MSG_INTERRUPT` (1): the SQ's interrupt with M0[23:0].
    Interrupt,
    /// gfx9's `MSG_GET_DOORBELL` (10): the SPI writes the doorbell id into EXEC_LO.
    GetDoorbell,
    /// Anything else (nothing the model has receives it).
    Other,
}

/// The message of `s_sendmsg simm16` on `target`: the id is SIMM16[3:0] on gfx9 and
/// SIMM16[7:0] on gfx11 (LLVM `SIDefines.h`, `ID_MASK_PreGFX11_` / `ID_MASK_GFX11Plus_`),
/// and `MSG_GET_DOORBELL` is gfx9's and gfx10's only (gfx11 asks with `s_sendmsg_rtn`; LLVM
/// refuses `sendmsg(MSG_GET_DOORBELL)` for gfx1100).
pub(super) fn message(target: Target, simm16: u16) -> Message {
    let gfx11 = target == Target::Gfx11;
    let id = simm16 & if gfx11 { 0xff } else { 0xf };
    match id {
        1 => Message::Interrupt,
        10 if !gfx11 => Message::GetDoorbell,
        _ => Message::Other,
    }
}

/// `s_sendmsg_rtn` message ids (LLVM `SIDefines.h`: `ID_RTN_GET_DOORBELL`...).
pub(super) const MSG_RTN_GET_DOORBELL: u16 = 128;
pub(super) const MSG_RTN_GET_TMA: u16 = 130;
pub(super) const MSG_RTN_GET_TBA: u16 = 133;
/// `SVM_CWSR_BASE` (`SVM_USER_BASE` - `KFD_CWSR_TBA_TMA_SIZE`, with `SVM_USER_BASE` =
/// `KFD_CWSR_TBA_TMA_SIZE` + 2 pages: 4 pages) and `KFD_CWSR_TMA_OFFSET` (a page + 2048,
/// `kfd_priv.h`): where a discrete GPU's first-level TBA and TMA are.
const SVM_CWSR_BASE: u64 = 0x2000;
const KFD_CWSR_TMA_OFFSET: u64 = 0x1000 + 2048;

/// Runs the first-level handler's non-context-save path on `w`, which is at the trap entry
/// (module docs), with what its TMA holds: the wave is left where the handler sends it (the
/// second-level handler, or back past the `s_trap`, or halted).
pub(super) fn enter(w: &mut Wave, tma: Tma) {
    if w.target == Target::Gfx11 {
        enter_gfx11(w, tma);
    } else {
        enter_gfx9(w, tma);
    }
}

/// `cwsr_trap_handler_gfx9.asm` (module docs).
fn enter_gfx9(w: &mut Wave, tma: Tma) {
    let status = w.read_hwreg(hwreg::STATUS) & !STATUS_SPI_PRIO;
    w.ttmp[12] = status;
    let ib = w.hwreg[hwreg::IB_STS];
    let saved = (ib & IB_STS_RCNT_FIRST_REPLAY) >> 15;
    w.ttmp[11] = (w.ttmp[11] & !(0x3f << TTMP11_SAVE_SHIFT)) | saved << TTMP11_SAVE_SHIFT;
    w.hwreg[hwreg::IB_STS] = ib & !IB_STS_RCNT_FIRST_REPLAY;
    if fetch_second_level(w, tma) {
        return;
    }
    let pc = (u64::from(w.ttmp[1] & 0xffff) << 32 | u64::from(w.ttmp[0])) + 4;
    w.hwreg[hwreg::IB_STS] = ib;
    exit(w, status, pc);
}

/// `cwsr_trap_handler_gfx10.asm` for gfx11 (module docs).
fn enter_gfx11(w: &mut Wave, tma: Tma) {
    let mut status = w.read_hwreg(hwreg::STATUS) & !(STATUS_SPI_PRIO | STATUS_ECC_ERR);
    w.ttmp[12] = status;
    w.ttmp[15] = w.read_hwreg(hwreg::TRAPSTS);
    if fetch_second_level(w, tma) {
        return;
    }
    let at = u64::from(w.ttmp[1] & 0xffff) << 32 | u64::from(w.ttmp[0]);
    let pc = if w.ttmp[1] & TTMP1_TRAP_ID != 0 {
        at + 4
    } else if w.ttmp[1] & TTMP1_HT != 0 {
        at
    } else {
        // "If not caused by trap then halt wave to prevent re-entry", and "if the PC points
        // to S_ENDPGM then context save will fail if STATUS.HALT is set": rewound by 8.
        status |= STATUS_HALT;
        at.wrapping_sub(8) & 0xffff_ffff_ffff
    };
    exit(w, status, pc);
}

/// `L_FETCH_2ND_TRAP`: TTMP11[23] from the TMA's debug flag, TTMP2/3 and TTMP14/15 the
/// second-level TBA and TMA; whether the wave jumped to that TBA (`s_setpc_b64`).
fn fetch_second_level(w: &mut Wave, tma: Tma) -> bool {
    w.ttmp[11] = (w.ttmp[11] & !TTMP11_DEBUG_TRAP_ENABLED)
        | if tma.debug_trap_enabled {
            TTMP11_DEBUG_TRAP_ENABLED
        } else {
            0
        };
    w.ttmp[2] = tma.tba as u32;
    w.ttmp[3] = (tma.tba >> 32) as u32;
    w.ttmp[14] = tma.tma as u32;
    w.ttmp[15] = (tma.tma >> 32) as u32;
    if tma.tba == 0 {
        return false;
    }
    w.pc = tma.tba;
    true
}

/// `L_EXIT_TRAP`: `s_setreg_b32 hwreg(HW_REG_STATUS), s_save_status` (SCC with it) and
/// `s_rfe_b64` to `pc` (which clears STATUS.PRIV).
fn exit(w: &mut Wave, status: u32, pc: u64) {
    w.ttmp[0] = pc as u32;
    w.ttmp[1] = (pc >> 32) as u32 & 0xffff;
    w.hwreg[hwreg::STATUS] = status & !STATUS_PRIV;
    w.scc = status & STATUS_SCC != 0;
    w.pc = pc;
}

/// The SPI's answer to `s_sendmsg_rtn` of `msg` from a wave of the queue whose doorbell id is
/// `doorbell`, on a GPU that is an APU or not (module docs); `None` for what is not modelled.
pub(super) fn message_rtn(msg: u16, doorbell: u32, apu: bool) -> Option<u64> {
    match msg {
        MSG_RTN_GET_DOORBELL => Some(u64::from(doorbell & 0x3ff)),
        MSG_RTN_GET_TBA if !apu => Some(SVM_CWSR_BASE >> 8),
        MSG_RTN_GET_TMA if !apu => Some((SVM_CWSR_BASE + KFD_CWSR_TMA_OFFSET) >> 8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// STATUS.VCCZ (10), which reads live: set while VCC is 0, as in these waves.
    const VCCZ: u32 = 1 << 10;

    /// A gfx11 wave at the trap entry of `s_trap id` at `pc` (STATUS.PRIV set, as the
    /// hardware leaves it), with SCC and SPI_PRIO and ECC_ERR set in STATUS.
    fn trapped(id: u32, pc: u64) -> Wave {
        let mut w = Wave::new(Target::Gfx11, pc);
        w.ttmp[0] = pc as u32;
        w.ttmp[1] = (pc >> 32) as u32 | id << 16;
        w.hwreg[hwreg::STATUS] = STATUS_PRIV | STATUS_SPI_PRIO | STATUS_ECC_ERR;
        w.hwreg[hwreg::TRAPSTS] = 0x80;
        w.scc = true;
        w
    }

    #[test]
    fn gfx11_jumps_to_the_second_level_with_status_trapsts_and_the_debug_flag() {
        let mut w = trapped(1, 0x7f00_1234_5000);
        w.ttmp[11] = 0x7f;
        let tma = Tma {
            tba: 0x7f00_dead_b000,
            tma: 0x7f00_beef_c000,
            debug_trap_enabled: true,
        };
        enter(&mut w, tma);
        assert_eq!(w.pc, tma.tba);
        assert_eq!(
            w.ttmp[12],
            STATUS_PRIV | STATUS_SCC | VCCZ,
            "SPI_PRIO, ECC_ERR dropped"
        );
        assert_eq!([w.ttmp[2], w.ttmp[3]], [0xdead_b000, 0x7f00]);
        // TTMP15 held TRAPSTS until the TMA's second dword replaced it.
        assert_eq!([w.ttmp[14], w.ttmp[15]], [0xbeef_c000, 0x7f00]);
        assert_eq!(w.ttmp[11], 0x7f | TTMP11_DEBUG_TRAP_ENABLED);
        assert_eq!(
            [w.ttmp[0], w.ttmp[1]],
            [0x1234_5000, 0x7f00 | 1 << 16],
            "kept"
        );
        assert!(
            w.read_hwreg(hwreg::STATUS) & STATUS_PRIV != 0,
            "still in the handler"
        );
    }

    #[test]
    fn gfx11_without_a_second_level_steps_over_returns_or_halts() {
        // A trap id: past the s_trap, TTMP1 down to PC[47:32], PRIV cleared, SCC kept.
        let mut w = trapped(2, 0x7f00_1234_5000);
        w.ttmp[11] = TTMP11_DEBUG_TRAP_ENABLED;
        enter(&mut w, Tma::default());
        assert_eq!(w.pc, 0x7f00_1234_5004);
        assert_eq!([w.ttmp[0], w.ttmp[1]], [0x1234_5004, 0x7f00]);
        assert_eq!(w.ttmp[11], 0, "the debug flag cleared");
        assert_eq!(
            w.read_hwreg(hwreg::STATUS),
            STATUS_SCC | VCCZ,
            "PRIV cleared"
        );
        assert!(w.scc && !w.halted());
        // A host trap: back to its PC.
        let mut w = trapped(0, 0x7f00_1234_5000);
        w.ttmp[1] |= TTMP1_HT;
        enter(&mut w, Tma::default());
        assert_eq!(w.pc, 0x7f00_1234_5000);
        assert!(!w.halted());
        // Neither (trap id 0): halted, 8 bytes back.
        let mut w = trapped(0, 0x7f00_1234_5000);
        enter(&mut w, Tma::default());
        assert_eq!(w.pc, 0x7f00_1234_4ff8);
        assert!(w.halted());
    }

    #[test]
    fn gfx9_saves_ib_sts_in_ttmp11_and_steps_over_without_a_second_level() {
        let mut w = trapped(0, 0x7f00_1234_5000);
        w.target = Target::Gfx942;
        w.hwreg[hwreg::IB_STS] = 0x001f_8000 | 0x7;
        enter(
            &mut w,
            Tma {
                tba: 0x9000,
                tma: 0,
                debug_trap_enabled: false,
            },
        );
        assert_eq!(w.pc, 0x9000);
        assert_eq!(w.ttmp[11] >> TTMP11_SAVE_SHIFT, 0x3f);
        assert_eq!(w.hwreg[hwreg::IB_STS], 0x7, "RCNT and FIRST_REPLAY cleared");
        assert_eq!(w.ttmp[12], STATUS_PRIV | STATUS_ECC_ERR | STATUS_SCC | VCCZ);
        let mut w = trapped(0, 0x7f00_1234_5000);
        w.target = Target::Gfx942;
        w.hwreg[hwreg::IB_STS] = 0x8000;
        enter(&mut w, Tma::default());
        assert_eq!(w.pc, 0x7f00_1234_5004, "stepped over, whatever the id");
        assert_eq!(w.hwreg[hwreg::IB_STS], 0x8000, "restored");
        assert!(!w.halted());
    }

    #[test]
    fn sendmsg_ids_are_four_bits_on_gfx9_eight_on_gfx11_without_get_doorbell() {
        use Message::*;
        assert_eq!(message(Target::Gfx942, 1), Interrupt);
        assert_eq!(message(Target::Gfx942, 10), GetDoorbell);
        // gfx9 ignores bits above 3:0 (the operation in 6:4).
        assert_eq!(message(Target::Gfx906, 0x11), Interrupt);
        assert_eq!(message(Target::Gfx11, 1), Interrupt);
        assert_eq!(message(Target::Gfx11, 10), Other);
        assert_eq!(message(Target::Gfx11, 0x11), Other);
        // MSG_DEALLOC_VGPRS (3).
        assert_eq!(message(Target::Gfx11, 3), Other);
    }

    #[test]
    fn sendmsg_rtn_answers_the_doorbell_and_a_dgpus_first_level_tba_and_tma() {
        assert_eq!(message_rtn(MSG_RTN_GET_DOORBELL, 0x12, false), Some(0x12));
        assert_eq!(message_rtn(MSG_RTN_GET_TBA, 0, false), Some(0x20));
        assert_eq!(message_rtn(MSG_RTN_GET_TMA, 0, false), Some(0x38));
        assert_eq!(message_rtn(MSG_RTN_GET_TMA, 0, true), None);
        // GET_DDID, SAVE_WAVE: not modelled.
        assert_eq!(message_rtn(129, 0, false), None);
        assert_eq!(message_rtn(132, 0, false), None);
    }
}
