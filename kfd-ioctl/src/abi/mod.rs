//! The raw KFD ABI: `#[repr(C)]` mirrors of every struct, union, enum and `#define` of the
//! uapi `linux/kfd_ioctl.h` at KFD 1.23 (Linux 7.2), with C names.
//!
//! Everything is reachable as `kfd_ioctl::abi::<C_NAME>`; the submodules only group the
//! items by topic. The conventions:
//!
//! * Structs carry the C name and C field names and types (`__u32` is `u32`, `__s32` is
//!   `i32`), derive zerocopy's `FromBytes`/`IntoBytes`, and spell out every byte: where C
//!   leaves implicit padding there is a `pad` field, and each size and offset is asserted at
//!   compile time.
//! * C's anonymous unions (in `kfd_event_data`, `kfd_ioctl_dbg_trap_args` and
//!   `kfd_ioctl_profiler_args`) are stored as an aligned `data` array with an accessor and a
//!   setter per member, e.g. [`kfd_event_data::memory_exception_data`].
//! * `kfd_ioctl_svm_args` is the fixed 24-byte header; `nattr` attributes follow it in memory
//!   and [`amdkfd_ioc_svm`] builds the matching command word.
//! * Enum values and `#define`s are `pub const`s typed for the field they go into;
//!   function-like macros are `const fn`s in snake case with the C name as `doc(alias)`.
//! * Opcodes are [`rustix::ioctl::Opcode`] constants named as in C; [`IOCTLS`] lists every
//!   ioctl with the KFD minor it appeared in, and [`FLAGS`] does the same for flag bits.
//! * Flag sets are bitflags types ([`AllocMemFlags`], [`SvmFlags`], ...) that keep unknown
//!   bits.
//! * [`layout`] holds all of the above as data; `tests/layout.rs` compiles it into a C probe
//!   against the real header and compares every size, offset and value.
//!
//! "Since" minors come from the header's changelog; for items the changelog does not
//! mention, they are the first minor a header snapshot was seen to have the item with this
//! value, so a kernel reporting that minor is known to have it.
//!
//! ```
//! use kfd_ioctl::abi::*;
//! use zerocopy::IntoBytes;
//!
//! let mut args = kfd_ioctl_alloc_memory_of_gpu_args {
//!     size: 2 << 20,
//!     flags: (AllocMemFlags::VRAM | AllocMemFlags::WRITABLE).bits(),
//!     ..Default::default()
//! };
//! args.va_addr = 0x7f00_0000_0000;
//! assert_eq!(args.as_bytes().len(), ioc_size(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU));
//! assert_eq!(ioctl_info(0x16).map(|i| i.name), Some("ALLOC_MEMORY_OF_GPU"));
//! ```

#[macro_use]
mod macros;

// The modules that define structs allow `missing_debug_implementations`: zerocopy's
// `KnownLayout` derive emits a helper type without `Debug` for macro-generated structs, and
// `abi_structs!` derives `Debug` on every struct itself.
#[allow(missing_debug_implementations)]
pub mod criu;
#[allow(missing_debug_implementations)]
pub mod debug;
#[allow(missing_debug_implementations)]
pub mod event;
pub mod flags;
pub mod layout;
#[allow(missing_debug_implementations)]
pub mod memory;
pub mod opcodes;
#[allow(missing_debug_implementations)]
pub mod profiler;
#[allow(missing_debug_implementations)]
pub mod queue;
#[allow(missing_debug_implementations)]
pub mod smi;
#[allow(missing_debug_implementations)]
pub mod svm;
#[allow(missing_debug_implementations)]
pub mod version;

pub use criu::*;
pub use debug::*;
pub use event::*;
pub use flags::*;
pub use memory::*;
pub use opcodes::*;
pub use profiler::*;
pub use queue::*;
pub use smi::*;
pub use svm::*;
pub use version::*;

#[cfg(test)]
mod tests {
    use bitflags::Flags;
    use zerocopy::{FromBytes, IntoBytes};

    use super::layout::{FieldKind, STRUCTS};
    use super::*;

    #[test]
    fn svm_opcode_matches_libhsakmt() {
        // libhsakmt: AMDKFD_IOC_SVM + ((8 * nattr) << _IOC_SIZESHIFT).
        assert_eq!(amdkfd_ioc_svm(0) as u64, 0xc018_4b20);
        assert_eq!(amdkfd_ioc_svm(2) as u64, 0xc028_4b20);
        assert_eq!(AMDKFD_IOC_SVM, amdkfd_ioc_svm(0));
        for nattr in [0, 1, 2, 7, 100, SVM_MAX_ATTRS] {
            let op = amdkfd_ioc_svm(nattr);
            assert_eq!(ioc_size(op), 24 + 8 * nattr as usize);
            assert_eq!(ioc_nr(op), 0x20);
            assert_eq!(ioc_dir(op), IOC_READ | IOC_WRITE);
            assert_eq!(ioc_type(op), b'K');
        }
        assert_eq!(SVM_MAX_ATTRS, 2044);
        assert!(24 + 8 * (SVM_MAX_ATTRS as usize + 1) > 0x3fff);
    }

    #[test]
    #[should_panic(expected = "too many SVM attributes")]
    fn svm_opcode_refuses_a_size_that_does_not_fit() {
        let _ = amdkfd_ioc_svm(SVM_MAX_ATTRS + 1);
    }

    #[test]
    fn known_opcodes_have_the_values_of_the_reference() {
        assert_eq!(AMDKFD_IOC_GET_VERSION as u64, 0x8008_4b01);
        assert_eq!(AMDKFD_IOC_CREATE_QUEUE as u64, 0xc060_4b02);
        assert_eq!(AMDKFD_IOC_GET_PROCESS_APERTURES as u64, 0x8190_4b06);
        assert_eq!(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU as u64, 0xc028_4b16);
        assert_eq!(AMDKFD_IOC_CRIU_OP as u64, 0xc038_4b22);
        assert_eq!(AMDKFD_IOC_DBG_TRAP as u64, 0xc020_4b26);
        assert_eq!(AMDKFD_IOC_CREATE_PROCESS as u64, 0x0000_4b27);
        assert_eq!(AMDKFD_IOC_PROFILER as u64, 0xc010_4b28);
    }

    #[test]
    fn command_end_follows_the_changelog() {
        assert_eq!(command_end(11), 0x24);
        assert_eq!(command_end(12), 0x25);
        for minor in 13..=18 {
            assert_eq!(command_end(minor), 0x27, "minor {minor}");
        }
        for minor in 19..=22 {
            assert_eq!(command_end(minor), 0x28, "minor {minor}");
        }
        assert_eq!(command_end(23), AMDKFD_COMMAND_END);
        assert_eq!(ioctl_info(0), None);
        assert_eq!(ioctl_info(0x29), None);
        assert_eq!(ioctl_info(0x20).map(|i| i.since_minor), Some(5));
    }

    #[test]
    fn flags_keep_unknown_bits() {
        let raw = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | 1 << 12;
        assert_eq!(AllocMemFlags::from_bits_retain(raw).bits(), raw);
        assert_eq!(AllocMemFlags::from_bits(raw).map(|f| f.bits()), Some(raw));
        let smi = SmiEventMask::from_bits_retain(1 << 40 | 1);
        assert!(smi.contains(SmiEventMask::VMFAULT));
        assert_eq!(smi.bits(), 1 << 40 | 1);
        assert_eq!(SmiEventMask::ALL_PROCESS.bits(), 1 << 63);
        assert_eq!(
            (SvmFlags::GPU_RO | SvmFlags::from_bits_retain(1 << 20)).bits(),
            KFD_IOCTL_SVM_FLAG_GPU_RO | 1 << 20
        );
    }

    /// Each flag table and its bitflags type name the same bits: `prefix` + the flag name is
    /// the C name.
    fn assert_flags_match<F: Flags>(table: &[FlagInfo], prefix: &str, suffix: &str)
    where
        F::Bits: Into<u64>,
    {
        let named: Vec<_> = F::FLAGS.iter().filter(|f| !f.name().is_empty()).collect();
        assert_eq!(named.len(), table.len(), "{prefix}: count");
        for info in table {
            let short = info
                .name
                .strip_prefix(prefix)
                .and_then(|s| s.strip_suffix(suffix));
            let flag = short.and_then(F::from_name);
            assert_eq!(
                flag.map(|f| f.bits().into()),
                Some(info.value),
                "{}",
                info.name
            );
        }
    }

    #[test]
    fn flag_types_match_the_flag_tables() {
        assert_flags_match::<AllocMemFlags>(ALLOC_MEM_FLAGS, "KFD_IOC_ALLOC_MEM_FLAGS_", "");
        assert_flags_match::<SvmFlags>(SVM_FLAGS, "KFD_IOCTL_SVM_FLAG_", "");
        assert_flags_match::<RuntimeEnableMode>(
            RUNTIME_ENABLE_MODES,
            "KFD_RUNTIME_ENABLE_MODE_",
            "_MASK",
        );
        assert_flags_match::<ProcFlags>(PROC_FLAGS, "KFD_PROC_FLAG_", "");
        assert_flags_match::<DbgTrapFlags>(DBG_TRAP_FLAGS, "KFD_DBG_TRAP_FLAG_", "");
        assert_flags_match::<DbgTrapMask>(DBG_TRAP_MASKS, "KFD_DBG_TRAP_MASK_", "");
        assert_flags_match::<SmiEventMask>(SMI_EVENT_MASKS, "KFD_SMI_EVENT_", "");
        let codes: Vec<_> = layout::CONSTANTS
            .iter()
            .filter(|c| c.name.starts_with("EC_") && !matches!(c.name, "EC_NONE" | "EC_MAX"))
            .map(|c| FlagInfo {
                name: c.name,
                value: kfd_ec_mask(c.value as u32),
                since_minor: c.since_minor,
            })
            .collect();
        assert_flags_match::<ExceptionMask>(&codes, "EC_", "");
        assert_eq!(
            FLAGS.len(),
            ALLOC_MEM_FLAGS.len()
                + SVM_FLAGS.len()
                + RUNTIME_ENABLE_MODES.len()
                + PROC_FLAGS.len()
                + DBG_TRAP_FLAGS.len()
                + DBG_TRAP_MASKS.len()
                + SMI_EVENT_MASKS.len()
        );
    }

    #[test]
    fn min_minor_is_the_newest_flag() {
        assert_eq!(alloc_flags_min_minor(AllocMemFlags::empty()), 1);
        assert_eq!(
            alloc_flags_min_minor(AllocMemFlags::GTT | AllocMemFlags::EXT_COHERENT),
            15
        );
        assert_eq!(
            alloc_flags_min_minor(AllocMemFlags::from_bits_retain(1 << 12)),
            1
        );
        assert_eq!(svm_flags_min_minor(SvmFlags::HOST_ACCESS), 5);
        assert_eq!(
            svm_flags_min_minor(SvmFlags::GPU_RO | SvmFlags::EXT_COHERENT),
            15
        );
        assert_eq!(smi_events_min_minor(SmiEventMask::MIGRATE_START), 10);
        assert_eq!(smi_events_min_minor(SmiEventMask::PROCESS_END), 19);
    }

    #[test]
    fn union_accessors_round_trip_and_clear_the_rest() {
        let mut event = kfd_event_data::default();
        let fault = kfd_hsa_memory_exception_data {
            failure: kfd_memory_exception_failure {
                NotPresent: 1,
                ..Default::default()
            },
            va: 0x1234_5000,
            gpu_id: 7,
            ErrorType: KFD_MEM_ERR_SRAM_ECC,
        };
        event.set_memory_exception_data(fault);
        assert_eq!(event.memory_exception_data(), fault);
        assert_eq!(event.hw_exception_data().reset_type, 1);
        event.set_signal_event_data(kfd_hsa_signal_event_data { last_event_age: 9 });
        assert_eq!(event.signal_event_data().last_event_age, 9);
        assert_eq!(event.memory_exception_data().gpu_id, 0);

        let mut trap = kfd_ioctl_dbg_trap_args {
            pid: 1,
            op: KFD_IOC_DBG_TRAP_ENABLE,
            ..Default::default()
        };
        let enable = kfd_ioctl_dbg_trap_enable_args {
            exception_mask: KFD_EC_MASK_QUEUE,
            rinfo_ptr: 0x1000,
            rinfo_size: 16,
            dbg_fd: 3,
        };
        trap.set_enable(enable);
        assert_eq!(trap.enable(), enable);
        // The union starts at byte 8 of the C struct.
        let bytes = trap.as_bytes();
        assert_eq!(
            kfd_ioctl_dbg_trap_enable_args::read_from_bytes(&bytes[8..]).ok(),
            Some(enable)
        );

        let mut prof = kfd_ioctl_profiler_args {
            op: KFD_IOC_PROFILER_VERSION,
            ..Default::default()
        };
        prof.set_version(KFD_IOC_PROFILER_VERSION_NUM);
        assert_eq!(prof.version(), 1);
        assert_eq!(&prof.as_bytes()[4..8], &1u32.to_ne_bytes());
    }

    #[test]
    fn registry_describes_every_byte_once() {
        for s in STRUCTS {
            let mut covered = vec![0u8; s.size];
            for f in s.fields {
                let storage = matches!(f.kind, FieldKind::Padding | FieldKind::Union)
                    || (f.kind == FieldKind::Named
                        && !s
                            .fields
                            .iter()
                            .any(|u| u.kind == FieldKind::Union && u.offset == f.offset));
                if storage {
                    for b in &mut covered[f.offset..f.offset + f.size] {
                        *b += 1;
                    }
                }
            }
            assert!(covered.iter().all(|&n| n == 1), "{}: {covered:?}", s.name);
        }
        assert!(STRUCTS.iter().all(|s| s.size_at(s.since_minor).is_some()));
        let create = layout::struct_layout("kfd_ioctl_create_queue_args")
            .map(|s| (s.size_at(11), s.size_at(17)));
        assert_eq!(create, Some((Some(88), Some(96))));
    }
}
