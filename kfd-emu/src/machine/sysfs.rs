//! Writing a topology as the kernel's sysfs tree, and checking beforehand that the topology
//! parser will read that tree back.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use kfd_ioctl::topology::{NodeProperties, Topology, TopologyError, limits};

/// One entry of the tree, relative to its root.
enum Entry {
    /// A directory (created even when empty, as the kernel does).
    Dir(PathBuf),
    /// A file and its text.
    File(PathBuf, String),
}

/// The tree of `topology`, in write order: `generation_id`, `system_properties` and
/// `nodes/<N>/…` with `gpu_id`, `name`, `properties` and the `mem_banks`, `caches`,
/// `io_links` and `p2p_links` directories.
fn entries(topology: &Topology) -> Vec<Entry> {
    let mut out = vec![
        Entry::File(
            "generation_id".into(),
            format!("{}\n", topology.generation_id.unwrap_or(1)),
        ),
        Entry::File("system_properties".into(), topology.system.to_sysfs_text()),
        Entry::Dir("nodes".into()),
    ];
    for node in &topology.nodes {
        let n = Path::new("nodes").join(node.id.to_string());
        out.push(Entry::Dir(n.clone()));
        out.push(Entry::File(
            n.join("gpu_id"),
            format!("{}\n", node.gpu_id.unwrap_or(0)),
        ));
        out.push(Entry::File(
            n.join("name"),
            format!("{}\n", node.name.as_deref().unwrap_or("")),
        ));
        out.push(Entry::File(
            n.join("properties"),
            node.properties.to_sysfs_text(),
        ));
        for sub in ["mem_banks", "caches", "io_links", "p2p_links"] {
            out.push(Entry::Dir(n.join(sub)));
        }
        for bank in &node.mem_banks {
            let b = n.join("mem_banks").join(bank.id.to_string());
            out.push(Entry::Dir(b.clone()));
            out.push(Entry::File(b.join("properties"), bank.to_sysfs_text()));
            if let Some(used) = bank.used_memory {
                out.push(Entry::File(b.join("used_memory"), format!("{used}\n")));
            }
        }
        for cache in &node.caches {
            let c = n.join("caches").join(cache.id.to_string());
            out.push(Entry::Dir(c.clone()));
            out.push(Entry::File(c.join("properties"), cache.to_sysfs_text()));
        }
        for (sub, links) in [("io_links", &node.io_links), ("p2p_links", &node.p2p_links)] {
            for link in links {
                let l = n.join(sub).join(link.id.to_string());
                out.push(Entry::Dir(l.clone()));
                out.push(Entry::File(l.join("properties"), link.to_sysfs_text()));
            }
        }
    }
    out
}

/// Writes `topology` below `dir` (see [`entries`]).
pub(super) fn write(topology: &Topology, dir: &Path) -> io::Result<()> {
    for entry in entries(topology) {
        match entry {
            Entry::Dir(path) => fs::create_dir_all(dir.join(path))?,
            Entry::File(path, text) => fs::write(dir.join(path), text)?,
        }
    }
    Ok(())
}

/// Checks that the tree [`write`] would write keeps the parser's
/// [limits](kfd_ioctl::topology::limits): the error is the one reading it back would give,
/// with paths relative to the tree's root.
pub(super) fn check(topology: &Topology) -> Result<(), TopologyError> {
    for node in &topology.nodes {
        let n = Path::new("nodes").join(node.id.to_string());
        below(Path::new("nodes"), node.id, limits::MAX_NODES)?;
        let properties = n.join("properties");
        NodeProperties::parse(&node.properties.to_sysfs_text(), &properties)?;
        for bank in &node.mem_banks {
            below(&n.join("mem_banks"), bank.id, limits::MAX_MEM_BANKS)?;
        }
        for cache in &node.caches {
            below(&n.join("caches"), cache.id, limits::MAX_CACHES)?;
        }
        for (sub, links) in [("io_links", &node.io_links), ("p2p_links", &node.p2p_links)] {
            for link in links {
                below(&n.join(sub), link.id, limits::MAX_NODES)?;
            }
        }
    }
    let mut total = 0u64;
    for entry in entries(topology) {
        let Entry::File(path, text) = entry else {
            continue;
        };
        // The reader checks generation_id on its own, outside the snapshot's bytes.
        let in_snapshot = path != Path::new("generation_id");
        let len = text.len() as u64;
        if len > limits::MAX_FILE_BYTES {
            return Err(TopologyError::FileTooLarge {
                path,
                limit: limits::MAX_FILE_BYTES,
            });
        }
        total = total.saturating_add(if in_snapshot { len } else { 0 });
        if total > limits::MAX_TREE_BYTES {
            return Err(TopologyError::TreeTooLarge {
                path,
                limit: limits::MAX_TREE_BYTES,
            });
        }
    }
    Ok(())
}

/// `Ok` when directory number `id` below `dir` is below `limit`.
fn below(dir: &Path, id: u32, limit: u64) -> Result<(), TopologyError> {
    if u64::from(id) < limit {
        return Ok(());
    }
    Err(TopologyError::AboveLimit {
        path: dir.join(id.to_string()),
        what: "number".to_owned(),
        value: u64::from(id),
        limit: limit - 1,
    })
}
