//! Reads the mean estimates criterion just wrote and prints a candidate/baseline ratio.
//!
//! Shared by the workspace's benches (`#[path]`-included), so every bench reports its ratio
//! the same way.

use std::path::PathBuf;

/// The mean time in nanoseconds of `group/bench` from criterion's `new/estimates.json`.
pub fn mean_ns(group: &str, bench: &str) -> Option<f64> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(target_dir_of_this_bench)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = dir
        .join("criterion")
        .join(group)
        .join(bench)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let mean = &text[text.find("\"mean\"")?..];
    let point = &mean[mean.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = point.find([',', '}'])?;
    point[..end].trim().parse().ok()
}

/// The target directory this bench binary was built in (`<target>/<profile>/deps/<bench>`),
/// which is where criterion writes, however deep the package sits in the workspace.
fn target_dir_of_this_bench() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let target = exe.ancestors().nth(3)?;
    target
        .join("criterion")
        .is_dir()
        .then(|| target.to_path_buf())
}

/// Prints `candidate / baseline` for benches of one group, with the absolute times.
pub fn report(group: &str, candidate: &str, baseline: &str, target: Option<f64>) {
    match (mean_ns(group, candidate), mean_ns(group, baseline)) {
        (Some(c), Some(b)) if b > 0.0 => {
            let ratio = c / b;
            let verdict = match target {
                Some(t) if ratio <= t => format!(" (target ≤ {t:.2}×: met)"),
                Some(t) => format!(" (target ≤ {t:.2}×: MISSED)"),
                None => String::new(),
            };
            println!(
                "{group}: {candidate} {:.3} µs / {baseline} {:.3} µs = {ratio:.3}×{verdict}",
                c / 1000.0,
                b / 1000.0
            );
        }
        _ => println!(
            "{group}: no estimates for {candidate} and {baseline} (run with `cargo bench`)"
        ),
    }
}
