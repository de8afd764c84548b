//! Every package builds from its own directory: no file under a package's `src/` names a file
//! outside the package (`include_str!`, `include_bytes!`, `include!`, `#[path]`), which
//! `cargo package` would leave out of the crate (its verification build then fails).

mod workspace_support;

use std::path::{Component, Path, PathBuf};

/// The string literals that follow `marker` in `src` (the first argument of an include macro,
/// the value of a `#[path]`); a marker followed by anything else (`concat!`, `env!`) is
/// passed over.
fn literals_after<'a>(src: &'a str, marker: &str) -> Vec<&'a str> {
    src.match_indices(marker)
        .filter_map(|(at, _)| {
            let rest = src[at + marker.len()..].trim_start();
            let body = rest.strip_prefix('"')?;
            body.find('"').map(|end| &body[..end])
        })
        .collect()
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `named`, written in a file in directory `dir` of `package`, leaves the package on
/// the way: an absolute path, or a `..` above the package root (even one that comes back in
/// through the package's own name, which the packaged crate's directory does not have).
fn leaves(package: &Path, dir: &Path, named: &str) -> bool {
    let Ok(below) = dir.strip_prefix(package) else {
        return true;
    };
    let mut depth = below.components().count();
    for part in Path::new(named).components() {
        match part {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// The files `file` names outside `package`, as `file: path`.
fn outside(package: &Path, file: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(file).expect("a source file");
    let dir = file.parent().expect("a parent directory");
    ["include_str!(", "include_bytes!(", "include!(", "#[path ="]
        .iter()
        .flat_map(|marker| literals_after(&src, marker))
        .filter(|named| leaves(package, dir, named))
        .map(|named| format!("{}: {named}", file.display()))
        .collect()
}

#[test]
fn no_package_source_names_a_file_outside_its_package() {
    let mut escapes = Vec::new();
    let mut files = 0;
    for package in workspace_support::members(&workspace_support::root()) {
        let mut sources = Vec::new();
        rust_files(&package.join("src"), &mut sources);
        files += sources.len();
        for file in sources {
            escapes.extend(outside(&package, &file));
        }
    }
    assert!(files > 50, "read only {files} source files");
    assert!(
        escapes.is_empty(),
        "files outside their package (cargo package leaves them out):\n  {}",
        escapes.join("\n  ")
    );
}

#[test]
fn includes_that_leave_the_package_are_found() {
    let dir = std::env::temp_dir().join(format!("packaging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let package = dir.join("pkg");
    std::fs::create_dir_all(package.join("src")).expect("mkdir");
    std::fs::write(dir.join("outside.txt"), "x").expect("write");
    std::fs::write(package.join("inside.txt"), "x").expect("write");
    let lib = package.join("src/lib.rs");
    std::fs::write(
        &lib,
        "const A: &str = include_str!(\n    \"../../outside.txt\"\n);\n\
         const B: &str = include_str!(\"../inside.txt\");\n\
         const D: &str = include_str!(\"../../pkg/inside.txt\");\n\
         const C: &str = include_str!(concat!(env!(\"OUT_DIR\"), \"/x\"));\n",
    )
    .expect("write");
    let found = outside(&package, &lib);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].ends_with(": ../../outside.txt"), "{found:?}");
    assert!(found[1].ends_with(": ../../pkg/inside.txt"), "{found:?}");
}
