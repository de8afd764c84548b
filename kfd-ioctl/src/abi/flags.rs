//! Flag types over the raw flag constants, and the KFD minor from which each flag exists.
//!
//! Every type keeps bits it has no name for (`const _ = !0`), so flags a newer kernel
//! reports survive a round trip. The associated constants are named after the C suffix and
//! carry the C name as `doc(alias)`.

use bitflags::bitflags;

use super::layout::types::ConstLayout;
use super::*;

bitflags! {
    /// `KFD_IOC_ALLOC_MEM_FLAGS_*`: domain and attributes of `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`
    /// (also reported by `GET_DMABUF_INFO` and CRIU).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct AllocMemFlags: u32 {
        /// Domain: device-local VRAM.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_VRAM")]
        const VRAM = KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
        /// Domain: system memory through the GART.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_GTT")]
        const GTT = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
        /// Domain: existing user memory.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_USERPTR")]
        const USERPTR = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR;
        /// Domain: the process's doorbell slice.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL")]
        const DOORBELL = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL;
        /// Domain: the remapped MMIO (HDP flush) page.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP")]
        const MMIO_REMAP = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
        /// GPU-writable mapping.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE")]
        const WRITABLE = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        /// GPU-executable mapping.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE")]
        const EXECUTABLE = KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
        /// Must be CPU-visible.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC")]
        const PUBLIC = KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        /// Do not substitute system memory for VRAM.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE")]
        const NO_SUBSTITUTE = KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
        /// An AQL queue ring.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM")]
        const AQL_QUEUE_MEM = KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM;
        /// Coherent mapping.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_COHERENT")]
        const COHERENT = KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
        /// Uncached mapping.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED")]
        const UNCACHED = KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
        /// Extended (system-scope) coherence.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT")]
        const EXT_COHERENT = KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT;
        /// Physically contiguous VRAM.
        #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS")]
        const CONTIGUOUS = KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS;
        const _ = !0;
    }

    /// `KFD_IOCTL_SVM_FLAG_*`: the value of `KFD_IOCTL_SVM_ATTR_SET_FLAGS`/`CLR_FLAGS`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct SvmFlags: u32 {
        /// Guarantee host access.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_HOST_ACCESS")]
        const HOST_ACCESS = KFD_IOCTL_SVM_FLAG_HOST_ACCESS;
        /// Fine-grained coherence.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_COHERENT")]
        const COHERENT = KFD_IOCTL_SVM_FLAG_COHERENT;
        /// Any GPU of the hive may be the preferred device.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_HIVE_LOCAL")]
        const HIVE_LOCAL = KFD_IOCTL_SVM_FLAG_HIVE_LOCAL;
        /// GPUs only read.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_GPU_RO")]
        const GPU_RO = KFD_IOCTL_SVM_FLAG_GPU_RO;
        /// GPUs may execute.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_GPU_EXEC")]
        const GPU_EXEC = KFD_IOCTL_SVM_FLAG_GPU_EXEC;
        /// GPUs mostly read.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY")]
        const GPU_READ_MOSTLY = KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY;
        /// Keep GPU mappings valid as if XNACK were off.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED")]
        const GPU_ALWAYS_MAPPED = KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED;
        /// Coherence with device-scope atomics.
        #[doc(alias = "KFD_IOCTL_SVM_FLAG_EXT_COHERENT")]
        const EXT_COHERENT = KFD_IOCTL_SVM_FLAG_EXT_COHERENT;
        const _ = !0;
    }

    /// `KFD_RUNTIME_ENABLE_MODE_*_MASK`: `kfd_ioctl_runtime_enable_args.mode_mask`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct RuntimeEnableMode: u32 {
        /// Enable the runtime for debugging (absent: disable).
        #[doc(alias = "KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK")]
        const ENABLE = KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK;
        /// Enable the trap temporary setup.
        #[doc(alias = "KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK")]
        const TTMP_SAVE = KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK;
        const _ = !0;
    }

    /// `KFD_PROC_FLAG_*`: `kfd_ioctl_set_memory_policy_args.misc_process_flag`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct ProcFlags: u32 {
        /// MFMA high-precision mode.
        #[doc(alias = "KFD_PROC_FLAG_MFMA_HIGH_PRECISION")]
        const MFMA_HIGH_PRECISION = KFD_PROC_FLAG_MFMA_HIGH_PRECISION;
        const _ = !0;
    }

    /// The event mask written to an SMI event fd: bit `id - 1` enables event `id`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct SmiEventMask: u64 {
        /// GPU VM faults.
        #[doc(alias = "KFD_SMI_EVENT_VMFAULT")]
        const VMFAULT = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_VMFAULT);
        /// Thermal throttling.
        #[doc(alias = "KFD_SMI_EVENT_THERMAL_THROTTLE")]
        const THERMAL_THROTTLE = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_THERMAL_THROTTLE);
        /// A GPU reset is about to happen.
        #[doc(alias = "KFD_SMI_EVENT_GPU_PRE_RESET")]
        const GPU_PRE_RESET = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_GPU_PRE_RESET);
        /// A GPU reset happened.
        #[doc(alias = "KFD_SMI_EVENT_GPU_POST_RESET")]
        const GPU_POST_RESET = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_GPU_POST_RESET);
        /// A migration started.
        #[doc(alias = "KFD_SMI_EVENT_MIGRATE_START")]
        const MIGRATE_START = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_MIGRATE_START);
        /// A migration ended.
        #[doc(alias = "KFD_SMI_EVENT_MIGRATE_END")]
        const MIGRATE_END = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_MIGRATE_END);
        /// A GPU page fault started being handled.
        #[doc(alias = "KFD_SMI_EVENT_PAGE_FAULT_START")]
        const PAGE_FAULT_START = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_PAGE_FAULT_START);
        /// A GPU page fault was recovered.
        #[doc(alias = "KFD_SMI_EVENT_PAGE_FAULT_END")]
        const PAGE_FAULT_END = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_PAGE_FAULT_END);
        /// Queues were evicted.
        #[doc(alias = "KFD_SMI_EVENT_QUEUE_EVICTION")]
        const QUEUE_EVICTION = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_QUEUE_EVICTION);
        /// Queues were restored.
        #[doc(alias = "KFD_SMI_EVENT_QUEUE_RESTORE")]
        const QUEUE_RESTORE = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_QUEUE_RESTORE);
        /// A range was unmapped from a GPU.
        #[doc(alias = "KFD_SMI_EVENT_UNMAP_FROM_GPU")]
        const UNMAP_FROM_GPU = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_UNMAP_FROM_GPU);
        /// A process started using the GPU.
        #[doc(alias = "KFD_SMI_EVENT_PROCESS_START")]
        const PROCESS_START = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_PROCESS_START);
        /// A process stopped using the GPU.
        #[doc(alias = "KFD_SMI_EVENT_PROCESS_END")]
        const PROCESS_END = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_PROCESS_END);
        /// Deliver other processes' events too (bit 63; requires `CAP_SYS_ADMIN`).
        #[doc(alias = "KFD_SMI_EVENT_ALL_PROCESS")]
        const ALL_PROCESS = kfd_smi_event_mask_from_index(KFD_SMI_EVENT_ALL_PROCESS);
        const _ = !0;
    }

    /// `KFD_DBG_TRAP_FLAG_*`: wave behaviour flags of `KFD_IOC_DBG_TRAP_SET_FLAGS`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct DbgTrapFlags: u32 {
        /// A single memory operation per wave.
        #[doc(alias = "KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP")]
        const SINGLE_MEM_OP = KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP;
        /// A single ALU operation per wave.
        #[doc(alias = "KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP")]
        const SINGLE_ALU_OP = KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP;
        /// Raise LDS out-of-address-range exceptions.
        #[doc(alias = "KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE")]
        const LDS_OUT_OF_ADDR_RANGE = KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE;
        const _ = !0;
    }

    /// `KFD_DBG_TRAP_MASK_*`: wave launch trap overrides.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct DbgTrapMask: u32 {
        /// Invalid floating-point operation.
        #[doc(alias = "KFD_DBG_TRAP_MASK_FP_INVALID")]
        const FP_INVALID = KFD_DBG_TRAP_MASK_FP_INVALID;
        /// Denormal floating-point input.
        #[doc(alias = "KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL")]
        const FP_INPUT_DENORMAL = KFD_DBG_TRAP_MASK_FP_INPUT_DENORMAL;
        /// Floating-point division by zero.
        #[doc(alias = "KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO")]
        const FP_DIVIDE_BY_ZERO = KFD_DBG_TRAP_MASK_FP_DIVIDE_BY_ZERO;
        /// Floating-point overflow.
        #[doc(alias = "KFD_DBG_TRAP_MASK_FP_OVERFLOW")]
        const FP_OVERFLOW = KFD_DBG_TRAP_MASK_FP_OVERFLOW;
        /// Floating-point underflow.
        #[doc(alias = "KFD_DBG_TRAP_MASK_FP_UNDERFLOW")]
        const FP_UNDERFLOW = KFD_DBG_TRAP_MASK_FP_UNDERFLOW;
        /// Inexact floating-point result.
        #[doc(alias = "KFD_DBG_TRAP_MASK_FP_INEXACT")]
        const FP_INEXACT = KFD_DBG_TRAP_MASK_FP_INEXACT;
        /// Integer division by zero.
        #[doc(alias = "KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO")]
        const INT_DIVIDE_BY_ZERO = KFD_DBG_TRAP_MASK_INT_DIVIDE_BY_ZERO;
        /// Address watch hit.
        #[doc(alias = "KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH")]
        const DBG_ADDRESS_WATCH = KFD_DBG_TRAP_MASK_DBG_ADDRESS_WATCH;
        /// Memory violation.
        #[doc(alias = "KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION")]
        const DBG_MEMORY_VIOLATION = KFD_DBG_TRAP_MASK_DBG_MEMORY_VIOLATION;
        /// Wave start.
        #[doc(alias = "KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START")]
        const TRAP_ON_WAVE_START = KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_START;
        /// Wave end.
        #[doc(alias = "KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END")]
        const TRAP_ON_WAVE_END = KFD_DBG_TRAP_MASK_TRAP_ON_WAVE_END;
        const _ = !0;
    }

    /// Exception masks of the debugger API: bit `ecode - 1` stands for exception code
    /// `ecode` (`KFD_EC_MASK`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
    pub struct ExceptionMask: u64 {
        /// `EC_QUEUE_WAVE_ABORT`.
        #[doc(alias = "EC_QUEUE_WAVE_ABORT")]
        const QUEUE_WAVE_ABORT = kfd_ec_mask(EC_QUEUE_WAVE_ABORT);
        /// `EC_QUEUE_WAVE_TRAP`.
        #[doc(alias = "EC_QUEUE_WAVE_TRAP")]
        const QUEUE_WAVE_TRAP = kfd_ec_mask(EC_QUEUE_WAVE_TRAP);
        /// `EC_QUEUE_WAVE_MATH_ERROR`.
        #[doc(alias = "EC_QUEUE_WAVE_MATH_ERROR")]
        const QUEUE_WAVE_MATH_ERROR = kfd_ec_mask(EC_QUEUE_WAVE_MATH_ERROR);
        /// `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION`.
        #[doc(alias = "EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION")]
        const QUEUE_WAVE_ILLEGAL_INSTRUCTION = kfd_ec_mask(EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION);
        /// `EC_QUEUE_WAVE_MEMORY_VIOLATION`.
        #[doc(alias = "EC_QUEUE_WAVE_MEMORY_VIOLATION")]
        const QUEUE_WAVE_MEMORY_VIOLATION = kfd_ec_mask(EC_QUEUE_WAVE_MEMORY_VIOLATION);
        /// `EC_QUEUE_WAVE_APERTURE_VIOLATION`.
        #[doc(alias = "EC_QUEUE_WAVE_APERTURE_VIOLATION")]
        const QUEUE_WAVE_APERTURE_VIOLATION = kfd_ec_mask(EC_QUEUE_WAVE_APERTURE_VIOLATION);
        /// `EC_QUEUE_PACKET_DISPATCH_DIM_INVALID`.
        #[doc(alias = "EC_QUEUE_PACKET_DISPATCH_DIM_INVALID")]
        const QUEUE_PACKET_DISPATCH_DIM_INVALID = kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_DIM_INVALID);
        /// `EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID`.
        #[doc(alias = "EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID")]
        const QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID =
            kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID);
        /// `EC_QUEUE_PACKET_DISPATCH_CODE_INVALID`.
        #[doc(alias = "EC_QUEUE_PACKET_DISPATCH_CODE_INVALID")]
        const QUEUE_PACKET_DISPATCH_CODE_INVALID =
            kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_CODE_INVALID);
        /// `EC_QUEUE_PACKET_RESERVED`.
        #[doc(alias = "EC_QUEUE_PACKET_RESERVED")]
        const QUEUE_PACKET_RESERVED = kfd_ec_mask(EC_QUEUE_PACKET_RESERVED);
        /// `EC_QUEUE_PACKET_UNSUPPORTED`.
        #[doc(alias = "EC_QUEUE_PACKET_UNSUPPORTED")]
        const QUEUE_PACKET_UNSUPPORTED = kfd_ec_mask(EC_QUEUE_PACKET_UNSUPPORTED);
        /// `EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID`.
        #[doc(alias = "EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID")]
        const QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID =
            kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID);
        /// `EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID`.
        #[doc(alias = "EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID")]
        const QUEUE_PACKET_DISPATCH_REGISTER_INVALID =
            kfd_ec_mask(EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID);
        /// `EC_QUEUE_PACKET_VENDOR_UNSUPPORTED`.
        #[doc(alias = "EC_QUEUE_PACKET_VENDOR_UNSUPPORTED")]
        const QUEUE_PACKET_VENDOR_UNSUPPORTED = kfd_ec_mask(EC_QUEUE_PACKET_VENDOR_UNSUPPORTED);
        /// `EC_QUEUE_PREEMPTION_ERROR`.
        #[doc(alias = "EC_QUEUE_PREEMPTION_ERROR")]
        const QUEUE_PREEMPTION_ERROR = kfd_ec_mask(EC_QUEUE_PREEMPTION_ERROR);
        /// `EC_QUEUE_NEW`.
        #[doc(alias = "EC_QUEUE_NEW")]
        const QUEUE_NEW = kfd_ec_mask(EC_QUEUE_NEW);
        /// `EC_DEVICE_QUEUE_DELETE`.
        #[doc(alias = "EC_DEVICE_QUEUE_DELETE")]
        const DEVICE_QUEUE_DELETE = kfd_ec_mask(EC_DEVICE_QUEUE_DELETE);
        /// `EC_DEVICE_MEMORY_VIOLATION`.
        #[doc(alias = "EC_DEVICE_MEMORY_VIOLATION")]
        const DEVICE_MEMORY_VIOLATION = kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION);
        /// `EC_DEVICE_RAS_ERROR`.
        #[doc(alias = "EC_DEVICE_RAS_ERROR")]
        const DEVICE_RAS_ERROR = kfd_ec_mask(EC_DEVICE_RAS_ERROR);
        /// `EC_DEVICE_FATAL_HALT`.
        #[doc(alias = "EC_DEVICE_FATAL_HALT")]
        const DEVICE_FATAL_HALT = kfd_ec_mask(EC_DEVICE_FATAL_HALT);
        /// `EC_DEVICE_NEW`.
        #[doc(alias = "EC_DEVICE_NEW")]
        const DEVICE_NEW = kfd_ec_mask(EC_DEVICE_NEW);
        /// `EC_PROCESS_RUNTIME`.
        #[doc(alias = "EC_PROCESS_RUNTIME")]
        const PROCESS_RUNTIME = kfd_ec_mask(EC_PROCESS_RUNTIME);
        /// `EC_PROCESS_DEVICE_REMOVE`.
        #[doc(alias = "EC_PROCESS_DEVICE_REMOVE")]
        const PROCESS_DEVICE_REMOVE = kfd_ec_mask(EC_PROCESS_DEVICE_REMOVE);
        const _ = !0;
    }
}

impl ExceptionMask {
    /// Every per-queue exception.
    #[doc(alias = "KFD_EC_MASK_QUEUE")]
    pub const QUEUE: Self = Self::from_bits_retain(KFD_EC_MASK_QUEUE);
    /// Every per-device exception.
    #[doc(alias = "KFD_EC_MASK_DEVICE")]
    pub const DEVICE: Self = Self::from_bits_retain(KFD_EC_MASK_DEVICE);
    /// Every per-process exception.
    #[doc(alias = "KFD_EC_MASK_PROCESS")]
    pub const PROCESS: Self = Self::from_bits_retain(KFD_EC_MASK_PROCESS);
    /// Every packet exception.
    #[doc(alias = "KFD_EC_MASK_PACKET")]
    pub const PACKET: Self = Self::from_bits_retain(KFD_EC_MASK_PACKET);
}

/// One flag bit of the uapi header and the KFD minor from which the kernel knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlagInfo {
    /// The C name (`KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS`).
    pub name: &'static str,
    /// The bit (for SMI events, the mask bit `1 << (id - 1)` of the event id).
    pub value: u64,
    /// The KFD minor from which the flag exists.
    pub since_minor: u32,
}

const NO_FLAG: FlagInfo = FlagInfo {
    name: "",
    value: 0,
    since_minor: 0,
};

const fn flag_infos<const N: usize>(consts: &[ConstLayout]) -> [FlagInfo; N] {
    assert!(consts.len() == N);
    let mut out = [NO_FLAG; N];
    let mut i = 0;
    while i < N {
        out[i] = FlagInfo {
            name: consts[i].name,
            value: consts[i].value as u64,
            since_minor: consts[i].since_minor,
        };
        i += 1;
    }
    out
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The registered `since` of an SMI event constant (a build error if it is not registered).
const fn smi_since(name: &str) -> u32 {
    let mut i = 0;
    while i < smi::SMI_CONSTS.len() {
        if str_eq(smi::SMI_CONSTS[i].name, name) {
            return smi::SMI_CONSTS[i].since_minor;
        }
        i += 1;
    }
    panic!("SMI event constant not registered");
}

macro_rules! smi_flags {
    ($($event:ident),* $(,)?) => {
        [$(FlagInfo {
            name: stringify!($event),
            value: kfd_smi_event_mask_from_index($event),
            since_minor: smi_since(stringify!($event)),
        }),*]
    };
}

const ALLOC_ARRAY: [FlagInfo; memory::ALLOC_FLAG_CONSTS.len()] =
    flag_infos(memory::ALLOC_FLAG_CONSTS);
const SVM_ARRAY: [FlagInfo; svm::SVM_FLAG_CONSTS.len()] = flag_infos(svm::SVM_FLAG_CONSTS);
const RUNTIME_ARRAY: [FlagInfo; debug::RUNTIME_MODE_CONSTS.len()] =
    flag_infos(debug::RUNTIME_MODE_CONSTS);
const PROC_ARRAY: [FlagInfo; memory::PROC_FLAG_CONSTS.len()] = flag_infos(memory::PROC_FLAG_CONSTS);
const DBG_FLAG_ARRAY: [FlagInfo; debug::DBG_TRAP_FLAG_CONSTS.len()] =
    flag_infos(debug::DBG_TRAP_FLAG_CONSTS);
const DBG_MASK_ARRAY: [FlagInfo; debug::DBG_TRAP_MASK_CONSTS.len()] =
    flag_infos(debug::DBG_TRAP_MASK_CONSTS);
const SMI_ARRAY: [FlagInfo; 14] = smi_flags![
    KFD_SMI_EVENT_VMFAULT,
    KFD_SMI_EVENT_THERMAL_THROTTLE,
    KFD_SMI_EVENT_GPU_PRE_RESET,
    KFD_SMI_EVENT_GPU_POST_RESET,
    KFD_SMI_EVENT_MIGRATE_START,
    KFD_SMI_EVENT_MIGRATE_END,
    KFD_SMI_EVENT_PAGE_FAULT_START,
    KFD_SMI_EVENT_PAGE_FAULT_END,
    KFD_SMI_EVENT_QUEUE_EVICTION,
    KFD_SMI_EVENT_QUEUE_RESTORE,
    KFD_SMI_EVENT_UNMAP_FROM_GPU,
    KFD_SMI_EVENT_PROCESS_START,
    KFD_SMI_EVENT_PROCESS_END,
    KFD_SMI_EVENT_ALL_PROCESS,
];

/// `KFD_IOC_ALLOC_MEM_FLAGS_*` with the minor each appeared in.
pub const ALLOC_MEM_FLAGS: &[FlagInfo] = &ALLOC_ARRAY;
/// `KFD_IOCTL_SVM_FLAG_*` with the minor each appeared in.
pub const SVM_FLAGS: &[FlagInfo] = &SVM_ARRAY;
/// `KFD_RUNTIME_ENABLE_MODE_*_MASK` with the minor each appeared in.
pub const RUNTIME_ENABLE_MODES: &[FlagInfo] = &RUNTIME_ARRAY;
/// `KFD_PROC_FLAG_*` with the minor each appeared in.
pub const PROC_FLAGS: &[FlagInfo] = &PROC_ARRAY;
/// `KFD_DBG_TRAP_FLAG_*` with the minor each appeared in.
pub const DBG_TRAP_FLAGS: &[FlagInfo] = &DBG_FLAG_ARRAY;
/// `KFD_DBG_TRAP_MASK_*` with the minor each appeared in.
pub const DBG_TRAP_MASKS: &[FlagInfo] = &DBG_MASK_ARRAY;
/// SMI event mask bits (named after the event id constant) with the minor each appeared in.
pub const SMI_EVENT_MASKS: &[FlagInfo] = &SMI_ARRAY;

const FLAG_PARTS: &[&[FlagInfo]] = &[
    ALLOC_MEM_FLAGS,
    SVM_FLAGS,
    RUNTIME_ENABLE_MODES,
    PROC_FLAGS,
    DBG_TRAP_FLAGS,
    DBG_TRAP_MASKS,
    SMI_EVENT_MASKS,
];

const fn concat_flags<const N: usize>(parts: &[&[FlagInfo]]) -> [FlagInfo; N] {
    let mut out = [NO_FLAG; N];
    let mut k = 0;
    let mut i = 0;
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[k] = parts[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N);
    out
}

const FLAG_COUNT: usize = ALLOC_MEM_FLAGS.len()
    + SVM_FLAGS.len()
    + RUNTIME_ENABLE_MODES.len()
    + PROC_FLAGS.len()
    + DBG_TRAP_FLAGS.len()
    + DBG_TRAP_MASKS.len()
    + SMI_EVENT_MASKS.len();
const FLAG_ARRAY: [FlagInfo; FLAG_COUNT] = concat_flags(FLAG_PARTS);

/// Every flag-like constant whose availability depends on the KFD minor: the tables above,
/// in that order.
pub const FLAGS: &[FlagInfo] = &FLAG_ARRAY;

/// The highest `since_minor` among the table's flags that `bits` sets (1 if none).
const fn min_minor(table: &[FlagInfo], bits: u64) -> u32 {
    let mut minor = 1;
    let mut i = 0;
    while i < table.len() {
        if bits & table[i].value != 0 && table[i].since_minor > minor {
            minor = table[i].since_minor;
        }
        i += 1;
    }
    minor
}

/// Returns the lowest KFD minor whose kernel knows every allocation flag set in `flags`
/// (bits without a name do not count).
///
/// ```
/// use kfd_ioctl::abi::{AllocMemFlags, alloc_flags_min_minor};
/// assert_eq!(alloc_flags_min_minor(AllocMemFlags::VRAM | AllocMemFlags::WRITABLE), 1);
/// assert_eq!(alloc_flags_min_minor(AllocMemFlags::VRAM | AllocMemFlags::CONTIGUOUS), 16);
/// ```
pub const fn alloc_flags_min_minor(flags: AllocMemFlags) -> u32 {
    min_minor(ALLOC_MEM_FLAGS, flags.bits() as u64)
}

/// Returns the lowest KFD minor whose kernel knows every SVM flag set in `flags` (bits
/// without a name do not count; the SVM API itself needs 1.5).
pub const fn svm_flags_min_minor(flags: SvmFlags) -> u32 {
    let minor = min_minor(SVM_FLAGS, flags.bits() as u64);
    if minor < 5 { 5 } else { minor }
}

/// Returns the lowest KFD minor whose kernel knows every SMI event enabled in `mask` (bits
/// without a name do not count; the SMI ioctl itself needs 1.3).
pub const fn smi_events_min_minor(mask: SmiEventMask) -> u32 {
    let minor = min_minor(SMI_EVENT_MASKS, mask.bits());
    if minor < 3 { 3 } else { minor }
}
