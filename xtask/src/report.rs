//! Reading `cargo test` output: which package each test binary belongs to, its `test result:`
//! counts, and the `kfd-skip:` lines it ends with; and the summary table made of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use kfd_skip::SUMMARY_PREFIX;

/// The counts of one package (or of everything).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests marked `#[ignore]` (or `cfg_attr(miri, ignore)` under Miri).
    pub ignored: u64,
    /// Tests that skipped themselves (`kfd_skip::skip`): nothing of them was checked.
    pub skipped: u64,
    /// Tests that left a part out (`kfd_skip::skip_part`), e.g. the hardware run.
    pub skipped_part: u64,
    /// Test binaries that ended without a `test result:` line (a crash).
    pub crashed: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.ignored += other.ignored;
        self.skipped += other.skipped;
        self.skipped_part += other.skipped_part;
        self.crashed += other.crashed;
    }
}

/// What one line of `cargo test` output says.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `Running <source> (<path of the test binary>)`: a test binary starts.
    Running {
        /// The binary's path as cargo prints it.
        binary: &'a str,
    },
    /// `Doc-tests <crate>`: a crate's doctests start.
    DocTests {
        /// The library's crate name.
        krate: &'a str,
    },
    /// `test result: …`: the binary's counts.
    Result {
        /// Passed, failed, ignored.
        passed: u64,
        /// Failed.
        failed: u64,
        /// Ignored.
        ignored: u64,
    },
    /// `kfd-skip: N test(s) skipped[ a part]: reason [tests]; …`.
    Skipped {
        /// How many tests.
        tests: u64,
        /// Whether they skipped a part only.
        part: bool,
        /// The reasons with their tests, as printed.
        reasons: &'a str,
    },
    /// Anything else.
    Other,
}

/// Reads one line of `cargo test` output.
pub fn parse_line(line: &str) -> Line<'_> {
    let trimmed = line.trim();
    if let Some(rest) = trimmed.strip_prefix("Running ") {
        if let Some(open) = rest.rfind('(')
            && let Some(binary) = rest[open + 1..].strip_suffix(')')
        {
            return Line::Running { binary };
        }
        return Line::Other;
    }
    if let Some(krate) = trimmed.strip_prefix("Doc-tests ") {
        return Line::DocTests { krate };
    }
    if let Some(rest) = trimmed.strip_prefix("test result: ") {
        let count = |what: &str| -> u64 {
            rest.split(';')
                .filter_map(|part| {
                    part.trim()
                        .trim_start_matches(|c: char| !c.is_ascii_digit())
                        .split_once(' ')
                })
                .find(|(_, name)| *name == what)
                .and_then(|(n, _)| n.parse().ok())
                .unwrap_or(0)
        };
        return Line::Result {
            passed: count("passed"),
            failed: count("failed"),
            ignored: count("ignored"),
        };
    }
    if let Some(rest) = trimmed.strip_prefix(SUMMARY_PREFIX)
        && let Some((n, rest)) = rest.split_once(' ')
        && let Ok(tests) = n.parse()
    {
        let rest = rest
            .trim_start_matches("tests ")
            .trim_start_matches("test ");
        if let Some(reasons) = rest.strip_prefix("skipped a part: ") {
            return Line::Skipped {
                tests,
                part: true,
                reasons,
            };
        }
        if let Some(reasons) = rest.strip_prefix("skipped: ") {
            return Line::Skipped {
                tests,
                part: false,
                reasons,
            };
        }
    }
    Line::Other
}

/// Counts per package, built from the lines of one or more `cargo test` runs.
#[derive(Debug, Default)]
pub struct Tally {
    /// Package name -> its counts.
    pub packages: BTreeMap<String, Counts>,
    /// Every reason given for a skip (whole tests and parts), without the test names.
    pub reasons: BTreeSet<String>,
    /// Test binaries the watchdog killed, with the tests that hung.
    pub hangs: Vec<crate::watchdog::Hang>,
    /// The package of the binary whose output is being read, and whether its result is in.
    current: Option<(String, bool)>,
}

impl Tally {
    /// Reads `line`; `package_of` names the package of a test binary (by its path as cargo
    /// prints it) or of a doctest crate, `None` when unknown (then it counts as `unknown`).
    pub fn feed(&mut self, line: &str, package_of: &dyn Fn(&Line<'_>) -> Option<String>) {
        let parsed = parse_line(line);
        match parsed {
            Line::Running { .. } | Line::DocTests { .. } => {
                self.finish_binary();
                let package = package_of(&parsed).unwrap_or_else(|| "unknown".to_owned());
                self.packages.entry(package.clone()).or_default();
                self.current = Some((package, false));
            }
            Line::Result {
                passed,
                failed,
                ignored,
            } => {
                let counts = self.current_counts();
                counts.passed += passed;
                counts.failed += failed;
                counts.ignored += ignored;
                if let Some((_, done)) = &mut self.current {
                    *done = true;
                }
            }
            Line::Skipped {
                tests,
                part,
                reasons,
            } => {
                // `kfd_skip` prints `reason [names]` joined by `; `.
                for entry in reasons.split("; ") {
                    let reason = entry.rsplit_once(" [").map_or(entry, |(reason, _)| reason);
                    self.reasons.insert(reason.to_owned());
                }
                let counts = self.current_counts();
                if part {
                    counts.skipped_part += tests;
                } else {
                    counts.skipped += tests;
                }
            }
            Line::Other => {}
        }
    }

    /// Ends the run: a binary that started and printed no result counts as crashed.
    pub fn finish(&mut self) {
        self.finish_binary();
    }

    fn finish_binary(&mut self) {
        if let Some((package, false)) = self.current.take() {
            self.packages.entry(package).or_default().crashed += 1;
        }
    }

    fn current_counts(&mut self) -> &mut Counts {
        let package = self
            .current
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |(p, _)| p.clone());
        self.packages.entry(package).or_default()
    }

    /// The sum over every package.
    pub fn total(&self) -> Counts {
        let mut total = Counts::default();
        for counts in self.packages.values() {
            total.add(counts);
        }
        total
    }

    /// The summary table: one row per package, then the total.
    pub fn table(&self) -> String {
        let width = self
            .packages
            .keys()
            .map(String::len)
            .chain([5])
            .max()
            .unwrap_or(5);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:width$}  {:>6}  {:>6}  {:>7}  {:>7}  {:>12}",
            "crate", "passed", "failed", "ignored", "skipped", "skipped part"
        );
        let row = |out: &mut String, name: &str, c: &Counts| {
            let crashed = if c.crashed > 0 {
                format!("  ({} test binaries crashed)", c.crashed)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{name:width$}  {:>6}  {:>6}  {:>7}  {:>7}  {:>12}{crashed}",
                c.passed, c.failed, c.ignored, c.skipped, c.skipped_part
            );
        };
        for (name, counts) in &self.packages {
            row(&mut out, name, counts);
        }
        row(&mut out, "total", &self.total());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_and_libtest_lines_are_read() {
        assert_eq!(
            parse_line(
                "     Running unittests src/lib.rs (target/debug/deps/kfd_provider-53804cb37b30b36d)"
            ),
            Line::Running {
                binary: "target/debug/deps/kfd_provider-53804cb37b30b36d"
            }
        );
        assert_eq!(
            parse_line("   Doc-tests kfd_umf"),
            Line::DocTests { krate: "kfd_umf" }
        );
        assert_eq!(
            parse_line(
                "test result: FAILED. 49 passed; 2 failed; 3 ignored; 0 measured; 0 filtered out; finished in 4.15s"
            ),
            Line::Result {
                passed: 49,
                failed: 2,
                ignored: 3
            }
        );
        assert_eq!(
            parse_line("kfd-skip: 1 test skipped: no UMF [a]"),
            Line::Skipped {
                tests: 1,
                part: false,
                reasons: "no UMF [a]"
            }
        );
        assert_eq!(
            parse_line("kfd-skip: 12 tests skipped a part: the hardware run: no /dev/kfd [a, b]"),
            Line::Skipped {
                tests: 12,
                part: true,
                reasons: "the hardware run: no /dev/kfd [a, b]"
            }
        );
        assert_eq!(parse_line("test foo ... ok"), Line::Other);
    }

    #[test]
    fn counts_go_to_the_package_of_the_binary_that_printed_them() {
        let mut tally = Tally::default();
        let package_of = |line: &Line<'_>| match line {
            Line::Running { binary } if binary.contains("provider") => {
                Some("kfd-provider".to_owned())
            }
            Line::DocTests { krate } => Some(krate.replace('_', "-")),
            _ => None,
        };
        for line in [
            "     Running tests/provider.rs (target/debug/deps/provider-1)",
            "test result: ok. 51 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
            "kfd-skip: 51 tests skipped a part: the hardware run: no /dev/kfd [a, … 50 more]",
            "     Running tests/crash.rs (target/debug/deps/crash-2)",
            "   Doc-tests kfd_provider",
            "test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out",
        ] {
            tally.feed(line, &package_of);
        }
        tally.finish();
        let provider = tally.packages["kfd-provider"];
        assert_eq!(
            provider,
            Counts {
                passed: 52,
                ignored: 1,
                skipped_part: 51,
                ..Counts::default()
            }
        );
        assert_eq!(tally.packages["unknown"].crashed, 1, "no result line");
        assert_eq!(
            tally.reasons.iter().collect::<Vec<_>>(),
            ["the hardware run: no /dev/kfd"]
        );
        assert_eq!(tally.total().passed, 52);
        let table = tally.table();
        assert!(table.contains("kfd-provider"), "{table}");
        assert!(
            table.lines().last().unwrap().starts_with("total"),
            "{table}"
        );
    }
}
