//! Upstream's per-GPU exclusions, read as `run_kfdtest.sh` reads them.
//!
//! `tests/kfdtest/scripts/kfdtest.exclude` is a bash fragment the script `source`s: variable
//! assignments whose values are concatenations of double-quoted strings joined by
//! backslash-newlines, expanding `$VAR`, `${VAR}` and `${FILTER[key]}`, and the associative
//! array `FILTER[platform]=…` holding each platform's gtest filter (`-A:B:…`, the tests it does
//! not run). [`parse`] evaluates exactly that subset (no commands, no other expansions) and
//! refuses anything else, so a future file that needs more fails loudly instead of silently
//! excluding the wrong tests.
//!
//! [`platform`] is `run_kfdtest.sh`'s `getNodeName`: a GPU node's topology `name` (`vega20`,
//! `aldebaran`, `arcturus`…), or, for GPUs the kernel names `ip discovery`, `gfx` followed by
//! its `gfx_target_version` as major (decimal), minor and stepping (hex) — 90402 → gfx942,
//! 110000 → gfx1100 — and `raven_dgpuFallback` for a Raven without CPU cores.

use std::collections::HashMap;

/// The `FILTER` array of an exclusion file: platform → gtest filter.
pub type Filters = HashMap<String, String>;

/// Evaluates the exclusion file `text` (see the module docs); the error names the line.
pub fn parse(text: &str) -> Result<Filters, String> {
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut filters = Filters::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let line_of = |at: usize| {
        chars[..at.min(chars.len())]
            .iter()
            .filter(|&&c| c == '\n')
            .count()
            + 1
    };
    while i < chars.len() {
        // Between statements: blanks, newlines, comments.
        match chars[i] {
            ' ' | '\t' | '\n' | ';' => {
                i += 1;
                continue;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        let start = i;
        let mut name = String::new();
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            name.push(chars[i]);
            i += 1;
        }
        if name == "declare" {
            // `declare -A FILTER`: the only declaration the file makes.
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let mut key = None;
        if i < chars.len() && chars[i] == '[' {
            let close = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .ok_or_else(|| format!("line {}: unclosed '['", line_of(start)))?;
            key = Some(chars[i + 1..i + close].iter().collect::<String>());
            i += close + 1;
        }
        if name.is_empty() || i >= chars.len() || chars[i] != '=' {
            return Err(format!(
                "line {}: not an assignment (only NAME=… and FILTER[key]=… are understood)",
                line_of(start)
            ));
        }
        i += 1;
        let value = word(&chars, &mut i, &vars, &filters)
            .map_err(|e| format!("line {}: {e}", line_of(start)))?;
        match key {
            Some(k) if name == "FILTER" => {
                filters.insert(k, value);
            }
            Some(_) => {
                return Err(format!(
                    "line {}: only the FILTER array is understood",
                    line_of(start)
                ));
            }
            None => {
                vars.insert(name, value);
            }
        }
    }
    Ok(filters)
}

/// One shell word from `chars[*i]`: quoted and unquoted parts with `$` expansions, joined by
/// backslash-newlines, up to unquoted whitespace.
fn word(
    chars: &[char],
    i: &mut usize,
    vars: &HashMap<String, String>,
    filters: &Filters,
) -> Result<String, String> {
    let mut out = String::new();
    let mut quoted = false;
    while *i < chars.len() {
        let c = chars[*i];
        match c {
            '"' => {
                quoted = !quoted;
                *i += 1;
            }
            '\\' if !quoted && chars.get(*i + 1) == Some(&'\n') => *i += 2,
            '\\' => {
                let next = chars.get(*i + 1).ok_or("a '\\' at the end")?;
                out.push(*next);
                *i += 2;
            }
            '$' => {
                *i += 1;
                out.push_str(&expand(chars, i, vars, filters)?);
            }
            '\'' if !quoted => {
                let close = chars[*i + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .ok_or("unclosed single quote")?;
                out.extend(&chars[*i + 1..*i + 1 + close]);
                *i += close + 2;
            }
            ' ' | '\t' | '\n' | ';' if !quoted => break,
            '`' => return Err("command substitution is not understood".to_owned()),
            _ => {
                out.push(c);
                *i += 1;
            }
        }
    }
    if quoted {
        return Err("unclosed double quote".to_owned());
    }
    Ok(out)
}

/// The expansion after a `$`: `NAME`, `{NAME}` or `{FILTER[key]}`. An unset variable is empty,
/// as in bash.
fn expand(
    chars: &[char],
    i: &mut usize,
    vars: &HashMap<String, String>,
    filters: &Filters,
) -> Result<String, String> {
    if chars.get(*i) == Some(&'{') {
        let close = chars[*i..]
            .iter()
            .position(|&c| c == '}')
            .ok_or("unclosed '${'")?;
        let inner: String = chars[*i + 1..*i + close].iter().collect();
        *i += close + 1;
        if let Some(rest) = inner.strip_prefix("FILTER[") {
            let key = rest.strip_suffix(']').ok_or("bad ${FILTER[…]}")?;
            return Ok(filters.get(key).cloned().unwrap_or_default());
        }
        if inner.is_empty() || !inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("the expansion ${{{inner}}} is not understood"));
        }
        return Ok(vars.get(&inner).cloned().unwrap_or_default());
    }
    let mut name = String::new();
    while let Some(&c) = chars.get(*i) {
        if c.is_ascii_alphanumeric() || c == '_' {
            name.push(c);
            *i += 1;
        } else {
            break;
        }
    }
    if name.is_empty() {
        return Err("a '$' that expands nothing".to_owned());
    }
    Ok(vars.get(&name).cloned().unwrap_or_default())
}

/// `run_kfdtest.sh`'s `getNodeName` for a GPU node, from its topology `name` file and its
/// `properties` text (see the module docs). `override_gfx` is `HSA_OVERRIDE_GFX_VERSION`
/// (`9.4.2`), which the script honours for `ip discovery` GPUs.
pub fn platform(name: &str, properties: &str, override_gfx: Option<&str>) -> Option<String> {
    let property = |key: &str| {
        properties.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(key))
                .then(|| f.next().and_then(|v| v.parse::<u64>().ok()))
                .flatten()
        })
    };
    let name = name.trim();
    match name {
        "raven" => {
            let dgpu = property("cpu_cores_count") == Some(0)
                && property("simd_count").is_some_and(|s| s > 0);
            Some(if dgpu { "raven_dgpuFallback" } else { "raven" }.to_owned())
        }
        "ip discovery" => {
            let (major, minor, step) = match override_gfx {
                Some(v) => {
                    let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
                    (
                        parts.next().flatten()?,
                        parts.next().flatten()?,
                        parts.next().flatten()?,
                    )
                }
                None => {
                    let v = property("gfx_target_version")?;
                    (v / 10000, v / 100 % 100, v % 100)
                }
            };
            Some(format!("gfx{major}{minor:x}{step:x}"))
        }
        "" => None,
        other => Some(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::gtest::filter_matches;

    /// The shape of rocm-6.2.4's kfdtest.exclude, abridged.
    const FILE: &str = r#"declare -A FILTER

# Power management tests
FILTER[pm]=\
"KFDPMTest.SuspendWithActiveProcess:"\
"KFDPMTest.SuspendWithIdleQueue"

PERMANENT_BLACKLIST_ALL_ASICS=\
"-KFDEventTest.MeasureInterruptConsumption:"\
"${FILTER[pm]}:"\
"KFDRASTest.*"

TEMPORARY_BLACKLIST_ALL_ASICS=\
"KFDQMTest.SdmaEventInterrupt:"\
"KFDHWSTest.*"

BLACKLIST_ALL_ASICS=\
"$PERMANENT_BLACKLIST_ALL_ASICS:"\
"$TEMPORARY_BLACKLIST_ALL_ASICS"

SDMA_BLACKLIST=\
"KFDQMTest.*Sdma*:"\
"KFDMemoryTest.SignalHandling"

FILTER[vega12]=\
"$BLACKLIST_ALL_ASICS:"\
"$SDMA_BLACKLIST"\

FILTER[gfx942]=\
"$BLACKLIST_ALL_ASICS:"\
"KFDQMTest.QueueLatency"
"#;

    #[test]
    fn filters_expand_as_bash_does() {
        let f = parse(FILE).expect("parses");
        assert_eq!(
            f["pm"],
            "KFDPMTest.SuspendWithActiveProcess:KFDPMTest.SuspendWithIdleQueue"
        );
        assert_eq!(
            f["gfx942"],
            "-KFDEventTest.MeasureInterruptConsumption:KFDPMTest.SuspendWithActiveProcess:\
             KFDPMTest.SuspendWithIdleQueue:KFDRASTest.*:KFDQMTest.SdmaEventInterrupt:\
             KFDHWSTest.*:KFDQMTest.QueueLatency"
        );
        // A trailing backslash-newline before a blank line ends the word as bash does.
        assert!(f["vega12"].ends_with("KFDQMTest.*Sdma*:KFDMemoryTest.SignalHandling"));
        assert!(!filter_matches(
            &f["vega12"],
            "KFDQMTest.SubmitNopSdmaQueue"
        ));
        assert!(filter_matches(&f["gfx942"], "KFDQMTest.SubmitNopSdmaQueue"));
        assert!(!filter_matches(
            &f["gfx942"],
            "KFDPMTest.SuspendWithIdleQueue"
        ));
    }

    /// What bash makes of `text` when sourced: the FILTER array.
    fn bash_filters(text: &str) -> Filters {
        let dir = std::env::temp_dir().join(format!("xtask-exclude-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("kfdtest.exclude");
        std::fs::write(&file, text).expect("write");
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(r#"source "$1"; for k in "${!FILTER[@]}"; do printf '%s\t%s\n' "$k" "${FILTER[$k]}"; done"#)
            .arg("bash")
            .arg(&file)
            .output()
            .expect("bash");
        let _ = std::fs::remove_dir_all(&dir);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// The parser agrees with bash itself, on the sample and (when `KFDTEST_EXCLUDE` names
    /// one) on a real tree's file.
    #[test]
    fn the_filters_are_what_bash_sources() {
        assert_eq!(parse(FILE).expect("parses"), bash_filters(FILE));
        if let Some(path) = std::env::var_os("KFDTEST_EXCLUDE") {
            let text = std::fs::read_to_string(path).expect("read KFDTEST_EXCLUDE");
            assert_eq!(parse(&text).expect("parses"), bash_filters(&text));
        }
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(parse("X=$(echo hi)\n").is_err());
        assert!(parse("echo hi\n").is_err());
        assert!(parse("X=\"open\n").is_err());
        assert!(parse("X=`cmd`\n").is_err());
    }

    #[test]
    fn platform_is_get_node_name() {
        let props = "simd_count 1216\ngfx_target_version 90402\ncpu_cores_count 0\n";
        assert_eq!(
            platform("ip discovery", props, None).as_deref(),
            Some("gfx942")
        );
        let props = "simd_count 192\ngfx_target_version 110000\n";
        assert_eq!(
            platform("ip discovery\n", props, None).as_deref(),
            Some("gfx1100")
        );
        let props = "gfx_target_version 120001\n";
        assert_eq!(
            platform("ip discovery", props, None).as_deref(),
            Some("gfx1201")
        );
        assert_eq!(
            platform("ip discovery", props, Some("9.4.2")).as_deref(),
            Some("gfx942")
        );
        // 10.3.6 → gfx1036 (minor and stepping in hex: gfx90a is 9.0.10).
        assert_eq!(
            platform("ip discovery", "gfx_target_version 90010\n", None).as_deref(),
            Some("gfx90a")
        );
        assert_eq!(platform("vega20", "", None).as_deref(), Some("vega20"));
        assert_eq!(
            platform("raven", "cpu_cores_count 0\nsimd_count 44\n", None).as_deref(),
            Some("raven_dgpuFallback")
        );
        assert_eq!(
            platform("raven", "cpu_cores_count 4\nsimd_count 44\n", None).as_deref(),
            Some("raven")
        );
        assert_eq!(platform("", "", None), None);
    }
}
