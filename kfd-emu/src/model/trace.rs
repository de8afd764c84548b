//! `--trace`: every ioctl decoded, strace-style, on stderr.
//!
//! ```text
//! [pid 1234] ALLOC_MEMORY_OF_GPU(va_addr=0x7f0000000000, size=2097152, handle=0x0, mmap_offset=0x0, gpu_id=0x1a2b, flags=VRAM|WRITABLE) = 0 (handle=0x1a2b00000001, mmap_offset=0x100000000)
//! [pid 1234] FREE_MEMORY_OF_GPU(handle=0x1a2b00000007) = -EINVAL
//! ```
//!
//! An argument is printed from its struct's entry in the ABI layout registry
//! ([`kfd_ioctl::abi::layout`]): going in, every field (for ioctls the kernel reads); coming
//! back, the fields the kernel changed (for ioctls it writes back, also after a failure, as
//! the copy-out then still happens). Padding, anonymous unions and flexible arrays are left
//! out. A field is printed in hex when its name says it is an id, address, handle, offset,
//! flag or mask, else in decimal, unless the ioctl's [`Decoder`] says otherwise.
//!
//! Printing is the caller's choice: these functions always write, the dispatcher calls them
//! only with `--trace`.

use kfd_ioctl::abi::layout::{CONSTANTS, FieldKind, FieldLayout, struct_layout};
use kfd_ioctl::abi::{ALLOC_MEM_FLAGS, IOC_READ, IOC_WRITE, IoctlInfo};

use super::fail::errno_name;
use crate::backend::{Caller, IoctlResult};

/// How a field of an ioctl argument is printed, when its name alone does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// A signed integer of the field's size (`xnack_enabled=-1`).
    Signed,
    /// `KFD_IOC_ALLOC_MEM_FLAGS_*` by name (`VRAM|WRITABLE`).
    AllocFlags,
    /// A `KFD_IOC_EVENT_*` type by name (`SIGNAL`).
    EventType,
    /// A `KFD_IOC_QUEUE_TYPE_*` by name (`SDMA`).
    QueueType,
}

/// How `--trace` prints one ioctl's argument: every field of its struct in the ABI layout
/// registry, in the format the field's name implies unless `formats` names another.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decoder {
    /// `(C field name, format)` for the fields not printed as their name implies.
    pub formats: &'static [(&'static str, Format)],
}

impl Decoder {
    /// Every field as its name implies.
    pub(super) const FIELDS: Decoder = Decoder { formats: &[] };

    fn format_of(&self, name: &str) -> Option<Format> {
        self.formats
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, format)| *format)
    }
}

/// Joins the names of the bits of `value` that `names` knows by `|`, any other bits in hex.
fn bit_names<'a>(value: u64, names: impl Iterator<Item = (u64, &'a str)>) -> String {
    let mut named: Vec<(u64, &str)> = names.filter(|(bit, _)| value & bit != 0).collect();
    named.sort_unstable();
    let known = named.iter().fold(0, |acc, (bit, _)| acc | bit);
    let mut parts: Vec<String> = named.iter().map(|(_, name)| (*name).to_owned()).collect();
    if value & !known != 0 {
        parts.push(format!("{:#x}", value & !known));
    }
    if parts.is_empty() {
        "0".to_owned()
    } else {
        parts.join("|")
    }
}

/// `VRAM|GTT|...` for `KFD_IOC_ALLOC_MEM_FLAGS_*` (unknown bits in hex).
pub(super) fn alloc_flags(flags: u32) -> String {
    let names = ALLOC_MEM_FLAGS.iter().map(|flag| {
        let name = flag.name.strip_prefix("KFD_IOC_ALLOC_MEM_FLAGS_");
        (flag.value, name.unwrap_or(flag.name))
    });
    bit_names(u64::from(flags), names)
}

/// The name of a `KFD_IOC_EVENT_*` type (the number when there is none).
pub(super) fn event_type(kind: u32) -> String {
    constant_name("KFD_IOC_EVENT_", kind)
}

/// The name, without `prefix`, of the ABI constant with that prefix and `value`; the number
/// when there is none.
fn constant_name(prefix: &str, value: u32) -> String {
    CONSTANTS
        .iter()
        .filter(|c| c.value == i128::from(value))
        .find_map(|c| c.name.strip_prefix(prefix))
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// Whether a field with this C name holds an id, address, handle, offset, flags or mask.
fn is_hex(name: &str) -> bool {
    const SUFFIXES: &[&str] = &[
        "_ptr", "addr", "_address", "handle", "gpu_id", "gpuid", "offset", "event_id", "flags",
        "flag", "mask", "r_debug", "_base", "_limit",
    ];
    SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
}

/// One printable field: its C member path, offset and size.
struct Leaf {
    path: String,
    offset: usize,
    size: usize,
}

/// The printable fields of `fields` at `base`: nested structs flattened to their members;
/// padding, anonymous unions (their storage and members) and flexible arrays left out.
fn leaves(fields: &[FieldLayout], prefix: &str, base: usize, out: &mut Vec<Leaf>) {
    let unions: Vec<(usize, usize)> = fields
        .iter()
        .filter(|f| f.kind == FieldKind::Union)
        .map(|f| (f.offset, f.offset + f.size))
        .collect();
    for field in fields {
        let in_union = unions
            .iter()
            .any(|&(start, end)| (start..end).contains(&field.offset));
        if field.kind != FieldKind::Named || in_union || field.name.starts_with("pad") {
            continue;
        }
        let path = if prefix.is_empty() {
            field.name.to_owned()
        } else {
            format!("{prefix}.{}", field.name)
        };
        if field.fields.is_empty() {
            out.push(Leaf {
                path,
                offset: base + field.offset,
                size: field.size,
            });
        } else {
            leaves(field.fields, &path, base + field.offset, out);
        }
    }
}

/// `path=value` for one field of the kernel buffer `buf`.
fn field_text(leaf: &Leaf, decoder: &Decoder, buf: &[u8]) -> String {
    let Some(bytes) = buf.get(leaf.offset..leaf.offset + leaf.size) else {
        return format!("{}=?", leaf.path);
    };
    if !matches!(leaf.size, 1 | 2 | 4 | 8) {
        return format!("{}=<{} bytes>", leaf.path, leaf.size);
    }
    let mut raw = [0u8; 8];
    raw[..leaf.size].copy_from_slice(bytes);
    let value = u64::from_ne_bytes(raw);
    let name = leaf.path.rsplit('.').next().unwrap_or(&leaf.path);
    let text = match decoder.format_of(&leaf.path) {
        Some(Format::Signed) => {
            let shift = 64 - 8 * leaf.size as u32;
            (((value << shift) as i64) >> shift).to_string()
        }
        Some(Format::AllocFlags) => alloc_flags(value as u32),
        Some(Format::EventType) => event_type(value as u32),
        Some(Format::QueueType) => constant_name("KFD_IOC_QUEUE_TYPE_", value as u32),
        None if is_hex(name) => format!("{value:#x}"),
        None => value.to_string(),
    };
    format!("{}={text}", leaf.path)
}

/// The arguments of a KFD ioctl going in, and what the kernel changed in them coming back.
fn describe(info: &IoctlInfo, decoder: &Decoder, before: &[u8], after: &[u8]) -> (String, String) {
    let Some(layout) = info.arg.and_then(struct_layout) else {
        return (String::new(), String::new());
    };
    if before.is_empty() {
        return (String::new(), String::new());
    }
    let mut fields = Vec::new();
    leaves(layout.fields, "", 0, &mut fields);
    let ins: Vec<String> = if info.dir & IOC_WRITE != 0 {
        fields
            .iter()
            .map(|f| field_text(f, decoder, before))
            .collect()
    } else {
        Vec::new()
    };
    let outs: Vec<String> = if info.dir & IOC_READ != 0 {
        fields
            .iter()
            .filter(|f| {
                before.get(f.offset..f.offset + f.size) != after.get(f.offset..f.offset + f.size)
            })
            .map(|f| field_text(f, decoder, after))
            .collect()
    } else {
        Vec::new()
    };
    (ins.join(", "), outs.join(", "))
}

/// ` = 0` or ` = -EINVAL`.
fn result_text(result: IoctlResult) -> String {
    match result {
        Ok(v) => format!(" = {v}"),
        Err(e) => format!(" = -{}", errno_name(e)),
    }
}

/// The trace line of a KFD ioctl by thread `tid`: the kernel buffer `before` the handler ran
/// (empty when the ioctl failed before the argument was read) and `after`.
pub(super) fn kfd_line(
    tid: i32,
    info: &IoctlInfo,
    decoder: &Decoder,
    before: &[u8],
    after: &[u8],
    result: IoctlResult,
) -> String {
    let (args, outs) = describe(info, decoder, before, after);
    let outs = if outs.is_empty() {
        String::new()
    } else {
        format!(" ({outs})")
    };
    format!(
        "[pid {tid}] {}({args}){}{outs}",
        info.name,
        result_text(result)
    )
}

/// Traces a KFD ioctl (see [`kfd_line`]).
pub(super) fn kfd(
    caller: &dyn Caller,
    info: &IoctlInfo,
    decoder: &Decoder,
    before: &[u8],
    after: &[u8],
    result: IoctlResult,
) {
    crate::own::elog!(
        "{}",
        kfd_line(caller.id().tid, info, decoder, before, after, result)
    );
}

/// Traces an ioctl number the kernel we act as does not have.
pub(super) fn unknown(caller: &dyn Caller, cmd: u32, errno: rustix::io::Errno) {
    crate::own::elog!(
        "[pid {}] ioctl(kfd, {cmd:#010x}){}",
        caller.id().tid,
        result_text(Err(errno))
    );
}

/// Traces a DRM ioctl on a render node.
pub(super) fn drm(caller: &dyn Caller, name: &str, result: Result<(), rustix::io::Errno>) {
    crate::own::elog!(
        "[pid {}] {name}(...){}",
        caller.id().tid,
        result_text(result.map(|()| 0))
    );
}

#[cfg(test)]
mod tests {
    use kfd_ioctl::abi::{
        AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_DBG_TRAP,
        AMDKFD_IOC_FREE_MEMORY_OF_GPU, AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_MAP_MEMORY_TO_GPU,
        AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_SET_XNACK_MODE, KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
        KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, KFD_IOC_EVENT_SIGNAL, ioc_nr, ioctl_info,
        kfd_ioctl_alloc_memory_of_gpu_args, kfd_ioctl_create_event_args, kfd_ioctl_dbg_trap_args,
        kfd_ioctl_get_version_args, kfd_ioctl_map_memory_to_gpu_args, kfd_ioctl_set_event_args,
        kfd_ioctl_set_xnack_mode_args,
    };
    use rustix::io::Errno;
    use rustix::ioctl::Opcode;
    use zerocopy::IntoBytes;

    use super::*;

    fn info(opcode: Opcode) -> &'static IoctlInfo {
        ioctl_info(ioc_nr(opcode)).expect("a KFD opcode")
    }

    fn line<T: IntoBytes + zerocopy::Immutable>(
        opcode: Opcode,
        formats: &'static [(&'static str, Format)],
        before: &T,
        after: &T,
        result: IoctlResult,
    ) -> String {
        let decoder = Decoder { formats };
        kfd_line(
            7,
            info(opcode),
            &decoder,
            before.as_bytes(),
            after.as_bytes(),
            result,
        )
    }

    #[test]
    fn fields_going_in_and_what_the_kernel_changed_coming_back() {
        let before = kfd_ioctl_alloc_memory_of_gpu_args {
            va_addr: 0x7f00_0000_0000,
            size: 2 << 20,
            gpu_id: 0x1a2b,
            flags: KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
            ..Default::default()
        };
        let after = kfd_ioctl_alloc_memory_of_gpu_args {
            handle: 0x1a2b_0000_0001,
            mmap_offset: 0x20_0000,
            ..before
        };
        assert_eq!(
            line(
                AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
                &[("flags", Format::AllocFlags)],
                &before,
                &after,
                Ok(0)
            ),
            "[pid 7] ALLOC_MEMORY_OF_GPU(va_addr=0x7f0000000000, size=2097152, handle=0x0, \
             mmap_offset=0x0, gpu_id=0x1a2b, flags=VRAM|WRITABLE) = 0 \
             (handle=0x1a2b00000001, mmap_offset=0x200000)"
        );
    }

    #[test]
    fn a_read_only_ioctl_shows_only_what_comes_back() {
        let after = kfd_ioctl_get_version_args {
            major_version: 1,
            minor_version: 23,
        };
        let before = kfd_ioctl_get_version_args::default();
        assert_eq!(
            line(AMDKFD_IOC_GET_VERSION, &[], &before, &after, Ok(0)),
            "[pid 7] GET_VERSION() = 0 (major_version=1, minor_version=23)"
        );
    }

    #[test]
    fn a_write_only_ioctl_shows_nothing_coming_back() {
        let before = kfd_ioctl_set_event_args {
            event_id: 0x10,
            pad: 0,
        };
        let changed = kfd_ioctl_set_event_args {
            event_id: 0x11,
            pad: 0,
        };
        assert_eq!(
            line(
                AMDKFD_IOC_SET_EVENT,
                &[],
                &before,
                &changed,
                Err(Errno::INVAL)
            ),
            "[pid 7] SET_EVENT(event_id=0x10) = -EINVAL"
        );
    }

    #[test]
    fn partial_results_of_a_failure_are_shown() {
        let before = kfd_ioctl_map_memory_to_gpu_args {
            handle: 0x1a2b_0000_0001,
            device_ids_array_ptr: 0x1000,
            n_devices: 2,
            n_success: 0,
        };
        let after = kfd_ioctl_map_memory_to_gpu_args {
            n_success: 1,
            ..before
        };
        assert_eq!(
            line(
                AMDKFD_IOC_MAP_MEMORY_TO_GPU,
                &[],
                &before,
                &after,
                Err(Errno::NOMEM)
            ),
            "[pid 7] MAP_MEMORY_TO_GPU(handle=0x1a2b00000001, device_ids_array_ptr=0x1000, \
             n_devices=2, n_success=0) = -ENOMEM (n_success=1)"
        );
    }

    #[test]
    fn a_failure_before_the_argument_was_read_shows_no_fields() {
        let decoder = Decoder::FIELDS;
        let text = kfd_line(
            7,
            info(AMDKFD_IOC_FREE_MEMORY_OF_GPU),
            &decoder,
            &[],
            &[],
            Err(Errno::BADF),
        );
        assert_eq!(text, "[pid 7] FREE_MEMORY_OF_GPU() = -EBADF");
    }

    #[test]
    fn decoders_print_signed_fields_and_names() {
        let query = kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
        let on = kfd_ioctl_set_xnack_mode_args { xnack_enabled: 1 };
        assert_eq!(
            line(
                AMDKFD_IOC_SET_XNACK_MODE,
                &[("xnack_enabled", Format::Signed)],
                &query,
                &on,
                Ok(0)
            ),
            "[pid 7] SET_XNACK_MODE(xnack_enabled=-1) = 0 (xnack_enabled=1)"
        );
        let event = kfd_ioctl_create_event_args {
            event_type: KFD_IOC_EVENT_SIGNAL,
            auto_reset: 1,
            ..Default::default()
        };
        let text = line(
            AMDKFD_IOC_CREATE_EVENT,
            &[("event_type", Format::EventType)],
            &event,
            &event,
            Ok(0),
        );
        assert!(
            text.contains("event_type=SIGNAL, auto_reset=1, node_id=0, event_id=0x0"),
            "{text}"
        );
    }

    #[test]
    fn unions_and_padding_are_left_out() {
        let args = kfd_ioctl_dbg_trap_args {
            pid: 42,
            op: 3,
            ..Default::default()
        };
        assert_eq!(
            line(AMDKFD_IOC_DBG_TRAP, &[], &args, &args, Err(Errno::INVAL)),
            "[pid 7] DBG_TRAP(pid=42, op=3) = -EINVAL"
        );
    }

    #[test]
    fn flag_and_event_names_come_from_the_abi() {
        assert_eq!(alloc_flags(0), "0");
        assert_eq!(alloc_flags(1 << 31 | 1 << 5 | 1), "VRAM|WRITABLE|0x20");
        assert_eq!(alloc_flags(1 << 23 | 1 << 2), "USERPTR|CONTIGUOUS");
        assert_eq!(event_type(0), "SIGNAL");
        assert_eq!(event_type(8), "MEMORY");
        assert_eq!(event_type(99), "99");
    }
}
