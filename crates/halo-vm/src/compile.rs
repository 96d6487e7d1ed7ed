//! Verification of a function's bytecode and its lowering to the interpreter's form.
//!
//! Every function is checked once, before anything runs: opcodes known, operands inside the
//! function, registers inside their banks (64-bit values in aligned pairs), branch targets on
//! block markers, call targets and their argument lists against the callee's calling convention,
//! rodata, global and type ordinals in range. The result ([`Function`]) holds decoded
//! instructions with branch targets turned into instruction indices, so the interpreter does no
//! decoding and no range checks the verifier already proved.

use crate::cconv::Signature;
use crate::interp::hot::Handler;
use crate::isa::decode::{decode, Immediate, Operand, RawRegister};
use crate::isa::{Access, Bank, Field, Op, BLOCK_MARKER, I32_ORDINAL_MASK, IMPORT_ORDINAL_BIT, REF_ORDINAL_MASK};
use halo_hal::{Error, Result};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// What the verifier needs to know about the module around a function.
pub struct ModuleShape<'a> {
    /// Number of entries in the type table.
    pub type_count: u32,
    /// Number of rodata segments.
    pub rodata_count: u32,
    /// Bytes of primitive global storage.
    pub global_bytes: u32,
    /// Number of ref globals.
    pub global_refs: u32,
    /// Calling conventions of internal functions, by ordinal (`None`: the module gives none).
    pub functions: &'a [Option<Signature>],
    /// Calling conventions of imports, by ordinal (`None`: the module gives none).
    pub imports: &'a [Option<Signature>],
}

/// The function being verified.
pub struct FunctionSource<'a> {
    /// Name for error messages.
    pub name: &'a str,
    /// Its bytecode.
    pub code: &'a [u8],
    /// Registers in the i32 bank, as the module declares them.
    pub i32_registers: u16,
    /// Registers in the ref bank, as the module declares them.
    pub ref_registers: u16,
    /// Its calling convention (`None` when the module gives none, which fails verification).
    pub signature: Option<&'a Signature>,
}

/// A branch: target instruction index and the block-argument moves to make.
///
/// Moves are kept per bank: IREE applies them in order, and order only matters within a bank.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Branch {
    /// Index of the first instruction of the target block.
    pub target: u32,
    /// `(source, target)` i32-bank registers.
    pub moves: Box<[(u16, u16)]>,
    /// `(source, target)` raw ref registers.
    pub ref_moves: Box<[(u16, u16)]>,
}

/// Operands that do not fit an [`Inst`]'s fixed slots.
#[derive(Debug, Clone, PartialEq)]
pub enum Extra {
    /// Calls: callee ordinal, argument and result registers, variadic segment sizes, and the
    /// resume point of yieldable calls.
    Call {
        /// Function ordinal (import bit included).
        callee: u32,
        /// Argument kinds of a variadic call, flattened with its literal segment sizes.
        variadic_kinds: Option<Box<[char]>>,
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
#[derive(Debug, Clone)]
pub struct Inst {
    /// What to do.
    pub op: Op,
    /// The interpreter's function for `op`.
    pub(crate) handler: Handler,
    /// The operand that `handler` takes from the previous instruction's result rather than
    /// from the frame (see [`crate::interp::hot`]).
    pub(crate) forward: Option<u8>,
    /// Register operands in field order (raw: refs keep their bank and move bits).
    pub regs: [u16; 6],
    /// The immediate: constant bits, global offset, rodata or function ordinal, or count.
    pub imm: u64,
    /// Type table index of instructions that name a type.
    pub type_id: u32,
    /// Index into the function's `extras` for instructions with list operands, or of the first of
    /// a branch's successors in its `branches`.
    pub extra: u32,
}

/// A verified, lowered function.
///
/// Only [`compile`] makes one, and nothing outside this crate can change it: the interpreter
/// skips the checks that its verification proved (see `unchecked.rs`), so a `Function` is the
/// proof that they hold.
#[derive(Debug)]
#[cfg_attr(test, derive(Default))]
pub struct Function {
    /// Instructions in order; block starts are branch targets.
    pub(crate) insts: Vec<Inst>,
    /// Byte offset of each instruction in the function's bytecode, for error messages.
    pub(crate) offsets: Vec<u32>,
    /// Side data of complex instructions.
    pub(crate) extras: Vec<Extra>,
    /// Successors of branches, consecutive per instruction (a table's default first).
    pub(crate) branches: Vec<Branch>,
    /// Register lists of all instructions.
    pub(crate) regs: Vec<u16>,
    /// Handlers of the instructions that carry [`crate::interp::hot::checkpoint`] instead.
    pub(crate) checkpoints: HashMap<u32, Handler>,
    /// Registers of the i32 bank in a frame of this function (see [`frame_registers`]).
    pub(crate) i32_registers: u16,
    /// Registers of the ref bank in a frame of this function.
    pub(crate) ref_registers: u16,
}

impl Function {
    /// The lowered instructions, in order.
    pub fn instructions(&self) -> &[Inst] {
        &self.insts
    }

    /// Registers in the i32 bank of one frame of this function.
    pub fn i32_registers(&self) -> u16 {
        self.i32_registers
    }

    /// Registers in the ref bank of one frame of this function.
    pub fn ref_registers(&self) -> u16 {
        self.ref_registers
    }
}

/// The registers a frame holds in one bank, as IREE sizes them: the declared count rounded up to
/// a power of two (at least one). Programs may use every register of the rounded bank, and a
/// call may pass more arguments than the callee declares registers for, as long as the rounded
/// bank holds them; IREE's VM runs such programs, so halo does too.
fn frame_registers(declared: u16, ordinal_mask: u16, bank: &str) -> Check<u16> {
    let rounded = u32::from(declared.max(1)).next_power_of_two();
    let addressable = u32::from(ordinal_mask) + 1;
    u16::try_from(rounded)
        .ok()
        .filter(|_| rounded <= addressable)
        .ok_or_else(|| {
            format!("{declared} {bank} registers round up to {rounded}, more than the {addressable} addressable")
        })
}

/// Checks that the arguments of `signature` fit a frame of `i32_registers` and `ref_registers`
/// (64-bit values on aligned pairs), where the interpreter places them on entry.
fn check_argument_storage(signature: &Signature, i32_registers: u16, ref_registers: u16) -> Check<()> {
    let kinds = signature.fixed_argument_kinds().ok_or_else(|| {
        format!(
            "'{}': internal functions cannot take variadic arguments",
            signature.text
        )
    })?;
    let (mut i32s, mut refs) = (0u32, 0u32);
    for kind in kinds {
        match kind {
            'r' => refs += 1,
            'I' | 'F' => i32s += (i32s & 1) + 2,
            _ => i32s += 1,
        }
    }
    if i32s > u32::from(i32_registers) || refs > u32::from(ref_registers) {
        return Err(format!(
            "the arguments of '{}' need {i32s} i32 and {refs} ref registers; the frame has {i32_registers} and {ref_registers}",
            signature.text
        ));
    }
    Ok(())
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
    let signature = source
        .signature
        .ok_or_else(|| fail(source, 0, "function has no calling convention"))?;
    let i32_registers =
        frame_registers(source.i32_registers, I32_ORDINAL_MASK, "i32").map_err(|e| fail(source, 0, e))?;
    let ref_registers =
        frame_registers(source.ref_registers, REF_ORDINAL_MASK, "ref").map_err(|e| fail(source, 0, e))?;
    check_argument_storage(signature, i32_registers, ref_registers).map_err(|e| fail(source, 0, e))?;
    // Pass 2: check operands and lower.
    let mut function = Function {
        insts: Vec::new(),
        offsets: Vec::new(),
        extras: Vec::new(),
        branches: Vec::new(),
        regs: Vec::new(),
        checkpoints: HashMap::new(),
        i32_registers,
        ref_registers,
    };
    let mut lowering = Lowering {
        signature,
        shape,
        function: &mut function,
        block_starts: &block_starts,
        instruction_count: decoded.len() as u32,
    };
    for (pc, instruction) in &decoded {
        let inst = lowering
            .lower(instruction)
            .map_err(|reason| fail(source, *pc, reason))?;
        lowering.function.insts.push(inst);
        lowering.function.offsets.push(*pc as u32);
    }
    let targets: HashSet<u32> = block_starts.values().copied().collect();
    let checkpoints = checkpoint_positions(function.insts.len(), &targets);
    forward_results(&mut function, &targets, &checkpoints);
    fuse_compare_branches(&mut function, &targets);
    fuse_branches(&mut function, &targets);
    place_checkpoints(&mut function, &checkpoints);
    // The interpreter relies on this: execution never runs past the last instruction.
    let last = function.insts.last().expect("not empty");
    if crate::isa::instruction(last.op as u16).flow != crate::isa::Flow::Terminator {
        let offset = *function.offsets.last().expect("not empty") as usize;
        return Err(fail(source, offset, "the last block does not end in a terminator"));
    }
    Ok(function)
}

/// Tag on the target of a block-argument move that copies an aligned register pair at once.
pub const WIDE_MOVE: u16 = 0x8000;

/// Joins moves of both halves of an aligned pair into one [`WIDE_MOVE`]: IREE's compiler moves
/// 64-bit values as two 32-bit halves, and reading the pair back as one 64-bit value right after
/// two 32-bit writes stalls the processor (no store-to-load forwarding), which doubled the time of
/// `add.i64` in `fixtures/vm/perf_loop`. Applying the two halves at once is equivalent: the
/// second source is never the first target, as that would be an odd register.
fn merge_wide_moves(moves: &[(u16, u16)]) -> Vec<(u16, u16)> {
    let mut merged = Vec::with_capacity(moves.len());
    let mut index = 0;
    while index < moves.len() {
        let (from, to) = moves[index];
        let pair = from % 2 == 0 && to % 2 == 0 && moves.get(index + 1) == Some(&(from + 1, to + 1));
        if pair {
            merged.push((from, to | WIDE_MOVE));
            index += 2;
        } else {
            merged.push((from, to));
            index += 1;
        }
    }
    merged
}

/// Gives a compare followed by a `cond_br` on its result one handler for both, unless the
/// `cond_br` starts a block (something may jump to it without running the compare).
fn fuse_compare_branches(function: &mut Function, targets: &HashSet<u32>) {
    for index in 1..function.insts.len() {
        let (compare, cond_br) = (&function.insts[index - 1], &function.insts[index]);
        let Some(fused) = crate::interp::hot::compare_and_branch(compare.op, compare.forward) else {
            continue;
        };
        let result = if matches!(compare.op, Op::CmpNZI32 | Op::CmpNZI64) {
            1
        } else {
            2
        };
        if cond_br.op != Op::CondBranch || cond_br.regs[0] != compare.regs[result] || targets.contains(&(index as u32))
        {
            continue;
        }
        let successors = &function.branches[cond_br.extra as usize..][..2];
        if successors.iter().all(|branch| branch.ref_moves.is_empty()) {
            function.insts[index - 1].handler = fused;
        }
    }
}

/// Gives a hot instruction followed by a `br` one handler for both, unless the `br` starts a
/// block or moves refs.
fn fuse_branches(function: &mut Function, targets: &HashSet<u32>) {
    for index in 1..function.insts.len() {
        let (previous, br) = (&function.insts[index - 1], &function.insts[index]);
        if br.op != Op::Branch || targets.contains(&(index as u32)) {
            continue;
        }
        if !function.branches[br.extra as usize].ref_moves.is_empty() {
            continue;
        }
        // A compare already fused with a `cond_br` is not followed by a `br`.
        if let Some(fused) = crate::interp::hot::handler_then_branch(previous.op, previous.forward) {
            function.insts[index - 1].handler = fused;
        }
    }
}

/// Where straight-line runs of instructions are cut by checkpoints (see [`crate::interp::hot`]).
fn checkpoint_positions(len: usize, targets: &HashSet<u32>) -> HashSet<u32> {
    let mut positions = HashSet::new();
    let mut run = 0;
    for index in 0..len as u32 {
        run = if targets.contains(&index) { 1 } else { run + 1 };
        if run == crate::interp::hot::CHECKPOINT_INTERVAL {
            positions.insert(index);
            run = 0;
        }
    }
    positions
}

/// Gives the instructions at `positions` the checkpoint handler, keeping their own aside.
fn place_checkpoints(function: &mut Function, positions: &HashSet<u32>) {
    for &index in positions {
        let inst = &mut function.insts[index as usize];
        function.checkpoints.insert(index, inst.handler);
        inst.handler = crate::interp::hot::checkpoint;
    }
}

/// Lets a hot instruction that reads the register the hot instruction just before it wrote
/// take that operand from the previous handler's result. Never where execution can arrive
/// other than from that instruction: branch targets and checkpoints, which the interpreter
/// enters without a previous result.
fn forward_results(function: &mut Function, targets: &HashSet<u32>, checkpoints: &HashSet<u32>) {
    use crate::interp::hot::{handler, is_hot, MAX_FORWARDED};
    for index in 1..function.insts.len() {
        if targets.contains(&(index as u32)) || checkpoints.contains(&(index as u32)) {
            continue;
        }
        let (producer, consumer) = (&function.insts[index - 1], &function.insts[index]);
        if !is_hot(producer.op) || !is_hot(consumer.op) {
            continue;
        }
        let Some(written) = register_operands(producer).find(|operand| operand.access == Access::Write) else {
            continue;
        };
        let forward = register_operands(consumer)
            .position(|operand| operand.access == Access::Read && operand.holds_the_value_of(&written))
            .and_then(|n| u8::try_from(n).ok())
            .filter(|&n| n <= MAX_FORWARDED);
        if forward.is_some() {
            let consumer = &mut function.insts[index];
            consumer.forward = forward;
            consumer.handler = handler(consumer.op, forward);
        }
    }
}

/// One register operand of a lowered instruction.
struct RegisterOperand {
    raw: u16,
    bank: Bank,
    access: Access,
}

impl RegisterOperand {
    /// Whether this operand reads exactly the i32-bank slot (or pair) `other` names.
    fn holds_the_value_of(&self, other: &RegisterOperand) -> bool {
        let width = |bank| match bank {
            Bank::I32 | Bank::F32 => Some(1),
            Bank::I64 | Bank::F64 => Some(2),
            Bank::Ref => None,
        };
        self.raw == other.raw && width(self.bank).is_some() && width(self.bank) == width(other.bank)
    }
}

/// The register operands of `inst`, in [`Inst::regs`] order.
fn register_operands(inst: &Inst) -> impl Iterator<Item = RegisterOperand> + '_ {
    let fields = crate::isa::instruction(inst.op as u16).fields;
    let registers = fields.iter().filter_map(|field| match field {
        Field::Register { bank, access, .. } => Some((*bank, *access)),
        _ => None,
    });
    registers
        .zip(inst.regs)
        .map(|((bank, access), raw)| RegisterOperand { raw, bank, access })
}

struct Lowering<'a> {
    /// The calling convention of the function being lowered.
    signature: &'a Signature,
    shape: &'a ModuleShape<'a>,
    function: &'a mut Function,
    block_starts: &'a HashMap<u32, u32>,
    instruction_count: u32,
}

type Check<T> = std::result::Result<T, String>;

impl Lowering<'_> {
    fn lower(&mut self, instruction: &crate::isa::decode::Decoded<'_>) -> Check<Inst> {
        let def = instruction.def();
        let mut inst = Inst {
            op: def.op,
            handler: crate::interp::hot::handler(def.op, None),
            forward: None,
            regs: [0; 6],
            imm: 0,
            type_id: 0,
            extra: u32::MAX,
        };
        let mut reg_slot = 0;
        let mut branches = Vec::new();
        let mut lists = Vec::new();
        let mut callee = None;
        let mut message = None;
        let mut sizes: Option<Vec<u16>> = None;
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
                    // The interpreter reads the answer from the import table.
                    if def.op == Op::ImportResolved && ordinal & IMPORT_ORDINAL_BIT == 0 {
                        return Err(format!("import.resolved names function {ordinal}, not an import"));
                    }
                    callee = Some(*ordinal);
                    inst.imm = *ordinal as u64;
                }
                (_, Operand::String(bytes)) => message = Some(String::from_utf8_lossy(bytes).into_owned()),
                (_, Operand::Count(count)) => {
                    inst.imm = *count as u64;
                }
                (_, Operand::Target(target)) => branches.push(Branch {
                    target: self.target(*target)?,
                    ..Branch::default()
                }),
                (_, Operand::Remap(pairs)) => {
                    let branch = branches.last_mut().ok_or("remap list without a branch target")?;
                    self.remap(pairs, branch)?;
                }
                (_, Operand::Cases(cases)) => {
                    for (target, pairs) in cases {
                        let mut branch = Branch {
                            target: self.target(*target)?,
                            ..Branch::default()
                        };
                        self.remap(pairs, &mut branch)?;
                        branches.push(branch);
                    }
                }
                (_, Operand::List(bank, registers)) => lists.push(self.list(*bank, registers)?),
                (_, Operand::Sizes(values)) => sizes = Some(values.clone()),
                (field, operand) => return Err(format!("operand {operand:?} does not match field {field:?}")),
            }
        }
        let extra = match def.op {
            Op::Call | Op::CallYieldable | Op::CallVariadic | Op::CallVariadicYieldable => {
                let callee = callee.ok_or("call without a callee")?;
                let (args, results) = match lists.as_slice() {
                    [args, results] => (args.clone(), results.clone()),
                    _ => return Err("call with unexpected operand lists".into()),
                };
                let variadic_kinds = self.check_call(callee, sizes.as_deref(), &args, &results)?;
                Some(Extra::Call {
                    callee,
                    variadic_kinds,
                    args,
                    results,
                    resume: branches.into_iter().next(),
                })
            }
            _ if !branches.is_empty() => {
                if branches.iter().any(|branch| !branch.ref_moves.is_empty()) {
                    // Moving refs may drop values; the hot handlers only move i32-bank registers.
                    inst.handler = crate::interp::hot::slow;
                }
                inst.extra = self.function.branches.len() as u32;
                self.function.branches.extend(branches);
                return Ok(inst);
            }
            Op::Return => {
                let list = lists.into_iter().next().unwrap_or(0..0);
                let signature = self.signature;
                self.check_kinds("result", signature.result_kinds(), &signature.text, &list)?;
                Some(Extra::List(list))
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
        let i32_count = self.function.i32_registers as u32;
        match bank {
            Bank::Ref => {
                if !raw.is_ref() {
                    return Err(format!("ref register required but non-ref {} provided", raw.0));
                }
                if raw.is_move() && !moves {
                    return Err(format!("register {raw} may not be moved here"));
                }
                if raw.0 & REF_ORDINAL_MASK >= self.function.ref_registers {
                    return Err(format!(
                        "ref register {raw} out of range {}",
                        self.function.ref_registers
                    ));
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

    /// Checks a branch's block-argument moves and records them, per bank, on `branch`.
    fn remap(&mut self, pairs: &[(RawRegister, RawRegister)], branch: &mut Branch) -> Check<()> {
        for (from, to) in pairs {
            if from.is_ref() != to.is_ref() {
                return Err(format!("block argument {from} -> {to} crosses register banks"));
            }
            let bank = if from.is_ref() { Bank::Ref } else { Bank::I32 };
            self.check_register(bank, *from, true)?;
            self.check_register(bank, *to, true)?;
        }
        let ref_moves = pairs.iter().filter(|(from, _)| from.is_ref());
        branch.ref_moves = ref_moves.map(|(from, to)| (from.0, to.0)).collect();
        let moves: Vec<(u16, u16)> = pairs
            .iter()
            .filter(|(from, _)| !from.is_ref())
            .map(|(f, t)| (f.0, t.0))
            .collect();
        branch.moves = merge_wide_moves(&moves).into();
        Ok(())
    }

    /// The instruction index of the block at byte offset `pc`; a block with no instructions
    /// (a marker at the very end) is no target.
    fn target(&self, pc: u32) -> Check<u32> {
        self.block_starts
            .get(&pc)
            .copied()
            .filter(|index| *index < self.instruction_count)
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
            if import as usize >= self.shape.imports.len() {
                return Err(format!(
                    "import ordinal {import} out of range {}",
                    self.shape.imports.len()
                ));
            }
        } else if ordinal as usize >= self.shape.functions.len() {
            return Err(format!(
                "function ordinal {ordinal} out of range {}",
                self.shape.functions.len()
            ));
        }
        Ok(())
    }

    /// Checks argument and result registers against the callee's calling convention; returns
    /// a variadic call's flattened argument kinds.
    fn check_call(
        &mut self,
        callee: u32,
        sizes: Option<&[u16]>,
        args: &Range<u32>,
        results: &Range<u32>,
    ) -> Check<Option<Box<[char]>>> {
        let signature = if callee & IMPORT_ORDINAL_BIT != 0 {
            let import = callee & !IMPORT_ORDINAL_BIT;
            self.shape.imports[import as usize]
                .as_ref()
                .ok_or_else(|| format!("import {import} has no calling convention"))?
        } else {
            self.shape.functions[callee as usize]
                .as_ref()
                .ok_or_else(|| format!("function {callee} has no calling convention"))?
        };
        self.check_kinds("result", signature.result_kinds(), &signature.text, results)?;
        let Some(sizes) = sizes else {
            let kinds = signature
                .fixed_argument_kinds()
                .ok_or_else(|| format!("'{}' is variadic but the call gives no segment sizes", signature.text))?;
            self.check_kinds("argument", kinds, &signature.text, args)?;
            return Ok(None);
        };
        if sizes.len() != signature.arguments.len() {
            return Err(format!(
                "variadic call passes {} segment sizes; '{}' has {} arguments",
                sizes.len(),
                signature.text,
                signature.arguments.len()
            ));
        }
        let counts: Vec<usize> = signature
            .arguments
            .iter()
            .zip(sizes)
            .filter(|(item, _)| matches!(item, crate::cconv::Item::Variadic(_)))
            .map(|(_, size)| *size as usize)
            .collect();
        let kinds = signature
            .flatten_arguments(&counts)
            .map_err(|e| e.message().to_string())?;
        self.check_kinds("argument", &kinds, &signature.text, args)?;
        Ok(Some(kinds.into()))
    }

    /// Checks that the registers of `list` hold values of `kinds` (calling-convention letters):
    /// as many, each in its bank, 64-bit values on aligned pairs inside the frame. This is what
    /// lets calls, returns and native functions read and write them without checks.
    fn check_kinds(&self, what: &str, kinds: &[char], cconv: &str, list: &Range<u32>) -> Check<()> {
        let registers = &self.function.regs[list.start as usize..list.end as usize];
        if registers.len() != kinds.len() {
            return Err(format!(
                "{} {what}s passed; '{cconv}' takes {}",
                registers.len(),
                kinds.len()
            ));
        }
        for (index, (&kind, &raw)) in kinds.iter().zip(registers).enumerate() {
            let bank = match kind {
                'r' => Bank::Ref,
                'I' => Bank::I64,
                'F' => Bank::F64,
                'f' => Bank::F32,
                _ => Bank::I32,
            };
            self.check_register(bank, RawRegister(raw), true)
                .map_err(|problem| format!("{what} {index} of '{cconv}' ('{kind}'): {problem}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(op: Op, registers: &[u16]) -> Inst {
        let mut regs = [0; 6];
        regs[..registers.len()].copy_from_slice(registers);
        Inst {
            op,
            handler: crate::interp::hot::handler(op, None),
            forward: None,
            regs,
            imm: 0,
            type_id: 0,
            extra: u32::MAX,
        }
    }

    fn forwards(insts: Vec<Inst>, targets: &[u32], checkpoints: &[u32]) -> Vec<Option<u8>> {
        let mut function = Function {
            insts,
            ..Default::default()
        };
        let targets = targets.iter().copied().collect();
        forward_results(&mut function, &targets, &checkpoints.iter().copied().collect());
        function.insts.iter().map(|inst| inst.forward).collect()
    }

    #[test]
    fn results_go_only_to_a_reader_of_the_same_slot_right_after() {
        let insts = vec![
            inst(Op::ConstI64, &[2]),
            // Reads the pair the constant wrote, as a pair: operand 0.
            inst(Op::AddI64, &[2, 4, 6]),
            // Reads the low half of the pair just written: not the same value.
            inst(Op::AddI32, &[6, 6, 8]),
            // Reads %i8 as operand 1.
            inst(Op::SubI32, &[1, 8, 9]),
            // Reads %i9, but execution may arrive here from elsewhere (a branch target).
            inst(Op::AddI32, &[9, 9, 10]),
            // Reads %i10, but resumes from the interpreter loop (a checkpoint).
            inst(Op::AddI32, &[10, 1, 11]),
            // Reads %i11, written by the previous instruction: operand 0 again.
            inst(Op::CmpNZI32, &[11, 12]),
        ];
        let forwards = forwards(insts, &[0, 4], &[5]);
        assert_eq!(forwards, [None, Some(0), None, Some(1), None, None, Some(0)]);
    }

    #[test]
    fn perf_loop_forwards_along_its_dependency_chains() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/vm/perf_loop.vmfb");
        let module = crate::BytecodeModule::from_file(std::path::Path::new(path)).unwrap();
        let (functions, _) = crate::context::verify(&module).unwrap();
        let forwarded = functions[0].insts.iter().filter(|inst| inst.forward.is_some()).count();
        // shr, xor, ext, add.i64, xor.i64, select, cast, mul.f32, add.f32, cmp.lt.f32, add.i32
        // (see `halo dump-module fixtures/vm/perf_loop.vmfb`).
        assert_eq!(forwarded, 11);
    }
}
