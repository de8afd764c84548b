//! Reading a tree: directory walking, the generation check, and the files' failure modes.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::error::TopologyError;
use super::limits;
use super::node::{Node, NodeProperties};
use super::parts::{Cache, IoLink, MemBank, SystemProperties};
use super::snapshot::Topology;
use super::text;

/// How many snapshots are tried while `generation_id` keeps changing.
pub(crate) const MAX_ATTEMPTS: u32 = 8;

/// Where the tree's bytes come from: the file system, or a test's script on top of it.
pub(crate) trait Source {
    /// The whole file, when it is a regular file of at most `limit` bytes.
    fn read(&mut self, path: &Path, limit: u64) -> Result<Vec<u8>, TopologyError>;
    /// The names in a directory, in any order; more than `limit` of them is an error.
    fn list(&mut self, dir: &Path, limit: u64) -> Result<Vec<OsString>, TopologyError>;
    /// Whether `path` is a directory.
    fn is_dir(&mut self, path: &Path) -> bool;
}

/// The file system.
#[derive(Debug)]
pub(crate) struct Fs;

impl Source for Fs {
    /// Checks the file type before opening (opening a device can act: a watchdog starts
    /// counting) and again on the open file (the path may have changed in between); opens
    /// without blocking (a FIFO's open waits for a writer); reads at most one byte more than
    /// `limit`.
    fn read(&mut self, path: &Path, limit: u64) -> Result<Vec<u8>, TopologyError> {
        read_regular_file(path, limit)
    }

    fn list(&mut self, dir: &Path, limit: u64) -> Result<Vec<OsString>, TopologyError> {
        let io = |source: io::Error| TopologyError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            if names.len() as u64 == limit {
                return Err(TopologyError::TooManyEntries {
                    path: dir.to_path_buf(),
                    limit,
                });
            }
            names.push(entry.map_err(io)?.file_name());
        }
        Ok(names)
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

/// `Ok` for a regular file's `st_mode`, else the error naming what `path` is.
fn regular_file(mode: u32, path: &Path) -> Result<(), TopologyError> {
    use rustix::fs::FileType;
    let kind = match FileType::from_raw_mode(mode) {
        FileType::RegularFile => return Ok(()),
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Unknown => "file of unknown type",
    };
    Err(TopologyError::NotAFile {
        path: path.to_path_buf(),
        kind,
    })
}

/// The operating system's answer behind an error, if it is one.
fn io_kind(error: &TopologyError) -> Option<io::ErrorKind> {
    match error {
        TopologyError::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

/// Reads a whole tree: the generation id, then the snapshot, then the generation id again;
/// a snapshot taken while the generation changed is thrown away and taken again.
pub(crate) fn topology(root: &Path, src: &mut dyn Source) -> Result<Topology, TopologyError> {
    topology_within(root, src, limits::MAX_TREE_BYTES)
}

/// [`topology`] with `budget` bytes for each snapshot instead of [`limits::MAX_TREE_BYTES`].
pub(crate) fn topology_within(
    root: &Path,
    src: &mut dyn Source,
    budget: u64,
) -> Result<Topology, TopologyError> {
    let root = resolve_root(root, src)?;
    for _ in 0..MAX_ATTEMPTS {
        let mut walk = Walk {
            src: &mut *src,
            budget,
            left: budget,
        };
        let before = walk.generation(&root)?;
        let snapshot = walk.snapshot(&root);
        let after = walk.generation(&root)?;
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
    src.list(root, limits::MAX_DIR_ENTRIES)?;
    Err(TopologyError::NoNodes {
        root: root.to_path_buf(),
    })
}

/// One snapshot's reads, and the bytes they may still take.
struct Walk<'a> {
    src: &'a mut dyn Source,
    budget: u64,
    left: u64,
}

impl Walk<'_> {
    /// The `generation_id` file, read outside the snapshot's budget (it is read twice).
    fn generation(&mut self, root: &Path) -> Result<Option<u64>, TopologyError> {
        let path = root.join("generation_id");
        match self.src.read(&path, limits::MAX_FILE_BYTES) {
            Ok(bytes) => single_number(&String::from_utf8_lossy(&bytes), &path).map(Some),
            Err(e) if io_kind(&e) == Some(io::ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn snapshot(&mut self, root: &Path) -> Result<(SystemProperties, Vec<Node>), TopologyError> {
        let path = root.join("system_properties");
        let system = match self.read_optional(&path)? {
            Some(text) => SystemProperties::parse(&text, &path)?,
            None => SystemProperties::default(),
        };
        let nodes_dir = root.join("nodes");
        let ids = self.numbered(&nodes_dir, limits::MAX_NODES)?;
        if ids.is_empty() {
            return Err(TopologyError::NoNodes {
                root: root.to_path_buf(),
            });
        }
        let mut nodes = Vec::with_capacity(ids.len());
        for (id, dir) in ids {
            if let Some(node) = self.node(id, &dir)? {
                nodes.push(node);
            }
        }
        Ok((system, nodes))
    }

    /// Reads `nodes/<id>/`; `None` when the device cgroup hides the node from this process
    /// (its files answer EPERM), which libhsakmt also treats as "not there".
    fn node(&mut self, id: u32, dir: &Path) -> Result<Option<Node>, TopologyError> {
        let gpu_id_path = dir.join("gpu_id");
        let gpu_id = match self.read(&gpu_id_path) {
            Ok(text) => Some(gpu_id_number(&text, &gpu_id_path)?),
            Err(e) if io_kind(&e) == Some(io::ErrorKind::NotFound) => None,
            Err(e) if io_kind(&e) == Some(io::ErrorKind::PermissionDenied) => return Ok(None),
            Err(e) => return Err(e),
        };
        let properties_path = dir.join("properties");
        let properties = match self.read(&properties_path) {
            Ok(text) => NodeProperties::parse(&text, &properties_path)?,
            Err(e) if io_kind(&e) == Some(io::ErrorKind::PermissionDenied) => return Ok(None),
            Err(e) => return Err(e),
        };
        let name = self
            .read_optional(&dir.join("name"))?
            .map(|text| text.trim().to_owned());

        let mut mem_banks = Vec::new();
        let mut vram = 0u64;
        for (bank_id, bank_dir) in self.numbered(&dir.join("mem_banks"), limits::MAX_MEM_BANKS)? {
            let path = bank_dir.join("properties");
            let mut bank = MemBank::parse(bank_id, &self.read(&path)?, &path)?;
            if bank.heap().is_vram() {
                vram = vram
                    .checked_add(bank.size_in_bytes)
                    .ok_or(TopologyError::Overflow {
                        path,
                        what: "size_in_bytes",
                        value: bank.size_in_bytes,
                        total: "the node's VRAM",
                    })?;
            }
            let used_path = bank_dir.join("used_memory");
            bank.used_memory = self
                .read_optional(&used_path)?
                .map(|text| single_number(&text, &used_path))
                .transpose()?;
            mem_banks.push(bank);
        }
        let mut caches = Vec::new();
        for (cache_id, cache_dir) in self.numbered(&dir.join("caches"), limits::MAX_CACHES)? {
            let path = cache_dir.join("properties");
            caches.push(Cache::parse(cache_id, &self.read(&path)?, &path)?);
        }
        let io_links = self.links(&dir.join("io_links"))?;
        let p2p_links = self.links(&dir.join("p2p_links"))?;

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

    fn links(&mut self, dir: &Path) -> Result<Vec<IoLink>, TopologyError> {
        let mut out = Vec::new();
        for (link_id, link_dir) in self.numbered(dir, limits::MAX_NODES)? {
            let path = link_dir.join("properties");
            out.push(IoLink::parse(link_id, &self.read(&path)?, &path)?);
        }
        Ok(out)
    }

    /// The entries of `dir` named by a decimal number as the kernel prints one (no leading
    /// zero, so no two name the same number), in numeric order ("10" after "9"); other names
    /// are ignored, and a missing directory has none. Numbers must be below `limit`, which
    /// also bounds how many there are.
    fn numbered(&mut self, dir: &Path, limit: u64) -> Result<Vec<(u32, PathBuf)>, TopologyError> {
        let names = match self.src.list(dir, limits::MAX_DIR_ENTRIES) {
            Ok(names) => names,
            Err(e) if io_kind(&e) == Some(io::ErrorKind::NotFound) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for name in &names {
            let kernel_number =
                |s: &&str| text::is_decimal(s) && (*s == "0" || !s.starts_with('0'));
            let Some(digits) = name.to_str().filter(kernel_number) else {
                continue;
            };
            let path = dir.join(name);
            // Digits too many for u64 are a number too large all the same.
            let number = text::decimal(digits).unwrap_or(u64::MAX);
            let id = u32::try_from(number)
                .ok()
                .filter(|&id| u64::from(id) < limit)
                .ok_or_else(|| TopologyError::AboveLimit {
                    path: path.clone(),
                    what: "number".to_owned(),
                    value: number,
                    limit: limit - 1,
                })?;
            out.push((id, path));
        }
        out.sort_by_key(|&(number, _)| number);
        Ok(out)
    }

    /// The file's text, charged to the snapshot's budget.
    fn read(&mut self, path: &Path) -> Result<String, TopologyError> {
        let bytes = self.src.read(path, limits::MAX_FILE_BYTES)?;
        self.left = self.left.checked_sub(bytes.len() as u64).ok_or_else(|| {
            TopologyError::TreeTooLarge {
                path: path.to_path_buf(),
                limit: self.budget,
            }
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The file's text; `None` when it does not exist.
    fn read_optional(&mut self, path: &Path) -> Result<Option<String>, TopologyError> {
        match self.read(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if io_kind(&e) == Some(io::ErrorKind::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A file holding one decimal number and a newline (`generation_id`, `used_memory`).
fn single_number(text: &str, path: &Path) -> Result<u64, TopologyError> {
    text::decimal(text.trim()).ok_or_else(|| text::parse_error(path, 1, text))
}

fn gpu_id_number(text: &str, path: &Path) -> Result<u32, TopologyError> {
    let value = single_number(text, path)?;
    u32::try_from(value).map_err(|_| TopologyError::OutOfRange {
        path: path.to_path_buf(),
        line: 1,
        key: "gpu_id".to_owned(),
        value,
        bits: 32,
    })
}

/// The bytes of the regular file at `path`, at most `limit` of them: what the topology
/// reader reads each sysfs file with, and what any small configuration file should be read
/// with. The file type is checked before opening (opening a device can act: a watchdog starts
/// counting) and again on the open file (the path may have changed in between); the open does
/// not block (a FIFO's open waits for a writer); at most one byte more than `limit` is read.
/// A FIFO, a device or a directory is [`TopologyError::NotAFile`], a longer file
/// [`TopologyError::FileTooLarge`]; every error names the path.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, TopologyError> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;

    let io = |source: io::Error| TopologyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let stat = rustix::fs::stat(path).map_err(|e| io(e.into()))?;
    regular_file(stat.st_mode, path)?;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(e.into()))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
    regular_file(stat.st_mode, path)?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(TopologyError::FileTooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}
