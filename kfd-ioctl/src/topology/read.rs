//! Reading a tree: directory walking, the generation check, and the files' failure modes.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::node::{Node, NodeProperties};
use super::parts::{Cache, IoLink, MemBank, SystemProperties};
use super::text;
use super::{Topology, TopologyError};

/// How many snapshots are tried while `generation_id` keeps changing.
pub(crate) const MAX_ATTEMPTS: u32 = 8;

/// Where the tree's bytes come from: the file system, or a test's script on top of it.
pub(crate) trait Source {
    /// The whole file.
    fn read(&mut self, path: &Path) -> io::Result<Vec<u8>>;
    /// The names in a directory, in any order.
    fn list(&mut self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// Whether `path` is a directory.
    fn is_dir(&mut self, path: &Path) -> bool;
}

/// The file system.
#[derive(Debug)]
pub(crate) struct Fs;

impl Source for Fs {
    fn read(&mut self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn list(&mut self, dir: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect()
    }

    /// Opens the path as a directory rather than `stat`ing it, so that the answer comes
    /// from the same `openat` the reads use (and that an emulator serves).
    fn is_dir(&mut self, path: &Path) -> bool {
        use rustix::fs::{Mode, OFlags};
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .is_ok()
    }
}

/// Reads a whole tree: the generation id, then the snapshot, then the generation id again;
/// a snapshot taken while the generation changed is thrown away and taken again.
pub(crate) fn topology(root: &Path, src: &mut dyn Source) -> Result<Topology, TopologyError> {
    let root = resolve_root(root, src)?;
    for _ in 0..MAX_ATTEMPTS {
        let before = generation(&root, src)?;
        let snapshot = snapshot(&root, src);
        let after = generation(&root, src)?;
        if before != after {
            // A file that vanished or changed under us is expected while the kernel rebuilds
            // the tree; the next attempt sees the new one.
            continue;
        }
        let (system, nodes) = snapshot?;
        return Ok(Topology {
            generation_id: after,
            system,
            nodes,
        });
    }
    Err(TopologyError::Unstable {
        attempts: MAX_ATTEMPTS,
    })
}

/// The directory that holds `nodes/`: `root` itself or `root/topology`.
fn resolve_root(root: &Path, src: &mut dyn Source) -> Result<PathBuf, TopologyError> {
    for candidate in [root.to_path_buf(), root.join("topology")] {
        if src.is_dir(&candidate.join("nodes")) {
            return Ok(candidate);
        }
    }
    match src.list(root) {
        Ok(_) => Err(TopologyError::NoNodes {
            root: root.to_path_buf(),
        }),
        Err(source) => Err(TopologyError::Io {
            path: root.to_path_buf(),
            source,
        }),
    }
}

fn generation(root: &Path, src: &mut dyn Source) -> Result<Option<u64>, TopologyError> {
    let path = root.join("generation_id");
    read_optional(src, &path)?
        .map(|text| single_number(&text, &path))
        .transpose()
}

fn snapshot(
    root: &Path,
    src: &mut dyn Source,
) -> Result<(SystemProperties, Vec<Node>), TopologyError> {
    let path = root.join("system_properties");
    let system = match read_optional(src, &path)? {
        Some(text) => SystemProperties::parse(&text, &path)?,
        None => SystemProperties::default(),
    };
    let nodes_dir = root.join("nodes");
    let ids = numbered(src, &nodes_dir)?;
    if ids.is_empty() {
        return Err(TopologyError::NoNodes {
            root: root.to_path_buf(),
        });
    }
    let mut nodes = Vec::with_capacity(ids.len());
    for (id, dir) in ids {
        if let Some(node) = node(id, &dir, src)? {
            nodes.push(node);
        }
    }
    Ok((system, nodes))
}

/// Reads `nodes/<id>/`; `None` when the device cgroup hides the node from this process
/// (its files answer EPERM), which libhsakmt also treats as "not there".
fn node(id: u32, dir: &Path, src: &mut dyn Source) -> Result<Option<Node>, TopologyError> {
    let gpu_id_path = dir.join("gpu_id");
    let gpu_id = match src.read(&gpu_id_path) {
        Ok(bytes) => Some(gpu_id_number(&bytes, &gpu_id_path)?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
        Err(source) => {
            return Err(TopologyError::Io {
                path: gpu_id_path,
                source,
            });
        }
    };
    let properties_path = dir.join("properties");
    let properties = match src.read(&properties_path) {
        Ok(bytes) => NodeProperties::parse(&String::from_utf8_lossy(&bytes), &properties_path)?,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
        Err(source) => {
            return Err(TopologyError::Io {
                path: properties_path,
                source,
            });
        }
    };
    let name = read_optional(src, &dir.join("name"))?.map(|text| text.trim().to_owned());

    let mut mem_banks = Vec::new();
    for (bank_id, bank_dir) in numbered(src, &dir.join("mem_banks"))? {
        let path = bank_dir.join("properties");
        let mut bank = MemBank::parse(bank_id, &read_required(src, &path)?, &path)?;
        let used_path = bank_dir.join("used_memory");
        bank.used_memory = read_optional(src, &used_path)?
            .map(|text| single_number(&text, &used_path))
            .transpose()?;
        mem_banks.push(bank);
    }
    let mut caches = Vec::new();
    for (cache_id, cache_dir) in numbered(src, &dir.join("caches"))? {
        let path = cache_dir.join("properties");
        caches.push(Cache::parse(cache_id, &read_required(src, &path)?, &path)?);
    }
    let io_links = links(src, &dir.join("io_links"))?;
    let p2p_links = links(src, &dir.join("p2p_links"))?;

    Ok(Some(Node {
        id,
        gpu_id,
        name,
        properties,
        mem_banks,
        caches,
        io_links,
        p2p_links,
    }))
}

fn links(src: &mut dyn Source, dir: &Path) -> Result<Vec<IoLink>, TopologyError> {
    let mut out = Vec::new();
    for (link_id, link_dir) in numbered(src, dir)? {
        let path = link_dir.join("properties");
        out.push(IoLink::parse(link_id, &read_required(src, &path)?, &path)?);
    }
    Ok(out)
}

/// The entries of `dir` named by a decimal number, in numeric order ("10" after "9"); other
/// names are ignored, and a missing directory has none.
fn numbered(src: &mut dyn Source, dir: &Path) -> Result<Vec<(u32, PathBuf)>, TopologyError> {
    let names = match src.list(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TopologyError::Io {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut out: Vec<(u32, PathBuf)> = names
        .iter()
        .filter_map(|name| {
            let number = text::decimal(name.to_str()?)?;
            Some((u32::try_from(number).ok()?, dir.join(name)))
        })
        .collect();
    out.sort_by_key(|&(number, _)| number);
    Ok(out)
}

/// The file's text; `None` when it does not exist.
fn read_optional(src: &mut dyn Source, path: &Path) -> Result<Option<String>, TopologyError> {
    match src.read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TopologyError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn read_required(src: &mut dyn Source, path: &Path) -> Result<String, TopologyError> {
    src.read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .map_err(|source| TopologyError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// A file holding one decimal number and a newline (`generation_id`, `used_memory`).
fn single_number(text: &str, path: &Path) -> Result<u64, TopologyError> {
    text::decimal(text.trim()).ok_or_else(|| text::parse_error(path, 1, text))
}

fn gpu_id_number(bytes: &[u8], path: &Path) -> Result<u32, TopologyError> {
    let text = String::from_utf8_lossy(bytes);
    let value = single_number(&text, path)?;
    u32::try_from(value).map_err(|_| TopologyError::OutOfRange {
        path: path.to_path_buf(),
        line: 1,
        key: "gpu_id".to_owned(),
        value,
        bits: 32,
    })
}
