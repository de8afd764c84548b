//! What the C-side tests share: finding UMF (the `umf` 1.2.0 wheel that
//! `scripts/fetch-umf.sh` unpacks into `target/umf`), the C compiler, `libkfd_umf.so` and the
//! `kfd-emu` binary; compiling a C program against them; running it under `kfd-emu run`.
//!
//! Without UMF or a C compiler the tests are recorded as skipped (`kfd_skip`), unless
//! `CI=true`, where they fail.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The machine preset the C programs run on.
pub const MACHINE: &str = "mi300x";

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This package's directory (`tools/umf`).
pub fn package() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The unpacked UMF wheel (`include/`, `lib/`): `$KFD_UMF_DIR`, or `target/umf` of the
/// workspace.
pub fn umf_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("KFD_UMF_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/umf"));
    let header = dir.join("include/umf/memory_provider_ops.h");
    let lib = dir.join("lib/libumf.so");
    if header.is_file() && lib.is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "UMF 1.2 is not unpacked in {} (run `bash scripts/fetch-umf.sh`)",
            dir.display()
        ))
    }
}

/// The C compiler: `$CC` or `cc`, if it runs.
pub fn cc() -> Result<String, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    match Command::new(&cc).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(cc),
        _ => Err(format!("no working C compiler ({cc})")),
    }
}

/// UMF and the C compiler, or `None` after printing why (a panic on CI).
pub fn umf_and_cc(label: &str) -> Option<(PathBuf, String)> {
    match umf_dir().and_then(|umf| Ok((umf, cc()?))) {
        Ok(found) => Some(found),
        Err(reason) => {
            kfd_skip::prerequisite(format!("{label}: {reason}"));
            None
        }
    }
}

/// `target/<profile>` of this test binary (`target/<profile>/deps/<test>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's directory");
    deps.parent().expect("target/<profile>").to_path_buf()
}

/// The directory of the `libkfd_umf.so` cargo built for this test run: cargo builds the
/// package's library (a cdylib as well as an rlib) before its tests, into `deps/`.
pub fn kfd_umf_lib_dir() -> PathBuf {
    let profile = profile_dir();
    [profile.join("deps"), profile.clone()]
        .into_iter()
        .find(|dir| dir.join("libkfd_umf.so").is_file())
        .unwrap_or_else(|| panic!("no libkfd_umf.so in {}/deps", profile.display()))
}

/// The `kfd-emu` binary of this profile, built (or found up to date) by cargo.
pub fn kfd_emu() -> PathBuf {
    let profile = profile_dir();
    let target = profile.parent().expect("the target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(workspace())
        .args(["build", "--quiet", "-p", "kfd-emu", "--bin", "kfd-emu"])
        .arg("--target-dir")
        .arg(target);
    match profile.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            build.arg("--release");
        }
        Some(other) => {
            build.args(["--profile", other]);
        }
    }
    let status = build.status().expect("running cargo build -p kfd-emu");
    assert!(status.success(), "cargo build -p kfd-emu failed");
    let bin = profile.join("kfd-emu");
    assert!(bin.is_file(), "no {}", bin.display());
    bin
}

/// Compiles `tests/c/<name>.c` against UMF's headers and `kfd_umf.h`, linked with
/// `libkfd_umf.so` and `libumf.so` (both found through the rpath), warnings as errors.
pub fn compile(name: &str, umf: &Path, cc: &str) -> PathBuf {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("umf-c");
    std::fs::create_dir_all(&out_dir).expect("creating the output directory");
    let exe = out_dir.join(name);
    let source = package().join(format!("tests/c/{name}.c"));
    let lib = kfd_umf_lib_dir();
    let umf_lib = umf.join("lib");
    let output = Command::new(cc)
        .args(["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", package().join("include").display()))
        .arg(format!("-I{}", umf.join("include").display()))
        .arg(&source)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-L{}", umf_lib.display()))
        .args(["-lkfd_umf", "-lumf"])
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", umf_lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running the C compiler");
    assert!(
        output.status.success(),
        "compiling {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// Runs `program` under `kfd-emu run --machine mi300x --check-leaks`.
pub fn run_under_emulator(program: &Path) -> Output {
    Command::new(kfd_emu())
        .args(["run", "--machine", MACHINE, "--check-leaks", "--"])
        .arg(program)
        .output()
        .expect("running kfd-emu")
}

/// The program's stdout, after asserting it exited 0 (with its output in the message).
pub fn successful_stdout(label: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{label} under kfd-emu: {} (3 = leaks)\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    stdout
}
