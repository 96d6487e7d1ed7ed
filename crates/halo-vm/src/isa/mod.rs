//! IREE's VM instruction set (bytecode 17.0), defined once as data.
//!
//! Every instruction is an opcode in one of three opcode sets plus an ordered list of [`Field`]s
//! saying how its operands are encoded. The decoder, the verifier and the disassembler are all
//! driven by this table; only the interpreter's semantics are written per instruction.

pub mod decode;
pub mod disasm;
mod table;

pub use table::{Op, INSTRUCTIONS};

/// Bytecode version this ISA describes: (major, minor).
pub const BYTECODE_VERSION: (u16, u16) = (17, 0);

/// Opcode of the block marker that starts every basic block.
pub const BLOCK_MARKER: u8 = 0x79;
/// Prefix switching the next byte to the f32 extension set.
pub const PREFIX_EXT_F32: u8 = 0xE0;
/// Prefix switching the next byte to the f64 extension set.
pub const PREFIX_EXT_F64: u8 = 0xE1;

/// Bit marking a register ordinal in a variadic list as a ref register.
pub const REF_BANK_BIT: u16 = 0x8000;
/// Bit marking a ref register operand as moved rather than retained.
pub const REF_MOVE_BIT: u16 = 0x4000;
/// Mask of a ref register's ordinal.
pub const REF_ORDINAL_MASK: u16 = 0x3FFF;
/// Mask of an i32-bank register's ordinal.
pub const I32_ORDINAL_MASK: u16 = 0x7FFF;
/// Bit of a function ordinal that marks an import.
pub const IMPORT_ORDINAL_BIT: u32 = 0x8000_0000;

/// The three opcode tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpcodeSet {
    /// The core set, always available.
    Core,
    /// f32 extension (module feature EXT_F32), reached through prefix 0xE0.
    ExtF32,
    /// f64 extension (module feature EXT_F64), reached through prefix 0xE1.
    ExtF64,
}

/// The value kind a register or immediate holds. 64-bit kinds use an aligned pair of i32-bank
/// registers; refs live in their own bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bank {
    /// 32-bit integer.
    I32,
    /// 64-bit integer (register pair).
    I64,
    /// 32-bit float (i32 bank).
    F32,
    /// 64-bit float (register pair).
    F64,
    /// Reference-counted object.
    Ref,
}

impl Bank {
    /// Lower-case name as in mnemonics.
    pub fn name(self) -> &'static str {
        match self {
            Bank::I32 => "i32",
            Bank::I64 => "i64",
            Bank::F32 => "f32",
            Bank::F64 => "f64",
            Bank::Ref => "ref",
        }
    }

    /// True for the 64-bit kinds that occupy two i32-bank registers.
    pub fn is_wide(self) -> bool {
        matches!(self, Bank::I64 | Bank::F64)
    }
}

/// Whether an instruction reads or writes a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read.
    Read,
    /// Written.
    Write,
}

/// How one operand of an instruction is encoded, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// A u16 register ordinal; ref registers may carry the move bit when `moves` is set.
    Register {
        /// Register kind.
        bank: Bank,
        /// Read or written.
        access: Access,
        /// The move bit is allowed.
        moves: bool,
    },
    /// An immediate constant of the bank's width (4 or 8 bytes).
    Immediate(Bank),
    /// An i32 byte offset into the module's global storage (or a ref global ordinal).
    GlobalAttr,
    /// An i32 rodata segment ordinal.
    RodataAttr,
    /// An i32 function ordinal; bit 31 marks an import.
    FuncAttr,
    /// A u32 index into the module's type table.
    TypeId,
    /// A u16 length then that many bytes of UTF-8.
    StringAttr,
    /// A u16 count (branch tables).
    ConstI16,
    /// An i32 pc that must point at a block marker.
    BranchTarget,
    /// A 2-aligned remap list: u16 count then (u16 source, u16 target) pairs.
    BranchOperands,
    /// `count` (the preceding `ConstI16`) pairs of branch target and remap list.
    BranchTableCases,
    /// A 2-aligned register list: u16 count then u16 ordinals; `None` allows both banks, told
    /// apart by [`REF_BANK_BIT`].
    Operands(Option<Bank>),
    /// A 2-aligned list of literal segment sizes (u16 count, then u16 values), one per argument
    /// of the callee's calling convention: the tuple count of a variadic argument, 0xFFFF for
    /// the others.
    SegmentSizes,
    /// A 2-aligned list of result registers, like [`Field::Operands`].
    Results,
}

/// What an instruction does to control flow, for the verifier and the interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Falls through to the next instruction.
    Next,
    /// Never falls through (branches, returns, fails, yieldable calls, which resume at a block).
    Terminator,
}

/// One instruction of the ISA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstructionDef {
    /// Its name for the interpreter.
    pub op: Op,
    /// Its opcode set.
    pub set: OpcodeSet,
    /// Its opcode within the set.
    pub opcode: u8,
    /// Assembly mnemonic, e.g. `add.i32`.
    pub mnemonic: &'static str,
    /// Operands in encoding order.
    pub fields: &'static [Field],
    /// Control-flow kind.
    pub flow: Flow,
}

/// Index of an instruction in [`INSTRUCTIONS`]; stable for one build.
pub type InstructionId = u16;

/// Lookup tables from (set, opcode) to an index into [`INSTRUCTIONS`].
pub struct OpcodeTables {
    tables: [[Option<InstructionId>; 256]; 3],
}

impl OpcodeTables {
    fn build() -> Self {
        let mut tables = [[None; 256]; 3];
        for (index, def) in INSTRUCTIONS.iter().enumerate() {
            let slot = &mut tables[def.set as usize][def.opcode as usize];
            assert!(
                slot.is_none(),
                "opcode {:#x} of {:?} defined twice",
                def.opcode,
                def.set
            );
            *slot = Some(index as InstructionId);
        }
        OpcodeTables { tables }
    }

    /// The instruction with `opcode` in `set`, if any.
    pub fn lookup(&self, set: OpcodeSet, opcode: u8) -> Option<InstructionId> {
        self.tables[set as usize][opcode as usize]
    }
}

/// The opcode lookup tables, built once.
pub fn opcode_tables() -> &'static OpcodeTables {
    static TABLES: std::sync::OnceLock<OpcodeTables> = std::sync::OnceLock::new();
    TABLES.get_or_init(OpcodeTables::build)
}

/// The definition of instruction `id`.
pub fn instruction(id: InstructionId) -> &'static InstructionDef {
    &INSTRUCTIONS[id as usize]
}

/// The id of the instruction with `mnemonic`, for tests and tools.
pub fn find(mnemonic: &str) -> Option<InstructionId> {
    INSTRUCTIONS
        .iter()
        .position(|d| d.mnemonic == mnemonic)
        .map(|i| i as InstructionId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let tables = opcode_tables();
        assert_eq!(INSTRUCTIONS.len(), 262);
        assert_eq!(
            instruction(tables.lookup(OpcodeSet::Core, 0x22).unwrap()).mnemonic,
            "add.i32"
        );
        assert_eq!(
            instruction(tables.lookup(OpcodeSet::ExtF32, 0x27).unwrap()).mnemonic,
            "sqrt.f32"
        );
        assert_eq!(
            instruction(tables.lookup(OpcodeSet::ExtF64, 0x3f).unwrap()).mnemonic,
            "round.f64.even"
        );
        assert!(
            tables.lookup(OpcodeSet::Core, BLOCK_MARKER).is_none(),
            "the block marker is not an instruction"
        );
        for (index, def) in INSTRUCTIONS.iter().enumerate() {
            assert_eq!(def.op as usize, index, "{} is out of order", def.mnemonic);
        }
        let mut mnemonics: Vec<_> = INSTRUCTIONS.iter().map(|d| d.mnemonic).collect();
        mnemonics.sort();
        mnemonics.dedup();
        assert_eq!(mnemonics.len(), INSTRUCTIONS.len(), "mnemonics are unique");
    }
}
