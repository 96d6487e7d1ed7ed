//! Fallible access to an instruction's operands: the module is untrusted input, so a missing or
//! mistyped operand is an error naming the instruction, never a panic (rspirv's `unwrap_*` panic).

use halo_hal::{Error, Result};
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{BuiltIn, Decoration, StorageClass, Word};

/// The name of an instruction's opcode, for messages.
pub(crate) fn op_name(instruction: &Instruction) -> &'static str {
    instruction.class.opname
}

fn malformed(instruction: &Instruction, index: usize, wanted: &str) -> Error {
    Error::invalid_argument(format!(
        "SPIR-V Op{} (result {:?}): operand {index} is not {wanted}",
        op_name(instruction),
        instruction.result_id
    ))
}

/// Operand `index` as an id.
pub(crate) fn id(instruction: &Instruction, index: usize) -> Result<Word> {
    match instruction.operands.get(index) {
        Some(Operand::IdRef(id)) | Some(Operand::IdScope(id)) | Some(Operand::IdMemorySemantics(id)) => Ok(*id),
        _ => Err(malformed(instruction, index, "an id")),
    }
}

/// Operand `index` as a 32-bit literal.
pub(crate) fn literal(instruction: &Instruction, index: usize) -> Result<u32> {
    match instruction.operands.get(index) {
        Some(Operand::LiteralBit32(value)) | Some(Operand::LiteralExtInstInteger(value)) => Ok(*value),
        _ => Err(malformed(instruction, index, "a 32-bit literal")),
    }
}

/// Operand `index` as a string literal.
pub(crate) fn string(instruction: &Instruction, index: usize) -> Result<&str> {
    match instruction.operands.get(index) {
        Some(Operand::LiteralString(text)) => Ok(text),
        _ => Err(malformed(instruction, index, "a string")),
    }
}

/// Operand `index` as a storage class.
pub(crate) fn storage_class(instruction: &Instruction, index: usize) -> Result<StorageClass> {
    match instruction.operands.get(index) {
        Some(Operand::StorageClass(class)) => Ok(*class),
        _ => Err(malformed(instruction, index, "a storage class")),
    }
}

/// Operand `index` as a decoration.
pub(crate) fn decoration(instruction: &Instruction, index: usize) -> Result<Decoration> {
    match instruction.operands.get(index) {
        Some(Operand::Decoration(decoration)) => Ok(*decoration),
        _ => Err(malformed(instruction, index, "a decoration")),
    }
}

/// Operand `index` as a builtin.
pub(crate) fn builtin(instruction: &Instruction, index: usize) -> Result<BuiltIn> {
    match instruction.operands.get(index) {
        Some(Operand::BuiltIn(builtin)) => Ok(*builtin),
        _ => Err(malformed(instruction, index, "a builtin")),
    }
}

/// The instruction's result id.
pub(crate) fn result_id(instruction: &Instruction) -> Result<Word> {
    instruction
        .result_id
        .ok_or_else(|| Error::invalid_argument(format!("SPIR-V Op{} has no result id", op_name(instruction))))
}

/// The instruction's result type.
pub(crate) fn result_type(instruction: &Instruction) -> Result<Word> {
    instruction.result_type.ok_or_else(|| {
        Error::invalid_argument(format!(
            "SPIR-V Op{} (result {:?}) has no result type",
            op_name(instruction),
            instruction.result_id
        ))
    })
}
