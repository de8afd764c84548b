//! Generates the C probe from the Rust registry, compiles it against a header and runs it.
//!
//! The probe prints one `kind name... value...` line per item; every item is wrapped in
//! `#if KFD_IOCTL_MINOR_VERSION >= since` so one probe serves every header version.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kfd_ioctl::abi::IOCTLS;
use kfd_ioctl::abi::layout::{self, FieldKind, MacroKind};

use super::header::HeaderItems;

/// Escapes a string so it stays one whitespace-free token; the C probe applies the same rule.
pub fn escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            ' ' => out.push_str("\\s"),
            c => out.push(c),
        }
    }
    out
}

/// The argument ranges over which function-like macros are compared with the Rust functions.
pub fn macro_args(name: &str) -> Option<std::ops::RangeInclusive<u32>> {
    Some(match name {
        "KFD_SMI_EVENT_MASK_FROM_INDEX" | "KFD_EC_MASK" => 1..=64,
        "KFD_DBG_EC_IS_VALID"
        | "KFD_DBG_EC_TYPE_IS_QUEUE"
        | "KFD_DBG_EC_TYPE_IS_DEVICE"
        | "KFD_DBG_EC_TYPE_IS_PROCESS"
        | "KFD_DBG_EC_TYPE_IS_PACKET" => 0..=64,
        "AMDKFD_IO" | "AMDKFD_IOR" | "AMDKFD_IOW" | "AMDKFD_IOWR" => 0..=255,
        _ => return None,
    })
}

/// The C expression of a function-like macro applied to `x`.
fn macro_call(name: &str) -> String {
    match name {
        // The C macros need a type; the test computes the Rust side with the same ones.
        "AMDKFD_IOR" => "AMDKFD_IOR(x, struct kfd_ioctl_get_version_args)".into(),
        "AMDKFD_IOW" => "AMDKFD_IOW(x, struct kfd_ioctl_set_memory_policy_args)".into(),
        "AMDKFD_IOWR" => "AMDKFD_IOWR(x, struct kfd_ioctl_get_process_apertures_args)".into(),
        other => format!("{other}(x)"),
    }
}

fn since_guard(out: &mut String, since: u32, body: impl FnOnce(&mut String)) {
    writeln!(out, "#if KFD_IOCTL_MINOR_VERSION >= {since}").unwrap();
    body(out);
    writeln!(out, "#endif").unwrap();
}

/// Writes the probe's C source. `reverse` adds the members the header text defines, so their
/// offsets can be matched with the Rust side.
pub fn source(reverse: Option<&HeaderItems>) -> String {
    let mut c = String::new();
    c.push_str(
        "#include <stddef.h>\n#include <stdio.h>\n#include <linux/kfd_ioctl.h>\n\n\
         #define FIRST_(a, ...) a\n#define FIRST(...) FIRST_(__VA_ARGS__)\n\n\
         __attribute__((unused)) static void fmt(const char *name, const char *s)\n{\n\
         \tprintf(\"fmt %s \", name);\n\
         \tfor (; *s; s++) {\n\
         \t\tif (*s == '\\\\') printf(\"\\\\\\\\\");\n\
         \t\telse if (*s == '\\n') printf(\"\\\\n\");\n\
         \t\telse if (*s == ' ') printf(\"\\\\s\");\n\
         \t\telse putchar(*s);\n\t}\n\tputchar('\\n');\n}\n\n\
         int main(void)\n{\n\
         \tprintf(\"minor %llu\\n\", (unsigned long long)KFD_IOCTL_MINOR_VERSION);\n\
         \tprintf(\"major %llu\\n\", (unsigned long long)KFD_IOCTL_MAJOR_VERSION);\n\
         \tprintf(\"command_end %llu\\n\", (unsigned long long)AMDKFD_COMMAND_END);\n",
    );

    for s in layout::STRUCTS {
        since_guard(&mut c, s.since_minor, |c| {
            writeln!(
                c,
                "\tprintf(\"size {0} %zu\\n\", sizeof(struct {0}));",
                s.name
            )
            .unwrap();
            for f in s.flat_fields() {
                match f.kind {
                    FieldKind::Named => since_guard(c, f.since_minor, |c| {
                        writeln!(
                            c,
                            "\tprintf(\"field {0} {1} %zu %zu\\n\", offsetof(struct {0}, {1}), \
                             sizeof(((struct {0} *)0)->{1}));",
                            s.name, f.path
                        )
                        .unwrap();
                    }),
                    FieldKind::Flexible => since_guard(c, f.since_minor, |c| {
                        writeln!(
                            c,
                            "\tprintf(\"field {0} {1} %zu 0\\n\", offsetof(struct {0}, {1}));",
                            s.name, f.path
                        )
                        .unwrap();
                    }),
                    // Rust-only storage: checked from the C members around it.
                    FieldKind::Padding | FieldKind::Union => {}
                }
            }
        });
    }

    for k in layout::CONSTANTS {
        since_guard(&mut c, k.since_minor, |c| {
            writeln!(
                c,
                "\tprintf(\"const {0} %d %llu\\n\", (int)(({0}) < 0), (unsigned long long)({0}));",
                k.name
            )
            .unwrap();
        });
    }

    for i in IOCTLS {
        since_guard(&mut c, i.since_minor, |c| {
            writeln!(
                c,
                "\tprintf(\"ioctl {0} %llu\\n\", (unsigned long long)AMDKFD_IOC_{0});",
                i.name
            )
            .unwrap();
        });
    }

    for m in layout::MACROS {
        since_guard(&mut c, m.since_minor, |c| match m.kind {
            MacroKind::Function { .. } => {
                let Some(range) = macro_args(m.name) else {
                    // The test reports the missing range; keep the probe compiling.
                    return;
                };
                writeln!(
                    c,
                    "\tfor (int x = {}; x <= {}; x++)\n\t\tprintf(\"fn {} %d %llu\\n\", x, \
                     (unsigned long long)({}));",
                    range.start(),
                    range.end(),
                    m.name,
                    macro_call(m.name)
                )
                .unwrap();
            }
            MacroKind::Format { value } => {
                let arity = value.matches('%').count();
                let args = vec!["0"; arity].join(", ");
                writeln!(c, "\tfmt(\"{0}\", FIRST({0}({1})));", m.name, args).unwrap();
            }
        });
    }

    if let Some(items) = reverse {
        for (name, fields) in &items.structs {
            for f in fields {
                if f.flexible {
                    writeln!(
                        c,
                        "\tprintf(\"cfield {0} {1} %zu 0\\n\", offsetof(struct {0}, {1}));",
                        name, f.name
                    )
                    .unwrap();
                } else {
                    writeln!(
                        c,
                        "\tprintf(\"cfield {0} {1} %zu %zu\\n\", offsetof(struct {0}, {1}), \
                         sizeof(((struct {0} *)0)->{1}));",
                        name, f.name
                    )
                    .unwrap();
                }
            }
        }
    }

    c.push_str("\treturn 0;\n}\n");
    c
}

/// Compiles `source` with `cc -Wall -Werror` against `include_dirs` and returns what the
/// probe prints.
pub fn compile_and_run(
    cc: &str,
    work: &Path,
    include_dirs: &[PathBuf],
    source: &str,
) -> Result<String, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let src = work.join("probe.c");
    let exe = work.join("probe");
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    let mut cmd = Command::new(cc);
    cmd.args(["-std=gnu11", "-Wall", "-Werror", "-o"]).arg(&exe);
    for dir in include_dirs {
        cmd.arg("-I").arg(dir);
    }
    cmd.arg(&src);
    let out = cmd.output().map_err(|e| format!("running {cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cc} failed on {} ({}):\n{}",
            src.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !run.status.success() {
        return Err(format!("{} exited with {}", exe.display(), run.status));
    }
    String::from_utf8(run.stdout).map_err(|e| format!("probe output is not UTF-8: {e}"))
}
