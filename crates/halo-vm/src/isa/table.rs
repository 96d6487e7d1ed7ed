//! The instruction table: opcodes, mnemonics and operand encodings of bytecode 17.0.

use super::Bank::{F32, F64, I32, I64};
use super::{Access, Bank, Field, Flow, InstructionDef, OpcodeSet};

const fn r(bank: Bank) -> Field {
    Field::Register {
        bank,
        access: Access::Read,
        moves: false,
    }
}
const fn w(bank: Bank) -> Field {
    Field::Register {
        bank,
        access: Access::Write,
        moves: false,
    }
}
const fn ref_r(moves: bool) -> Field {
    Field::Register {
        bank: Bank::Ref,
        access: Access::Read,
        moves,
    }
}
const fn ref_w(moves: bool) -> Field {
    Field::Register {
        bank: Bank::Ref,
        access: Access::Write,
        moves,
    }
}

const ASSIGN_REF: &[Field] = &[ref_r(true), ref_w(true)];
const BRANCH: &[Field] = &[Field::BranchTarget, Field::BranchOperands];
const BRANCH_TABLE: &[Field] = &[
    r(I32),
    Field::BranchTarget,
    Field::BranchOperands,
    Field::ConstI16,
    Field::BranchTableCases,
];
const BUFFER_ALLOC: &[Field] = &[r(I64), r(I32), ref_w(true)];
const BUFFER_CLONE: &[Field] = &[ref_r(false), r(I64), r(I64), r(I32), ref_w(true)];
const BUFFER_COMPARE: &[Field] = &[ref_r(false), r(I64), ref_r(false), r(I64), r(I64), w(I32)];
const BUFFER_COPY: &[Field] = &[ref_r(false), r(I64), ref_r(false), r(I64), r(I64)];
const BUFFER_HASH: &[Field] = &[ref_r(false), r(I64), r(I64), w(I64)];
const BUFFER_LENGTH: &[Field] = &[ref_r(false), w(I64)];
const CALL: &[Field] = &[Field::FuncAttr, Field::Operands(None), Field::Results];
const CALL_VARIADIC: &[Field] = &[
    Field::FuncAttr,
    Field::Operands(Some(Bank::I32)),
    Field::Operands(None),
    Field::Results,
];
const CALL_VARIADIC_YIELDABLE: &[Field] = &[
    Field::FuncAttr,
    Field::Operands(Some(Bank::I32)),
    Field::Operands(None),
    Field::BranchTarget,
    Field::Results,
];
const CAST_ANY_REF: &[Field] = &[ref_r(true), Field::TypeId, ref_w(true)];
const CONDITIONAL_BRANCH: &[Field] = &[
    r(I32),
    Field::BranchTarget,
    Field::BranchOperands,
    Field::BranchTarget,
    Field::BranchOperands,
];
const CONDITIONAL_BREAK: &[Field] = &[r(I32), Field::BranchTarget, Field::BranchOperands];
const CONST_REF_RODATA: &[Field] = &[Field::RodataAttr, ref_w(true)];
const CONST_REF_ZERO: &[Field] = &[ref_w(true)];
const DISCARD_REFS: &[Field] = &[Field::Operands(None)];
const F32_BINARY: &[Field] = &[r(F32), r(F32), w(F32)];
const F32_BINARY_COMPARISON: &[Field] = &[r(F32), r(F32), w(I32)];
const F32_BUFFER_FILL: &[Field] = &[ref_r(false), r(I64), r(I64), r(F32)];
const F32_BUFFER_LOAD: &[Field] = &[ref_r(false), r(I64), w(F32)];
const F32_BUFFER_STORE: &[Field] = &[ref_r(false), r(I64), r(F32)];
const F32_CONSTANT: &[Field] = &[Field::Immediate(Bank::F32), w(F32)];
const F32_GLOBAL_LOAD: &[Field] = &[Field::GlobalAttr, w(F32)];
const F32_GLOBAL_LOAD_INDIRECT: &[Field] = &[r(I32), w(F32)];
const F32_GLOBAL_STORE: &[Field] = &[Field::GlobalAttr, r(F32)];
const F32_GLOBAL_STORE_INDIRECT: &[Field] = &[r(I32), r(F32)];
const F32_LIST_GET: &[Field] = &[ref_r(false), r(I32), w(F32)];
const F32_LIST_SET: &[Field] = &[ref_r(false), r(I32), r(F32)];
const F32_SELECT: &[Field] = &[r(I32), r(F32), r(F32), w(F32)];
const F32_SWITCH: &[Field] = &[r(I32), r(F32), Field::Operands(Some(Bank::F32)), w(F32)];
const F32_TERNARY: &[Field] = &[r(F32), r(F32), r(F32), w(F32)];
const F32_TO_F64_CONVERSION: &[Field] = &[r(F32), w(F64)];
const F32_TO_I32_CONVERSION: &[Field] = &[r(F32), w(I32)];
const F32_TO_I64_CONVERSION: &[Field] = &[r(F32), w(I64)];
const F32_UNARY: &[Field] = &[r(F32), w(F32)];
const F32_UNARY_COMPARISON: &[Field] = &[r(F32), w(I32)];
const F32_ZERO_CONSTANT: &[Field] = &[w(F32)];
const F64_BINARY: &[Field] = &[r(F64), r(F64), w(F64)];
const F64_BINARY_COMPARISON: &[Field] = &[r(F64), r(F64), w(I32)];
const F64_BUFFER_FILL: &[Field] = &[ref_r(false), r(I64), r(I64), r(F64)];
const F64_BUFFER_LOAD: &[Field] = &[ref_r(false), r(I64), w(F64)];
const F64_BUFFER_STORE: &[Field] = &[ref_r(false), r(I64), r(F64)];
const F64_CONSTANT: &[Field] = &[Field::Immediate(Bank::F64), w(F64)];
const F64_GLOBAL_LOAD: &[Field] = &[Field::GlobalAttr, w(F64)];
const F64_GLOBAL_LOAD_INDIRECT: &[Field] = &[r(I32), w(F64)];
const F64_GLOBAL_STORE: &[Field] = &[Field::GlobalAttr, r(F64)];
const F64_GLOBAL_STORE_INDIRECT: &[Field] = &[r(I32), r(F64)];
const F64_LIST_GET: &[Field] = &[ref_r(false), r(I32), w(F64)];
const F64_LIST_SET: &[Field] = &[ref_r(false), r(I32), r(F64)];
const F64_SELECT: &[Field] = &[r(I32), r(F64), r(F64), w(F64)];
const F64_SWITCH: &[Field] = &[r(I32), r(F64), Field::Operands(Some(Bank::F64)), w(F64)];
const F64_TERNARY: &[Field] = &[r(F64), r(F64), r(F64), w(F64)];
const F64_TO_F32_CONVERSION: &[Field] = &[r(F64), w(F32)];
const F64_TO_I32_CONVERSION: &[Field] = &[r(F64), w(I32)];
const F64_TO_I64_CONVERSION: &[Field] = &[r(F64), w(I64)];
const F64_UNARY: &[Field] = &[r(F64), w(F64)];
const F64_UNARY_COMPARISON: &[Field] = &[r(F64), w(I32)];
const F64_ZERO_CONSTANT: &[Field] = &[w(F64)];
const FAIL: &[Field] = &[r(I32), Field::StringAttr];
const GLOBAL_LOAD_INDIRECT_REF: &[Field] = &[r(I32), Field::TypeId, ref_w(true)];
const GLOBAL_LOAD_REF: &[Field] = &[Field::GlobalAttr, Field::TypeId, ref_w(true)];
const GLOBAL_STORE_INDIRECT_REF: &[Field] = &[r(I32), Field::TypeId, ref_r(true)];
const GLOBAL_STORE_REF: &[Field] = &[Field::GlobalAttr, Field::TypeId, ref_r(true)];
const I32_BINARY: &[Field] = &[r(I32), r(I32), w(I32)];
const I32_BINARY_COMPARISON: &[Field] = &[r(I32), r(I32), w(I32)];
const I32_BUFFER_FILL: &[Field] = &[ref_r(false), r(I64), r(I64), r(I32)];
const I32_BUFFER_LOAD: &[Field] = &[ref_r(false), r(I64), w(I32)];
const I32_BUFFER_STORE: &[Field] = &[ref_r(false), r(I64), r(I32)];
const I32_CONSTANT: &[Field] = &[Field::Immediate(Bank::I32), w(I32)];
const I32_GLOBAL_LOAD: &[Field] = &[Field::GlobalAttr, w(I32)];
const I32_GLOBAL_LOAD_INDIRECT: &[Field] = &[r(I32), w(I32)];
const I32_GLOBAL_STORE: &[Field] = &[Field::GlobalAttr, r(I32)];
const I32_GLOBAL_STORE_INDIRECT: &[Field] = &[r(I32), r(I32)];
const I32_LIST_GET: &[Field] = &[ref_r(false), r(I32), w(I32)];
const I32_LIST_SET: &[Field] = &[ref_r(false), r(I32), r(I32)];
const I32_SELECT: &[Field] = &[r(I32), r(I32), r(I32), w(I32)];
const I32_SHIFT: &[Field] = &[r(I32), r(I32), w(I32)];
const I32_SWITCH: &[Field] = &[r(I32), r(I32), Field::Operands(Some(Bank::I32)), w(I32)];
const I32_TERNARY: &[Field] = &[r(I32), r(I32), r(I32), w(I32)];
const I32_TO_F32_CONVERSION: &[Field] = &[r(I32), w(F32)];
const I32_TO_F64_CONVERSION: &[Field] = &[r(I32), w(F64)];
const I32_TO_I64_CONVERSION: &[Field] = &[r(I32), w(I64)];
const I32_UNARY: &[Field] = &[r(I32), w(I32)];
const I32_UNARY_COMPARISON: &[Field] = &[r(I32), w(I32)];
const I32_ZERO_CONSTANT: &[Field] = &[w(I32)];
const I64_BINARY: &[Field] = &[r(I64), r(I64), w(I64)];
const I64_BINARY_COMPARISON: &[Field] = &[r(I64), r(I64), w(I32)];
const I64_BUFFER_FILL: &[Field] = &[ref_r(false), r(I64), r(I64), r(I64)];
const I64_BUFFER_LOAD: &[Field] = &[ref_r(false), r(I64), w(I64)];
const I64_BUFFER_STORE: &[Field] = &[ref_r(false), r(I64), r(I64)];
const I64_CONSTANT: &[Field] = &[Field::Immediate(Bank::I64), w(I64)];
const I64_GLOBAL_LOAD: &[Field] = &[Field::GlobalAttr, w(I64)];
const I64_GLOBAL_LOAD_INDIRECT: &[Field] = &[r(I32), w(I64)];
const I64_GLOBAL_STORE: &[Field] = &[Field::GlobalAttr, r(I64)];
const I64_GLOBAL_STORE_INDIRECT: &[Field] = &[r(I32), r(I64)];
const I64_LIST_GET: &[Field] = &[ref_r(false), r(I32), w(I64)];
const I64_LIST_SET: &[Field] = &[ref_r(false), r(I32), r(I64)];
const I64_SELECT: &[Field] = &[r(I32), r(I64), r(I64), w(I64)];
const I64_SHIFT: &[Field] = &[r(I64), r(I32), w(I64)];
const I64_SWITCH: &[Field] = &[r(I32), r(I64), Field::Operands(Some(Bank::I64)), w(I64)];
const I64_TERNARY: &[Field] = &[r(I64), r(I64), r(I64), w(I64)];
const I64_TO_F32_CONVERSION: &[Field] = &[r(I64), w(F32)];
const I64_TO_F64_CONVERSION: &[Field] = &[r(I64), w(F64)];
const I64_TO_I32_CONVERSION: &[Field] = &[r(I64), w(I32)];
const I64_UNARY: &[Field] = &[r(I64), w(I64)];
const I64_UNARY_COMPARISON: &[Field] = &[r(I64), w(I32)];
const I64_ZERO_CONSTANT: &[Field] = &[w(I64)];
const IMPORT_RESOLVED: &[Field] = &[Field::FuncAttr, w(I32)];
const LIST_ALLOC: &[Field] = &[Field::TypeId, r(I32), ref_w(true)];
const LIST_GET_REF: &[Field] = &[ref_r(false), r(I32), Field::TypeId, ref_w(true)];
const LIST_RESERVE: &[Field] = &[ref_r(false), r(I32)];
const LIST_RESIZE: &[Field] = &[ref_r(false), r(I32)];
const LIST_SET_REF: &[Field] = &[ref_r(false), r(I32), ref_r(true)];
const LIST_SIZE: &[Field] = &[ref_r(false), w(I32)];
const REF_BINARY_COMPARISON: &[Field] = &[ref_r(false), ref_r(false), w(I32)];
const REF_UNARY_COMPARISON: &[Field] = &[ref_r(false), w(I32)];
const RETURN: &[Field] = &[Field::Operands(None)];
const SELECT_REF: &[Field] = &[r(I32), Field::TypeId, ref_r(true), ref_r(true), ref_w(true)];
const SWITCH_REF: &[Field] = &[
    r(I32),
    Field::TypeId,
    ref_r(true),
    Field::Operands(Some(Bank::Ref)),
    ref_w(true),
];
const TRACE: &[Field] = &[Field::StringAttr, Field::Operands(None)];
const YIELDABLE_CALL: &[Field] = &[
    Field::FuncAttr,
    Field::Operands(None),
    Field::BranchTarget,
    Field::Results,
];

/// Every instruction, in opcode order per set.
pub static INSTRUCTIONS: &[InstructionDef] = &[
    def(OpcodeSet::Core, 0x0, "global.load.i32", I32_GLOBAL_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x1, "global.store.i32", I32_GLOBAL_STORE, Flow::Next),
    def(
        OpcodeSet::Core,
        0x2,
        "global.load.indirect.i32",
        I32_GLOBAL_LOAD_INDIRECT,
        Flow::Next,
    ),
    def(
        OpcodeSet::Core,
        0x3,
        "global.store.indirect.i32",
        I32_GLOBAL_STORE_INDIRECT,
        Flow::Next,
    ),
    def(OpcodeSet::Core, 0x4, "global.load.i64", I64_GLOBAL_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x5, "global.store.i64", I64_GLOBAL_STORE, Flow::Next),
    def(
        OpcodeSet::Core,
        0x6,
        "global.load.indirect.i64",
        I64_GLOBAL_LOAD_INDIRECT,
        Flow::Next,
    ),
    def(
        OpcodeSet::Core,
        0x7,
        "global.store.indirect.i64",
        I64_GLOBAL_STORE_INDIRECT,
        Flow::Next,
    ),
    def(OpcodeSet::Core, 0x8, "global.load.ref", GLOBAL_LOAD_REF, Flow::Next),
    def(OpcodeSet::Core, 0x9, "global.store.ref", GLOBAL_STORE_REF, Flow::Next),
    def(
        OpcodeSet::Core,
        0xa,
        "global.load.indirect.ref",
        GLOBAL_LOAD_INDIRECT_REF,
        Flow::Next,
    ),
    def(
        OpcodeSet::Core,
        0xb,
        "global.store.indirect.ref",
        GLOBAL_STORE_INDIRECT_REF,
        Flow::Next,
    ),
    def(OpcodeSet::Core, 0xc, "const.i32.zero", I32_ZERO_CONSTANT, Flow::Next),
    def(OpcodeSet::Core, 0xd, "const.i32", I32_CONSTANT, Flow::Next),
    def(OpcodeSet::Core, 0xe, "const.i64.zero", I64_ZERO_CONSTANT, Flow::Next),
    def(OpcodeSet::Core, 0xf, "const.i64", I64_CONSTANT, Flow::Next),
    def(OpcodeSet::Core, 0x10, "const.ref.zero", CONST_REF_ZERO, Flow::Next),
    def(OpcodeSet::Core, 0x11, "const.ref.rodata", CONST_REF_RODATA, Flow::Next),
    def(OpcodeSet::Core, 0x12, "list.alloc", LIST_ALLOC, Flow::Next),
    def(OpcodeSet::Core, 0x13, "list.reserve", LIST_RESERVE, Flow::Next),
    def(OpcodeSet::Core, 0x14, "list.size", LIST_SIZE, Flow::Next),
    def(OpcodeSet::Core, 0x15, "list.resize", LIST_RESIZE, Flow::Next),
    def(OpcodeSet::Core, 0x16, "list.get.i32", I32_LIST_GET, Flow::Next),
    def(OpcodeSet::Core, 0x17, "list.set.i32", I32_LIST_SET, Flow::Next),
    def(OpcodeSet::Core, 0x18, "list.get.i64", I64_LIST_GET, Flow::Next),
    def(OpcodeSet::Core, 0x19, "list.set.i64", I64_LIST_SET, Flow::Next),
    def(OpcodeSet::Core, 0x1a, "list.get.ref", LIST_GET_REF, Flow::Next),
    def(OpcodeSet::Core, 0x1b, "list.set.ref", LIST_SET_REF, Flow::Next),
    def(OpcodeSet::Core, 0x1c, "select.i32", I32_SELECT, Flow::Next),
    def(OpcodeSet::Core, 0x1d, "select.i64", I64_SELECT, Flow::Next),
    def(OpcodeSet::Core, 0x1e, "select.ref", SELECT_REF, Flow::Next),
    def(OpcodeSet::Core, 0x1f, "switch.i32", I32_SWITCH, Flow::Next),
    def(OpcodeSet::Core, 0x20, "switch.i64", I64_SWITCH, Flow::Next),
    def(OpcodeSet::Core, 0x21, "switch.ref", SWITCH_REF, Flow::Next),
    def(OpcodeSet::Core, 0x22, "add.i32", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x23, "sub.i32", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x24, "mul.i32", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x25, "div.i32.s", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x26, "div.i32.u", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x27, "rem.i32.s", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x28, "rem.i32.u", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x29, "fma.i32", I32_TERNARY, Flow::Next),
    def(OpcodeSet::Core, 0x2a, "add.i64", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x2b, "sub.i64", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x2c, "mul.i64", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x2d, "div.i64.s", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x2e, "div.i64.u", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x2f, "rem.i64.s", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x30, "rem.i64.u", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x31, "fma.i64", I64_TERNARY, Flow::Next),
    def(OpcodeSet::Core, 0x32, "not.i32", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x33, "and.i32", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x34, "or.i32", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x35, "xor.i32", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x36, "not.i64", I64_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x37, "and.i64", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x38, "or.i64", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x39, "xor.i64", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x3a, "shl.i32", I32_SHIFT, Flow::Next),
    def(OpcodeSet::Core, 0x3b, "shr.i32.s", I32_SHIFT, Flow::Next),
    def(OpcodeSet::Core, 0x3c, "shr.i32.u", I32_SHIFT, Flow::Next),
    def(OpcodeSet::Core, 0x3d, "shl.i64", I64_SHIFT, Flow::Next),
    def(OpcodeSet::Core, 0x3e, "shr.i64.s", I64_SHIFT, Flow::Next),
    def(OpcodeSet::Core, 0x3f, "shr.i64.u", I64_SHIFT, Flow::Next),
    def(OpcodeSet::Core, 0x40, "trunc.i32.i8", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x41, "trunc.i32.i16", I32_UNARY, Flow::Next),
    def(
        OpcodeSet::Core,
        0x42,
        "trunc.i64.i32",
        I64_TO_I32_CONVERSION,
        Flow::Next,
    ),
    def(OpcodeSet::Core, 0x43, "ext.i8.i32.s", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x44, "ext.i8.i32.u", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x45, "ext.i16.i32.s", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x46, "ext.i16.i32.u", I32_UNARY, Flow::Next),
    def(
        OpcodeSet::Core,
        0x47,
        "ext.i32.i64.s",
        I32_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::Core,
        0x48,
        "ext.i32.i64.u",
        I32_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(OpcodeSet::Core, 0x49, "cmp.eq.i32", I32_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x4a, "cmp.ne.i32", I32_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x4b, "cmp.lt.i32.s", I32_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x4c, "cmp.lt.i32.u", I32_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x4d, "cmp.nz.i32", I32_UNARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x4e, "cmp.eq.i64", I64_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x4f, "cmp.ne.i64", I64_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x50, "cmp.lt.i64.s", I64_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x51, "cmp.lt.i64.u", I64_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x52, "cmp.nz.i64", I64_UNARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x53, "cmp.eq.ref", REF_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x54, "cmp.ne.ref", REF_BINARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x55, "cmp.nz.ref", REF_UNARY_COMPARISON, Flow::Next),
    def(OpcodeSet::Core, 0x56, "br", BRANCH, Flow::Terminator),
    def(OpcodeSet::Core, 0x57, "cond_br", CONDITIONAL_BRANCH, Flow::Terminator),
    def(OpcodeSet::Core, 0x58, "call", CALL, Flow::Next),
    def(OpcodeSet::Core, 0x59, "call.variadic", CALL_VARIADIC, Flow::Next),
    def(OpcodeSet::Core, 0x5a, "return", RETURN, Flow::Terminator),
    def(OpcodeSet::Core, 0x5b, "fail", FAIL, Flow::Terminator),
    def(OpcodeSet::Core, 0x5c, "import.resolved", IMPORT_RESOLVED, Flow::Next),
    def(OpcodeSet::Core, 0x5d, "yield", BRANCH, Flow::Terminator),
    def(OpcodeSet::Core, 0x5e, "trace", TRACE, Flow::Next),
    def(OpcodeSet::Core, 0x5f, "print", TRACE, Flow::Next),
    def(OpcodeSet::Core, 0x60, "cond_break", CONDITIONAL_BREAK, Flow::Terminator),
    def(OpcodeSet::Core, 0x61, "break", BRANCH, Flow::Terminator),
    def(OpcodeSet::Core, 0x62, "buffer.load.i8.u", I32_BUFFER_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x63, "buffer.load.i8.s", I32_BUFFER_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x64, "buffer.load.i16.u", I32_BUFFER_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x65, "buffer.load.i16.s", I32_BUFFER_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x66, "buffer.load.i32", I32_BUFFER_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x67, "buffer.load.i64", I64_BUFFER_LOAD, Flow::Next),
    def(OpcodeSet::Core, 0x68, "buffer.store.i8", I32_BUFFER_STORE, Flow::Next),
    def(OpcodeSet::Core, 0x69, "buffer.store.i16", I32_BUFFER_STORE, Flow::Next),
    def(OpcodeSet::Core, 0x6a, "buffer.store.i32", I32_BUFFER_STORE, Flow::Next),
    def(OpcodeSet::Core, 0x6b, "buffer.store.i64", I64_BUFFER_STORE, Flow::Next),
    def(OpcodeSet::Core, 0x6c, "buffer.alloc", BUFFER_ALLOC, Flow::Next),
    def(OpcodeSet::Core, 0x6d, "buffer.clone", BUFFER_CLONE, Flow::Next),
    def(OpcodeSet::Core, 0x6e, "buffer.length", BUFFER_LENGTH, Flow::Next),
    def(OpcodeSet::Core, 0x6f, "buffer.copy", BUFFER_COPY, Flow::Next),
    def(OpcodeSet::Core, 0x70, "buffer.compare", BUFFER_COMPARE, Flow::Next),
    def(OpcodeSet::Core, 0x71, "buffer.fill.i8", I32_BUFFER_FILL, Flow::Next),
    def(OpcodeSet::Core, 0x72, "buffer.fill.i16", I32_BUFFER_FILL, Flow::Next),
    def(OpcodeSet::Core, 0x73, "buffer.fill.i32", I32_BUFFER_FILL, Flow::Next),
    def(OpcodeSet::Core, 0x74, "buffer.fill.i64", I64_BUFFER_FILL, Flow::Next),
    def(OpcodeSet::Core, 0x75, "ctlz.i32", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x76, "ctlz.i64", I64_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x77, "abs.i32", I32_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x78, "abs.i64", I64_UNARY, Flow::Next),
    def(OpcodeSet::Core, 0x7a, "min.i32.s", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x7b, "min.i32.u", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x7c, "max.i32.s", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x7d, "max.i32.u", I32_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x7e, "min.i64.s", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x7f, "min.i64.u", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x80, "max.i64.s", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x81, "max.i64.u", I64_BINARY, Flow::Next),
    def(OpcodeSet::Core, 0x82, "cast.any.ref", CAST_ANY_REF, Flow::Next),
    def(OpcodeSet::Core, 0x83, "br_table", BRANCH_TABLE, Flow::Terminator),
    def(OpcodeSet::Core, 0x84, "buffer.hash", BUFFER_HASH, Flow::Next),
    def(OpcodeSet::Core, 0x85, "discard.refs", DISCARD_REFS, Flow::Next),
    def(OpcodeSet::Core, 0x86, "assign.ref", ASSIGN_REF, Flow::Next),
    def(OpcodeSet::Core, 0x87, "call.yieldable", YIELDABLE_CALL, Flow::Next),
    def(
        OpcodeSet::Core,
        0x88,
        "call.variadic.yieldable",
        CALL_VARIADIC_YIELDABLE,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF32, 0x0, "global.load.f32", F32_GLOBAL_LOAD, Flow::Next),
    def(OpcodeSet::ExtF32, 0x1, "global.store.f32", F32_GLOBAL_STORE, Flow::Next),
    def(
        OpcodeSet::ExtF32,
        0x2,
        "global.load.indirect.f32",
        F32_GLOBAL_LOAD_INDIRECT,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x3,
        "global.store.indirect.f32",
        F32_GLOBAL_STORE_INDIRECT,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF32, 0x4, "const.f32.zero", F32_ZERO_CONSTANT, Flow::Next),
    def(OpcodeSet::ExtF32, 0x5, "const.f32", F32_CONSTANT, Flow::Next),
    def(OpcodeSet::ExtF32, 0x6, "list.get.f32", F32_LIST_GET, Flow::Next),
    def(OpcodeSet::ExtF32, 0x7, "list.set.f32", F32_LIST_SET, Flow::Next),
    def(OpcodeSet::ExtF32, 0x8, "select.f32", F32_SELECT, Flow::Next),
    def(OpcodeSet::ExtF32, 0x9, "switch.f32", F32_SWITCH, Flow::Next),
    def(OpcodeSet::ExtF32, 0xa, "add.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0xb, "sub.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0xc, "mul.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0xd, "div.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0xe, "rem.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0xf, "fma.f32", F32_TERNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x10, "abs.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x11, "neg.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x12, "ceil.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x13, "floor.f32", F32_UNARY, Flow::Next),
    def(
        OpcodeSet::ExtF32,
        0x14,
        "cast.si32.f32",
        I32_TO_F32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x15,
        "cast.ui32.f32",
        I32_TO_F32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x16,
        "cast.f32.si32",
        F32_TO_I32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x17,
        "cast.f32.ui32",
        F32_TO_I32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x18,
        "bitcast.i32.f32",
        I32_TO_F32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x19,
        "bitcast.f32.i32",
        F32_TO_I32_CONVERSION,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF32, 0x1a, "atan.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x1b, "atan2.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x1c, "cos.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x1d, "sin.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x1e, "exp.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x1f, "exp2.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x20, "expm1.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x21, "log.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x22, "log10.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x23, "log1p.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x24, "log2.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x25, "pow.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x26, "rsqrt.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x27, "sqrt.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x28, "tanh.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x29, "erf.f32", F32_UNARY, Flow::Next),
    def(
        OpcodeSet::ExtF32,
        0x2a,
        "cmp.eq.f32.o",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x2b,
        "cmp.eq.f32.u",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x2c,
        "cmp.ne.f32.o",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x2d,
        "cmp.ne.f32.u",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x2e,
        "cmp.lt.f32.o",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x2f,
        "cmp.lt.f32.u",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x30,
        "cmp.lte.f32.o",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x31,
        "cmp.lte.f32.u",
        F32_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF32, 0x32, "cmp.nan.f32", F32_UNARY_COMPARISON, Flow::Next),
    def(OpcodeSet::ExtF32, 0x33, "buffer.load.f32", F32_BUFFER_LOAD, Flow::Next),
    def(
        OpcodeSet::ExtF32,
        0x34,
        "buffer.store.f32",
        F32_BUFFER_STORE,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF32, 0x35, "buffer.fill.f32", F32_BUFFER_FILL, Flow::Next),
    def(OpcodeSet::ExtF32, 0x36, "round.f32", F32_UNARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x37, "min.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x38, "max.f32", F32_BINARY, Flow::Next),
    def(OpcodeSet::ExtF32, 0x39, "round.f32.even", F32_UNARY, Flow::Next),
    def(
        OpcodeSet::ExtF32,
        0x3a,
        "cast.f32.si64",
        F32_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x3b,
        "cast.f32.ui64",
        F32_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x3c,
        "cast.si64.f32",
        I64_TO_F32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF32,
        0x3d,
        "cast.ui64.f32",
        I64_TO_F32_CONVERSION,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF64, 0x0, "global.load.f64", F64_GLOBAL_LOAD, Flow::Next),
    def(OpcodeSet::ExtF64, 0x1, "global.store.f64", F64_GLOBAL_STORE, Flow::Next),
    def(
        OpcodeSet::ExtF64,
        0x2,
        "global.load.indirect.f64",
        F64_GLOBAL_LOAD_INDIRECT,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x3,
        "global.store.indirect.f64",
        F64_GLOBAL_STORE_INDIRECT,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF64, 0x4, "const.f64.zero", F64_ZERO_CONSTANT, Flow::Next),
    def(OpcodeSet::ExtF64, 0x5, "const.f64", F64_CONSTANT, Flow::Next),
    def(OpcodeSet::ExtF64, 0x6, "list.get.f64", F64_LIST_GET, Flow::Next),
    def(OpcodeSet::ExtF64, 0x7, "list.set.f64", F64_LIST_SET, Flow::Next),
    def(OpcodeSet::ExtF64, 0x8, "select.f64", F64_SELECT, Flow::Next),
    def(OpcodeSet::ExtF64, 0x9, "switch.f64", F64_SWITCH, Flow::Next),
    def(OpcodeSet::ExtF64, 0xa, "add.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0xb, "sub.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0xc, "mul.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0xd, "div.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0xe, "rem.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0xf, "fma.f64", F64_TERNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x10, "abs.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x11, "neg.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x12, "ceil.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x13, "floor.f64", F64_UNARY, Flow::Next),
    def(
        OpcodeSet::ExtF64,
        0x14,
        "trunc.f64.f32",
        F64_TO_F32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x15,
        "ext.f32.f64",
        F32_TO_F64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x16,
        "cast.si32.f64",
        I32_TO_F64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x17,
        "cast.ui32.f64",
        I32_TO_F64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x18,
        "cast.f64.si32",
        F64_TO_I32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x19,
        "cast.f64.ui32",
        F64_TO_I32_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x1a,
        "cast.si64.f64",
        I64_TO_F64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x1b,
        "cast.ui64.f64",
        I64_TO_F64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x1c,
        "cast.f64.si64",
        F64_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x1d,
        "cast.f64.ui64",
        F64_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x1e,
        "bitcast.i64.f64",
        I64_TO_F64_CONVERSION,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x1f,
        "bitcast.f64.i64",
        F64_TO_I64_CONVERSION,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF64, 0x20, "atan.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x21, "atan2.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x22, "cos.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x23, "sin.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x24, "exp.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x25, "exp2.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x26, "expm1.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x27, "log.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x28, "log10.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x29, "log1p.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x2a, "log2.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x2b, "pow.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x2c, "rsqrt.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x2d, "sqrt.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x2e, "tanh.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x2f, "erf.f64", F64_UNARY, Flow::Next),
    def(
        OpcodeSet::ExtF64,
        0x30,
        "cmp.eq.f64.o",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x31,
        "cmp.eq.f64.u",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x32,
        "cmp.ne.f64.o",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x33,
        "cmp.ne.f64.u",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x34,
        "cmp.lt.f64.o",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x35,
        "cmp.lt.f64.u",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x36,
        "cmp.lte.f64.o",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(
        OpcodeSet::ExtF64,
        0x37,
        "cmp.lte.f64.u",
        F64_BINARY_COMPARISON,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF64, 0x38, "cmp.nan.f64", F64_UNARY_COMPARISON, Flow::Next),
    def(OpcodeSet::ExtF64, 0x39, "buffer.load.f64", F64_BUFFER_LOAD, Flow::Next),
    def(
        OpcodeSet::ExtF64,
        0x3a,
        "buffer.store.f64",
        F64_BUFFER_STORE,
        Flow::Next,
    ),
    def(OpcodeSet::ExtF64, 0x3b, "buffer.fill.f64", F64_BUFFER_FILL, Flow::Next),
    def(OpcodeSet::ExtF64, 0x3c, "round.f64", F64_UNARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x3d, "min.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x3e, "max.f64", F64_BINARY, Flow::Next),
    def(OpcodeSet::ExtF64, 0x3f, "round.f64.even", F64_UNARY, Flow::Next),
];

const fn def(
    set: OpcodeSet,
    opcode: u8,
    mnemonic: &'static str,
    fields: &'static [Field],
    flow: Flow,
) -> InstructionDef {
    InstructionDef {
        set,
        opcode,
        mnemonic,
        fields,
        flow,
    }
}
