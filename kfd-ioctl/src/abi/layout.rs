//! The layout registry: every struct, field, constant and macro of the raw ABI, as data.
//!
//! The registry is emitted by the same macro invocations that define the Rust items, so it
//! cannot drift from them. The layout test (`tests/layout.rs`) turns it into a C probe, compiles
//! that against a real `linux/kfd_ioctl.h` and compares every size, offset and value; the
//! emulator and the safe layer may use it to reason about what a given KFD minor version has.

use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::{criu, debug, event, memory, opcodes, profiler, queue, smi, svm, version};

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

/// Concatenates registry slices into one array at compile time.
const fn concat<T: Copy, const N: usize>(parts: &[&[T]], fill: T) -> [T; N] {
    let mut out = [fill; N];
    let mut k = 0;
    let mut i = 0;
    while i < parts.len() {
        let part = parts[i];
        let mut j = 0;
        while j < part.len() {
            out[k] = part[j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N);
    out
}

const fn total_len<T>(parts: &[&[T]]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

const STRUCT_PARTS: &[&[StructLayout]] = &[
    version::VERSION_STRUCTS,
    queue::QUEUE_STRUCTS,
    memory::MEMORY_STRUCTS,
    event::EVENT_STRUCTS,
    smi::SMI_STRUCTS,
    criu::CRIU_STRUCTS,
    svm::SVM_STRUCTS,
    debug::DEBUG_STRUCTS,
    profiler::PROFILER_STRUCTS,
];

const CONST_PARTS: &[&[ConstLayout]] = &[
    version::VERSION_CONSTS,
    opcodes::OPCODE_CONSTS,
    queue::QUEUE_CONSTS,
    memory::MEMORY_CONSTS,
    memory::ALLOC_FLAG_CONSTS,
    event::EVENT_CONSTS,
    smi::SMI_CONSTS,
    criu::CRIU_CONSTS,
    svm::SVM_CONSTS,
    svm::SVM_FLAG_CONSTS,
    memory::PROC_FLAG_CONSTS,
    debug::DEBUG_CONSTS,
    debug::DBG_TRAP_MASK_CONSTS,
    debug::DBG_TRAP_FLAG_CONSTS,
    debug::RUNTIME_MODE_CONSTS,
    profiler::PROFILER_CONSTS,
];

const MACRO_PARTS: &[&[MacroLayout]] =
    &[opcodes::OPCODE_MACROS, smi::SMI_MACROS, debug::DEBUG_MACROS];

const EMPTY_STRUCT: StructLayout = StructLayout {
    name: "",
    since_minor: 0,
    size: 0,
    size_since_minor: 0,
    older_sizes: &[],
    fields: &[],
};

const EMPTY_CONST: ConstLayout = ConstLayout {
    name: "",
    value: 0,
    bits: 0,
    signed: false,
    since_minor: 0,
};

const EMPTY_MACRO: MacroLayout = MacroLayout {
    name: "",
    since_minor: 0,
    kind: MacroKind::Format { value: "" },
};

const STRUCT_ARRAY: [StructLayout; total_len(STRUCT_PARTS)] = concat(STRUCT_PARTS, EMPTY_STRUCT);
const CONST_ARRAY: [ConstLayout; total_len(CONST_PARTS)] = concat(CONST_PARTS, EMPTY_CONST);
const MACRO_ARRAY: [MacroLayout; total_len(MACRO_PARTS)] = concat(MACRO_PARTS, EMPTY_MACRO);

/// Every struct of the uapi header that has a C name (the anonymous `wave_state` struct is
/// reached through its parent's fields).
pub const STRUCTS: &[StructLayout] = &STRUCT_ARRAY;

/// Every object-like `#define` and enum value of the uapi header except the `AMDKFD_IOC_*`
/// opcodes, which are in [`IOCTLS`](super::IOCTLS).
pub const CONSTANTS: &[ConstLayout] = &CONST_ARRAY;

/// Every function-like macro of the uapi header.
pub const MACROS: &[MacroLayout] = &MACRO_ARRAY;

/// Returns the layout of the struct with this C name.
pub fn struct_layout(name: &str) -> Option<&'static StructLayout> {
    STRUCTS.iter().find(|s| s.name == name)
}

/// Returns the constant with this C name.
pub fn constant(name: &str) -> Option<&'static ConstLayout> {
    CONSTANTS.iter().find(|c| c.name == name)
}
