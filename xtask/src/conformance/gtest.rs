//! What a Google Test program says, read as pure functions: the list `--gtest_list_tests`
//! prints, gtest's `--gtest_filter` patterns, and the outcome of one test run as its own
//! process (passed, failed, skipped, hung, crashed) with the first cause found in its output.
//!
//! kfdtest vendors gtest 1.6.0 (`tests/kfdtest/gtest-1.6.0`), which has no `GTEST_SKIP`: a
//! kfdtest test that cannot run on the GPU returns early after logging through its own
//! `LOG()`/`WARN()` (`tests/kfdtest/src/GoogleTestExtension.hpp`), whose lines start with
//! `[          ] ` (info) or `[----------] ` (warning) — "Skipping test: No VRAM found.",
//! "Skip test as debug API not supported", "Test is skipped due to HW capability issues"
//! (`TestReqEnvCaps`, `GoogleTestExtension.cpp`). gtest then reports it `[       OK ]`; such a
//! test is counted skipped here, as is gtest's own `[  SKIPPED ]` in newer gtests.

use std::fmt;

/// How one test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Passed,
    Failed,
    Skipped,
    /// Still running when its time limit ran out (its process group was killed).
    Hung,
    /// Ended by a signal (directly, or as kfd-emu's exit status 128 + signal).
    Crashed,
    /// Not run: upstream's exclusion list for this GPU leaves it out.
    Excluded,
}

impl Outcome {
    /// Every outcome, in the order of the results table's columns.
    pub const ALL: [Outcome; 6] = [
        Outcome::Passed,
        Outcome::Failed,
        Outcome::Skipped,
        Outcome::Hung,
        Outcome::Crashed,
        Outcome::Excluded,
    ];
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Hung => "hung",
            Outcome::Crashed => "crashed",
            Outcome::Excluded => "excluded",
        })
    }
}

/// How the test's process ended, as the runner saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Its time limit ran out.
    TimedOut,
}

/// The outcome of one test and the first cause found in its output (empty when it passed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub cause: String,
}

/// The full test names (`Suite.Test`) of `--gtest_list_tests` output, in order: a suite line
/// (`KFDQMTest.`, column 0) followed by indented test lines; typed and parameterized tests'
/// `# TypeParam = …` / `# GetParam() = …` comments are dropped. Lines before the first suite
/// (a program's own banner) are ignored.
pub fn parse_list(output: &str) -> Vec<String> {
    let mut tests = Vec::new();
    let mut suite: Option<String> = None;
    for line in output.lines() {
        let line = strip_ansi(line);
        let entry = line.split('#').next().unwrap_or("").trim_end();
        if entry.is_empty() {
            continue;
        }
        if !entry.starts_with(' ') {
            // A suite line is one word ending in '.'; anything else at column 0 is not part
            // of the list.
            suite = entry
                .strip_suffix('.')
                .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
                .map(str::to_owned);
            continue;
        }
        let name = entry.trim();
        if let Some(s) = &suite
            && !name.contains(char::is_whitespace)
        {
            tests.push(format!("{s}.{name}"));
        }
    }
    tests
}

/// Whether `name` passes the gtest filter `filter` (gtest's `--gtest_filter` semantics:
/// `POSITIVE[-NEGATIVE]`, each a `:`-separated list of patterns with `*` and `?`; an empty
/// positive part means `*`). This is how run_kfdtest.sh's per-GPU `FILTER[...]` strings, which
/// are all `-A:B:…`, exclude tests.
pub fn filter_matches(filter: &str, name: &str) -> bool {
    let (positive, negative) = match filter.split_once('-') {
        Some((p, n)) => (p, Some(n)),
        None => (filter, None),
    };
    let positive_ok = if positive.is_empty() {
        true
    } else {
        positive.split(':').any(|p| glob(p, name))
    };
    positive_ok && !negative.is_some_and(|n| n.split(':').any(|p| glob(p, name)))
}

/// gtest's pattern match: `*` any run of characters, `?` any one character.
fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matching with one backtrack point for the last '*'.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Removes ANSI escape sequences (kfdtest colours its log headings, `SetConsoleTextColor`).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters up to the final byte (0x40..=0x7e).
                for d in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The most a cause keeps of the output, in characters.
const CAUSE_LEN: usize = 300;

/// Classifies the run of the single test `name` from its merged stdout/stderr and how its
/// process ended.
///
/// * a time-out is `Hung`; an exit by signal (or kfd-emu's 128 + signal when gtest printed no
///   result for the test) is `Crashed`;
/// * `[  FAILED  ] name` is `Failed`; `[  SKIPPED ] name` is `Skipped`;
/// * `[       OK ] name` is `Skipped` when a kfdtest log line between `[ RUN      ]` and it says
///   it skipped, else `Passed` — but a non-zero exit after OK (a failure in the program's
///   teardown) is `Failed`;
/// * no result for the test at all (the program stopped before or during it) is `Failed`,
///   naming the last lines it printed.
pub fn classify(name: &str, output: &str, exit: Exit) -> Verdict {
    let lines: Vec<String> = output.lines().map(strip_ansi).collect();
    let result_of = |tag: &str| {
        lines.iter().any(|l| {
            l.strip_prefix(tag)
                // A parameterized test's line is `Suite.Test/0, where GetParam() = 0 (5 ms)`.
                .is_some_and(|rest| {
                    rest.split_whitespace()
                        .next()
                        .map(|w| w.trim_end_matches(','))
                        == Some(name)
                })
        })
    };
    let failed = result_of("[  FAILED  ]");
    let ok = result_of("[       OK ]");
    let gtest_skipped = result_of("[  SKIPPED ]");
    let verdict = |outcome, cause: String| Verdict {
        outcome,
        cause: shorten(&cause),
    };
    match exit {
        Exit::TimedOut => {
            // A test often fails an assertion and then waits: its first failure is the cause.
            let cause = if lines.iter().any(|l| l.ends_with(": Failure")) {
                format!("time limit, after {}", first_failure(&lines))
            } else {
                format!("time limit; last output: {}", tail(&lines, 2))
            };
            return verdict(Outcome::Hung, cause);
        }
        Exit::Signal(sig) => {
            return verdict(
                Outcome::Crashed,
                format!("signal {sig}; last output: {}", tail(&lines, 2)),
            );
        }
        Exit::Code(code) if code > 128 && !failed && !ok && !gtest_skipped => {
            return verdict(
                Outcome::Crashed,
                format!("signal {}; last output: {}", code - 128, tail(&lines, 2)),
            );
        }
        Exit::Code(_) => {}
    }
    if failed {
        return verdict(Outcome::Failed, first_failure(&lines));
    }
    if gtest_skipped {
        return verdict(Outcome::Skipped, skip_reason(&lines).unwrap_or_default());
    }
    if ok {
        if let Exit::Code(code) = exit
            && code != 0
        {
            return verdict(
                Outcome::Failed,
                format!(
                    "exit status {code} after the test passed; last output: {}",
                    tail(&lines, 2)
                ),
            );
        }
        return match skip_reason(&lines) {
            Some(reason) => verdict(Outcome::Skipped, reason),
            None => verdict(Outcome::Passed, String::new()),
        };
    }
    let code = match exit {
        Exit::Code(c) => c,
        _ => -1,
    };
    verdict(
        Outcome::Failed,
        format!(
            "no result for the test (exit status {code}); last output: {}",
            tail(&lines, 3)
        ),
    )
}

/// A kfdtest log line saying the test skipped itself (see the module docs).
fn skip_reason(lines: &[String]) -> Option<String> {
    let start = lines.iter().position(|l| l.starts_with("[ RUN      ]"))?;
    lines[start..].iter().find_map(|l| {
        let text = l
            .strip_prefix("[          ] ")
            .or_else(|| l.strip_prefix("[----------] "))?;
        text.to_ascii_lowercase()
            .contains("skip")
            .then(|| text.trim().to_owned())
    })
}

/// The first gtest failure (`file:line: Failure` and the message lines after it), else the
/// first kfd-emu complaint, else the last lines before the FAILED line.
fn first_failure(lines: &[String]) -> String {
    if let Some(at) = lines.iter().position(|l| l.ends_with(": Failure")) {
        let location = lines[at]
            .trim_end_matches(": Failure")
            .rsplit('/')
            .next()
            .unwrap_or_default();
        let message: Vec<&str> = lines[at + 1..]
            .iter()
            .map(|l| l.trim())
            .take_while(|l| !l.starts_with('[') && !l.ends_with(": Failure"))
            .filter(|l| !l.is_empty())
            .take(4)
            .collect();
        return format!("{location}: {}", message.join(" / "));
    }
    if let Some(l) = lines.iter().find(|l| l.starts_with("kfd-emu")) {
        return l.clone();
    }
    let end = lines
        .iter()
        .position(|l| l.starts_with("[  FAILED  ]"))
        .unwrap_or(lines.len());
    tail(&lines[..end], 2)
}

/// The last `n` non-empty lines, joined.
fn tail(lines: &[String], n: usize) -> String {
    let mut last: Vec<&str> = lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .take(n)
        .collect();
    last.reverse();
    if last.is_empty() {
        "(none)".to_owned()
    } else {
        last.join(" / ")
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= CAUSE_LEN {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(CAUSE_LEN).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_suite_dot_test_in_order() {
        let out = "Running with profile ...\nKFDQMTest.\n  CreateCpQueue\n  SubmitNopSdmaQueue\n\
                   KFDTopologyTest.\n  BasicTest\nParam/Suite.\n  Case/0  # GetParam() = 3\n";
        assert_eq!(
            parse_list(out),
            [
                "KFDQMTest.CreateCpQueue",
                "KFDQMTest.SubmitNopSdmaQueue",
                "KFDTopologyTest.BasicTest",
                "Param/Suite.Case/0",
            ]
        );
    }

    #[test]
    fn filters_follow_gtest() {
        let f = "-KFDEventTest.MeasureInterruptConsumption:KFDQMTest.*Sdma*:KFDRASTest.*";
        assert!(!filter_matches(f, "KFDQMTest.SubmitNopSdmaQueue"));
        assert!(!filter_matches(f, "KFDRASTest.BasicTest"));
        assert!(!filter_matches(
            f,
            "KFDEventTest.MeasureInterruptConsumption"
        ));
        assert!(filter_matches(f, "KFDQMTest.CreateCpQueue"));
        assert!(filter_matches(f, "KFDEventTest.SignalEvent"));
        // Positive part, then a negative one.
        assert!(filter_matches(
            "KFDQMTest.*-*Sdma*",
            "KFDQMTest.CreateCpQueue"
        ));
        assert!(!filter_matches(
            "KFDQMTest.*-*Sdma*",
            "KFDQMTest.AllSdmaQueues"
        ));
        assert!(!filter_matches("KFDQMTest.*", "KFDMemoryTest.MMBench"));
        assert!(filter_matches("A.B:C.?", "C.x"));
        assert!(!filter_matches("A.B:C.?", "C.xy"));
        assert!(filter_matches("", "Anything.AtAll"));
        // '*' backtracks.
        assert!(filter_matches("*a*b", "xaybzab"));
        assert!(!filter_matches("*a*b", "xaybza"));
    }

    const RUN: &str = "[ RUN      ] KFDQMTest.CreateCpQueue\n";

    #[test]
    fn passed() {
        let out =
            format!("{RUN}[       OK ] KFDQMTest.CreateCpQueue (12 ms)\n[  PASSED  ] 1 test.\n");
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::Code(0));
        assert_eq!(v.outcome, Outcome::Passed);
        assert_eq!(v.cause, "");
    }

    #[test]
    fn a_kfdtest_skip_print_is_skipped_even_coloured() {
        let out = format!(
            "{RUN}\u{1b}[0;32m[          ] \u{1b}[0;37mSkipping test: No VRAM found.\n\
             [       OK ] KFDQMTest.CreateCpQueue (0 ms)\n"
        );
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::Code(0));
        assert_eq!(v.outcome, Outcome::Skipped);
        assert_eq!(v.cause, "Skipping test: No VRAM found.");
        let warn = format!(
            "{RUN}[----------] Test is skipped due to HW capability issues\n\
             [       OK ] KFDQMTest.CreateCpQueue (0 ms)\n"
        );
        let v = classify("KFDQMTest.CreateCpQueue", &warn, Exit::Code(0));
        assert_eq!(v.outcome, Outcome::Skipped);
        // gtest's own skip (newer gtests).
        let g = format!("{RUN}[  SKIPPED ] KFDQMTest.CreateCpQueue (0 ms)\n");
        assert_eq!(
            classify("KFDQMTest.CreateCpQueue", &g, Exit::Code(0)).outcome,
            Outcome::Skipped
        );
    }

    #[test]
    fn a_failure_names_its_first_assertion() {
        let out = format!(
            "{RUN}/src/tests/kfdtest/src/KFDQMTest.cpp:123: Failure\n\
             Value of: hsaKmtCreateQueue(...)\n  Actual: 20\nExpected: HSAKMT_STATUS_SUCCESS\n\
             /src/KFDQMTest.cpp:200: Failure\nsecond\n\
             [  FAILED  ] KFDQMTest.CreateCpQueue (5 ms)\n[  FAILED  ] 1 test, listed below:\n"
        );
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::Code(1));
        assert_eq!(v.outcome, Outcome::Failed);
        assert_eq!(
            v.cause,
            "KFDQMTest.cpp:123: Value of: hsaKmtCreateQueue(...) / Actual: 20 / Expected: HSAKMT_STATUS_SUCCESS"
        );
    }

    #[test]
    fn a_time_out_is_hung_and_a_signal_crashed() {
        let out = format!("{RUN}waiting\n");
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::TimedOut);
        assert_eq!(v.outcome, Outcome::Hung);
        assert!(v.cause.contains("waiting"), "{}", v.cause);
        let failed_first = format!("{RUN}/s/BaseQueue.cpp:123: Failure\nValue of: WaitOnValue\n");
        let v = classify("KFDQMTest.CreateCpQueue", &failed_first, Exit::TimedOut);
        assert_eq!(v.outcome, Outcome::Hung);
        assert_eq!(
            v.cause,
            "time limit, after BaseQueue.cpp:123: Value of: WaitOnValue"
        );
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::Signal(11));
        assert_eq!(v.outcome, Outcome::Crashed);
        assert!(v.cause.starts_with("signal 11"), "{}", v.cause);
        // kfd-emu run exits 128 + signal when its program is killed by one.
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::Code(139));
        assert_eq!(v.outcome, Outcome::Crashed);
        assert!(v.cause.starts_with("signal 11"), "{}", v.cause);
    }

    #[test]
    fn no_result_or_a_bad_exit_after_ok_is_failed() {
        let v = classify(
            "KFDQMTest.CreateCpQueue",
            "Unable to open KFD\n",
            Exit::Code(1),
        );
        assert_eq!(v.outcome, Outcome::Failed);
        assert!(v.cause.contains("Unable to open KFD"), "{}", v.cause);
        let out = format!("{RUN}[       OK ] KFDQMTest.CreateCpQueue (1 ms)\nteardown died\n");
        let v = classify("KFDQMTest.CreateCpQueue", &out, Exit::Code(1));
        assert_eq!(v.outcome, Outcome::Failed);
        // A parameterized test's result line names its parameter after a comma.
        let param = "[ RUN      ] S.T/0\n/s/S.cpp:12: Failure\nbad\n\
                     [  FAILED  ] S.T/0, where GetParam() = 0 (5 ms)\n";
        let v = classify("S.T/0", param, Exit::Code(1));
        assert_eq!(v.outcome, Outcome::Failed);
        assert_eq!(v.cause, "S.cpp:12: bad");
        // Another test's result line does not count for this one.
        let other =
            "[ RUN      ] KFDQMTest.CreateCpQueueX\n[       OK ] KFDQMTest.CreateCpQueueX\n";
        assert_eq!(
            classify("KFDQMTest.CreateCpQueue", other, Exit::Code(0)).outcome,
            Outcome::Failed
        );
    }
}
