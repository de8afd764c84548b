//! The crate's code keeps the own-thread rule (`kfd_emu::own`, ARCHITECTURE.md's invariant):
//! code that runs on the emulator's threads prints only with `own::elog!` (never std's print
//! macros, which take stderr's lock or libtest's capture), reads no environment variable,
//! lists no directory with `opendir` (glibc's allocator), and every thread it starts marks
//! itself as an own thread first.
//!
//! Checked on the source of `kfd-emu/src` (not `src/bin`, which is the CLI's main thread,
//! nor `own.rs`, nor `#[cfg(test)]` code at the end of a file).

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("kfd-emu/src") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "own.rs")
        {
            out.push(path);
        }
    }
}

/// The lines of `path` before its test code, without comment lines, numbered from 1.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("a source file");
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, line.to_owned()))
        .collect()
}

/// Whether `token` occurs in `line` not as the tail of a longer name (`println!` is not in
/// `eprintln!`).
fn contains_word(line: &str, token: &str) -> bool {
    line.match_indices(token).any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn emulator_threads_keep_the_own_thread_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 20, "found the sources: {files:?}");
    let forbidden = [
        ("eprintln!", "print with crate::own::elog!"),
        ("println!", "print with crate::own::elog!"),
        ("eprint!", "print with crate::own::elog!"),
        ("print!(", "print with crate::own::elog!"),
        ("dbg!(", "print with crate::own::elog!"),
        ("env::var", "no environment on emulator threads"),
        (
            "read_dir(",
            "list with rustix::fs::Dir (opendir allocates from glibc)",
        ),
    ];
    let mut broken = Vec::new();
    for file in &files {
        let lines = code_lines(file);
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (i, (number, line)) in lines.iter().enumerate() {
            for (token, why) in forbidden {
                if contains_word(line, token) {
                    broken.push(format!("{shown}:{number}: `{token}`: {why}"));
                }
            }
            if line.contains("thread::Builder::new()") || line.contains("thread::spawn(") {
                let next: String = lines[i..(i + 6).min(lines.len())]
                    .iter()
                    .map(|(_, l)| l.as_str())
                    .collect();
                // `spawn_scoped`: the attached thread of `run_attached`, the served one.
                if !next.contains("own::mark()") && !next.contains("spawn_scoped") {
                    broken.push(format!(
                        "{shown}:{number}: a thread that does not call crate::own::mark() \
                         first (or use crate::own::spawn_later)"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
