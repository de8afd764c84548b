//! One machine story per preset: everything a program can read about the machine under the
//! supervisor — the KFD topology, `/proc/cpuinfo`, `/sys/devices/system/{cpu,node}`,
//! `/sys/bus/pci/devices` and each GPU's PCI device (`numa_node`, `local_cpulist`,
//! `ip_discovery`, `mem_info_vram_total`) — is read through the emulator and cross-checked
//! against the topology as libhsakmt, glibc, hwloc and tinygrad use them. The expected values
//! come from the topology files read the same way, never from the code that writes the others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_emu::supervisor::run_attached;

const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

fn model(preset: &str) -> Arc<Model> {
    Model::new(ModelConfig {
        machine: Machine::preset(preset).expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model")
}

fn properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(' ')?;
            Some((key.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// A CPU list (`0-23,48`) as a set.
fn cpu_list(text: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => {
                out.insert(part.parse().unwrap());
            }
        }
    }
    out
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn list(path: &str) -> BTreeSet<String> {
    std::fs::read_dir(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// A `key value` file.
type Props = BTreeMap<String, u64>;
/// A topology node's properties and its io_links' properties.
type NodeView = (Props, Vec<Props>);
/// A render node's `ip_discovery/die/0` listing, its `hw_id → major.minor.revision`, and its
/// `mem_info_vram_total`.
type DrmView = (Option<BTreeSet<String>>, BTreeMap<String, String>, String);

/// What one preset shows, read under the supervisor.
#[derive(Debug)]
struct Seen {
    nodes: Vec<NodeView>,
    cpuinfo: String,
    online: String,
    nprocs: i64,
    numa: Vec<(String, String, String)>,
    node_online: String,
    bus: BTreeSet<String>,
    /// Per bus entry: (link target, vendor, device, numa_node, local_cpulist).
    pci: BTreeMap<String, (String, String, String, String, String)>,
    /// Per render minor.
    drm: BTreeMap<u64, DrmView>,
}

fn look(preset: &str) -> Seen {
    run_attached(model(preset), || {
        let mut nodes = Vec::new();
        for node in 0.. {
            let Ok(text) = std::fs::read_to_string(format!("{TOPOLOGY}/{node}/properties")) else {
                break;
            };
            let mut links = Vec::new();
            for link in 0.. {
                let Ok(l) = std::fs::read_to_string(format!(
                    "{TOPOLOGY}/{node}/io_links/{link}/properties"
                )) else {
                    break;
                };
                links.push(properties(&l));
            }
            nodes.push((properties(&text), links));
        }
        // SAFETY: sysconf takes no pointer; glibc answers _SC_NPROCESSORS_ONLN as
        // get_nprocs() does, from /sys/devices/system/cpu/online (through the emulator here).
        let nprocs = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let mut numa = Vec::new();
        for n in 0.. {
            let dir = format!("/sys/devices/system/node/node{n}");
            let Ok(cpulist) = std::fs::read_to_string(format!("{dir}/cpulist")) else {
                break;
            };
            // The node's first CPU: its sysfs directory says its package and siblings, and
            // the node lists it.
            let first = cpu_list(&cpulist).into_iter().next().unwrap_or(0);
            let topo = format!("/sys/devices/system/cpu/cpu{first}/topology");
            assert_eq!(
                read(&format!("{topo}/physical_package_id")).trim(),
                n.to_string()
            );
            assert_eq!(
                cpu_list(&read(&format!("{topo}/core_siblings_list"))),
                cpu_list(&cpulist)
            );
            assert!(
                list(&dir).contains(&format!("cpu{first}")),
                "{dir} lists cpu{first}"
            );
            assert!(
                list("/sys/devices/system/cpu").contains(&format!("cpu{first}")),
                "cpu/ lists cpu{first}"
            );
            numa.push((
                cpulist,
                read(&format!("{dir}/meminfo")),
                read(&format!("{dir}/distance")),
            ));
        }
        let bus = list("/sys/bus/pci/devices");
        let mut pci = BTreeMap::new();
        for slot in &bus {
            let path = format!("/sys/bus/pci/devices/{slot}");
            let target = std::fs::read_link(&path).unwrap().display().to_string();
            pci.insert(
                slot.clone(),
                (
                    target,
                    read(&format!("{path}/vendor")),
                    read(&format!("{path}/device")),
                    read(&format!("{path}/numa_node")),
                    read(&format!("{path}/local_cpulist")),
                ),
            );
        }
        let mut drm = BTreeMap::new();
        for (props, _) in &nodes {
            if props.get("simd_count").copied().unwrap_or(0) == 0 {
                continue;
            }
            let minor = props["drm_render_minor"];
            let dev = format!("/sys/class/drm/renderD{minor}/device");
            let die = format!("{dev}/ip_discovery/die/0");
            let listing = std::fs::read_dir(&die).ok().map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect::<BTreeSet<_>>()
            });
            let mut versions = BTreeMap::new();
            for entry in listing.iter().flatten() {
                if entry.parse::<u32>().is_ok() {
                    let v: Vec<String> = ["major", "minor", "revision"]
                        .iter()
                        .map(|p| read(&format!("{die}/{entry}/0/{p}")).trim().to_owned())
                        .collect();
                    versions.insert(entry.clone(), v.join("."));
                }
            }
            drm.insert(
                minor,
                (
                    listing,
                    versions,
                    read(&format!("{dev}/mem_info_vram_total")),
                ),
            );
        }
        Seen {
            cpuinfo: read("/proc/cpuinfo"),
            online: read("/sys/devices/system/cpu/online"),
            nprocs,
            numa,
            node_online: read("/sys/devices/system/node/online"),
            nodes,
            bus,
            pci,
            drm,
        }
    })
    .expect("supervisor")
}

/// `(processor, apicid)` of every `/proc/cpuinfo` block.
fn processors(cpuinfo: &str) -> Vec<(u32, u64)> {
    cpuinfo
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|block| {
            let field = |key: &str| {
                block
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        (k.trim() == key).then(|| v.trim().to_owned())
                    })
                    .unwrap_or_else(|| panic!("no {key} in {block}"))
            };
            (
                field("processor").parse().unwrap(),
                field("apicid").parse().unwrap(),
            )
        })
        .collect()
}

fn check(preset: &str) {
    let seen = look(preset);
    let cpu_nodes: Vec<&BTreeMap<String, u64>> = seen
        .nodes
        .iter()
        .map(|(p, _)| p)
        .filter(|p| p["cpu_cores_count"] > 0)
        .collect();
    let total: u64 = cpu_nodes.iter().map(|p| p["cpu_cores_count"]).sum();

    // CPUs: glibc's count, sysfs and /proc/cpuinfo count what the topology counts.
    let procs = processors(&seen.cpuinfo);
    assert_eq!(
        procs.len() as u64,
        total,
        "{preset}: /proc/cpuinfo processors"
    );
    assert_eq!(seen.nprocs as u64, total, "{preset}: get_nprocs()");
    assert_eq!(
        cpu_list(&seen.online).len() as u64,
        total,
        "{preset}: cpu/online"
    );
    // libhsakmt names each CPU node by its cpu_core_id_base among the apicids.
    let apicids: BTreeSet<u64> = procs.iter().map(|&(_, a)| a).collect();
    assert_eq!(apicids.len(), procs.len(), "{preset}: apicids are distinct");
    for p in &cpu_nodes {
        assert!(
            apicids.contains(&p["cpu_core_id_base"]),
            "{preset}: no apicid {} in /proc/cpuinfo",
            p["cpu_core_id_base"]
        );
    }

    // NUMA: one node per CPU node, with its core count and memory.
    assert_eq!(seen.numa.len(), cpu_nodes.len(), "{preset}: NUMA nodes");
    assert_eq!(cpu_list(&seen.node_online).len(), cpu_nodes.len());
    let mut covered = BTreeSet::new();
    for (i, ((cpulist, meminfo, distance), p)) in seen.numa.iter().zip(&cpu_nodes).enumerate() {
        let cpus = cpu_list(cpulist);
        assert_eq!(
            cpus.len() as u64,
            p["cpu_cores_count"],
            "{preset}: node{i} cpulist"
        );
        // The node's first CPU has the CPU node's core-id base as its apicid.
        let first = *cpus.iter().next().unwrap();
        let apicid = procs.iter().find(|&&(n, _)| n == first).unwrap().1;
        assert_eq!(
            apicid, p["cpu_core_id_base"],
            "{preset}: node{i} first apicid"
        );
        covered.extend(cpus);
        assert!(
            meminfo.starts_with(&format!("Node {i} MemTotal:")),
            "{meminfo}"
        );
        let distances: Vec<u32> = distance
            .split_whitespace()
            .map(|d| d.parse().unwrap())
            .collect();
        assert_eq!(distances.len(), cpu_nodes.len());
        assert_eq!(distances[i], 10);
    }
    assert_eq!(
        covered.len() as u64,
        total,
        "{preset}: nodes cover every CPU once"
    );

    // PCI: the bus lists exactly the GPUs, each link leads to its device under
    // /sys/devices, with the topology's ids, and its NUMA node is the CPU node the GPU's
    // link goes to.
    let gpus: Vec<&NodeView> = seen
        .nodes
        .iter()
        .filter(|(p, _)| p["simd_count"] > 0)
        .collect();
    let slots: BTreeSet<String> = gpus
        .iter()
        .map(|(p, _)| {
            let l = p["location_id"];
            format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                p.get("domain").copied().unwrap_or(0),
                l >> 8,
                (l >> 3) & 0x1f,
                l & 7
            )
        })
        .collect();
    assert_eq!(seen.bus, slots, "{preset}: /sys/bus/pci/devices");
    let node_ids: Vec<u64> = seen
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p["cpu_cores_count"] > 0)
        .map(|(i, _)| i as u64)
        .collect();
    for (p, links) in gpus.iter().map(|g| (&g.0, &g.1)) {
        let l = p["location_id"];
        let slot = format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            p.get("domain").copied().unwrap_or(0),
            l >> 8,
            (l >> 3) & 0x1f,
            l & 7
        );
        let (target, vendor, device, numa_node, local) = &seen.pci[&slot];
        assert!(
            target.starts_with("../../../devices/pci") && target.ends_with(&slot),
            "{preset}: {target}"
        );
        assert_eq!(*vendor, format!("{:#06x}\n", p["vendor_id"]));
        assert_eq!(*device, format!("{:#06x}\n", p["device_id"]));
        let cpu_node = links
            .iter()
            .find(|link| node_ids.contains(&link["node_to"]))
            .map(|link| link["node_to"])
            .expect("a link to a CPU");
        let numa: usize = numa_node.trim().parse().unwrap();
        assert_eq!(node_ids[numa], cpu_node, "{preset}: {slot} numa_node");
        assert_eq!(
            cpu_list(local),
            cpu_list(&seen.numa[numa].0),
            "{preset}: local_cpulist"
        );

        // DRM: ip_discovery for the GPUs the kernel discovers, with GC matching the target.
        let (listing, versions, vram) = &seen.drm[&p["drm_render_minor"]];
        let vram: u64 = vram.trim().parse().unwrap();
        assert!(vram > 0, "{preset}: mem_info_vram_total");
        let target = p["gfx_target_version"];
        let discovered = matches!(
            preset,
            "mi300x" | "mi300a" | "rx7900xtx" | "rx9070xt-small-bar"
        );
        assert_eq!(
            listing.is_some(),
            discovered,
            "{preset}: ip_discovery presence"
        );
        if let Some(listing) = listing {
            for entry in ["11", "42", "108", "GC", "SDMA0", "NBIF", "num_ips"] {
                assert!(
                    listing.contains(entry),
                    "{preset}: die/0 lacks {entry}: {listing:?}"
                );
            }
            let gc: Vec<u64> = versions["11"]
                .split('.')
                .map(|v| v.parse().unwrap())
                .collect();
            let (major, minor, step) = (target / 10000, target / 100 % 100, target % 100);
            if major == 9 {
                // GC 9.4.3 reports gfx940-gfx942.
                assert_eq!((gc[0], gc[1], gc[2]), (9, 4, 3), "{preset}");
                assert_eq!((major, minor), (9, 4));
            } else {
                assert_eq!((gc[0], gc[1], gc[2]), (major, minor, step), "{preset}");
            }
        }
    }
}

#[test]
fn mi300x_tells_one_story() {
    check("mi300x");
}

#[test]
fn mi210x8_tells_one_story() {
    check("mi210x8");
}

#[test]
fn mi100_tells_one_story() {
    check("mi100");
}

#[test]
fn radeon_vii_tells_one_story() {
    check("radeon-vii");
}

#[test]
fn rx7900xtx_tells_one_story() {
    check("rx7900xtx");
}

#[test]
fn mi300a_tells_one_story() {
    check("mi300a");
}

#[test]
fn rx9070xt_small_bar_tells_one_story() {
    check("rx9070xt-small-bar");
}

/// `mbind(page, 4096, mode, &mask, 64, 0)` → 0 or the errno.
fn mbind(page: *mut libc::c_void, mode: u64, mask: u64) -> i32 {
    // SAFETY: the mask is a live u64 the kernel (or the supervisor) reads 63 bits of; `page`
    // is a mapping of this test's; mbind changes no memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            page,
            4096usize,
            mode,
            &mask as *const u64,
            64u64,
            0u64,
        )
    };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }
}

/// libhsakmt binds a CPU node's system memory to its NUMA node (`bind_mem_to_numa`:
/// `MPOL_BIND | MPOL_F_STATIC_NODES`, failing the allocation when `mbind` fails): on mi210x8
/// node 1 exists, so binding to it succeeds as on that machine, whatever the host has; a node
/// the machine lacks and an invalid mode still fail as the kernel fails them.
#[test]
fn mbind_to_every_emulated_numa_node_succeeds_and_to_others_fails() {
    const MPOL_BIND: u64 = 2;
    const MPOL_F_STATIC_NODES: u64 = 1 << 15;
    let results = |preset: &str| {
        run_attached(model(preset), || {
            // SAFETY: a fresh private anonymous page, unmapped below.
            let page = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(page, libc::MAP_FAILED);
            let bind = MPOL_BIND | MPOL_F_STATIC_NODES;
            let set_mempolicy = |mode: u64, mask: u64| {
                // SAFETY: the mask is a live u64 of which 63 bits are read.
                let r = unsafe {
                    libc::syscall(libc::SYS_set_mempolicy, mode, &mask as *const u64, 64u64)
                };
                if r == 0 {
                    0
                } else {
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
                }
            };
            let out = [
                mbind(page, bind, 1 << 0),
                mbind(page, bind, 1 << 1),
                mbind(page, bind, 0b11),
                mbind(page, bind, 1 << 40),
                mbind(page, 9, 1 << 1),
                set_mempolicy(bind, 1 << 1),
                // Back to the default policy (no nodes: the host's kernel answers).
                set_mempolicy(0, 0),
            ];
            // SAFETY: the page mapped above, no longer used.
            unsafe { libc::munmap(page, 4096) };
            out
        })
        .expect("supervisor")
    };
    assert_eq!(
        results("mi210x8"),
        [0, 0, 0, libc::EINVAL, libc::EINVAL, 0, 0],
        "mi210x8: mbind nodes 0, 1, both, 40, bad mode; set_mempolicy node 1, default"
    );
    // One NUMA node: node 1 is no more there than on the single-socket machine.
    let one = results("mi300x");
    assert_eq!(one[0], 0);
    assert_eq!(one[1], libc::EINVAL, "mi300x: node 1");
    assert_eq!(one[5], libc::EINVAL, "mi300x: set_mempolicy node 1");
}
