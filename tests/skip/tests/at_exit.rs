//! The summary line is really printed when a test binary exits: this binary runs itself again
//! with one test selected that skips, and reads what the child printed.

use std::process::{Command, Output};

/// Set in the child's environment; the helper test below skips only then.
const CHILD: &str = "KFD_SKIP_AT_EXIT_CHILD";

/// The child's test: skips through the helper when [`CHILD`] is set (run by the test below),
/// and does nothing otherwise.
#[test]
fn helper_that_skips_in_the_child() {
    match std::env::var(CHILD).as_deref() {
        Ok("skip") => kfd_skip::skip("the reason"),
        Ok("prerequisite") => kfd_skip::prerequisite("libfoo is missing"),
        _ => {}
    }
}

fn child(mode: &str, ci: bool) -> Output {
    let mut command = Command::new(std::env::current_exe().expect("this test binary"));
    command
        .args([
            "--exact",
            "helper_that_skips_in_the_child",
            "--test-threads=1",
        ])
        .env(CHILD, mode)
        .env_remove("CI");
    if ci {
        command.env("CI", "true");
    }
    command.output().expect("running this test binary again")
}

fn last_stderr_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr.lines().last().unwrap_or_default().to_owned()
}

#[test]
fn a_binary_that_skipped_ends_with_the_summary_line() {
    let out = child("skip", false);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("test result: ok. 1 passed"));
    assert_eq!(
        last_stderr_line(&out),
        "kfd-skip: 1 test skipped: the reason [helper_that_skips_in_the_child]"
    );
}

#[test]
fn a_missing_prerequisite_skips_outside_ci() {
    let out = child("prerequisite", false);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        last_stderr_line(&out),
        "kfd-skip: 1 test skipped: libfoo is missing [helper_that_skips_in_the_child]"
    );
}

#[test]
fn a_missing_prerequisite_fails_under_ci_and_is_not_counted_as_a_skip() {
    let out = child("prerequisite", true);
    assert_eq!(out.status.code(), Some(101), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("kfd-skip: "), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("CI=true requires it"),
        "{out:?}"
    );
}

#[test]
fn a_binary_that_skipped_nothing_prints_no_summary() {
    let out = child("none", false);
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("kfd-skip: "));
}
