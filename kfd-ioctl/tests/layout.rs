//! The layout proof: the Rust mirror of `linux/kfd_ioctl.h` agrees with the real C header.
//!
//! A C probe generated from `kfd_ioctl::abi::layout` (structs, fields, constants,
//! function-like macros and event formats) and from the ioctl table is compiled against a
//! header and run; every `sizeof`, `offsetof`, member size, constant, opcode and macro value
//! it prints is compared with the Rust side. Each item is guarded by the KFD minor it appeared
//! in, so the same probe serves the 1.11 system header and the 1.23 reference header.
//!
//! Against 1.23 the proof must be complete in both directions: every Rust item was compared,
//! and every struct, member, `#define` and enumerator found in the header text has a Rust
//! mirror. Against older headers the reverse direction checks the `since` claims instead: an
//! item the header has must not be claimed to be newer than the header.
//!
//! When a header or the C compiler is missing the tests print why and pass, unless `CI=true`,
//! where they fail.

#[path = "layout/header.rs"]
mod header;
#[path = "layout/probe.rs"]
mod probe;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kfd_ioctl::abi::layout::{self, FieldKind, MacroKind};
use kfd_ioctl::abi::{self, IOCTLS, KFD_IOCTL_MINOR_VERSION};

/// Items an older header has although the Rust side dates them later, with the reason.
const KNOWN_BACKPORTS: &[(&str, &str)] = &[(
    "KFD_MIN_QUEUE_RING_SIZE",
    "backported into the 1.11 header of Linux 6.1.y stable; mainline has it from 1.18",
)];

/// Constants whose value, not presence, depends on the minor; both are compared with the
/// header's own minor above, so the reverse check does not date them.
const VERSIONED_VALUES: &[&str] = &["KFD_IOCTL_MINOR_VERSION", "AMDKFD_COMMAND_END"];

/// What one run compared.
#[derive(Debug, Default)]
struct Report {
    minor: u32,
    structs: usize,
    fields: usize,
    constants: usize,
    ioctls: usize,
    macro_values: usize,
    macros: usize,
    formats: usize,
    derived: usize,
    reverse: usize,
    renamed: Vec<String>,
    backports: Vec<String>,
    skipped: Vec<String>,
    mismatches: Vec<String>,
}

/// A prerequisite of the proof is missing: a failure under `CI=true`, else a recorded skip.
fn skip_or_fail(label: &str, reason: &str) {
    kfd_skip::prerequisite(format!("{label}: cannot run the layout proof: {reason}"));
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

fn cc_available(cc: &str) -> bool {
    std::process::Command::new(cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn work_dir(label: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("layout-proof")
        .join(label)
}

/// Parses the probe's output into `kind -> (key -> values)`.
fn parse_output(out: &str) -> HashMap<String, BTreeMap<String, Vec<String>>> {
    let mut map: HashMap<String, BTreeMap<String, Vec<String>>> = HashMap::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let (kind, key_len) = match words[0] {
            "minor" | "major" | "command_end" => (words[0], 0),
            "size" | "const" | "ioctl" | "fmt" => (words[0], 1),
            "field" | "cfield" | "fn" => (words[0], 2),
            other => panic!("unexpected probe line {other:?}: {line}"),
        };
        let key = words[1..=key_len].join(" ");
        let values = words[key_len + 1..].iter().map(|s| s.to_string()).collect();
        map.entry(kind.to_string()).or_default().insert(key, values);
    }
    map
}

fn num(v: &str) -> u64 {
    v.parse()
        .unwrap_or_else(|e| panic!("probe printed {v:?}: {e}"))
}

/// The value of a C constant as a mathematical integer, from the probe's sign flag and bits.
fn c_value(values: &[String]) -> i128 {
    let bits = num(&values[1]);
    if values[0] == "1" {
        bits as i64 as i128
    } else {
        bits as i128
    }
}

/// Whether a C value and a Rust constant denote the same bits in the Rust type's width.
/// C spells some u32 flags `1 << 31`, an `int`, so a negative C value matches the unsigned
/// Rust value with the same bits.
fn same_value(c: i128, rust: &layout::ConstLayout) -> bool {
    if c == rust.value {
        return true;
    }
    let width = 1i128 << rust.bits;
    !rust.signed && c < 0 && c >= -(width / 2) && c + width == rust.value
}

fn rust_macro_value(name: &str, x: u32) -> Option<u64> {
    use kfd_ioctl::abi::*;
    let nr = x as u8;
    Some(match name {
        "KFD_SMI_EVENT_MASK_FROM_INDEX" => kfd_smi_event_mask_from_index(x),
        "KFD_EC_MASK" => kfd_ec_mask(x),
        "KFD_DBG_EC_IS_VALID" => kfd_dbg_ec_is_valid(x) as u64,
        "KFD_DBG_EC_TYPE_IS_QUEUE" => kfd_dbg_ec_type_is_queue(x) as u64,
        "KFD_DBG_EC_TYPE_IS_DEVICE" => kfd_dbg_ec_type_is_device(x) as u64,
        "KFD_DBG_EC_TYPE_IS_PROCESS" => kfd_dbg_ec_type_is_process(x) as u64,
        "KFD_DBG_EC_TYPE_IS_PACKET" => kfd_dbg_ec_type_is_packet(x) as u64,
        "AMDKFD_IO" => amdkfd_io(nr) as u64,
        "AMDKFD_IOR" => amdkfd_ior::<kfd_ioctl_get_version_args>(nr) as u64,
        "AMDKFD_IOW" => amdkfd_iow::<kfd_ioctl_set_memory_policy_args>(nr) as u64,
        "AMDKFD_IOWR" => amdkfd_iowr::<kfd_ioctl_get_process_apertures_args>(nr) as u64,
        _ => return None,
    })
}

/// Compares the probe's output with the Rust side.
fn compare(
    out: &HashMap<String, BTreeMap<String, Vec<String>>>,
    reverse: Option<&header::HeaderItems>,
    strict: bool,
) -> Report {
    let empty = BTreeMap::new();
    let get = |kind: &str| out.get(kind).unwrap_or(&empty);
    let mut r = Report {
        minor: num(&get("minor")[""][0]) as u32,
        ..Report::default()
    };
    let minor = r.minor;

    let major = num(&get("major")[""][0]);
    if major != u64::from(abi::KFD_IOCTL_MAJOR_VERSION) {
        r.mismatches.push(format!(
            "KFD_IOCTL_MAJOR_VERSION: C {major}, Rust {}",
            abi::KFD_IOCTL_MAJOR_VERSION
        ));
    }
    let end = num(&get("command_end")[""][0]);
    if end != u64::from(abi::command_end(minor)) {
        r.mismatches.push(format!(
            "AMDKFD_COMMAND_END at 1.{minor}: C {end:#x}, command_end() {:#x}",
            abi::command_end(minor)
        ));
    }

    // Structs and their fields.
    for s in layout::STRUCTS {
        if s.since_minor > minor {
            r.skipped
                .push(format!("struct {} (since 1.{})", s.name, s.since_minor));
            continue;
        }
        let Some(size) = get("size").get(s.name) else {
            r.mismatches
                .push(format!("struct {}: not printed by the probe", s.name));
            continue;
        };
        let expected = s.size_at(minor);
        if Some(num(&size[0]) as usize) != expected {
            r.mismatches.push(format!(
                "sizeof(struct {}) at 1.{minor}: C {}, Rust {expected:?}",
                s.name, size[0]
            ));
        }
        r.structs += 1;

        let flat = s.flat_fields();
        for f in &flat {
            match f.kind {
                FieldKind::Named | FieldKind::Flexible => {}
                FieldKind::Padding | FieldKind::Union => continue,
            }
            if f.since_minor > minor {
                r.skipped.push(format!(
                    "field {}.{} (since 1.{})",
                    s.name, f.path, f.since_minor
                ));
                continue;
            }
            let key = format!("{} {}", s.name, f.path);
            let Some(v) = get("field").get(&key) else {
                r.mismatches.push(format!(
                    "field {}.{}: not printed by the probe",
                    s.name, f.path
                ));
                continue;
            };
            let (off, sz) = (num(&v[0]) as usize, num(&v[1]) as usize);
            if (off, sz) != (f.offset, f.size) {
                r.mismatches.push(format!(
                    "{}.{}: C offset {off} size {sz}, Rust offset {} size {}",
                    s.name, f.path, f.offset, f.size
                ));
            }
            r.fields += 1;
        }

        // Rust-only storage, checked from the C members around it: implicit padding must not
        // overlap any C member and must lie inside C's sizeof; union storage must be exactly
        // as large as C's largest member of that union.
        if s.size_at(minor) != Some(s.size) {
            continue;
        }
        for f in s
            .fields
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Padding | FieldKind::Union))
        {
            let members: Vec<_> = flat
                .iter()
                .filter(|m| {
                    m.kind == FieldKind::Named && !m.path.contains('.') && m.since_minor <= minor
                })
                .filter_map(|m| {
                    get("field")
                        .get(&format!("{} {}", s.name, m.path))
                        .map(|v| (num(&v[0]) as usize, num(&v[1]) as usize))
                })
                .collect();
            let ok = match f.kind {
                FieldKind::Padding => {
                    members
                        .iter()
                        .all(|&(o, z)| o + z <= f.offset || o >= f.offset + f.size)
                        && f.offset + f.size <= s.size
                }
                _ => {
                    let inside: Vec<_> = members.iter().filter(|(o, _)| *o == f.offset).collect();
                    inside.iter().map(|(_, z)| *z).max() == Some(f.size)
                        && members.iter().all(|&(o, z)| {
                            o == f.offset || o + z <= f.offset || o >= f.offset + f.size
                        })
                }
            };
            if !ok {
                r.mismatches.push(format!(
                    "{}.{} ({:?}) does not fit the C layout: {members:?}",
                    s.name, f.name, f.kind
                ));
            }
            r.derived += 1;
        }
    }

    // Constants.
    for k in layout::CONSTANTS {
        if k.since_minor > minor {
            r.skipped
                .push(format!("const {} (since 1.{})", k.name, k.since_minor));
            continue;
        }
        match get("const").get(k.name) {
            None => r
                .mismatches
                .push(format!("const {}: not printed by the probe", k.name)),
            Some(v) => {
                let c = c_value(v);
                if !same_value(c, k) {
                    r.mismatches.push(format!(
                        "{}: C {c} ({c:#x}), Rust {} ({:#x})",
                        k.name, k.value, k.value
                    ));
                }
                r.constants += 1;
            }
        }
    }

    // Opcodes, with the argument size the header's minor had.
    for i in IOCTLS {
        if i.since_minor > minor {
            r.skipped
                .push(format!("AMDKFD_IOC_{} (since 1.{})", i.name, i.since_minor));
            continue;
        }
        let size = match i.arg {
            None => Some(0),
            Some(arg) => layout::struct_layout(arg).and_then(|s| s.size_at(minor)),
        };
        let dir = match i.dir {
            0 => rustix::ioctl::Direction::None,
            1 => rustix::ioctl::Direction::Write,
            2 => rustix::ioctl::Direction::Read,
            _ => rustix::ioctl::Direction::ReadWrite,
        };
        let expected = size.map(|size| {
            rustix::ioctl::opcode::from_components(dir, abi::AMDKFD_IOCTL_BASE, i.nr, size) as u64
        });
        match get("ioctl").get(i.name) {
            None => r
                .mismatches
                .push(format!("AMDKFD_IOC_{}: not printed by the probe", i.name)),
            Some(v) => {
                let c = num(&v[0]);
                if Some(c) != expected {
                    r.mismatches.push(format!(
                        "AMDKFD_IOC_{} at 1.{minor}: C {c:#x}, Rust {expected:x?}",
                        i.name
                    ));
                }
                if minor == KFD_IOCTL_MINOR_VERSION && c != i.opcode as u64 {
                    r.mismatches.push(format!(
                        "AMDKFD_IOC_{}: C {c:#x}, IOCTLS opcode {:#x}",
                        i.name, i.opcode
                    ));
                }
                r.ioctls += 1;
            }
        }
    }

    // Function-like macros and event formats.
    for m in layout::MACROS {
        if m.since_minor > minor {
            r.skipped
                .push(format!("macro {} (since 1.{})", m.name, m.since_minor));
            continue;
        }
        match m.kind {
            MacroKind::Function { rust_name } => {
                let Some(range) = probe::macro_args(m.name) else {
                    r.mismatches
                        .push(format!("{}: the test has no argument range for it", m.name));
                    continue;
                };
                let mut compared = 0;
                for x in range {
                    let c = get("fn")
                        .get(&format!("{} {x}", m.name))
                        .map(|v| num(&v[0]));
                    let rust = rust_macro_value(m.name, x);
                    if rust.is_none() {
                        r.mismatches
                            .push(format!("{}: the test does not call {rust_name}", m.name));
                        break;
                    }
                    if c != rust {
                        r.mismatches
                            .push(format!("{}({x}): C {c:x?}, {rust_name} {rust:x?}", m.name));
                    }
                    compared += 1;
                    r.macro_values += 1;
                }
                if compared > 0 {
                    r.macros += 1;
                }
            }
            MacroKind::Format { value } => match get("fmt").get(m.name) {
                None => r
                    .mismatches
                    .push(format!("{}: not printed by the probe", m.name)),
                Some(v) => {
                    if v[0] != probe::escape(value) {
                        r.mismatches.push(format!(
                            "{}: C {:?}, Rust {:?}",
                            m.name,
                            v[0],
                            probe::escape(value)
                        ));
                    }
                    r.formats += 1;
                }
            },
        }
    }

    if let Some(items) = reverse {
        reverse_check(items, get("cfield"), strict, &mut r);
    }
    r
}

/// Checks that every item the header text defines has a Rust mirror that is not dated after
/// the header, and that every C member matches a Rust field.
fn reverse_check(
    items: &header::HeaderItems,
    cfields: &BTreeMap<String, Vec<String>>,
    strict: bool,
    r: &mut Report,
) {
    let minor = r.minor;
    let backport = |name: &str, r: &mut Report| -> bool {
        match KNOWN_BACKPORTS.iter().find(|(n, _)| *n == name) {
            Some((_, why)) if !strict => {
                r.backports.push(format!("{name}: {why}"));
                true
            }
            _ => false,
        }
    };
    let check = |what: &str, name: &str, since: Option<u32>, r: &mut Report| {
        match since {
            None => r.mismatches.push(format!(
                "the header defines {what} {name}, which the Rust side lacks"
            )),
            Some(since)
                if since > minor && !VERSIONED_VALUES.contains(&name) && !backport(name, r) =>
            {
                r.mismatches.push(format!(
                    "the 1.{minor} header has {what} {name}, which the Rust side dates 1.{since}"
                ))
            }
            Some(_) => {}
        }
        r.reverse += 1;
    };

    for define in &items.defines {
        let since = if let Some(short) = define.strip_prefix("AMDKFD_IOC_") {
            IOCTLS
                .iter()
                .find(|i| i.name == short)
                .map(|i| i.since_minor)
        } else {
            layout::constant(define).map(|c| c.since_minor)
        };
        check("#define", define, since, r);
    }
    for name in &items.enumerators {
        check(
            "enumerator",
            name,
            layout::constant(name).map(|c| c.since_minor),
            r,
        );
    }
    for name in &items.function_macros {
        let since = layout::MACROS
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.since_minor);
        check("function-like macro", name, since, r);
    }
    for (name, fields) in &items.structs {
        let Some(s) = layout::struct_layout(name) else {
            check("struct", name, None, r);
            continue;
        };
        check("struct", name, Some(s.since_minor), r);
        for f in fields {
            let key = format!("{name} {}", f.name);
            let Some(v) = cfields.get(&key) else {
                r.mismatches
                    .push(format!("{name}.{}: not printed by the probe", f.name));
                continue;
            };
            let (off, sz) = (num(&v[0]) as usize, num(&v[1]) as usize);
            let same_name = s.fields.iter().find(|rf| {
                rf.name == f.name && matches!(rf.kind, FieldKind::Named | FieldKind::Flexible)
            });
            match same_name {
                Some(rf) if (rf.offset, rf.size) == (off, sz) => {
                    if rf.since_minor > minor && !backport(&format!("{name}.{}", f.name), r) {
                        r.mismatches.push(format!(
                            "the 1.{minor} header has {name}.{}, which the Rust side dates 1.{}",
                            f.name, rf.since_minor
                        ));
                    }
                }
                Some(rf) => r.mismatches.push(format!(
                    "{name}.{}: C offset {off} size {sz}, Rust offset {} size {}",
                    f.name, rf.offset, rf.size
                )),
                None => {
                    // An older header may name a member that a later one renamed (`pad` became
                    // `misc_process_flag` in 1.18): the Rust field at that place must be newer.
                    let later = s.fields.iter().find(|rf| {
                        rf.kind == FieldKind::Named
                            && (rf.offset, rf.size) == (off, sz)
                            && rf.since_minor > minor
                    });
                    match later {
                        Some(rf) if !strict => r.renamed.push(format!(
                            "{name}.{} -> {} (1.{})",
                            f.name, rf.name, rf.since_minor
                        )),
                        _ => r.mismatches.push(format!(
                            "the header defines member {name}.{}, which the Rust side lacks",
                            f.name
                        )),
                    }
                }
            }
            r.reverse += 1;
        }
    }
}

/// Runs the proof against `include_dirs` and returns what it compared.
fn prove(label: &str, header: &Path, include_dirs: &[PathBuf]) -> Option<Report> {
    let cc = cc();
    if !cc_available(&cc) {
        skip_or_fail(label, &format!("no C compiler `{cc}` (set CC)"));
        return None;
    }
    let text = match std::fs::read_to_string(header) {
        Ok(text) => text,
        Err(e) => {
            skip_or_fail(label, &format!("{}: {e}", header.display()));
            return None;
        }
    };
    let items = header::parse(&text);
    let source = probe::source(Some(&items));
    let out = probe::compile_and_run(&cc, &work_dir(label), include_dirs, &source)
        .unwrap_or_else(|e| panic!("{label}: the probe did not build or run: {e}"));
    let out = parse_output(&out);
    let strict = num(&out["minor"][""][0]) as u32 == KFD_IOCTL_MINOR_VERSION;
    let r = compare(&out, Some(&items), strict);
    eprintln!(
        "{label}: KFD 1.{}: compared {} structs, {} fields, {} constants, {} opcodes, {} function-like \
         macros ({} values), {} event formats, {} Rust-only pad/union fields; {} header items \
         checked in reverse; {} items newer than the header skipped",
        r.minor,
        r.structs,
        r.fields,
        r.constants,
        r.ioctls,
        r.macros,
        r.macro_values,
        r.formats,
        r.derived,
        r.reverse,
        r.skipped.len()
    );
    for note in r.renamed.iter().chain(&r.backports) {
        eprintln!("{label}: note: {note}");
    }
    assert!(
        r.mismatches.is_empty(),
        "{label}: {} mismatches:\n  {}",
        r.mismatches.len(),
        r.mismatches.join("\n  ")
    );
    Some(r)
}

#[test]
fn system_header_1_11() {
    let label = "system_header_1_11";
    let header = Path::new("/usr/include/linux/kfd_ioctl.h");
    if !header.exists() {
        skip_or_fail(
            label,
            "/usr/include/linux/kfd_ioctl.h is missing (install linux-libc-dev)",
        );
        return;
    }
    // The 6.1 header includes <drm/drm.h>, which libdrm-dev installs as <libdrm/drm.h>.
    if !Path::new("/usr/include/libdrm/drm.h").exists() {
        skip_or_fail(
            label,
            "/usr/include/libdrm/drm.h is missing (install libdrm-dev)",
        );
        return;
    }
    let shim = work_dir(label).join("include");
    std::fs::create_dir_all(shim.join("drm")).unwrap();
    std::fs::write(shim.join("drm/drm.h"), "#include <libdrm/drm.h>\n").unwrap();
    let Some(r) = prove(label, header, &[shim, PathBuf::from("/usr/include/libdrm")]) else {
        return;
    };
    assert!(
        r.minor >= 11,
        "{label}: expected at least KFD 1.11, found 1.{}",
        r.minor
    );
    assert!(r.structs > 0 && r.fields > 0 && r.constants > 0 && r.ioctls > 0);
}

#[test]
fn sid_header_1_23() {
    let label = "sid_header_1_23";
    let include = std::env::var_os("KFD_UAPI_SID_INCLUDE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/uapi-sid/include"),
        PathBuf::from,
    );
    let header = include.join("linux/kfd_ioctl.h");
    if !header.exists() {
        skip_or_fail(
            label,
            &format!(
                "{} is missing (run scripts/fetch-sid-header.sh or set KFD_UAPI_SID_INCLUDE)",
                header.display()
            ),
        );
        return;
    }
    let Some(r) = prove(label, &header, &[include]) else {
        return;
    };
    assert_eq!(
        r.minor, KFD_IOCTL_MINOR_VERSION,
        "{label}: the reference header is not KFD 1.{KFD_IOCTL_MINOR_VERSION}"
    );

    // Nothing of the Rust side may go uncompared against the header it mirrors.
    assert!(
        r.skipped.is_empty(),
        "{label}: skipped against the 1.23 header:\n  {}",
        r.skipped.join("\n  ")
    );
    let fields: usize = layout::STRUCTS
        .iter()
        .flat_map(|s| s.flat_fields())
        .filter(|f| matches!(f.kind, FieldKind::Named | FieldKind::Flexible))
        .count();
    let derived: usize = layout::STRUCTS
        .iter()
        .flat_map(|s| s.fields)
        .filter(|f| matches!(f.kind, FieldKind::Padding | FieldKind::Union))
        .count();
    let formats = layout::MACROS
        .iter()
        .filter(|m| matches!(m.kind, MacroKind::Format { .. }))
        .count();
    assert_eq!(
        r.structs,
        layout::STRUCTS.len(),
        "{label}: structs compared"
    );
    assert_eq!(r.fields, fields, "{label}: fields compared");
    assert_eq!(r.derived, derived, "{label}: pad/union fields checked");
    assert_eq!(
        r.constants,
        layout::CONSTANTS.len(),
        "{label}: constants compared"
    );
    assert_eq!(r.ioctls, IOCTLS.len(), "{label}: opcodes compared");
    assert_eq!(
        r.macros + r.formats,
        layout::MACROS.len(),
        "{label}: macros compared"
    );
    assert_eq!(r.formats, formats, "{label}: formats compared");
    assert!(r.renamed.is_empty() && r.backports.is_empty());

    // No name twice on the Rust side, so "found" above means one definite item.
    let names: BTreeSet<_> = layout::CONSTANTS.iter().map(|c| c.name).collect();
    assert_eq!(
        names.len(),
        layout::CONSTANTS.len(),
        "{label}: duplicate constant names"
    );
    let names: BTreeSet<_> = layout::STRUCTS.iter().map(|s| s.name).collect();
    assert_eq!(
        names.len(),
        layout::STRUCTS.len(),
        "{label}: duplicate struct names"
    );
}
