//! One entry point written as an OpenCL C kernel.
//!
//! Control flow is written as it is in SPIR-V, one labelled block after another joined by `goto`,
//! rather than rebuilt into loops and ifs from the merge instructions: labels and gotos express
//! every control-flow graph exactly (early exits from loops, switches that fall into a shared
//! block), so no shape can be translated wrongly, and OpenCL compilers take it straight into their
//! own control-flow graph. Every value is a variable declared at the top of the kernel (so a goto
//! never skips a declaration), and an `OpPhi` is a variable that each predecessor assigns just
//! before it branches.

use crate::module::{Global, ModuleIndex};
use crate::operands::{id, literal, op_name, result_id, result_type};
use crate::types::{address_space, component, Type};
use crate::Subgroups;
use halo_hal::{Error, Result};
use rspirv::dr::{Block, Function, Instruction, Operand};
use rspirv::spirv::{BuiltIn, Op, StorageClass, Word};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// One phi of a block: its result and the value it takes from each predecessor.
struct Phi {
    result: Word,
    ty: Word,
    incoming: Vec<(Word, Word)>,
}

/// Writes one kernel.
pub(crate) struct KernelWriter<'a> {
    pub(crate) index: &'a ModuleIndex,
    function: &'a Function,
    /// The result type of every value the function defines.
    value_types: HashMap<Word, Word>,
    /// Function-scope variables.
    locals: HashSet<Word>,
    /// Pointers into input builtins: the builtin and the component chosen, if any.
    builtin_pointers: HashMap<Word, (BuiltIn, Option<u32>)>,
    /// What each access chain result points into, so it can be kept inside it.
    pointer_roots: HashMap<Word, Root>,
    /// Each block's phis, by the block's label.
    phis: HashMap<Word, Vec<Phi>>,
    labels: HashSet<Word>,
    /// The module-scope variables the function names, in id order.
    globals_used: Vec<Word>,
    /// The block being written.
    current: Word,
    /// The workgroup size the kernel requires.
    pub(crate) workgroup_size: [u32; 3],
    /// The subgroup size emulated in workgroup memory, or 0 to refuse subgroup operations.
    pub(crate) subgroup_size: u32,
    /// How subgroup operations are written.
    pub(crate) subgroups: Subgroups,
    /// Whether a subgroup operation needs the workgroup-memory scratch.
    pub(crate) uses_subgroup_scratch: bool,
    /// Whether a subgroup built-in is used, so the kernel must require its subgroup size.
    pub(crate) uses_native_subgroups: std::cell::Cell<bool>,
    body: String,
}

/// What a pointer points into.
#[derive(Debug, Clone)]
enum Root {
    /// The storage buffer at (set, binding).
    Buffer { set: u32, binding: u32 },
    /// A variable of the kernel, by its OpenCL C name, in address space `space`.
    Variable { space: &'static str, name: String },
}

/// Keeps pointers inside what they point into (see `KernelWriter::assign_within`): `p` when its
/// `n` bytes lie in the `size` bytes from `start`, else the last place they fit that is a whole
/// number of `n` from `start`: a size that is not a multiple of the element (a damaged program's
/// binding length) must not leave a misaligned element, which the aligned vector loads PoCL's
/// compiler makes fault on (found by `bytecode_sweep --device opencl`). A minimum, not a choice
/// between two places: 1024^3 f32 matmul on PoCL took 1.18x the unchecked time with it, 1.5x
/// with a select.
pub(crate) const WITHIN_HELPERS: &str = "\
typedef __global uchar uchar_global;
typedef __local uchar uchar_local;
typedef uchar uchar_private;
static inline __global uchar* halo_within_global(__global uchar* p, __global uchar* start, ulong size, ulong n) {
    ulong at = (ulong)(p - start);
    ulong last = size >= n ? size - n : 0;
    last -= n > 1 ? last % n : 0;
    return start + min(at, last);
}
static inline __local uchar* halo_within_local(__local uchar* p, __local uchar* start, ulong size, ulong n) {
    ulong at = (ulong)(p - start);
    ulong last = size >= n ? size - n : 0;
    last -= n > 1 ? last % n : 0;
    return start + min(at, last);
}
static inline uchar* halo_within_private(uchar* p, uchar* start, ulong size, ulong n) {
    ulong at = (ulong)(p - start);
    ulong last = size >= n ? size - n : 0;
    last -= n > 1 ? last % n : 0;
    return start + min(at, last);
}
";

impl<'a> KernelWriter<'a> {
    /// Prepares to write `function`.
    pub(crate) fn new(
        index: &'a ModuleIndex,
        function: &'a Function,
        workgroup_size: [u32; 3],
        subgroup_size: u32,
        subgroups: Subgroups,
    ) -> Result<Self> {
        let mut writer = KernelWriter {
            index,
            function,
            value_types: HashMap::new(),
            locals: HashSet::new(),
            builtin_pointers: HashMap::new(),
            pointer_roots: HashMap::new(),
            phis: HashMap::new(),
            labels: HashSet::new(),
            globals_used: Vec::new(),
            current: 0,
            workgroup_size,
            subgroup_size,
            subgroups,
            uses_subgroup_scratch: false,
            uses_native_subgroups: std::cell::Cell::new(false),
            body: String::new(),
        };
        if !function.parameters.is_empty() {
            return Err(Error::unimplemented("entry point functions with parameters"));
        }
        for block in &function.blocks {
            let label = block_label(block)?;
            if !writer.labels.insert(label) {
                return Err(Error::invalid_argument(format!(
                    "SPIR-V block %{label} is defined twice"
                )));
            }
            for instruction in &block.instructions {
                writer.record(label, instruction)?;
            }
        }
        let mut used: Vec<Word> = function
            .blocks
            .iter()
            .flat_map(|b| &b.instructions)
            .flat_map(|i| &i.operands)
            .filter_map(|o| match o {
                Operand::IdRef(id) if index.globals.contains_key(id) => Some(*id),
                _ => None,
            })
            .collect();
        used.sort_unstable();
        used.dedup();
        writer.globals_used = used;
        Ok(writer)
    }

    fn record(&mut self, label: Word, instruction: &Instruction) -> Result<()> {
        let (Some(result), Some(ty)) = (instruction.result_id, instruction.result_type) else {
            return Ok(());
        };
        if self.index.globals.contains_key(&result)
            || self.index.constant(result).is_some()
            || self.value_types.insert(result, ty).is_some()
        {
            return Err(Error::invalid_argument(format!("SPIR-V id %{result} is defined twice")));
        }
        match instruction.class.opcode {
            Op::Variable => {
                self.locals.insert(result);
            }
            Op::Phi => {
                let incoming = (0..instruction.operands.len() / 2)
                    .map(|pair| Ok((id(instruction, 2 * pair)?, id(instruction, 2 * pair + 1)?)))
                    .collect::<Result<Vec<_>>>()?;
                self.phis.entry(label).or_default().push(Phi { result, ty, incoming });
            }
            _ => {}
        }
        Ok(())
    }

    /// The kernel's OpenCL C source: `__kernel void name(...) { ... }`.
    pub(crate) fn write(mut self, name: &str, entry_point: &str) -> Result<String> {
        for block in &self.function.blocks {
            self.current = block_label(block)?;
            let _ = writeln!(self.body, "L{}:;", self.current);
            for instruction in &block.instructions {
                self.instruction(instruction).map_err(|e| {
                    e.context(format!(
                        "SPIR-V Op{} (result {:?})",
                        op_name(instruction),
                        instruction.result_id
                    ))
                })?;
            }
        }
        let mut out = String::new();
        let [x, y, z] = self.workgroup_size;
        let _ = writeln!(out, "// entry point {entry_point:?}");
        let subgroup_size = if self.uses_native_subgroups.get() {
            format!(" __attribute__((intel_reqd_sub_group_size({})))", self.subgroup_size)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "__kernel __attribute__((reqd_work_group_size({x}, {y}, {z}))){subgroup_size} void {name}({}) {{",
            self.parameters()?
        );
        out.push_str(&self.declarations()?);
        out.push_str(&self.body);
        out.push_str("}\n");
        Ok(out)
    }

    /// The (set, binding) of every storage buffer the kernel uses, in order: its buffer
    /// arguments.
    pub(crate) fn bindings(&self) -> Vec<(u32, u32)> {
        let mut bindings: Vec<(u32, u32)> = self
            .globals_used
            .iter()
            .filter_map(|g| match self.index.globals.get(g) {
                Some(Global::Buffer { set, binding, .. }) => Some((*set, *binding)),
                _ => None,
            })
            .collect();
        bindings.sort_unstable();
        bindings.dedup();
        bindings
    }

    /// The type of the push constant block the kernel reads, if it reads one.
    pub(crate) fn push_constants(&self) -> Option<Word> {
        self.globals_used.iter().find_map(|g| match self.index.globals.get(g) {
            Some(Global::PushConstants { pointee }) => Some(*pointee),
            _ => None,
        })
    }

    fn parameters(&self) -> Result<String> {
        let mut parameters: Vec<String> = self
            .bindings()
            .iter()
            .map(|(set, binding)| {
                format!(
                    "__global uchar* b{set}_{binding}_base, ulong b{set}_{binding}_offset, ulong b{set}_{binding}_size"
                )
            })
            .collect();
        if let Some(pointee) = self.push_constants() {
            parameters.push(format!("{} pc", self.index.type_name(pointee)?));
        }
        Ok(parameters.join(", "))
    }

    /// Declarations of the workgroup and private variables the function uses, its local variables
    /// and every value it defines.
    fn declarations(&self) -> Result<String> {
        let mut out = String::new();
        if let Some(scratch) = self.subgroup_scratch() {
            out.push_str(&scratch);
            out.push('\n');
        }
        for (set, binding) in self.bindings() {
            let _ = writeln!(
                out,
                "__global uchar* b{set}_{binding} = b{set}_{binding}_base + b{set}_{binding}_offset;"
            );
        }
        let mut initializers = String::new();
        for &variable in &self.globals_used {
            match self.index.globals.get(&variable) {
                Some(Global::Workgroup { pointee }) => {
                    let _ = writeln!(out, "__local {} g{variable};", self.index.type_name(*pointee)?);
                }
                Some(Global::Private { pointee, initializer }) => {
                    let _ = writeln!(out, "{} g{variable};", self.index.type_name(*pointee)?);
                    if let Some(initializer) = initializer {
                        let _ = writeln!(initializers, "g{variable} = {};", self.value(*initializer)?);
                    }
                }
                _ => {}
            }
        }
        let mut values: Vec<(&Word, &Word)> = self.value_types.iter().collect();
        values.sort_unstable();
        for (value, ty) in values {
            if self.locals.contains(value) {
                let (_, pointee) = self.pointer_type(*ty)?;
                let _ = writeln!(out, "{} l{value};", self.index.type_name(pointee)?);
            } else if !matches!(
                self.index.ty(*ty)?,
                Type::Void
                    | Type::Pointer {
                        class: StorageClass::Input,
                        ..
                    }
            ) {
                if matches!(self.index.ty(*ty)?, Type::Array { .. } | Type::Struct { .. })
                    && self.index.holds_emulated_half(*ty)?
                {
                    return Err(Error::unimplemented(
                        "aggregates holding f16 as values on a device without cl_khr_fp16",
                    ));
                }
                let _ = writeln!(out, "{} v{value};", self.index.type_name(*ty)?);
            }
        }
        out.push_str(&initializers);
        Ok(out)
    }

    fn pointer_type(&self, ty: Word) -> Result<(StorageClass, Word)> {
        match self.index.ty(ty)? {
            Type::Pointer { class, pointee } => Ok((*class, *pointee)),
            _ => Err(Error::invalid_argument(format!("SPIR-V type %{ty} is not a pointer"))),
        }
    }

    /// The storage class and pointee type of the pointer `pointer`.
    pub(crate) fn pointee(&self, pointer: Word) -> Result<(StorageClass, Word)> {
        match self.index.globals.get(&pointer) {
            Some(Global::Buffer { pointee, .. }) => Ok((StorageClass::StorageBuffer, *pointee)),
            Some(Global::PushConstants { pointee }) => Ok((StorageClass::PushConstant, *pointee)),
            Some(Global::Workgroup { pointee }) => Ok((StorageClass::Workgroup, *pointee)),
            Some(Global::Private { pointee, .. }) => Ok((StorageClass::Private, *pointee)),
            Some(Global::Builtin(builtin)) => Err(Error::unimplemented(format!(
                "builtin {builtin:?} used other than by a load"
            ))),
            None => self.pointer_type(self.type_of(pointer)?),
        }
    }

    /// The type of the value `id`.
    pub(crate) fn type_of(&self, id: Word) -> Result<Word> {
        self.value_types
            .get(&id)
            .copied()
            .or_else(|| self.index.constant_type(id))
            .ok_or_else(|| Error::invalid_argument(format!("SPIR-V id %{id} is not a value defined here")))
    }

    /// The OpenCL C expression of the value `id`.
    pub(crate) fn value(&self, id: Word) -> Result<String> {
        if let Some(constant) = self.index.constant_expression(id) {
            return Ok(constant.to_string());
        }
        match self.index.globals.get(&id) {
            Some(Global::Buffer { set, binding, pointee }) => {
                return Ok(format!(
                    "((__global {}*)b{set}_{binding})",
                    self.index.type_name(*pointee)?
                ));
            }
            Some(Global::PushConstants { .. }) => return Ok("(&pc)".into()),
            Some(Global::Workgroup { .. } | Global::Private { .. }) => return Ok(format!("(&g{id})")),
            Some(Global::Builtin(builtin)) => {
                return Err(Error::unimplemented(format!(
                    "builtin {builtin:?} used other than by a load"
                )))
            }
            None => {}
        }
        if self.locals.contains(&id) {
            Ok(format!("(&l{id})"))
        } else if self.value_types.contains_key(&id) {
            Ok(format!("v{id}"))
        } else {
            Err(Error::invalid_argument(format!(
                "SPIR-V id %{id} is not a value defined here"
            )))
        }
    }

    /// Operand `index` of `instruction` as an expression.
    pub(crate) fn operand(&self, instruction: &Instruction, index: usize) -> Result<String> {
        self.value(id(instruction, index)?)
    }

    /// Operand `index` of `instruction`'s type.
    pub(crate) fn operand_type(&self, instruction: &Instruction, index: usize) -> Result<Word> {
        self.type_of(id(instruction, index)?)
    }

    /// Assigns `expression` to `instruction`'s result.
    pub(crate) fn assign(&mut self, instruction: &Instruction, expression: &str) -> Result<()> {
        let _ = writeln!(self.body, "v{} = {expression};", result_id(instruction)?);
        Ok(())
    }

    /// A statement of its own.
    pub(crate) fn statement(&mut self, statement: &str) {
        let _ = writeln!(self.body, "{statement}");
    }

    fn instruction(&mut self, instruction: &Instruction) -> Result<()> {
        match instruction.class.opcode {
            Op::Nop | Op::SelectionMerge | Op::LoopMerge | Op::Line | Op::NoLine | Op::Phi => Ok(()),
            Op::Variable => match instruction.operands.get(1) {
                Some(Operand::IdRef(initializer)) => {
                    let initial = self.value(*initializer)?;
                    let _ = writeln!(self.body, "l{} = {initial};", result_id(instruction)?);
                    Ok(())
                }
                _ => Ok(()),
            },
            Op::Load => self.load(instruction),
            Op::Store => {
                let (pointer, value) = (id(instruction, 0)?, self.operand(instruction, 1)?);
                if self.builtin_pointers.contains_key(&pointer) {
                    return Err(Error::invalid_argument("SPIR-V store into an input builtin"));
                }
                let statement = match self.stored_half(pointer)? {
                    Some((space, suffix)) => {
                        format!(
                            "vstore_half{suffix}_rte({value}, 0, ({space}half*){});",
                            self.value(pointer)?
                        )
                    }
                    None => format!("*{} = {value};", self.value(pointer)?),
                };
                self.statement(&statement);
                Ok(())
            }
            Op::CopyMemory => {
                let (target, source) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
                self.statement(&format!("*{target} = *{source};"));
                Ok(())
            }
            Op::AccessChain | Op::InBoundsAccessChain => self.access_chain(instruction),
            Op::Branch => {
                let target = id(instruction, 0)?;
                let jump = self.jump(target)?;
                self.statement(&jump);
                Ok(())
            }
            Op::BranchConditional => {
                let condition = self.operand(instruction, 0)?;
                let (yes, no) = (self.jump(id(instruction, 1)?)?, self.jump(id(instruction, 2)?)?);
                self.statement(&format!("if ({condition}) {{ {yes} }} else {{ {no} }}"));
                Ok(())
            }
            Op::Switch => self.switch(instruction),
            Op::Return | Op::Unreachable => {
                self.statement("return;");
                Ok(())
            }
            Op::ControlBarrier => {
                let scope = self.index.integer_constant(id(instruction, 0)?)?;
                if scope != WORKGROUP_SCOPE {
                    return Err(Error::unimplemented(format!("control barriers of scope {scope}")));
                }
                self.statement("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);");
                Ok(())
            }
            Op::MemoryBarrier => {
                self.statement("mem_fence(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);");
                Ok(())
            }
            _ => self.expression(instruction),
        }
    }

    fn load(&mut self, instruction: &Instruction) -> Result<()> {
        let pointer = id(instruction, 0)?;
        let builtin = match self.index.globals.get(&pointer) {
            Some(Global::Builtin(builtin)) => Some((*builtin, None)),
            _ => self.builtin_pointers.get(&pointer).copied(),
        };
        let expression = match builtin {
            Some((builtin, component)) => self.builtin_expression(builtin, component)?,
            None => match self.stored_half(pointer)? {
                Some((space, suffix)) => format!("vload_half{suffix}(0, ({space}half*){})", self.value(pointer)?),
                None => format!("*{}", self.value(pointer)?),
            },
        };
        self.assign(instruction, &expression)
    }

    /// For a pointer to emulated f16 in shared memory: its address space and the vector suffix of
    /// `vload_half`/`vstore_half` (empty for a scalar).
    fn stored_half(&self, pointer: Word) -> Result<Option<(&'static str, String)>> {
        let (class, pointee) = self.pointee(pointer)?;
        if !crate::module::is_memory(class) {
            return Ok(None);
        }
        Ok(match self.index.emulated_half(pointee)? {
            Some(1) => Some((address_space(class)?, String::new())),
            Some(count) => Some((address_space(class)?, count.to_string())),
            None => None,
        })
    }

    /// `&(*base).member.a[index]...`, or a note of which builtin component a pointer selects.
    fn access_chain(&mut self, instruction: &Instruction) -> Result<()> {
        let result = result_id(instruction)?;
        let base = id(instruction, 0)?;
        let indices = (1..instruction.operands.len())
            .map(|k| id(instruction, k))
            .collect::<Result<Vec<_>>>()?;
        let builtin = match self.index.globals.get(&base) {
            Some(Global::Builtin(builtin)) => Some(*builtin),
            _ => None,
        };
        if let Some(builtin) = builtin {
            let component = match indices.as_slice() {
                [] => None,
                [index] => Some(self.index.integer_constant(*index)? as u32),
                _ => return Err(Error::unimplemented("access chains deeper than one into a builtin")),
            };
            self.builtin_pointers.insert(result, (builtin, component));
            return Ok(());
        }
        let (class, mut ty) = self.pointee(base)?;
        let space = address_space(class)?;
        let result_type = self.index.type_name(result_type(instruction)?)?;
        let mut lvalue = format!("(*{})", self.value(base)?);
        for (position, &index) in indices.iter().enumerate() {
            match self.index.ty(ty)?.clone() {
                Type::Struct { members, .. } => {
                    let member = self.index.integer_constant(index)?;
                    ty = *members.get(member as usize).ok_or_else(|| {
                        Error::invalid_argument(format!("member {member} of a struct of {}", members.len()))
                    })?;
                    let _ = write!(lvalue, ".m{member}");
                }
                Type::Array { element, .. } => {
                    let _ = write!(lvalue, ".a[{}]", self.index_expression(index)?);
                    ty = element;
                }
                Type::RuntimeArray { element, .. } => {
                    let _ = write!(lvalue, "[{}]", self.index_expression(index)?);
                    ty = element;
                }
                Type::Vector { component, .. } if position + 1 == indices.len() => {
                    // OpenCL C takes no address of a vector component: index the vector's scalars.
                    let scalar = self.index.type_name(component)?;
                    let index = self.index_expression(index)?;
                    let pointer = format!("(({space}{scalar}*)&{lvalue} + {index})");
                    return self.assign_within(instruction, base, &pointer, component, &result_type);
                }
                _ => return Err(Error::invalid_argument("SPIR-V access chain indexes into a scalar")),
            }
        }
        self.assign_within(instruction, base, &format!("&{lvalue}"), ty, &result_type)
    }

    /// Assigns access chain `instruction` the pointer `pointer` to a value of type `pointee`,
    /// kept inside the buffer or variable that `base` points into: an index past its end (a
    /// program whose bounds were changed) points to its last element instead, as Vulkan's robust
    /// buffer access allows, rather than into the host memory an OpenCL runtime on the CPU keeps
    /// next to it. The check is integer arithmetic on the offset, not a choice between two
    /// pointers, which Intel's OpenCL compiler 2024 does not survive (its vectorizer overflows
    /// its stack).
    fn assign_within(
        &mut self,
        instruction: &Instruction,
        base: Word,
        pointer: &str,
        pointee: Word,
        result_type: &str,
    ) -> Result<()> {
        // The bytes the pointee takes in memory (an emulated f16 is 2, though a float as a
        // value); a runtime array has no size, and only its start must be inside.
        let bytes = self.index.layout(pointee).map_or(0, |layout| layout.size);
        let root = self.root_of(base)?;
        self.pointer_roots.insert(result_id(instruction)?, root.clone());
        let (space, start, size) = match &root {
            Root::Buffer { set, binding } => ("global", format!("b{set}_{binding}"), format!("b{set}_{binding}_size")),
            Root::Variable { space, name } => (*space, format!("(&{name})"), format!("sizeof({name})")),
        };
        let kept = format!(
            "(({result_type})halo_within_{space}((uchar_{space}*)({pointer}), (uchar_{space}*){start}, {size}, \
             {bytes}))"
        );
        self.assign(instruction, &kept)
    }

    /// The buffer or variable that pointer `base` points into.
    fn root_of(&self, base: Word) -> Result<Root> {
        if let Some(root) = self.pointer_roots.get(&base) {
            return Ok(root.clone());
        }
        let variable = |space: &'static str, name: String| Root::Variable { space, name };
        match self.index.globals.get(&base) {
            Some(Global::Buffer { set, binding, .. }) => Ok(Root::Buffer {
                set: *set,
                binding: *binding,
            }),
            Some(Global::Workgroup { .. }) => Ok(variable("local", format!("g{base}"))),
            Some(Global::Private { .. }) => Ok(variable("private", format!("g{base}"))),
            Some(Global::PushConstants { .. }) => Ok(variable("private", "pc".into())),
            _ if self.locals.contains(&base) => Ok(variable("private", format!("l{base}"))),
            _ => Err(Error::invalid_argument(format!(
                "SPIR-V access chain base %{base} is not a variable or a pointer into one"
            ))),
        }
    }

    /// An index operand as a signed C index, as SPIR-V reads indices.
    fn index_expression(&self, index: Word) -> Result<String> {
        let value = self.value(index)?;
        Ok(match self.index.scalar_width(self.type_of(index)?)? {
            (64, false) => format!("(long)({value})"),
            (_, false) => format!("(int)({value})"),
            _ => return Err(Error::invalid_argument("SPIR-V access chain index is a vector")),
        })
    }

    /// The statements that leave the current block for `target`: its phis' assignments, then the
    /// jump.
    fn jump(&self, target: Word) -> Result<String> {
        if !self.labels.contains(&target) {
            return Err(Error::invalid_argument(format!(
                "SPIR-V branch to %{target}, which is no block here"
            )));
        }
        let current = self.current;
        let phis = self.phis.get(&target).map(Vec::as_slice).unwrap_or_default();
        let mut out = String::new();
        // Every incoming value is read before any phi is written: one phi may feed another.
        for (n, phi) in phis.iter().enumerate() {
            let value = phi
                .incoming
                .iter()
                .find(|(_, predecessor)| *predecessor == current)
                .ok_or_else(|| {
                    Error::invalid_argument(format!("SPIR-V phi %{} has no value from block %{current}", phi.result))
                })?
                .0;
            let _ = write!(out, "{} p{n} = {}; ", self.index.type_name(phi.ty)?, self.value(value)?);
        }
        for (n, phi) in phis.iter().enumerate() {
            let _ = write!(out, "v{} = p{n}; ", phi.result);
        }
        let _ = write!(out, "goto L{target};");
        Ok(if phis.is_empty() { out } else { format!("{{ {out} }}") })
    }

    fn switch(&mut self, instruction: &Instruction) -> Result<()> {
        let selector = self.operand(instruction, 0)?;
        let mut cases = format!("default: {{ {} }}", self.jump(id(instruction, 1)?)?);
        for pair in instruction.operands.get(2..).unwrap_or_default().chunks(2) {
            let value = match pair.first() {
                Some(Operand::LiteralBit32(value)) => u64::from(*value),
                Some(Operand::LiteralBit64(value)) => *value,
                _ => return Err(Error::invalid_argument("SPIR-V OpSwitch case without a literal")),
            };
            let target = match pair.get(1) {
                Some(Operand::IdRef(target)) => *target,
                _ => return Err(Error::invalid_argument("SPIR-V OpSwitch case without a target")),
            };
            let _ = write!(cases, " case {value}ul: {{ {} }}", self.jump(target)?);
        }
        self.statement(&format!("switch ((ulong)({selector})) {{ {cases} }}"));
        Ok(())
    }

    /// The literal operands from `from` on, as a path into a composite of type `ty`: the C
    /// accessors (`.s1`, `.m0`, `.a[2]`) and the type reached.
    pub(crate) fn composite_path(
        &self,
        instruction: &Instruction,
        from: usize,
        mut ty: Word,
    ) -> Result<(String, Word)> {
        let mut path = String::new();
        for index in from..instruction.operands.len() {
            let k = literal(instruction, index)?;
            match self.index.ty(ty)? {
                Type::Vector { component: c, count } if k < *count => {
                    path.push_str(&component(k)?);
                    ty = *c;
                }
                Type::Struct { members, .. } if (k as usize) < members.len() => {
                    let _ = write!(path, ".m{k}");
                    ty = members[k as usize];
                }
                Type::Array { element, length, .. } if u64::from(k) < *length => {
                    let _ = write!(path, ".a[{k}]");
                    ty = *element;
                }
                _ => return Err(Error::invalid_argument(format!("composite index {k} is out of range"))),
            }
        }
        Ok((path, ty))
    }
}

/// SPIR-V's `Workgroup` scope.
const WORKGROUP_SCOPE: u64 = 2;

fn block_label(block: &Block) -> Result<Word> {
    block
        .label
        .as_ref()
        .and_then(|l| l.result_id)
        .ok_or_else(|| Error::invalid_argument("SPIR-V block without a label"))
}

/// The value of an input builtin (one component, or the whole `uint3`).
impl KernelWriter<'_> {
    fn builtin_expression(&self, builtin: BuiltIn, component: Option<u32>) -> Result<String> {
        let function = match builtin {
            BuiltIn::WorkgroupId => "get_group_id",
            BuiltIn::LocalInvocationId => "get_local_id",
            BuiltIn::GlobalInvocationId => "get_global_id",
            BuiltIn::NumWorkgroups => "get_num_groups",
            BuiltIn::WorkgroupSize => "get_local_size",
            BuiltIn::LocalInvocationIndex => return Ok(LOCAL_INDEX.into()),
            BuiltIn::SubgroupSize
            | BuiltIn::SubgroupLocalInvocationId
            | BuiltIn::SubgroupId
            | BuiltIn::NumSubgroups => return self.subgroup_builtin(builtin),
            other => return Err(Error::unimplemented(format!("builtin {other:?}"))),
        };
        Ok(match component {
            Some(c) if c < 3 => format!("((uint){function}({c}))"),
            Some(c) => return Err(Error::invalid_argument(format!("component {c} of builtin {builtin:?}"))),
            None => format!("((uint3)((uint){function}(0), (uint){function}(1), (uint){function}(2)))"),
        })
    }
}

/// The invocation's index in its workgroup (`LocalInvocationIndex`).
pub(crate) const LOCAL_INDEX: &str =
    "((uint)((get_local_id(2) * get_local_size(1) + get_local_id(1)) * get_local_size(0) + get_local_id(0)))";
