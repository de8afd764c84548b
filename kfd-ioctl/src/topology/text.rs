//! The kernel's text format for topology `properties` files: one `key value` pair per line,
//! values printed with `%u` or `%llu`.

use std::fmt::Write as _;
use std::path::Path;

use super::error::TopologyError;

/// One `key value` line of a properties file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Line<'a> {
    /// 1-based line number.
    pub(crate) number: usize,
    pub(crate) key: &'a str,
    pub(crate) value: &'a str,
    /// The whole line, for error messages.
    pub(crate) text: &'a str,
}

/// A key the kernel prints: its name, the width of the field behind it, and whether every
/// kernel prints it (so that a file without it is not the kernel's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) bits: u32,
    pub(crate) required: bool,
}

impl Key {
    /// A `%u` key that may be absent.
    pub(crate) const fn u32(name: &'static str) -> Self {
        Self {
            name,
            bits: 32,
            required: false,
        }
    }

    /// A `%llu` key that may be absent.
    pub(crate) const fn u64(name: &'static str) -> Self {
        Self {
            name,
            bits: 64,
            required: false,
        }
    }

    /// The same key, required.
    pub(crate) const fn required(self) -> Self {
        Self {
            required: true,
            ..self
        }
    }
}

/// Splits `text` into `key value` lines. Blank lines and surrounding whitespace are ignored,
/// as the kernel never writes them but hand-edited captures may carry them.
pub(crate) fn lines<'a>(text: &'a str, path: &Path) -> Result<Vec<Line<'a>>, TopologyError> {
    let mut out = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        let mut words = trimmed.split_ascii_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(key), Some(value), None) => out.push(Line {
                number: index + 1,
                key,
                value,
                text: trimmed,
            }),
            _ => return Err(parse_error(path, index + 1, trimmed)),
        }
    }
    Ok(out)
}

/// The error for a line that is not what the kernel writes.
pub(crate) fn parse_error(path: &Path, line: usize, text: &str) -> TopologyError {
    TopologyError::Parse {
        path: path.to_path_buf(),
        line,
        text: text.trim_end().to_owned(),
    }
}

/// Parses a decimal integer the way the kernel prints one: digits only, no sign, no `0x`.
/// `None` also when the digits do not fit 64 bits.
pub(crate) fn decimal(text: &str) -> Option<u64> {
    if !is_decimal(text) {
        return None;
    }
    text.parse().ok()
}

/// Whether `text` is one or more ASCII digits.
pub(crate) fn is_decimal(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Turns lines into `(key, value)` entries, in file order, checking each known key's width
/// and that every required key of `schema` is present.
pub(crate) fn entries(
    lines: &[Line<'_>],
    path: &Path,
    schema: &[Key],
) -> Result<Vec<(String, u64)>, TopologyError> {
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        let value = decimal(line.value).ok_or_else(|| parse_error(path, line.number, line.text))?;
        let bits = schema.iter().find(|k| k.name == line.key).map(|k| k.bits);
        if bits == Some(32) && value > u64::from(u32::MAX) {
            return Err(TopologyError::OutOfRange {
                path: path.to_path_buf(),
                line: line.number,
                key: line.key.to_owned(),
                value,
                bits: 32,
            });
        }
        out.push((line.key.to_owned(), value));
    }
    if let Some(key) = schema
        .iter()
        .find(|k| k.required && lookup(&out, k.name).is_none())
    {
        return Err(TopologyError::MissingKey {
            path: path.to_path_buf(),
            key: key.name,
        });
    }
    Ok(out)
}

/// Parses a whole file of integer `key value` lines against `schema`.
pub(crate) fn parse(
    text: &str,
    path: &Path,
    schema: &[Key],
) -> Result<Vec<(String, u64)>, TopologyError> {
    entries(&lines(text, path)?, path, schema)
}

/// The value of the first line with `key`: like libhsakmt, which stops at the first match.
pub(crate) fn lookup(entries: &[(String, u64)], key: &str) -> Option<u64> {
    entries.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
}

/// [`lookup`] for a key whose field is 32 bits wide.
pub(crate) fn lookup_u32(entries: &[(String, u64)], key: &str) -> Option<u32> {
    lookup(entries, key).and_then(|v| u32::try_from(v).ok())
}

/// Prints entries the way the kernel does: `key value\n` per entry.
pub(crate) fn emit(entries: &[(String, u64)]) -> String {
    let mut out = String::new();
    for (key, value) in entries {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{key} {value}");
    }
    out
}
