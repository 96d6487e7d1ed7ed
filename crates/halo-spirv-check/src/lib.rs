//! Checks a SPIR-V module before a driver's compiler sees it: the Vulkan driver's pipeline
//! compiler, or the OpenCL driver's translator and the OpenCL C compiler after it.
//!
//! Vulkan drivers trust their SPIR-V: Mesa's lavapipe, given a module that uses an id nobody
//! defines, crashes inside `vkCreateComputePipelines` (found by `scripts/mutate-modules
//! --modules vulkan`). A `.vmfb` is input like any other, so every module is checked here first:
//! its words, its grammar (through rspirv), its ids (each defined once, within the bound, before
//! use, of the right kind: types where a type goes, labels of the same function where a branch
//! goes, functions where a call goes), and, per export, that the entry point exists and that every
//! descriptor and push constant it uses is in its pipeline layout. This is not the full validator
//! of SPIRV-Tools (the `spirv-tools` crate compiles its C++ from source: more than 8 minutes per
//! build profile on a 2-core machine, measured): it covers what breaks drivers, and the mutation
//! campaign is how it is kept honest.

mod types;

use halo_hal::{Error, Result};
use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Decoration, ExecutionMode, ExecutionModel, Op, StorageClass, Word};
use std::collections::{HashMap, HashSet};

/// SPIR-V's universal limit on the id bound (the specification's "Result <id> bound").
const MAX_ID_BOUND: Word = 0x40_0000;

/// First word of every SPIR-V module.
const MAGIC: u32 = 0x0723_0203;

/// Words in the module header before the first instruction.
const HEADER_WORDS: usize = 5;

/// What an id names, as far as where it may be used goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Type,
    /// A block label of the function with this index.
    Label(usize),
    Function,
    /// A value, variable or anything else an instruction operates on; `Some` for one local to a
    /// function.
    Value(Option<usize>),
}

/// A SPIR-V module that passed the module-wide checks.
pub struct CheckedModule {
    words: Vec<u32>,
    module: Module,
}

impl CheckedModule {
    /// Checks `words` as a module for a device that accepts SPIR-V up to `max_version` (the
    /// header's version word).
    ///
    /// # Errors
    /// `InvalidArgument` naming the instruction or id that is wrong.
    pub fn new(words: Vec<u32>, max_version: Word) -> Result<Self> {
        let bound = check_header(&words, max_version)?;
        let module = rspirv::dr::load_words(&words)
            .map_err(|e| Error::invalid_argument(format!("SPIR-V module does not parse: {e}")))?;
        IdCheck::new(&module, bound)?.run()?;
        types::check(&module)?;
        Ok(CheckedModule { words, module })
    }

    /// The module's words.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Checks that `entry_point` is a compute entry point of the module whose descriptors are
    /// among `bindings` ((set, binding) pairs of its pipeline layout) and which uses push
    /// constants only when `has_push_constants`; returns its `LocalSize`, or `None` when the
    /// module sets the workgroup size another way (from specialization constants).
    ///
    /// # Errors
    /// `InvalidArgument` naming the entry point and what it lacks.
    pub fn check_entry_point(
        &self,
        entry_point: &str,
        bindings: &HashSet<(u32, u32)>,
        has_push_constants: bool,
    ) -> Result<Option<[u32; 3]>> {
        let function = self
            .module
            .entry_points
            .iter()
            .find(|entry| matches!(entry.operands.get(2), Some(Operand::LiteralString(name)) if name == entry_point))
            .and_then(|entry| match entry.operands.as_slice() {
                [Operand::ExecutionModel(ExecutionModel::GLCompute), Operand::IdRef(function), ..] => Some(*function),
                _ => None,
            })
            .ok_or_else(|| {
                Error::invalid_argument(format!("the SPIR-V module has no compute entry point '{entry_point}'"))
            })?;
        let resources = self.resources();
        for variable in self.used_globals(function) {
            let Some(resource) = resources.get(&variable) else {
                continue;
            };
            match *resource {
                Resource::PushConstants if !has_push_constants => {
                    return Err(Error::invalid_argument(format!(
                        "entry point '{entry_point}' uses push constants (%{variable}) but its pipeline \
                         layout has no push constant range"
                    )));
                }
                Resource::Descriptor(Some(slot)) if !bindings.contains(&slot) => {
                    return Err(Error::invalid_argument(format!(
                        "entry point '{entry_point}' uses descriptor set {} binding {} (%{variable}), which \
                         its pipeline layout does not have",
                        slot.0, slot.1
                    )));
                }
                Resource::Descriptor(None) => {
                    return Err(Error::invalid_argument(format!(
                        "entry point '{entry_point}' uses %{variable}, a descriptor without a set and a binding"
                    )));
                }
                _ => {}
            }
        }
        Ok(self.local_size(function))
    }

    /// The `LocalSize` execution mode of `function`, if it has one.
    fn local_size(&self, function: Word) -> Option<[u32; 3]> {
        self.module.execution_modes.iter().find_map(|mode| match mode.operands.as_slice() {
            [Operand::IdRef(f), Operand::ExecutionMode(ExecutionMode::LocalSize), Operand::LiteralBit32(x), Operand::LiteralBit32(y), Operand::LiteralBit32(z)]
                if *f == function =>
            {
                Some([*x, *y, *z])
            }
            _ => None,
        })
    }

    /// Module-scope variables that come from the pipeline layout, by id.
    fn resources(&self) -> HashMap<Word, Resource> {
        let mut decorations: HashMap<Word, (Option<u32>, Option<u32>)> = HashMap::new();
        for annotation in &self.module.annotations {
            if let [Operand::IdRef(target), Operand::Decoration(decoration), Operand::LiteralBit32(value), ..] =
                annotation.operands.as_slice()
            {
                let entry = decorations.entry(*target).or_default();
                match decoration {
                    Decoration::DescriptorSet => entry.0 = Some(*value),
                    Decoration::Binding => entry.1 = Some(*value),
                    _ => {}
                }
            }
        }
        let mut resources = HashMap::new();
        for variable in self
            .module
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::Variable)
        {
            let (Some(id), Some(Operand::StorageClass(class))) = (variable.result_id, variable.operands.first()) else {
                continue;
            };
            let resource = match class {
                StorageClass::PushConstant => Resource::PushConstants,
                StorageClass::StorageBuffer | StorageClass::Uniform | StorageClass::UniformConstant => {
                    match decorations.get(&id) {
                        Some((Some(set), Some(binding))) => Resource::Descriptor(Some((*set, *binding))),
                        _ => Resource::Descriptor(None),
                    }
                }
                _ => continue,
            };
            resources.insert(id, resource);
        }
        resources
    }

    /// The ids named by the instructions of `function` and of every function it calls.
    fn used_globals(&self, function: Word) -> HashSet<Word> {
        let by_id: HashMap<Word, &rspirv::dr::Function> = self
            .module
            .functions
            .iter()
            .filter_map(|f| Some((f.def.as_ref()?.result_id?, f)))
            .collect();
        let (mut used, mut visited, mut pending) = (HashSet::new(), HashSet::new(), vec![function]);
        while let Some(id) = pending.pop() {
            let Some(function) = by_id.get(&id).filter(|_| visited.insert(id)) else {
                continue;
            };
            for instruction in function.blocks.iter().flat_map(|b| &b.instructions) {
                for operand in &instruction.operands {
                    if let Some(id) = id_of(operand) {
                        used.insert(id);
                        if instruction.class.opcode == Op::FunctionCall {
                            pending.push(id);
                        }
                    }
                }
            }
        }
        used
    }
}

/// A module-scope variable bound through the pipeline layout.
#[derive(Debug, Clone, Copy)]
enum Resource {
    PushConstants,
    /// A buffer or image at (set, binding), `None` when undecorated.
    Descriptor(Option<(u32, u32)>),
}

/// Checks the header and that the instructions tile the words; returns the id bound.
fn check_header(words: &[u32], max_version: Word) -> Result<Word> {
    let [magic, version, _generator, bound, _schema] = words.get(..HEADER_WORDS).unwrap_or_default() else {
        return Err(Error::invalid_argument("SPIR-V module is shorter than its header"));
    };
    if *magic != MAGIC {
        return Err(Error::invalid_argument(
            "shader module is not SPIR-V (bad magic number)",
        ));
    }
    if *version > max_version {
        return Err(Error::invalid_argument(format!(
            "SPIR-V version {}.{} is newer than the device accepts ({}.{})",
            version >> 16 & 0xff,
            version >> 8 & 0xff,
            max_version >> 16 & 0xff,
            max_version >> 8 & 0xff
        )));
    }
    if *bound == 0 || *bound > MAX_ID_BOUND {
        return Err(Error::invalid_argument(format!(
            "SPIR-V id bound {bound} is outside 1..={MAX_ID_BOUND}"
        )));
    }
    halo_spirv_fb::check_instruction_lengths(words)?;
    Ok(*bound)
}

/// Whether `instruction` declares a type (`OpType*`).
pub(crate) fn declares_type(instruction: &Instruction) -> bool {
    instruction.class.opname.starts_with("Type")
}

/// The id an operand names, if it names one.
pub(crate) fn id_of(operand: &Operand) -> Option<Word> {
    match operand {
        Operand::IdRef(id) | Operand::IdScope(id) | Operand::IdMemorySemantics(id) => Some(*id),
        _ => None,
    }
}

/// Where in an instruction an id operand sits, for what it may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// A branch or merge target, or a phi's parent block: a label of the same function.
    Label,
    /// A call's callee.
    Callee,
    /// A phi's incoming value: defined anywhere in the function, also later.
    PhiValue,
    /// Anything else: defined before (in the module or the function), not a label or function.
    Operand,
    /// An operand of a debug, annotation or mode-setting instruction: defined anywhere.
    Reference,
}

fn use_of(opcode: Op, index: usize) -> Use {
    match opcode {
        Op::Branch | Op::SelectionMerge | Op::LoopMerge => Use::Label,
        Op::BranchConditional | Op::Switch if index >= 1 => Use::Label,
        Op::Phi if index % 2 == 1 => Use::Label,
        Op::Phi => Use::PhiValue,
        Op::FunctionCall if index == 0 => Use::Callee,
        Op::EntryPoint if index == 1 => Use::Callee,
        Op::ExecutionMode | Op::ExecutionModeId if index == 0 => Use::Callee,
        Op::EntryPoint
        | Op::ExecutionMode
        | Op::ExecutionModeId
        | Op::Name
        | Op::MemberName
        | Op::Decorate
        | Op::DecorateId
        | Op::DecorateString
        | Op::MemberDecorate
        | Op::MemberDecorateString
        | Op::GroupDecorate
        | Op::GroupMemberDecorate
        | Op::TypeForwardPointer => Use::Reference,
        _ => Use::Operand,
    }
}

/// The id rules, checked over one module.
struct IdCheck<'m> {
    module: &'m Module,
    kinds: HashMap<Word, Kind>,
    /// Ids defined so far in the walk (module scope, then the current function).
    defined: HashSet<Word>,
}

impl<'m> IdCheck<'m> {
    /// Collects every definition: each id within `bound` and defined once.
    fn new(module: &'m Module, bound: Word) -> Result<Self> {
        let mut kinds = HashMap::new();
        let mut define = |instruction: &Instruction, kind: Kind| -> Result<()> {
            let Some(id) = instruction.result_id else {
                return Ok(());
            };
            if id == 0 || id >= bound {
                return Err(instruction_error(
                    instruction,
                    format!("defines %{id}, outside the id bound {bound}"),
                ));
            }
            if kinds.insert(id, kind).is_some() {
                return Err(instruction_error(instruction, format!("defines %{id} a second time")));
            }
            Ok(())
        };
        for instruction in global_instructions(module) {
            let kind = if declares_type(instruction) {
                Kind::Type
            } else {
                Kind::Value(None)
            };
            define(instruction, kind)?;
        }
        for (index, function) in module.functions.iter().enumerate() {
            if let Some(def) = &function.def {
                define(def, Kind::Function)?;
            }
            for parameter in &function.parameters {
                define(parameter, Kind::Value(Some(index)))?;
            }
            for block in &function.blocks {
                if let Some(label) = &block.label {
                    define(label, Kind::Label(index))?;
                }
                for instruction in &block.instructions {
                    define(instruction, Kind::Value(Some(index)))?;
                }
            }
        }
        Ok(IdCheck {
            module,
            kinds,
            defined: HashSet::new(),
        })
    }

    fn run(mut self) -> Result<()> {
        let forward_pointers: HashSet<Word> = self
            .module
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::TypeForwardPointer)
            .filter_map(|i| i.operands.first().and_then(id_of))
            .collect();
        self.defined.extend(forward_pointers);
        for instruction in global_instructions(self.module) {
            self.check(instruction, None)?;
        }
        let module_scope = self.defined.clone();
        for (index, function) in self.module.functions.iter().enumerate() {
            self.defined.clone_from(&module_scope);
            let blocks = function.blocks.iter();
            let body = blocks.flat_map(|b| b.label.iter().chain(&b.instructions));
            for instruction in function.def.iter().chain(&function.parameters).chain(body) {
                self.check(instruction, Some(index))
                    .map_err(|e| e.context(format!("in function {}", function_name(function))))?;
            }
        }
        Ok(())
    }

    /// Checks the ids `instruction` uses, in function `function` (`None`: module scope), then
    /// counts its result as defined.
    fn check(&mut self, instruction: &Instruction, function: Option<usize>) -> Result<()> {
        if let Some(ty) = instruction.result_type {
            if self.kinds.get(&ty) != Some(&Kind::Type) || !self.defined.contains(&ty) {
                return Err(instruction_error(
                    instruction,
                    format!("has result type %{ty}, which is not a type declared before it"),
                ));
            }
        }
        let ids = instruction.operands.iter().enumerate();
        for (index, id) in ids.filter_map(|(index, operand)| Some((index, id_of(operand)?))) {
            let kind = self.kinds.get(&id).copied();
            let usable_value = |kind: Option<Kind>| match kind {
                Some(Kind::Value(Some(owner))) => Some(owner) == function,
                Some(Kind::Value(None) | Kind::Type) => true,
                _ => false,
            };
            let fine = match use_of(instruction.class.opcode, index) {
                Use::Label => function.is_some() && kind == function.map(Kind::Label),
                Use::Callee => kind == Some(Kind::Function),
                Use::PhiValue => usable_value(kind),
                Use::Operand => usable_value(kind) && self.defined.contains(&id),
                Use::Reference => kind.is_some(),
            };
            if !fine {
                let what = match kind {
                    None => "which nothing defines",
                    Some(Kind::Type) => "a type not declared before it",
                    Some(Kind::Label(owner)) if Some(owner) == function => "a label, where no label may go",
                    Some(Kind::Label(_)) => "a label of another function",
                    Some(Kind::Function) => "a function, where no function may go",
                    Some(Kind::Value(Some(owner))) if Some(owner) != function => "a value of another function",
                    Some(Kind::Value(_)) => "a value, where it is not defined yet or no value may go",
                };
                return Err(instruction_error(
                    instruction,
                    format!("uses %{id} as operand {index}, {what}"),
                ));
            }
        }
        if let Some(id) = instruction.result_id {
            self.defined.insert(id);
        }
        Ok(())
    }
}

/// The module-scope instructions, in module order.
fn global_instructions(module: &Module) -> impl Iterator<Item = &Instruction> {
    module
        .capabilities
        .iter()
        .chain(&module.extensions)
        .chain(&module.ext_inst_imports)
        .chain(&module.memory_model)
        .chain(&module.entry_points)
        .chain(&module.execution_modes)
        .chain(&module.debug_string_source)
        .chain(&module.debug_names)
        .chain(&module.debug_module_processed)
        .chain(&module.annotations)
        .chain(&module.types_global_values)
}

fn function_name(function: &rspirv::dr::Function) -> String {
    match function.def.as_ref().and_then(|d| d.result_id) {
        Some(id) => format!("%{id}"),
        None => "without an id".to_string(),
    }
}

fn instruction_error(instruction: &Instruction, problem: String) -> Error {
    Error::invalid_argument(format!("SPIR-V instruction Op{} {problem}", instruction.class.opname))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rspirv::binary::Assemble;
    use rspirv::dr::Builder;
    use rspirv::spirv::{AddressingModel, Capability, ExecutionMode, FunctionControl, MemoryModel};

    const SPIRV_1_6: Word = 0x0001_0600;

    /// Ids of the test shader that a body may use.
    struct Ids {
        uint: Word,
        zero: Word,
        element: Word,
        buffer: Word,
    }

    /// A compute shader "main" with a storage buffer at set 0, binding 1, whose one block is
    /// `body` (which ends it).
    fn shader(body: impl FnOnce(&mut Builder, &Ids)) -> Vec<u32> {
        let mut b = Builder::new();
        b.set_version(1, 3);
        b.capability(Capability::Shader);
        b.memory_model(AddressingModel::Logical, MemoryModel::GLSL450);
        let void = b.type_void();
        let uint = b.type_int(32, 0);
        let zero = b.constant_bit32(uint, 0);
        let runtime = b.type_runtime_array(uint);
        let block = b.type_struct([runtime]);
        let pointer = b.type_pointer(None, StorageClass::StorageBuffer, block);
        let element = b.type_pointer(None, StorageClass::StorageBuffer, uint);
        let buffer = b.variable(pointer, None, StorageClass::StorageBuffer, None);
        b.decorate(buffer, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
        b.decorate(buffer, Decoration::Binding, [Operand::LiteralBit32(1)]);
        let function_type = b.type_function(void, []);
        let main = b
            .begin_function(void, None, FunctionControl::NONE, function_type)
            .unwrap();
        b.begin_block(None).unwrap();
        body(
            &mut b,
            &Ids {
                uint,
                zero,
                element,
                buffer,
            },
        );
        b.end_function().unwrap();
        b.entry_point(ExecutionModel::GLCompute, main, "main", []);
        b.execution_mode(main, ExecutionMode::LocalSize, [1, 1, 1]);
        b.module().assemble()
    }

    /// Stores 0 to element 0 of the buffer.
    fn store_zero(b: &mut Builder, ids: &Ids) {
        let at = b
            .access_chain(ids.element, None, ids.buffer, [ids.zero, ids.zero])
            .unwrap();
        b.store(at, ids.zero, None, []).unwrap();
        b.ret().unwrap();
    }

    fn layout(pairs: &[(u32, u32)]) -> HashSet<(u32, u32)> {
        pairs.iter().copied().collect()
    }

    fn module_error(words: Vec<u32>) -> String {
        match CheckedModule::new(words, SPIRV_1_6) {
            Ok(_) => panic!("the module passed"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn a_well_formed_shader_passes() {
        let module = CheckedModule::new(shader(store_zero), SPIRV_1_6).unwrap();
        let local_size = module.check_entry_point("main", &layout(&[(0, 1)]), false).unwrap();
        assert_eq!(local_size, Some([1, 1, 1]));
    }

    #[test]
    fn ids_must_be_defined_once_before_use_and_of_the_right_kind() {
        let cases: [(&str, Vec<u32>); 5] = [
            (
                "which nothing defines",
                shader(|b, ids| {
                    let at = b
                        .access_chain(ids.element, None, ids.buffer, [ids.zero, ids.zero])
                        .unwrap();
                    b.store(at, 999, None, []).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "not a type declared before it",
                shader(|b, ids| {
                    b.i_add(ids.zero, None, ids.zero, ids.zero).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "a value, where it is not defined yet",
                shader(|b, ids| {
                    let later = b.id();
                    b.i_add(ids.uint, None, later, ids.zero).unwrap();
                    b.copy_object(ids.uint, Some(later), ids.zero).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "a second time",
                shader(|b, ids| {
                    b.i_add(ids.uint, Some(ids.zero), ids.zero, ids.zero).unwrap();
                    b.ret().unwrap();
                }),
            ),
            ("uses %", shader(|b, ids| b.branch(ids.zero).unwrap())),
        ];
        for (expected, words) in cases {
            let error = module_error(words);
            assert!(error.contains(expected), "{expected}: {error}");
        }
        let error = module_error(shader(|b, ids| b.branch(ids.zero).unwrap()));
        assert!(error.contains("OpBranch uses %"), "{error}");
    }

    #[test]
    fn operand_types_must_fit_the_instruction() {
        let cases: [(&str, Vec<u32>); 6] = [
            (
                "with member 5, past its end",
                shader(|b, ids| {
                    let vector = b.type_vector(ids.uint, 3);
                    let zeros = b.composite_construct(vector, None, [ids.zero; 3]).unwrap();
                    b.composite_extract(ids.uint, None, zeros, [5]).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "indexes struct",
                shader(|b, ids| {
                    let five = b.constant_bit32(ids.uint, 5);
                    b.access_chain(ids.element, None, ids.buffer, [five, ids.zero]).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "a pointer, where a value goes",
                shader(|b, ids| {
                    b.i_add(ids.uint, None, ids.buffer, ids.zero).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "OpExtInst takes %",
                shader(|b, ids| {
                    let glsl = b.ext_inst_import("GLSL.std.450");
                    let float = b.type_float(32, None);
                    let one = b.constant_bit32(float, 1.0f32.to_bits());
                    let fma = 50;
                    let operands = [ids.buffer, one, one].map(Operand::IdRef);
                    b.ext_inst(float, None, glsl, fma, operands).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "type mismatch",
                shader(|b, ids| {
                    let at = b
                        .access_chain(ids.element, None, ids.buffer, [ids.zero, ids.zero])
                        .unwrap();
                    let float = b.type_float(32, None);
                    b.load(float, None, at, None, []).unwrap();
                    b.ret().unwrap();
                }),
            ),
            (
                "not a boolean",
                shader(|b, ids| {
                    let (yes, no) = (b.id(), b.id());
                    b.branch_conditional(ids.zero, yes, no, []).unwrap();
                    b.begin_block(Some(yes)).unwrap();
                    b.ret().unwrap();
                    b.begin_block(Some(no)).unwrap();
                    b.ret().unwrap();
                }),
            ),
        ];
        for (expected, words) in cases {
            let error = module_error(words);
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn the_header_bound_and_lengths_are_checked() {
        let good = shader(store_zero);
        let mut small_bound = good.clone();
        small_bound[3] = 3;
        let mut newer = good.clone();
        newer[1] = 0x0001_0700;
        let mut huge_bound = good.clone();
        huge_bound[3] = u32::MAX;
        // The last instruction (OpFunctionEnd) claims a second word the module lacks.
        let mut overlong = good.clone();
        *overlong.last_mut().unwrap() += 1 << 16;
        let cases = [
            ("outside the id bound 3", small_bound),
            ("newer than the device accepts", newer),
            ("outside 1..=", huge_bound),
            ("past the module's", overlong),
            ("shorter than its header", good[..3].to_vec()),
        ];
        for (expected, words) in cases {
            let error = module_error(words);
            assert!(error.contains(expected), "{expected}: {error}");
        }
        let error = CheckedModule::new(good, 0x0001_0200).err().unwrap().to_string();
        assert!(
            error.contains("SPIR-V version 1.3 is newer than the device accepts (1.2)"),
            "{error}"
        );
    }

    #[test]
    fn an_entry_point_needs_its_name_and_every_descriptor_in_its_layout() {
        let module = CheckedModule::new(shader(store_zero), SPIRV_1_6).unwrap();
        let missing = module
            .check_entry_point("other", &layout(&[(0, 1)]), false)
            .unwrap_err();
        assert!(
            missing.to_string().contains("no compute entry point 'other'"),
            "{missing}"
        );
        let unbound = module.check_entry_point("main", &layout(&[(0, 0)]), false).unwrap_err();
        assert!(
            unbound.to_string().contains("uses descriptor set 0 binding 1"),
            "{unbound}"
        );
        // A shader that does not touch the buffer needs no binding for it.
        let idle = CheckedModule::new(shader(|b, _| b.ret().unwrap()), SPIRV_1_6).unwrap();
        idle.check_entry_point("main", &layout(&[]), false).unwrap();
    }

    /// Every module and pipeline `iree-compile` 3.13 wrote for the executable fixtures passes:
    /// the checks refuse nothing the compiler makes.
    #[test]
    fn every_fixture_passes() {
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/executables");
        let mut checked = 0;
        for entry in std::fs::read_dir(fixtures).unwrap() {
            let path = entry.unwrap().path();
            if !path.to_string_lossy().ends_with(".vulkan-spirv-fb.fb") {
                continue;
            }
            let data = std::fs::read(&path).unwrap();
            let def = halo_spirv_fb::parse(&data).unwrap();
            let modules: Vec<CheckedModule> = def
                .shader_modules()
                .unwrap()
                .iter()
                .map(|m| CheckedModule::new(m.spirv_code().unwrap().iter().collect(), SPIRV_1_6).unwrap())
                .collect();
            let sets = def.descriptor_set_layouts().unwrap();
            for pipeline in def.pipelines().unwrap() {
                let pipeline_layout = def
                    .pipeline_layouts()
                    .unwrap()
                    .get(pipeline.pipeline_layout_ordinal() as usize);
                let mut bindings = HashSet::new();
                for (set, ordinal) in pipeline_layout
                    .descriptor_set_layout_ordinals()
                    .unwrap()
                    .iter()
                    .enumerate()
                {
                    for binding in sets.get(ordinal as usize).bindings().unwrap() {
                        bindings.insert((set as u32, binding.binding()));
                    }
                }
                let push = pipeline_layout.push_constant_ranges().is_some_and(|r| !r.is_empty());
                modules[pipeline.shader_module_ordinal() as usize]
                    .check_entry_point(pipeline.entry_point().unwrap(), &bindings, push)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                checked += 1;
            }
        }
        assert!(checked >= 8, "only {checked} pipelines checked");
    }
}
