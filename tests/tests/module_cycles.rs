//! No module cycles inside any crate's `src/`: every module's uses of another module of the same
//! crate (`use crate::…`, `use super::…`, `self::…`, a child module's name, and the same paths
//! in code) form a graph without cycles.
//!
//! A module is a file or an inline `mod name { … }`; declaring a child (`mod x;`) is not a use
//! of it, nor is a `pub use` re-export by itself (the parent's namespace, not a dependency of
//! its code), nor a visibility path (`pub(in crate::x)`). A re-exported name that the module's
//! own code also uses (`pub use fault::Fault;` and then `Fault` in a signature) is a use of
//! where it comes from; names a glob re-export brings in are not followed. A path ends at the deepest module it names:
//! `super::memory::PAGE_SIZE` is a use of `memory`, `super::Model` one of the parent.
//!
//! No crate has a cycle today. [`KNOWN_CYCLE_EDGES`] held the edges that lay on one when the
//! check came in (kfd-emu's model, kfd-ioctl's topology and layout registry); it is empty now
//! and may only stay so: a new edge that closes a cycle fails, and so does a listed edge that
//! no longer lies on a cycle.

mod workspace_support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use workspace_support::members;

/// Edges that lie on a module cycle today, as `crate root: from -> to`. Only removals allowed.
const KNOWN_CYCLE_EDGES: &[&str] = &[];

/// A module path below the crate root (`["model", "svm", "fault"]`); empty for the root.
type ModPath = Vec<String>;

fn show(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        path.join("::")
    }
}

/// A token of Rust source once comments, strings and literals are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// Splits Rust source into identifiers, `::` and punctuation, dropping comments, string, char
/// and number literals, and lifetimes.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let ident_start = |ch: char| ch == '_' || ch.is_alphabetic();
    let ident_char = |ch: char| ch == '_' || ch.is_alphanumeric();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(&c, i + 1);
        } else if (ch == 'r' || ch == 'b') && raw_string_at(&c, i).is_some() {
            let (hashes, body) = raw_string_at(&c, i).unwrap_or_default();
            i = body;
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if ch == 'b' && next == Some('"') {
            i = skip_string(&c, i + 2);
        } else if ch == 'b' && next == Some('\'') {
            i = skip_char(&c, i + 1);
        } else if ch == '\'' {
            i = skip_char(&c, i);
        } else if ch == 'r' && next == Some('#') && c.get(i + 2).is_some_and(|&n| ident_start(n)) {
            let start = i + 2;
            i = start;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ident_start(ch) {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (ident_char(c[i]) || c[i] == '.') {
                i += 1;
            }
        } else if ch == ':' && next == Some(':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push(Tok::Punct(ch));
            }
            i += 1;
        }
    }
    out
}

/// The index after the closing quote of a string whose body starts at `i`.
fn skip_string(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index after a char literal or a lifetime starting with the quote at `i`.
fn skip_char(c: &[char], i: usize) -> usize {
    match c.get(i + 1) {
        Some('\\') => {
            let mut j = i + 2;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            j + 1
        }
        Some(_) if c.get(i + 2) == Some(&'\'') => i + 3,
        // A lifetime: its name follows as an identifier.
        _ => i + 1,
    }
}

/// For a raw string (`r"`, `r#"`, `br#"`) at `i`: its number of `#` and where its body starts.
fn raw_string_at(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    (c.get(j + hashes) == Some(&'"')).then_some((hashes, j + hashes + 1))
}

/// What one module's source says about others, before resolution.
#[derive(Debug, Default)]
struct Crate {
    /// Every module, file or inline.
    modules: BTreeSet<ModPath>,
    /// `(from, path as written)` for every use and every path in code.
    refs: Vec<(ModPath, Vec<String>)>,
    /// `(from, name it binds, path as written)` for every re-export.
    reexports: Vec<(ModPath, String, Vec<String>)>,
    /// The names each module's code mentions outside use declarations: an identifier that is
    /// neither a segment after `::` nor a field or method after `.`.
    mentions: BTreeMap<ModPath, BTreeSet<String>>,
}

/// Reads the module tree rooted at `root` (a `lib.rs`, `main.rs` or `bin/x.rs`).
fn read_crate(root: &Path) -> Result<Crate, String> {
    let mut krate = Crate::default();
    let dir = root.parent().ok_or("a crate root has a directory")?;
    read_module(&mut krate, root, dir.to_path_buf(), Vec::new())?;
    Ok(krate)
}

/// Reads the file of module `path`, whose child modules' files are in `child_dir`.
fn read_module(
    krate: &mut Crate,
    file: &Path,
    child_dir: PathBuf,
    path: ModPath,
) -> Result<(), String> {
    let src = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let toks = tokens(&src);
    krate.modules.insert(path.clone());
    // The inline modules open around the current token, with the brace depth they opened at.
    let mut stack: Vec<(ModPath, PathBuf, usize)> = vec![(path, child_dir, 0)];
    let mut depth = 0;
    let mut i = 0;
    let ident = |k: usize| match toks.get(k) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    while i < toks.len() {
        let (cur, cur_dir, _) = stack.last().cloned().ok_or("module stack")?;
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if stack.len() > 1 && stack.last().is_some_and(|(_, _, d)| *d == depth) {
                    stack.pop();
                }
                depth -= 1;
            }
            Tok::Ident(kw) if kw == "pub" && toks.get(i + 1) == Some(&Tok::Punct('(')) => {
                // A visibility path names no dependency.
                while i < toks.len() && toks[i] != Tok::Punct(')') {
                    i += 1;
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(name) = ident(i + 1) {
                    let mut child = cur.clone();
                    child.push(name.to_owned());
                    krate.modules.insert(child.clone());
                    let sub_dir = cur_dir.join(name);
                    match toks.get(i + 2) {
                        Some(Tok::Punct(';')) => {
                            let flat = cur_dir.join(format!("{name}.rs"));
                            let file = if flat.exists() {
                                flat
                            } else {
                                sub_dir.join("mod.rs")
                            };
                            read_module(krate, &file, sub_dir, child)?;
                            i += 2;
                        }
                        Some(Tok::Punct('{')) => {
                            depth += 1;
                            stack.push((child, sub_dir, depth));
                            i += 2;
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let reexport =
                    i > 0 && (ident(i - 1) == Some("pub") || toks[i - 1] == Tok::Punct(')'));
                let mut paths = Vec::new();
                i = use_tree(&toks, i + 1, Vec::new(), &mut paths);
                for (path, name) in paths {
                    match name {
                        Some(name) if reexport => krate.reexports.push((cur.clone(), name, path)),
                        _ if reexport => {}
                        _ => krate.refs.push((cur.clone(), path)),
                    }
                }
                continue;
            }
            Tok::Ident(first) if toks.get(i + 1) == Some(&Tok::PathSep) => {
                let mut segs = vec![first.clone()];
                let mut k = i + 1;
                while toks.get(k) == Some(&Tok::PathSep) {
                    match ident(k + 1) {
                        Some(s) => segs.push(s.to_owned()),
                        None => break,
                    }
                    k += 2;
                }
                if i == 0 || !matches!(toks[i - 1], Tok::PathSep | Tok::Punct('.')) {
                    krate
                        .mentions
                        .entry(cur.clone())
                        .or_default()
                        .insert(first.clone());
                }
                krate.refs.push((cur.clone(), segs));
                i = k;
                continue;
            }
            Tok::Ident(name)
                if i == 0 || !matches!(toks[i - 1], Tok::PathSep | Tok::Punct('.')) =>
            {
                krate
                    .mentions
                    .entry(cur.clone())
                    .or_default()
                    .insert(name.clone());
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// A path a use declaration imports, with the name it binds (`None` for a glob or `as _`).
type Import = (Vec<String>, Option<String>);

/// Parses a use tree at `i` below `prefix`, pushing every path it imports; returns the index
/// after it (after the `;`, or at the `,`/`}` that ends a nested tree).
fn use_tree(toks: &[Tok], mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Import>) -> usize {
    let mut name: Option<String> = None;
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) if s == "as" => {
                name = match toks.get(i + 1) {
                    Some(Tok::Ident(alias)) if alias != "_" => Some(alias.clone()),
                    _ => None,
                };
                i += 2;
            }
            Some(Tok::Ident(s)) if s == "self" && !prefix.is_empty() => {
                name = prefix.last().cloned();
                i += 1;
            }
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                name = Some(s.clone());
                i += 1;
            }
            Some(Tok::PathSep) => i += 1,
            Some(Tok::Punct('*')) => {
                name = None;
                i += 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while !matches!(toks.get(i), Some(Tok::Punct('}')) | None) {
                    i = use_tree(toks, i, prefix.clone(), out);
                    if toks.get(i) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                // The group names its own paths; the prefix alone is no import.
                prefix.clear();
                i += 1;
            }
            Some(Tok::Punct(';')) => {
                if !prefix.is_empty() {
                    out.push((prefix, name));
                }
                return i + 1;
            }
            _ => {
                if !prefix.is_empty() {
                    out.push((prefix, name));
                }
                return i;
            }
        }
    }
}

/// The module that path `segs`, written in module `from`, ends at; `None` for paths outside
/// the crate (std, dependencies, local items).
fn resolve(modules: &BTreeSet<ModPath>, from: &[String], segs: &[String]) -> Option<ModPath> {
    let (mut base, mut rest): (ModPath, &[String]) = match segs.first()?.as_str() {
        "crate" => (Vec::new(), &segs[1..]),
        "self" => (from.to_vec(), &segs[1..]),
        "super" => {
            let mut base = from.to_vec();
            let mut k = 0;
            while segs.get(k).is_some_and(|s| s == "super") {
                base.pop()?;
                k += 1;
            }
            (base, &segs[k..])
        }
        name => {
            let mut child = from.to_vec();
            child.push(name.to_owned());
            if !modules.contains(&child) {
                return None;
            }
            (child, &segs[1..])
        }
    };
    while let Some((seg, more)) = rest.split_first() {
        base.push(seg.clone());
        if !modules.contains(&base) {
            base.pop();
            break;
        }
        rest = more;
    }
    Some(base)
}

/// The crate's module graph: `from -> {to}`, without self-edges.
fn graph(krate: &Crate) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    let used_reexports = krate.reexports.iter().filter(|(from, name, _)| {
        krate
            .mentions
            .get(from)
            .is_some_and(|names| names.contains(name))
    });
    let refs = krate.refs.iter().map(|(from, segs)| (from, segs));
    let reexport_refs = used_reexports.map(|(from, _, segs)| (from, segs));
    for (from, segs) in refs.chain(reexport_refs) {
        if let Some(to) = resolve(&krate.modules, from, segs)
            && &to != from
        {
            edges.entry(from.clone()).or_default().insert(to);
        }
    }
    edges
}

/// The shortest path `from ->…-> to`, if there is one.
fn path(
    edges: &BTreeMap<ModPath, BTreeSet<ModPath>>,
    from: &ModPath,
    to: &ModPath,
) -> Option<Vec<ModPath>> {
    let mut prev: BTreeMap<ModPath, ModPath> = BTreeMap::new();
    let mut queue = VecDeque::from([from.clone()]);
    while let Some(node) = queue.pop_front() {
        if &node == to {
            let mut out = vec![node];
            while let Some(p) = out.last().and_then(|n| prev.get(n)) {
                out.push(p.clone());
            }
            out.reverse();
            return Some(out);
        }
        for next in edges.get(&node).into_iter().flatten() {
            if next != from && !prev.contains_key(next) {
                prev.insert(next.clone(), node.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

/// Every edge that lies on a cycle, as `"from -> to"`, with the cycle it closes.
fn cycle_edges(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (from, tos) in edges {
        for to in tos {
            if let Some(back) = path(edges, to, from) {
                let cycle: Vec<String> = std::iter::once(from)
                    .chain(&back)
                    .map(|m| show(m))
                    .collect();
                out.insert(
                    format!("{} -> {}", show(from), show(to)),
                    cycle.join(" -> "),
                );
            }
        }
    }
    out
}

/// The crate roots of a package directory: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`.
fn crate_roots(package: &Path) -> Vec<PathBuf> {
    let src = package.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.exists())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        for bin in bins.flatten() {
            let p = bin.path();
            if p.extension().is_some_and(|e| e == "rs") {
                roots.push(p);
            } else if p.join("main.rs").exists() {
                roots.push(p.join("main.rs"));
            }
        }
    }
    roots.sort();
    roots
}

#[test]
fn no_module_cycles_in_any_crate() {
    let root = workspace_support::root();
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    let mut roots = 0;
    for package in members(&root) {
        for crate_root in crate_roots(&package) {
            roots += 1;
            let krate = read_crate(&crate_root)
                .unwrap_or_else(|e| panic!("reading {}: {e}", crate_root.display()));
            let rel = crate_root
                .strip_prefix(&root)
                .unwrap_or(&crate_root)
                .display()
                .to_string();
            for (edge, cycle) in cycle_edges(&graph(&krate)) {
                found.insert(format!("{rel}: {edge}"), cycle);
            }
        }
    }
    assert!(roots >= 8, "the check read only {roots} crate roots");
    let known: BTreeSet<String> = KNOWN_CYCLE_EDGES.iter().map(|e| e.to_string()).collect();
    let new: Vec<String> = found
        .iter()
        .filter(|(edge, _)| !known.contains(*edge))
        .map(|(edge, cycle)| format!("{edge}  (cycle: {cycle})"))
        .collect();
    let gone: Vec<&String> = known.iter().filter(|e| !found.contains_key(*e)).collect();
    assert!(
        new.is_empty(),
        "module edges that close a cycle:\n  {}",
        new.join("\n  ")
    );
    assert!(
        gone.is_empty(),
        "listed as cycle edges but no longer on a cycle (remove them from KNOWN_CYCLE_EDGES): {gone:?}"
    );
}

/// A crate written to a fresh directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, files: &[(&str, &str)]) -> Scratch {
        let dir = std::env::temp_dir().join(format!("module-cycles-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
            std::fs::write(file, text).expect("write");
        }
        Scratch(dir)
    }

    fn cycles(&self) -> BTreeMap<String, String> {
        cycle_edges(&graph(&read_crate(&self.0.join("lib.rs")).expect("read")))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const LIB: &str = "mod a;\nmod b;\nmod c;\n";
const A: &str = "use crate::b::B;\npub struct A;\n";
const B: &str = "pub struct B;\npub fn f() { super::c::g() }\n";
/// Mentions `a` only where no use is: a comment, strings, a visibility path, a re-export, and
/// a test module that uses its parent.
const C_WITHOUT_USE: &str = r##"// use crate::a::A;
/* crate::a::A /* nested */ crate::a::A */
pub fn g() { let _ = ("crate::a::A", r#"super::a::A"#, 'a'); }
pub(in crate::c) fn h<'a>(x: &'a u8) -> &'a u8 { x }
pub use crate::a::A as Reexported;
mod inner { use super::*; }
"##;

#[test]
fn comments_strings_visibility_and_reexports_are_no_uses() {
    let krate = Scratch::new(
        "clean",
        &[
            ("lib.rs", LIB),
            ("a.rs", A),
            ("b.rs", B),
            ("c.rs", C_WITHOUT_USE),
        ],
    );
    let edges = graph(&read_crate(&krate.0.join("lib.rs")).expect("read"));
    let names = |from: &str| -> Vec<String> {
        edges
            .get(&vec![from.to_owned()])
            .into_iter()
            .flatten()
            .map(|m| show(m))
            .collect()
    };
    assert_eq!(names("a"), ["b"]);
    assert_eq!(names("b"), ["c"]);
    assert!(names("c").is_empty(), "c uses {:?}", names("c"));
    assert_eq!(krate.cycles(), BTreeMap::new());
}

#[test]
fn a_use_that_closes_a_cycle_is_found_and_the_cycle_named() {
    let c = format!("{C_WITHOUT_USE}use super::a::A;\n");
    let krate = Scratch::new(
        "cycle",
        &[("lib.rs", LIB), ("a.rs", A), ("b.rs", B), ("c.rs", &c)],
    );
    let cycles = krate.cycles();
    assert_eq!(
        cycles.keys().collect::<Vec<_>>(),
        ["a -> b", "b -> c", "c -> a"]
    );
    assert_eq!(cycles["c -> a"], "c -> a -> b -> c");
}

#[test]
fn paths_end_at_the_deepest_module_and_children_are_found_by_name() {
    let krate = Scratch::new(
        "nested",
        &[
            ("lib.rs", "mod m;\nfn f() { m::x::go(); }\n"),
            ("m/mod.rs", "pub mod x;\npub struct Model;\n"),
            (
                "m/x.rs",
                "use super::Model;\npub fn go() { super::super::f2() }\n",
            ),
        ],
    );
    let edges = graph(&read_crate(&krate.0.join("lib.rs")).expect("read"));
    let of = |from: &[&str]| -> Vec<String> {
        let from: ModPath = from.iter().map(|s| s.to_string()).collect();
        edges
            .get(&from)
            .into_iter()
            .flatten()
            .map(|m| show(m))
            .collect()
    };
    assert_eq!(of(&[]), ["m::x"]);
    assert_eq!(of(&["m", "x"]), ["crate", "m"]);
    assert_eq!(
        krate.cycles().keys().collect::<Vec<_>>(),
        ["crate -> m::x", "m::x -> crate"]
    );
}

#[test]
fn a_reexported_name_the_module_also_uses_is_a_use() {
    // The facade re-exports `Fault` and names it in its own code; `fault` uses the facade.
    let facade = "mod fault;\npub use fault::{Fault, Unused as Renamed};\npub use fault::*;\n\
                  pub fn first(f: &[Fault]) -> Option<&Fault> { f.first() }\n";
    let fault = "pub struct Fault;\npub struct Unused;\npub fn go() { super::first(&[]); }\n";
    let krate = Scratch::new(
        "facade",
        &[
            ("lib.rs", "mod svm;\n"),
            ("svm/mod.rs", facade),
            ("svm/fault.rs", fault),
        ],
    );
    assert_eq!(
        krate.cycles().keys().collect::<Vec<_>>(),
        ["svm -> svm::fault", "svm::fault -> svm"]
    );
    // Re-exported and only mentioned as a field, a method or a path segment: no use.
    let facade = "mod fault;\npub use fault::Fault;\npub use fault::go as Renamed;\n\
                  pub fn first(s: &S) -> u8 { s.Fault + s.Renamed() + x::Fault }\n";
    let krate = Scratch::new(
        "facade-unused",
        &[
            ("lib.rs", "mod svm;\n"),
            ("svm/mod.rs", facade),
            ("svm/fault.rs", fault),
        ],
    );
    assert_eq!(krate.cycles(), BTreeMap::new());
}
