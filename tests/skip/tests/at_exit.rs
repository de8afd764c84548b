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
        Ok("fork") => {
            kfd_skip::skip("the reason");
            exit_in_a_forked_child();
        }
        _ => {}
    }
}

/// Forks a child that leaves through `exit` (which runs the `atexit` handlers it inherited),
/// and waits for it.
fn exit_in_a_forked_child() {
    // SAFETY: the child calls only `exit`, whose handlers here are the summary printer (which
    // returns at once in another process) and the C library's own.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: ends the child; nothing of it runs after this.
        unsafe { libc::exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above; `status` is a valid out-pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
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

#[test]
fn a_forked_child_that_exits_does_not_print_the_summary_again() {
    let out = child("fork", false);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("kfd-skip: ").count(),
        1,
        "one summary, the parent's: {stderr}"
    );
}
