//! Writing a topology as the kernel's sysfs tree.

use std::fs;
use std::io;
use std::path::Path;

use kfd_ioctl::topology::Topology;

/// Writes `topology` below `dir`: `generation_id`, `system_properties` and `nodes/<N>/…` with
/// `gpu_id`, `name`, `properties` and the `mem_banks`, `caches`, `io_links` and `p2p_links`
/// directories (created even when empty, as the kernel does).
pub(super) fn write(topology: &Topology, dir: &Path) -> io::Result<()> {
    fs::write(
        dir.join("generation_id"),
        format!("{}\n", topology.generation_id.unwrap_or(1)),
    )?;
    fs::write(
        dir.join("system_properties"),
        topology.system.to_sysfs_text(),
    )?;
    let nodes = dir.join("nodes");
    fs::create_dir_all(&nodes)?;
    for node in &topology.nodes {
        let n = nodes.join(node.id.to_string());
        fs::create_dir_all(&n)?;
        fs::write(n.join("gpu_id"), format!("{}\n", node.gpu_id.unwrap_or(0)))?;
        fs::write(
            n.join("name"),
            format!("{}\n", node.name.as_deref().unwrap_or("")),
        )?;
        fs::write(n.join("properties"), node.properties.to_sysfs_text())?;
        for sub in ["mem_banks", "caches", "io_links", "p2p_links"] {
            fs::create_dir_all(n.join(sub))?;
        }
        for bank in &node.mem_banks {
            let b = n.join("mem_banks").join(bank.id.to_string());
            fs::create_dir_all(&b)?;
            fs::write(b.join("properties"), bank.to_sysfs_text())?;
            if let Some(used) = bank.used_memory {
                fs::write(b.join("used_memory"), format!("{used}\n"))?;
            }
        }
        for cache in &node.caches {
            let c = n.join("caches").join(cache.id.to_string());
            fs::create_dir_all(&c)?;
            fs::write(c.join("properties"), cache.to_sysfs_text())?;
        }
        for (sub, links) in [("io_links", &node.io_links), ("p2p_links", &node.p2p_links)] {
            for link in links {
                let l = n.join(sub).join(link.id.to_string());
                fs::create_dir_all(&l)?;
                fs::write(l.join("properties"), link.to_sysfs_text())?;
            }
        }
    }
    Ok(())
}
