//! Ioctl command words: every `AMDKFD_IOC_*` opcode, the table of ioctls with the KFD minor
//! each appeared in, and helpers that encode and decode Linux `_IOC` command words.
//!
//! The encoding is the generic Linux one used on x86_64 and aarch64: bits 31..30 direction,
//! 29..16 size (14 bits), 15..8 type (`'K'`), 7..0 number. The kernel dispatches on the number
//! alone and copies as many bytes as the caller's command word says, which is why
//! `AMDKFD_IOC_SVM` can carry a variable size.

use rustix::ioctl::{Direction, Opcode, opcode};

use super::layout::types::{MacroKind, MacroLayout};
use super::*;

abi_consts! {
    registry OPCODE_CONSTS;
    /// The ioctl type byte of KFD, `'K'`.
    AMDKFD_IOCTL_BASE: u8 = b'K', since 1;
    /// The first KFD ioctl number.
    AMDKFD_COMMAND_START: u8 = 0x01, since 1;
    /// One past the last KFD ioctl number of KFD 1.23 (see [`command_end`] for other minors).
    AMDKFD_COMMAND_END: u8 = 0x29, since 23;
}

/// Direction bits of a command word: no data.
#[doc(alias = "_IOC_NONE")]
pub const IOC_NONE: u32 = 0;
/// Direction bits of a command word: the caller writes (the kernel reads the argument).
#[doc(alias = "_IOC_WRITE")]
pub const IOC_WRITE: u32 = 1;
/// Direction bits of a command word: the caller reads (the kernel writes the argument).
#[doc(alias = "_IOC_READ")]
pub const IOC_READ: u32 = 2;

const IOC_SIZE_BITS: u32 = 14;
const IOC_SIZE_SHIFT: u32 = 16;
const IOC_DIR_SHIFT: u32 = 30;

/// Returns the direction bits (`IOC_READ | IOC_WRITE`, ...) of a command word.
#[doc(alias = "_IOC_DIR")]
// `Opcode` is `u32` with rustix's raw backend but `c_ulong` with its libc backend.
#[allow(clippy::unnecessary_cast)]
pub const fn ioc_dir(op: Opcode) -> u32 {
    ((op >> IOC_DIR_SHIFT) & 0x3) as u32
}

/// Returns the type byte of a command word (`b'K'` for KFD).
#[doc(alias = "_IOC_TYPE")]
pub const fn ioc_type(op: Opcode) -> u8 {
    ((op >> 8) & 0xff) as u8
}

/// Returns the ioctl number of a command word.
#[doc(alias = "_IOC_NR")]
pub const fn ioc_nr(op: Opcode) -> u8 {
    (op & 0xff) as u8
}

/// Returns the argument size a command word carries, in bytes.
#[doc(alias = "_IOC_SIZE")]
pub const fn ioc_size(op: Opcode) -> usize {
    ((op >> IOC_SIZE_SHIFT) & ((1 << IOC_SIZE_BITS) - 1)) as usize
}

// The decoders above assume the generic encoding; fail the build where rustix encodes
// differently (mips, powerpc, sparc).
const _: () = {
    let op = opcode::read_write::<[u8; 0x123]>(b'K', 0x45);
    assert!(ioc_dir(op) == IOC_READ | IOC_WRITE);
    assert!(ioc_type(op) == b'K');
    assert!(ioc_nr(op) == 0x45);
    assert!(ioc_size(op) == 0x123);
    assert!(ioc_dir(opcode::read::<u32>(b'K', 1)) == IOC_READ);
    assert!(ioc_dir(opcode::write::<u32>(b'K', 1)) == IOC_WRITE);
    assert!(ioc_dir(opcode::none(b'K', 1)) == IOC_NONE);
};

/// Builds a KFD command word without data: `_IO('K', nr)`.
#[doc(alias = "AMDKFD_IO")]
pub const fn amdkfd_io(nr: u8) -> Opcode {
    opcode::none(AMDKFD_IOCTL_BASE, nr)
}

/// Builds a KFD command word the caller reads `T` through: `_IOR('K', nr, T)`.
#[doc(alias = "AMDKFD_IOR")]
pub const fn amdkfd_ior<T>(nr: u8) -> Opcode {
    opcode::read::<T>(AMDKFD_IOCTL_BASE, nr)
}

/// Builds a KFD command word the caller writes `T` through: `_IOW('K', nr, T)`.
#[doc(alias = "AMDKFD_IOW")]
pub const fn amdkfd_iow<T>(nr: u8) -> Opcode {
    opcode::write::<T>(AMDKFD_IOCTL_BASE, nr)
}

/// Builds a KFD command word that passes `T` both ways: `_IOWR('K', nr, T)`.
#[doc(alias = "AMDKFD_IOWR")]
pub const fn amdkfd_iowr<T>(nr: u8) -> Opcode {
    opcode::read_write::<T>(AMDKFD_IOCTL_BASE, nr)
}

/// The largest attribute count an `AMDKFD_IOC_SVM` command word can carry: its 14-bit size
/// field must hold `24 + 8 * nattr`.
pub const SVM_MAX_ATTRS: u32 = ((1 << IOC_SIZE_BITS) - 1 - SVM_HEADER_SIZE) / SVM_ATTR_SIZE;

const SVM_HEADER_SIZE: u32 = core::mem::size_of::<kfd_ioctl_svm_args>() as u32;
const SVM_ATTR_SIZE: u32 = core::mem::size_of::<kfd_ioctl_svm_attribute>() as u32;

/// Builds the `AMDKFD_IOC_SVM` command word for `nattr` attributes:
/// `_IOWR('K', 0x20, 24 + 8 * nattr)`, as libhsakmt computes it.
///
/// # Panics
///
/// If `nattr > SVM_MAX_ATTRS` (the size would not fit the command word); check first when
/// `nattr` comes from a caller.
///
/// ```
/// use kfd_ioctl::abi::{amdkfd_ioc_svm, ioc_size};
/// assert_eq!(amdkfd_ioc_svm(2) as u64, 0xc028_4b20);
/// assert_eq!(ioc_size(amdkfd_ioc_svm(5)), 24 + 8 * 5);
/// ```
pub const fn amdkfd_ioc_svm(nattr: u32) -> Opcode {
    assert!(
        nattr <= SVM_MAX_ATTRS,
        "too many SVM attributes for one ioctl"
    );
    opcode::from_components(
        Direction::ReadWrite,
        AMDKFD_IOCTL_BASE,
        0x20,
        (SVM_HEADER_SIZE + SVM_ATTR_SIZE * nattr) as usize,
    )
}

/// One KFD ioctl: its command word and the KFD minor version it appeared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IoctlInfo {
    /// The C name without the `AMDKFD_IOC_` prefix: `"ALLOC_MEMORY_OF_GPU"`.
    pub name: &'static str,
    /// The ioctl number.
    pub nr: u8,
    /// The command word of KFD 1.23 (for `SVM`, the 24-byte header alone).
    pub opcode: Opcode,
    /// Direction bits: [`IOC_NONE`], [`IOC_WRITE`], [`IOC_READ`] or both.
    pub dir: u32,
    /// Argument size of KFD 1.23, in bytes.
    pub size: usize,
    /// The C name of the argument struct, if the ioctl takes one.
    pub arg: Option<&'static str>,
    /// The KFD minor the ioctl appeared in (1 for those older than the header's changelog).
    pub since_minor: u32,
    /// Whether the header calls the ioctl deprecated (the debugger slots 0x0D–0x10 return
    /// `EPERM`; `GET_PROCESS_APERTURES` is superseded by `GET_PROCESS_APERTURES_NEW`).
    pub deprecated: bool,
}

macro_rules! ioc_dir_bits {
    (none) => {
        IOC_NONE
    };
    (read) => {
        IOC_READ
    };
    (write) => {
        IOC_WRITE
    };
    (read_write) => {
        IOC_READ | IOC_WRITE
    };
}

macro_rules! ioc_opcode {
    ($nr:literal, none) => {
        amdkfd_io($nr)
    };
    ($nr:literal, read, $arg:ty) => {
        amdkfd_ior::<$arg>($nr)
    };
    ($nr:literal, write, $arg:ty) => {
        amdkfd_iow::<$arg>($nr)
    };
    ($nr:literal, read_write, $arg:ty) => {
        amdkfd_iowr::<$arg>($nr)
    };
}

macro_rules! ioc_arg {
    () => {
        None
    };
    ($arg:ty) => {
        Some(stringify!($arg))
    };
}

/// Returns the name of an `AMDKFD_IOC_*` constant without its prefix.
const fn strip_ioc_prefix(name: &'static str) -> &'static str {
    match name.as_bytes() {
        [
            b'A',
            b'M',
            b'D',
            b'K',
            b'F',
            b'D',
            b'_',
            b'I',
            b'O',
            b'C',
            b'_',
            rest @ ..,
        ] => match core::str::from_utf8(rest) {
            Ok(short) => short,
            Err(_) => name,
        },
        _ => name,
    }
}

/// Defines the `AMDKFD_IOC_*` opcodes and the [`IOCTLS`] table from one list.
macro_rules! ioctls {
    ($(
        $(#[$meta:meta])*
        $nr:literal $name:ident: $dir:ident($($arg:ty)?), since $since:literal, deprecated $dep:literal;
    )*) => {
        $(
            $(#[$meta])*
            #[doc = concat!(
                "\n\nIoctl number ", stringify!($nr), ", since KFD 1.", $since, "."
            )]
            pub const $name: Opcode = ioc_opcode!($nr, $dir $(, $arg)?);
        )*

        /// Every KFD ioctl of KFD 1.23, by number (`0x01..=0x28`).
        pub const IOCTLS: &[IoctlInfo] = &[$(
            IoctlInfo {
                name: strip_ioc_prefix(stringify!($name)),
                nr: $nr,
                opcode: $name,
                dir: ioc_dir_bits!($dir),
                size: 0 $(+ core::mem::size_of::<$arg>())?,
                arg: ioc_arg!($($arg)?),
                since_minor: $since,
                deprecated: $dep,
            }
        ),*];
    };
}

ioctls! {
    /// Query the KFD interface version.
    0x01 AMDKFD_IOC_GET_VERSION: read(kfd_ioctl_get_version_args), since 1, deprecated false;
    /// Create a user-mode queue.
    0x02 AMDKFD_IOC_CREATE_QUEUE: read_write(kfd_ioctl_create_queue_args), since 1, deprecated false;
    /// Destroy a queue.
    0x03 AMDKFD_IOC_DESTROY_QUEUE: read_write(kfd_ioctl_destroy_queue_args), since 1, deprecated false;
    /// Set the cache policy of a GPU's apertures.
    0x04 AMDKFD_IOC_SET_MEMORY_POLICY: write(kfd_ioctl_set_memory_policy_args), since 1, deprecated false;
    /// Read the GPU, CPU and system clock counters.
    0x05 AMDKFD_IOC_GET_CLOCK_COUNTERS: read_write(kfd_ioctl_get_clock_counters_args), since 1, deprecated false;
    /// Query the apertures of at most 7 GPUs (deprecated: use `GET_PROCESS_APERTURES_NEW`).
    0x06 AMDKFD_IOC_GET_PROCESS_APERTURES: read(kfd_ioctl_get_process_apertures_args), since 1, deprecated true;
    /// Update a queue.
    0x07 AMDKFD_IOC_UPDATE_QUEUE: write(kfd_ioctl_update_queue_args), since 1, deprecated false;
    /// Create an event.
    0x08 AMDKFD_IOC_CREATE_EVENT: read_write(kfd_ioctl_create_event_args), since 1, deprecated false;
    /// Destroy an event.
    0x09 AMDKFD_IOC_DESTROY_EVENT: write(kfd_ioctl_destroy_event_args), since 1, deprecated false;
    /// Signal an event.
    0x0A AMDKFD_IOC_SET_EVENT: write(kfd_ioctl_set_event_args), since 1, deprecated false;
    /// Reset an event.
    0x0B AMDKFD_IOC_RESET_EVENT: write(kfd_ioctl_reset_event_args), since 1, deprecated false;
    /// Wait for events.
    0x0C AMDKFD_IOC_WAIT_EVENTS: read_write(kfd_ioctl_wait_events_args), since 1, deprecated false;
    /// Deprecated debugger: register (the kernel returns `EPERM`).
    0x0D AMDKFD_IOC_DBG_REGISTER_DEPRECATED: write(kfd_ioctl_dbg_register_args), since 1, deprecated true;
    /// Deprecated debugger: unregister (the kernel returns `EPERM`).
    0x0E AMDKFD_IOC_DBG_UNREGISTER_DEPRECATED: write(kfd_ioctl_dbg_unregister_args), since 1, deprecated true;
    /// Deprecated debugger: address watch (the kernel returns `EPERM`).
    0x0F AMDKFD_IOC_DBG_ADDRESS_WATCH_DEPRECATED: write(kfd_ioctl_dbg_address_watch_args), since 1, deprecated true;
    /// Deprecated debugger: wave control (the kernel returns `EPERM`).
    0x10 AMDKFD_IOC_DBG_WAVE_CONTROL_DEPRECATED: write(kfd_ioctl_dbg_wave_control_args), since 1, deprecated true;
    /// Set the scratch backing VA of a GPU.
    0x11 AMDKFD_IOC_SET_SCRATCH_BACKING_VA: read_write(kfd_ioctl_set_scratch_backing_va_args), since 1, deprecated false;
    /// Query the tiling configuration.
    0x12 AMDKFD_IOC_GET_TILE_CONFIG: read_write(kfd_ioctl_get_tile_config_args), since 1, deprecated false;
    /// Set the CWSR trap handler of a GPU.
    0x13 AMDKFD_IOC_SET_TRAP_HANDLER: write(kfd_ioctl_set_trap_handler_args), since 1, deprecated false;
    /// Query the apertures of any number of GPUs.
    0x14 AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: read_write(kfd_ioctl_get_process_apertures_new_args), since 1, deprecated false;
    /// Adopt a DRM fd's VM as this process's GPU VM.
    0x15 AMDKFD_IOC_ACQUIRE_VM: write(kfd_ioctl_acquire_vm_args), since 1, deprecated false;
    /// Allocate a buffer object.
    0x16 AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: read_write(kfd_ioctl_alloc_memory_of_gpu_args), since 1, deprecated false;
    /// Free a buffer object.
    0x17 AMDKFD_IOC_FREE_MEMORY_OF_GPU: write(kfd_ioctl_free_memory_of_gpu_args), since 1, deprecated false;
    /// Map a buffer object to GPUs.
    0x18 AMDKFD_IOC_MAP_MEMORY_TO_GPU: read_write(kfd_ioctl_map_memory_to_gpu_args), since 1, deprecated false;
    /// Unmap a buffer object from GPUs.
    0x19 AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: read_write(kfd_ioctl_unmap_memory_from_gpu_args), since 1, deprecated false;
    /// Set the CU mask of a queue.
    0x1A AMDKFD_IOC_SET_CU_MASK: write(kfd_ioctl_set_cu_mask_args), since 1, deprecated false;
    /// Read a queue's wave state.
    0x1B AMDKFD_IOC_GET_QUEUE_WAVE_STATE: read_write(kfd_ioctl_get_queue_wave_state_args), since 1, deprecated false;
    /// Query a dmabuf.
    0x1C AMDKFD_IOC_GET_DMABUF_INFO: read_write(kfd_ioctl_get_dmabuf_info_args), since 1, deprecated false;
    /// Import a dmabuf as a buffer object.
    0x1D AMDKFD_IOC_IMPORT_DMABUF: read_write(kfd_ioctl_import_dmabuf_args), since 1, deprecated false;
    /// Allocate global wave sync entries for a queue.
    0x1E AMDKFD_IOC_ALLOC_QUEUE_GWS: read_write(kfd_ioctl_alloc_queue_gws_args), since 1, deprecated false;
    /// Open an SMI event fd.
    0x1F AMDKFD_IOC_SMI_EVENTS: read_write(kfd_ioctl_smi_events_args), since 3, deprecated false;
    /// Set or get SVM attributes, with no attributes; see [`amdkfd_ioc_svm`] for `nattr > 0`.
    0x20 AMDKFD_IOC_SVM: read_write(kfd_ioctl_svm_args), since 5, deprecated false;
    /// Set or query the process's XNACK mode.
    0x21 AMDKFD_IOC_SET_XNACK_MODE: read_write(kfd_ioctl_set_xnack_mode_args), since 5, deprecated false;
    /// A CRIU operation.
    0x22 AMDKFD_IOC_CRIU_OP: read_write(kfd_ioctl_criu_args), since 7, deprecated false;
    /// Query available VRAM.
    0x23 AMDKFD_IOC_AVAILABLE_MEMORY: read_write(kfd_ioctl_get_available_memory_args), since 9, deprecated false;
    /// Export a buffer object as a dmabuf.
    0x24 AMDKFD_IOC_EXPORT_DMABUF: read_write(kfd_ioctl_export_dmabuf_args), since 12, deprecated false;
    /// Enable or disable the runtime for debugging.
    0x25 AMDKFD_IOC_RUNTIME_ENABLE: read_write(kfd_ioctl_runtime_enable_args), since 13, deprecated false;
    /// A debugger operation on a target process.
    0x26 AMDKFD_IOC_DBG_TRAP: read_write(kfd_ioctl_dbg_trap_args), since 13, deprecated false;
    /// Create a secondary KFD process context on a new `/dev/kfd` fd.
    0x27 AMDKFD_IOC_CREATE_PROCESS: none(), since 19, deprecated false;
    /// A profiler control operation.
    0x28 AMDKFD_IOC_PROFILER: read_write(kfd_ioctl_profiler_args), since 23, deprecated false;
}

const _: () = {
    assert!(AMDKFD_IOC_SVM == amdkfd_ioc_svm(0));
    assert!(IOCTLS.len() == (AMDKFD_COMMAND_END - AMDKFD_COMMAND_START) as usize);
    let mut i = 0;
    while i < IOCTLS.len() {
        let info = &IOCTLS[i];
        assert!(info.nr as usize == AMDKFD_COMMAND_START as usize + i);
        assert!(ioc_nr(info.opcode) == info.nr);
        assert!(ioc_type(info.opcode) == AMDKFD_IOCTL_BASE);
        assert!(ioc_dir(info.opcode) == info.dir);
        assert!(ioc_size(info.opcode) == info.size);
        i += 1;
    }
    assert!(command_end(super::KFD_IOCTL_MINOR_VERSION) == AMDKFD_COMMAND_END);
};

/// Returns the table entry of ioctl number `nr`, if KFD 1.23 has one.
pub const fn ioctl_info(nr: u8) -> Option<&'static IoctlInfo> {
    if nr < AMDKFD_COMMAND_START || nr >= AMDKFD_COMMAND_END {
        return None;
    }
    Some(&IOCTLS[(nr - AMDKFD_COMMAND_START) as usize])
}

/// Returns `AMDKFD_COMMAND_END` as the kernel of KFD `minor` had it: one past the highest
/// ioctl number that minor knows (0x24 at 1.11, 0x25 at 1.12, 0x27 at 1.13–1.18, 0x28 at
/// 1.19–1.22, 0x29 at 1.23).
///
/// Ioctls older than the header's changelog count as present from 1.1, so minors 1 and 2
/// give 0x1F; minors newer than 1.23 give 1.23's value.
pub const fn command_end(minor: u32) -> u8 {
    let mut end = AMDKFD_COMMAND_START;
    let mut i = 0;
    while i < IOCTLS.len() {
        if IOCTLS[i].since_minor <= minor && IOCTLS[i].nr >= end {
            end = IOCTLS[i].nr + 1;
        }
        i += 1;
    }
    end
}

/// The function-like macros mirrored in this module.
pub(crate) const OPCODE_MACROS: &[MacroLayout] = &[
    MacroLayout {
        name: "AMDKFD_IO",
        since_minor: 1,
        kind: MacroKind::Function {
            rust_name: "amdkfd_io",
        },
    },
    MacroLayout {
        name: "AMDKFD_IOR",
        since_minor: 1,
        kind: MacroKind::Function {
            rust_name: "amdkfd_ior",
        },
    },
    MacroLayout {
        name: "AMDKFD_IOW",
        since_minor: 1,
        kind: MacroKind::Function {
            rust_name: "amdkfd_iow",
        },
    },
    MacroLayout {
        name: "AMDKFD_IOWR",
        since_minor: 1,
        kind: MacroKind::Function {
            rust_name: "amdkfd_iowr",
        },
    },
];
