//! Debugging: the deprecated pre-1.13 debugger ioctls, `AMDKFD_IOC_RUNTIME_ENABLE`,
//! `AMDKFD_IOC_DBG_TRAP` with every operation's arguments, exception codes and masks, and the
//! snapshots and context-save header a debugger reads.

use super::layout::types::{MacroKind, MacroLayout};

abi_consts! {
    registry DEBUG_CONSTS;
    /// Deprecated debugger: maximum number of address watch points.
    MAX_ALLOWED_NUM_POINTS: u32 = 100, since 1;
    /// Deprecated debugger: maximum address-watch buffer size.
    MAX_ALLOWED_AW_BUFF_SIZE: u32 = 4096, since 1;
    /// Deprecated debugger: maximum wave-control buffer size.
    MAX_ALLOWED_WAC_BUFF_SIZE: u32 = 128, since 1;
    /// `enum kfd_dbg_trap_override_mode`: OR the requested traps into the enabled ones.
    KFD_DBG_TRAP_OVERRIDE_OR: u32 = 0, since 13;
    /// `enum kfd_dbg_trap_override_mode`: replace the enabled traps.
    KFD_DBG_TRAP_OVERRIDE_REPLACE: u32 = 1, since 13;
    /// `enum kfd_dbg_trap_wave_launch_mode`: launch waves normally.
    KFD_DBG_TRAP_WAVE_LAUNCH_MODE_NORMAL: u32 = 0, since 13;
    /// `enum kfd_dbg_trap_wave_launch_mode`: launch waves halted.
    KFD_DBG_TRAP_WAVE_LAUNCH_MODE_HALT: u32 = 1, since 13;
    /// `enum kfd_dbg_trap_wave_launch_mode`: launch waves in debug (single-step) mode.
    KFD_DBG_TRAP_WAVE_LAUNCH_MODE_DEBUG: u32 = 3, since 13;
    /// `enum kfd_dbg_trap_address_watch_mode`: watch reads.
    KFD_DBG_TRAP_ADDRESS_WATCH_MODE_READ: u32 = 0, since 13;
    /// `enum kfd_dbg_trap_address_watch_mode`: watch non-reads.
    KFD_DBG_TRAP_ADDRESS_WATCH_MODE_NONREAD: u32 = 1, since 13;
    /// `enum kfd_dbg_trap_address_watch_mode`: watch atomics.
    KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ATOMIC: u32 = 2, since 13;
    /// `enum kfd_dbg_trap_address_watch_mode`: watch all accesses.
    KFD_DBG_TRAP_ADDRESS_WATCH_MODE_ALL: u32 = 3, since 13;
    /// `enum kfd_dbg_trap_exception_code`: no exception.
    EC_NONE: u32 = 0, since 13;
    /// Queue exception: wave abort.
    EC_QUEUE_WAVE_ABORT: u32 = 1, since 13;
    /// Queue exception: wave trap.
    EC_QUEUE_WAVE_TRAP: u32 = 2, since 13;
    /// Queue exception: wave math error.
    EC_QUEUE_WAVE_MATH_ERROR: u32 = 3, since 13;
    /// Queue exception: illegal instruction.
    EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION: u32 = 4, since 13;
    /// Queue exception: wave memory violation.
    EC_QUEUE_WAVE_MEMORY_VIOLATION: u32 = 5, since 13;
    /// Queue exception: aperture violation.
    EC_QUEUE_WAVE_APERTURE_VIOLATION: u32 = 6, since 13;
    /// Queue exception: invalid dispatch dimensions.
    EC_QUEUE_PACKET_DISPATCH_DIM_INVALID: u32 = 16, since 13;
    /// Queue exception: invalid group segment size.
    EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID: u32 = 17, since 13;
    /// Queue exception: invalid code object.
    EC_QUEUE_PACKET_DISPATCH_CODE_INVALID: u32 = 18, since 13;
    /// Queue exception: reserved packet type.
    EC_QUEUE_PACKET_RESERVED: u32 = 19, since 13;
    /// Queue exception: unsupported packet.
    EC_QUEUE_PACKET_UNSUPPORTED: u32 = 20, since 13;
    /// Queue exception: invalid work-group size.
    EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID: u32 = 21, since 13;
    /// Queue exception: invalid register count.
    EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID: u32 = 22, since 13;
    /// Queue exception: unsupported vendor packet.
    EC_QUEUE_PACKET_VENDOR_UNSUPPORTED: u32 = 23, since 13;
    /// Queue exception: preemption error.
    EC_QUEUE_PREEMPTION_ERROR: u32 = 30, since 13;
    /// Queue exception: a new queue.
    EC_QUEUE_NEW: u32 = 31, since 13;
    /// Device exception: a queue was deleted.
    EC_DEVICE_QUEUE_DELETE: u32 = 32, since 13;
    /// Device exception: memory violation.
    EC_DEVICE_MEMORY_VIOLATION: u32 = 33, since 13;
    /// Device exception: RAS error.
    EC_DEVICE_RAS_ERROR: u32 = 34, since 13;
    /// Device exception: fatal halt.
    EC_DEVICE_FATAL_HALT: u32 = 35, since 13;
    /// Device exception: a new device.
    EC_DEVICE_NEW: u32 = 36, since 13;
    /// Process exception: runtime enable (unblocks `AMDKFD_IOC_RUNTIME_ENABLE`).
    EC_PROCESS_RUNTIME: u32 = 48, since 13;
    /// Process exception: a device was removed.
    EC_PROCESS_DEVICE_REMOVE: u32 = 49, since 13;
    /// One past the largest exception code.
    EC_MAX: u32 = 50, since 13;
    /// Exception mask of every per-queue exception code.
    KFD_EC_MASK_QUEUE: u64 = kfd_ec_mask(EC_QUEUE_WAVE_ABORT)
        | kfd_ec_mask(EC_QUEUE_WAVE_TRAP)
        | kfd_ec_mask(EC_QUEUE_WAVE_MATH_ERROR)
        | kfd_ec_mask(EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION)
        | kfd_ec_mask(EC_QUEUE_WAVE_MEMORY_VIOLATION)
        | kfd_ec_mask(EC_QUEUE_WAVE_APERTURE_VIOLATION)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_DIM_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_CODE_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_RESERVED)
        | kfd_ec_mask(EC_QUEUE_PACKET_UNSUPPORTED)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_VENDOR_UNSUPPORTED)
        | kfd_ec_mask(EC_QUEUE_PREEMPTION_ERROR)
        | kfd_ec_mask(EC_QUEUE_NEW), since 13;
    /// Exception mask of every per-device exception code.
    KFD_EC_MASK_DEVICE: u64 = kfd_ec_mask(EC_DEVICE_QUEUE_DELETE)
        | kfd_ec_mask(EC_DEVICE_RAS_ERROR)
        | kfd_ec_mask(EC_DEVICE_FATAL_HALT)
        | kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION)
        | kfd_ec_mask(EC_DEVICE_NEW), since 13;
    /// Exception mask of every per-process exception code.
    KFD_EC_MASK_PROCESS: u64 =
        kfd_ec_mask(EC_PROCESS_RUNTIME) | kfd_ec_mask(EC_PROCESS_DEVICE_REMOVE), since 13;
    /// Exception mask of every packet exception code.
    ///
    /// Absent from the 1.15 header, present in the released 1.17 one.
    KFD_EC_MASK_PACKET: u64 = kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_DIM_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_CODE_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_RESERVED)
        | kfd_ec_mask(EC_QUEUE_PACKET_UNSUPPORTED)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID)
        | kfd_ec_mask(EC_QUEUE_PACKET_VENDOR_UNSUPPORTED), since 17;
    /// `enum kfd_dbg_runtime_state`: runtime disabled.
    DEBUG_RUNTIME_STATE_DISABLED: u32 = 0, since 13;
    /// `enum kfd_dbg_runtime_state`: runtime enabled.
    DEBUG_RUNTIME_STATE_ENABLED: u32 = 1, since 13;
    /// `enum kfd_dbg_runtime_state`: runtime enabled, busy.
    DEBUG_RUNTIME_STATE_ENABLED_BUSY: u32 = 2, since 13;
    /// `enum kfd_dbg_runtime_state`: runtime enabled, in error.
    DEBUG_RUNTIME_STATE_ENABLED_ERROR: u32 = 3, since 13;
    /// Bit of a suspend/resume queue id reporting a hardware failure.
    KFD_DBG_QUEUE_ERROR_BIT: u32 = 30, since 13;
    /// Bit of a suspend/resume queue id reporting a missing, new or dying queue.
    KFD_DBG_QUEUE_INVALID_BIT: u32 = 31, since 13;
    /// Mask of `KFD_DBG_QUEUE_ERROR_BIT`.
    KFD_DBG_QUEUE_ERROR_MASK: u32 = 1 << KFD_DBG_QUEUE_ERROR_BIT, since 13;
    /// Mask of `KFD_DBG_QUEUE_INVALID_BIT` (C spells it `1 << 31`, an `int`).
    KFD_DBG_QUEUE_INVALID_MASK: u32 = 1 << KFD_DBG_QUEUE_INVALID_BIT, since 13;
    /// `enum kfd_dbg_trap_operations`: enable debugging of the target process.
    KFD_IOC_DBG_TRAP_ENABLE: u32 = 0, since 13;
    /// `enum kfd_dbg_trap_operations`: disable debugging.
    KFD_IOC_DBG_TRAP_DISABLE: u32 = 1, since 13;
    /// `enum kfd_dbg_trap_operations`: raise exceptions to the runtime.
    KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT: u32 = 2, since 13;
    /// `enum kfd_dbg_trap_operations`: set the exceptions raised to the debugger.
    KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED: u32 = 3, since 13;
    /// `enum kfd_dbg_trap_operations`: enable hardware exceptions to trap.
    KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE: u32 = 4, since 13;
    /// `enum kfd_dbg_trap_operations`: set the wave launch mode.
    KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE: u32 = 5, since 13;
    /// `enum kfd_dbg_trap_operations`: suspend queues.
    KFD_IOC_DBG_TRAP_SUSPEND_QUEUES: u32 = 6, since 13;
    /// `enum kfd_dbg_trap_operations`: resume queues.
    KFD_IOC_DBG_TRAP_RESUME_QUEUES: u32 = 7, since 13;
    /// `enum kfd_dbg_trap_operations`: set an address watch on a device.
    KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH: u32 = 8, since 13;
    /// `enum kfd_dbg_trap_operations`: clear an address watch.
    KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH: u32 = 9, since 13;
    /// `enum kfd_dbg_trap_operations`: set wave behaviour flags.
    KFD_IOC_DBG_TRAP_SET_FLAGS: u32 = 10, since 13;
    /// `enum kfd_dbg_trap_operations`: find raised exceptions.
    KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT: u32 = 11, since 13;
    /// `enum kfd_dbg_trap_operations`: get details of a raised exception.
    KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO: u32 = 12, since 13;
    /// `enum kfd_dbg_trap_operations`: snapshot the queues.
    KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT: u32 = 13, since 13;
    /// `enum kfd_dbg_trap_operations`: snapshot the devices.
    KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT: u32 = 14, since 13;
}

abi_consts! {
    registry DBG_TRAP_MASK_CONSTS;
    /// `enum kfd_dbg_trap_mask`: trap on invalid floating-point operations.
    KFD_DBG_TRAP_MASK_FP_INVALID: u32 = 1, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on denormal floating-point input.
    KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL: u32 = 2, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on floating-point division by zero.
    KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO: u32 = 4, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on floating-point overflow.
    KFD_DBG_TRAP_MASK_FP_OVERFLOW: u32 = 8, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on floating-point underflow.
    KFD_DBG_TRAP_MASK_FP_UNDERFLOW: u32 = 16, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on inexact floating-point results.
    KFD_DBG_TRAP_MASK_FP_INEXACT: u32 = 32, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on integer division by zero.
    KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO: u32 = 64, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on address watch hits.
    KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH: u32 = 128, since 13;
    /// `enum kfd_dbg_trap_mask`: trap on memory violations.
    KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION: u32 = 256, since 13;
    /// `enum kfd_dbg_trap_mask`: trap when a wave starts.
    KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START: u32 = 1 << 30, since 13;
    /// `enum kfd_dbg_trap_mask`: trap when a wave ends (C's enum value is `1 << 31`, an `int`).
    KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END: u32 = 1 << 31, since 13;
}

abi_consts! {
    registry DBG_TRAP_FLAG_CONSTS;
    /// `enum kfd_dbg_trap_flags`: single memory operation per wave.
    KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP: u32 = 1, since 13;
    /// `enum kfd_dbg_trap_flags`: single ALU operation per wave.
    ///
    /// Landed right after the 1.16 change; absent from 1.15, present in the released 1.17
    /// header, so 1.17 is the first minor verified to have it.
    KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP: u32 = 2, since 17;
    /// `enum kfd_dbg_trap_flags`: raise LDS out-of-address-range exceptions.
    KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE: u32 = 4, since 21;
}

abi_consts! {
    registry RUNTIME_MODE_CONSTS;
    /// `runtime_enable.mode_mask`: enable the runtime for debugging (else disable).
    KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK: u32 = 1, since 13;
    /// `runtime_enable.mode_mask`: enable the trap temporary setup.
    KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK: u32 = 2, since 13;
}

/// Returns the exception-mask bit of exception code `ecode` (`1 << (ecode - 1)`).
///
/// C leaves codes outside `1..=64` undefined; this returns 0 for them.
#[doc(alias = "KFD_EC_MASK")]
pub const fn kfd_ec_mask(ecode: u32) -> u64 {
    if ecode == 0 || ecode > 64 {
        0
    } else {
        1u64 << (ecode - 1)
    }
}

/// Returns whether `ecode` is a valid exception code (`EC_NONE < ecode < EC_MAX`).
#[doc(alias = "KFD_DBG_EC_IS_VALID")]
pub const fn kfd_dbg_ec_is_valid(ecode: u32) -> bool {
    ecode > EC_NONE && ecode < EC_MAX
}

/// Returns whether `ecode` is a valid per-queue exception code.
#[doc(alias = "KFD_DBG_EC_TYPE_IS_QUEUE")]
pub const fn kfd_dbg_ec_type_is_queue(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_QUEUE != 0
}

/// Returns whether `ecode` is a valid per-device exception code.
#[doc(alias = "KFD_DBG_EC_TYPE_IS_DEVICE")]
pub const fn kfd_dbg_ec_type_is_device(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_DEVICE != 0
}

/// Returns whether `ecode` is a valid per-process exception code.
#[doc(alias = "KFD_DBG_EC_TYPE_IS_PROCESS")]
pub const fn kfd_dbg_ec_type_is_process(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_PROCESS != 0
}

/// Returns whether `ecode` is a valid packet exception code.
#[doc(alias = "KFD_DBG_EC_TYPE_IS_PACKET")]
pub const fn kfd_dbg_ec_type_is_packet(ecode: u32) -> bool {
    kfd_dbg_ec_is_valid(ecode) && kfd_ec_mask(ecode) & KFD_EC_MASK_PACKET != 0
}

/// The function-like macros mirrored in this module. The `TYPE_IS_*` checks gained their
/// validity test in the 1.17 header; the Rust functions implement that newer meaning.
pub(crate) const DEBUG_MACROS: &[MacroLayout] = &[
    MacroLayout {
        name: "KFD_EC_MASK",
        since_minor: 13,
        kind: MacroKind::Function {
            rust_name: "kfd_ec_mask",
        },
    },
    MacroLayout {
        name: "KFD_DBG_EC_IS_VALID",
        since_minor: 17,
        kind: MacroKind::Function {
            rust_name: "kfd_dbg_ec_is_valid",
        },
    },
    MacroLayout {
        name: "KFD_DBG_EC_TYPE_IS_QUEUE",
        since_minor: 17,
        kind: MacroKind::Function {
            rust_name: "kfd_dbg_ec_type_is_queue",
        },
    },
    MacroLayout {
        name: "KFD_DBG_EC_TYPE_IS_DEVICE",
        since_minor: 17,
        kind: MacroKind::Function {
            rust_name: "kfd_dbg_ec_type_is_device",
        },
    },
    MacroLayout {
        name: "KFD_DBG_EC_TYPE_IS_PROCESS",
        since_minor: 17,
        kind: MacroKind::Function {
            rust_name: "kfd_dbg_ec_type_is_process",
        },
    },
    MacroLayout {
        name: "KFD_DBG_EC_TYPE_IS_PACKET",
        since_minor: 17,
        kind: MacroKind::Function {
            rust_name: "kfd_dbg_ec_type_is_packet",
        },
    },
];

abi_structs! {
    registry DEBUG_STRUCTS;
    /// Arguments of the deprecated `AMDKFD_IOC_DBG_REGISTER_DEPRECATED` (the kernel returns
    /// `EPERM`).
    struct kfd_ioctl_dbg_register_args [since 1, size 8] {
        /// The GPU (to KFD).
        @0 field gpu_id: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of the deprecated `AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED`.
    struct kfd_ioctl_dbg_unregister_args [since 1, size 8] {
        /// The GPU (to KFD).
        @0 field gpu_id: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of the deprecated `AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED`.
    struct kfd_ioctl_dbg_address_watch_args [since 1, size 16] {
        /// User pointer to the watch content.
        @0 field content_ptr: u64;
        /// The GPU (to KFD).
        @8 field gpu_id: u32;
        /// Size of the content, including `gpu_id` and this field.
        @12 field buf_size_in_bytes: u32;
    }

    /// Arguments of the deprecated `AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED`.
    struct kfd_ioctl_dbg_wave_control_args [since 1, size 16] {
        /// User pointer to the wave-control content.
        @0 field content_ptr: u64;
        /// The GPU (to KFD).
        @8 field gpu_id: u32;
        /// Size of the content, including `gpu_id` and this field.
        @12 field buf_size_in_bytes: u32;
    }

    /// One device of `KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT`.
    ///
    /// 120 bytes until `capability2` and `pad` were added right after the 1.22 bump.
    struct kfd_dbg_device_info_entry [since 13, size 128 since 22, was 120 since 13] {
        /// Raised exceptions of the device.
        @0 field exception_status: u64;
        /// Base of the LDS aperture.
        @8 field lds_base: u64;
        /// Limit of the LDS aperture.
        @16 field lds_limit: u64;
        /// Base of the scratch aperture.
        @24 field scratch_base: u64;
        /// Limit of the scratch aperture.
        @32 field scratch_limit: u64;
        /// Base of the GPUVM aperture.
        @40 field gpuvm_base: u64;
        /// Limit of the GPUVM aperture.
        @48 field gpuvm_limit: u64;
        /// The GPU.
        @56 field gpu_id: u32;
        /// PCI location.
        @60 field location_id: u32;
        /// PCI vendor id.
        @64 field vendor_id: u32;
        /// PCI device id.
        @68 field device_id: u32;
        /// PCI revision id.
        @72 field revision_id: u32;
        /// PCI subsystem vendor id.
        @76 field subsystem_vendor_id: u32;
        /// PCI subsystem device id.
        @80 field subsystem_device_id: u32;
        /// Firmware version.
        @84 field fw_version: u32;
        /// GFX target version.
        @88 field gfx_target_version: u32;
        /// Number of SIMDs.
        @92 field simd_count: u32;
        /// Maximum waves per SIMD.
        @96 field max_waves_per_simd: u32;
        /// Number of shader arrays.
        @100 field array_count: u32;
        /// Shader arrays per engine.
        @104 field simd_arrays_per_engine: u32;
        /// Number of XCCs.
        @108 field num_xcc: u32;
        /// Topology capability bits.
        @112 field capability: u32;
        /// Topology debug properties.
        @116 field debug_prop: u32;
        /// Topology capability2 bits.
        @120 field capability2: u32, since 22;
        /// Reserved.
        @124 field pad: u32, since 22;
    }

    /// Runtime state shared with the debugger (`KFD_IOC_DBG_TRAP_ENABLE`,
    /// `EC_PROCESS_RUNTIME` info).
    struct kfd_runtime_info [since 13, size 16] {
        /// The runtime's `r_debug` pointer.
        @0 field r_debug: u64;
        /// `DEBUG_RUNTIME_STATE_*`.
        @8 field runtime_state: u32;
        /// Non-zero when the trap temporaries are set up.
        @12 field ttmp_setup: u32;
    }

    /// Arguments of `AMDKFD_IOC_RUNTIME_ENABLE`.
    struct kfd_ioctl_runtime_enable_args [since 13, size 16] {
        /// Pointer to the runtime's `r_debug` shared with the debugger.
        @0 field r_debug: u64;
        /// `KFD_RUNTIME_ENABLE_MODE_*`.
        @8 field mode_mask: u32;
        /// What KFD supports (mainline never writes it).
        @12 field capabilities_mask: u32;
    }

    /// One queue of `KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT`.
    struct kfd_queue_snapshot_entry [since 13, size 64] {
        /// Raised exceptions of the queue.
        @0 field exception_status: u64;
        /// GPU VA of the ring.
        @8 field ring_base_address: u64;
        /// GPU VA of the write pointer.
        @16 field write_pointer_address: u64;
        /// GPU VA of the read pointer.
        @24 field read_pointer_address: u64;
        /// GPU VA of the context save area.
        @32 field ctx_save_restore_address: u64;
        /// The queue.
        @40 field queue_id: u32;
        /// The GPU.
        @44 field gpu_id: u32;
        /// Ring size in bytes.
        @48 field ring_size: u32;
        /// `KFD_IOC_QUEUE_TYPE_*`.
        @52 field queue_type: u32;
        /// Size of the context save area.
        @56 field ctx_save_restore_area_size: u32;
        /// Reserved.
        @60 field reserved: u32;
    }

    /// Header of a queue's context save area, written when the debugger suspends the queue.
    struct kfd_context_save_area_header [since 13, size 40] {
        /// Control stack and wave state location (an anonymous struct in C).
        @0 field wave_state: kfd_context_save_area_header_wave_state;
        /// Offset of the debug data.
        @16 field debug_offset: u32;
        /// Size of the debug data.
        @20 field debug_size: u32;
        /// Address of the error payload.
        @24 field err_payload_addr: u64;
        /// The error event.
        @32 field err_event_id: u32;
        /// Reserved.
        @36 field reserved1: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_ENABLE`.
    struct kfd_ioctl_dbg_trap_enable_args [since 13, size 24] {
        /// Exceptions to raise to the debugger (`KFD_EC_MASK` bits).
        @0 field exception_mask: u64;
        /// User pointer to a `kfd_runtime_info` buffer.
        @8 field rinfo_ptr: u64;
        /// In: size of that buffer; out: size KFD saved.
        @16 field rinfo_size: u32;
        /// The fd KFD notifies the debugger on.
        @20 field dbg_fd: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT`.
    struct kfd_ioctl_dbg_trap_send_runtime_event_args [since 13, size 16] {
        /// Exceptions to raise to the runtime.
        @0 field exception_mask: u64;
        /// Target GPU.
        @8 field gpu_id: u32;
        /// Target queue.
        @12 field queue_id: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED`.
    struct kfd_ioctl_dbg_trap_set_exceptions_enabled_args [since 13, size 8] {
        /// New exceptions to raise to the debugger.
        @0 field exception_mask: u64;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE`.
    struct kfd_ioctl_dbg_trap_set_wave_launch_override_args [since 13, size 16] {
        /// `KFD_DBG_TRAP_OVERRIDE_*`.
        @0 field override_mode: u32;
        /// In: traps to enable; out: traps previously enabled (`KFD_DBG_TRAP_MASK_*`).
        @4 field enable_mask: u32;
        /// In: traps to check; out: traps supported.
        @8 field support_request_mask: u32;
        /// Reserved.
        @12 field pad: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE`.
    struct kfd_ioctl_dbg_trap_set_wave_launch_mode_args [since 13, size 8] {
        /// `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_*`.
        @0 field launch_mode: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SUSPEND_QUEUES`.
    struct kfd_ioctl_dbg_trap_suspend_queues_args [since 13, size 24] {
        /// Raised exceptions to clear.
        @0 field exception_mask: u64;
        /// User pointer to the `u32` queue ids.
        @8 field queue_array_ptr: u64;
        /// Number of queue ids.
        @16 field num_queues: u32;
        /// Wave time allowance before preemption, in units of 1K GPU clocks.
        @20 field grace_period: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_RESUME_QUEUES`.
    struct kfd_ioctl_dbg_trap_resume_queues_args [since 13, size 16] {
        /// User pointer to the `u32` queue ids.
        @0 field queue_array_ptr: u64;
        /// Number of queue ids.
        @8 field num_queues: u32;
        /// Reserved.
        @12 field pad: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH`.
    struct kfd_ioctl_dbg_trap_set_node_address_watch_args [since 13, size 24] {
        /// Address to watch.
        @0 field address: u64;
        /// `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_*`.
        @8 field mode: u32;
        /// Address mask.
        @12 field mask: u32;
        /// Target GPU.
        @16 field gpu_id: u32;
        /// The allocated watch id (out).
        @20 field id: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH`.
    struct kfd_ioctl_dbg_trap_clear_node_address_watch_args [since 13, size 8] {
        /// Target GPU.
        @0 field gpu_id: u32;
        /// The watch id to clear.
        @4 field id: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_SET_FLAGS`.
    struct kfd_ioctl_dbg_trap_set_flags_args [since 13, size 8] {
        /// In: `KFD_DBG_TRAP_FLAG_*` to enable; out: flags previously enabled.
        @0 field flags: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT`.
    struct kfd_ioctl_dbg_trap_query_debug_event_args [since 13, size 16] {
        /// In: exceptions to clear; out: exceptions raised.
        @0 field exception_mask: u64;
        /// The GPU that raised them (out).
        @8 field gpu_id: u32;
        /// The queue that raised them (out).
        @12 field queue_id: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO`.
    struct kfd_ioctl_dbg_trap_query_exception_info_args [since 13, size 24] {
        /// User pointer to the info buffer.
        @0 field info_ptr: u64;
        /// In: size of that buffer; out: size needed.
        @8 field info_size: u32;
        /// Target GPU or queue.
        @12 field source_id: u32;
        /// The exception code.
        @16 field exception_code: u32;
        /// Non-zero to clear the exception.
        @20 field clear_exception: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT`.
    struct kfd_ioctl_dbg_trap_queue_snapshot_args [since 13, size 24] {
        /// Raised exceptions to clear.
        @0 field exception_mask: u64;
        /// User pointer to `kfd_queue_snapshot_entry` records.
        @8 field snapshot_buf_ptr: u64;
        /// In: capacity in entries; out: queues that exist.
        @16 field num_queues: u32;
        /// In: stride of an entry; out: bytes KFD fills per entry.
        @20 field entry_size: u32;
    }

    /// Arguments of `KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT`.
    struct kfd_ioctl_dbg_trap_device_snapshot_args [since 13, size 24] {
        /// Raised exceptions to clear.
        @0 field exception_mask: u64;
        /// User pointer to `kfd_dbg_device_info_entry` records.
        @8 field snapshot_buf_ptr: u64;
        /// In: capacity in entries; out: devices that exist.
        @16 field num_devices: u32;
        /// In: stride of an entry; out: bytes KFD fills per entry.
        @20 field entry_size: u32;
    }

    /// Arguments of `AMDKFD_IOC_DBG_TRAP`.
    ///
    /// C puts an anonymous union of the operations' arguments at offset 8; it is stored here
    /// as `data` and read and written through the member accessors, chosen by `op`.
    struct kfd_ioctl_dbg_trap_args [since 13, size 32] {
        /// The process to debug.
        @0 field pid: u32;
        /// `KFD_IOC_DBG_TRAP_*`.
        @4 field op: u32;
        /// Storage of the anonymous C union (24 bytes); use the member accessors.
        @8 union data: [u64; 3];
    }
    union data {
        /// Arguments of `KFD_IOC_DBG_TRAP_ENABLE`.
        enable: kfd_ioctl_dbg_trap_enable_args, set set_enable;
        /// Arguments of `KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT`.
        send_runtime_event: kfd_ioctl_dbg_trap_send_runtime_event_args, set set_send_runtime_event;
        /// Arguments of `KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED`.
        set_exceptions_enabled: kfd_ioctl_dbg_trap_set_exceptions_enabled_args,
            set set_set_exceptions_enabled;
        /// Arguments of `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE`.
        launch_override: kfd_ioctl_dbg_trap_set_wave_launch_override_args, set set_launch_override;
        /// Arguments of `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE`.
        launch_mode: kfd_ioctl_dbg_trap_set_wave_launch_mode_args, set set_launch_mode;
        /// Arguments of `KFD_IOC_DBG_TRAP_SUSPEND_QUEUES`.
        suspend_queues: kfd_ioctl_dbg_trap_suspend_queues_args, set set_suspend_queues;
        /// Arguments of `KFD_IOC_DBG_TRAP_RESUME_QUEUES`.
        resume_queues: kfd_ioctl_dbg_trap_resume_queues_args, set set_resume_queues;
        /// Arguments of `KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH`.
        set_node_address_watch: kfd_ioctl_dbg_trap_set_node_address_watch_args,
            set set_set_node_address_watch;
        /// Arguments of `KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH`.
        clear_node_address_watch: kfd_ioctl_dbg_trap_clear_node_address_watch_args,
            set set_clear_node_address_watch;
        /// Arguments of `KFD_IOC_DBG_TRAP_SET_FLAGS`.
        set_flags: kfd_ioctl_dbg_trap_set_flags_args, set set_set_flags;
        /// Arguments of `KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT`.
        query_debug_event: kfd_ioctl_dbg_trap_query_debug_event_args, set set_query_debug_event;
        /// Arguments of `KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO`.
        query_exception_info: kfd_ioctl_dbg_trap_query_exception_info_args,
            set set_query_exception_info;
        /// Arguments of `KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT`.
        queue_snapshot: kfd_ioctl_dbg_trap_queue_snapshot_args, set set_queue_snapshot;
        /// Arguments of `KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT`.
        device_snapshot: kfd_ioctl_dbg_trap_device_snapshot_args, set set_device_snapshot;
    }
}

abi_structs! {
    registry DEBUG_NESTED_STRUCTS;
    /// The anonymous `wave_state` struct of `kfd_context_save_area_header` (C gives it no
    /// name; its fields are checked through the parent's `wave_state.*` members).
    struct kfd_context_save_area_header_wave_state [since 13, size 16] {
        /// Offset of the control stack.
        @0 field control_stack_offset: u32;
        /// Size of the control stack.
        @4 field control_stack_size: u32;
        /// Offset of the wave state.
        @8 field wave_state_offset: u32;
        /// Size of the wave state.
        @12 field wave_state_size: u32;
    }
}

// The nested struct has no C name to take `sizeof` of, so it stays out of `layout::STRUCTS`.
const _: () = assert!(DEBUG_NESTED_STRUCTS.len() == 1);
