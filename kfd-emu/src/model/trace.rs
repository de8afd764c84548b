//! `--trace`: every ioctl decoded, strace-style, on stderr.
//!
//! ```text
//! [pid 1234] ALLOC_MEMORY_OF_GPU(gpu_id=0x1a2b, va=0x7f0000000000, size=2097152, flags=VRAM|WRITABLE) = 0 (handle=0x1a2b00000001, mmap_offset=0x100000000)
//! [pid 1234] FREE_MEMORY_OF_GPU(handle=0x1a2b00000007) = -EINVAL
//! ```

use kfd_ioctl::abi::{
    IoctlInfo, KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, kfd_ioctl_acquire_vm_args,
    kfd_ioctl_alloc_memory_of_gpu_args, kfd_ioctl_create_event_args, kfd_ioctl_export_dmabuf_args,
    kfd_ioctl_free_memory_of_gpu_args, kfd_ioctl_get_available_memory_args,
    kfd_ioctl_get_clock_counters_args, kfd_ioctl_get_dmabuf_info_args,
    kfd_ioctl_get_process_apertures_new_args, kfd_ioctl_get_version_args,
    kfd_ioctl_import_dmabuf_args, kfd_ioctl_map_memory_to_gpu_args, kfd_ioctl_runtime_enable_args,
    kfd_ioctl_set_event_args, kfd_ioctl_set_memory_policy_args,
    kfd_ioctl_set_scratch_backing_va_args, kfd_ioctl_set_trap_handler_args,
    kfd_ioctl_set_xnack_mode_args, kfd_ioctl_smi_events_args, kfd_ioctl_svm_args,
    kfd_ioctl_wait_events_args,
};

use super::Model;
use super::dispatch::get;
use super::fail::errno_name;
use crate::backend::{Caller, IoctlResult};

/// `VRAM|GTT|...` for `KFD_IOC_ALLOC_MEM_FLAGS_*` (unknown bits in hex).
pub(super) fn alloc_flags(flags: u32) -> String {
    const NAMES: &[(u32, &str)] = &[
        (1 << 0, "VRAM"),
        (1 << 1, "GTT"),
        (1 << 2, "USERPTR"),
        (1 << 3, "DOORBELL"),
        (1 << 4, "MMIO_REMAP"),
        (1 << 23, "CONTIGUOUS"),
        (1 << 24, "EXT_COHERENT"),
        (1 << 25, "UNCACHED"),
        (1 << 26, "COHERENT"),
        (1 << 27, "AQL_QUEUE_MEM"),
        (1 << 28, "NO_SUBSTITUTE"),
        (1 << 29, "PUBLIC"),
        (1 << 30, "EXECUTABLE"),
        (1 << 31, "WRITABLE"),
    ];
    let mut parts: Vec<String> = NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| (*name).to_owned())
        .collect();
    let known = NAMES.iter().fold(0, |acc, (bit, _)| acc | bit);
    if flags & !known != 0 {
        parts.push(format!("{:#x}", flags & !known));
    }
    if parts.is_empty() {
        "0".to_owned()
    } else {
        parts.join("|")
    }
}

/// The name of a `KFD_IOC_EVENT_*` type.
pub(super) fn event_type(kind: u32) -> String {
    const NAMES: [&str; 9] = [
        "SIGNAL",
        "NODECHANGE",
        "DEVICESTATECHANGE",
        "HW_EXCEPTION",
        "SYSTEM_EVENT",
        "DEBUG_EVENT",
        "PROFILE_EVENT",
        "QUEUE_EVENT",
        "MEMORY",
    ];
    NAMES
        .get(kind as usize)
        .map_or_else(|| kind.to_string(), |name| (*name).to_owned())
}

/// ` = 0` or ` = -EINVAL`.
fn result_text(result: IoctlResult) -> String {
    match result {
        Ok(v) => format!(" = {v}"),
        Err(e) => format!(" = -{}", errno_name(e)),
    }
}

/// The arguments of a KFD ioctl going in, and its outputs coming back.
fn describe(nr: u8, before: &[u8], after: &[u8]) -> (String, String) {
    macro_rules! args {
        ($t:ty) => {
            (get::<$t>(before), get::<$t>(after))
        };
    }
    match nr {
        0x01 => {
            let (_, o) = args!(kfd_ioctl_get_version_args);
            (
                String::new(),
                format!("{}.{}", o.major_version, o.minor_version),
            )
        }
        0x04 => {
            let (i, _) = args!(kfd_ioctl_set_memory_policy_args);
            (
                format!(
                    "gpu_id={:#x}, default_policy={}, alternate_policy={}, misc_process_flag={:#x}",
                    i.gpu_id, i.default_policy, i.alternate_policy, i.misc_process_flag
                ),
                String::new(),
            )
        }
        0x05 => {
            let (i, o) = args!(kfd_ioctl_get_clock_counters_args);
            (
                format!("gpu_id={:#x}", i.gpu_id),
                format!(
                    "gpu_clock_counter={}, cpu_clock_counter={}, system_clock_counter={}, system_clock_freq={}",
                    o.gpu_clock_counter,
                    o.cpu_clock_counter,
                    o.system_clock_counter,
                    o.system_clock_freq
                ),
            )
        }
        0x08 => {
            let (i, o) = args!(kfd_ioctl_create_event_args);
            (
                format!(
                    "event_type={}, auto_reset={}, node_id={}, event_page_offset={:#x}",
                    event_type(i.event_type),
                    i.auto_reset,
                    i.node_id,
                    i.event_page_offset
                ),
                format!(
                    "event_id={:#x}, event_slot_index={}, event_page_offset={:#x}",
                    o.event_id, o.event_slot_index, o.event_page_offset
                ),
            )
        }
        0x09..=0x0B => {
            let (i, _) = args!(kfd_ioctl_set_event_args);
            (format!("event_id={:#x}", i.event_id), String::new())
        }
        0x0C => {
            let (i, o) = args!(kfd_ioctl_wait_events_args);
            (
                format!(
                    "events_ptr={:#x}, num_events={}, wait_for_all={}, timeout={}",
                    i.events_ptr, i.num_events, i.wait_for_all, i.timeout
                ),
                format!("wait_result={}", o.wait_result),
            )
        }
        0x11 => {
            let (i, _) = args!(kfd_ioctl_set_scratch_backing_va_args);
            (
                format!("gpu_id={:#x}, va_addr={:#x}", i.gpu_id, i.va_addr),
                String::new(),
            )
        }
        0x13 => {
            let (i, _) = args!(kfd_ioctl_set_trap_handler_args);
            (
                format!(
                    "gpu_id={:#x}, tba_addr={:#x}, tma_addr={:#x}",
                    i.gpu_id, i.tba_addr, i.tma_addr
                ),
                String::new(),
            )
        }
        0x14 => {
            let (i, o) = args!(kfd_ioctl_get_process_apertures_new_args);
            (
                format!(
                    "kfd_process_device_apertures_ptr={:#x}, num_of_nodes={}",
                    i.kfd_process_device_apertures_ptr, i.num_of_nodes
                ),
                format!("num_of_nodes={}", o.num_of_nodes),
            )
        }
        0x15 => {
            let (i, _) = args!(kfd_ioctl_acquire_vm_args);
            (
                format!("drm_fd={}, gpu_id={:#x}", i.drm_fd, i.gpu_id),
                String::new(),
            )
        }
        0x16 => {
            let (i, o) = args!(kfd_ioctl_alloc_memory_of_gpu_args);
            let userptr = if i.flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR != 0 {
                format!(", mmap_offset={:#x}", i.mmap_offset)
            } else {
                String::new()
            };
            (
                format!(
                    "gpu_id={:#x}, va={:#x}, size={}, flags={}{userptr}",
                    i.gpu_id,
                    i.va_addr,
                    i.size,
                    alloc_flags(i.flags)
                ),
                format!("handle={:#x}, mmap_offset={:#x}", o.handle, o.mmap_offset),
            )
        }
        0x17 => {
            let (i, _) = args!(kfd_ioctl_free_memory_of_gpu_args);
            (format!("handle={:#x}", i.handle), String::new())
        }
        0x18 | 0x19 => {
            let (i, o) = args!(kfd_ioctl_map_memory_to_gpu_args);
            (
                format!(
                    "handle={:#x}, device_ids_array_ptr={:#x}, n_devices={}, n_success={}",
                    i.handle, i.device_ids_array_ptr, i.n_devices, i.n_success
                ),
                format!("n_success={}", o.n_success),
            )
        }
        0x1C => {
            let (i, o) = args!(kfd_ioctl_get_dmabuf_info_args);
            (
                format!("dmabuf_fd={}", i.dmabuf_fd),
                format!(
                    "size={}, gpu_id={:#x}, flags={}",
                    o.size,
                    o.gpu_id,
                    alloc_flags(o.flags)
                ),
            )
        }
        0x1D => {
            let (i, o) = args!(kfd_ioctl_import_dmabuf_args);
            (
                format!(
                    "gpu_id={:#x}, va={:#x}, dmabuf_fd={}",
                    i.gpu_id, i.va_addr, i.dmabuf_fd
                ),
                format!("handle={:#x}", o.handle),
            )
        }
        0x1F => {
            let (i, o) = args!(kfd_ioctl_smi_events_args);
            (
                format!("gpuid={:#x}", i.gpuid),
                format!("anon_fd={}", o.anon_fd),
            )
        }
        0x20 => {
            let (i, _) = args!(kfd_ioctl_svm_args);
            (
                format!(
                    "start_addr={:#x}, size={:#x}, op={}, nattr={}",
                    i.start_addr, i.size, i.op, i.nattr
                ),
                String::new(),
            )
        }
        0x21 => {
            let (i, o) = args!(kfd_ioctl_set_xnack_mode_args);
            (
                format!("xnack_enabled={}", i.xnack_enabled),
                format!("xnack_enabled={}", o.xnack_enabled),
            )
        }
        0x23 => {
            let (i, o) = args!(kfd_ioctl_get_available_memory_args);
            (
                format!("gpu_id={:#x}", i.gpu_id),
                format!("available={}", o.available),
            )
        }
        0x24 => {
            let (i, o) = args!(kfd_ioctl_export_dmabuf_args);
            (
                format!("handle={:#x}, flags={:#x}", i.handle, i.flags),
                format!("dmabuf_fd={}", o.dmabuf_fd),
            )
        }
        0x25 => {
            let (i, _) = args!(kfd_ioctl_runtime_enable_args);
            (
                format!("r_debug={:#x}, mode_mask={:#x}", i.r_debug, i.mode_mask),
                String::new(),
            )
        }
        _ => ("...".to_owned(), String::new()),
    }
}

/// Traces a KFD ioctl.
pub(super) fn kfd(
    m: &Model,
    caller: &dyn Caller,
    info: &IoctlInfo,
    before: &[u8],
    after: &[u8],
    result: IoctlResult,
) {
    if !m.cfg.trace {
        return;
    }
    let (args, outs) = if before.is_empty() {
        (String::new(), String::new())
    } else {
        describe(info.nr, before, after)
    };
    let show_outs = !outs.is_empty() && (result.is_ok() || matches!(info.nr, 0x18 | 0x19));
    eprintln!(
        "[pid {}] {}({args}){}{}",
        caller.id().tid,
        info.name,
        result_text(result),
        if show_outs {
            format!(" ({outs})")
        } else {
            String::new()
        }
    );
}

/// Traces an ioctl number the kernel we act as does not have.
pub(super) fn unknown(m: &Model, caller: &dyn Caller, cmd: u32, errno: rustix::io::Errno) {
    if m.cfg.trace {
        eprintln!(
            "[pid {}] ioctl(kfd, {cmd:#010x}){}",
            caller.id().tid,
            result_text(Err(errno))
        );
    }
}

/// Traces a DRM ioctl on a render node.
pub(super) fn drm(
    m: &Model,
    caller: &dyn Caller,
    name: &str,
    result: Result<(), rustix::io::Errno>,
) {
    if m.cfg.trace {
        eprintln!(
            "[pid {}] {name}(...){}",
            caller.id().tid,
            result_text(result.map(|()| 0))
        );
    }
}
