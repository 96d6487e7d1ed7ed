//! Verification of a function's bytecode and its lowering to the interpreter's form.
//!
//! Every function is checked once, before anything runs: opcodes known, operands inside the
//! function, registers inside their banks (64-bit values in aligned pairs), branch targets on
//! block markers, call targets and their argument lists against the callee's calling convention,
//! rodata, global and type ordinals in range. The result ([`Function`]) holds decoded
//! instructions with branch targets turned into instruction indices, so the interpreter does no
//! decoding and no range checks the verifier already proved.

use crate::isa::decode::{decode, Immediate, Operand, RawRegister};
use crate::isa::{Bank, Field, Op, BLOCK_MARKER, IMPORT_ORDINAL_BIT, REF_ORDINAL_MASK};
use halo_hal::{Error, Result};
use std::collections::HashMap;
use std::ops::Range;

/// What the verifier needs to know about the module around a function.
pub struct ModuleShape {
    /// Number of entries in the type table.
    pub type_count: u32,
    /// Number of rodata segments.
    pub rodata_count: u32,
    /// Bytes of primitive global storage.
    pub global_bytes: u32,
    /// Number of ref globals.
    pub global_refs: u32,
    /// Calling conventions of internal functions, by ordinal.
    pub function_cconvs: Vec<Option<String>>,
    /// Calling conventions of imports, by ordinal.
    pub import_cconvs: Vec<Option<String>>,
}

/// The function being verified.
pub struct FunctionSource<'a> {
    /// Name for error messages.
    pub name: &'a str,
    /// Its bytecode.
    pub code: &'a [u8],
    /// Registers in the i32 bank.
    pub i32_registers: u16,
    /// Registers in the ref bank.
    pub ref_registers: u16,
}

/// A branch: target instruction index and the block-argument moves to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// Index of the first instruction of the target block.
    pub target: u32,
    /// `(source, target)` raw registers into [`Function::pairs`].
    pub remap: Range<u32>,
}

/// Operands that do not fit an [`Inst`]'s fixed slots.
#[derive(Debug, Clone, PartialEq)]
pub enum Extra {
    /// Calls: callee ordinal, argument and result registers, variadic segment sizes, and the
    /// resume point of yieldable calls.
    Call {
        /// Function ordinal (import bit included).
        callee: u32,
        /// Segment sizes of a variadic call (registers holding i32 counts).
        segments: Range<u32>,
        /// Argument registers, raw.
        args: Range<u32>,
        /// Result registers, raw.
        results: Range<u32>,
        /// Where a yieldable call resumes once the callee completes.
        resume: Option<Branch>,
    },
    /// A register list (`return`, `discard.refs`, `switch` values, `trace` operands).
    List(Range<u32>),
    /// `fail` and `trace`: a message.
    Message(String),
}

/// One lowered instruction.
#[derive(Debug, Clone, PartialEq)]
pub struct Inst {
    /// What to do.
    pub op: Op,
    /// Register operands in field order (raw: refs keep their bank and move bits).
    pub regs: [u16; 6],
    /// The immediate: constant bits, global offset, rodata or function ordinal, or count.
    pub imm: u64,
    /// Type table index of instructions that name a type.
    pub type_id: u32,
    /// Index into [`Function::extras`] for instructions with list operands, or of the first of
    /// a branch's successors in [`Function::branches`].
    pub extra: u32,
    /// Byte offset of the instruction in the function, for error messages.
    pub pc: u32,
}

/// A verified, lowered function.
#[derive(Debug, Default)]
pub struct Function {
    /// Instructions in order; block starts are branch targets.
    pub insts: Vec<Inst>,
    /// Side data of complex instructions.
    pub extras: Vec<Extra>,
    /// Successors of branches, consecutive per instruction (a table's default first).
    pub branches: Vec<Branch>,
    /// Register lists of all instructions.
    pub regs: Vec<u16>,
    /// Remap pairs of all branches.
    pub pairs: Vec<(u16, u16)>,
    /// Registers the function needs.
    pub i32_registers: u16,
    /// Ref registers the function needs.
    pub ref_registers: u16,
}

fn fail(source: &FunctionSource<'_>, pc: usize, reason: impl std::fmt::Display) -> Error {
    Error::invalid_argument(format!("function '{}' at bytecode offset {pc}: {reason}", source.name))
}

/// Verifies `source` against `shape` and lowers it.
///
/// # Errors
/// `InvalidArgument` naming the function, the byte offset and the reason.
pub fn compile(source: &FunctionSource<'_>, shape: &ModuleShape) -> Result<Function> {
    let code = source.code;
    if code.first() != Some(&BLOCK_MARKER) {
        return Err(fail(source, 0, "function does not start with a block"));
    }
    // Pass 1: find instructions and blocks.
    let mut decoded = Vec::new();
    let mut block_starts = HashMap::new();
    let mut pc = 0;
    while pc < code.len() {
        if code[pc] == BLOCK_MARKER {
            block_starts.insert(pc as u32, decoded.len() as u32);
            pc += 1;
            continue;
        }
        let instruction = decode(code, pc).map_err(|e| fail(source, pc, e))?;
        let next = instruction.next_pc;
        decoded.push((pc, instruction));
        pc = next;
    }
    if decoded.is_empty() {
        return Err(fail(source, 0, "function has no instructions"));
    }
    // Pass 2: check operands and lower.
    let mut function = Function {
        i32_registers: source.i32_registers,
        ref_registers: source.ref_registers,
        ..Default::default()
    };
    let mut lowering = Lowering {
        source,
        shape,
        function: &mut function,
        block_starts: &block_starts,
    };
    for (pc, instruction) in &decoded {
        let inst = lowering
            .lower(*pc, instruction)
            .map_err(|reason| fail(source, *pc, reason))?;
        lowering.function.insts.push(inst);
    }
    let last = function.insts.last().expect("not empty");
    if crate::isa::instruction(last.op as u16).flow != crate::isa::Flow::Terminator && last.op != Op::Fail {
        return Err(fail(
            source,
            last.pc as usize,
            "the last block does not end in a terminator",
        ));
    }
    Ok(function)
}

struct Lowering<'a, 'b> {
    source: &'a FunctionSource<'b>,
    shape: &'a ModuleShape,
    function: &'a mut Function,
    block_starts: &'a HashMap<u32, u32>,
}

type Check<T> = std::result::Result<T, String>;

impl Lowering<'_, '_> {
    fn lower(&mut self, pc: usize, instruction: &crate::isa::decode::Decoded<'_>) -> Check<Inst> {
        let def = instruction.def();
        let mut inst = Inst {
            op: def.op,
            regs: [0; 6],
            imm: 0,
            type_id: 0,
            extra: u32::MAX,
            pc: pc as u32,
        };
        let mut reg_slot = 0;
        let mut branches = Vec::new();
        let mut lists = Vec::new();
        let mut callee = None;
        let mut message = None;
        for (field, operand) in def.fields.iter().zip(&instruction.operands) {
            match (field, operand) {
                (Field::Register { bank, moves, .. }, Operand::Register(_, raw)) => {
                    self.check_register(*bank, *raw, *moves)?;
                    inst.regs[reg_slot] = raw.0;
                    reg_slot += 1;
                }
                (_, Operand::Immediate(value)) => {
                    inst.imm = match value {
                        Immediate::I32(v) => *v as u32 as u64,
                        Immediate::I64(v) => *v as u64,
                        Immediate::F32(v) => v.to_bits() as u64,
                        Immediate::F64(v) => v.to_bits(),
                    };
                }
                (_, Operand::Global(offset)) => {
                    self.check_global(def.op, *offset)?;
                    inst.imm = *offset as u64;
                }
                (_, Operand::Rodata(ordinal)) => {
                    if *ordinal >= self.shape.rodata_count {
                        return Err(format!(
                            "rodata ordinal {ordinal} out of range {}",
                            self.shape.rodata_count
                        ));
                    }
                    inst.imm = *ordinal as u64;
                }
                (_, Operand::Type(id)) => {
                    if *id >= self.shape.type_count {
                        return Err(format!("type ordinal {id} out of range {}", self.shape.type_count));
                    }
                    inst.type_id = *id;
                }
                (_, Operand::Function(ordinal)) => {
                    self.check_function(*ordinal)?;
                    callee = Some(*ordinal);
                    inst.imm = *ordinal as u64;
                }
                (_, Operand::String(bytes)) => message = Some(String::from_utf8_lossy(bytes).into_owned()),
                (_, Operand::Count(count)) => {
                    inst.imm = *count as u64;
                }
                (_, Operand::Target(target)) => branches.push(Branch {
                    target: self.target(*target)?,
                    remap: 0..0,
                }),
                (_, Operand::Remap(pairs)) => {
                    let remap = self.remap(pairs)?;
                    branches.last_mut().ok_or("remap list without a branch target")?.remap = remap;
                }
                (_, Operand::Cases(cases)) => {
                    for (target, pairs) in cases {
                        let target = self.target(*target)?;
                        let remap = self.remap(pairs)?;
                        branches.push(Branch { target, remap });
                    }
                }
                (_, Operand::List(bank, registers)) => lists.push(self.list(*bank, registers)?),
                (field, operand) => return Err(format!("operand {operand:?} does not match field {field:?}")),
            }
        }
        let extra = match def.op {
            Op::Call | Op::CallYieldable | Op::CallVariadic | Op::CallVariadicYieldable => {
                let callee = callee.ok_or("call without a callee")?;
                let (segments, args, results) = match lists.as_slice() {
                    [args, results] => (0..0, args.clone(), results.clone()),
                    [segments, args, results] => (segments.clone(), args.clone(), results.clone()),
                    _ => return Err("call with unexpected operand lists".into()),
                };
                self.check_call(def.op, callee, &segments, &args, &results)?;
                Some(Extra::Call {
                    callee,
                    segments,
                    args,
                    results,
                    resume: branches.into_iter().next(),
                })
            }
            _ if !branches.is_empty() => {
                inst.extra = self.function.branches.len() as u32;
                self.function.branches.extend(branches);
                return Ok(inst);
            }
            _ if message.is_some() => Some(Extra::Message(message.unwrap_or_default())),
            _ => lists.into_iter().next().map(Extra::List),
        };
        if let Some(extra) = extra {
            inst.extra = self.function.extras.len() as u32;
            self.function.extras.push(extra);
        }
        Ok(inst)
    }

    fn check_register(&self, bank: Bank, raw: RawRegister, moves: bool) -> Check<()> {
        let i32_count = self.source.i32_registers as u32;
        match bank {
            Bank::Ref => {
                if !raw.is_ref() {
                    return Err(format!("ref register required but non-ref {} provided", raw.0));
                }
                if raw.is_move() && !moves {
                    return Err(format!("register {raw} may not be moved here"));
                }
                if raw.0 & REF_ORDINAL_MASK >= self.source.ref_registers {
                    return Err(format!("ref register {raw} out of range {}", self.source.ref_registers));
                }
            }
            _ if raw.is_ref() => {
                return Err(format!(
                    "{} register required but ref register {raw} provided",
                    bank.name()
                ))
            }
            wide if wide.is_wide() => {
                if raw.0 & 1 != 0 {
                    return Err(format!("{} register {raw} is not an aligned pair", bank.name()));
                }
                if raw.0 as u32 + 1 >= i32_count {
                    return Err(format!("{} register {raw} out of range {i32_count}", bank.name()));
                }
            }
            _ => {
                if raw.0 as u32 >= i32_count {
                    return Err(format!("{} register {raw} out of range {i32_count}", bank.name()));
                }
            }
        }
        Ok(())
    }

    fn list(&mut self, bank: Option<Bank>, registers: &[RawRegister]) -> Check<Range<u32>> {
        let start = self.function.regs.len() as u32;
        for raw in registers {
            match bank {
                Some(bank) => self.check_register(bank, *raw, bank == Bank::Ref)?,
                None if raw.is_ref() => self.check_register(Bank::Ref, *raw, true)?,
                None => self.check_register(Bank::I32, *raw, false)?,
            }
            self.function.regs.push(raw.0);
        }
        Ok(start..self.function.regs.len() as u32)
    }

    fn remap(&mut self, pairs: &[(RawRegister, RawRegister)]) -> Check<Range<u32>> {
        let start = self.function.pairs.len() as u32;
        for (from, to) in pairs {
            if from.is_ref() != to.is_ref() {
                return Err(format!("block argument {from} -> {to} crosses register banks"));
            }
            let bank = if from.is_ref() { Bank::Ref } else { Bank::I32 };
            self.check_register(bank, *from, true)?;
            self.check_register(bank, *to, true)?;
            self.function.pairs.push((from.0, to.0));
        }
        Ok(start..self.function.pairs.len() as u32)
    }

    fn target(&self, pc: u32) -> Check<u32> {
        self.block_starts
            .get(&pc)
            .copied()
            .ok_or_else(|| format!("branch target {pc} is not the start of a block"))
    }

    fn check_global(&self, op: Op, offset: u32) -> Check<()> {
        let (limit, width, what) = match op {
            Op::GlobalLoadRef | Op::GlobalStoreRef => (self.shape.global_refs, 1, "ref global ordinal"),
            Op::GlobalLoadI64 | Op::GlobalStoreI64 | Op::GlobalLoadF64 | Op::GlobalStoreF64 => {
                (self.shape.global_bytes, 8, "global byte offset")
            }
            _ => (self.shape.global_bytes, 4, "global byte offset"),
        };
        if offset.checked_add(width).is_none_or(|end| end > limit) {
            return Err(format!("{what} {offset} out of range {limit}"));
        }
        Ok(())
    }

    fn check_function(&self, ordinal: u32) -> Check<()> {
        if ordinal & IMPORT_ORDINAL_BIT != 0 {
            let import = ordinal & !IMPORT_ORDINAL_BIT;
            if import as usize >= self.shape.import_cconvs.len() {
                return Err(format!(
                    "import ordinal {import} out of range {}",
                    self.shape.import_cconvs.len()
                ));
            }
        } else if ordinal as usize >= self.shape.function_cconvs.len() {
            return Err(format!(
                "function ordinal {ordinal} out of range {}",
                self.shape.function_cconvs.len()
            ));
        }
        Ok(())
    }

    /// Checks argument and result registers against the callee's calling convention.
    fn check_call(
        &self,
        op: Op,
        callee: u32,
        segments: &Range<u32>,
        args: &Range<u32>,
        results: &Range<u32>,
    ) -> Check<()> {
        let cconv = if callee & IMPORT_ORDINAL_BIT != 0 {
            &self.shape.import_cconvs[(callee & !IMPORT_ORDINAL_BIT) as usize]
        } else {
            &self.shape.function_cconvs[callee as usize]
        };
        let Some(cconv) = cconv else { return Ok(()) };
        let signature = crate::cconv::Signature::parse(cconv).map_err(|e| e.message().to_string())?;
        let regs = &self.function.regs;
        let banks = |range: &Range<u32>| -> Vec<bool> {
            regs[range.start as usize..range.end as usize]
                .iter()
                .map(|r| RawRegister(*r).is_ref())
                .collect()
        };
        let variadic = matches!(op, Op::CallVariadic | Op::CallVariadicYieldable);
        if !variadic {
            signature.check_registers(&banks(args), &banks(results))
        } else {
            let segment_count = segments.len();
            if segment_count != signature.argument_segments() {
                return Err(format!(
                    "variadic call passes {segment_count} segment sizes; '{cconv}' has {}",
                    signature.argument_segments()
                ));
            }
            signature.check_results(&banks(results))
        }
    }
}
