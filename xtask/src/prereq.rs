//! What the tests need on the machine, each put in place only when missing: Debian packages,
//! the sid uapi header, Intel UMF, and the nightly toolchain's Miri.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::failure::{Failure, run};

/// Debian packages the tests use, and why.
pub const PACKAGES: &[(&str, &str)] = &[
    (
        "libdrm-dev",
        "<drm/drm.h> for the 6.1 system kfd_ioctl.h in the layout proof",
    ),
    (
        "libhsakmt-dev",
        "the C client that kfd-emu must run unmodified",
    ),
    (
        "rocminfo",
        "the ROCr client that kfd-emu must run unmodified",
    ),
    (
        "libhsa-runtime-dev",
        "ROCr 5.2.3's headers and libhsa-runtime64.so for the C tests of its queues and copies",
    ),
    (
        "llvm-19",
        "llvm-mc-19, llvm-objdump-19 and llvm-objcopy-19, the references of kfd-gfx9's decoder and encoder",
    ),
    (
        "clang-19",
        "the OpenCL and HIP kernels for gfx90a whose code objects kfd-gfx9 decodes whole",
    ),
    (
        "lld-19",
        "ld.lld-19, which links clang-19's kernels into the shared code objects ROCr loads and kfd-gfx9's kernel corpus (tests/kernels)",
    ),
    (
        "hipcc",
        "HIP 5.2.3's compiler driver for the HIP programs kfd-emu runs (their kernels included)",
    ),
    (
        "libamdhip64-dev",
        "HIP 5.2.3's headers and runtime those programs link against",
    ),
    (
        "rocm-device-libs",
        "the OpenCL library bitcode (ocml, ockl) kfd-gfx9's corpus links its ocl.cl kernels with",
    ),
    (
        "libllvm19",
        "libLLVM 19, which tinygrad's AMD backend compiles its gfx942 kernels with",
    ),
    (
        "python3-venv",
        "the virtual environment scripts/fetch-tinygrad.sh installs tinygrad and numpy into",
    ),
];

/// Installs the packages of [`PACKAGES`] that are missing: with `apt-get` as root, through
/// `sudo` otherwise.
pub fn packages() -> Result<(), Failure> {
    if Command::new("dpkg-query")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        return Err(Failure::new(format!(
            "no dpkg-query: this is not a Debian-like system; install the equivalents of {} \
             yourself",
            names(PACKAGES.iter().map(|(name, _)| *name))
        )));
    }
    let missing: Vec<&str> = PACKAGES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !installed(name))
        .collect();
    if missing.is_empty() {
        println!(
            "xtask: packages: {} installed",
            names(PACKAGES.iter().map(|(name, _)| *name))
        );
        return Ok(());
    }
    let how = Privilege::here();
    // Says why it cannot before anything is printed or run.
    apt_argv(how, &missing, &[]).map_err(Failure::new)?;
    println!(
        "xtask: packages: installing {}{}",
        names(missing.iter().copied()),
        if how == Privilege::Sudo {
            " through sudo"
        } else {
            ""
        }
    );
    let apt = |args: &[&str]| {
        let argv = apt_argv(how, &missing, args).map_err(Failure::new)?;
        run(Command::new(&argv[0]).args(&argv[1..]), "apt-get")
    };
    apt(&["update"])?;
    let mut install = vec!["install", "-y"];
    install.extend(&missing);
    apt(&install)?;
    let still: Vec<&str> = missing
        .into_iter()
        .filter(|name| !installed(name))
        .collect();
    if still.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "apt-get reported success but {} still not installed",
            names(still.into_iter())
        )))
    }
}

/// Lets unprivileged userfaultfds catch kernel accesses (`vm.unprivileged_userfaultfd` = 1,
/// as root directly, through `sudo sysctl` otherwise): the engines' isolation test blocks a
/// traced program's SDMA copy in a page behind a userfaultfd nobody serves, and `kfd-emu run`
/// drops `CAP_SYS_PTRACE` from the programs it traces, which a userfaultfd without
/// `UFFD_USER_MODE_ONLY` otherwise needs (`userfaultfd_syscall_allowed`, fs/userfaultfd.c).
pub fn userfaultfd() -> Result<(), Failure> {
    const KNOB: &str = "/proc/sys/vm/unprivileged_userfaultfd";
    if std::fs::read_to_string(KNOB).is_ok_and(|s| s.trim() == "1") {
        println!("xtask: userfaultfd: unprivileged use allowed");
        return Ok(());
    }
    println!("xtask: userfaultfd: allowing unprivileged use (vm.unprivileged_userfaultfd = 1)");
    match Privilege::here() {
        Privilege::Root => {
            std::fs::write(KNOB, "1\n").map_err(|e| Failure::new(format!("writing {KNOB}: {e}")))
        }
        Privilege::Sudo => run(
            Command::new("sudo").args(["-n", "sysctl", "-q", "vm.unprivileged_userfaultfd=1"]),
            "sudo sysctl vm.unprivileged_userfaultfd",
        ),
        Privilege::Neither => Err(Failure::new(
            "the engines' isolation test needs vm.unprivileged_userfaultfd = 1: run as root or \
             with sudo, or set it yourself"
                .to_owned(),
        )),
    }
}

/// The 2 MiB huge pages the hugetlb tests need (kfd-ring's hugetlb memfd granule; sealing a
/// hugetlbfs memfd). A machine that reserves none would skip them.
pub const HUGE_PAGES: u64 = 8;

/// Reserves [`HUGE_PAGES`] 2 MiB huge pages when fewer are free (`vm.nr_hugepages`, as root
/// directly, through `sudo sysctl` otherwise).
pub fn huge_pages() -> Result<(), Failure> {
    const NR: &str = "/proc/sys/vm/nr_hugepages";
    let free = free_huge_pages().unwrap_or(0);
    if free >= HUGE_PAGES {
        println!("xtask: huge pages: {free} free");
        return Ok(());
    }
    let total = std::fs::read_to_string(NR)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let want = total + (HUGE_PAGES - free);
    println!("xtask: huge pages: reserving {want} (vm.nr_hugepages) for the hugetlb tests");
    let reserved = match Privilege::here() {
        Privilege::Root => std::fs::write(NR, format!("{want}\n"))
            .map_err(|e| Failure::new(format!("writing {NR}: {e}"))),
        Privilege::Sudo => run(
            Command::new("sudo").args(["-n", "sysctl", "-q", &format!("vm.nr_hugepages={want}")]),
            "sudo sysctl vm.nr_hugepages",
        ),
        Privilege::Neither => Err(Failure::new(format!(
            "the hugetlb tests need {HUGE_PAGES} free 2 MiB huge pages: run as root or with sudo, \
             or set vm.nr_hugepages yourself"
        ))),
    };
    reserved?;
    match free_huge_pages() {
        Some(n) if n >= HUGE_PAGES => Ok(()),
        n => Err(Failure::new(format!(
            "asked the kernel for {want} huge pages, {} are free (memory too fragmented?)",
            n.unwrap_or(0)
        ))),
    }
}

/// `HugePages_Free` of `/proc/meminfo` (2 MiB pages on x86_64).
fn free_huge_pages() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse().ok())
}

/// How this user can run `apt-get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Privilege {
    /// As root: directly.
    Root,
    /// Not root, with `sudo` on the `PATH`.
    Sudo,
    /// Not root and no `sudo`: it cannot.
    Neither,
}

impl Privilege {
    fn here() -> Privilege {
        if rustix::process::geteuid().is_root() {
            Privilege::Root
        } else if on_path("sudo") {
            Privilege::Sudo
        } else {
            Privilege::Neither
        }
    }
}

/// The command line of `apt-get -qq args…`, non-interactive, run as `how` allows; an error
/// naming the `missing` packages when it cannot be run at all.
fn apt_argv(how: Privilege, missing: &[&str], args: &[&str]) -> Result<Vec<String>, String> {
    let prefix: &[&str] = match how {
        Privilege::Root => &["env"],
        Privilege::Sudo => &["sudo", "env"],
        Privilege::Neither => {
            return Err(format!(
                "{} missing; installing needs root, and this user is not root and has no \
                 sudo: run `apt-get install {}` as root, then this command again",
                names(missing.iter().copied()),
                missing.join(" ")
            ));
        }
    };
    Ok(prefix
        .iter()
        .chain(&["DEBIAN_FRONTEND=noninteractive", "apt-get", "-qq"])
        .chain(args)
        .map(|s| (*s).to_owned())
        .collect())
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// The fetch scripts (each checks what it already has and is quick then): the newest uapi
/// header into `target/uapi-sid`, Intel UMF into `target/umf`, tinygrad and numpy (PyPI,
/// pinned) into the venv `target/tinygrad/venv`.
pub fn fetched(root: &Path) -> Result<(), Failure> {
    for script in [
        "scripts/fetch-sid-header.sh",
        "scripts/fetch-umf.sh",
        "scripts/fetch-tinygrad.sh",
    ] {
        run(
            Command::new("bash")
                .arg(root.join(script))
                .current_dir(root),
            script,
        )?;
    }
    Ok(())
}

/// The nightly toolchain with the `miri` and `rust-src` components, and Miri's sysroot.
pub fn miri() -> Result<(), Failure> {
    let present = Command::new("cargo")
        .args(["+nightly", "miri", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        println!("xtask: miri: the nightly toolchain has it");
    } else {
        println!("xtask: miri: adding the miri and rust-src components of nightly");
        let added = run(
            Command::new("rustup").args([
                "component",
                "add",
                "--toolchain",
                "nightly",
                "miri",
                "rust-src",
            ]),
            "rustup component add",
        );
        if added.is_err() {
            run(
                Command::new("rustup").args([
                    "toolchain",
                    "install",
                    "nightly",
                    "--profile",
                    "minimal",
                    "--component",
                    "miri,rust-src",
                ]),
                "rustup toolchain install nightly",
            )
            .map_err(|e| {
                Failure::new(format!(
                    "Miri needs the nightly toolchain with miri and rust-src: {e}"
                ))
            })?;
        }
    }
    run(
        Command::new("cargo")
            .args(["+nightly", "miri", "setup"])
            .stdout(Stdio::null()),
        "cargo +nightly miri setup",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_runs_directly_as_root_through_sudo_otherwise_and_not_at_all_without_either() {
        let missing = ["rocminfo", "libdrm-dev"];
        let args = ["install", "-y", "rocminfo"];
        assert_eq!(
            apt_argv(Privilege::Root, &missing, &args).unwrap(),
            [
                "env",
                "DEBIAN_FRONTEND=noninteractive",
                "apt-get",
                "-qq",
                "install",
                "-y",
                "rocminfo"
            ]
        );
        let sudo = apt_argv(Privilege::Sudo, &missing, &args).unwrap();
        assert_eq!(sudo[..2], ["sudo", "env"]);
        assert_eq!(
            sudo[2..],
            apt_argv(Privilege::Root, &missing, &args).unwrap()[1..]
        );
        let error = apt_argv(Privilege::Neither, &missing, &args).unwrap_err();
        assert!(
            error.contains("rocminfo, libdrm-dev missing")
                && error.contains("not root and has no sudo")
                && error.contains("apt-get install rocminfo libdrm-dev"),
            "{error}"
        );
    }
}
