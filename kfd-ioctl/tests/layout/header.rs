//! Reads the items a `kfd_ioctl.h` defines straight from its text, independent of the Rust
//! side, so the proof can check that Rust mirrors all of them.

/// One member of a C struct, as written in the header.
#[derive(Debug, Clone)]
pub struct CField {
    /// The member name (members of an anonymous union count as the struct's own).
    pub name: String,
    /// Whether it is a flexible array member (`attrs[]`), which has no `sizeof`.
    pub flexible: bool,
}

/// The items of a header.
#[derive(Debug, Default)]
pub struct HeaderItems {
    /// `struct kfd_* { ... }` definitions with their members.
    pub structs: Vec<(String, Vec<CField>)>,
    /// Object-like `#define`s with a value (including `AMDKFD_IOC_*`).
    pub defines: Vec<String>,
    /// Function-like `#define`s.
    pub function_macros: Vec<String>,
    /// Enumerators of every `enum`.
    pub enumerators: Vec<String>,
}

/// Removes `/* */` and `//` comments, keeping line breaks.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b + 2..]
                    .find("*/")
                    .map_or(rest.len(), |e| b + 2 + e + 2);
                out.extend(rest[b..end].chars().filter(|&c| c == '\n'));
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                let end = rest[l..].find('\n').map_or(rest.len(), |e| l + e);
                rest = &rest[end..];
            }
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(_), None) => unreachable!("covered by the first arm"),
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn leading_ident(s: &str) -> &str {
    let s = s.trim_start();
    let end = s.find(|c: char| !is_ident_char(c)).unwrap_or(s.len());
    &s[..end]
}

/// Returns the text between the `{` at `open` and its matching `}`, and the index after it.
fn block(text: &str, open: usize) -> Option<(&str, usize)> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&text[open + 1..open + i], open + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// Parses the members of a struct body: anonymous unions are flattened into the struct, an
/// anonymous struct counts as one member named by its declarator.
fn members(body: &str) -> Vec<CField> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(semi_or_brace) = rest.find([';', '{']) {
        if rest.as_bytes()[semi_or_brace] == b'{' {
            let head = rest[..semi_or_brace].trim();
            let Some((inner, after)) = block(rest, semi_or_brace) else {
                break;
            };
            let decl_end = rest[after..].find(';').map_or(rest.len(), |e| after + e);
            let declarator = rest[after..decl_end].trim();
            if head == "union" && declarator.is_empty() {
                out.extend(members(inner));
            } else {
                out.push(CField {
                    name: leading_ident(declarator).to_string(),
                    flexible: false,
                });
            }
            rest = &rest[(decl_end + 1).min(rest.len())..];
            continue;
        }
        let decl = rest[..semi_or_brace].trim();
        rest = &rest[semi_or_brace + 1..];
        if decl.is_empty() {
            continue;
        }
        let flexible = decl.ends_with("[]");
        let name_part = decl.split('[').next().unwrap_or(decl).trim_end();
        let start = name_part
            .rfind(|c: char| !is_ident_char(c))
            .map_or(0, |i| i + 1);
        out.push(CField {
            name: name_part[start..].to_string(),
            flexible,
        });
    }
    out
}

/// Reads the structs, defines, function-like macros and enumerators of a header.
pub fn parse(text: &str) -> HeaderItems {
    let text = strip_comments(text).replace("\\\n", " ");
    let mut items = HeaderItems::default();

    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("define") else {
            continue;
        };
        let name = leading_ident(rest);
        let after = &rest.trim_start()[name.len()..];
        if after.starts_with('(') {
            items.function_macros.push(name.to_string());
        } else if !after.trim().is_empty() {
            items.defines.push(name.to_string());
        }
    }

    let mut pos = 0;
    while let Some(found) = text[pos..].find("struct ") {
        let at = pos + found;
        pos = at + "struct ".len();
        let name = leading_ident(&text[pos..]);
        let after_name = pos + (text[pos..].len() - text[pos..].trim_start().len()) + name.len();
        if name.is_empty() || !text[after_name..].trim_start().starts_with('{') {
            continue;
        }
        let open = after_name + text[after_name..].find('{').unwrap_or(0);
        if let Some((body, end)) = block(&text, open) {
            items.structs.push((name.to_string(), members(body)));
            pos = end;
        }
    }

    let mut pos = 0;
    while let Some(found) = text[pos..].find("enum ") {
        let at = pos + found;
        pos = at + "enum ".len();
        let Some(open) = text[pos..].find('{').map(|o| pos + o) else {
            break;
        };
        if !text[pos..open].trim().chars().all(is_ident_char) {
            continue;
        }
        if let Some((body, end)) = block(&text, open) {
            for entry in body.split(',') {
                let name = leading_ident(entry);
                if !name.is_empty() {
                    items.enumerators.push(name.to_string());
                }
            }
            pos = end;
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unions_nested_structs_and_continuations() {
        let items = parse(
            "/* c */ #define A_B 1 /* x */\n#define F(x) (x)\n#define G \\\n  (2)\n\
             struct s { __u32 a; union { struct t u1; __u64 u2; }; struct { __u32 x; } w; \
             struct kfd_x y[]; };\nenum e { E1, E2 = (1 << 3), };",
        );
        assert_eq!(items.defines, ["A_B", "G"]);
        assert_eq!(items.function_macros, ["F"]);
        assert_eq!(items.enumerators, ["E1", "E2"]);
        let names: Vec<_> = items.structs[0]
            .1
            .iter()
            .map(|f| (f.name.as_str(), f.flexible))
            .collect();
        assert_eq!(
            names,
            [
                ("a", false),
                ("u1", false),
                ("u2", false),
                ("w", false),
                ("y", true)
            ]
        );
    }
}
