//! The test run's watchdog: a test that hangs becomes a failure that names it.
//!
//! libtest prints `test NAME has been running for over 60 seconds` once for each test that
//! runs that long, and `test NAME ... ok` (or `FAILED`, `ignored`) when a test ends. The
//! watchdog keeps the tests that were reported long-running and have not ended; one that is
//! still running [`Watchdog::kill_after`] after its report is hung: the test binary (cargo's
//! child, with every process under it) is killed, so cargo goes on with the next binary
//! (`--no-fail-fast`) and the binary counts as crashed. A binary that prints nothing at all
//! for [`Watchdog::silent_after`] (a hang libtest cannot report) is killed the same way.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A hang the watchdog ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hang {
    /// The test binary (or doctest crate) as cargo named it.
    pub binary: String,
    /// The tests still running when it was killed (empty: it was silent and libtest named
    /// none).
    pub tests: Vec<String>,
    /// How long it ran.
    pub after: Duration,
}

/// Watches the lines of one `cargo test` run (see the module docs).
#[derive(Debug)]
pub struct Watchdog {
    /// How long after libtest's 60-second report a test counts as hung.
    pub kill_after: Duration,
    /// How long a binary may print nothing at all.
    pub silent_after: Duration,
    binary: Option<String>,
    /// Tests reported running for over 60 seconds, with when the report came.
    long: BTreeMap<String, Instant>,
    last_line: Instant,
}

impl Default for Watchdog {
    /// A test is hung 5 minutes after it started (60 s + 4 min); a binary is hung after 15
    /// minutes of silence. The longest test of the workspace takes well under a minute.
    fn default() -> Self {
        Watchdog::new(Duration::from_secs(4 * 60), Duration::from_secs(15 * 60))
    }
}

impl Watchdog {
    /// A watchdog with these limits.
    pub fn new(kill_after: Duration, silent_after: Duration) -> Watchdog {
        Watchdog {
            kill_after,
            silent_after,
            binary: None,
            long: BTreeMap::new(),
            last_line: Instant::now(),
        }
    }

    /// Reads one line of output.
    pub fn feed(&mut self, line: &str) {
        self.last_line = Instant::now();
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Running ") {
            self.binary = Some(rest.to_owned());
            self.long.clear();
        } else if trimmed.starts_with("Doc-tests ") {
            self.binary = Some(trimmed.to_owned());
            self.long.clear();
        } else if let Some(rest) = trimmed.strip_prefix("test ") {
            if let Some(name) = rest.strip_suffix(" has been running for over 60 seconds") {
                self.long.insert(name.to_owned(), Instant::now());
            } else if let Some((name, _)) = rest.split_once(" ... ") {
                self.long.remove(name);
            }
        }
    }

    /// Whether the current binary is hung now: what to report. The caller kills it; the
    /// watchdog then forgets its tests.
    pub fn check(&mut self) -> Option<Hang> {
        let hung: Vec<String> = self
            .long
            .iter()
            .filter(|(_, at)| at.elapsed() >= self.kill_after)
            .map(|(name, _)| name.clone())
            .collect();
        let silent = self.binary.is_some() && self.last_line.elapsed() >= self.silent_after;
        if hung.is_empty() && !silent {
            return None;
        }
        let after = if hung.is_empty() {
            self.last_line.elapsed()
        } else {
            // Reported at 60 s.
            Duration::from_secs(60) + self.kill_after
        };
        let hang = Hang {
            binary: self.binary.clone().unwrap_or_else(|| "?".to_owned()),
            tests: hung,
            after,
        };
        self.long.clear();
        self.last_line = Instant::now();
        Some(hang)
    }
}

/// Kills (SIGKILL) every process under `root` (not `root` itself): the test binary cargo
/// runs and whatever it started. Children are found through `/proc/<pid>/stat`.
pub fn kill_below(root: u32) -> usize {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            parents.push((pid, ppid));
        }
    }
    let mut below = vec![root];
    let mut i = 0;
    while i < below.len() {
        let parent = below[i];
        below.extend(
            parents
                .iter()
                .filter(|&&(_, ppid)| ppid == parent)
                .map(|&(pid, _)| pid),
        );
        i += 1;
    }
    let mut killed = 0;
    for &pid in &below[1..] {
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32)
            && rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
        {
            killed += 1;
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_reported_long_and_not_ended_is_hung() {
        let mut dog = Watchdog::new(Duration::ZERO, Duration::from_secs(3600));
        dog.feed("     Running tests/a.rs (target/debug/deps/a-1)");
        dog.feed("test slow has been running for over 60 seconds");
        dog.feed("test done has been running for over 60 seconds");
        dog.feed("test done ... ok");
        let hang = dog.check().expect("hung");
        assert_eq!(hang.tests, ["slow"]);
        assert_eq!(hang.binary, "tests/a.rs (target/debug/deps/a-1)");
        assert_eq!(dog.check(), None, "reported once");
    }

    #[test]
    fn a_new_binary_forgets_the_last_ones_tests() {
        let mut dog = Watchdog::new(Duration::ZERO, Duration::from_secs(3600));
        dog.feed("     Running tests/a.rs (target/debug/deps/a-1)");
        dog.feed("test slow has been running for over 60 seconds");
        dog.feed("   Doc-tests kfd_emu");
        assert_eq!(dog.check(), None);
    }

    #[test]
    fn a_silent_binary_is_hung() {
        let mut dog = Watchdog::new(Duration::from_secs(3600), Duration::ZERO);
        assert_eq!(dog.check(), None, "no binary yet");
        dog.feed("     Running tests/a.rs (target/debug/deps/a-1)");
        let hang = dog.check().expect("silent");
        assert!(hang.tests.is_empty());
    }
}
