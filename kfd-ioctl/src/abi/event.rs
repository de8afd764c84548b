//! Events: creation, signalling, waiting, and the per-event data the kernel fills in.

abi_consts! {
    registry EVENT_CONSTS;
    /// `event_type` (matches `HSA_EVENTTYPE`): a signal event.
    KFD_IOC_EVENT_SIGNAL: u32 = 0, since 1;
    /// `event_type`: a node change.
    KFD_IOC_EVENT_NODECHANGE: u32 = 1, since 1;
    /// `event_type`: a device state change.
    KFD_IOC_EVENT_DEVICESTATECHANGE: u32 = 2, since 1;
    /// `event_type`: a hardware exception (GPU reset).
    KFD_IOC_EVENT_HW_EXCEPTION: u32 = 3, since 1;
    /// `event_type`: a system event.
    KFD_IOC_EVENT_SYSTEM_EVENT: u32 = 4, since 1;
    /// `event_type`: a debug event.
    KFD_IOC_EVENT_DEBUG_EVENT: u32 = 5, since 1;
    /// `event_type`: a profile event.
    KFD_IOC_EVENT_PROFILE_EVENT: u32 = 6, since 1;
    /// `event_type`: a queue event.
    KFD_IOC_EVENT_QUEUE_EVENT: u32 = 7, since 1;
    /// `event_type`: a memory exception (GPU VM fault).
    KFD_IOC_EVENT_MEMORY: u32 = 8, since 1;
    /// `wait_result`: the wait completed.
    KFD_IOC_WAIT_RESULT_COMPLETE: u32 = 0, since 1;
    /// `wait_result`: the wait timed out.
    KFD_IOC_WAIT_RESULT_TIMEOUT: u32 = 1, since 1;
    /// `wait_result`: the wait failed.
    KFD_IOC_WAIT_RESULT_FAIL: u32 = 2, since 1;
    /// Number of signal event slots per process.
    KFD_SIGNAL_EVENT_LIMIT: u32 = 4096, since 1;
    /// `hw_exception_data.reset_type`: the whole GPU was reset.
    KFD_HW_EXCEPTION_WHOLE_GPU_RESET: u32 = 0, since 1;
    /// `hw_exception_data.reset_type`: one engine was reset.
    KFD_HW_EXCEPTION_PER_ENGINE_RESET: u32 = 1, since 1;
    /// `hw_exception_data.reset_cause`: a GPU hang.
    KFD_HW_EXCEPTION_GPU_HANG: u32 = 0, since 1;
    /// `hw_exception_data.reset_cause`: an ECC error.
    KFD_HW_EXCEPTION_ECC: u32 = 1, since 1;
    /// `memory_exception_data.ErrorType`: no RAS error.
    KFD_MEM_ERR_NO_RAS: u32 = 0, since 1;
    /// `memory_exception_data.ErrorType`: SRAM ECC error.
    KFD_MEM_ERR_SRAM_ECC: u32 = 1, since 1;
    /// `memory_exception_data.ErrorType`: poison consumed (link SYNFLOOD).
    KFD_MEM_ERR_POISON_CONSUMED: u32 = 2, since 1;
    /// `memory_exception_data.ErrorType`: GPU hang not attributable to a specific cause.
    KFD_MEM_ERR_GPU_HANG: u32 = 3, since 1;
}

abi_structs! {
    registry EVENT_STRUCTS;
    /// Arguments of `AMDKFD_IOC_CREATE_EVENT`.
    struct kfd_ioctl_create_event_args [since 1, size 32] {
        /// mmap offset of the event page on `/dev/kfd` (from KFD).
        @0 field event_page_offset: u64;
        /// Signal events only: the trigger data (from KFD).
        @8 field event_trigger_data: u32;
        /// `KFD_IOC_EVENT_*` (to KFD).
        @12 field event_type: u32;
        /// Non-zero for an auto-reset event (to KFD).
        @16 field auto_reset: u32;
        /// Node, for event types that take one (to KFD).
        @20 field node_id: u32;
        /// The new event's id (from KFD).
        @24 field event_id: u32;
        /// The event's slot in the event page (from KFD).
        @28 field event_slot_index: u32;
    }

    /// Arguments of `AMDKFD_IOC_DESTROY_EVENT`.
    struct kfd_ioctl_destroy_event_args [since 1, size 8] {
        /// The event (to KFD).
        @0 field event_id: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_SET_EVENT`.
    struct kfd_ioctl_set_event_args [since 1, size 8] {
        /// The event (to KFD).
        @0 field event_id: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_RESET_EVENT`.
    struct kfd_ioctl_reset_event_args [since 1, size 8] {
        /// The event (to KFD).
        @0 field event_id: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Why a GPU memory access failed.
    struct kfd_memory_exception_failure [since 1, size 16] {
        /// Page not present or supervisor privilege.
        @0 field NotPresent: u32;
        /// Write access to a read-only page.
        @4 field ReadOnly: u32;
        /// Execute access to a page marked no-execute.
        @8 field NoExecute: u32;
        /// The exact fault address is unknown.
        @12 field imprecise: u32;
    }

    /// Memory exception data of a `KFD_IOC_EVENT_MEMORY` event.
    struct kfd_hsa_memory_exception_data [since 1, size 32] {
        /// What failed.
        @0 field failure: kfd_memory_exception_failure;
        /// The faulting virtual address.
        @16 field va: u64;
        /// The GPU.
        @24 field gpu_id: u32;
        /// `KFD_MEM_ERR_*`.
        @28 field ErrorType: u32;
    }

    /// Hardware exception data of a `KFD_IOC_EVENT_HW_EXCEPTION` event.
    struct kfd_hsa_hw_exception_data [since 1, size 16] {
        /// `KFD_HW_EXCEPTION_WHOLE_GPU_RESET` or `..._PER_ENGINE_RESET`.
        @0 field reset_type: u32;
        /// `KFD_HW_EXCEPTION_GPU_HANG` or `..._ECC`.
        @4 field reset_cause: u32;
        /// Non-zero when VRAM contents were lost.
        @8 field memory_lost: u32;
        /// The GPU.
        @12 field gpu_id: u32;
    }

    /// Signal event data: the event's age, to and from KFD.
    struct kfd_hsa_signal_event_data [since 14, size 8] {
        /// The last age seen (to KFD) and the current age (from KFD).
        @0 field last_event_age: u64;
    }

    /// One entry of the `events_ptr` array of `AMDKFD_IOC_WAIT_EVENTS`.
    ///
    /// C puts an anonymous union at offset 0; it is stored here as `data` and read and written
    /// through the member accessors.
    struct kfd_event_data [since 1, size 48] {
        /// Storage of the anonymous C union (32 bytes); use the member accessors.
        @0 union data: [u64; 4];
        /// Pointer to an extension structure for future exception types.
        @32 field kfd_event_data_ext: u64;
        /// The event (to KFD).
        @40 field event_id: u32;
        /// Reserved.
        @44 field pad: u32;
    }
    union data {
        /// Memory exception data (from KFD).
        memory_exception_data: kfd_hsa_memory_exception_data, set set_memory_exception_data;
        /// Hardware exception data (from KFD).
        hw_exception_data: kfd_hsa_hw_exception_data, set set_hw_exception_data;
        /// Signal event data (to and from KFD).
        signal_event_data: kfd_hsa_signal_event_data, set set_signal_event_data, since 14;
    }

    /// Arguments of `AMDKFD_IOC_WAIT_EVENTS`.
    struct kfd_ioctl_wait_events_args [since 1, size 24] {
        /// User pointer to a `kfd_event_data` array (to KFD).
        @0 field events_ptr: u64;
        /// Length of that array (to KFD).
        @8 field num_events: u32;
        /// Non-zero to wait for all events rather than any (to KFD).
        @12 field wait_for_all: u32;
        /// Timeout in milliseconds (to KFD).
        @16 field timeout: u32;
        /// `KFD_IOC_WAIT_RESULT_*` (from KFD).
        @20 field wait_result: u32;
    }
}
