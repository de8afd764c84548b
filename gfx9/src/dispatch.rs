//! Dispatch: what the command processor and the workgroup dispatcher do around the waves of a
//! kernel — the kernel descriptor read ([`KernelDescriptor`]), each wave's initial state as the
//! AMDGPU ABI defines it ([`Dispatch::wave_setup`]), and every workgroup of the grid run to
//! its end ([`run`]).
//!
//! # Sources
//!
//! * The kernel descriptor is LLVM's `amdhsa::kernel_descriptor_t`
//!   (`llvm/include/llvm/Support/AMDHSAKernelDescriptor.h`) as LLVM's AMDGPUUsage documents it
//!   ("Kernel Descriptor", code object v3 to v5): 64 bytes, the group and private segment fixed
//!   sizes, the kernarg size, the entry's byte offset from the descriptor, COMPUTE_PGM_RSRC3/1/2
//!   and the kernel code properties (which user SGPRs the kernel wants).
//! * The initial state is AMDGPUUsage's "Initial Kernel Execution State" for GFX9/GFX90A:
//!   user SGPRs from `s0` in the order private segment buffer (4), dispatch ptr (2), queue ptr
//!   (2), kernarg segment ptr (2), dispatch id (2), flat scratch init (2), private segment size
//!   (1), each present when its `kernel_code_properties` bit is set; then from
//!   `s[USER_SGPR_COUNT]` the system SGPRs present by COMPUTE_PGM_RSRC2: work-group id X, Y, Z,
//!   work-group info, private segment wave offset. The work-item ids are in `v0`, `v1`, `v2`
//!   (as many as RSRC2's `ENABLE_VGPR_WORKITEM_ID` says), except on gfx90a and gfx942, whose
//!   hardware packs them into `v0` (bits 0–9 X, 10–19 Y, 20–29 Z: LLVM's `FeaturePackedTID`).
//!   Every gfx9 compute wave is wave64; a wave of a partial workgroup has the lanes past its
//!   last work-item off in EXEC.
//! * Scratch as ROCr 5.2.3 sets it up (`AqlQueue::InitScratchSRD`, `amd_aql_queue.cpp`): the
//!   queue's `scratch_resource_descriptor` is the private segment buffer V#, swizzled by lane
//!   (element size 4, index stride 64), whose base is the queue's scratch backing memory; on
//!   gfx9 `scratch_backing_memory_location` is that base as a GPU address (the flat scratch
//!   init: the kernel's prolog adds its wave offset and moves it to `FLAT_SCRATCH`). Each wave
//!   running at once owns one slot of `wave_bytes`; its private segment wave offset is its
//!   slot's byte offset. Here each of `T` threads keeps workgroups resident (one unless
//!   some wait on GWS, below), so wave `i` of thread `t`'s resident workgroup `r` uses slot
//!   `(r * T + t) * waves_per_group + i`, and no more threads and resident workgroups run
//!   than there are slots.
//! * A PM4 dispatch (`DISPATCH_DIRECT` after `SET_SH_REG`s) has no descriptor: the
//!   registers `COMPUTE_PGM_RSRC1/2/3` are the descriptor's fields and the user SGPRs are
//!   `COMPUTE_USER_DATA_0..15` ([`Dispatch::user_data`]); the system SGPRs and VGPRs are as
//!   above. On gfx942 (architected flat scratch) the hardware also sets `FLAT_SCRATCH` to the
//!   wave's scratch.
//! * LDS: each workgroup gets `group_segment_size` bytes (the packet's, which includes the
//!   dynamic part), rounded up to gfx9's LDS allocation granule (RSRC2 `LDS_SIZE` counts
//!   128-dword blocks), zeroed. (The hardware leaves a new workgroup's LDS as the last user left
//!   it; zeroing makes runs reproducible.)
//!
//! # How it runs
//!
//! A workgroup's waves run round-robin on one thread: each runs until it ends, reaches
//! `s_barrier`, yields, waits on a GWS resource or uses up a quantum of [`QUANTUM`]
//! instructions (so waves that spin on each other's LDS or memory writes make progress).
//! `s_barrier` releases when every wave of the workgroup that has not ended has reached it (a
//! wave that executed `s_endpgm` no longer takes part in the workgroup's barriers). Workgroups
//! run in parallel on up to [`RunOptions::threads`] threads (the caller's and scoped ones,
//! `std::thread::scope`), each taking the next workgroups in dispatch order (X fastest), up
//! to 64 at a time from one shared counter when there are many; each thread
//! keeps its own [`CodeCache`], so a kernel's code is decoded once per thread for the whole
//! dispatch, and its own workgroup state (waves, LDS), reused from one workgroup to the next.
//! [`run_in`] takes both from a [`Pool`] an embedder keeps (kfd-emu: one per queue) and gives
//! them back at the end, so the next dispatch of the same kernel decodes nothing (each cached
//! page is compared with memory at its first fetch, and decoded again if its bytes changed)
//! and allocates no wave registers.
//!
//! # Global wave sync: what progress is guaranteed
//!
//! A wave waiting in `ds_gws_sema_p` or `ds_gws_barrier` ([`crate::gws`]) needs another wave
//! to run — possibly of a workgroup not started yet. The hardware guarantees progress only to
//! waves that are resident (the CP starts a workgroup when a CU has room for it, and a
//! waiting wave keeps its slot). Here each thread acts as a compute unit with
//! [`RESIDENT_WAVES`] wave slots: when every wave of its workgroup that has not ended waits
//! (with one on GWS), the thread parks the workgroup (its waves and LDS kept) and starts the
//! next one, while its resident workgroups fit in those slots; a GWS change releases a parked
//! workgroup, which runs again first. A thread whose resident workgroups all wait sleeps on
//! the GPU's GWS state (woken by any change; it looks at cancellation every 20 ms); when
//! nothing changed in those 20 ms and workgroups are left to start, it takes
//! [`RESIDENT_WAVES`] more wave slots, up to [`MAX_RESIDENT_WAVES`] (a grid-wide barrier of a
//! cooperative launch needs every workgroup of the grid resident at once). So a dispatch
//! makes progress whenever the waves that must run at once to release each other fit in
//! `threads × MAX_RESIDENT_WAVES` (fewer when the queue's scratch slots run out first: each
//! resident wave holds one), as a grid that fits the GPU's wave slots does on hardware; a
//! kernel that needs more hangs as it would on a GPU that small, and an [`Observer`] can
//! still cancel it. Each resident wave costs its registers (about 130 KiB). The
//! wave that traps (`s_trap`) goes where its [`Observer`] sends it ([`Observer::trap`]: the
//! trap handler), and a message it sends (`s_sendmsg`) goes to [`Observer::message`] (gfx11's
//! `s_sendmsg_rtn` to [`Observer::message_rtn`], whose answer lands in its SDST). A
//! halted wave ([`Wave::halted`]) is parked with its workgroup, which no longer runs: only
//! a cancel ends such a dispatch (its thread looks every 20 ms). The
//! first wave that stops with an [`ExecError`] or an `s_trap` its [`Observer`] has no trap
//! handler for stops the dispatch: no thread starts another workgroup, and [`run`] returns a [`DispatchError`] naming the workgroup, the wave
//! and the pc. An [`Observer`] sees each wave's initial state (tests check the ABI's registers
//! with it), can cancel a dispatch (a destroyed queue) and can hold its threads between
//! quanta (`Observer::pause_point`: a preempted queue, its waves kept where they are).

use crate::exec::{Apertures, CodeCache, Ctx, ExecError, Flow, LANES, Memory, Target, Wave, steps};
use crate::gws::{Gws, GwsWait};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A kernel descriptor's size (AMDGPUUsage, "Kernel Descriptor": 64 bytes, 64-byte aligned).
pub const DESCRIPTOR_BYTES: usize = 64;
/// The most work-items a workgroup has (1024 on every gfx9 GPU: ROCr's
/// `HSA_AGENT_INFO_WORKGROUP_MAX_SIZE`, and LLVM's default `amdgpu-flat-work-group-size`).
pub const MAX_WORKGROUP_ITEMS: u64 = 1024;
/// Instructions a wave runs before the next wave of its workgroup gets a turn.
pub const QUANTUM: usize = 512;
/// LDS allocation granule on gfx9 (RSRC2 `LDS_SIZE` is in units of 128 dwords).
pub const LDS_GRANULE: u32 = 512;
/// LDS a gfx9 workgroup can have (64 KiB).
pub const MAX_LDS: u32 = 64 << 10;

/// Why a kernel descriptor cannot be run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorError {
    /// Fewer than 64 bytes.
    #[error("a kernel descriptor is 64 bytes, got {0}")]
    Short(usize),
    /// `ENABLE_WAVEFRONT_SIZE32` on a target without wave32: gfx9 runs wave64 only (gfx11
    /// runs both).
    #[error("the descriptor asks for wave32, which gfx9 does not have")]
    Wave32,
    /// The enabled user SGPRs do not fit in RSRC2's `USER_SGPR_COUNT`.
    #[error("the enabled user SGPRs need {needed} registers, USER_SGPR_COUNT is {count}")]
    UserSgprs {
        /// SGPRs the enabled user SGPRs take.
        needed: u32,
        /// RSRC2's count.
        count: u32,
    },
    /// The user and system SGPRs go past `s101`.
    #[error("the initial SGPRs go past s101 ({0} registers)")]
    TooManySgprs(u32),
    /// RSRC2's `ENABLE_VGPR_WORKITEM_ID` is 3 (reserved).
    #[error("ENABLE_VGPR_WORKITEM_ID 3 is reserved")]
    WorkItemIds,
}

/// The amdhsa kernel descriptor (LLVM's `amdhsa::kernel_descriptor_t`, AMDGPUUsage "Kernel
/// Descriptor" for code object v3–v5), as the CP reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// Bytes 0–3: `GROUP_SEGMENT_FIXED_SIZE`, the kernel's static LDS.
    pub group_segment_fixed_size: u32,
    /// Bytes 4–7: `PRIVATE_SEGMENT_FIXED_SIZE`, scratch per work-item.
    pub private_segment_fixed_size: u32,
    /// Bytes 8–11: `KERNARG_SIZE`.
    pub kernarg_size: u32,
    /// Bytes 16–23: `KERNEL_CODE_ENTRY_BYTE_OFFSET`, from the descriptor's address to the
    /// entry (signed).
    pub kernel_code_entry_byte_offset: i64,
    /// Bytes 44–47: `COMPUTE_PGM_RSRC3` (gfx90a: `ACCUM_OFFSET` bits 0–5, `TG_SPLIT` bit 16).
    pub compute_pgm_rsrc3: u32,
    /// Bytes 48–51: `COMPUTE_PGM_RSRC1`.
    pub compute_pgm_rsrc1: u32,
    /// Bytes 52–55: `COMPUTE_PGM_RSRC2`.
    pub compute_pgm_rsrc2: u32,
    /// Bytes 56–57: the kernel code properties (which user SGPRs are set up).
    pub kernel_code_properties: u16,
    /// Bytes 58–59 (code object v5, gfx940+): the kernarg preload spec (length bits 0–6,
    /// offset bits 7–15). Read, not acted on: gfx9 before gfx940 has none.
    pub kernarg_preload: u16,
}

/// `kernel_code_properties` bits (AMDGPUUsage, "Kernel Descriptor" table).
mod kcp {
    pub const PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    pub const DISPATCH_PTR: u16 = 1 << 1;
    pub const QUEUE_PTR: u16 = 1 << 2;
    pub const KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    pub const DISPATCH_ID: u16 = 1 << 4;
    pub const FLAT_SCRATCH_INIT: u16 = 1 << 5;
    pub const PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    pub const WAVEFRONT_SIZE32: u16 = 1 << 10;
}

fn bits(v: u32, lo: u32, n: u32) -> u32 {
    (v >> lo) & ((1 << n) - 1)
}

impl KernelDescriptor {
    /// Parses the 64-byte descriptor (little-endian) and checks what the dispatcher relies on.
    ///
    /// # Errors
    ///
    /// [`DescriptorError`] for a short buffer, wave32, inconsistent SGPR counts or the
    /// reserved work-item-id setting.
    pub fn parse(bytes: &[u8]) -> Result<Self, DescriptorError> {
        Self::parse_for(bytes, Target::Gfx90a)
    }

    /// [`parse`](Self::parse) for `target`: a gfx11 descriptor may ask for wave32
    /// (`ENABLE_WAVEFRONT_SIZE32`, [`wave32`](Self::wave32)).
    ///
    /// # Errors
    ///
    /// As [`parse`](Self::parse), wave32 refused only on gfx9 targets.
    pub fn parse_for(bytes: &[u8], target: Target) -> Result<Self, DescriptorError> {
        if bytes.len() < DESCRIPTOR_BYTES {
            return Err(DescriptorError::Short(bytes.len()));
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let entry = i64::from(u32_at(16)) | i64::from(u32_at(20)) << 32;
        let kd = Self {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            kernel_code_entry_byte_offset: entry,
            compute_pgm_rsrc3: u32_at(44),
            compute_pgm_rsrc1: u32_at(48),
            compute_pgm_rsrc2: u32_at(52),
            kernel_code_properties: u16_at(56),
            kernarg_preload: u16_at(58),
        };
        if kd.wave32() && !target.is_gfx11() {
            return Err(DescriptorError::Wave32);
        }
        let needed = kd.enabled_user_sgprs();
        let count = kd.user_sgpr_count();
        if needed > count {
            return Err(DescriptorError::UserSgprs { needed, count });
        }
        let total = count + kd.system_sgprs();
        if total as usize > crate::exec::SGPRS {
            return Err(DescriptorError::TooManySgprs(total));
        }
        if kd.workitem_id_vgprs() > 3 {
            return Err(DescriptorError::WorkItemIds);
        }
        Ok(kd)
    }

    /// The descriptor a PM4 dispatch amounts to: its `COMPUTE_PGM_RSRC1/2/3` registers, no
    /// ABI user SGPRs (they come from `COMPUTE_USER_DATA_*`), no segment sizes (the dispatch
    /// gives them). The entry offset is 0: the entry is `COMPUTE_PGM_LO/HI`.
    ///
    /// # Errors
    ///
    /// As [`parse`](Self::parse): the system SGPRs past `s101`, or the reserved work-item-id
    /// setting.
    pub fn from_registers(rsrc1: u32, rsrc2: u32, rsrc3: u32) -> Result<Self, DescriptorError> {
        Self::from_registers_for(Target::Gfx90a, [rsrc1, rsrc2, rsrc3], false)
    }

    /// [`from_registers`](Self::from_registers) for `target`, the registers `[RSRC1, RSRC2,
    /// RSRC3]`, with waves of 32 lanes when `wave32` (gfx10+'s `COMPUTE_DISPATCH_INITIATOR`
    /// `CS_W32_EN`, bit 15, which a PM4 dispatch sets instead of a descriptor's bit).
    ///
    /// # Errors
    ///
    /// As [`parse_for`](Self::parse_for).
    pub fn from_registers_for(
        target: Target,
        [rsrc1, rsrc2, rsrc3]: [u32; 3],
        wave32: bool,
    ) -> Result<Self, DescriptorError> {
        let mut raw = [0u8; DESCRIPTOR_BYTES];
        raw[44..48].copy_from_slice(&rsrc3.to_le_bytes());
        raw[48..52].copy_from_slice(&rsrc1.to_le_bytes());
        raw[52..56].copy_from_slice(&rsrc2.to_le_bytes());
        if wave32 {
            raw[56..58].copy_from_slice(&kcp::WAVEFRONT_SIZE32.to_le_bytes());
        }
        Self::parse_for(&raw, target)
    }

    /// `ENABLE_WAVEFRONT_SIZE32` (kernel code properties bit 10): waves of 32 lanes.
    pub fn wave32(&self) -> bool {
        self.wants(kcp::WAVEFRONT_SIZE32)
    }

    /// Lanes per wave: 32 for a wave32 kernel, else 64.
    pub fn lanes(&self) -> usize {
        if self.wave32() { 32 } else { LANES }
    }

    /// The entry's address for a descriptor at `addr`, as the CP programs it: the code must
    /// be 256-byte aligned (AMDGPUUsage), and `COMPUTE_PGM_LO/HI` hold the address shifted
    /// right by 8, so its low 8 bits are dropped. (Only the code's address is aligned, not the
    /// offset: a descriptor is 64-byte aligned.)
    pub fn entry(&self, addr: u64) -> u64 {
        addr.wrapping_add(self.kernel_code_entry_byte_offset as u64) & !0xff
    }

    /// RSRC2 `USER_SGPR_COUNT` (bits 1–5): where the system SGPRs start.
    pub fn user_sgpr_count(&self) -> u32 {
        bits(self.compute_pgm_rsrc2, 1, 5)
    }

    /// SGPRs the enabled user SGPRs take, in the ABI's order.
    pub fn enabled_user_sgprs(&self) -> u32 {
        let p = self.kernel_code_properties;
        [
            (kcp::PRIVATE_SEGMENT_BUFFER, 4),
            (kcp::DISPATCH_PTR, 2),
            (kcp::QUEUE_PTR, 2),
            (kcp::KERNARG_SEGMENT_PTR, 2),
            (kcp::DISPATCH_ID, 2),
            (kcp::FLAT_SCRATCH_INIT, 2),
            (kcp::PRIVATE_SEGMENT_SIZE, 1),
        ]
        .iter()
        .filter(|(bit, _)| p & bit != 0)
        .map(|&(_, n)| n)
        .sum()
    }

    /// RSRC2 bit 0: the private segment wave offset system SGPR (scratch is used).
    pub fn private_segment(&self) -> bool {
        self.compute_pgm_rsrc2 & 1 != 0
    }

    /// RSRC2 bits 7, 8, 9: work-group id X, Y, Z system SGPRs.
    pub fn workgroup_id(&self) -> [bool; 3] {
        [7, 8, 9].map(|b| self.compute_pgm_rsrc2 >> b & 1 != 0)
    }

    /// RSRC2 bit 10: the work-group info system SGPR.
    pub fn workgroup_info(&self) -> bool {
        self.compute_pgm_rsrc2 >> 10 & 1 != 0
    }

    /// System SGPRs the kernel gets.
    pub fn system_sgprs(&self) -> u32 {
        self.workgroup_id().iter().filter(|&&b| b).count() as u32
            + u32::from(self.workgroup_info())
            + u32::from(self.private_segment())
    }

    /// RSRC2 `ENABLE_VGPR_WORKITEM_ID` (bits 11–12) plus one: how many work-item id
    /// components (X; X, Y; X, Y, Z) the kernel reads.
    pub fn workitem_id_vgprs(&self) -> u32 {
        bits(self.compute_pgm_rsrc2, 11, 2) + 1
    }

    /// RSRC2 `GRANULATED_LDS_SIZE` (bits 15–23) in bytes (normally 0 in a descriptor: the CP
    /// sets it from the packet).
    pub fn lds_size(&self) -> u32 {
        bits(self.compute_pgm_rsrc2, 15, 9) * LDS_GRANULE
    }

    /// The MODE register's initial value from RSRC1 (the guide's MODE: FP_ROUND bits 0–3,
    /// FP_DENORM 4–7, DX10_CLAMP 8, IEEE 9, FP16_OVFL 23; RSRC1: FLOAT_ROUND_MODE_32/16_64
    /// bits 12–15, FLOAT_DENORM_MODE_32/16_64 bits 16–19, ENABLE_DX10_CLAMP 21,
    /// ENABLE_IEEE_MODE 23, FP16_OVFL 26).
    pub fn mode(&self) -> u32 {
        let r = self.compute_pgm_rsrc1;
        bits(r, 12, 4)
            | bits(r, 16, 4) << 4
            | bits(r, 21, 1) << 8
            | bits(r, 23, 1) << 9
            | bits(r, 26, 1) << 23
    }

    /// Whether the kernel wants `kernel_code_properties` bit `bit`.
    fn wants(&self, bit: u16) -> bool {
        self.kernel_code_properties & bit != 0
    }
}

/// The queue's scratch ("private segment") memory for a dispatch: what the CP takes from ROCr's
/// `amd_queue_t` (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scratch {
    /// The private segment buffer V# (`amd_queue_t.scratch_resource_descriptor`).
    pub srd: [u32; 4],
    /// The flat scratch init: the scratch backing memory's GPU address
    /// (`scratch_backing_memory_location` on gfx9).
    pub base: u64,
    /// Bytes of one wave's slot (`COMPUTE_TMPRING_SIZE.WAVESIZE` × 1 KiB).
    pub wave_bytes: u64,
    /// Slots (waves that may hold scratch at once: `COMPUTE_TMPRING_SIZE.WAVES`); 0 with no
    /// scratch.
    pub slots: u32,
}

/// One kernel dispatch, as the packet (or the PM4 register state) describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// The GPU.
    pub target: Target,
    /// The descriptor, parsed.
    pub kd: KernelDescriptor,
    /// The entry's address.
    pub entry: u64,
    /// Work-items per dimension (`grid_size_x/y/z`).
    pub grid: [u32; 3],
    /// Work-items per workgroup per dimension (`workgroup_size_x/y/z`).
    pub workgroup: [u32; 3],
    /// The kernarg segment's address.
    pub kernarg: u64,
    /// The dispatch packet's address (the dispatch ptr user SGPR).
    pub dispatch_ptr: u64,
    /// The `amd_queue_t`'s address (the queue ptr user SGPR).
    pub queue_ptr: u64,
    /// The dispatch id (the packet's index in the queue).
    pub dispatch_id: u64,
    /// Private segment bytes per work-item (the packet's `private_segment_size`).
    pub private_segment_size: u32,
    /// LDS bytes per workgroup (the packet's `group_segment_size`, static and dynamic).
    pub group_segment_size: u32,
    /// The queue's scratch.
    pub scratch: Scratch,
    /// The shared and private apertures (the process's, from `SH_MEM_BASES`).
    pub apertures: Apertures,
    /// A PM4 dispatch's user SGPRs: the first `USER_SGPR_COUNT` SGPRs are
    /// `COMPUTE_USER_DATA_0..15` as the queue set them, instead of the ABI's user SGPRs from
    /// `kernel_code_properties` (an AQL dispatch: `None`).
    pub user_data: Option<[u32; 16]>,
}

/// Why a dispatch stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The packet's sizes cannot be run (a zero size, a workgroup of more than 1024 items,
    /// more LDS than 64 KiB).
    #[error("invalid dispatch: {0}")]
    Invalid(&'static str),
    /// The kernel needs scratch and the queue has not enough (`needed` bytes per wave).
    #[error("the kernel needs {needed} bytes of scratch per wave; the queue has {have}")]
    Scratch {
        /// Bytes per wave needed.
        needed: u64,
        /// Bytes per wave slot the queue has.
        have: u64,
    },
    /// A wave stopped with an error.
    #[error("workgroup {workgroup:?} wave {wave}: {error}")]
    Wave {
        /// The workgroup's id.
        workgroup: [u32; 3],
        /// The wave in the workgroup.
        wave: u32,
        /// Why (with its pc).
        error: ExecError,
    },
    /// A wave executed `s_trap`.
    #[error("workgroup {workgroup:?} wave {wave}: s_trap {trap_id} at {pc:#x}")]
    Trap {
        /// The workgroup's id.
        workgroup: [u32; 3],
        /// The wave in the workgroup.
        wave: u32,
        /// The `s_trap` instruction's address.
        pc: u64,
        /// Its trap id.
        trap_id: u16,
    },
    /// The [`Observer`] cancelled the dispatch.
    #[error("cancelled")]
    Cancelled,
}

/// Hooks into a running dispatch.
pub trait Observer: Sync {
    /// A thread that runs workgroups starts (first thing on it; the caller's own thread, which
    /// is one of them, too).
    fn thread_start(&self) {}
    /// A wave is set up, before its first instruction (`workgroup` id, `wave` index).
    fn wave_start(&self, workgroup: [u32; 3], wave: u32, state: &Wave) {
        let _ = (workgroup, wave, state);
    }
    /// Asked between quanta: `true` stops the dispatch with [`DispatchError::Cancelled`].
    fn cancelled(&self) -> bool {
        false
    }
    /// Wave `wave` of `workgroup` executed `s_trap trap_id`: `w` is at the trap handler's
    /// entry as the hardware makes it (TTMP0/1 the PC of the `s_trap` and the trap id,
    /// STATUS.PRIV set, `w.pc` the `s_trap`). The hardware then jumps to the trap handler
    /// base (TBA), which is the queue's and not the dispatcher's to know: an observer that
    /// knows it sets `w.pc` (and whatever the first-level handler sets up) and answers
    /// `true`, and the wave goes on there (or stays halted, when the observer left it so:
    /// [`Wave::halted`]); `false` (no handler) stops the dispatch with
    /// [`DispatchError::Trap`].
    fn trap(&self, workgroup: [u32; 3], wave: u32, w: &mut Wave, trap_id: u16) -> bool {
        let _ = (workgroup, wave, w, trap_id);
        false
    }
    /// Wave `wave` of `workgroup` executed `s_sendmsg simm16` (it is past it). The SPI
    /// answers MSG_GET_DOORBELL in EXEC and MSG_INTERRUPT raises the host's interrupt with
    /// M0's data: both are the queue's, so the observer does them; by default the message
    /// reaches nothing.
    fn message(&self, workgroup: [u32; 3], wave: u32, w: &mut Wave, simm16: u16) {
        let _ = (workgroup, wave, w, simm16);
    }
    /// Wave `wave` of `workgroup` executed gfx11's `s_sendmsg_rtn` of message `msg` (it is
    /// past it): the SPI's answer, which the dispatcher writes to its SDST
    /// (`MSG_RTN_GET_DOORBELL` the queue's doorbell id, `GET_TBA`/`GET_TMA` the queue's
    /// first-level trap handler base and memory, >> 8: all the queue's, so the observer's).
    /// `None` (the default: no queue) stops the dispatch with the wave's
    /// [`ExecError::Unimplemented`].
    fn message_rtn(&self, workgroup: [u32; 3], wave: u32, w: &Wave, msg: u16) -> Option<u64> {
        let _ = (workgroup, wave, w, msg);
        None
    }
    /// Called between quanta, before [`cancelled`](Self::cancelled) is asked: an embedder
    /// that preempts the dispatch (its queue unmapped, where the hardware saves the waves'
    /// context, CWSR, and restores it when the queue is mapped again) blocks here until the
    /// dispatch may go on. The waves' state stays in the dispatcher's memory meanwhile, so
    /// they resume where they stopped. Default: returns at once.
    fn pause_point(&self) {}
    /// A thread that ran workgroups ends (last thing on it: it runs no wave after this).
    fn thread_end(&self) {}
}

/// An observer that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;
impl Observer for NoObserver {}

/// How to run a dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Threads running workgroups (at most; fewer when the grid or scratch is smaller).
    pub threads: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// What a finished dispatch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Workgroups run.
    pub workgroups: u64,
    /// Waves run.
    pub waves: u64,
    /// Wave-instructions executed.
    pub instructions: u64,
}

impl Dispatch {
    /// Workgroups per dimension (a partial one at a grid's edge counts).
    pub fn workgroups(&self) -> [u32; 3] {
        std::array::from_fn(|d| self.grid[d].div_ceil(self.workgroup[d].max(1)))
    }

    /// Waves in a full workgroup.
    pub fn waves_per_group(&self) -> u32 {
        let items: u64 = self.workgroup.iter().map(|&w| u64::from(w)).product();
        items.div_ceil(self.kd.lanes() as u64) as u32
    }

    /// Checks the sizes: every dimension's grid and workgroup non-zero, at most
    /// [`MAX_WORKGROUP_ITEMS`] per group, at most 64 KiB LDS, scratch enough.
    ///
    /// # Errors
    ///
    /// [`DispatchError::Invalid`] or [`DispatchError::Scratch`].
    pub fn validate(&self) -> Result<(), DispatchError> {
        if self.grid.contains(&0) || self.workgroup.contains(&0) {
            return Err(DispatchError::Invalid("a zero grid or workgroup size"));
        }
        let items: u64 = self.workgroup.iter().map(|&w| u64::from(w)).product();
        if items > MAX_WORKGROUP_ITEMS {
            return Err(DispatchError::Invalid(
                "more than 1024 work-items per workgroup",
            ));
        }
        if self.workgroup.iter().any(|&w| w > 1024) {
            return Err(DispatchError::Invalid("a workgroup dimension over 1024"));
        }
        if self
            .workgroups()
            .iter()
            .try_fold(1u64, |n, &g| n.checked_mul(u64::from(g)))
            .is_none()
        {
            return Err(DispatchError::Invalid("more than 2^64 workgroups"));
        }
        if self.lds_bytes() > MAX_LDS {
            return Err(DispatchError::Invalid("more than 64 KiB of LDS"));
        }
        let needed = self.scratch_wave_bytes();
        if needed > 0 && (self.scratch.slots == 0 || self.scratch.wave_bytes < needed) {
            return Err(DispatchError::Scratch {
                needed,
                have: if self.scratch.slots == 0 {
                    0
                } else {
                    self.scratch.wave_bytes
                },
            });
        }
        Ok(())
    }

    /// Scratch bytes one wave needs: the packet's private segment size per work-item (rounded
    /// up to a dword, as the CP does) times 64, when the kernel enables its private segment.
    pub fn scratch_wave_bytes(&self) -> u64 {
        if !self.kd.private_segment() {
            return 0;
        }
        u64::from(self.private_segment_size.next_multiple_of(4)) * self.kd.lanes() as u64
    }

    /// LDS bytes a workgroup gets: the packet's group segment size rounded up to the granule.
    pub fn lds_bytes(&self) -> u32 {
        self.group_segment_size
            .max(self.kd.group_segment_fixed_size)
            .next_multiple_of(LDS_GRANULE)
    }

    /// The size of workgroup `id` per dimension: the workgroup size, or what is left of the
    /// grid at its edge.
    pub fn group_size(&self, id: [u32; 3]) -> [u32; 3] {
        std::array::from_fn(|d| {
            let start = u64::from(id[d]) * u64::from(self.workgroup[d]);
            (u64::from(self.grid[d]) - start).min(u64::from(self.workgroup[d])) as u32
        })
    }

    /// The initial state of wave `wave` of workgroup `id`, whose scratch slot is `slot`
    /// (AMDGPUUsage, "Initial Kernel Execution State"; see the module docs).
    pub fn wave_setup(&self, id: [u32; 3], wave: u32, slot: u32) -> Wave {
        let mut w = Wave::new(self.target, self.entry);
        self.setup_into(&mut w, id, wave, slot);
        w
    }

    /// [`wave_setup`](Self::wave_setup) into an existing wave (its VGPRs beyond the work-item
    /// ids are left as they were: the hardware does not clear them either).
    pub fn setup_into(&self, w: &mut Wave, id: [u32; 3], wave: u32, slot: u32) {
        let kd = &self.kd;
        w.pc = self.entry;
        w.target = self.target;
        w.wave32 = kd.wave32();
        let wave_lanes = kd.lanes();
        w.sgpr = [0; crate::exec::SGPRS];
        w.vcc = 0;
        w.m0 = 0;
        w.scc = false;
        w.flat_scratch = 0;
        w.xnack_mask = 0;
        w.ttmp = [0; 16];
        w.hwreg = [0; 32];
        w.hwreg[HW_REG_MODE] = kd.mode();
        let wave_offset = u64::from(slot) * self.scratch.wave_bytes;
        w.apertures = Apertures {
            scratch_base: self.scratch.base.wrapping_add(wave_offset),
            scratch_per_lane: self.private_segment_size.next_multiple_of(4),
            ..self.apertures
        };
        // gfx942 and gfx11 have architected flat scratch (LLVM's
        // FeatureArchitectedFlatScratch: clang's gfx1100 kernels enable the private segment
        // with no flat scratch init and no prolog, and address it with `scratch_*` from
        // FLAT_SCRATCH): the hardware, not the kernel's prolog, points FLAT_SCRATCH at the
        // wave's scratch.
        if matches!(self.target, Target::Gfx942 | Target::Gfx11) && kd.private_segment() {
            w.flat_scratch = self.scratch.base.wrapping_add(wave_offset);
        }
        if let Some(data) = &self.user_data {
            // A PM4 dispatch: the hardware loads COMPUTE_USER_DATA_* into the user SGPRs.
            let n = (kd.user_sgpr_count() as usize).min(data.len());
            w.sgpr[..n].copy_from_slice(&data[..n]);
        }
        // User SGPRs, in the ABI's order.
        let mut s = 0usize;
        let mut put = |w: &mut Wave, vals: &[u32]| {
            for &v in vals {
                w.sgpr[s] = v;
                s += 1;
            }
        };
        let lohi = |v: u64| [v as u32, (v >> 32) as u32];
        let abi = self.user_data.is_none();
        if abi && kd.wants(kcp::PRIVATE_SEGMENT_BUFFER) {
            put(w, &self.scratch.srd);
        }
        if abi && kd.wants(kcp::DISPATCH_PTR) {
            put(w, &lohi(self.dispatch_ptr));
        }
        if abi && kd.wants(kcp::QUEUE_PTR) {
            put(w, &lohi(self.queue_ptr));
        }
        if abi && kd.wants(kcp::KERNARG_SEGMENT_PTR) {
            put(w, &lohi(self.kernarg));
        }
        if abi && kd.wants(kcp::DISPATCH_ID) {
            put(w, &lohi(self.dispatch_id));
        }
        if abi && kd.wants(kcp::FLAT_SCRATCH_INIT) {
            put(w, &lohi(self.scratch.base));
        }
        if abi && kd.wants(kcp::PRIVATE_SEGMENT_SIZE) {
            put(w, &[self.private_segment_size.next_multiple_of(4)]);
        }
        // System SGPRs from USER_SGPR_COUNT.
        let mut s = kd.user_sgpr_count() as usize;
        let mut sys = |w: &mut Wave, v: u32| {
            if let Some(r) = w.sgpr.get_mut(s) {
                *r = v;
            }
            s += 1;
        };
        for (d, on) in kd.workgroup_id().into_iter().enumerate() {
            if on {
                sys(w, id[d]);
            }
        }
        let size = self.group_size(id);
        let items = size.iter().map(|&n| u64::from(n)).product::<u64>();
        let waves = items.div_ceil(wave_lanes as u64) as u32;
        if kd.workgroup_info() {
            // {first_wave (bit 31), ordered_append_term, threadgroup_size_in_waves[5:0]}.
            sys(w, u32::from(wave == 0) << 31 | (waves & 0x3f));
        }
        if kd.private_segment() {
            sys(w, wave_offset as u32);
        }
        // EXEC and the work-item ids: work-item i of the (possibly partial) workgroup is
        // x + size_x * (y + size_y * z).
        let first = u64::from(wave) * wave_lanes as u64;
        let lanes = items.saturating_sub(first).min(wave_lanes as u64) as usize;
        w.exec = if lanes == LANES {
            u64::MAX
        } else {
            (1u64 << lanes) - 1
        };
        // gfx90a, gfx942 and gfx11 pack the ids into v0 (LLVM's FeaturePackedTID).
        let packed = matches!(self.target, Target::Gfx90a | Target::Gfx942 | Target::Gfx11);
        let comps = kd.workitem_id_vgprs() as usize;
        // Lanes past the workgroup's last work-item read 0. The ids of the others advance X
        // fastest from the wave's first work-item (one division per wave, not per lane).
        let regs = if packed { 1 } else { comps };
        for r in &mut w.vgpr[..regs] {
            *r = [0; LANES];
        }
        let (sx, sy) = (u64::from(size[0]), u64::from(size[1]));
        let mut id = [
            (first % sx) as u32,
            (first / sx % sy) as u32,
            (first / sx / sy) as u32,
        ];
        for lane in 0..lanes {
            if packed {
                let mut v = 0u32;
                for (c, &i) in id.iter().enumerate().take(comps) {
                    v |= (i & 0x3ff) << (10 * c);
                }
                w.vgpr[0][lane] = v;
            } else {
                for (c, &i) in id.iter().enumerate().take(comps) {
                    w.vgpr[c][lane] = i;
                }
            }
            id[0] += 1;
            if id[0] == size[0] {
                id[0] = 0;
                id[1] += 1;
                if id[1] == size[1] {
                    id[1] = 0;
                    id[2] += 1;
                }
            }
        }
    }
}

/// The guide's HW_REG id of MODE.
const HW_REG_MODE: usize = 1;

/// The first error of a dispatch, and the flag that stops the other threads.
struct Stop {
    flag: AtomicBool,
    first: Mutex<Option<DispatchError>>,
}

impl Stop {
    fn set(&self, e: DispatchError) {
        let mut first = self
            .first
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        first.get_or_insert(e);
        self.flag.store(true, Ordering::Release);
    }
    fn stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

/// What a dispatcher keeps from one dispatch to the next ([`run_in`]), as a compute unit keeps
/// its instruction cache and its wave slots: each worker thread's [`CodeCache`] (its pages
/// compared with memory at their first fetch of each dispatch, so a kernel dispatched again
/// decodes nothing while its code is unchanged: [`CodeCache::begin_dispatch`]) and its spare
/// workgroup state (waves and LDS, at most [`KEPT_WAVES`] waves a thread), so a dispatch
/// allocates no wave registers once one of its size ran. One dispatch uses a pool at a time
/// (an embedder keeps one per queue); a pool shared by two at once only keeps less.
#[derive(Default)]
pub struct Pool {
    kept: Mutex<Vec<Kept>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map_or(0, |k| k.len());
        f.debug_struct("Pool").field("threads", &kept).finish()
    }
}

/// One worker thread's state a [`Pool`] keeps.
struct Kept {
    cache: CodeCache,
    spare: Vec<Group>,
}

/// Waves a [`Pool`] keeps per worker thread at most (each about 130 KiB of registers).
pub const KEPT_WAVES: usize = 16;

impl Pool {
    /// A worker's cache (for `target`'s code, its dispatch begun) and spare workgroups.
    fn take(&self, target: Target) -> Kept {
        let mut kept = self
            .kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut k = match kept.iter().position(|k| k.cache.decodes(target)) {
            Some(i) => kept.swap_remove(i),
            None => Kept {
                cache: CodeCache::for_target(target),
                spare: kept.pop().map(|k| k.spare).unwrap_or_default(),
            },
        };
        drop(kept);
        k.cache.begin_dispatch();
        k
    }

    /// Gives a worker's state back, its spare waves cut to [`KEPT_WAVES`].
    fn give(&self, mut k: Kept) {
        let mut waves = 0;
        k.spare.retain(|g| {
            waves += g.waves.len();
            waves <= KEPT_WAVES
        });
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(k);
    }
}

/// Runs every workgroup of `d` over `mem` (see the module docs), with nothing kept from an
/// earlier dispatch ([`run_in`] with a new [`Pool`]).
///
/// # Errors
///
/// The [`DispatchError`] that stopped it: invalid sizes, too little scratch, the first wave
/// that failed or trapped, or cancellation.
pub fn run(
    d: &Dispatch,
    mem: &dyn Memory,
    opts: &RunOptions,
    obs: &dyn Observer,
) -> Result<Stats, DispatchError> {
    run_in(d, mem, opts, obs, &Pool::default())
}

/// [`run`] with the code caches and wave state `pool` kept from earlier dispatches, which it
/// keeps for the next.
///
/// # Errors
///
/// As [`run`].
pub fn run_in(
    d: &Dispatch,
    mem: &dyn Memory,
    opts: &RunOptions,
    obs: &dyn Observer,
    pool: &Pool,
) -> Result<Stats, DispatchError> {
    d.validate()?;
    let groups = d.workgroups();
    let total = groups.iter().map(|&g| u64::from(g)).product::<u64>();
    let waves_per_group = d.waves_per_group().max(1);
    let mut threads = opts.threads.max(1) as u64;
    // Workgroups a thread keeps at once: as many as RESIDENT_WAVES hold, at least one.
    let mut resident = u64::from((RESIDENT_WAVES / waves_per_group).max(1));
    let mut max_resident = u64::from((MAX_RESIDENT_WAVES / waves_per_group).max(1));
    if d.scratch_wave_bytes() > 0 {
        // Each resident workgroup needs a slot per wave (validate: slots > 0).
        if u64::from(d.scratch.slots) < u64::from(waves_per_group) {
            return Err(DispatchError::Scratch {
                needed: d.scratch_wave_bytes() * u64::from(waves_per_group),
                have: d.scratch.wave_bytes * u64::from(d.scratch.slots),
            });
        }
        let groups_with_slots = u64::from(d.scratch.slots) / u64::from(waves_per_group);
        threads = threads.min(groups_with_slots);
        resident = resident.min(groups_with_slots / threads).max(1);
        max_resident = max_resident.min(groups_with_slots / threads).max(resident);
    }
    let threads = threads.min(total).max(1);
    // Workgroups a thread takes from the shared counter at a time: one when they are few
    // (each thread gets its share), up to HANDOFF when there are many.
    let chunk = (total / (threads * 64)).clamp(1, HANDOFF);
    let next = AtomicU64::new(0);
    let stop = Stop {
        flag: AtomicBool::new(false),
        first: Mutex::new(None),
    };
    let stats = Mutex::new(Stats::default());
    let sched = Sched {
        d,
        mem,
        obs,
        pool,
        stop: &stop,
        groups,
        total,
        chunk,
        next: &next,
        resident: resident as u32,
        max_resident: max_resident as u32,
        threads: threads as u32,
    };
    let worker = |t: u64| {
        obs.thread_start();
        let mine = sched.worker(t as u32);
        obs.thread_end();
        let mut s = stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.workgroups += mine.workgroups;
        s.waves += mine.waves;
        s.instructions += mine.instructions;
    };
    // The caller's thread is worker 0; the others are started for the dispatch. A thread the
    // host refuses (EAGAIN at its thread limit) is one worker fewer: the workgroups are
    // taken from one counter, so any number of workers runs them all.
    std::thread::scope(|scope| {
        for t in 1..threads {
            let worker = &worker;
            let started = std::thread::Builder::new()
                .name("gfx9-dispatch".into())
                .spawn_scoped(scope, move || worker(t));
            if started.is_err() {
                break;
            }
        }
        worker(0);
    });
    if let Some(e) = stop
        .first
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(e);
    }
    Ok(stats
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// Waves a thread keeps resident at most: a compute unit's wave slots (gfx90a and gfx942:
/// 8 waves per SIMD, 4 SIMDs per CU; the MI200 and MI300 guides' "wavefront slots").
/// Workgroups whose every wave waits on a GWS resource are parked until it releases them,
/// and the thread starts others in their place up to this many waves.
pub const RESIDENT_WAVES: u32 = 32;
/// Waves a thread keeps resident at most when its workgroups stall: a thread whose every
/// resident workgroup waits on GWS, with no GWS change for 20 ms and workgroups not yet
/// started, takes another [`RESIDENT_WAVES`] (as if the GPU had one more CU), up to this.
pub const MAX_RESIDENT_WAVES: u32 = 1024;
/// Workgroups a thread takes from the dispatch's counter at once, at most.
const HANDOFF: u64 = 64;
/// How long a thread whose every workgroup waits on GWS sleeps before it looks at
/// cancellation again (it wakes at once on any GWS change).
const GWS_NAP: std::time::Duration = std::time::Duration::from_millis(20);

/// What every worker of a dispatch shares.
struct Sched<'a> {
    d: &'a Dispatch,
    mem: &'a dyn Memory,
    obs: &'a dyn Observer,
    /// Where the threads' code caches and spare workgroups come from and go back to.
    pool: &'a Pool,
    stop: &'a Stop,
    groups: [u32; 3],
    total: u64,
    chunk: u64,
    next: &'a AtomicU64,
    /// Workgroups one thread keeps at once.
    resident: u32,
    /// Workgroups one thread keeps at once at most, once stalled ([`MAX_RESIDENT_WAVES`]).
    max_resident: u32,
    /// Threads running workgroups (at most).
    threads: u32,
}

/// Where a wave of a workgroup is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    AtBarrier,
    /// Waiting on a GWS resource (`ds_gws_sema_p`, `ds_gws_barrier`).
    Gws(GwsWait),
    /// Halted ([`Wave::halted`]): nothing here resumes it.
    Halted,
    Ended,
}

/// A resident workgroup: its waves, where each is, its LDS. Kept and reused by its thread,
/// so a workgroup costs no allocation once the thread has run one of its size.
struct Group {
    id: [u32; 3],
    /// Its place among the thread's resident workgroups (which scratch slots it uses).
    place: u32,
    waves: Vec<Wave>,
    state: Vec<State>,
    lds: Vec<u8>,
    executed: u64,
}

/// How a turn of a workgroup ended.
enum Turn {
    /// Every wave ended.
    Done,
    /// Every wave that has not ended waits, and at least one on GWS or halted.
    Blocked,
}

impl Sched<'_> {
    /// Workgroup number `n`'s id (X fastest).
    fn group_id(&self, n: u64) -> [u32; 3] {
        let [gx, gy, _] = self.groups.map(u64::from);
        [(n % gx) as u32, (n / gx % gy) as u32, (n / gx / gy) as u32]
    }

    /// One thread's work: take workgroups, run them, park those blocked on GWS, resume them
    /// when released; returns what it ran.
    fn worker(&self, t: u32) -> Stats {
        let Kept {
            mut cache,
            mut spare,
        } = self.pool.take(self.d.target);
        let mut mine = Stats::default();
        let mut parked: Vec<Group> = Vec::new();
        let mut places: Vec<u32> = (0..self.resident).rev().collect();
        let mut limit = self.resident;
        let mut claimed = 0..0u64;
        let gws = self.mem.gws();
        loop {
            if self.stop.stopped() {
                break;
            }
            // A parked workgroup that a GWS change released runs first; then a new one while
            // there is room; else wait for a change.
            let epoch = gws.map(|g| g.epoch());
            let mut group = match parked.iter_mut().position(|g| g.poll(gws)) {
                Some(i) => parked.swap_remove(i),
                None => {
                    let n = if places.is_empty() {
                        None
                    } else {
                        claimed.next().or_else(|| {
                            let start = self.next.fetch_add(self.chunk, Ordering::Relaxed);
                            claimed = start.min(self.total)..(start + self.chunk).min(self.total);
                            claimed.next()
                        })
                    };
                    match (n, places.pop()) {
                        (Some(n), Some(place)) => {
                            let mut g = spare.pop().unwrap_or_else(|| Group {
                                id: [0; 3],
                                place: 0,
                                waves: Vec::new(),
                                state: Vec::new(),
                                lds: Vec::new(),
                                executed: 0,
                            });
                            self.start(&mut g, self.group_id(n), place, t);
                            g
                        }
                        (_, place) => {
                            places.extend(place);
                            if parked.is_empty() {
                                break;
                            }
                            if self.obs.cancelled() {
                                self.stop.set(DispatchError::Cancelled);
                                break;
                            }
                            if gws.is_none() {
                                // Only halted waves are parked: nothing but a cancel ends
                                // them; look at it every GWS_NAP.
                                std::thread::sleep(GWS_NAP);
                            }
                            if let (Some(g), Some(epoch)) = (gws, epoch)
                                && g.wait_change(epoch, GWS_NAP) == epoch
                                && limit < self.max_resident
                                && (!claimed.is_empty()
                                    || self.next.load(Ordering::Relaxed) < self.total)
                            {
                                // Stalled with workgroups left to start: room for more.
                                let more = (self.resident).min(self.max_resident - limit);
                                places.extend((limit..limit + more).rev());
                                limit += more;
                            }
                            continue;
                        }
                    }
                }
            };
            match self.run_group(&mut group, &mut cache, gws) {
                Ok(Turn::Done) => {
                    mine.workgroups += 1;
                    mine.waves += group.waves.len() as u64;
                    mine.instructions += group.executed;
                    places.push(group.place);
                    spare.push(group);
                }
                Ok(Turn::Blocked) => parked.push(group),
                Err(e) => {
                    self.stop.set(e);
                    parked.push(group);
                    break;
                }
            }
        }
        // Waves left waiting (the dispatch stopped) no longer queue on a semaphore.
        if let Some(gws) = gws {
            for g in &parked {
                for s in &g.state {
                    if let State::Gws(w) = s {
                        gws.abandon(w);
                    }
                }
            }
        }
        // Their state is spare now (`start` sets every wave up again).
        spare.extend(parked);
        self.pool.give(Kept { cache, spare });
        mine
    }

    /// Sets `g` up as workgroup `id` in resident place `place` of thread `t`: its waves'
    /// initial state, its LDS zeroed.
    fn start(&self, g: &mut Group, id: [u32; 3], place: u32, t: u32) {
        let d = self.d;
        let size = d.group_size(id);
        let items: u64 = size.iter().map(|&n| u64::from(n)).product();
        let n = items.div_ceil(d.kd.lanes() as u64) as usize;
        // Places interleave across threads, so a thread's later places (taken when stalled)
        // never meet another thread's slots.
        let first_slot = (place * self.threads + t) * d.waves_per_group().max(1);
        g.id = id;
        g.place = place;
        g.executed = 0;
        g.waves.truncate(n);
        while g.waves.len() < n {
            g.waves.push(Wave::new(d.target, d.entry));
        }
        for (i, w) in g.waves.iter_mut().enumerate() {
            d.setup_into(w, id, i as u32, first_slot + i as u32);
            self.obs.wave_start(id, i as u32, w);
        }
        g.state.clear();
        g.state.resize(n, State::Ready);
        let lds = d.lds_bytes() as usize;
        if g.lds.len() != lds {
            g.lds = vec![0; lds];
        } else {
            g.lds.fill(0);
        }
    }

    /// Runs `g`'s waves round-robin until they all end or all wait with one on GWS.
    fn run_group(
        &self,
        g: &mut Group,
        cache: &mut CodeCache,
        gws: Option<&Gws>,
    ) -> Result<Turn, DispatchError> {
        let id = g.id;
        loop {
            for (i, w) in g.waves.iter_mut().enumerate() {
                match g.state[i] {
                    State::Ready => {}
                    State::Gws(wait) if gws.is_some_and(|u| u.poll(&wait)) => {
                        g.state[i] = State::Ready;
                    }
                    _ => continue,
                }
                if self.stop.stopped() {
                    // Another thread's error (or a cancel) ends this workgroup too.
                    return Err(DispatchError::Cancelled);
                }
                self.obs.pause_point();
                if self.obs.cancelled() {
                    return Err(DispatchError::Cancelled);
                }
                let mut ctx = Ctx {
                    mem: self.mem,
                    lds: &mut g.lds,
                    code: cache,
                };
                let mut left = QUANTUM;
                while left > 0 {
                    let ran = steps(w, &mut ctx, left);
                    left -= ran.executed;
                    g.executed += ran.executed as u64;
                    let pc = ran.pc;
                    match ran.result {
                        Ok(Flow::Continue) => {}
                        Ok(Flow::Yield) => {
                            if w.halted() {
                                g.state[i] = State::Halted;
                            }
                            break;
                        }
                        Ok(Flow::Barrier) => {
                            g.state[i] = State::AtBarrier;
                            break;
                        }
                        Ok(Flow::GwsWait(wait)) => {
                            g.state[i] = State::Gws(wait);
                            break;
                        }
                        Ok(Flow::End) => {
                            g.state[i] = State::Ended;
                            break;
                        }
                        Ok(Flow::Message(simm16)) => self.obs.message(id, i as u32, w, simm16),
                        Ok(Flow::MessageRtn(m)) => {
                            let answer = self.obs.message_rtn(id, i as u32, w, m.msg);
                            if let Err(error) = m.answer(w, answer) {
                                return Err(DispatchError::Wave {
                                    workgroup: id,
                                    wave: i as u32,
                                    error,
                                });
                            }
                        }
                        Ok(Flow::Trap(trap_id)) if self.obs.trap(id, i as u32, w, trap_id) => {
                            // A first-level handler that found nothing to return to halts
                            // the wave (`L_NO_NEXT_TRAP`).
                            if w.halted() {
                                g.state[i] = State::Halted;
                                break;
                            }
                        }
                        Ok(Flow::Trap(trap_id)) => {
                            return Err(DispatchError::Trap {
                                workgroup: id,
                                wave: i as u32,
                                pc,
                                trap_id,
                            });
                        }
                        Err(error) => {
                            return Err(DispatchError::Wave {
                                workgroup: id,
                                wave: i as u32,
                                error,
                            });
                        }
                    }
                }
            }
            if g.state.iter().all(|&s| s == State::Ended) {
                return Ok(Turn::Done);
            }
            if g.state.contains(&State::Ready) {
                continue;
            }
            if g.state
                .iter()
                .any(|s| matches!(s, State::Gws(_) | State::Halted))
            {
                return Ok(Turn::Blocked);
            }
            // Every wave not ended waits at the barrier: release them all.
            for s in &mut g.state {
                if *s == State::AtBarrier {
                    *s = State::Ready;
                }
            }
        }
    }
}

impl Group {
    /// Whether a GWS change released one of the parked workgroup's waves (which is then
    /// ready: a semaphore's count is taken).
    fn poll(&mut self, gws: Option<&Gws>) -> bool {
        let Some(gws) = gws else { return false };
        let mut released = false;
        for s in &mut self.state {
            if let State::Gws(wait) = *s
                && gws.poll(&wait)
            {
                *s = State::Ready;
                released = true;
            }
        }
        released
    }
}
