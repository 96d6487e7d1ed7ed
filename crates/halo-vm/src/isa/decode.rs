//! Decoding one instruction from a function's bytecode, driven by the instruction table.

use super::{instruction, opcode_tables, Bank, Field, InstructionDef, InstructionId, OpcodeSet};
use super::{BLOCK_MARKER, PREFIX_EXT_F32, PREFIX_EXT_F64};
use std::fmt;

/// An immediate constant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Immediate {
    /// 32-bit integer.
    I32(i32),
    /// 64-bit integer.
    I64(i64),
    /// 32-bit float.
    F32(f32),
    /// 64-bit float.
    F64(f64),
}

/// A register as encoded: the raw u16 with its bank and move bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawRegister(pub u16);

impl RawRegister {
    /// True when the ref-bank bit is set.
    pub fn is_ref(self) -> bool {
        self.0 & super::REF_BANK_BIT != 0
    }
    /// True when a ref register carries the move bit.
    pub fn is_move(self) -> bool {
        self.is_ref() && self.0 & super::REF_MOVE_BIT != 0
    }
    /// The ordinal within its bank.
    pub fn ordinal(self) -> u16 {
        if self.is_ref() {
            self.0 & super::REF_ORDINAL_MASK
        } else {
            self.0
        }
    }
}

impl fmt::Display for RawRegister {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.is_ref(), self.is_move()) {
            (true, true) => write!(f, "%R{}", self.ordinal()),
            (true, false) => write!(f, "%r{}", self.ordinal()),
            (false, _) => write!(f, "%i{}", self.ordinal()),
        }
    }
}

/// One decoded operand, in field order.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand<'a> {
    /// A register of a known bank.
    Register(Bank, RawRegister),
    /// An immediate constant.
    Immediate(Immediate),
    /// Global byte offset or ref global ordinal.
    Global(u32),
    /// Rodata segment ordinal.
    Rodata(u32),
    /// Function ordinal (import bit included).
    Function(u32),
    /// Type table index.
    Type(u32),
    /// A string.
    String(&'a [u8]),
    /// A u16 count.
    Count(u16),
    /// A branch target pc.
    Target(u32),
    /// Branch operand remapping: (source, target) raw registers.
    Remap(Vec<(RawRegister, RawRegister)>),
    /// Branch table cases.
    Cases(Vec<(u32, Vec<(RawRegister, RawRegister)>)>),
    /// Literal segment sizes of a variadic call.
    Sizes(Vec<u16>),
    /// A register list; `Some(bank)` when the field fixes the bank.
    List(Option<Bank>, Vec<RawRegister>),
}

/// A decoded instruction.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<'a> {
    /// Which instruction.
    pub id: InstructionId,
    /// Its operands in field order.
    pub operands: Vec<Operand<'a>>,
    /// Offset of the byte after it.
    pub next_pc: usize,
}

impl Decoded<'_> {
    /// Its definition.
    pub fn def(&self) -> &'static InstructionDef {
        instruction(self.id)
    }
}

/// Why bytes failed to decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The instruction runs past the end of the function.
    Truncated,
    /// No instruction has this opcode.
    UnknownOpcode(OpcodeSet, u8),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("instruction runs past the end of the function"),
            DecodeError::UnknownOpcode(set, opcode) => write!(f, "unknown opcode {opcode:#04x} in the {set:?} set"),
        }
    }
}

struct Reader<'a> {
    code: &'a [u8],
    pc: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pc
            .checked_add(n)
            .filter(|end| *end <= self.code.len())
            .ok_or(DecodeError::Truncated)?;
        let bytes = &self.code[self.pc..end];
        self.pc = end;
        Ok(bytes)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn align2(&mut self) {
        self.pc += self.pc & 1;
    }
    fn register(&mut self) -> Result<RawRegister, DecodeError> {
        self.u16().map(RawRegister)
    }
    fn list(&mut self) -> Result<Vec<RawRegister>, DecodeError> {
        self.align2();
        let count = self.u16()? as usize;
        self.take(count * 2)?;
        let bytes = &self.code[self.pc - count * 2..self.pc];
        Ok(bytes
            .chunks_exact(2)
            .map(|c| RawRegister(u16::from_le_bytes([c[0], c[1]])))
            .collect())
    }
    fn remap(&mut self) -> Result<Vec<(RawRegister, RawRegister)>, DecodeError> {
        self.align2();
        let count = self.u16()? as usize;
        let bytes = self.take(count * 4)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| {
                (
                    RawRegister(u16::from_le_bytes([c[0], c[1]])),
                    RawRegister(u16::from_le_bytes([c[2], c[3]])),
                )
            })
            .collect())
    }
}

/// Decodes the instruction at `pc` (which must not be a block marker).
///
/// # Errors
/// [`DecodeError`] for an unknown opcode or bytes past the end of `code`.
pub fn decode(code: &[u8], pc: usize) -> Result<Decoded<'_>, DecodeError> {
    let mut reader = Reader { code, pc };
    let mut set = OpcodeSet::Core;
    let mut opcode = reader.u8()?;
    if opcode == PREFIX_EXT_F32 || opcode == PREFIX_EXT_F64 {
        set = if opcode == PREFIX_EXT_F32 {
            OpcodeSet::ExtF32
        } else {
            OpcodeSet::ExtF64
        };
        opcode = reader.u8()?;
    }
    if set == OpcodeSet::Core && opcode == BLOCK_MARKER {
        return Err(DecodeError::UnknownOpcode(set, opcode));
    }
    let id = opcode_tables()
        .lookup(set, opcode)
        .ok_or(DecodeError::UnknownOpcode(set, opcode))?;
    let def = instruction(id);
    let mut operands = Vec::with_capacity(def.fields.len());
    let mut last_count = 0u16;
    for field in def.fields {
        let operand = match *field {
            Field::Register { bank, .. } => Operand::Register(bank, reader.register()?),
            Field::Immediate(bank) => Operand::Immediate(match bank {
                Bank::I32 => Immediate::I32(reader.u32()? as i32),
                Bank::I64 => Immediate::I64(reader.u64()? as i64),
                Bank::F32 => Immediate::F32(f32::from_bits(reader.u32()?)),
                Bank::F64 => Immediate::F64(f64::from_bits(reader.u64()?)),
                Bank::Ref => unreachable!("no ref immediates in the table"),
            }),
            Field::GlobalAttr => Operand::Global(reader.u32()?),
            Field::RodataAttr => Operand::Rodata(reader.u32()?),
            Field::FuncAttr => Operand::Function(reader.u32()?),
            Field::TypeId => Operand::Type(reader.u32()?),
            Field::StringAttr => {
                let length = reader.u16()? as usize;
                Operand::String(reader.take(length)?)
            }
            Field::ConstI16 => {
                last_count = reader.u16()?;
                Operand::Count(last_count)
            }
            Field::BranchTarget => Operand::Target(reader.u32()?),
            Field::BranchOperands => Operand::Remap(reader.remap()?),
            Field::BranchTableCases => {
                let mut cases = Vec::with_capacity(last_count as usize);
                for _ in 0..last_count {
                    let target = reader.u32()?;
                    cases.push((target, reader.remap()?));
                }
                Operand::Cases(cases)
            }
            Field::Operands(bank) => Operand::List(bank, reader.list()?),
            Field::SegmentSizes => Operand::Sizes(reader.list()?.into_iter().map(|r| r.0).collect()),
            Field::Results => Operand::List(None, reader.list()?),
        };
        operands.push(operand);
    }
    Ok(Decoded {
        id,
        operands,
        next_pc: reader.pc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::find;

    #[test]
    fn decodes_binary_and_lists() {
        // add.i32 %i1, %i2 -> %i3
        let code = [0x22, 1, 0, 2, 0, 3, 0];
        let decoded = decode(&code, 0).unwrap();
        assert_eq!(decoded.def().mnemonic, "add.i32");
        assert_eq!(decoded.next_pc, 7);
        assert_eq!(decoded.operands[2], Operand::Register(Bank::I32, RawRegister(3)));
        // return: the list after the opcode is aligned to 2, so one pad byte; count 1, %r0 moved
        let code = [0x5a, 0xFF, 1, 0, 0x00, 0xC0];
        let decoded = decode(&code, 0).unwrap();
        assert_eq!(decoded.id, find("return").unwrap());
        assert_eq!(decoded.operands[0], Operand::List(None, vec![RawRegister(0xC000)]));
        assert!(RawRegister(0xC000).is_move());
        // sqrt.f32 through the prefix
        let decoded = decode(&[0xE0, 0x27, 4, 0, 5, 0], 0).unwrap();
        assert_eq!(decoded.def().mnemonic, "sqrt.f32");
    }

    #[test]
    fn rejects_truncation_and_unknown_opcodes() {
        assert_eq!(decode(&[0x22, 1, 0, 2], 0), Err(DecodeError::Truncated));
        assert_eq!(decode(&[0xE0], 0), Err(DecodeError::Truncated));
        assert_eq!(
            decode(&[0xF7], 0),
            Err(DecodeError::UnknownOpcode(OpcodeSet::Core, 0xF7))
        );
        assert_eq!(
            decode(&[0xE1, 0x70], 0),
            Err(DecodeError::UnknownOpcode(OpcodeSet::ExtF64, 0x70))
        );
        // A list claiming more registers than remain.
        assert_eq!(decode(&[0x5a, 0, 9, 0, 1, 0], 0), Err(DecodeError::Truncated));
    }
}
