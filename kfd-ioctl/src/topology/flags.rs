//! Bit sets and enums of the topology files, as `include/uapi/linux/kfd_sysfs.h` defines them.
//!
//! Every bit set keeps bits this crate does not name (`const _ = !0`), so a newer kernel's
//! bits survive a round trip.

use bitflags::bitflags;

bitflags! {
    /// The `capability` bits of a GPU node (`HSA_CAP_*`).
    ///
    /// Three multi-bit fields sit among the flags; read them with
    /// [`watch_points_total_bits`](Self::watch_points_total_bits),
    /// [`doorbell_type`](Self::doorbell_type) and [`asic_revision`](Self::asic_revision).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Capability: u32 {
        /// The node can be hot-plugged.
        #[doc(alias = "HSA_CAP_HOT_PLUGGABLE")]
        const HOT_PLUGGABLE = 0x0000_0001;
        /// An IOMMU with ATS is present.
        #[doc(alias = "HSA_CAP_ATS_PRESENT")]
        const ATS_PRESENT = 0x0000_0002;
        /// The device is shared with graphics.
        #[doc(alias = "HSA_CAP_SHARED_WITH_GRAPHICS")]
        const SHARED_WITH_GRAPHICS = 0x0000_0004;
        /// Queue sizes must be powers of two.
        #[doc(alias = "HSA_CAP_QUEUE_SIZE_POW2")]
        const QUEUE_SIZE_POW2 = 0x0000_0008;
        /// Queue sizes are limited to 32 bits.
        #[doc(alias = "HSA_CAP_QUEUE_SIZE_32BIT")]
        const QUEUE_SIZE_32BIT = 0x0000_0010;
        /// The queue idle event is supported.
        #[doc(alias = "HSA_CAP_QUEUE_IDLE_EVENT")]
        const QUEUE_IDLE_EVENT = 0x0000_0020;
        /// The virtual address space is limited.
        #[doc(alias = "HSA_CAP_VA_LIMIT")]
        const VA_LIMIT = 0x0000_0040;
        /// Address watch points are supported.
        #[doc(alias = "HSA_CAP_WATCH_POINTS_SUPPORTED")]
        const WATCH_POINTS_SUPPORTED = 0x0000_0080;
        /// AQL queues are mapped twice (Tonga).
        #[doc(alias = "HSA_CAP_AQL_QUEUE_DOUBLE_MAP")]
        const AQL_QUEUE_DOUBLE_MAP = 0x0000_4000;
        /// The debugger's trap interface is supported.
        #[doc(alias = "HSA_CAP_TRAP_DEBUG_SUPPORT")]
        const TRAP_DEBUG_SUPPORT = 0x0000_8000;
        /// The debugger can override the wave launch trap.
        #[doc(alias = "HSA_CAP_TRAP_DEBUG_WAVE_LAUNCH_TRAP_OVERRIDE_SUPPORTED")]
        const TRAP_DEBUG_WAVE_LAUNCH_TRAP_OVERRIDE_SUPPORTED = 0x0001_0000;
        /// The debugger can set the wave launch mode.
        #[doc(alias = "HSA_CAP_TRAP_DEBUG_WAVE_LAUNCH_MODE_SUPPORTED")]
        const TRAP_DEBUG_WAVE_LAUNCH_MODE_SUPPORTED = 0x0002_0000;
        /// The debugger can ask for precise memory operations.
        #[doc(alias = "HSA_CAP_TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED")]
        const TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED = 0x0004_0000;
        /// Reserved; old user mode depends on it being 0 (it once meant SRAM EDC).
        #[doc(alias = "HSA_CAP_RESERVED_WAS_SRAM_EDCSUPPORTED")]
        const RESERVED_WAS_SRAM_EDC_SUPPORTED = 0x0008_0000;
        /// Memory EDC (ECC) is supported.
        #[doc(alias = "HSA_CAP_MEM_EDCSUPPORTED")]
        const MEM_EDC_SUPPORTED = 0x0010_0000;
        /// RAS event notification is supported.
        #[doc(alias = "HSA_CAP_RASEVENTNOTIFY")]
        const RAS_EVENT_NOTIFY = 0x0020_0000;
        /// SRAM EDC is supported.
        #[doc(alias = "HSA_CAP_SRAM_EDCSUPPORTED")]
        const SRAM_EDC_SUPPORTED = 0x0400_0000;
        /// The GPU supports the SVM ioctl (`AMDKFD_IOC_SVM`).
        #[doc(alias = "HSA_CAP_SVMAPI_SUPPORTED")]
        const SVM_API_SUPPORTED = 0x0800_0000;
        /// Host access to this GPU's memory is coherent (e.g. MI300A).
        #[doc(alias = "HSA_CAP_FLAGS_COHERENTHOSTACCESS")]
        const COHERENT_HOST_ACCESS = 0x1000_0000;
        /// The firmware supports the debugger's trap interface.
        #[doc(alias = "HSA_CAP_TRAP_DEBUG_FIRMWARE_SUPPORTED")]
        const TRAP_DEBUG_FIRMWARE_SUPPORTED = 0x2000_0000;
        /// The debugger can ask for precise ALU operations.
        #[doc(alias = "HSA_CAP_TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED")]
        const TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED = 0x4000_0000;
        /// A single queue can be reset.
        #[doc(alias = "HSA_CAP_PER_QUEUE_RESET_SUPPORTED")]
        const PER_QUEUE_RESET_SUPPORTED = 0x8000_0000;

        const _ = !0;
    }
}

impl Capability {
    /// Mask of the log2 of the number of watch points (`HSA_CAP_WATCH_POINTS_TOTALBITS_MASK`).
    #[doc(alias = "HSA_CAP_WATCH_POINTS_TOTALBITS_MASK")]
    pub const WATCH_POINTS_TOTALBITS_MASK: u32 = 0x0000_0f00;
    /// Shift of [`Self::WATCH_POINTS_TOTALBITS_MASK`].
    pub const WATCH_POINTS_TOTALBITS_SHIFT: u32 = 8;
    /// Mask of the doorbell type (`HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK`).
    #[doc(alias = "HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK")]
    pub const DOORBELL_TYPE_MASK: u32 = 0x0000_3000;
    /// Shift of [`Self::DOORBELL_TYPE_MASK`].
    pub const DOORBELL_TYPE_SHIFT: u32 = 12;
    /// Mask of the ASIC revision (`HSA_CAP_ASIC_REVISION_MASK`).
    #[doc(alias = "HSA_CAP_ASIC_REVISION_MASK")]
    pub const ASIC_REVISION_MASK: u32 = 0x03c0_0000;
    /// Shift of [`Self::ASIC_REVISION_MASK`].
    pub const ASIC_REVISION_SHIFT: u32 = 22;

    /// Whether the GPU supports the SVM ioctl (`HSA_CAP_SVMAPI_SUPPORTED`).
    pub fn svm_api_supported(self) -> bool {
        self.contains(Self::SVM_API_SUPPORTED)
    }

    /// Whether host access to the GPU's memory is coherent (`HSA_CAP_FLAGS_COHERENTHOSTACCESS`).
    pub fn coherent_host_access(self) -> bool {
        self.contains(Self::COHERENT_HOST_ACCESS)
    }

    /// Whether the debugger's trap interface is supported (`HSA_CAP_TRAP_DEBUG_SUPPORT`).
    pub fn debug_trap_supported(self) -> bool {
        self.contains(Self::TRAP_DEBUG_SUPPORT)
    }

    /// The doorbell type: 0 before HSA 1.0, 1 for 1.0, 2 for 2.0 (GFX9 and later, 64-bit
    /// doorbells).
    pub fn doorbell_type(self) -> u8 {
        self.field(Self::DOORBELL_TYPE_MASK, Self::DOORBELL_TYPE_SHIFT)
    }

    /// The ASIC revision (4 bits).
    pub fn asic_revision(self) -> u8 {
        self.field(Self::ASIC_REVISION_MASK, Self::ASIC_REVISION_SHIFT)
    }

    /// The log2 of the number of address watch points (4 bits); 0 without watch points.
    pub fn watch_points_total_bits(self) -> u8 {
        self.field(
            Self::WATCH_POINTS_TOTALBITS_MASK,
            Self::WATCH_POINTS_TOTALBITS_SHIFT,
        )
    }

    fn field(self, mask: u32, shift: u32) -> u8 {
        // Every mask here is at most 4 bits wide, so the value fits a u8.
        ((self.bits() & mask) >> shift) as u8
    }
}

bitflags! {
    /// The `capability2` bits of a GPU node (`HSA_CAP2_*`), printed by newer kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Capability2: u32 {
        /// A single SDMA queue can be reset.
        #[doc(alias = "HSA_CAP2_PER_SDMA_QUEUE_RESET_SUPPORTED")]
        const PER_SDMA_QUEUE_RESET_SUPPORTED = 0x0000_0001;

        const _ = !0;
    }
}

bitflags! {
    /// The `debug_prop` bits of a GPU node (`HSA_DBG_*`), printed by newer kernels.
    ///
    /// Two multi-bit fields sit among the flags; read them with
    /// [`watch_addr_mask_lo_bit`](Self::watch_addr_mask_lo_bit) and
    /// [`watch_addr_mask_hi_bit`](Self::watch_addr_mask_hi_bit).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct DebugProp: u64 {
        /// Dispatch information is always valid in the trap handler.
        #[doc(alias = "HSA_DBG_DISPATCH_INFO_ALWAYS_VALID")]
        const DISPATCH_INFO_ALWAYS_VALID = 0x0000_0400;
        /// Watch points are exclusive to one process.
        #[doc(alias = "HSA_DBG_WATCHPOINTS_EXCLUSIVE")]
        const WATCHPOINTS_EXCLUSIVE = 0x0000_0800;

        const _ = !0;
    }
}

impl DebugProp {
    /// Mask of the lowest watch-address mask bit (`HSA_DBG_WATCH_ADDR_MASK_LO_BIT_MASK`).
    #[doc(alias = "HSA_DBG_WATCH_ADDR_MASK_LO_BIT_MASK")]
    pub const WATCH_ADDR_MASK_LO_BIT_MASK: u64 = 0x0000_000f;
    /// Shift of [`Self::WATCH_ADDR_MASK_LO_BIT_MASK`].
    pub const WATCH_ADDR_MASK_LO_BIT_SHIFT: u32 = 0;
    /// Mask of the highest watch-address mask bit (`HSA_DBG_WATCH_ADDR_MASK_HI_BIT_MASK`).
    #[doc(alias = "HSA_DBG_WATCH_ADDR_MASK_HI_BIT_MASK")]
    pub const WATCH_ADDR_MASK_HI_BIT_MASK: u64 = 0x0000_03f0;
    /// Shift of [`Self::WATCH_ADDR_MASK_HI_BIT_MASK`].
    pub const WATCH_ADDR_MASK_HI_BIT_SHIFT: u32 = 4;

    /// The lowest address bit a watch-point mask may cover.
    pub fn watch_addr_mask_lo_bit(self) -> u8 {
        // A 4-bit field.
        ((self.bits() & Self::WATCH_ADDR_MASK_LO_BIT_MASK) >> Self::WATCH_ADDR_MASK_LO_BIT_SHIFT)
            as u8
    }

    /// The highest address bit a watch-point mask may cover.
    pub fn watch_addr_mask_hi_bit(self) -> u8 {
        // A 6-bit field.
        ((self.bits() & Self::WATCH_ADDR_MASK_HI_BIT_MASK) >> Self::WATCH_ADDR_MASK_HI_BIT_SHIFT)
            as u8
    }
}

/// The `heap_type` of a memory bank (`HSA_MEM_HEAP_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeapType {
    /// System memory (a CPU node's bank).
    #[doc(alias = "HSA_MEM_HEAP_TYPE_SYSTEM")]
    System,
    /// VRAM that the host can reach in full (large BAR).
    #[doc(alias = "HSA_MEM_HEAP_TYPE_FB_PUBLIC")]
    FrameBufferPublic,
    /// VRAM that the host cannot reach in full.
    #[doc(alias = "HSA_MEM_HEAP_TYPE_FB_PRIVATE")]
    FrameBufferPrivate,
    /// Global data share.
    #[doc(alias = "HSA_MEM_HEAP_TYPE_GPU_GDS")]
    GpuGds,
    /// Local data share.
    #[doc(alias = "HSA_MEM_HEAP_TYPE_GPU_LDS")]
    GpuLds,
    /// Scratch memory.
    #[doc(alias = "HSA_MEM_HEAP_TYPE_GPU_SCRATCH")]
    GpuScratch,
    /// A value `kfd_sysfs.h` does not define.
    Unknown(u32),
}

impl HeapType {
    /// Decodes the kernel's number.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            0 => Self::System,
            1 => Self::FrameBufferPublic,
            2 => Self::FrameBufferPrivate,
            3 => Self::GpuGds,
            4 => Self::GpuLds,
            5 => Self::GpuScratch,
            other => Self::Unknown(other),
        }
    }

    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            Self::System => 0,
            Self::FrameBufferPublic => 1,
            Self::FrameBufferPrivate => 2,
            Self::GpuGds => 3,
            Self::GpuLds => 4,
            Self::GpuScratch => 5,
            Self::Unknown(other) => other,
        }
    }

    /// Whether this is VRAM (frame buffer, public or private).
    pub fn is_vram(self) -> bool {
        matches!(self, Self::FrameBufferPublic | Self::FrameBufferPrivate)
    }
}

bitflags! {
    /// The `flags` of a memory bank (`HSA_MEM_FLAGS_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MemFlags: u32 {
        /// The memory can be hot-plugged.
        #[doc(alias = "HSA_MEM_FLAGS_HOT_PLUGGABLE")]
        const HOT_PLUGGABLE = 0x0000_0001;
        /// The memory is non-volatile.
        #[doc(alias = "HSA_MEM_FLAGS_NON_VOLATILE")]
        const NON_VOLATILE = 0x0000_0002;

        const _ = !0;
    }
}

bitflags! {
    /// The `type` bits of a cache (`HSA_CACHE_TYPE_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct CacheType: u32 {
        /// Caches data.
        #[doc(alias = "HSA_CACHE_TYPE_DATA")]
        const DATA = 0x0000_0001;
        /// Caches instructions.
        #[doc(alias = "HSA_CACHE_TYPE_INSTRUCTION")]
        const INSTRUCTION = 0x0000_0002;
        /// A CPU cache.
        #[doc(alias = "HSA_CACHE_TYPE_CPU")]
        const CPU = 0x0000_0004;
        /// A GPU (HSA compute unit) cache.
        #[doc(alias = "HSA_CACHE_TYPE_HSACU")]
        const HSACU = 0x0000_0008;

        const _ = !0;
    }
}

/// The `type` of an IO or P2P link (`HSA_IOLINK_TYPE_*`, the CRAT link types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoLinkType {
    /// Undefined.
    #[doc(alias = "HSA_IOLINK_TYPE_UNDEFINED")]
    Undefined,
    /// HyperTransport (AMD CPU sockets).
    #[doc(alias = "HSA_IOLINK_TYPE_HYPERTRANSPORT")]
    HyperTransport,
    /// PCI Express.
    #[doc(alias = "HSA_IOLINK_TYPE_PCIEXPRESS")]
    PciExpress,
    /// AMBA.
    #[doc(alias = "HSA_IOLINK_TYPE_AMBA")]
    Amba,
    /// MIPI.
    #[doc(alias = "HSA_IOLINK_TYPE_MIPI")]
    Mipi,
    /// QPI 1.1.
    #[doc(alias = "HSA_IOLINK_TYPE_QPI_1_1")]
    Qpi11,
    /// RapidIO.
    #[doc(alias = "HSA_IOLINK_TYPE_RAPID_IO")]
    RapidIo,
    /// InfiniBand.
    #[doc(alias = "HSA_IOLINK_TYPE_INFINIBAND")]
    InfiniBand,
    /// xGMI (AMD Infinity Fabric between GPUs).
    #[doc(alias = "HSA_IOLINK_TYPE_XGMI")]
    Xgmi,
    /// XGOP.
    #[doc(alias = "HSA_IOLINK_TYPE_XGOP")]
    Xgop,
    /// GZ.
    #[doc(alias = "HSA_IOLINK_TYPE_GZ")]
    Gz,
    /// Ethernet RDMA.
    #[doc(alias = "HSA_IOLINK_TYPE_ETHERNET_RDMA")]
    EthernetRdma,
    /// Other RDMA.
    #[doc(alias = "HSA_IOLINK_TYPE_RDMA_OTHER")]
    RdmaOther,
    /// Another kind of link (`HSA_IOLINK_TYPE_OTHER`, 16).
    #[doc(alias = "HSA_IOLINK_TYPE_OTHER")]
    Other,
    /// A reserved value or one `kfd_sysfs.h` does not define.
    Unknown(u32),
}

impl IoLinkType {
    /// Decodes the kernel's number.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            0 => Self::Undefined,
            1 => Self::HyperTransport,
            2 => Self::PciExpress,
            3 => Self::Amba,
            4 => Self::Mipi,
            5 => Self::Qpi11,
            8 => Self::RapidIo,
            9 => Self::InfiniBand,
            11 => Self::Xgmi,
            12 => Self::Xgop,
            13 => Self::Gz,
            14 => Self::EthernetRdma,
            15 => Self::RdmaOther,
            16 => Self::Other,
            other => Self::Unknown(other),
        }
    }

    /// The kernel's number.
    pub fn raw(self) -> u32 {
        match self {
            Self::Undefined => 0,
            Self::HyperTransport => 1,
            Self::PciExpress => 2,
            Self::Amba => 3,
            Self::Mipi => 4,
            Self::Qpi11 => 5,
            Self::RapidIo => 8,
            Self::InfiniBand => 9,
            Self::Xgmi => 11,
            Self::Xgop => 12,
            Self::Gz => 13,
            Self::EthernetRdma => 14,
            Self::RdmaOther => 15,
            Self::Other => 16,
            Self::Unknown(other) => other,
        }
    }
}

bitflags! {
    /// The `flags` of an IO or P2P link (`HSA_IOLINK_FLAGS_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct IoLinkFlags: u32 {
        /// The link is enabled.
        #[doc(alias = "HSA_IOLINK_FLAGS_ENABLED")]
        const ENABLED = 1 << 0;
        /// The link is not cache coherent.
        #[doc(alias = "HSA_IOLINK_FLAGS_NON_COHERENT")]
        const NON_COHERENT = 1 << 1;
        /// 32-bit atomics do not cross the link.
        #[doc(alias = "HSA_IOLINK_FLAGS_NO_ATOMICS_32_BIT")]
        const NO_ATOMICS_32_BIT = 1 << 2;
        /// 64-bit atomics do not cross the link.
        #[doc(alias = "HSA_IOLINK_FLAGS_NO_ATOMICS_64_BIT")]
        const NO_ATOMICS_64_BIT = 1 << 3;
        /// Peer-to-peer DMA does not cross the link.
        #[doc(alias = "HSA_IOLINK_FLAGS_NO_PEER_TO_PEER_DMA")]
        const NO_PEER_TO_PEER_DMA = 1 << 4;

        const _ = !0;
    }
}
