//! Machine descriptions: which CPUs and GPUs the emulated KFD reports, and the sysfs topology
//! tree that describes them.
//!
//! A [`Machine`] is a KFD topology ([`kfd_ioctl::topology::Topology`]) made complete enough
//! for the runtimes that read it (see [`fixup`](self#fixups)), plus the facts the model needs
//! about each GPU ([`Gpu`]): its `gpu_id`, render minor, VRAM size, apertures, whether it is
//! an APU, and its XNACK rules ([`Machine::xnack_mode`]).
//!
//! ```
//! use kfd_emu::machine::Machine;
//!
//! let machine = Machine::preset("mi210x8").expect("a preset");
//! assert_eq!(machine.gpus().len(), 8);
//! let gpu = &machine.gpus()[0];
//! assert_eq!(gpu.target.to_string(), "gfx90a");
//! assert!((128..=255).contains(&gpu.render_minor));
//! assert!(Machine::presets().iter().any(|(name, _)| *name == "mi300x"));
//! ```
//!
//! # Fixups
//!
//! Real captures are often partial (a scrubbed `drm_render_minor`, no `gpu_id` file, counts
//! whose directories were not copied). Every machine, preset or loaded, is completed so that
//! libhsakmt and ROCr 5.2.3 accept it, keeping every key the capture has:
//! * a tree of GPU nodes only gets a CPU node 0 (from a real capture), the others moving up;
//! * each node's `*_count` keys match the directories that exist;
//! * a GPU without a `gpu_id` gets a stable one derived from its PCI location and ids;
//! * a GPU whose `drm_render_minor` is outside 128–255 or taken gets the next free one;
//! * a GPU without a data cache of type HSACU gets L1/L2 (and L3 where the part has one);
//! * a CPU node without caches gets L1/L2/L3, so libhsakmt does not read the host's;
//! * missing memory banks are added (VRAM size from a table of the known parts; an MI300A's
//!   is what the kernel reports for that APU, its socket's TTM limit);
//! * every link's `node_from` is its node, and each GPU has a PCIe link to a CPU and back.
//!
//! Generated caches list at most 1024 processors in their sibling maps, whatever the core or
//! CU count says. A tree the emulator cannot represent is refused with a [`MachineError`]
//! naming the node or file and the value: more than 128 GPUs, a node id that cannot move up
//! for the added CPU node, VRAM banks adding up past 2^64, or a completed tree that the
//! topology parser would not read back (a number or file past its
//! [limits](kfd_ioctl::topology::limits)).
//!
//! # One machine
//!
//! Everything else a program can read about the machine is derived from the same topology, so
//! that it tells one story: the CPUs and NUMA nodes ([`cpus`]: `/proc/cpuinfo`,
//! `/sys/devices/system/{cpu,node}`, each GPU's `numa_node`) and amdgpu's IP discovery
//! ([`ip_discovery`]: `ip_discovery/die/0` under the GPU's PCI device).

pub mod cpus;
mod error;
mod fixup;
pub mod ip_discovery;
mod presets;
mod sysfs;

use std::fmt;
use std::path::Path;

use kfd_ioctl::topology::{GfxTargetVersion, HeapType, MemBank, Node, Topology};

pub use error::MachineError;
pub use presets::PRESETS;

/// A machine the emulator presents: its topology and the GPUs in it.
#[derive(Debug, Clone)]
pub struct Machine {
    name: String,
    topology: Topology,
    gpus: Vec<Gpu>,
}

/// The aperture layout of a GFX family, as `kfd_flat_memory.c` computes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApertureLayout {
    /// GFX7/GFX8: LDS and scratch in the upper 64-bit space, 40-bit GPUVM.
    Vi,
    /// GFX9 up to GFX12.0: LDS at 1<<48, scratch at 2<<48, 47-bit GPUVM.
    V9,
    /// GFX12.1 and later: the GMC's shared and private apertures.
    V12,
}

/// One GPU's apertures as GET_PROCESS_APERTURES(_NEW) reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Apertures {
    /// First LDS address.
    pub lds_base: u64,
    /// Last LDS address.
    pub lds_limit: u64,
    /// First scratch address.
    pub scratch_base: u64,
    /// Last scratch address.
    pub scratch_limit: u64,
    /// First GPUVM address a process may use.
    pub gpuvm_base: u64,
    /// Last GPUVM address a process may use.
    pub gpuvm_limit: u64,
}

impl ApertureLayout {
    /// The family of a GFX target (V9 when the kernel does not print the version).
    pub fn of(target: Option<GfxTargetVersion>) -> Self {
        match target {
            Some(t) if t.major < 9 => Self::Vi,
            Some(t) if (t.major, t.minor) >= (12, 1) => Self::V12,
            _ => Self::V9,
        }
    }

    /// The apertures the kernel computes for this family.
    pub fn apertures(self) -> Apertures {
        // MAKE_LDS_APP_LIMIT / MAKE_SCRATCH_APP_LIMIT: the base's upper half, 4 GiB.
        let limit = |base: u64| (base & 0xFFFF_FFFF_0000_0000) | 0xFFFF_FFFF;
        match self {
            Self::Vi => {
                let lds = 1u64 << 61;
                let scratch = (1u64 << 61) + 0x1_0000_0000;
                Apertures {
                    lds_base: lds,
                    lds_limit: limit(lds),
                    scratch_base: scratch,
                    scratch_limit: limit(scratch),
                    // SVM_USER_BASE: the CWSR TBA/TMA pages plus two pages.
                    gpuvm_base: 4 * 4096,
                    gpuvm_limit: (1u64 << 40) - 1,
                }
            }
            Self::V9 => {
                let lds = 1u64 << 48;
                let scratch = 2u64 << 48;
                Apertures {
                    lds_base: lds,
                    lds_limit: limit(lds),
                    scratch_base: scratch,
                    scratch_limit: limit(scratch),
                    // AMDGPU_VA_RESERVED_BOTTOM on current kernels.
                    gpuvm_base: 0x1_0000,
                    // min(VM size, AMDGPU_GMC_HOLE_START) - 1 for a 48-bit VM.
                    gpuvm_limit: (1u64 << 47) - 1,
                }
            }
            Self::V12 => {
                let lds = 0x2000_0000_0000_0000u64;
                let scratch = 0x1000_0000_0000_0000u64;
                Apertures {
                    lds_base: lds,
                    lds_limit: limit(lds),
                    scratch_base: scratch,
                    scratch_limit: limit(scratch),
                    gpuvm_base: 0x1_0000,
                    gpuvm_limit: (1u64 << 47) - 1,
                }
            }
        }
    }
}

/// What the model needs to know about one GPU node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// The topology node id.
    pub node_id: u32,
    /// The id ioctls take.
    pub gpu_id: u32,
    /// The node's `name` (an ASIC codename, `ip discovery`, or empty).
    pub name: String,
    /// The GFX target (from `gfx_target_version`; gfx9.0.0 when the kernel does not print it).
    pub target: GfxTargetVersion,
    /// VRAM bytes (sum of the frame-buffer banks).
    pub vram_size: u64,
    /// Whether the host can reach all of VRAM (a `FB_PUBLIC` bank: large BAR).
    pub large_bar: bool,
    /// `/dev/dri/renderD<render_minor>`.
    pub render_minor: u32,
    /// PCI device id.
    pub device_id: u32,
    /// PCI vendor id (0x1002).
    pub vendor_id: u32,
    /// PCI domain (0 when the kernel does not print it).
    pub pci_domain: u32,
    /// PCI location, `bus << 8 | device << 3 | function`.
    pub location_id: u32,
    /// xGMI hive id; `None` outside a hive.
    pub hive_id: Option<u64>,
    /// Aperture family.
    pub layout: ApertureLayout,
    /// Whether a process may turn XNACK (retry faults) on for this GPU whatever the boot-time
    /// retry setting (`KFD_SUPPORT_XNACK_PER_PROCESS`: GC 9.4.2, 9.4.3, 9.4.4, 9.5.0, 12.1.0).
    pub xnack_capable: bool,
    /// The boot-time `noretry` setting, `amdgpu_gmc_noretry_set` with `amdgpu.noretry=-1` (the
    /// default) on bare metal: 1 for GC 9.0.1, 9.4.0–9.4.4, 9.5.0 and from 10.3.0 on; 0 (retry
    /// faults on) for the others, such as the GFX9 APUs (gfx902, gfx909, gfx90c) and gfx101x.
    pub noretry: bool,
    /// Whether the kernel treats the GPU as an APU whose GPU memory is carved out of system
    /// RAM (`adev->apu_prefer_gtt`): KFD's VRAM allocations are GTT BOs charged to system
    /// memory, AVAILABLE_MEMORY is bounded by the system limits, and SVM never migrates to
    /// "VRAM". A topology GPU node with CPU cores (a CRAT APU) or an MI300A.
    pub apu: bool,
    /// Whether the GPU supports the SVM API (`HSA_CAP_SVMAPI_SUPPORTED`).
    pub svm_capable: bool,
}

impl Gpu {
    /// The PCI slot name sysfs and uevent use, `dddd:bb:dd.f`.
    pub fn pci_slot_name(&self) -> String {
        let bus = (self.location_id >> 8) & 0xff;
        let dev = (self.location_id >> 3) & 0x1f;
        let func = self.location_id & 0x7;
        format!("{:04x}:{bus:02x}:{dev:02x}.{func:x}", self.pci_domain)
    }

    /// The PCI revision of the board (`revision` in sysfs, `pci_rev` in DRM's DEV_INFO): that
    /// of the boards the presets describe, so that libdrm's `amdgpu.ids` finds their
    /// marketing names; 0 for other device ids (the topology does not carry it).
    pub fn pci_revision(&self) -> u32 {
        match self.device_id {
            0x66AF => 0xC1, // Radeon VII
            0x738C => 0x01, // MI100
            0x740F => 0x02, // MI210
            0x744C => 0xC8, // RX 7900 XTX
            _ => 0x00,
        }
    }

    /// The apertures GET_PROCESS_APERTURES reports for this GPU.
    pub fn apertures(&self) -> Apertures {
        self.layout.apertures()
    }

    /// The `GB_ADDR_CONFIG` register value of this GPU's family (what GET_TILE_CONFIG and
    /// DRM's register read report).
    pub fn gb_addr_config(&self) -> u32 {
        match self.target.major {
            0..=8 => 0x2201_1003,
            9 => 0x2a11_4042,
            10 => 0x0000_0444,
            _ => 0x0000_0545,
        }
    }

    fn from_node(node: &Node) -> Result<Self, MachineError> {
        let target = node.gfx_target_version().unwrap_or(GfxTargetVersion {
            major: 9,
            minor: 0,
            stepping: 0,
        });
        let mut vram_size = 0u64;
        for bank in node.mem_banks.iter().filter(|b| b.heap().is_vram()) {
            vram_size =
                vram_size
                    .checked_add(bank.size_in_bytes)
                    .ok_or(MachineError::TooLarge {
                        node: node.id,
                        what: "VRAM bank size",
                        value: bank.size_in_bytes,
                    })?;
        }
        let large_bar = node
            .mem_banks
            .iter()
            .any(|b| b.heap() == HeapType::FrameBufferPublic);
        Ok(Gpu {
            node_id: node.id,
            gpu_id: node.gpu_id().map_or(0, kfd_ioctl::GpuId::get),
            name: node.name.clone().unwrap_or_default(),
            target,
            vram_size,
            large_bar,
            render_minor: u32::try_from(node.properties.drm_render_minor).unwrap_or(0),
            device_id: u32::try_from(node.properties.device_id).unwrap_or(0),
            vendor_id: u32::try_from(node.properties.vendor_id).unwrap_or(0),
            pci_domain: node
                .properties
                .domain
                .and_then(|d| u32::try_from(d).ok())
                .unwrap_or(0),
            location_id: u32::try_from(node.properties.location_id).unwrap_or(0),
            hive_id: node.hive_id(),
            layout: ApertureLayout::of(node.gfx_target_version()),
            xnack_capable: per_process_xnack(target),
            noretry: noretry_default(target),
            apu: node.is_cpu() || APP_APU_DEVICE_IDS.contains(&node.properties.device_id),
            svm_capable: node.capability().svm_api_supported(),
        })
    }

    /// Whether the GPU counts in `kfd_process_xnack_mode`: `KFD_IS_SOC15` (GC 9.0.1 and
    /// later); older GPUs have no SVM API and are skipped.
    fn soc15(&self) -> bool {
        self.target.major >= 9
    }
}

/// PCI device ids of the parts the kernel runs as an APU although their topology node has no
/// CPU cores: the MI300A (`0x74a0`), whose CPU cores are nodes of their own.
const APP_APU_DEVICE_IDS: &[u64] = &[0x74a0];

/// `amdgpu_gmc_noretry_set`'s `noretry_default` (`amdgpu.noretry=-1`, bare metal) by
/// `gfx_target_version`: GC 9.0.1 (gfx900), 9.4.0 (gfx906), 9.4.1 (gfx908), 9.4.2 (gfx90a),
/// 9.4.3/9.4.4 (gfx940–gfx942), 9.5.0 (gfx950), and every GC from 10.3.0 (gfx1030 on). The
/// other GFX9 parts (gfx902 = 9.1.0, gfx904 = 9.2.1, gfx909 = 9.2.2, gfx90c = 9.3.0) and
/// gfx101x (GC 10.1.x) boot with retry faults on.
fn noretry_default(target: GfxTargetVersion) -> bool {
    match (target.major, target.minor) {
        (9, 0) => matches!(target.stepping, 0 | 6 | 8 | 10),
        (9, 4) | (9, 5) => true,
        (10, 0..=2) => false,
        (major, _) => major >= 10,
    }
}
/// GC versions with per-process XNACK (`KFD_SUPPORT_XNACK_PER_PROCESS`), by
/// `gfx_target_version`: gfx90a (GC 9.4.2), gfx940–gfx942 (9.4.3), gfx950 (9.5.0), GC 12.1.0.
fn per_process_xnack(target: GfxTargetVersion) -> bool {
    matches!(
        target.raw(),
        Some(90010 | 90400 | 90401 | 90402 | 90500 | 120100)
    )
}

impl Machine {
    /// `kfd_process_xnack_mode(p, supported)` (`kfd_process.c`) for a process that uses every
    /// GPU of the machine, as a KFD process does: whether XNACK can be on for all of them. GPUs
    /// before GFX9 do not count; with `supported` (may a process turn it on?) a GPU with
    /// per-process XNACK always can; otherwise a GPU of GC 10.1.1 or later (no shader
    /// preemption during page faults) or one booted with `noretry` cannot. Without `supported`
    /// it is the default mode of a new process (`create_process`). SR-IOV VFs without XNACK
    /// support (`amdgpu_sriov_xnack_support`) are not emulated.
    pub fn xnack_mode(&self, supported: bool) -> bool {
        self.gpus
            .iter()
            .filter(|gpu| gpu.soc15())
            .all(|gpu| (supported && gpu.xnack_capable) || (gpu.target.major < 10 && !gpu.noretry))
    }

    /// The preset called `name` (see [`presets`](Self::presets)).
    pub fn preset(name: &str) -> Option<Machine> {
        let topology = presets::topology(name)?;
        Machine::from_topology(name, topology).ok()
    }

    /// The presets: `(name, description)`, the default first.
    pub fn presets() -> &'static [(&'static str, &'static str)] {
        PRESETS
    }

    /// Loads a captured topology tree (a directory holding `nodes/`, or `topology/nodes/`)
    /// and completes it (see [Fixups](self#fixups)).
    pub fn from_topology_dir(path: impl AsRef<Path>) -> Result<Machine, MachineError> {
        let path = path.as_ref();
        let topology = Topology::read_from(path)?;
        Self::from_topology(path.display().to_string(), topology)
    }

    /// Completes `topology` (see [Fixups](self#fixups)) and describes its GPUs.
    pub fn from_topology(
        name: impl Into<String>,
        mut topology: Topology,
    ) -> Result<Machine, MachineError> {
        if topology.nodes.is_empty() {
            return Err(MachineError::Empty);
        }
        fixup::complete(&mut topology)?;
        sysfs::check(&topology)?;
        let gpus = topology
            .gpus()
            .map(Gpu::from_node)
            .collect::<Result<_, _>>()?;
        Ok(Machine {
            name: name.into(),
            topology,
            gpus,
        })
    }

    /// This machine with `bytes` of VRAM on every GPU (`kfd-emu run --vram`, to study
    /// oversubscription cheaply): each GPU node's first VRAM bank gets that size, with its
    /// other properties, and any other VRAM bank goes. Everything derived from the banks
    /// (AVAILABLE_MEMORY, SVM's room, `max_svm_range_pages`, DRM's INFO) follows.
    pub fn with_vram(&self, bytes: u64) -> Result<Machine, MachineError> {
        let mut topology = self.topology.clone();
        for node in topology.nodes.iter_mut().filter(|n| n.is_gpu()) {
            let mut banks = Vec::new();
            let mut first = true;
            for bank in node.mem_banks.drain(..) {
                if !bank.heap().is_vram() {
                    banks.push(bank);
                    continue;
                }
                if !std::mem::take(&mut first) {
                    continue;
                }
                let text = format!(
                    "heap_type {}\nsize_in_bytes {bytes}\nflags {}\nwidth {}\nmem_clk_max {}\n",
                    bank.heap_type, bank.flags, bank.width, bank.mem_clk_max
                );
                let mut sized = MemBank::parse(bank.id, &text, Path::new("<--vram>"))?;
                sized.used_memory = bank.used_memory.map(|_| 0);
                banks.push(sized);
            }
            node.mem_banks = banks;
        }
        Machine::from_topology(self.name.clone(), topology)
    }

    /// The preset name, or the directory a machine was loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The complete topology, as the generated sysfs tree shows it.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The GPUs, in node order.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// The GPU with `gpu_id`.
    pub fn gpu(&self, gpu_id: u32) -> Option<&Gpu> {
        self.gpus.iter().find(|gpu| gpu.gpu_id == gpu_id)
    }

    /// The topology node of a GPU.
    pub fn node_of(&self, gpu: &Gpu) -> Option<&Node> {
        self.topology.node(gpu.node_id)
    }

    /// Writes the sysfs tree (`generation_id`, `system_properties`, `nodes/…`) into `dir`,
    /// which must exist.
    pub fn write_sysfs(&self, dir: &Path) -> std::io::Result<()> {
        sysfs::write(&self.topology, dir)
    }
}

impl Default for Machine {
    /// The default preset, `mi300x`.
    fn default() -> Self {
        Machine::preset(PRESETS[0].0).unwrap_or_else(|| {
            // The presets are compiled in and covered by tests; this is unreachable.
            unreachable!("the default preset builds")
        })
    }
}

impl fmt::Display for Machine {
    /// `name: gfxNNN (gpu_id 0x…, renderD…), …`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.name)?;
        for (i, gpu) in self.gpus.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(
                f,
                "{sep}{} (gpu_id {:#x}, renderD{}, {} GiB)",
                gpu.target,
                gpu.gpu_id,
                gpu.render_minor,
                gpu.vram_size >> 30
            )?;
        }
        Ok(())
    }
}
