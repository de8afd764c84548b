//! A ROCr built from source for `cargo xtask conformance rocrtst --rocr-src DIR
//! --hsakmt-src DIR`: ROCm/ROCR-Runtime at tag `rocm-6.2.4` (commit `df7549038b45`), whose
//! ISA tables know every preset's GPU, where Debian's ROCr 5.2.3 makes no agent of gfx942
//! (mi300x) or gfx11 (rx7900xtx).
//!
//! Build (out of tree, no source file changed): cmake of the tree's `src/` into
//! `target/conformance/rocr/<tree>/build`, installed into `.../prefix` (shared
//! `libhsa-runtime64.so.1` and its CMake package, which rocrtst's `find_package(hsa-runtime64)`
//! takes). It is built against the libhsakmt of `--hsakmt-src` as
//! [`super::build::hsakmt`] builds it for kfdtest (the same directory,
//! `target/conformance/kfdtest/<tree>/prefix`): ROCr 6.2.4 calls 18 libhsakmt functions
//! Debian's libhsakmt 5.2.3 does not have (`hsaKmtGetRuntimeCapabilities`,
//! `hsaKmtAvailableMemory`, `hsaKmtWaitOnEvent_Ext`, the `hsaKmtDbg*` and
//! `hsaKmtPcSampling*` calls, ...: `nm -D` of the two). Options:
//! * `-DIMAGE_SUPPORT=OFF`: the image extension is not what rocrtst's tests use, and it would
//!   build AMD's addrlib and OpenCL image blit kernels on top (`src/CMakeLists.txt`).
//! * ROCr assembles its blit kernels (`core/runtime/blit_shaders`: gfx900, gfx940, gfx1010,
//!   gfx1030, gfx1100, gfx1200) and trap handlers (`core/runtime/trap_handler`: gfx900,
//!   gfx940, gfx941, gfx942, gfx1010, gfx1030, gfx1100, gfx1200) when it is built;
//!   `GpuAgent::AssembleShader` (`amd_gpu_agent.cpp`) picks per GPU from that table: gfx942
//!   runs gfx9's blit kernels and gfx940's trap handler, gfx1100 gfx11's. The tree's lists
//!   are fixed (no cache variable), and cover every preset. They are assembled with the
//!   `clang` and
//!   `llvm-objcopy` targets of `find_package(Clang)` and `find_package(LLVM)`. Debian's
//!   llvm-19-dev gives LLVM's package; Clang's (`/usr/lib/llvm-19/lib/cmake/clang`) imports
//!   every static clang library, which only libclang-19-dev ships, and refuses to load
//!   without them. The blit kernels need the `clang` executable alone, so the harness gives
//!   `find_package(Clang)` a package of its own ([`clang_config`]): an imported `clang`
//!   executable at `--llvm`'s `bin/clang` (default `/usr/lib/llvm-19`).
//! * `rocprofiler-register` (optional in the tree) is absent: ROCr then registers with no
//!   profiler.
//!
//! Debian packages it needs: cmake, g++, libelf-dev, libdrm-dev, libnuma-dev, xxd (the
//! header scripts), clang-19 and llvm-19-dev.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::failure::{self, Failure};

/// The LLVM whose clang assembles ROCr's blit kernels and compiles rocrtst's kernels when
/// the suite runs against a ROCr of its own (LLVM 15 does not know gfx942).
pub(super) const DEFAULT_LLVM: &str = "/usr/lib/llvm-19";

/// The `ClangConfig.cmake` the harness gives ROCr's `find_package(Clang)` (module docs):
/// `clang` as an imported executable, `{clang}` its path.
pub(super) fn clang_config(clang: &Path) -> String {
    format!(
        "# Written by `cargo xtask conformance rocrtst --rocr-src`: ROCr's blit kernels and trap\n\
         # handlers need only the clang executable, not the static libraries Debian's Clang\n\
         # package imports (those are libclang-19-dev's).\n\
         if(NOT TARGET clang)\n  add_executable(clang IMPORTED)\n  \
         set_target_properties(clang PROPERTIES IMPORTED_LOCATION \"{}\")\nendif()\n",
        clang.display()
    )
}

/// The ROCR-Runtime tree's `src/` directory, if `src` is such a tree (the repository root).
fn rocr_src_dir(src: &Path) -> Result<PathBuf, Failure> {
    let dir = src.join("src");
    if dir.join("CMakeLists.txt").is_file() && dir.join("core/runtime/blit_shaders").is_dir() {
        Ok(dir)
    } else {
        Err(Failure::new(format!(
            "--rocr-src {}: not a ROCR-Runtime tree (no src/CMakeLists.txt with \
             src/core/runtime/blit_shaders; give the rocm-6.2.4 tree's root)",
            src.display()
        )))
    }
}

/// The Debian packages missing for the build, by the file each provides.
fn missing_packages(llvm: &Path) -> Vec<&'static str> {
    [
        (llvm.join("bin/clang"), "clang-19"),
        (llvm.join("bin/llvm-objcopy"), "llvm-19"),
        (llvm.join("lib/cmake/llvm/LLVMConfig.cmake"), "llvm-19-dev"),
        (PathBuf::from("/usr/include/libelf.h"), "libelf-dev"),
        (
            PathBuf::from("/usr/include/libdrm/amdgpu_drm.h"),
            "libdrm-dev",
        ),
        (PathBuf::from("/usr/include/numa.h"), "libnuma-dev"),
        (PathBuf::from("/usr/bin/xxd"), "xxd"),
    ]
    .into_iter()
    .filter(|(file, _)| !file.exists())
    .map(|(_, package)| package)
    .collect()
}

/// Builds and installs the ROCr of `src` (the repository root) into `build` against the
/// libhsakmt installed in `hsakmt_prefix`; returns the install prefix. The caller holds
/// `build`'s lock.
pub(super) fn build(
    src: &Path,
    build: &Path,
    hsakmt_prefix: &Path,
    llvm: &Path,
) -> Result<PathBuf, Failure> {
    let src_dir = rocr_src_dir(src)?;
    let missing = missing_packages(llvm);
    if !missing.is_empty() {
        return Err(Failure::new(format!(
            "building ROCr needs Debian's {} (apt-get install {}), or --llvm pointing at an \
             LLVM with bin/clang, bin/llvm-objcopy and its CMake package (default {DEFAULT_LLVM})",
            missing.join(", "),
            missing.join(" ")
        )));
    }
    let shim = build.join("shim/clang");
    fs::create_dir_all(&shim).map_err(|e| Failure::new(format!("{}: {e}", shim.display())))?;
    super::build::write_unchanged(
        &shim.join("ClangConfig.cmake"),
        &clang_config(&llvm.join("bin/clang")),
    )?;
    let prefix = build.join("prefix");
    let dir = build.join("build");
    println!("conformance: building ROCr of {}", src.display());
    failure::run(
        Command::new("cmake")
            .arg("-S")
            .arg(&src_dir)
            .arg("-B")
            .arg(&dir)
            .args([
                "-DCMAKE_BUILD_TYPE=Release",
                "-DBUILD_SHARED_LIBS=ON",
                "-DIMAGE_SUPPORT=OFF",
            ])
            .arg(format!("-DCMAKE_INSTALL_PREFIX={}", prefix.display()))
            .arg(format!(
                "-Dhsakmt_DIR={}",
                hsakmt_prefix.join("lib/cmake/hsakmt").display()
            ))
            .arg(format!(
                "-DLLVM_DIR={}",
                llvm.join("lib/cmake/llvm").display()
            ))
            .arg(format!("-DClang_DIR={}", shim.display())),
        "cmake (ROCr)",
    )?;
    failure::run(
        Command::new("cmake")
            .arg("--build")
            .arg(&dir)
            .args(["-j", &super::build::jobs()]),
        "building ROCr",
    )?;
    failure::run(
        Command::new("cmake").arg("--install").arg(&dir),
        "installing ROCr",
    )?;
    Ok(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clangs_package_is_the_executable_alone() {
        let text = clang_config(Path::new("/usr/lib/llvm-19/bin/clang"));
        assert!(text.contains("add_executable(clang IMPORTED)"), "{text}");
        assert!(
            text.contains("IMPORTED_LOCATION \"/usr/lib/llvm-19/bin/clang\""),
            "{text}"
        );
        assert!(
            !text.contains("add_library"),
            "no static clang library is imported"
        );
    }

    #[test]
    fn the_tree_is_the_repository_root() {
        let tmp = std::env::temp_dir().join(format!("rocr-tree-{}", std::process::id()));
        fs::create_dir_all(tmp.join("src/core/runtime/blit_shaders")).unwrap();
        assert!(
            rocr_src_dir(&tmp).is_err(),
            "no CMakeLists.txt: not the tree"
        );
        fs::write(tmp.join("src/CMakeLists.txt"), "").unwrap();
        assert_eq!(rocr_src_dir(&tmp).unwrap(), tmp.join("src"));
        assert!(
            rocr_src_dir(&tmp.join("src")).is_err(),
            "src/ itself is not"
        );
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_missing_llvm_is_named_by_its_packages() {
        let missing = missing_packages(Path::new("/nonexistent-llvm"));
        for p in ["clang-19", "llvm-19", "llvm-19-dev"] {
            assert!(missing.contains(&p), "{missing:?}");
        }
    }
}
