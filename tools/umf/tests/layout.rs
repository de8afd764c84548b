//! The layout proof: the Rust mirror of UMF 1.2's `umf_memory_provider_ops_t` and of the
//! constants the provider speaks agrees with the headers of the `umf` 1.2.0 wheel and with
//! `include/kfd_umf.h`.
//!
//! A C probe generated from `kfd_umf::abi` prints `sizeof`, `offsetof` and member sizes of
//! every mirrored member, every constant and the size of every mirrored type; each is compared
//! with the Rust side. The reverse direction is checked too: every member of the C struct and
//! every enumerator of the mirrored enums found in the header text has a Rust mirror, and
//! every function `kfd_umf.h` declares is exported by `libkfd_umf.so`.
//!
//! Without the wheel (`scripts/fetch-umf.sh`) or a C compiler the test prints why and passes,
//! unless `CI=true`, where it fails.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::path::Path;
use std::process::Command;

use kfd_provider::{NativeCode, UmfResult};
use kfd_umf::abi;
use support::*;

const OPS: &str = "umf_memory_provider_ops_t";

/// Writes the probe's C source.
fn probe_source() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <umf/base.h>\n\
         #include <umf/memory_provider_ops.h>\n#include <umf/memory_provider_gpu.h>\n\
         #include <kfd_umf.h>\nint main(void) {\n",
    );
    for (ty, _) in abi::type_sizes() {
        c += &format!("    printf(\"size {ty} %zu\\n\", sizeof({ty}));\n");
    }
    for f in abi::ops_layout() {
        let name = f.name;
        c += &format!(
            "    printf(\"field {name} %zu %zu\\n\", offsetof({OPS}, {name}), \
             sizeof((({OPS} *)0)->{name}));\n"
        );
    }
    for (name, _) in abi::constants() {
        c += &format!("    printf(\"const {name} %lld\\n\", (long long)({name}));\n");
    }
    c += "    return 0;\n}\n";
    c
}

/// Compiles and runs the probe; its output as `kind -> name -> values`.
fn run_probe(umf: &Path, cc: &str) -> BTreeMap<String, BTreeMap<String, Vec<i64>>> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("umf-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&source, probe_source()).unwrap();
    let built = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(format!("-I{}", umf.join("include").display()))
        .arg(format!("-I{}", package().join("include").display()))
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running the C compiler");
    assert!(
        built.status.success(),
        "compiling the probe:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe).output().expect("running the probe");
    assert!(ran.status.success(), "the probe failed");
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i64>>> = BTreeMap::new();
    for line in String::from_utf8(ran.stdout).unwrap().lines() {
        let mut words = line.split(' ');
        let kind = words.next().unwrap().to_owned();
        let name = words.next().unwrap().to_owned();
        let values = words.map(|w| w.parse().expect("a number")).collect();
        out.entry(kind).or_default().insert(name, values);
    }
    out
}

/// The header's text without comments.
fn header_text(path: &Path) -> String {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("/*") {
        out += &rest[..i];
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    out += rest;
    out.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The member names of `struct <name> { … } <name>;` in `text`.
fn struct_members(text: &str, name: &str) -> Vec<String> {
    let start = text
        .find(&format!("typedef struct {name} {{"))
        .unwrap_or_else(|| panic!("no struct {name}"));
    let body = &text[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find(&format!("}} {name};")).unwrap()];
    body.split(';')
        .map(str::trim)
        .filter(|decl| !decl.is_empty())
        .map(|decl| match decl.find("(*") {
            Some(i) => decl[i + 2..decl[i..].find(')').unwrap() + i]
                .trim()
                .to_owned(),
            None => decl.rsplit(' ').next().unwrap().to_owned(),
        })
        .collect()
}

/// The enumerators in `text` whose names start with `prefix`: a line that starts with such a
/// name followed by `=`, `,` or nothing.
fn enumerators(text: &str, prefix: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let end = line
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(line.len());
            let (name, rest) = line.split_at(end);
            let rest = rest.trim_start();
            (name.starts_with(prefix)
                && (rest.is_empty() || rest.starts_with('=') || rest.starts_with(',')))
            .then(|| name.to_owned())
        })
        .collect()
}

/// The functions `kfd_umf.h` declares.
fn header_functions(text: &str) -> BTreeSet<String> {
    text.split('(')
        .filter_map(|before| {
            let before = before.trim_end();
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[start..];
            name.starts_with("kfd").then(|| name.to_owned())
        })
        .collect()
}

/// Whether `libkfd_umf.so` exports `symbol`.
fn exported(lib: &Path, symbol: &str) -> bool {
    let path = CString::new(lib.to_str().unwrap()).unwrap();
    let symbol = CString::new(symbol).unwrap();
    // SAFETY: loads our own library (its initialisers are Rust's, which do nothing unsafe at
    // load) and only looks a symbol up; the handle stays open for the test's life.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!handle.is_null(), "dlopen {}", lib.display());
        !libc::dlsym(handle, symbol.as_ptr()).is_null()
    }
}

#[test]
fn the_rust_mirror_matches_umf_1_2_and_kfd_umf_h() {
    let Some((umf, cc)) = umf_and_cc("layout") else {
        return;
    };
    let out = run_probe(&umf, &cc);
    let mut mismatches = Vec::new();

    for (ty, size) in abi::type_sizes() {
        let c = out["size"].get(ty).map(|v| v[0]);
        if c != Some(size as i64) {
            mismatches.push(format!("sizeof({ty}): C {c:?}, Rust {size}"));
        }
    }
    let fields = abi::ops_layout();
    for f in &fields {
        let c = out["field"].get(f.name).cloned().unwrap_or_default();
        if c != [f.offset as i64, f.size as i64] {
            mismatches.push(format!(
                "{OPS}.{}: C offset/size {c:?}, Rust {}/{}",
                f.name, f.offset, f.size
            ));
        }
    }
    let constants = abi::constants();
    for (name, value) in &constants {
        let c = out["const"].get(*name).map(|v| v[0]);
        if c != Some(*value) {
            mismatches.push(format!("{name}: C {c:?}, Rust {value}"));
        }
    }
    // The provider's own result and native codes are the C values too.
    let c_const = |name: &str| out["const"][name][0];
    for (rust, name) in [
        (UmfResult::Success, "UMF_RESULT_SUCCESS"),
        (
            UmfResult::OutOfHostMemory,
            "UMF_RESULT_ERROR_OUT_OF_HOST_MEMORY",
        ),
        (
            UmfResult::MemoryProviderSpecific,
            "UMF_RESULT_ERROR_MEMORY_PROVIDER_SPECIFIC",
        ),
        (
            UmfResult::InvalidArgument,
            "UMF_RESULT_ERROR_INVALID_ARGUMENT",
        ),
        (
            UmfResult::InvalidAlignment,
            "UMF_RESULT_ERROR_INVALID_ALIGNMENT",
        ),
        (UmfResult::NotSupported, "UMF_RESULT_ERROR_NOT_SUPPORTED"),
    ] {
        assert_eq!(rust as i64, c_const(name), "{rust:?}");
    }
    for (rust, name) in [
        (NativeCode::AllocFailed, "KFD_UMF_RESULT_ALLOC_FAILED"),
        (NativeCode::FreeFailed, "KFD_UMF_RESULT_FREE_FAILED"),
        (
            NativeCode::PurgeLazyFailed,
            "KFD_UMF_RESULT_PURGE_LAZY_FAILED",
        ),
        (
            NativeCode::PurgeForceFailed,
            "KFD_UMF_RESULT_PURGE_FORCE_FAILED",
        ),
        (NativeCode::IpcGetFailed, "KFD_UMF_RESULT_IPC_GET_FAILED"),
        (NativeCode::IpcOpenFailed, "KFD_UMF_RESULT_IPC_OPEN_FAILED"),
        (
            NativeCode::IpcCloseFailed,
            "KFD_UMF_RESULT_IPC_CLOSE_FAILED",
        ),
        (NativeCode::InitFailed, "KFD_UMF_RESULT_INIT_FAILED"),
        (NativeCode::WrongProcess, "KFD_UMF_RESULT_WRONG_PROCESS"),
    ] {
        assert_eq!(rust as i64, c_const(name), "{rust:?}");
    }

    // The reverse direction: nothing in the headers lacks a mirror.
    let include = umf.join("include/umf");
    let ops_header = header_text(&include.join("memory_provider_ops.h"));
    let base = header_text(&include.join("base.h"));
    let gpu = header_text(&include.join("memory_provider_gpu.h"));
    let ours = header_text(&package().join("include/kfd_umf.h"));
    let members = struct_members(&ops_header, OPS);
    let mirrored: Vec<&str> = fields.iter().map(|f| f.name).collect();
    assert_eq!(members, mirrored, "the members of {OPS}, in order");
    let names: BTreeSet<&str> = constants.iter().map(|(n, _)| *n).collect();
    let mut in_headers = BTreeSet::new();
    for (text, prefix) in [
        (&base, "UMF_RESULT_"),
        (&base, "CTL_"),
        (&base, "UMF_MEMORY_PROPERTY_"),
        (&gpu, "UMF_MEMORY_TYPE_"),
        (&ours, "KFD_UMF_"),
    ] {
        in_headers.extend(enumerators(text, prefix));
    }
    for name in &in_headers {
        if !names.contains(name.as_str()) {
            mismatches.push(format!("{name} has no Rust mirror"));
        }
    }
    let functions = header_functions(&ours);
    let lib = kfd_umf_lib_dir().join("libkfd_umf.so");
    for f in &functions {
        if !exported(&lib, f) {
            mismatches.push(format!("{f} is declared in kfd_umf.h but not exported"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
    assert_eq!(members.len(), 22);
    assert_eq!(functions.len(), 6, "{functions:?}");
    println!(
        "layout proof: sizeof {} types, {} members of {OPS} (offset and size), {} constants; \
         reverse: {} members and {} enumerators mirrored, {} kfd_umf.h functions exported",
        abi::type_sizes().len(),
        fields.len(),
        constants.len(),
        members.len(),
        in_headers.len(),
        functions.len()
    );
}
