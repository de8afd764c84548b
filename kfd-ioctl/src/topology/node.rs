//! A topology node: its `properties` file, typed, and what hangs below it.

use std::fmt;
use std::path::{Path, PathBuf};

use super::error::TopologyError;
use super::flags::{Capability, Capability2, DebugProp};
use super::limits;
use super::parts::{Cache, IoLink, MemBank};
use super::text::{self, Key};
use crate::GpuId;

/// Declares [`NodeProperties`]: one typed field per key the kernel's `node_show` prints, in
/// print order, and the schema the parser checks widths and required keys against.
///
/// Presence: `required` keys (a file without them is not the kernel's) and `always` keys
/// (printed by every kernel since dGPU support) are plain `u64`, 0 when absent; `optional` keys
/// (added later, or printed for GPUs only) are `Option<u64>`, so absent differs from 0.
macro_rules! node_properties {
    ($( $(#[doc = $doc:literal])* $field:ident: $presence:ident $bits:tt, )*) => {
        /// The typed contents of a node's `properties` file, plus every line as read.
        ///
        /// [`entries`](Self::entries) is the file itself; the typed fields are decoded from it
        /// (the first line of a key wins, as in libhsakmt). Change values with
        /// [`set`](Self::set) to keep both in step.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct NodeProperties {
            $( $(#[doc = $doc])* pub $field: node_properties!(@type $presence), )*
            /// Every line of the file as `(key, value)`, in file order, so that the file can be
            /// printed again byte for byte by [`to_sysfs_text`](Self::to_sysfs_text).
            pub entries: Vec<(String, u64)>,
        }

        impl NodeProperties {
            /// The keys the kernel prints, in its print order (newest kernels; older ones
            /// print a subset).
            pub const KNOWN_KEYS: &'static [&'static str] = &[$(stringify!($field)),*];

            const SCHEMA: &'static [Key] = &[
                $( node_properties!(@key $presence $bits stringify!($field)), )*
            ];

            /// Builds the typed view of `entries` (lines in file order).
            pub fn from_entries(entries: Vec<(String, u64)>) -> Self {
                Self {
                    $( $field: node_properties!(
                        @get $presence text::lookup(&entries, stringify!($field))
                    ), )*
                    entries,
                }
            }
        }
    };
    (@type required) => { u64 };
    (@type always) => { u64 };
    (@type optional) => { Option<u64> };
    (@key required $bits:tt $name:expr) => { node_properties!(@key always $bits $name).required() };
    (@key always 32 $name:expr) => { Key::u32($name) };
    (@key always 64 $name:expr) => { Key::u64($name) };
    (@key optional $bits:tt $name:expr) => { node_properties!(@key always $bits $name) };
    (@get optional $value:expr) => { $value };
    (@get $presence:ident $value:expr) => { $value.unwrap_or(0) };
}

node_properties! {
    /// CPU cores in this node (0 for a GPU node).
    cpu_cores_count: required 32,
    /// SIMDs in this node, over all XCCs (0 for a CPU node).
    simd_count: required 32,
    /// Number of `mem_banks/` entries the kernel has.
    mem_banks_count: always 32,
    /// Number of `caches/` entries the kernel has.
    caches_count: always 32,
    /// Number of `io_links/` entries the kernel has.
    io_links_count: always 32,
    /// Number of `p2p_links/` entries the kernel has (newer kernels).
    p2p_links_count: optional 32,
    /// First CPU core id.
    cpu_core_id_base: always 32,
    /// First SIMD id; GPUs count from 0x8000_0000.
    simd_id_base: always 32,
    /// Wave slots per SIMD.
    max_waves_per_simd: always 32,
    /// LDS per workgroup, KiB.
    lds_size_in_kb: always 32,
    /// GDS, KiB.
    gds_size_in_kb: always 32,
    /// Global wave sync resources (newer kernels).
    num_gws: optional 32,
    /// Wavefront size: 64 (GFX9) or 32 (RDNA).
    wave_front_size: always 32,
    /// Shader arrays, over all XCCs.
    array_count: always 32,
    /// Shader arrays per shader engine.
    simd_arrays_per_engine: always 32,
    /// Compute units per shader array.
    cu_per_simd_array: always 32,
    /// SIMDs per compute unit.
    simd_per_cu: always 32,
    /// Scratch wave slots per compute unit.
    max_slots_scratch_cu: always 32,
    /// `major * 10000 + minor * 100 + stepping` of the GFX IP, e.g. 90402 for gfx942
    /// (newer kernels; 0 for a CPU node). See [`Node::gfx_target_version`].
    gfx_target_version: optional 32,
    /// PCI vendor id (0x1002 for AMD GPUs).
    vendor_id: always 32,
    /// PCI device id.
    device_id: always 32,
    /// PCI location: `bus << 8 | devfn`.
    location_id: always 32,
    /// PCI domain (newer kernels).
    domain: optional 32,
    /// Minor number of the GPU's DRM render node, `/dev/dri/renderD<minor>`.
    drm_render_minor: always 32,
    /// xGMI hive id; 0 outside a hive (newer kernels).
    hive_id: optional 64,
    /// SDMA engines for PCIe transfers (newer kernels).
    num_sdma_engines: optional 32,
    /// SDMA engines for xGMI transfers (newer kernels).
    num_sdma_xgmi_engines: optional 32,
    /// User SDMA queues per engine (newer kernels).
    num_sdma_queues_per_engine: optional 32,
    /// User compute queues (newer kernels).
    num_cp_queues: optional 32,
    /// Context-save area size per queue, bytes (newest kernels).
    cwsr_size: optional 32,
    /// Control-stack size within the context-save area, bytes (newest kernels).
    ctl_stack_size: optional 32,
    /// Maximum engine clock, MHz (GPU nodes).
    max_engine_clk_fcompute: optional 32,
    /// Local memory size; always 0 on modern kernels, which report VRAM in `mem_banks`
    /// (GPU nodes).
    local_mem_size: optional 64,
    /// MEC firmware version (GPU nodes).
    fw_version: optional 32,
    /// `HSA_CAP_*` bits (GPU nodes). See [`Node::capability`].
    capability: optional 32,
    /// `HSA_CAP2_*` bits (GPU nodes, newest kernels). See [`Node::capability2`].
    capability2: optional 32,
    /// `HSA_DBG_*` debugger properties (GPU nodes, newer kernels). See [`Node::debug_prop`].
    debug_prop: optional 64,
    /// SDMA firmware version (GPU nodes).
    sdma_fw_version: optional 32,
    /// 64-bit unique id of the device, shared by its partitions (GPU nodes).
    unique_id: optional 64,
    /// XCCs in this node or partition (GPU nodes, newer kernels).
    num_xcc: optional 32,
    /// Maximum CPU clock, MHz.
    max_engine_clk_ccompute: always 32,
}

impl NodeProperties {
    /// Parses a `properties` file's text; `path` only names the file in errors.
    ///
    /// Each non-blank line must be `key value` with a decimal value; a key the kernel prints
    /// from a 32-bit field must fit 32 bits; `cpu_cores_count` and `simd_count` must be there.
    /// The processor and directory counts must be within [`limits`](super::limits)
    /// ([`TopologyError::AboveLimit`]), on every line that sets them.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TopologyError> {
        let entries = text::parse(text, path, Self::SCHEMA)?;
        for (key, value) in &entries {
            let Some(&(_, limit)) = Self::LIMITS.iter().find(|(k, _)| k == key) else {
                continue;
            };
            if *value > limit {
                return Err(TopologyError::AboveLimit {
                    path: path.to_path_buf(),
                    what: key.clone(),
                    value: *value,
                    limit,
                });
            }
        }
        Ok(Self::from_entries(entries))
    }

    /// The counts a program sizes arrays from, and their sanity limits.
    const LIMITS: &'static [(&'static str, u64)] = &[
        ("cpu_cores_count", limits::MAX_PROCESSORS),
        ("simd_count", limits::MAX_PROCESSORS),
        ("mem_banks_count", limits::MAX_MEM_BANKS),
        ("caches_count", limits::MAX_CACHES),
        ("io_links_count", limits::MAX_NODES),
        ("p2p_links_count", limits::MAX_NODES),
    ];

    /// The value of `key`, typed or not; `None` when the file has no such line.
    pub fn get(&self, key: &str) -> Option<u64> {
        text::lookup(&self.entries, key)
    }

    /// Sets `key` to `value`: changes its line, or appends one, and updates the typed field.
    pub fn set(&mut self, key: &str, value: u64) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key.to_owned(), value)),
        }
        *self = Self::from_entries(std::mem::take(&mut self.entries));
    }

    /// The lines whose key is not one of [`KNOWN_KEYS`](Self::KNOWN_KEYS), in file order.
    pub fn unknown(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.entries
            .iter()
            .filter(|(k, _)| !Self::KNOWN_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), *v))
    }

    /// The file as the kernel prints it: every entry as `key value\n`, in order.
    pub fn to_sysfs_text(&self) -> String {
        text::emit(&self.entries)
    }
}

/// A GFX IP version as KFD reports it in `gfx_target_version`; displays as the ISA name
/// (`gfx90a`, `gfx942`, `gfx1100`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GfxTargetVersion {
    /// Major version (9, 10, 11, 12).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Stepping.
    pub stepping: u32,
}

impl GfxTargetVersion {
    /// Decodes `major * 10000 + minor * 100 + stepping`.
    pub fn from_raw(raw: u32) -> Self {
        Self {
            major: raw / 10_000,
            minor: raw / 100 % 100,
            stepping: raw % 100,
        }
    }

    /// The kernel's encoding, `major * 10000 + minor * 100 + stepping`; `None` when the
    /// fields do not fit it (minor or stepping above 99, or the value above `u32::MAX`), which
    /// only a version built by hand can do.
    pub fn raw(self) -> Option<u32> {
        if self.minor > 99 || self.stepping > 99 {
            return None;
        }
        self.major
            .checked_mul(10_000)?
            .checked_add(self.minor * 100 + self.stepping)
    }
}

impl fmt::Display for GfxTargetVersion {
    /// The LLVM target name: minor and stepping are one hex digit each (`gfx90a`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gfx{}{:x}{:x}", self.major, self.minor, self.stepping)
    }
}

/// One node of the topology (`nodes/<id>/`): a CPU, a GPU (or one partition of a GPU), or an
/// APU with both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// The directory number; nodes are numbered from 0, CPUs first.
    pub id: u32,
    /// The `gpu_id` file (0 for CPU nodes); `None` when the file is absent. See
    /// [`gpu_id`](Self::gpu_id) for the id of a GPU.
    pub gpu_id: Option<u32>,
    /// The `name` file, trimmed; it may be empty. `None` when the file is absent.
    pub name: Option<String>,
    /// The `properties` file.
    pub properties: NodeProperties,
    /// `mem_banks/<N>/`, in numeric order.
    pub mem_banks: Vec<MemBank>,
    /// `caches/<N>/`, in numeric order.
    pub caches: Vec<Cache>,
    /// `io_links/<N>/`, in numeric order.
    pub io_links: Vec<IoLink>,
    /// `p2p_links/<N>/`, in numeric order.
    pub p2p_links: Vec<IoLink>,
}

impl Node {
    /// Whether the node has GPU compute units (`simd_count > 0`).
    pub fn is_gpu(&self) -> bool {
        self.properties.simd_count > 0
    }

    /// Whether the node has CPU cores (`cpu_cores_count > 0`); an APU is both.
    pub fn is_cpu(&self) -> bool {
        self.properties.cpu_cores_count > 0
    }

    /// The GPU id that ioctls take: the `gpu_id` file when it is present and not 0.
    ///
    /// `None` for a CPU-only node (its `gpu_id` file reads 0) and for a node read from a
    /// capture without a `gpu_id` file. A GPU node of a live system has one.
    pub fn gpu_id(&self) -> Option<GpuId> {
        self.gpu_id.filter(|&id| id != 0).map(GpuId)
    }

    /// The DRM render minor for [`crate::Kfd::acquire_vm`] (`renderD<minor>`); `None` for a
    /// CPU node or a minor of 0 (captures that scrubbed it). The topology parser reads it as
    /// a 32-bit field, so no cast is needed.
    pub fn render_minor(&self) -> Option<u32> {
        let minor = u32::try_from(self.properties.drm_render_minor).ok()?;
        (self.is_gpu() && minor != 0).then_some(minor)
    }

    /// Compute units: `simd_count / simd_per_cu`; `None` for a node without SIMDs.
    pub fn cu_count(&self) -> Option<u64> {
        let p = &self.properties;
        (p.simd_count > 0 && p.simd_per_cu > 0).then(|| p.simd_count / p.simd_per_cu)
    }

    /// VRAM bytes: the sum of the frame-buffer banks (public or private), or
    /// `local_mem_size` when the node has no memory banks at all; 0 when neither is known.
    ///
    /// A node [`Topology::read_from`](super::Topology::read_from) returns never has banks that
    /// add up past `u64::MAX` ([`TopologyError::Overflow`]); for a node built by hand the sum
    /// stops at `u64::MAX`.
    pub fn vram_size(&self) -> u64 {
        if self.mem_banks.is_empty() {
            return self.properties.local_mem_size.unwrap_or(0);
        }
        self.mem_banks
            .iter()
            .filter(|bank| bank.heap().is_vram())
            .fold(0u64, |sum, bank| sum.saturating_add(bank.size_in_bytes))
    }

    /// The GPU's render node, `/dev/dri/renderD<drm_render_minor>`; `None` for a CPU node or
    /// when the minor is 0 (as in captures that scrubbed it).
    pub fn render_node_path(&self) -> Option<PathBuf> {
        let minor = self.properties.drm_render_minor;
        (self.is_gpu() && minor != 0).then(|| PathBuf::from(format!("/dev/dri/renderD{minor}")))
    }

    /// The GFX IP version; `None` for a CPU node or a kernel that does not print
    /// `gfx_target_version` (older kernels: nothing is derived from the device id).
    pub fn gfx_target_version(&self) -> Option<GfxTargetVersion> {
        self.properties
            .gfx_target_version
            .and_then(|raw| u32::try_from(raw).ok())
            .filter(|&raw| raw != 0)
            .map(GfxTargetVersion::from_raw)
    }

    /// The `capability` bits; empty when the key is absent (CPU nodes).
    pub fn capability(&self) -> Capability {
        Capability::from_bits_retain(low32(self.properties.capability))
    }

    /// The `capability2` bits; empty when the key is absent (CPU nodes, older kernels).
    pub fn capability2(&self) -> Capability2 {
        Capability2::from_bits_retain(low32(self.properties.capability2))
    }

    /// The `debug_prop` bits; empty when the key is absent (CPU nodes, older kernels).
    pub fn debug_prop(&self) -> DebugProp {
        DebugProp::from_bits_retain(self.properties.debug_prop.unwrap_or(0))
    }

    /// The xGMI hive id; `None` outside a hive or on kernels that do not print it.
    pub fn hive_id(&self) -> Option<u64> {
        self.properties.hive_id.filter(|&id| id != 0)
    }
}

/// A 32-bit field's value. The parser rejects wider values, so the truncation only affects
/// values a caller stored by hand.
fn low32(value: Option<u64>) -> u32 {
    value.unwrap_or(0) as u32
}
