//! Mutation fuzzing of the topology reader and the emulator's machine builder, from the real
//! captures, with fixed seeds.
//!
//! Each iteration copies a capture, applies one to four mutations (numbers set to extremes,
//! huge values, keys removed or duplicated, files and directories deleted, files swapped for
//! FIFOs, directories, device and dangling or looping symbolic links, truncation, random
//! bytes, directories renumbered to extremes or copied) and reads the result. The read must
//! return `Ok` or a typed error, within a deadline. When it returns `Ok`, the emulator's
//! machine builder must return `Ok` or a typed error too; and a machine it builds must write a
//! sysfs tree that reads back as the machine's own topology.
//!
//! `KFD_FUZZ_ITERS` sets the iteration count (default 200, quick enough for CI);
//! `KFD_FUZZ_SEED` the seed (default fixed). The summary (iterations, per second, outcomes)
//! goes to stderr even when the test harness captures output.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kfd_emu::machine::Machine;
use kfd_ioctl::topology::{Topology, TopologyError, limits};

mod topology_support;

use topology_support::{TempTree, fixtures};

/// The captures mutated, as directories below `kfd-emu/fixtures/topology/`.
const CAPTURES: [&str; 4] = [
    "mixed-mi300x-mi350x-gfx906-navi",
    "mi210-8gpu-xgmi",
    "vega10-old-kernel",
    "mi100",
];

/// An iteration that takes longer than this is blocked (an honest one takes milliseconds).
const DEADLINE: Duration = Duration::from_secs(60);

/// SplitMix64: a small, seedable generator whose sequence is the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values at the edges of the fields and limits, as text.
fn extreme(rng: &mut Rng) -> String {
    let numbers = [
        0,
        1,
        u64::from(u32::MAX),
        u64::from(u32::MAX) + 1,
        u64::MAX,
        u64::MAX - 1,
        limits::MAX_PROCESSORS,
        limits::MAX_PROCESSORS + 1,
        limits::MAX_NODES - 1,
        limits::MAX_NODES,
        limits::MAX_CACHES + 1,
        128,
        255,
        256,
    ];
    match rng.below(8) {
        0 => "-1".to_owned(),
        1 => "18446744073709551616".to_owned(),
        2 => "0x10".to_owned(),
        3 => "9".repeat(1 + rng.below(100)),
        _ => rng.pick(&numbers).to_string(),
    }
}

/// Every file and directory below `root` (not `root`), in a stable order.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        names.sort();
        for path in names {
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out
}

/// Copies directories, regular files and symbolic links (as links) from `from` to `to`; a
/// FIFO or other special file is left out, as opening one to copy it could block.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).unwrap();
        } else if kind.is_symlink() {
            let link = fs::read_link(entry.path()).unwrap();
            std::os::unix::fs::symlink(link, &target).unwrap();
        }
    }
}

/// Removes whatever is at `path` (file, link, FIFO or directory).
fn remove(path: &Path) {
    if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        let _ = fs::remove_dir_all(path);
    } else {
        let _ = fs::remove_file(path);
    }
}

/// Whether `path` is a regular file (not through a link).
fn is_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Applies one random mutation below `root` and says what it did.
fn mutate(rng: &mut Rng, root: &Path) -> String {
    let all = walk(root);
    if all.is_empty() {
        return "nothing left to mutate".to_owned();
    }
    let files: Vec<&PathBuf> = all.iter().filter(|p| is_file(p)).collect();
    // Real directories only: through a link, a copy would recurse for ever.
    let dirs: Vec<&PathBuf> = all
        .iter()
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    let relative = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let kind = rng.below(16);
    if kind >= 12 && !dirs.is_empty() {
        let dir = *rng.pick(&dirs);
        return match kind {
            12 => {
                remove(dir);
                format!("deleted directory {}", relative(dir))
            }
            13 => {
                let number = *rng.pick(&[
                    "4294967295",
                    "4095",
                    "4096",
                    "01",
                    "255",
                    "99999999999999999999999",
                ]);
                let to = dir.with_file_name(number);
                remove(&to);
                let _ = fs::rename(dir, &to);
                format!("renumbered {} as {number}", relative(dir))
            }
            14 => {
                let number = 2 + rng.below(20);
                let to = dir.with_file_name(number.to_string());
                if !to.exists() {
                    copy_tree(dir, &to);
                }
                format!("copied {} as {number}", relative(dir))
            }
            _ => {
                let _ = std::os::unix::fs::symlink(dir, dir.join("loop"));
                format!("linked {} into itself", relative(dir))
            }
        };
    }
    if files.is_empty() {
        return "no file to mutate".to_owned();
    }
    let file = *rng.pick(&files);
    let name = relative(file);
    let text = fs::read(file).unwrap_or_default();
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let line = rng.below(lines.len());
    let rewrite = |lines: Vec<Vec<u8>>| fs::write(file, lines.join(&b'\n')).unwrap();
    match kind {
        0..=2 => {
            // A value set to an extreme (on a `key value` line; else the whole line).
            let value = extreme(rng);
            let mut out: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
            let key = out[line]
                .split(|&b| b == b' ')
                .next()
                .unwrap_or_default()
                .to_vec();
            out[line] = if key.is_empty() || lines.len() == 1 {
                value.clone().into_bytes()
            } else {
                [key, b" ".to_vec(), value.clone().into_bytes()].concat()
            };
            rewrite(out);
            format!("{name} line {}: value {value}", line + 1)
        }
        3 => {
            let mut out: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
            out.remove(line);
            rewrite(out);
            format!("{name}: removed line {}", line + 1)
        }
        4 => {
            let mut out: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
            let copy = out[line].clone();
            out.insert(rng.below(out.len() + 1), copy);
            rewrite(out);
            format!("{name}: duplicated line {}", line + 1)
        }
        5 => {
            let len = (limits::MAX_FILE_BYTES as usize).saturating_sub(4) + rng.below(9);
            let mut out: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
            out.insert(line, [b"huge ".to_vec(), vec![b'7'; len]].concat());
            rewrite(out);
            format!("{name}: a line of {len} digits")
        }
        6 => {
            remove(file);
            format!("deleted {name}")
        }
        7 => {
            remove(file);
            nix::unistd::mkfifo(file, nix::sys::stat::Mode::S_IRWXU).unwrap();
            format!("{name} is a FIFO")
        }
        8 => {
            remove(file);
            fs::create_dir_all(file.join("0")).unwrap();
            format!("{name} is a directory")
        }
        9 => {
            let target = match rng.below(4) {
                0 => PathBuf::from("/dev/zero"),
                1 => PathBuf::from("/dev/null"),
                2 => file.with_extension("dangling"),
                _ => file.clone(),
            };
            remove(file);
            std::os::unix::fs::symlink(&target, file).unwrap();
            format!("{name} links to {}", target.display())
        }
        10 => {
            let keep = rng.below(text.len() + 1);
            fs::write(file, &text[..keep]).unwrap();
            format!("{name} truncated to {keep} bytes")
        }
        _ => {
            let mut bytes = text.clone();
            let count = 1 + rng.below(16);
            for _ in 0..count {
                let byte = rng.next() as u8;
                if bytes.is_empty() || rng.below(3) == 0 {
                    bytes.push(byte);
                } else {
                    let at = rng.below(bytes.len());
                    bytes[at] = byte;
                }
            }
            fs::write(file, bytes).unwrap();
            format!("{name}: {count} random bytes")
        }
    }
}

/// What one iteration ended with.
fn outcome(error: &TopologyError) -> &'static str {
    match error {
        TopologyError::Io { .. } => "Io",
        TopologyError::Parse { .. } => "Parse",
        TopologyError::OutOfRange { .. } => "OutOfRange",
        TopologyError::MissingKey { .. } => "MissingKey",
        TopologyError::NotAFile { .. } => "NotAFile",
        TopologyError::FileTooLarge { .. } => "FileTooLarge",
        TopologyError::TreeTooLarge { .. } => "TreeTooLarge",
        TopologyError::TooManyEntries { .. } => "TooManyEntries",
        TopologyError::AboveLimit { .. } => "AboveLimit",
        TopologyError::Overflow { .. } => "Overflow",
        TopologyError::NoNodes { .. } => "NoNodes",
        _ => "other",
    }
}

/// Reads the mutated tree; when it parses, builds the machine and checks its sysfs round
/// trip. Returns the outcome's name.
fn check(tree: &Path, scratch: &Path) -> String {
    let topology = match Topology::read_from(tree) {
        Ok(topology) => topology,
        Err(e) => {
            // Every error names what failed.
            assert!(!e.to_string().is_empty());
            return format!("topology {}", outcome(&e));
        }
    };
    let machine = match Machine::from_topology("fuzz", topology) {
        Ok(machine) => machine,
        Err(e) => return format!("machine error: {e}"),
    };
    remove(scratch);
    fs::create_dir_all(scratch).unwrap();
    machine
        .write_sysfs(scratch)
        .expect("writing the machine's tree");
    let reread = Topology::read_from(scratch)
        .unwrap_or_else(|e| panic!("the machine's own tree does not read back: {e}"));
    assert_eq!(
        &reread,
        machine.topology(),
        "the machine's tree reads back the same"
    );
    "machine built".to_owned()
}

fn iterations() -> u64 {
    std::env::var("KFD_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

#[test]
fn mutated_captures_read_ok_or_fail_typed_and_build_machines_that_round_trip() {
    let iterations = iterations();
    let seed = std::env::var("KFD_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6b66_642d_7273_u64);
    let (progress, report) = mpsc::channel::<Option<(u64, String)>>();
    let (outcomes_tx, outcomes_rx) = mpsc::channel::<BTreeMap<String, u64>>();
    let started = Instant::now();
    std::thread::spawn(move || {
        let base = TempTree::new("fuzz-base");
        for capture in CAPTURES {
            copy_tree(&fixtures().join(capture), &base.0.join(capture));
        }
        let work = TempTree::new("fuzz-work");
        let scratch = work.0.with_extension("sysfs");
        let mut rng = Rng(seed);
        let mut outcomes = BTreeMap::new();
        for i in 0..iterations {
            let capture = *rng.pick(&CAPTURES);
            remove(&work.0);
            copy_tree(&base.0.join(capture), &work.0);
            let mut log = format!("seed {seed:#x} iteration {i}: {capture}");
            let _ = progress.send(Some((i, format!("{log}, mutating"))));
            for _ in 0..1 + rng.below(4) {
                log.push_str("; ");
                log.push_str(&mutate(&mut rng, &work.0));
            }
            let _ = progress.send(Some((i, log)));
            let result = check(&work.0, &scratch);
            let key = result.split(':').next().unwrap_or_default().to_owned();
            *outcomes.entry(key).or_insert(0) += 1;
        }
        remove(&scratch);
        let _ = outcomes_tx.send(outcomes);
        let _ = progress.send(None);
    });
    let mut last = String::from("before the first iteration");
    loop {
        match report.recv_timeout(DEADLINE) {
            Ok(Some((_, log))) => last = log,
            Ok(None) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("blocked for {DEADLINE:?}: {last}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("panicked: {last}"),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let outcomes = outcomes_rx.recv().expect("the outcomes");
    assert_eq!(outcomes.values().sum::<u64>(), iterations);
    assert!(
        iterations < 50 || outcomes.get("machine built").copied().unwrap_or(0) > 0,
        "some mutated trees still build machines: {outcomes:?}"
    );
    // Straight to stderr, so that the summary shows in CI logs where the harness captures
    // the test's output.
    let _ = writeln!(
        std::io::stderr(),
        "topology fuzz: {iterations} iterations in {elapsed:.2} s ({:.0}/s), seed {seed:#x}: \
         {outcomes:?}",
        iterations as f64 / elapsed
    );
}
