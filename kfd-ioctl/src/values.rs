//! The value types [`Kfd`](crate::Kfd)'s methods take and return.

use crate::abi::{self, AllocMemFlags, ProcFlags};

/// A GPU's apertures in this process, from `GET_PROCESS_APERTURES_NEW`.
#[derive(Clone, PartialEq, Eq)]
pub struct Apertures {
    /// The GPU.
    pub gpu_id: crate::GpuId,
    /// The LDS aperture (inclusive limit turned into an exclusive end).
    pub lds: std::ops::Range<u64>,
    /// The scratch aperture.
    pub scratch: std::ops::Range<u64>,
    /// The GPU virtual-address range usable for buffer objects.
    pub gpuvm: std::ops::Range<u64>,
}

impl std::fmt::Debug for Apertures {
    /// With the GPU id and the addresses in hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |r: &std::ops::Range<u64>| format!("{:#x}..{:#x}", r.start, r.end);
        f.debug_struct("Apertures")
            .field("gpu_id", &self.gpu_id)
            .field("lds", &format_args!("{}", hex(&self.lds)))
            .field("scratch", &format_args!("{}", hex(&self.scratch)))
            .field("gpuvm", &format_args!("{}", hex(&self.gpuvm)))
            .finish()
    }
}

impl From<&abi::kfd_process_device_apertures> for Apertures {
    fn from(a: &abi::kfd_process_device_apertures) -> Self {
        let range = |base: u64, limit: u64| base..limit.saturating_add(1);
        Apertures {
            gpu_id: crate::GpuId(a.gpu_id),
            lds: range(a.lds_base, a.lds_limit),
            scratch: range(a.scratch_base, a.scratch_limit),
            gpuvm: range(a.gpuvm_base, a.gpuvm_limit),
        }
    }
}

/// A cache policy for [`Kfd::set_memory_policy`](crate::Kfd::set_memory_policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// `KFD_IOC_CACHE_POLICY_COHERENT`.
    Coherent,
    /// `KFD_IOC_CACHE_POLICY_NONCOHERENT`.
    NonCoherent,
}

impl CachePolicy {
    pub(crate) fn raw(self) -> u32 {
        match self {
            CachePolicy::Coherent => abi::KFD_IOC_CACHE_POLICY_COHERENT,
            CachePolicy::NonCoherent => abi::KFD_IOC_CACHE_POLICY_NONCOHERENT,
        }
    }
}

/// The arguments of [`Kfd::set_memory_policy`](crate::Kfd::set_memory_policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPolicy {
    /// The default cache policy.
    pub default: CachePolicy,
    /// The policy inside the alternate aperture (GFX7/8 only).
    pub alternate: CachePolicy,
    /// The alternate aperture base (GFX7/8 only; 0 otherwise).
    pub alternate_aperture_base: u64,
    /// The alternate aperture size (GFX7/8 only; 0 otherwise).
    pub alternate_aperture_size: u64,
    /// Per-process flags (KFD ≥ 1.18).
    pub misc_process_flags: ProcFlags,
}

impl Default for MemoryPolicy {
    /// What libhsakmt sets on GFX9+: coherent default and alternate, no aperture, no flags.
    fn default() -> Self {
        MemoryPolicy {
            default: CachePolicy::Coherent,
            alternate: CachePolicy::Coherent,
            alternate_aperture_base: 0,
            alternate_aperture_size: 0,
            misc_process_flags: ProcFlags::empty(),
        }
    }
}

/// What `GET_DMABUF_INFO` tells about a dma-buf.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DmabufInfo {
    /// The buffer's size in bytes.
    pub size: u64,
    /// The exporting GPU.
    pub gpu_id: crate::GpuId,
    /// VRAM or GTT, plus PUBLIC when host-accessible.
    pub flags: AllocMemFlags,
    /// The size of the UMD metadata blob (written into the caller's buffer when one was given).
    pub metadata_size: u32,
}

impl std::fmt::Debug for DmabufInfo {
    /// With the GPU id in hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmabufInfo")
            .field("size", &self.size)
            .field("gpu_id", &self.gpu_id)
            .field("flags", &self.flags)
            .field("metadata_size", &self.metadata_size)
            .finish()
    }
}

/// The counters of `GET_CLOCK_COUNTERS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockCounters {
    /// The GPU's counter.
    pub gpu_clock_counter: u64,
    /// The CPU's counter (`rdtsc`-like).
    pub cpu_clock_counter: u64,
    /// The system counter: `CLOCK_BOOTTIME` ns on current kernels (`ktime_get_boottime_ns`
    /// in `kfd_ioctl_get_clock_counters`), the clock SMI timestamps use.
    pub system_clock_counter: u64,
    /// The system counter's frequency in Hz.
    pub system_clock_freq: u64,
}

/// The tiling configuration of `GET_TILE_CONFIG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    /// How many tile-config entries the kernel wrote.
    pub num_tile_configs: u32,
    /// How many macro-tile-config entries the kernel wrote.
    pub num_macro_tile_configs: u32,
    /// `GB_ADDR_CONFIG`.
    pub gb_addr_config: u32,
    /// The number of memory banks.
    pub num_banks: u32,
    /// The number of memory ranks.
    pub num_ranks: u32,
}
