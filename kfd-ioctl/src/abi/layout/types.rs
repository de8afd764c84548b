//! The registry's record types and the traits and helpers the definition macros expand to;
//! the topic modules and the collected lists in [`layout`](super) both use them.

use zerocopy::{FromBytes, Immutable, IntoBytes};

/// What a [`FieldLayout`] stands for on the C side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// A C member with this name (for union members, a member of the anonymous union).
    Named,
    /// Rust-only bytes that C leaves as implicit padding (no C member has this name).
    Padding,
    /// Rust-only storage of an anonymous C union; its members follow as [`FieldKind::Named`]
    /// entries at the same offset.
    Union,
    /// A C flexible array member: it starts at the struct's size and has no size of its own.
    Flexible,
}

/// The layout of one field of an ABI struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldLayout {
    /// The C member name (a Rust-only name for [`FieldKind::Padding`] and [`FieldKind::Union`]).
    pub name: &'static str,
    /// Byte offset within the containing struct.
    pub offset: usize,
    /// Size in bytes (0 for a flexible array member).
    pub size: usize,
    /// The KFD minor at which the field appeared in the uapi header.
    pub since_minor: u32,
    /// What the field is on the C side.
    pub kind: FieldKind,
    /// The fields of the field's own struct type, with offsets relative to this field (empty
    /// for integers and arrays).
    pub fields: &'static [FieldLayout],
}

/// The layout of one ABI struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StructLayout {
    /// The C struct name (`kfd_ioctl_alloc_memory_of_gpu_args`).
    pub name: &'static str,
    /// The KFD minor at which the struct appeared in the uapi header.
    pub since_minor: u32,
    /// `sizeof` in the newest header.
    pub size: usize,
    /// The KFD minor from which [`size`](Self::size) holds.
    pub size_since_minor: u32,
    /// Earlier sizes as `(since_minor, size)`, oldest first.
    pub older_sizes: &'static [(u32, usize)],
    /// The fields, in declaration order, followed by union members and a flexible array.
    pub fields: &'static [FieldLayout],
}

/// A field of a [`StructLayout`] flattened to a C member path and an absolute offset.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlatField {
    /// The C member designator: `memory_exception_data.failure.NotPresent`.
    pub path: String,
    /// Byte offset from the start of the outermost struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// The newest `since_minor` along the path.
    pub since_minor: u32,
    /// What the innermost field is on the C side.
    pub kind: FieldKind,
}

impl StructLayout {
    /// Returns `sizeof` the struct as the uapi header of KFD `minor` had it, or `None` when
    /// the struct did not exist yet.
    pub fn size_at(&self, minor: u32) -> Option<usize> {
        if minor < self.since_minor {
            return None;
        }
        if minor >= self.size_since_minor {
            return Some(self.size);
        }
        self.older_sizes
            .iter()
            .rev()
            .find(|(since, _)| minor >= *since)
            .map(|(_, size)| *size)
    }

    /// Returns every field and nested member, depth first, with C member paths and absolute
    /// offsets.
    pub fn flat_fields(&self) -> Vec<FlatField> {
        let mut out = Vec::new();
        flatten(self.fields, "", 0, self.since_minor, &mut out);
        out
    }
}

fn flatten(
    fields: &[FieldLayout],
    prefix: &str,
    base: usize,
    since: u32,
    out: &mut Vec<FlatField>,
) {
    for field in fields {
        let path = if prefix.is_empty() {
            field.name.to_string()
        } else {
            format!("{prefix}.{}", field.name)
        };
        let since_minor = since.max(field.since_minor);
        out.push(FlatField {
            path: path.clone(),
            offset: base + field.offset,
            size: field.size,
            since_minor,
            kind: field.kind,
        });
        // Members of Rust-only storage have no C path below it.
        if field.kind == FieldKind::Named {
            flatten(field.fields, &path, base + field.offset, since_minor, out);
        }
    }
}

/// One constant (`#define` or enum value) of the uapi header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConstLayout {
    /// The C name, which is also the Rust name.
    pub name: &'static str,
    /// The value of the Rust constant.
    pub value: i128,
    /// Width in bits of the Rust constant's type.
    pub bits: u32,
    /// Whether the Rust constant's type is signed.
    pub signed: bool,
    /// The KFD minor from which the header has this constant with this value.
    pub since_minor: u32,
}

/// What a function-like C macro is mirrored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacroKind {
    /// A `const fn` with this Rust name (the C name is its `doc(alias)`).
    Function {
        /// The Rust function's name.
        rust_name: &'static str,
    },
    /// A `KFD_EVENT_FMT_*` macro, mirrored as a `&str` constant holding its printf format.
    Format {
        /// The format string.
        value: &'static str,
    },
}

/// One function-like macro of the uapi header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacroLayout {
    /// The C macro name.
    pub name: &'static str,
    /// The KFD minor from which the header has the macro with these semantics.
    pub since_minor: u32,
    /// What the Rust side mirrors it as.
    pub kind: MacroKind,
}

/// A Rust type that appears in ABI structs, with the layout of its fields (empty for
/// integers and arrays).
pub trait AbiType {
    /// The fields of the type, with offsets relative to its start.
    const FIELDS: &'static [FieldLayout];
}

/// An ABI struct mirrored from the uapi header.
pub trait AbiStruct: AbiType {
    /// The struct's layout record.
    const LAYOUT: StructLayout;
}

macro_rules! abi_scalar {
    ($($ty:ty),*) => {$(
        impl AbiType for $ty {
            const FIELDS: &'static [FieldLayout] = &[];
        }
    )*};
}
abi_scalar!(u8, u16, u32, u64, i32, i64);

impl<T, const N: usize> AbiType for [T; N] {
    const FIELDS: &'static [FieldLayout] = &[];
}

/// Returns a field's C name from its Rust spelling (`r#type` is C's `type`).
pub(crate) const fn c_name(rust: &'static str) -> &'static str {
    match rust.as_bytes() {
        [b'r', b'#', rest @ ..] => match core::str::from_utf8(rest) {
            Ok(name) => name,
            Err(_) => rust,
        },
        _ => rust,
    }
}

/// Returns the size of the field that `project` borrows; used by the definition macros.
pub(crate) const fn size_of_field<T, F>(_project: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Returns the alignment of the field that `project` borrows; used by the definition macros.
pub(crate) const fn align_of_field<T, F>(_project: fn(&T) -> &F) -> usize {
    core::mem::align_of::<F>()
}

/// Reads a union member from the leading bytes of its storage.
pub(crate) fn union_read<T: FromBytes>(payload: &[u8]) -> T {
    // The definition macro asserts at compile time that every member fits its storage, so
    // the zeroed fallback is never taken.
    match T::read_from_prefix(payload) {
        Ok((value, _)) => value,
        Err(_) => T::new_zeroed(),
    }
}

/// Writes a union member into the leading bytes of its storage and zeroes the rest.
pub(crate) fn union_write<T: IntoBytes + Immutable>(payload: &mut [u8], value: &T) {
    let bytes = value.as_bytes();
    payload.fill(0);
    if let Some(dst) = payload.get_mut(..bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}
