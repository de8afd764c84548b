//! The layout registry: every struct, field, constant and macro of the raw ABI, as data.
//!
//! The registry is emitted by the same macro invocations that define the Rust items, so it
//! cannot drift from them. The layout test (`tests/layout.rs`) turns it into a C probe, compiles
//! that against a real `linux/kfd_ioctl.h` and compares every size, offset and value; the
//! emulator and the safe layer may use it to reason about what a given KFD minor version has.

pub(crate) mod types;

pub use types::{
    AbiStruct, AbiType, ConstLayout, FieldKind, FieldLayout, FlatField, MacroKind, MacroLayout,
    StructLayout,
};

use super::{criu, debug, event, memory, opcodes, profiler, queue, smi, svm, version};

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
