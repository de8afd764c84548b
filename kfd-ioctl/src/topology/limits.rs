//! The sanity limits a tree must keep to be read: far above any real machine, low enough that
//! a hostile or corrupt tree cannot make the reader (or a program that sizes arrays from the
//! tree) allocate without bound.
//!
//! Exceeding one is a [`TopologyError`](super::TopologyError) naming the file or directory and
//! the value: [`FileTooLarge`](super::TopologyError::FileTooLarge),
//! [`TooManyEntries`](super::TopologyError::TooManyEntries),
//! [`AboveLimit`](super::TopologyError::AboveLimit) or
//! [`TreeTooLarge`](super::TopologyError::TreeTooLarge).

/// Bytes in one file. The kernel prints each file into one page (`PAGE_SIZE`: 4 KiB on x86,
/// at most 64 KiB on any Linux architecture), so no real file is longer.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Bytes in the whole tree. A real tree holds a few MiB at most (eight MI300X in SPX mode,
/// with hundreds of caches each, print about 4 MiB).
pub const MAX_TREE_BYTES: u64 = 64 * 1024 * 1024;

/// Nodes; node directories are numbered below this. The kernel numbers its nodes from 0 without
/// gaps (CPU NUMA nodes, at most 1024 on x86, then one per GPU partition), and a node hidden by
/// the device cgroup keeps its number, so every number is below the node count. Also the limit
/// on `io_links_count` and `p2p_links_count`: one link per other node.
pub const MAX_NODES: u64 = 4096;

/// `mem_banks/` entries of a node, and `mem_banks_count` (real nodes have one or a few).
pub const MAX_MEM_BANKS: u64 = 256;

/// `caches/` entries of a node, and `caches_count` (an MI300X in SPX mode lists about 700).
pub const MAX_CACHES: u64 = 16384;

/// `cpu_cores_count` and `simd_count` of one node (the kernel's `NR_CPUS` is at most 8192; an
/// MI300X has 1216 SIMDs).
pub const MAX_PROCESSORS: u64 = 65536;

/// Names read from one directory of the tree, numbered or not. Numbered entries have their
/// own, lower limits above; this one bounds a directory full of other names.
pub const MAX_DIR_ENTRIES: u64 = 65536;
