//! The cmake builds the conformance suites share: the job count, the libhsakmt of a
//! ROCT-Thunk-Interface tree (kfdtest links it, ROCr is built against it), and writing a
//! generated file only when its text changes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::failure::{self, Failure};

/// How many build jobs cmake runs: the host's CPUs.
pub(super) fn jobs() -> String {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .to_string()
}

/// Builds the libhsakmt of the ROCT-Thunk-Interface tree `src` (shared) into `build/hsakmt`
/// and installs it, with its CMake package (`lib/cmake/hsakmt`), into `build/prefix`, which
/// it returns. kfdtest links it; `conformance rocrtst --hsakmt-src` builds ROCr against it
/// ([`super::rocr`])
/// (into the same `target/conformance/kfdtest/<tree>/`, so the two suites share one build).
/// The caller holds the build directory's lock.
pub(super) fn hsakmt(src: &Path, build: &Path) -> Result<PathBuf, Failure> {
    let header = ["include/hsakmt.h", "include/hsakmt/hsakmt.h"]
        .iter()
        .any(|h| src.join(h).is_file());
    if !src.join("CMakeLists.txt").is_file() || !header {
        return Err(Failure::new(format!(
            "{}: not a ROCT-Thunk-Interface tree (no CMakeLists.txt, or no hsakmt.h under include/)",
            src.display()
        )));
    }
    let jobs = jobs();
    let prefix = build.join("prefix");
    let hsakmt = build.join("hsakmt");
    println!("conformance: building libhsakmt of {}", src.display());
    failure::run(
        Command::new("cmake")
            .arg("-S")
            .arg(src)
            .arg("-B")
            .arg(&hsakmt)
            .args(["-DBUILD_SHARED_LIBS=ON", "-DCMAKE_BUILD_TYPE=Release"])
            .arg(format!("-DCMAKE_INSTALL_PREFIX={}", prefix.display())),
        "cmake (libhsakmt)",
    )?;
    failure::run(
        Command::new("cmake")
            .arg("--build")
            .arg(&hsakmt)
            .args(["-j", &jobs]),
        "building libhsakmt",
    )?;
    failure::run(
        Command::new("cmake").arg("--install").arg(&hsakmt),
        "installing libhsakmt",
    )?;
    Ok(prefix)
}

/// Writes `text` to `path` unless it already holds it (a rewrite would make the next build
/// recompile everything that force-includes it).
pub(super) fn write_unchanged(path: &Path, text: &str) -> Result<(), Failure> {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    fs::write(path, text).map_err(|e| Failure::new(format!("{}: {e}", path.display())))
}
