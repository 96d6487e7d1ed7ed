//! The operand type rules of the module checks ([`crate::CheckedModule`]): run after the id rules, so every id named
//! here is defined and of the right kind.
//!
//! Mesa's lavapipe segfaults on an access chain whose constant index is past its struct's last
//! member, and on a GLSL extended instruction given a pointer where a float goes (both found by
//! the mutation campaign). The rules below check what a driver assumes of operand types: pointers
//! only where an instruction takes one, loads, stores and access chains that agree with the
//! pointee, composite indices within their type, arithmetic on operands shaped like its result,
//! boolean conditions, phi and select values of the result's type, and calls that match the
//! callee's parameters.

use halo_hal::{Error, Result};
use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, StorageClass, Word};
use std::collections::HashMap;

/// A type, as far as the rules need it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ty {
    Bool,
    Int { width: u32 },
    Float { width: u32 },
    Vector { component: Word, count: u32 },
    Matrix { column: Word, count: u32 },
    Array { element: Word, length: Option<u64> },
    RuntimeArray { element: Word },
    Struct { members: Vec<Word> },
    Pointer { class: StorageClass, pointee: Word },
    Function { parameters: Vec<Word> },
    Other,
}

/// A scalar kind and width, and how many components: what arithmetic compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Bool(u32),
    Int { width: u32, count: u32 },
    Float { width: u32, count: u32 },
}

/// GLSL.std.450's Modf and Frexp, the only instructions of the set taking a pointer.
const GLSL_POINTER_TAKING: [u32; 2] = [35, 51];

/// Checks every instruction in the functions of `module`.
pub(crate) fn check(module: &Module) -> Result<()> {
    let types = Types::of(module);
    for function in &module.functions {
        for instruction in function.blocks.iter().flat_map(|b| &b.instructions) {
            types.check(instruction).map_err(|problem| {
                let id = function.def.as_ref().and_then(|d| d.result_id).unwrap_or(0);
                Error::invalid_argument(format!("SPIR-V instruction Op{} {problem}", instruction.class.opname))
                    .context(format!("in function %{id}"))
            })?;
        }
    }
    Ok(())
}

/// The types of a module, the type of every value, and integer constants.
struct Types {
    types: HashMap<Word, Ty>,
    value_types: HashMap<Word, Word>,
    constants: HashMap<Word, u64>,
    /// Function id -> its `OpTypeFunction`.
    function_types: HashMap<Word, Word>,
    /// The id of the `GLSL.std.450` instruction set, if imported.
    glsl: Option<Word>,
}

impl Types {
    fn of(module: &Module) -> Types {
        let mut types = HashMap::new();
        let mut value_types = HashMap::new();
        let mut constants = HashMap::new();
        let functions = module.functions.iter();
        let in_functions = functions.flat_map(|f| {
            let blocks = f.blocks.iter().flat_map(|b| &b.instructions);
            f.def.iter().chain(&f.parameters).chain(blocks)
        });
        for instruction in module.types_global_values.iter().chain(in_functions) {
            let Some(id) = instruction.result_id else { continue };
            if let Some(ty) = instruction.result_type {
                value_types.insert(id, ty);
                if instruction.class.opcode == Op::Constant {
                    if let Some(Operand::LiteralBit32(v)) = instruction.operands.first() {
                        constants.insert(id, u64::from(*v));
                    } else if let Some(Operand::LiteralBit64(v)) = instruction.operands.first() {
                        constants.insert(id, *v);
                    }
                }
            } else if crate::declares_type(instruction) {
                types.insert(id, type_of(instruction));
            }
        }
        let function_types = module
            .functions
            .iter()
            .filter_map(|f| {
                let def = f.def.as_ref()?;
                Some((def.result_id?, def.operands.get(1).and_then(crate::id_of)?))
            })
            .collect();
        let glsl = module
            .ext_inst_imports
            .iter()
            .find_map(|import| match import.operands.first() {
                Some(Operand::LiteralString(name)) if name == "GLSL.std.450" => import.result_id,
                _ => None,
            });
        let mut types = Types {
            types,
            value_types,
            constants,
            function_types,
            glsl,
        };
        types.resolve_array_lengths(module);
        types
    }

    /// Array lengths are constants, known only once the constants are.
    fn resolve_array_lengths(&mut self, module: &Module) {
        for instruction in module
            .types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::TypeArray)
        {
            if let (Some(id), Some(Operand::IdRef(length))) = (instruction.result_id, instruction.operands.get(1)) {
                let known = self.constants.get(length).copied();
                if let Some(Ty::Array { length, .. }) = self.types.get_mut(&id) {
                    *length = known;
                }
            }
        }
    }

    fn ty(&self, id: Word) -> &Ty {
        self.types.get(&id).unwrap_or(&Ty::Other)
    }

    /// The type of value `id`.
    fn type_of(&self, id: Word) -> Option<Word> {
        self.value_types.get(&id).copied()
    }

    fn is_pointer(&self, value: Word) -> bool {
        self.type_of(value)
            .is_some_and(|t| matches!(self.ty(t), Ty::Pointer { .. }))
    }

    fn shape(&self, ty: Word) -> Option<Shape> {
        let (scalar, count) = match self.ty(ty) {
            Ty::Vector { component, count } => (self.ty(*component), *count),
            other => (other, 1),
        };
        match scalar {
            Ty::Bool => Some(Shape::Bool(count)),
            Ty::Int { width } => Some(Shape::Int { width: *width, count }),
            Ty::Float { width } => Some(Shape::Float { width: *width, count }),
            _ => None,
        }
    }

    fn value_shape(&self, value: Word) -> Option<Shape> {
        self.shape(self.type_of(value)?)
    }

    fn check(&self, instruction: &Instruction) -> std::result::Result<(), String> {
        let ids: Vec<Word> = instruction.operands.iter().filter_map(crate::id_of).collect();
        let opcode = instruction.class.opcode;
        let result = instruction.result_type;
        if !self.takes_pointers(instruction) {
            if let Some(pointer) = ids.iter().find(|&&id| self.is_pointer(id)) {
                return Err(format!("takes %{pointer}, a pointer, where a value goes"));
            }
        }
        match opcode {
            Op::Load => self.expect_pointee(ids.first(), result),
            Op::Store => self.expect_pointee(ids.first(), ids.get(1).and_then(|&v| self.type_of(v))),
            Op::AccessChain | Op::InBoundsAccessChain => self.access_chain(&ids, result),
            Op::PtrAccessChain | Op::InBoundsPtrAccessChain => match ids.get(1) {
                Some(&element) if matches!(self.value_shape(element), Some(Shape::Int { count: 1, .. })) => {
                    self.access_chain(&[&ids[..1], &ids[2..]].concat(), result)
                }
                _ => Err("has an element operand that is not an integer".into()),
            },
            Op::CompositeExtract => {
                let indices = instruction.operands.get(1..).unwrap_or_default();
                match self.walk_literals(ids.first().and_then(|&v| self.type_of(v)), indices)? {
                    Some(member) => expect_same(Some(member), result, "the extracted member"),
                    None => Ok(()),
                }
            }
            Op::CompositeInsert => {
                let composite = ids.get(1).and_then(|&v| self.type_of(v));
                expect_same(composite, result, "the composite")?;
                match self.walk_literals(composite, instruction.operands.get(2..).unwrap_or_default())? {
                    Some(member) => expect_same(ids.first().and_then(|&v| self.type_of(v)), Some(member), "the member"),
                    None => Ok(()),
                }
            }
            Op::Select => {
                self.expect_condition(ids.first())?;
                ids[1..]
                    .iter()
                    .try_for_each(|&v| expect_same(self.type_of(v), result, "a selected value"))
            }
            Op::Phi => ids
                .iter()
                .step_by(2)
                .try_for_each(|&v| expect_same(self.type_of(v), result, "an incoming value")),
            Op::BranchConditional => self.expect_condition(ids.first()),
            Op::FunctionCall => self.call(&ids),
            _ if same_type_as_result(opcode) => ids
                .iter()
                .try_for_each(|&v| expect_same(self.type_of(v), result, "an operand")),
            _ if same_shape_as_result(opcode) => {
                let expected = result.and_then(|r| self.shape(r));
                match ids.iter().find(|&&v| self.value_shape(v) != expected) {
                    Some(v) => Err(format!("takes %{v}, whose type is not shaped like its result")),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Whether `instruction` may take pointer operands.
    fn takes_pointers(&self, instruction: &Instruction) -> bool {
        let name = instruction.class.opname;
        match instruction.class.opcode {
            Op::Load
            | Op::Store
            | Op::AccessChain
            | Op::InBoundsAccessChain
            | Op::PtrAccessChain
            | Op::InBoundsPtrAccessChain
            | Op::CopyMemory
            | Op::CopyMemorySized
            | Op::CopyObject
            | Op::ArrayLength
            | Op::FunctionCall
            | Op::Phi
            | Op::Select
            | Op::ReturnValue
            | Op::PtrEqual
            | Op::PtrNotEqual
            | Op::PtrDiff
            | Op::ConvertPtrToU
            | Op::Bitcast
            | Op::ImageTexelPointer => true,
            // Other sets (debug information) may name anything.
            Op::ExtInst => match instruction.operands.as_slice() {
                [Operand::IdRef(set), Operand::LiteralExtInstInteger(number), ..] => {
                    Some(*set) != self.glsl || GLSL_POINTER_TAKING.contains(number)
                }
                _ => true,
            },
            _ => {
                name.starts_with("Atomic")
                    || name.starts_with("Untyped")
                    || name.starts_with("CooperativeMatrixLoad")
                    || name.starts_with("CooperativeMatrixStore")
                    || name.contains("Cast")
            }
        }
    }

    fn expect_condition(&self, condition: Option<&Word>) -> std::result::Result<(), String> {
        match condition.and_then(|&c| self.value_shape(c)) {
            Some(Shape::Bool(_)) => Ok(()),
            _ => Err("has a condition that is not a boolean".into()),
        }
    }

    /// `value_type` must be what `pointer` points to.
    fn expect_pointee(&self, pointer: Option<&Word>, value_type: Option<Word>) -> std::result::Result<(), String> {
        match pointer.and_then(|&p| self.type_of(p)).map(|t| self.ty(t)) {
            Some(Ty::Pointer { pointee, .. }) => expect_same(value_type, Some(*pointee), "the pointee"),
            _ => Err("takes a pointer operand that is not a pointer".into()),
        }
    }

    /// `ids` is the base pointer then its indices.
    fn access_chain(&self, ids: &[Word], result: Option<Word>) -> std::result::Result<(), String> {
        let Some(Ty::Pointer { class, pointee }) = ids.first().and_then(|&b| self.type_of(b)).map(|t| self.ty(t))
        else {
            return Err("has a base that is not a pointer".into());
        };
        let mut current = *pointee;
        for &index in &ids[1..] {
            current = match self.ty(current) {
                Ty::Struct { members } => {
                    let member = self
                        .constants
                        .get(&index)
                        .and_then(|&i| members.get(usize::try_from(i).ok()?));
                    *member.ok_or_else(|| {
                        format!("indexes struct %{current} with %{index}, not a constant member index")
                    })?
                }
                Ty::Array { element, .. } | Ty::RuntimeArray { element } | Ty::Vector { component: element, .. } => {
                    self.expect_integer_index(index)?;
                    *element
                }
                Ty::Matrix { column, .. } => {
                    self.expect_integer_index(index)?;
                    *column
                }
                _ => return Err(format!("indexes %{current}, which is not a composite")),
            };
        }
        match result.map(|r| self.ty(r)) {
            Some(Ty::Pointer { class: c, pointee: p }) if c == class && *p == current => Ok(()),
            _ => Err(format!(
                "has a result type that is not a {class:?} pointer to %{current}"
            )),
        }
    }

    fn expect_integer_index(&self, index: Word) -> std::result::Result<(), String> {
        match self.value_shape(index) {
            Some(Shape::Int { count: 1, .. }) => Ok(()),
            _ => Err(format!("takes %{index}, not an integer, as an index")),
        }
    }

    /// The type reached from `ty` by literal member `indices`; `None` when a type on the way is
    /// one these rules do not model (a cooperative matrix), so nothing can be said of it.
    fn walk_literals(&self, ty: Option<Word>, indices: &[Operand]) -> std::result::Result<Option<Word>, String> {
        let Some(mut current) = ty else { return Ok(None) };
        for index in indices {
            let Operand::LiteralBit32(index) = *index else {
                return Ok(None);
            };
            let within = |count: u64| u64::from(index) < count;
            current = match self.ty(current) {
                Ty::Struct { members } => members.get(index as usize).copied(),
                Ty::Array { element, length } => length.is_none_or(within).then_some(*element),
                Ty::Vector { component, count } => within(u64::from(*count)).then_some(*component),
                Ty::Matrix { column, count } => within(u64::from(*count)).then_some(*column),
                _ => return Ok(None),
            }
            .ok_or_else(|| format!("indexes %{current} with member {index}, past its end"))?;
        }
        Ok(Some(current))
    }

    /// A call's arguments against its callee's parameter types.
    fn call(&self, ids: &[Word]) -> std::result::Result<(), String> {
        let callee_type = ids.first().and_then(|&f| self.function_types.get(&f));
        let Some(Ty::Function { parameters }) = callee_type.map(|&t| self.ty(t)) else {
            return Err("calls a function without a function type".into());
        };
        if parameters.len() != ids.len() - 1 {
            return Err(format!(
                "passes {} arguments to {} parameters",
                ids.len() - 1,
                parameters.len()
            ));
        }
        parameters
            .iter()
            .zip(&ids[1..])
            .try_for_each(|(&p, &a)| expect_same(self.type_of(a), Some(p), "a parameter"))
    }
}

fn expect_same(actual: Option<Word>, expected: Option<Word>, what: &str) -> std::result::Result<(), String> {
    match (actual, expected) {
        (Some(a), Some(e)) if a == e => Ok(()),
        (a, e) => Err(format!(
            "has a type mismatch: %{} where {what} needs %{}",
            a.unwrap_or(0),
            e.unwrap_or(0)
        )),
    }
}

fn type_of(instruction: &Instruction) -> Ty {
    let ops = instruction.operands.as_slice();
    match (instruction.class.opcode, ops) {
        (Op::TypeBool, _) => Ty::Bool,
        (Op::TypeInt, [Operand::LiteralBit32(width), ..]) => Ty::Int { width: *width },
        (Op::TypeFloat, [Operand::LiteralBit32(width), ..]) => Ty::Float { width: *width },
        (Op::TypeVector, [Operand::IdRef(component), Operand::LiteralBit32(count)]) => Ty::Vector {
            component: *component,
            count: *count,
        },
        (Op::TypeMatrix, [Operand::IdRef(column), Operand::LiteralBit32(count)]) => Ty::Matrix {
            column: *column,
            count: *count,
        },
        (Op::TypeArray, [Operand::IdRef(element), ..]) => Ty::Array {
            element: *element,
            length: None,
        },
        (Op::TypeRuntimeArray, [Operand::IdRef(element)]) => Ty::RuntimeArray { element: *element },
        (Op::TypeStruct, members) => Ty::Struct {
            members: members.iter().filter_map(crate::id_of).collect(),
        },
        (Op::TypePointer, [Operand::StorageClass(class), Operand::IdRef(pointee)]) => Ty::Pointer {
            class: *class,
            pointee: *pointee,
        },
        (Op::TypeFunction, [_, parameters @ ..]) => Ty::Function {
            parameters: parameters.iter().filter_map(crate::id_of).collect(),
        },
        _ => Ty::Other,
    }
}

/// Instructions whose every operand has the result's type.
fn same_type_as_result(opcode: Op) -> bool {
    matches!(
        opcode,
        Op::FAdd | Op::FSub | Op::FMul | Op::FDiv | Op::FRem | Op::FMod | Op::FNegate
    )
}

/// Instructions whose operands are integers of the result's width and component count (their
/// signedness may differ).
fn same_shape_as_result(opcode: Op) -> bool {
    matches!(
        opcode,
        Op::IAdd
            | Op::ISub
            | Op::IMul
            | Op::UDiv
            | Op::SDiv
            | Op::UMod
            | Op::SRem
            | Op::SMod
            | Op::SNegate
            | Op::BitwiseAnd
            | Op::BitwiseOr
            | Op::BitwiseXor
            | Op::Not
    )
}
