//! `kfd-skip`: how the workspace's tests skip, so that a skip is never silent; and the
//! workspace's other test support, the seeded generator [`Rng`] its fuzz tests share.
//!
//! A test that cannot run here (a prerequisite is missing, the machine lacks something) calls
//! [`skip`] or [`skip_part`] instead of printing and returning. The call records the test's
//! name and the reason; when the test binary exits, one line per kind says how many tests
//! skipped and why, grouped by reason, after libtest's own `test result:` line:
//!
//! ```text
//! kfd-skip: 1 test skipped: umf_pools: UMF 1.2 is not unpacked in target/umf [disjoint_and_proxy_pools_of_every_kind_under_kfd_emu]
//! kfd-skip: 4 tests skipped a part: the hardware run: this machine has no /dev/kfd [a_device_list_map_that_fails_part_way_says_where_and_keeps_track, allocate_map_unmap_free_on_every_gpu, system_memory_is_mapped_on_all_gpus_and_cpu_visible, version_and_apertures_cover_every_gpu]
//! ```
//!
//! (libtest captures what a passing test prints, so a skip message inside the test alone
//! would never be seen.) A missing *prerequisite* — something `cargo xtask test` installs —
//! goes through [`prerequisite`], which fails the test under `CI=true` and skips otherwise.
//!
//! ```
//! fn needs_a_compiler() {
//!     if std::process::Command::new("cc").arg("--version").output().is_err() {
//!         kfd_skip::prerequisite("no C compiler (cc)");
//!         return;
//!     }
//!     // … the test proper …
//! }
//! ```

mod rng;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once, PoisonError};

pub use rng::Rng;

/// The prefix of every line this crate prints at exit, for tools that read test output.
pub const SUMMARY_PREFIX: &str = "kfd-skip: ";

/// What a recorded skip left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Extent {
    /// The whole test (it returned without checking anything).
    Test,
    /// A part of the test (one target, one step); the rest ran and was checked.
    Part,
}

/// Skips recorded in a process: `(extent, reason) -> the names of the tests`.
pub type Records = BTreeMap<(Extent, String), Vec<String>>;

static RECORDS: Mutex<Records> = Mutex::new(BTreeMap::new());
static AT_EXIT: Once = Once::new();
/// The process that registered the summary: a forked child inherits the registration and
/// the records, and must not print them again when it exits.
static REGISTERED_BY: AtomicU32 = AtomicU32::new(0);

/// Whether prerequisites are required: `CI=true`, as `cargo xtask test` and CI run the tests.
pub fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The running test skips the rest of itself because of `reason`.
pub fn skip(reason: impl Into<String>) {
    record(Extent::Test, reason.into());
}

/// The running test leaves out `what` (one target, one step) because of `reason`.
pub fn skip_part(what: &str, reason: &str) {
    record(Extent::Part, format!("{what}: {reason}"));
}

/// A prerequisite of the running test is missing, as `reason` says: under `CI=true` (see
/// [`required`]) the test fails; otherwise it is recorded as skipped and the caller returns.
///
/// # Panics
///
/// Under `CI=true`, always: there a missing prerequisite is a failure.
pub fn prerequisite(reason: impl Into<String>) {
    let reason = reason.into();
    if required() {
        panic!("{reason}, and CI=true requires it (`cargo xtask test` installs it)");
    }
    skip(reason);
}

fn record(extent: Extent, reason: String) {
    let test = std::thread::current()
        .name()
        .unwrap_or("<unnamed thread>")
        .to_owned();
    // Seen at once with --nocapture, and in the report of a test that fails later.
    eprintln!("{test}: SKIPPED: {reason}");
    RECORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry((extent, reason))
        .or_default()
        .push(test);
    AT_EXIT.call_once(|| {
        REGISTERED_BY.store(std::process::id(), Ordering::Relaxed);
        // SAFETY: `print_summary` is an `extern "C" fn()` that never unwinds (it reports
        // nothing rather than panic) and only touches statics that live until the process
        // ends; registering it has no other precondition.
        let registered = unsafe { libc::atexit(print_summary) };
        if registered != 0 {
            eprintln!("kfd-skip: atexit failed; no skip summary at exit");
        }
    });
}

/// The summary lines for `records`, one per [`Extent`] that has any: how many distinct tests,
/// then each reason with its tests.
pub fn summary(records: &Records) -> Vec<String> {
    let mut lines = Vec::new();
    for extent in [Extent::Test, Extent::Part] {
        let mut tests: Vec<&str> = Vec::new();
        let mut reasons = String::new();
        for ((_, reason), names) in records.iter().filter(|((e, _), _)| *e == extent) {
            let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
            names.sort_unstable();
            names.dedup();
            if !reasons.is_empty() {
                reasons.push_str("; ");
            }
            let _ = write!(reasons, "{reason} [{}]", name_list(&names));
            tests.extend(names);
        }
        tests.sort_unstable();
        tests.dedup();
        let n = tests.len();
        if n == 0 {
            continue;
        }
        let noun = if n == 1 { "test" } else { "tests" };
        let verb = match extent {
            Extent::Test => "skipped",
            Extent::Part => "skipped a part",
        };
        lines.push(format!("{SUMMARY_PREFIX}{n} {noun} {verb}: {reasons}"));
    }
    lines
}

/// How many test names a reason lists before "… N more".
const NAMES_LISTED: usize = 3;

fn name_list(names: &[&str]) -> String {
    if names.len() <= NAMES_LISTED + 1 {
        return names.join(", ");
    }
    let more = names.len() - NAMES_LISTED;
    format!("{}, … {more} more", names[..NAMES_LISTED].join(", "))
}

extern "C" fn print_summary() {
    if REGISTERED_BY.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    let Ok(records) = RECORDS.try_lock() else {
        return;
    };
    let mut err = std::io::stderr().lock();
    for line in summary(&records) {
        let _ = writeln!(err, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(entries: &[(Extent, &str, &str)]) -> Records {
        let mut r = Records::new();
        for &(extent, reason, test) in entries {
            r.entry((extent, reason.to_owned()))
                .or_default()
                .push(test.to_owned());
        }
        r
    }

    #[test]
    fn nothing_skipped_prints_nothing() {
        assert!(summary(&Records::new()).is_empty());
    }

    #[test]
    fn tests_are_counted_once_and_grouped_by_reason() {
        let r = records(&[
            (Extent::Test, "no UMF", "b"),
            (Extent::Test, "no UMF", "a"),
            (Extent::Test, "no cc", "a"),
            (Extent::Part, "the hardware run: no /dev/kfd", "c"),
            (Extent::Part, "the hardware run: no /dev/kfd", "c"),
        ]);
        assert_eq!(
            summary(&r),
            [
                "kfd-skip: 2 tests skipped: no UMF [a, b]; no cc [a]",
                "kfd-skip: 1 test skipped a part: the hardware run: no /dev/kfd [c]",
            ]
        );
    }

    #[test]
    fn long_lists_of_names_are_cut_but_every_test_is_counted() {
        let r = records(&[
            (Extent::Part, "no GPU", "t1"),
            (Extent::Part, "no GPU", "t2"),
            (Extent::Part, "no GPU", "t3"),
            (Extent::Part, "no GPU", "t4"),
            (Extent::Part, "no GPU", "t5"),
        ]);
        assert_eq!(
            summary(&r),
            ["kfd-skip: 5 tests skipped a part: no GPU [t1, t2, t3, … 2 more]"]
        );
    }
}
