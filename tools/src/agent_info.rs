//! rocprofv3's agent object, built from a KFD topology node: what rocprofv3 stores in
//! `rocpd_info_agent.extdata` and in the `agents` array of `results.json`.
//!
//! Facts from rocprofiler-sdk (rocm-systems 1b1610fc, `projects/rocprofiler-sdk`):
//! * `source/lib/rocprofiler-sdk/agent.cpp`, `read_topology`: every readable node of
//!   `/sys/class/kfd/kfd/topology/nodes` in order; `logical_node_id` counts them from 0,
//!   `logical_node_type_id` counts per type; a node with CPU cores is a CPU (type 1), else one
//!   with SIMDs a GPU (type 2). `model_name` is the node's `name` file. A GPU's `name` is
//!   `gfx{major}{minor}{stepping:x}` of `gfx_target_version`, its vendor `AMD`, its product the
//!   marketing name libdrm knows (not known here: empty), `workgroup_max_size` 1024,
//!   `grid_max_size` `u32::MAX`, `grid_max_dim` (`i32::MAX`, 65535, 65535), `cu_count`
//!   `simd_count / simd_per_cu`, `fw_version` and `sdma_fw_version` masked to their low 10 bits,
//!   the UUID's first 8 bytes `unique_id`. A CPU's vendor is `CPU`, its `cu_count` its cores,
//!   its name and family `/proc/cpuinfo`'s `model name` and `cpu family` of the processor whose
//!   `apicid` is the node's `cpu_core_id_base`. `num_xcc` defaults to 1, `max_waves_per_cu` is
//!   `simd_per_cu * max_waves_per_simd`, `num_shader_banks` `array_count /
//!   simd_arrays_per_engine`, `cu_per_engine` the CUs over the shader banks.
//! * `source/include/rocprofiler-sdk/cxx/serialization/save.hpp`: the field order and the
//!   bit-field objects (`HSA_CAPABILITY`, `HSA_ENGINE_ID`, `HSA_ENGINE_VERSION`, memory,
//!   cache and link properties; `rocprofiler_agent_runtime_visiblity_t`).
//! * `source/docs/rocprofv3-schema.json`: `capability` also lists `Reserved`, which save.hpp
//!   does not write; it is written here (0) so that the object validates.
//!
//! Where this differs: `id.handle` is the node id + 1 (rocprofv3's handles are
//! `logical_node_id` plus an internal offset; kfdtool's records refer to agents by node id + 1
//! throughout), `family_id` of a GPU is 0 (rocprofv3 asks libdrm's `amdgpu_query_gpu_info`),
//! and `runtime_visibility` is all visible (rocprofv3 reads `ROCR_VISIBLE_DEVICES` and the like).

use kfd_ioctl::topology::{Node, Topology};
use serde_json::{Map, Value, json};

/// `sizeof(rocprofiler_agent_v0_t)` on x86-64 (agent.h: 8 + 8 + 4 + 21·4 + 2·2 + 9·4 + 3·4 +
/// 5·4 + 3·8 + 2·12 + 7·8 + 4 + 2·4 + 4 + 16 bytes).
pub const AGENT_SIZE: u64 = 312;

/// `ROCPROFILER_AGENT_TYPE_CPU`.
pub const TYPE_CPU: u64 = 1;
/// `ROCPROFILER_AGENT_TYPE_GPU`.
pub const TYPE_GPU: u64 = 2;

/// The bits of `HSA_CAPABILITY` (hsakmttypes.h; the kernel's `HSA_CAP_*` in
/// kfd_topology.h): (name, shift, width), in save.hpp's order, then `Reserved`.
const CAPABILITY: [(&str, u32, u32); 24] = [
    ("HotPluggable", 0, 1),
    ("HSAMMUPresent", 1, 1),
    ("SharedWithGraphics", 2, 1),
    ("QueueSizePowerOfTwo", 3, 1),
    ("QueueSize32bit", 4, 1),
    ("QueueIdleEvent", 5, 1),
    ("VALimit", 6, 1),
    ("WatchPointsSupported", 7, 1),
    ("WatchPointsTotalBits", 8, 4),
    ("DoorbellType", 12, 2),
    ("AQLQueueDoubleMap", 14, 1),
    ("DebugTrapSupported", 15, 1),
    ("WaveLaunchTrapOverrideSupported", 16, 1),
    ("WaveLaunchModeSupported", 17, 1),
    ("PreciseMemoryOperationsSupported", 18, 1),
    ("DEPRECATED_SRAM_EDCSupport", 19, 1),
    ("Mem_EDCSupport", 20, 1),
    ("RASEventNotify", 21, 1),
    ("ASICRevision", 22, 4),
    ("SRAM_EDCSupport", 26, 1),
    ("SVMAPISupported", 27, 1),
    ("CoherentHostAccess", 28, 1),
    ("DebugSupportedFirmware", 29, 1),
    ("Reserved", 30, 2),
];

/// The member names of `capability`, in order.
pub const CAPABILITY_FIELDS: [&str; 24] = {
    let mut names = [""; 24];
    let mut i = 0;
    while i < 24 {
        names[i] = CAPABILITY[i].0;
        i += 1;
    }
    names
};

fn bits(value: u64, fields: &[(&str, u32, u32)]) -> Value {
    let mut m = Map::new();
    for (name, shift, width) in fields {
        m.insert(
            (*name).into(),
            ((value >> shift) & ((1 << width) - 1)).into(),
        );
    }
    Value::Object(m)
}

/// One processor of `/proc/cpuinfo`: (apicid, model name, cpu family).
fn cpuinfo_processors(cpuinfo: &str) -> Vec<(u64, String, u64)> {
    let mut out = Vec::new();
    for block in cpuinfo.split("\n\n") {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_owned())
            })
        };
        if let Some(apicid) = field("apicid").and_then(|a| a.parse().ok()) {
            out.push((
                apicid,
                field("model name").unwrap_or_default(),
                field("cpu family")
                    .and_then(|f| f.parse().ok())
                    .unwrap_or(0),
            ));
        }
    }
    out
}

/// The GPU name rocprofv3 derives from `gfx_target_version` (minor in decimal, stepping in
/// hex, as agent.cpp formats it).
fn gfx_name(version: u64) -> String {
    format!(
        "gfx{}{}{:x}",
        (version / 10000) % 100,
        (version / 100) % 100,
        version % 100
    )
}

/// The agent objects of every node of `topology`, in node order; `cpuinfo` is the text of
/// `/proc/cpuinfo` (names the CPUs; empty leaves their names to the node's `name` file).
pub fn agent_objects(topology: &Topology, cpuinfo: &str) -> Vec<Value> {
    let cpus = cpuinfo_processors(cpuinfo);
    let (mut n_cpu, mut n_gpu, mut n_other) = (0u64, 0u64, 0u64);
    topology
        .nodes
        .iter()
        .enumerate()
        .map(|(logical, node)| {
            let p = &node.properties;
            let kind = if p.cpu_cores_count > 0 {
                TYPE_CPU
            } else if p.simd_count > 0 {
                TYPE_GPU
            } else {
                0
            };
            let counter = match kind {
                TYPE_CPU => &mut n_cpu,
                TYPE_GPU => &mut n_gpu,
                _ => &mut n_other,
            };
            let type_index = *counter;
            *counter += 1;
            agent_object(node, kind, logical as u64, type_index, &cpus)
        })
        .collect()
}

fn agent_object(
    node: &Node,
    kind: u64,
    logical: u64,
    type_index: u64,
    cpus: &[(u64, String, u64)],
) -> Value {
    let p = &node.properties;
    let gpu = kind == TYPE_GPU;
    let model_name = node.name.clone().unwrap_or_default();
    let (name, vendor, product, family) = match kind {
        TYPE_GPU => (
            gfx_name(p.gfx_target_version.unwrap_or(0)),
            "AMD".to_owned(),
            String::new(),
            0,
        ),
        TYPE_CPU => match cpus
            .iter()
            .find(|(apicid, _, _)| *apicid == p.cpu_core_id_base)
        {
            Some((_, model, family)) => (model.clone(), "CPU".to_owned(), model.clone(), *family),
            None => (model_name.clone(), "CPU".to_owned(), model_name.clone(), 0),
        },
        _ => (String::new(), String::new(), String::new(), 0),
    };
    let gpu_only = |v: u64| if gpu { v } else { 0 };
    let cu_count = if gpu {
        p.simd_count.checked_div(p.simd_per_cu).unwrap_or(0)
    } else if kind == TYPE_CPU {
        p.cpu_cores_count
    } else {
        0
    };
    let shader_banks = p
        .array_count
        .checked_div(p.simd_arrays_per_engine)
        .unwrap_or(0);
    let cu_per_engine = if shader_banks > 0 {
        p.simd_count
            .checked_div(p.simd_per_cu)
            .unwrap_or(0)
            .checked_div(shader_banks)
            .unwrap_or(0)
    } else {
        0
    };
    let mut uuid = [0u8; 16];
    if gpu {
        uuid[..8].copy_from_slice(&p.unique_id.unwrap_or(0).to_le_bytes());
    }
    let mem_banks: Vec<Value> = node
        .mem_banks
        .iter()
        .map(|b| {
            json!({
                "heap_type": b.heap_type,
                "flags": bits(u64::from(b.flags), &[("HotPluggable", 0, 1), ("NonVolatile", 1, 1)]),
                "width": b.width, "mem_clk_max": b.mem_clk_max, "size_in_bytes": b.size_in_bytes,
            })
        })
        .collect();
    let caches: Vec<Value> = node
        .caches
        .iter()
        .map(|c| {
            json!({
                "processor_id_low": c.processor_id_low, "size": c.size, "level": c.level,
                "cache_line_size": c.cache_line_size,
                "cache_lines_per_tag": c.cache_lines_per_tag, "association": c.association,
                "latency": c.latency,
                "type": bits(u64::from(c.cache_type),
                    &[("Data", 0, 1), ("Instruction", 1, 1), ("CPU", 2, 1), ("HSACU", 3, 1)]),
            })
        })
        .collect();
    let io_links: Vec<Value> = node
        .io_links
        .iter()
        .map(|l| {
            json!({
                "type": l.link_type, "version_major": l.version_major,
                "version_minor": l.version_minor, "node_from": l.node_from,
                "node_to": l.node_to, "weight": l.weight, "min_latency": l.min_latency,
                "max_latency": l.max_latency, "min_bandwidth": l.min_bandwidth,
                "max_bandwidth": l.max_bandwidth,
                "recommended_transfer_size": l.recommended_transfer_size,
                "flags": bits(u64::from(l.flags), &[("Override", 0, 1), ("NonCoherent", 1, 1),
                    ("NoAtomics32bit", 2, 1), ("NoAtomics64bit", 3, 1), ("NoPeerToPeerDMA", 4, 1)]),
            })
        })
        .collect();
    json!({
        "size": AGENT_SIZE,
        "id": { "handle": u64::from(node.id) + 1 },
        "type": kind,
        "cpu_cores_count": p.cpu_cores_count,
        "simd_count": p.simd_count,
        "mem_banks_count": p.mem_banks_count,
        "caches_count": p.caches_count,
        "io_links_count": p.io_links_count,
        "cpu_core_id_base": p.cpu_core_id_base,
        "simd_id_base": p.simd_id_base,
        "max_waves_per_simd": p.max_waves_per_simd,
        "lds_size_in_kb": p.lds_size_in_kb,
        "gds_size_in_kb": p.gds_size_in_kb,
        "num_gws": p.num_gws.unwrap_or(0),
        "wave_front_size": p.wave_front_size,
        "num_xcc": p.num_xcc.unwrap_or(1),
        "cu_count": cu_count,
        "array_count": p.array_count,
        "num_shader_banks": shader_banks,
        "simd_arrays_per_engine": p.simd_arrays_per_engine,
        "cu_per_simd_array": p.cu_per_simd_array,
        "simd_per_cu": p.simd_per_cu,
        "max_slots_scratch_cu": p.max_slots_scratch_cu,
        "gfx_target_version": p.gfx_target_version.unwrap_or(0),
        "vendor_id": p.vendor_id,
        "device_id": p.device_id,
        "location_id": p.location_id,
        "domain": p.domain.unwrap_or(0),
        "drm_render_minor": p.drm_render_minor,
        "num_sdma_engines": p.num_sdma_engines.unwrap_or(0),
        "num_sdma_xgmi_engines": p.num_sdma_xgmi_engines.unwrap_or(0),
        "num_sdma_queues_per_engine": p.num_sdma_queues_per_engine.unwrap_or(0),
        "num_cp_queues": p.num_cp_queues.unwrap_or(0),
        "max_engine_clk_ccompute": p.max_engine_clk_ccompute,
        "max_engine_clk_fcompute": gpu_only(p.max_engine_clk_fcompute.unwrap_or(0)),
        "sdma_fw_version": bits(gpu_only(p.sdma_fw_version.unwrap_or(0)) & 0x3ff,
            &[("uCodeSDMA", 0, 10), ("uCodeRes", 10, 10)]),
        "fw_version": bits(gpu_only(p.fw_version.unwrap_or(0)) & 0x3ff,
            &[("uCode", 0, 10), ("Major", 10, 6), ("Minor", 16, 8), ("Stepping", 24, 6)]),
        "capability": bits(gpu_only(p.capability.unwrap_or(0)), &CAPABILITY),
        "cu_per_engine": cu_per_engine,
        "max_waves_per_cu": p.simd_per_cu * p.max_waves_per_simd,
        "family_id": family,
        "workgroup_max_size": gpu_only(1024),
        "grid_max_size": gpu_only(u64::from(u32::MAX)),
        "local_mem_size": gpu_only(p.local_mem_size.unwrap_or(0)),
        "hive_id": p.hive_id.unwrap_or(0),
        "gpu_id": node.gpu_id().map_or(0, kfd_ioctl::GpuId::get),
        "workgroup_max_dim": { "x": gpu_only(1024), "y": gpu_only(1024), "z": gpu_only(1024) },
        "grid_max_dim": {
            "x": gpu_only(i32::MAX as u64), "y": gpu_only(65535), "z": gpu_only(65535)
        },
        "name": name,
        "vendor_name": vendor,
        "product_name": product,
        "model_name": model_name,
        "node_id": node.id,
        "logical_node_id": logical,
        "logical_node_type_id": type_index,
        "runtime_visibility": { "hsa": 1, "hip": 1, "rccl": 1, "rocdecode": 1 },
        "uuid": { "bytes": uuid.to_vec() },
        "mem_banks": mem_banks,
        "caches": caches,
        "io_links": io_links,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_bits_and_names_follow_rocprofv3() {
        // SVMAPISupported (bit 27), ASICRevision 3, DoorbellType 2, WatchPointsTotalBits 4.
        let c = bits(
            (1 << 27) | (3 << 22) | (2 << 12) | (4 << 8) | 1,
            &CAPABILITY,
        );
        assert_eq!(c["SVMAPISupported"], 1);
        assert_eq!(c["ASICRevision"], 3);
        assert_eq!(c["DoorbellType"], 2);
        assert_eq!(c["WatchPointsTotalBits"], 4);
        assert_eq!(c["HotPluggable"], 1);
        assert_eq!(c["CoherentHostAccess"], 0);
        assert_eq!(gfx_name(90402), "gfx942");
        assert_eq!(gfx_name(90010), "gfx90a");
        assert_eq!(
            cpuinfo_processors(
                "processor\t: 0\nmodel name\t: AMD EPYC\ncpu family\t: 25\napicid\t: 0\n\n\
                 processor\t: 1\nmodel name\t: AMD EPYC\ncpu family\t: 25\napicid\t: 2\n"
            ),
            [(0, "AMD EPYC".into(), 25), (2, "AMD EPYC".into(), 25)]
        );
    }
}
