//! The decoder's one error type.

use crate::opcode::Encoding;

/// Why an instruction did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The stream ended inside an instruction.
    #[error("truncated instruction: needs {needed} dwords, {available} left")]
    Truncated {
        /// Dwords the instruction needs.
        needed: u8,
        /// Dwords the stream had left.
        available: usize,
    },
    /// The first dword matches no gfx9 encoding.
    #[error("no gfx9 encoding starts with {word:#010x}")]
    UnknownEncoding {
        /// The first dword.
        word: u32,
    },
    /// The encoding is known but its opcode is not in this decoder's table.
    #[error("unknown {encoding:?} opcode {op} (first dword {word:#010x})")]
    UnknownOpcode {
        /// The encoding.
        encoding: Encoding,
        /// The opcode field.
        op: u16,
        /// The first dword.
        word: u32,
    },
    /// An operand field holds a reserved code, or one the form does not allow (a literal in
    /// VOP3 on gfx9).
    #[error("illegal operand code {code}")]
    IllegalOperand {
        /// The operand field's value.
        code: u16,
    },
    /// A gfx9 form this decoder does not handle yet (MIMG, EXP, VINTRP).
    #[error("{what} is not decoded yet (first dword {word:#010x})")]
    Unsupported {
        /// The form.
        what: &'static str,
        /// The first dword.
        word: u32,
    },
}
