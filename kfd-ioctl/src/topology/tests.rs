//! Reader behaviour that plain files cannot show: a generation id that changes between reads,
//! files that vanish mid-read, and nodes the device cgroup hides (EPERM, which root never
//! sees from a chmod).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::error::TopologyError;
use super::read::{self, Fs, MAX_ATTEMPTS, Source};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kfd-emu/fixtures/topology")
        .join(name)
}

/// The file system, except for the paths `script` answers.
struct Scripted<F> {
    script: F,
}

impl<F: FnMut(&Path) -> Option<io::Result<Vec<u8>>>> Source for Scripted<F> {
    fn read(&mut self, path: &Path, limit: u64) -> Result<Vec<u8>, TopologyError> {
        match (self.script)(path) {
            Some(answer) => answer.map_err(|source| TopologyError::Io {
                path: path.to_path_buf(),
                source,
            }),
            None => Fs.read(path, limit),
        }
    }

    fn list(&mut self, dir: &Path, limit: u64) -> Result<Vec<OsString>, TopologyError> {
        Fs.list(dir, limit)
    }

    fn is_dir(&mut self, path: &Path) -> bool {
        Fs.is_dir(path)
    }
}

fn is_generation(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "generation_id")
}

#[test]
fn a_generation_that_changes_on_every_read_gives_up_after_the_bounded_attempts() {
    let mut generation_reads = 0u64;
    let mut src = Scripted {
        script: |path: &Path| {
            is_generation(path).then(|| {
                generation_reads += 1;
                Ok(format!("{generation_reads}\n").into_bytes())
            })
        },
    };
    let result = read::topology(&fixture("vega10-old-kernel"), &mut src);
    assert!(
        matches!(result, Err(TopologyError::Unstable { attempts }) if attempts == MAX_ATTEMPTS),
        "{result:?}"
    );
    assert_eq!(generation_reads, 2 * u64::from(MAX_ATTEMPTS));
}

#[test]
fn a_generation_change_during_the_first_snapshot_is_followed_by_a_second_one() {
    // The tree changes from generation 5 to 6 while the first snapshot is taken; the node
    // file read during the first snapshot shows a different node than the second one.
    let mut generation_reads = 0u32;
    let mut properties_reads = 0u32;
    let node1 = fixture("vega10-old-kernel/topology/nodes/1/properties");
    let mut src = Scripted {
        script: |path: &Path| {
            if is_generation(path) {
                generation_reads += 1;
                let generation = if generation_reads == 1 { 5 } else { 6 };
                return Some(Ok(format!("{generation}\n").into_bytes()));
            }
            if path == node1 {
                properties_reads += 1;
                if properties_reads == 1 {
                    return Some(Ok(b"cpu_cores_count 0\nsimd_count 4\n".to_vec()));
                }
            }
            None
        },
    };
    let topology = read::topology(&fixture("vega10-old-kernel"), &mut src).unwrap();
    assert_eq!(topology.generation_id, Some(6));
    assert_eq!(topology.node(1).unwrap().properties.simd_count, 256);
    assert_eq!((generation_reads, properties_reads), (4, 2));
}

#[test]
fn a_file_that_vanishes_while_the_generation_changes_is_retried_not_reported() {
    let mut generation_reads = 0u32;
    let bank = fixture("vega10-old-kernel/topology/nodes/2/mem_banks/0/properties");
    let mut src = Scripted {
        script: |path: &Path| {
            if is_generation(path) {
                generation_reads += 1;
                let generation = if generation_reads == 1 { 1 } else { 2 };
                return Some(Ok(format!("{generation}\n").into_bytes()));
            }
            (path == bank && generation_reads == 1)
                .then(|| Err(io::Error::from(io::ErrorKind::NotFound)))
        },
    };
    let topology = read::topology(&fixture("vega10-old-kernel"), &mut src).unwrap();
    assert_eq!(topology.generation_id, Some(2));
    assert_eq!(topology.node(2).unwrap().mem_banks.len(), 1);
}

#[test]
fn a_file_that_fails_while_the_generation_holds_is_reported_with_its_path() {
    let bank = fixture("vega10-old-kernel/topology/nodes/2/mem_banks/0/properties");
    let mut src = Scripted {
        script: |path: &Path| (path == bank).then(|| Err(io::Error::from_raw_os_error(libc::EIO))),
    };
    match read::topology(&fixture("vega10-old-kernel"), &mut src) {
        Err(TopologyError::Io { path, source }) => {
            assert_eq!(path, bank);
            assert_eq!(source.raw_os_error(), Some(libc::EIO));
        }
        other => panic!("expected an Io error naming the bank, got {other:?}"),
    }
}

#[test]
fn nodes_the_device_cgroup_hides_are_left_out() {
    // The kernel answers EPERM for gpu_id and properties of a GPU outside the cgroup.
    let hidden_gpu_id = fixture("mi210-8gpu-xgmi/nodes/3/gpu_id");
    let hidden_properties = fixture("mi210-8gpu-xgmi/nodes/7/properties");
    let mut src = Scripted {
        script: |path: &Path| {
            (path == hidden_gpu_id || path == hidden_properties)
                .then(|| Err(io::Error::from_raw_os_error(libc::EPERM)))
        },
    };
    let topology = read::topology(&fixture("mi210-8gpu-xgmi"), &mut src).unwrap();
    let ids: Vec<u32> = topology.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 1, 2, 4, 5, 6, 8, 9]);
}

#[test]
fn a_tree_larger_than_the_budget_is_refused_at_the_file_that_passes_it() {
    let root = fixture("vega10-old-kernel");
    let whole = read::topology(&root, &mut Fs).unwrap();
    let mut bytes = 0u64;
    let mut counting = Scripted {
        script: |path: &Path| {
            let answer = Fs.read(path, u64::MAX);
            if let (Ok(b), false) = (&answer, is_generation(path)) {
                bytes += b.len() as u64;
            }
            Some(answer.map_err(|e| match e {
                TopologyError::Io { source, .. } => source,
                other => io::Error::other(other.to_string()),
            }))
        },
    };
    read::topology(&root, &mut counting).unwrap();
    // The budget covers the snapshot's files, not the generation_id read around it.
    assert_eq!(
        read::topology_within(&root, &mut Fs, bytes).unwrap(),
        whole,
        "exactly the bytes a snapshot reads fit"
    );
    match read::topology_within(&root, &mut Fs, bytes - 1) {
        Err(TopologyError::TreeTooLarge { path, limit }) => {
            assert_eq!(limit, bytes - 1);
            assert!(path.starts_with(&root), "{}", path.display());
        }
        other => panic!("expected TreeTooLarge, got {other:?}"),
    }
}

#[test]
fn a_directory_listing_stops_at_its_limit() {
    let dir = fixture("mi210-8gpu-xgmi/nodes");
    let all = Fs.list(&dir, u64::MAX).unwrap();
    assert_eq!(all.len(), 10);
    assert_eq!(Fs.list(&dir, 10).unwrap().len(), 10);
    match Fs.list(&dir, 9) {
        Err(TopologyError::TooManyEntries { path, limit }) => assert_eq!((path, limit), (dir, 9)),
        other => panic!("expected TooManyEntries, got {other:?}"),
    }
}
