//! What hangs below a node (memory banks, caches, IO and P2P links) and the tree's
//! `system_properties`.

use std::fmt::Write as _;
use std::path::Path;

use super::error::TopologyError;
use super::flags::{CacheType, HeapType, IoLinkFlags, IoLinkType, MemFlags};
use super::text::{self, Key};

/// The `system_properties` file at the root of the tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemProperties {
    /// OEM table id of the platform (from the CRAT/ACPI tables).
    pub platform_oem: u64,
    /// OEM id of the platform.
    pub platform_id: u64,
    /// OEM revision of the platform.
    pub platform_rev: u64,
    /// Every line of the file as `(key, value)`, in file order.
    pub entries: Vec<(String, u64)>,
}

impl SystemProperties {
    const SCHEMA: &'static [Key] = &[
        Key::u64("platform_oem"),
        Key::u64("platform_id"),
        Key::u64("platform_rev"),
    ];

    /// Parses the file's text; `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TopologyError> {
        let entries = text::parse(text, path, Self::SCHEMA)?;
        Ok(Self {
            platform_oem: text::lookup(&entries, "platform_oem").unwrap_or(0),
            platform_id: text::lookup(&entries, "platform_id").unwrap_or(0),
            platform_rev: text::lookup(&entries, "platform_rev").unwrap_or(0),
            entries,
        })
    }

    /// The file as the kernel prints it.
    pub fn to_sysfs_text(&self) -> String {
        text::emit(&self.entries)
    }
}

/// A memory bank of a node (`mem_banks/<id>/`): system memory for a CPU, VRAM for a GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemBank {
    /// The directory number.
    pub id: u32,
    /// `HSA_MEM_HEAP_TYPE_*`; see [`heap`](Self::heap).
    pub heap_type: u32,
    /// Size in bytes (for VRAM: all of the partition's VRAM).
    pub size_in_bytes: u64,
    /// `HSA_MEM_FLAGS_*`; see [`mem_flags`](Self::mem_flags).
    pub flags: u32,
    /// Bus width, bits.
    pub width: u32,
    /// Maximum memory clock, MHz.
    pub mem_clk_max: u32,
    /// The `used_memory` file: VRAM bytes in use by all processes; `None` when absent.
    pub used_memory: Option<u64>,
    /// Every line of `properties` as `(key, value)`, in file order.
    pub properties: Vec<(String, u64)>,
}

impl MemBank {
    const SCHEMA: &'static [Key] = &[
        Key::u32("heap_type").required(),
        Key::u64("size_in_bytes").required(),
        Key::u32("flags"),
        Key::u32("width"),
        Key::u32("mem_clk_max"),
    ];

    /// Parses a bank's `properties` text; `path` only names the file in errors.
    pub fn parse(id: u32, text: &str, path: &Path) -> Result<Self, TopologyError> {
        let properties = text::parse(text, path, Self::SCHEMA)?;
        Ok(Self {
            id,
            heap_type: text::lookup_u32(&properties, "heap_type").unwrap_or(0),
            size_in_bytes: text::lookup(&properties, "size_in_bytes").unwrap_or(0),
            flags: text::lookup_u32(&properties, "flags").unwrap_or(0),
            width: text::lookup_u32(&properties, "width").unwrap_or(0),
            mem_clk_max: text::lookup_u32(&properties, "mem_clk_max").unwrap_or(0),
            used_memory: None,
            properties,
        })
    }

    /// The decoded heap type.
    pub fn heap(&self) -> HeapType {
        HeapType::from_raw(self.heap_type)
    }

    /// The decoded flags.
    pub fn mem_flags(&self) -> MemFlags {
        MemFlags::from_bits_retain(self.flags)
    }

    /// The `properties` file as the kernel prints it.
    pub fn to_sysfs_text(&self) -> String {
        text::emit(&self.properties)
    }
}

/// A cache of a node (`caches/<id>/`). GPU caches are listed per group of CUs that share one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cache {
    /// The directory number.
    pub id: u32,
    /// The first processor (CPU core or SIMD id) the cache serves.
    pub processor_id_low: u32,
    /// Cache level, from 1.
    pub level: u32,
    /// Size, KiB.
    pub size: u32,
    /// Line size, bytes.
    pub cache_line_size: u32,
    /// Lines per tag.
    pub cache_lines_per_tag: u32,
    /// Associativity.
    pub association: u32,
    /// Latency, ns.
    pub latency: u32,
    /// `HSA_CACHE_TYPE_*` bits (the file's `type`); see [`kind`](Self::kind).
    pub cache_type: u32,
    /// The `sibling_map` line: entry `i` tells whether the cache is shared with processor
    /// `processor_id_low + i`. Empty when the file has no such line.
    pub sibling_map: Vec<bool>,
    /// Every integer line of `properties` as `(key, value)`, in file order (all but
    /// `sibling_map`).
    pub properties: Vec<(String, u64)>,
}

impl Cache {
    const SCHEMA: &'static [Key] = &[
        Key::u32("processor_id_low"),
        Key::u32("level").required(),
        Key::u32("size").required(),
        Key::u32("cache_line_size"),
        Key::u32("cache_lines_per_tag"),
        Key::u32("association"),
        Key::u32("latency"),
        Key::u32("type").required(),
    ];

    /// Parses a cache's `properties` text; `path` only names the file in errors.
    pub fn parse(id: u32, text: &str, path: &Path) -> Result<Self, TopologyError> {
        let lines = text::lines(text, path)?;
        let mut sibling_map = Vec::new();
        let mut integer_lines = Vec::with_capacity(lines.len());
        for line in lines {
            if line.key != "sibling_map" {
                integer_lines.push(line);
                continue;
            }
            sibling_map = line
                .value
                .split(',')
                .map(|bit| match bit {
                    "0" => Some(false),
                    "1" => Some(true),
                    _ => None,
                })
                .collect::<Option<Vec<bool>>>()
                .ok_or_else(|| text::parse_error(path, line.number, line.text))?;
        }
        let properties = text::entries(&integer_lines, path, Self::SCHEMA)?;
        let get = |key| text::lookup_u32(&properties, key).unwrap_or(0);
        Ok(Self {
            id,
            processor_id_low: get("processor_id_low"),
            level: get("level"),
            size: get("size"),
            cache_line_size: get("cache_line_size"),
            cache_lines_per_tag: get("cache_lines_per_tag"),
            association: get("association"),
            latency: get("latency"),
            cache_type: get("type"),
            sibling_map,
            properties,
        })
    }

    /// The decoded type bits.
    pub fn kind(&self) -> CacheType {
        CacheType::from_bits_retain(self.cache_type)
    }

    /// The indices set in [`sibling_map`](Self::sibling_map).
    pub fn siblings(&self) -> impl Iterator<Item = usize> + '_ {
        self.sibling_map
            .iter()
            .enumerate()
            .filter_map(|(i, &shared)| shared.then_some(i))
    }

    /// The `properties` file as the kernel prints it: the integer lines, then `sibling_map`
    /// (the kernel prints it last).
    pub fn to_sysfs_text(&self) -> String {
        let mut out = text::emit(&self.properties);
        if !self.sibling_map.is_empty() {
            out.push_str("sibling_map ");
            for (i, &shared) in self.sibling_map.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                // Writing to a String cannot fail.
                let _ = write!(out, "{sep}{}", u8::from(shared));
            }
            out.push('\n');
        }
        out
    }
}

/// A link from one node to another (`io_links/<id>/` or `p2p_links/<id>/`).
///
/// IO links are direct (PCIe to the CPU, xGMI between GPUs); P2P links are the indirect paths
/// the kernel computes between GPUs (and CPUs) that are not directly linked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoLink {
    /// The directory number.
    pub id: u32,
    /// `HSA_IOLINK_TYPE_*` (the file's `type`); see [`kind`](Self::kind).
    pub link_type: u32,
    /// Link version, major.
    pub version_major: u32,
    /// Link version, minor.
    pub version_minor: u32,
    /// The node the link starts from (the node it is listed under).
    pub node_from: u32,
    /// The node the link leads to.
    pub node_to: u32,
    /// Relative cost, like a NUMA distance (PCIe 20, xGMI 15 per hop in real trees).
    pub weight: u32,
    /// Minimum latency, ns.
    pub min_latency: u32,
    /// Maximum latency, ns.
    pub max_latency: u32,
    /// Minimum bandwidth, MB/s.
    pub min_bandwidth: u32,
    /// Maximum bandwidth, MB/s.
    pub max_bandwidth: u32,
    /// Recommended transfer size, bytes.
    pub recommended_transfer_size: u32,
    /// SDMA engines recommended for transfers over this link (newer kernels).
    pub recommended_sdma_engine_id_mask: Option<u32>,
    /// `HSA_IOLINK_FLAGS_*`; see [`link_flags`](Self::link_flags).
    pub flags: u32,
    /// Every line of `properties` as `(key, value)`, in file order.
    pub properties: Vec<(String, u64)>,
}

impl IoLink {
    const SCHEMA: &'static [Key] = &[
        Key::u32("type").required(),
        Key::u32("version_major"),
        Key::u32("version_minor"),
        Key::u32("node_from").required(),
        Key::u32("node_to").required(),
        Key::u32("weight"),
        Key::u32("min_latency"),
        Key::u32("max_latency"),
        Key::u32("min_bandwidth"),
        Key::u32("max_bandwidth"),
        Key::u32("recommended_transfer_size"),
        Key::u32("recommended_sdma_engine_id_mask"),
        Key::u32("flags"),
    ];

    /// Parses a link's `properties` text; `path` only names the file in errors.
    pub fn parse(id: u32, text: &str, path: &Path) -> Result<Self, TopologyError> {
        let properties = text::parse(text, path, Self::SCHEMA)?;
        let get = |key| text::lookup_u32(&properties, key).unwrap_or(0);
        Ok(Self {
            id,
            link_type: get("type"),
            version_major: get("version_major"),
            version_minor: get("version_minor"),
            node_from: get("node_from"),
            node_to: get("node_to"),
            weight: get("weight"),
            min_latency: get("min_latency"),
            max_latency: get("max_latency"),
            min_bandwidth: get("min_bandwidth"),
            max_bandwidth: get("max_bandwidth"),
            recommended_transfer_size: get("recommended_transfer_size"),
            recommended_sdma_engine_id_mask: text::lookup_u32(
                &properties,
                "recommended_sdma_engine_id_mask",
            ),
            flags: get("flags"),
            properties,
        })
    }

    /// The decoded link type.
    pub fn kind(&self) -> IoLinkType {
        IoLinkType::from_raw(self.link_type)
    }

    /// Whether this is an xGMI link.
    pub fn is_xgmi(&self) -> bool {
        self.kind() == IoLinkType::Xgmi
    }

    /// The decoded flags.
    pub fn link_flags(&self) -> IoLinkFlags {
        IoLinkFlags::from_bits_retain(self.flags)
    }

    /// The `properties` file as the kernel prints it.
    pub fn to_sysfs_text(&self) -> String {
        text::emit(&self.properties)
    }
}
