//! The one error type of the safe layer.

use std::fmt;
use std::path::PathBuf;

pub use rustix::io::Errno;

use crate::GpuId;
use crate::abi::AllocMemFlags;
use crate::topology::TopologyError;

/// What an ioctl was doing when it failed: the GPU, the address range, the handle, the kind
/// of memory. Kept without heap allocation so that building an error costs nothing.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct IoctlContext {
    /// The GPU the call was about.
    pub gpu_id: Option<GpuId>,
    /// The address range `(start, size)` in bytes.
    pub range: Option<(u64, u64)>,
    /// The buffer-object handle.
    pub handle: Option<u64>,
    /// The allocation flags, for memory ioctls.
    pub alloc_flags: Option<AllocMemFlags>,
}

impl fmt::Debug for IoctlContext {
    /// With the GPU id, addresses and handle in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoctlContext")
            .field("gpu_id", &self.gpu_id)
            .field(
                "range",
                &self
                    .range
                    .map(|(start, size)| format!("{:#x} + {size:#x}", start)),
            )
            .field("handle", &self.handle.map(|h| format!("{h:#x}")))
            .field("alloc_flags", &self.alloc_flags)
            .finish()
    }
}

impl IoctlContext {
    /// A context naming only a GPU.
    pub fn gpu(gpu_id: impl Into<GpuId>) -> Self {
        Self {
            gpu_id: Some(gpu_id.into()),
            ..Self::default()
        }
    }

    /// A context naming a buffer-object handle (and the GPU encoded in its upper half).
    pub fn handle(handle: u64) -> Self {
        Self {
            handle: Some(handle),
            gpu_id: Some(GpuId((handle >> 32) as u32)),
            ..Self::default()
        }
    }

    /// A context naming an address range.
    pub fn range(start: u64, size: u64) -> Self {
        Self {
            range: Some((start, size)),
            ..Self::default()
        }
    }
}

/// Formats a byte count the way people read sizes: `2 MiB`, `4 KiB`, `1536 B`.
pub(crate) struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["TiB", "GiB", "MiB", "KiB", "B"];
        for (i, unit) in UNITS.iter().enumerate() {
            let scale = 1u64 << (10 * (4 - i));
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{} {unit}", self.0 / scale);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// Allocation flags the way the C header names them, without the prefix, domain first:
/// `VRAM|WRITABLE|PUBLIC`, or `no domain` before the modifiers when none is set.
struct FlagNames(AllocMemFlags);

impl fmt::Display for FlagNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let domain = domain_name(self.0);
        f.write_str(domain)?;
        let domains = AllocMemFlags::VRAM
            | AllocMemFlags::GTT
            | AllocMemFlags::USERPTR
            | AllocMemFlags::DOORBELL
            | AllocMemFlags::MMIO_REMAP;
        for (name, flag) in self.0.iter_names() {
            // The first domain is already named; a second one is a mistake worth showing.
            if domains.contains(flag) && name == domain {
                continue;
            }
            write!(f, "|{name}")?;
        }
        let unknown = self.0.bits() & !AllocMemFlags::all().bits();
        if unknown != 0 {
            write!(f, "|{unknown:#x}")?;
        }
        Ok(())
    }
}

/// The memory domain named by allocation flags, for messages.
fn domain_name(flags: AllocMemFlags) -> &'static str {
    if flags.contains(AllocMemFlags::VRAM) {
        "VRAM"
    } else if flags.contains(AllocMemFlags::GTT) {
        "GTT"
    } else if flags.contains(AllocMemFlags::USERPTR) {
        "USERPTR"
    } else if flags.contains(AllocMemFlags::DOORBELL) {
        "DOORBELL"
    } else if flags.contains(AllocMemFlags::MMIO_REMAP) {
        "MMIO_REMAP"
    } else {
        "no domain"
    }
}

impl fmt::Display for IoctlContext {
    /// ` (VRAM|WRITABLE, 2 MiB at 0x7f0000000000) on gpu 0x1a2b`,
    /// ` (handle 0x1a2b00000001)`, or nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = 0;
        let mut open = |f: &mut fmt::Formatter<'_>| {
            parts += 1;
            f.write_str(if parts == 1 { " (" } else { ", " })
        };
        if let Some(flags) = self.alloc_flags {
            open(f)?;
            write!(f, "{}", FlagNames(flags))?;
        }
        if let Some((start, size)) = self.range {
            open(f)?;
            write!(f, "{} at {start:#x}", Size(size))?;
        }
        if let Some(handle) = self.handle {
            open(f)?;
            write!(f, "handle {handle:#x}")?;
        }
        if parts > 0 {
            f.write_str(")")?;
        }
        if let Some(gpu) = self.gpu_id {
            write!(f, " on gpu {gpu:#x}")?;
        }
        Ok(())
    }
}

/// An errno shown by its C name (`ENOMEM`), as people grep for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrnoName(pub Errno);

impl fmt::Display for ErrnoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match crate::errno_name(self.0) {
            Some(name) => f.write_str(name),
            None => write!(f, "errno {}", self.0.raw_os_error()),
        }
    }
}

/// A KFD version as `GET_VERSION` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Always 1 for the KFD this crate speaks to.
    pub major: u32,
    /// Grows with every ABI addition; see [`crate::abi::IOCTLS`].
    pub minor: u32,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Everything that can go wrong talking to KFD.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An ioctl returned an errno. The message ends with a hint where the errno has a
    /// usual cause worth naming (`ENODEV` from a GPU whose VM is not acquired; `EINVAL` for
    /// host-visible VRAM on a small-BAR GPU).
    #[error("{ioctl}{context} failed: {}{}", ErrnoName(*.errno), Hint(hint(ioctl, *.errno, context)))]
    Ioctl {
        /// The ioctl's name without the `AMDKFD_IOC_` prefix, e.g. `ALLOC_MEMORY_OF_GPU`.
        ioctl: &'static str,
        /// What it was about.
        context: IoctlContext,
        /// What the kernel said.
        errno: Errno,
    },
    /// An ioctl kept failing with `EINTR` or `EAGAIN` and was given up after a bounded number
    /// of attempts (a signal storm, or a device that stays busy).
    #[error(
        "{ioctl}{context} failed: {} on each of {attempts} attempts",
        ErrnoName(*.errno)
    )]
    Interrupted {
        /// The ioctl's name without the `AMDKFD_IOC_` prefix.
        ioctl: &'static str,
        /// What it was about.
        context: IoctlContext,
        /// How many times it was issued.
        attempts: u32,
        /// `EINTR` or `EAGAIN`: what the kernel said the last time.
        errno: Errno,
    },
    /// A map or unmap over a device list failed part way.
    #[error(
        "{ioctl} of handle {handle:#x} failed on gpu {failed_gpu:#x} after {} of {total} GPUs: {}{}",
        .done.len(), ErrnoName(*.errno),
        Hint(hint(ioctl, *.errno, &IoctlContext::gpu(*.failed_gpu)))
    )]
    DeviceList {
        /// `MAP_MEMORY_TO_GPU` or `UNMAP_MEMORY_FROM_GPU`.
        ioctl: &'static str,
        /// The buffer object.
        handle: u64,
        /// The GPUs, in list order, on which the operation did succeed.
        done: Vec<GpuId>,
        /// The GPU on which it failed.
        failed_gpu: GpuId,
        /// How many GPUs the list had.
        total: usize,
        /// What the kernel said.
        errno: Errno,
    },
    /// The running KFD is too old for what was asked.
    #[error("{what} needs KFD 1.{needed_minor} or newer; the running KFD is {running}")]
    Unsupported {
        /// The ioctl or flag that is missing.
        what: &'static str,
        /// The first KFD minor version that has it.
        needed_minor: u32,
        /// The version the kernel reported.
        running: Version,
    },
    /// The kernel speaks a KFD major version this crate does not.
    #[error("KFD reports version {0}; only major version 1 is supported")]
    UnsupportedMajor(Version),
    /// A device file could not be opened.
    #[error("opening {} failed: {}", .path.display(), ErrnoName(*.errno))]
    Open {
        /// The path.
        path: PathBuf,
        /// What the kernel said.
        errno: Errno,
    },
    /// A CPU mapping of a buffer object failed.
    #[error("mmap of {} at offset {offset:#x} of {file} failed: {}", Size(*.len as u64), ErrnoName(*.errno))]
    Mmap {
        /// `/dev/kfd` or the render node.
        file: &'static str,
        /// The mmap offset.
        offset: u64,
        /// The length.
        len: usize,
        /// What the kernel said.
        errno: Errno,
    },
    /// A read or write on an SMI event fd failed.
    #[error("SMI event fd {op} failed: {}", ErrnoName(*.errno))]
    SmiIo {
        /// `read` or `write`.
        op: &'static str,
        /// What the kernel said.
        errno: Errno,
    },
    /// The SMI event fd reached end of file: its writer is gone (a pipe or socket whose peer
    /// closed; the kernel's own SMI fd never ends). Nothing more will come.
    #[error(
        "the SMI event stream of gpu {gpu_id:#x} ended{}",
        if *.unfinished > 0 { format!(" in the middle of a record ({} bytes)", .unfinished) } else { String::new() }
    )]
    SmiEndOfStream {
        /// The GPU of the stream.
        gpu_id: GpuId,
        /// How many bytes of an unfinished record were left (dropped).
        unfinished: usize,
    },
    /// An object a forked child inherited from the process that created it: KFD serves only
    /// that process (a child's ioctls on its fd fail with `EBADF`) and a child does not inherit
    /// its CPU mappings. The child can open KFD for itself.
    #[error("{what} belongs to process {owner_pid}; a forked child cannot use it")]
    Inherited {
        /// What was used.
        what: &'static str,
        /// The process that created it.
        owner_pid: u32,
    },
    /// The caller passed something the kernel would reject, caught before any syscall.
    #[error("{ioctl}: {reason}")]
    InvalidArgument {
        /// The ioctl the argument was for.
        ioctl: &'static str,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// The caller passed something the kernel refuses, caught before any syscall: the
    /// ioctl, what it was about, the errno the kernel answers for it and the kernel's reason
    /// (`crate::validate` lists the checks and where the kernel makes them).
    /// [`Error::errno`] gives the kernel's errno, so code that matches errnos sees no
    /// difference from the kernel refusing the call itself.
    #[error("{ioctl}{context} refused before the call: {reason} (the kernel answers {})", ErrnoName(*.errno))]
    Rejected {
        /// The ioctl the arguments were for.
        ioctl: &'static str,
        /// What it was about.
        context: IoctlContext,
        /// The errno the kernel gives for these arguments.
        errno: Errno,
        /// Why, with the kernel function that decides it.
        reason: &'static str,
    },
    /// An SVM call failed and one of its attributes names a GPU that is the reason: one the
    /// process does not have (the kernel's `EINVAL` from `kfd_process_gpuidx_from_gpuid` in
    /// `svm_range_check_attr`), or one whose VM this handle has not acquired.
    #[error(
        "SVM {op}{} failed: {}; attribute {attribute} names gpu {gpu_id:#x}, {}",
        IoctlContext::range(.range.0, .range.1), ErrnoName(*.errno),
        if .known.contains(.gpu_id) {
            "whose VM is not acquired: call Kfd::acquire_vm for it first".to_owned()
        } else {
            format!("which is not a GPU of this process (its GPUs: {})", GpuIds(.known))
        }
    )]
    SvmGpu {
        /// `SET_ATTR` or `GET_ATTR`.
        op: &'static str,
        /// The range `(start, size)` in bytes.
        range: (u64, u64),
        /// What the kernel said.
        errno: Errno,
        /// The attribute naming the GPU (`PREFERRED_LOC`, `PREFETCH_LOC`, `ACCESS`,
        /// `ACCESS_IN_PLACE`, `NO_ACCESS`).
        attribute: &'static str,
        /// The GPU it names.
        gpu_id: GpuId,
        /// The GPUs of the process (from `GET_PROCESS_APERTURES_NEW`).
        known: Vec<GpuId>,
    },
    /// The GPU has not been acquired with [`crate::Kfd::acquire_vm`].
    #[error("gpu {gpu_id:#x} has no acquired VM; call acquire_vm first")]
    NotAcquired {
        /// The GPU.
        gpu_id: GpuId,
    },
    /// Reading the topology failed.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

impl Error {
    /// The errno the kernel returned, when the error came from the kernel.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Ioctl { errno, .. }
            | Error::Interrupted { errno, .. }
            | Error::DeviceList { errno, .. }
            | Error::Open { errno, .. }
            | Error::Mmap { errno, .. }
            | Error::Rejected { errno, .. }
            | Error::SvmGpu { errno, .. }
            | Error::SmiIo { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// The ioctl that failed, when there was one.
    pub fn ioctl(&self) -> Option<&'static str> {
        match self {
            Error::Ioctl { ioctl, .. }
            | Error::Interrupted { ioctl, .. }
            | Error::DeviceList { ioctl, .. }
            | Error::Rejected { ioctl, .. }
            | Error::InvalidArgument { ioctl, .. } => Some(ioctl),
            _ => None,
        }
    }
}

impl Error {
    /// Whether retrying the same call may succeed: the kernel refused it for now (out of
    /// memory, busy, interrupted, an I/O error), not for good (a bad handle or argument, a
    /// missing feature, an fd of another process).
    pub fn is_transient(&self) -> bool {
        match self.errno() {
            Some(errno) => !matches!(
                errno,
                Errno::BADF
                    | Errno::INVAL
                    | Errno::NOTTY
                    | Errno::FAULT
                    | Errno::PERM
                    | Errno::ACCESS
                    | Errno::NODEV
                    | Errno::NOENT
                    | Errno::SRCH
                    | Errno::NOSYS
                    | Errno::OPNOTSUPP
            ),
            None => false,
        }
    }
}

/// What usually causes `errno` from `ioctl` with `context`, when that is worth saying.
fn hint(ioctl: &str, errno: Errno, context: &IoctlContext) -> Option<&'static str> {
    let public_vram = context
        .alloc_flags
        .is_some_and(|f| f.contains(AllocMemFlags::VRAM | AllocMemFlags::PUBLIC));
    match (ioctl, errno) {
        // kfd_bind_process_to_device: a GPU without a VM (no ACQUIRE_VM yet) is ENODEV.
        (
            "ALLOC_MEMORY_OF_GPU" | "MAP_MEMORY_TO_GPU" | "IMPORT_DMABUF" | "CREATE_QUEUE",
            Errno::NODEV,
        ) => Some("the GPU's VM is not acquired: call Kfd::acquire_vm for it first"),
        // kfd_ioctl_alloc_memory_of_gpu: VRAM|PUBLIC without kfd_dev_is_large_bar is EINVAL.
        ("ALLOC_MEMORY_OF_GPU", Errno::INVAL) if public_vram => Some(
            "host-visible (PUBLIC) VRAM needs a large BAR; on a small-BAR GPU enable \
             resizable BAR (\"Above 4G decoding\" and \"Re-Size BAR\") in the firmware, or \
             allocate the VRAM without PUBLIC and copy through a queue",
        ),
        _ => None,
    }
}

/// GPU ids (`u32` or [`GpuId`]) in hex, comma separated (`none` for none), for messages:
/// `0x7396, 0x814c`.
#[derive(Debug, Clone, Copy)]
pub struct GpuIds<'a, T = u32>(pub &'a [T]);

impl<T: fmt::LowerHex> fmt::Display for GpuIds<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, gpu) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{gpu:#x}")?;
        }
        Ok(())
    }
}

/// `; <hint>` after an error message, or nothing.
struct Hint(Option<&'static str>);

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(hint) => write!(f, "; {hint}"),
            None => Ok(()),
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_error_reads_like_a_sentence() {
        let e = Error::Ioctl {
            ioctl: "ALLOC_MEMORY_OF_GPU",
            context: IoctlContext {
                gpu_id: Some(GpuId(0x1a2b)),
                range: Some((0x7f00_0000_0000, 2 << 20)),
                handle: None,
                alloc_flags: Some(AllocMemFlags::VRAM | AllocMemFlags::WRITABLE),
            },
            errno: Errno::NOMEM,
        };
        assert_eq!(
            e.to_string(),
            "ALLOC_MEMORY_OF_GPU (VRAM|WRITABLE, 2 MiB at 0x7f0000000000) on gpu 0x1a2b failed: ENOMEM"
        );
    }

    #[test]
    fn handle_context_names_the_gpu_of_the_handle() {
        let e = Error::Ioctl {
            ioctl: "FREE_MEMORY_OF_GPU",
            context: IoctlContext::handle(0x1a2b_0000_0003),
            errno: Errno::BUSY,
        };
        assert_eq!(
            e.to_string(),
            "FREE_MEMORY_OF_GPU (handle 0x1a2b00000003) on gpu 0x1a2b failed: EBUSY"
        );
    }

    #[test]
    fn giving_up_on_interruptions_names_the_ioctl_and_the_attempts() {
        let e = Error::Interrupted {
            ioctl: "GET_VERSION",
            context: IoctlContext::default(),
            attempts: 32,
            errno: Errno::INTR,
        };
        assert_eq!(
            e.to_string(),
            "GET_VERSION failed: EINTR on each of 32 attempts"
        );
        assert_eq!(e.errno(), Some(Errno::INTR));
        assert_eq!(e.ioctl(), Some("GET_VERSION"));
        assert!(e.is_transient());
    }

    #[test]
    fn only_kernel_refusals_for_now_are_transient() {
        let ioctl = |errno| Error::Ioctl {
            ioctl: "UNMAP_MEMORY_FROM_GPU",
            context: IoctlContext::handle(0x1a2b_0000_0001),
            errno,
        };
        assert!(ioctl(Errno::IO).is_transient());
        assert!(ioctl(Errno::NOMEM).is_transient());
        assert!(ioctl(Errno::BUSY).is_transient());
        assert!(!ioctl(Errno::BADF).is_transient());
        assert!(!ioctl(Errno::INVAL).is_transient());
        assert!(!Error::NotAcquired { gpu_id: GpuId(1) }.is_transient());
    }

    #[test]
    fn small_bar_vram_keeps_its_flags_and_says_what_to_do() {
        let e = Error::Ioctl {
            ioctl: "ALLOC_MEMORY_OF_GPU",
            context: IoctlContext {
                gpu_id: Some(GpuId(0x814c)),
                range: Some((0x7f00_0000_0000, 64 << 20)),
                handle: None,
                alloc_flags: Some(
                    AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC,
                ),
            },
            errno: Errno::INVAL,
        };
        let text = e.to_string();
        assert!(
            text.starts_with(
                "ALLOC_MEMORY_OF_GPU (VRAM|WRITABLE|PUBLIC, 64 MiB at 0x7f0000000000) on gpu \
                 0x814c failed: EINVAL; host-visible (PUBLIC) VRAM needs a large BAR"
            ),
            "{text}"
        );
        assert!(text.contains("resizable BAR"), "{text}");
    }

    #[test]
    fn enodev_says_to_acquire_the_vm() {
        let e = Error::Ioctl {
            ioctl: "ALLOC_MEMORY_OF_GPU",
            context: IoctlContext::gpu(0x7396),
            errno: Errno::NODEV,
        };
        assert_eq!(
            e.to_string(),
            "ALLOC_MEMORY_OF_GPU on gpu 0x7396 failed: ENODEV; the GPU's VM is not acquired: \
             call Kfd::acquire_vm for it first"
        );
    }

    #[test]
    fn a_rejection_reports_the_kernels_errno() {
        let e = Error::Rejected {
            ioctl: "MAP_MEMORY_TO_GPU",
            context: IoctlContext::handle(0x1a2b_0000_0001),
            errno: Errno::INVAL,
            reason: "why",
        };
        assert_eq!(e.errno(), Some(Errno::INVAL));
        assert_eq!(e.ioctl(), Some("MAP_MEMORY_TO_GPU"));
        assert!(!e.is_transient());
        assert_eq!(
            e.to_string(),
            "MAP_MEMORY_TO_GPU (handle 0x1a2b00000001) on gpu 0x1a2b refused before the call: \
             why (the kernel answers EINVAL)"
        );
    }

    #[test]
    fn sizes_pick_the_largest_exact_unit() {
        assert_eq!(Size(2 << 20).to_string(), "2 MiB");
        assert_eq!(Size(4096).to_string(), "4 KiB");
        assert_eq!(Size(1536).to_string(), "1536 B");
        assert_eq!(Size(0).to_string(), "0 B");
        assert_eq!(Size(192 << 30).to_string(), "192 GiB");
    }

    #[test]
    fn unknown_errno_prints_its_number() {
        assert_eq!(
            ErrnoName(Errno::from_raw_os_error(4000)).to_string(),
            "errno 4000"
        );
        assert_eq!(ErrnoName(Errno::NOTTY).to_string(), "ENOTTY");
    }

    #[test]
    fn kernel_internal_errnos_print_their_names() {
        let restart = ErrnoName(Errno::from_raw_os_error(512));
        assert_eq!(restart.to_string(), "ERESTARTSYS");
    }
}
