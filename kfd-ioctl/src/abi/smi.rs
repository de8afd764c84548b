//! SMI (System Management Interface) events: the event fd of `AMDKFD_IOC_SMI_EVENTS`, event
//! ids, trigger codes and the text format of each event record.
//!
//! The enum values below are those of the enum introduced with the 1.10 SMI event rework
//! (profiler events); the header already had SMI support from 1.3 in another form, so 1.10
//! is the first minor these values are claimed for.

use super::layout::types::{MacroKind, MacroLayout};

abi_consts! {
    registry SMI_CONSTS;
    /// `enum kfd_smi_event`: not an event.
    KFD_SMI_EVENT_NONE: u32 = 0, since 10;
    /// `enum kfd_smi_event`: a GPU VM fault.
    KFD_SMI_EVENT_VMFAULT: u32 = 1, since 10;
    /// `enum kfd_smi_event`: thermal throttling.
    KFD_SMI_EVENT_THERMAL_THROTTLE: u32 = 2, since 10;
    /// `enum kfd_smi_event`: a GPU reset is about to happen.
    KFD_SMI_EVENT_GPU_PRE_RESET: u32 = 3, since 10;
    /// `enum kfd_smi_event`: a GPU reset happened.
    KFD_SMI_EVENT_GPU_POST_RESET: u32 = 4, since 10;
    /// `enum kfd_smi_event`: a page migration started.
    KFD_SMI_EVENT_MIGRATE_START: u32 = 5, since 10;
    /// `enum kfd_smi_event`: a page migration ended.
    KFD_SMI_EVENT_MIGRATE_END: u32 = 6, since 10;
    /// `enum kfd_smi_event`: a GPU page fault started being handled.
    KFD_SMI_EVENT_PAGE_FAULT_START: u32 = 7, since 10;
    /// `enum kfd_smi_event`: a GPU page fault was recovered.
    KFD_SMI_EVENT_PAGE_FAULT_END: u32 = 8, since 10;
    /// `enum kfd_smi_event`: the process's queues were evicted.
    KFD_SMI_EVENT_QUEUE_EVICTION: u32 = 9, since 10;
    /// `enum kfd_smi_event`: the process's queues were restored.
    KFD_SMI_EVENT_QUEUE_RESTORE: u32 = 10, since 10;
    /// `enum kfd_smi_event`: a range was unmapped from a GPU.
    KFD_SMI_EVENT_UNMAP_FROM_GPU: u32 = 11, since 10;
    /// `enum kfd_smi_event`: a process started using the GPU.
    ///
    /// Landed after the 1.18 bump and before the 1.19 one, so 1.19 is the first minor that
    /// always has it.
    KFD_SMI_EVENT_PROCESS_START: u32 = 12, since 19;
    /// `enum kfd_smi_event`: a process stopped using the GPU (see `PROCESS_START`).
    KFD_SMI_EVENT_PROCESS_END: u32 = 13, since 19;
    /// `enum kfd_smi_event`: not an event but a mask index: also deliver other processes'
    /// events (requires `CAP_SYS_ADMIN`).
    KFD_SMI_EVENT_ALL_PROCESS: u32 = 64, since 10;
    /// `enum KFD_MIGRATE_TRIGGERS`: prefetch to VRAM or system memory.
    KFD_MIGRATE_TRIGGER_PREFETCH: u32 = 0, since 10;
    /// `enum KFD_MIGRATE_TRIGGERS`: GPU page fault recovery.
    KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU: u32 = 1, since 10;
    /// `enum KFD_MIGRATE_TRIGGERS`: CPU page fault recovery.
    KFD_MIGRATE_TRIGGER_PAGEFAULT_CPU: u32 = 2, since 10;
    /// `enum KFD_MIGRATE_TRIGGERS`: TTM eviction.
    KFD_MIGRATE_TRIGGER_TTM_EVICTION: u32 = 3, since 10;
    /// `enum KFD_QUEUE_EVICTION_TRIGGERS`: SVM buffer migration.
    KFD_QUEUE_EVICTION_TRIGGER_SVM: u32 = 0, since 10;
    /// `enum KFD_QUEUE_EVICTION_TRIGGERS`: userptr movement.
    KFD_QUEUE_EVICTION_TRIGGER_USERPTR: u32 = 1, since 10;
    /// `enum KFD_QUEUE_EVICTION_TRIGGERS`: TTM buffer move.
    KFD_QUEUE_EVICTION_TRIGGER_TTM: u32 = 2, since 10;
    /// `enum KFD_QUEUE_EVICTION_TRIGGERS`: GPU suspend.
    KFD_QUEUE_EVICTION_TRIGGER_SUSPEND: u32 = 3, since 10;
    /// `enum KFD_QUEUE_EVICTION_TRIGGERS`: CRIU checkpoint.
    KFD_QUEUE_EVICTION_CRIU_CHECKPOINT: u32 = 4, since 10;
    /// `enum KFD_QUEUE_EVICTION_TRIGGERS`: CRIU restore.
    KFD_QUEUE_EVICTION_CRIU_RESTORE: u32 = 5, since 10;
    /// `enum KFD_SVM_UNMAP_TRIGGERS`: MMU notifier, CPU buffer movement.
    KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY: u32 = 0, since 10;
    /// `enum KFD_SVM_UNMAP_TRIGGERS`: MMU notifier, page migration.
    KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE: u32 = 1, since 10;
    /// `enum KFD_SVM_UNMAP_TRIGGERS`: unmap to free the buffer.
    KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU: u32 = 2, since 10;
    /// Size of the kernel's buffer for one event record, so a record is at most 95 bytes.
    ///
    /// Present in the 1.11 header; 1.11 is the first minor verified to have it.
    KFD_SMI_EVENT_MSG_SIZE: usize = 96, since 11;
}

/// Returns the enable-mask bit of SMI event `index` (`1 << (index - 1)`).
///
/// C leaves indices outside `1..=64` undefined; this returns 0 for them.
#[doc(alias = "KFD_SMI_EVENT_MASK_FROM_INDEX")]
pub const fn kfd_smi_event_mask_from_index(index: u32) -> u64 {
    if index == 0 || index > 64 {
        0
    } else {
        1u64 << (index - 1)
    }
}

abi_structs! {
    registry SMI_STRUCTS;
    /// Arguments of `AMDKFD_IOC_SMI_EVENTS`: open an SMI event fd for a GPU.
    struct kfd_ioctl_smi_events_args [since 3, size 8] {
        /// The GPU (to KFD).
        @0 field gpuid: u32;
        /// The new event fd (from KFD).
        @4 field anon_fd: u32;
    }
}

/// Defines the `KFD_EVENT_FMT_*` format strings and their registry entries.
macro_rules! event_formats {
    ($($(#[$meta:meta])* $name:ident = $value:literal, since $since:literal;)*) => {
        $(
            $(#[$meta])*
            #[doc = concat!("\n\nThe printf format of the C macro `", stringify!($name), "`, since KFD 1.", $since, ".")]
            pub const $name: &str = $value;
        )*

        /// The function-like macros mirrored in this module.
        pub(crate) const SMI_MACROS: &[MacroLayout] = &[
            MacroLayout {
                name: "KFD_SMI_EVENT_MASK_FROM_INDEX",
                since_minor: 10,
                kind: MacroKind::Function { rust_name: "kfd_smi_event_mask_from_index" },
            },
            $(MacroLayout {
                name: stringify!($name),
                since_minor: $since,
                kind: MacroKind::Format { value: $value },
            }),*
        ];
    };
}

// The formats entered the uapi header after 1.15 (absent there) and are in the released 1.17
// header; MIGRATE_END gained its error code after 1.17 (verified only in 1.23).
event_formats! {
    /// Format of GPU_PRE_RESET/GPU_POST_RESET records: reset sequence number, reset cause.
    KFD_EVENT_FMT_UPDATE_GPU_RESET = "%x %s\n", since 17;
    /// Format of THERMAL_THROTTLE records: throttle bitmask, throttle counter.
    KFD_EVENT_FMT_THERMAL_THROTTLING = "%llx:%llx\n", since 17;
    /// Format of VMFAULT records: pid (hex), task name.
    KFD_EVENT_FMT_VMFAULT = "%x:%s\n", since 17;
    /// Format of PAGE_FAULT_START records: ns, pid, address in pages, gpu_id, 'W' or 'R'.
    KFD_EVENT_FMT_PAGEFAULT_START = "%lld -%d @%lx(%x) %c\n", since 17;
    /// Format of PAGE_FAULT_END records: ns, pid, address in pages, gpu_id, 'M' or 'U'.
    KFD_EVENT_FMT_PAGEFAULT_END = "%lld -%d @%lx(%x) %c\n", since 17;
    /// Format of MIGRATE_START records: ns, pid, start, pages, from, to, prefetch_loc,
    /// preferred_loc, trigger.
    KFD_EVENT_FMT_MIGRATE_START = "%lld -%d @%lx(%lx) %x->%x %x:%x %d\n", since 17;
    /// Format of MIGRATE_END records: ns, pid, start, pages, from, to, trigger, error code.
    KFD_EVENT_FMT_MIGRATE_END = "%lld -%d @%lx(%lx) %x->%x %d %d\n", since 23;
    /// Format of QUEUE_EVICTION records: ns, pid, gpu_id, trigger.
    KFD_EVENT_FMT_QUEUE_EVICTION = "%lld -%d %x %d\n", since 17;
    /// Format of QUEUE_RESTORE records: ns, pid, gpu_id, 'R' if rescheduled.
    KFD_EVENT_FMT_QUEUE_RESTORE = "%lld -%d %x %c\n", since 17;
    /// Format of UNMAP_FROM_GPU records: ns, pid, start, pages, gpu_id, trigger.
    KFD_EVENT_FMT_UNMAP_FROM_GPU = "%lld -%d @%lx(%lx) %x %d\n", since 17;
    /// Format of PROCESS_START/PROCESS_END records: pid (hex), task name.
    KFD_EVENT_FMT_PROCESS = "%x %s\n", since 19;
}
