//! What the translator knows of a module before it writes a kernel: types, constants, module-scope
//! variables and their decorations, all looked up by id.

use crate::operands::{builtin, decoration, id, literal, op_name, result_id, result_type, storage_class, string};
use crate::types::{
    address_space, align_up, float_name, signed_name, unsigned_name, vector_count_supported, Layout, Type,
};
use crate::Options;
use halo_hal::{Error, Result};
use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{BuiltIn, Capability, Decoration, Op, StorageClass, Word};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// A constant's value.
#[derive(Debug, Clone)]
pub(crate) enum Constant {
    /// An integer or float of the type, as its bit pattern.
    Scalar {
        ty: Word,
        bits: u64,
    },
    Bool {
        ty: Word,
        value: bool,
    },
    Composite {
        ty: Word,
        parts: Vec<Word>,
    },
    /// `OpConstantNull` and `OpUndef` (an undefined value may be anything; zero is one).
    Zero(Word),
}

/// A module-scope variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Global {
    /// A storage buffer at (set, binding), holding `pointee`.
    Buffer { set: u32, binding: u32, pointee: Word },
    /// The push constant block.
    PushConstants { pointee: Word },
    /// Memory shared by a workgroup.
    Workgroup { pointee: Word },
    /// Memory private to an invocation.
    Private { pointee: Word, initializer: Option<Word> },
    /// An input builtin (workgroup id, local id, ...).
    Builtin(BuiltIn),
}

#[derive(Debug, Default)]
struct Decorations {
    set: Option<u32>,
    binding: Option<u32>,
    builtin: Option<BuiltIn>,
    array_stride: Option<u32>,
    spec_id: Option<u32>,
}

/// The module, indexed.
pub(crate) struct ModuleIndex {
    types: HashMap<Word, Type>,
    constants: HashMap<Word, Constant>,
    /// Each constant as an OpenCL C expression, written once.
    constant_text: HashMap<Word, String>,
    pub(crate) globals: HashMap<Word, Global>,
    /// `OpExtInstImport "GLSL.std.450"` ids.
    glsl: HashSet<Word>,
    /// Struct and array types in definition order, each needing a typedef.
    aggregates: Vec<Word>,
    /// The push constant variable, if any.
    push_constants: Option<Word>,
    /// f16 without `cl_khr_fp16`: values are `float`s rounded to f16 after each operation, memory
    /// holds `ushort` bit patterns reached with `vload_half`/`vstore_half_rte`.
    pub(crate) emulate_f16: bool,
}

impl ModuleIndex {
    /// Indexes `module`, refusing what OpenCL C cannot express.
    pub(crate) fn new(module: &Module, options: &Options) -> Result<Self> {
        check_capabilities(module, options)?;
        let mut index = ModuleIndex {
            types: HashMap::new(),
            constants: HashMap::new(),
            constant_text: HashMap::new(),
            globals: HashMap::new(),
            glsl: HashSet::new(),
            aggregates: Vec::new(),
            push_constants: None,
            emulate_f16: !options.fp16,
        };
        for import in &module.ext_inst_imports {
            if string(import, 0)? == "GLSL.std.450" {
                index.glsl.insert(result_id(import)?);
            }
        }
        let decorations = decorations(module)?;
        let offsets = member_offsets(module)?;
        for instruction in &module.types_global_values {
            index.add_global(instruction, &decorations, &offsets, options)?;
        }
        for aggregate in index.aggregates.clone() {
            index.check_layout(aggregate)?;
        }
        Ok(index)
    }

    /// Whether `set` is the id of the GLSL.std.450 instruction set.
    pub(crate) fn is_glsl(&self, set: Word) -> bool {
        self.glsl.contains(&set)
    }

    /// The type `ty`.
    pub(crate) fn ty(&self, ty: Word) -> Result<&Type> {
        self.types
            .get(&ty)
            .ok_or_else(|| Error::invalid_argument(format!("SPIR-V id %{ty} is not a type")))
    }

    /// The constant `id`, if it is one.
    pub(crate) fn constant(&self, id: Word) -> Option<&Constant> {
        self.constants.get(&id)
    }

    /// The type of the constant `id`, if it is one.
    pub(crate) fn constant_type(&self, id: Word) -> Option<Word> {
        Some(match self.constants.get(&id)? {
            Constant::Scalar { ty, .. }
            | Constant::Bool { ty, .. }
            | Constant::Composite { ty, .. }
            | Constant::Zero(ty) => *ty,
        })
    }

    /// The value of the integer constant `id`.
    pub(crate) fn integer_constant(&self, id: Word) -> Result<u64> {
        match self.constants.get(&id) {
            Some(Constant::Scalar { ty, bits }) if matches!(self.ty(*ty)?, Type::Int(_)) => Ok(*bits),
            Some(Constant::Zero(ty)) if matches!(self.ty(*ty)?, Type::Int(_)) => Ok(0),
            _ => Err(Error::invalid_argument(format!(
                "SPIR-V id %{id} must be an integer constant"
            ))),
        }
    }

    fn add_global(
        &mut self,
        instruction: &Instruction,
        decorations: &HashMap<Word, Decorations>,
        offsets: &HashMap<(Word, u32), u32>,
        options: &Options,
    ) -> Result<()> {
        let opcode = instruction.class.opcode;
        if let Some(this) = instruction.result_id {
            // A redefined id could turn the type graph into a cycle.
            if self.types.contains_key(&this) || self.constants.contains_key(&this) || self.globals.contains_key(&this)
            {
                return Err(Error::invalid_argument(format!("SPIR-V id %{this} is defined twice")));
            }
        }
        let decorated = |id: Word| decorations.get(&id);
        let ty = match opcode {
            Op::TypeVoid => Type::Void,
            Op::TypeBool => Type::Bool,
            Op::TypeInt => Type::Int(literal(instruction, 0)?),
            Op::TypeFloat => Type::Float(literal(instruction, 0)?),
            Op::TypeVector => Type::Vector {
                component: id(instruction, 0)?,
                count: literal(instruction, 1)?,
            },
            Op::TypeArray => {
                let length = self.integer_constant(id(instruction, 1)?)?;
                if length == 0 {
                    return Err(Error::invalid_argument("SPIR-V array type of length 0"));
                }
                Type::Array {
                    element: id(instruction, 0)?,
                    length,
                    stride: decorated(result_id(instruction)?).and_then(|d| d.array_stride),
                }
            }
            Op::TypeRuntimeArray => Type::RuntimeArray {
                element: id(instruction, 0)?,
                stride: decorated(result_id(instruction)?).and_then(|d| d.array_stride),
            },
            Op::TypeStruct => {
                let this = result_id(instruction)?;
                let members = (0..instruction.operands.len())
                    .map(|i| id(instruction, i))
                    .collect::<Result<Vec<_>>>()?;
                let offsets = (0..members.len() as u32)
                    .map(|m| offsets.get(&(this, m)).copied())
                    .collect();
                Type::Struct { members, offsets }
            }
            Op::TypePointer => Type::Pointer {
                class: storage_class(instruction, 0)?,
                pointee: id(instruction, 1)?,
            },
            Op::TypeFunction => Type::Function,
            Op::Constant | Op::SpecConstant => {
                let this = result_id(instruction)?;
                let mut bits = match instruction.operands.first() {
                    Some(Operand::LiteralBit32(bits)) => u64::from(*bits),
                    Some(Operand::LiteralBit64(bits)) => *bits,
                    _ => return Err(Error::invalid_argument(format!("SPIR-V constant %{this} has no value"))),
                };
                if let Some(value) = self.specialization(opcode, decorated(this), options) {
                    bits = u64::from(value);
                }
                let ty = result_type(instruction)?;
                return self.insert_constant(this, Constant::Scalar { ty, bits });
            }
            Op::ConstantTrue | Op::ConstantFalse | Op::SpecConstantTrue | Op::SpecConstantFalse => {
                let this = result_id(instruction)?;
                let mut value = matches!(opcode, Op::ConstantTrue | Op::SpecConstantTrue);
                if let Some(special) = self.specialization(opcode, decorated(this), options) {
                    value = special != 0;
                }
                let ty = result_type(instruction)?;
                return self.insert_constant(this, Constant::Bool { ty, value });
            }
            Op::ConstantComposite | Op::SpecConstantComposite => {
                let parts = (0..instruction.operands.len())
                    .map(|i| id(instruction, i))
                    .collect::<Result<Vec<_>>>()?;
                // Parts defined before the composite keep writing it out finite.
                if let Some(part) = parts.iter().find(|p| !self.constants.contains_key(p)) {
                    return Err(Error::invalid_argument(format!(
                        "SPIR-V composite constant part %{part} is not a constant defined before it"
                    )));
                }
                let constant = Constant::Composite {
                    ty: result_type(instruction)?,
                    parts,
                };
                return self.insert_constant(result_id(instruction)?, constant);
            }
            Op::ConstantNull | Op::Undef => {
                let constant = Constant::Zero(result_type(instruction)?);
                return self.insert_constant(result_id(instruction)?, constant);
            }
            Op::Variable => return self.add_variable(instruction, decorated(result_id(instruction)?)),
            _ => {
                return Err(Error::unimplemented(format!(
                    "SPIR-V Op{} at module scope is not translated to OpenCL C",
                    op_name(instruction)
                )))
            }
        };
        let this = result_id(instruction)?;
        // Types may only use types defined before them, so naming and sizing a type always ends.
        if let Some(undefined) = used_types(&ty).into_iter().find(|t| !self.types.contains_key(t)) {
            return Err(Error::invalid_argument(format!(
                "SPIR-V type %{this} uses %{undefined}, which is not a type defined before it"
            )));
        }
        if matches!(ty, Type::Array { .. } | Type::Struct { .. }) {
            self.aggregates.push(this);
        }
        self.types.insert(this, ty);
        Ok(())
    }

    /// The value a specialization constant takes from the options, if it is one and is given.
    fn specialization(&self, opcode: Op, decorations: Option<&Decorations>, options: &Options) -> Option<u32> {
        let special = matches!(opcode, Op::SpecConstant | Op::SpecConstantTrue | Op::SpecConstantFalse);
        let spec_id = decorations.and_then(|d| d.spec_id).filter(|_| special)?;
        options.specialization.get(spec_id as usize).copied()
    }

    fn add_variable(&mut self, instruction: &Instruction, decorations: Option<&Decorations>) -> Result<()> {
        let this = result_id(instruction)?;
        let pointee = match self.ty(result_type(instruction)?)? {
            Type::Pointer { pointee, .. } => *pointee,
            _ => {
                return Err(Error::invalid_argument(format!(
                    "SPIR-V variable %{this} is not a pointer"
                )))
            }
        };
        let global = match storage_class(instruction, 0)? {
            StorageClass::StorageBuffer => {
                let (Some(set), Some(binding)) = (decorations.and_then(|d| d.set), decorations.and_then(|d| d.binding))
                else {
                    return Err(Error::invalid_argument(format!(
                        "SPIR-V storage buffer %{this} has no descriptor set and binding"
                    )));
                };
                Global::Buffer { set, binding, pointee }
            }
            StorageClass::PushConstant => {
                if let Some(other) = self.push_constants.replace(this) {
                    return Err(Error::unimplemented(format!(
                        "SPIR-V push constant blocks %{other} and %{this}: one is translated"
                    )));
                }
                Global::PushConstants { pointee }
            }
            StorageClass::Workgroup => Global::Workgroup { pointee },
            StorageClass::Private => Global::Private {
                pointee,
                initializer: id(instruction, 1).ok(),
            },
            StorageClass::Input => match decorations.and_then(|d| d.builtin) {
                Some(builtin) => Global::Builtin(builtin),
                None => {
                    return Err(Error::unimplemented(format!(
                        "SPIR-V input variable %{this} is not a builtin"
                    )))
                }
            },
            other => {
                return Err(Error::unimplemented(format!(
                    "SPIR-V variables in storage class {other:?} (%{this})"
                )))
            }
        };
        self.globals.insert(this, global);
        Ok(())
    }

    /// The OpenCL C name of the value type `ty`.
    pub(crate) fn type_name(&self, ty: Word) -> Result<String> {
        Ok(match self.ty(ty)? {
            Type::Void => "void".into(),
            Type::Bool => "bool".into(),
            Type::Int(width) => unsigned_name(*width)?.into(),
            Type::Float(16) if self.emulate_f16 => "float".into(),
            Type::Float(width) => float_name(*width)?.into(),
            Type::Vector { component, count } => self.vector_name(*component, *count, unsigned_name)?,
            Type::Array { .. } | Type::Struct { .. } => format!("t{ty}"),
            Type::Pointer { class, pointee } => {
                let pointee = if is_memory(*class) {
                    self.memory_type_name(*pointee)?
                } else {
                    self.type_name(*pointee)?
                };
                format!("{}{pointee}*", address_space(*class)?)
            }
            Type::RuntimeArray { .. } | Type::Function => {
                return Err(Error::unimplemented(format!(
                    "SPIR-V type %{ty} as a value is not translated to OpenCL C"
                )))
            }
        })
    }

    /// The OpenCL C name of `ty` as it is stored in buffers and workgroup memory: as
    /// [`Self::type_name`], except that emulated f16 is stored as its `ushort` bit pattern.
    pub(crate) fn memory_type_name(&self, ty: Word) -> Result<String> {
        match self.emulated_half(ty)? {
            Some(1) => Ok("ushort".into()),
            Some(count) => Ok(format!("ushort{count}")),
            None => self.type_name(ty),
        }
    }

    /// The component count of `ty` when it is an emulated f16 scalar (1) or vector.
    pub(crate) fn emulated_half(&self, ty: Word) -> Result<Option<u32>> {
        if !self.emulate_f16 {
            return Ok(None);
        }
        Ok(match self.ty(ty)? {
            Type::Float(16) => Some(1),
            Type::Vector { component, count } if matches!(self.ty(*component)?, Type::Float(16)) => Some(*count),
            _ => None,
        })
    }

    /// Whether the aggregate `ty` holds emulated f16 somewhere (it is then only memory, never a
    /// value: its members are bit patterns).
    pub(crate) fn holds_emulated_half(&self, ty: Word) -> Result<bool> {
        Ok(match self.ty(ty)? {
            Type::Array { element, .. } | Type::RuntimeArray { element, .. } => self.holds_emulated_half(*element)?,
            Type::Struct { members, .. } => {
                let mut any = false;
                for member in members {
                    any |= self.holds_emulated_half(*member)?;
                }
                any
            }
            _ => self.emulated_half(ty)?.is_some(),
        })
    }

    /// Whether `ty` is a vector of booleans (held as an `int` vector of -1 and 0).
    pub(crate) fn is_bool_vector(&self, ty: Word) -> Result<bool> {
        Ok(match self.ty(ty)? {
            Type::Vector { component, .. } => matches!(self.ty(*component)?, Type::Bool),
            _ => false,
        })
    }

    /// The signed OpenCL C name of the integer (or integer vector) type `ty`.
    pub(crate) fn signed_type_name(&self, ty: Word) -> Result<String> {
        match self.ty(ty)? {
            Type::Int(width) => Ok(signed_name(*width)?.into()),
            Type::Vector { component, count } => self.vector_name(*component, *count, signed_name),
            _ => Err(Error::invalid_argument(format!(
                "SPIR-V type %{ty} is used as a signed integer but is not an integer"
            ))),
        }
    }

    fn vector_name(&self, component: Word, count: u32, int_name: fn(u32) -> Result<&'static str>) -> Result<String> {
        if !vector_count_supported(count) {
            return Err(Error::unimplemented(format!("vectors of {count} components")));
        }
        let scalar = match self.ty(component)? {
            Type::Int(width) => int_name(*width)?,
            Type::Float(width) => float_name(*width)?,
            // OpenCL C's own convention for vector truth: all bits set (-1) or 0, in `int`s.
            Type::Bool => "int",
            _ => {
                return Err(Error::invalid_argument(format!(
                    "vector of non-scalar type %{component}"
                )))
            }
        };
        Ok(format!("{scalar}{count}"))
    }

    /// The scalar width in bits of an integer or float (or vector of them) type, and whether it is
    /// a vector.
    pub(crate) fn scalar_width(&self, ty: Word) -> Result<(u32, bool)> {
        match self.ty(ty)? {
            Type::Int(width) | Type::Float(width) => Ok((*width, false)),
            Type::Vector { component, .. } => Ok((self.scalar_width(*component)?.0, true)),
            Type::Bool => Ok((1, false)),
            _ => Err(Error::invalid_argument(format!(
                "SPIR-V type %{ty} is not a scalar or vector"
            ))),
        }
    }

    /// Size and alignment of `ty` in OpenCL C.
    pub(crate) fn layout(&self, ty: Word) -> Result<Layout> {
        Ok(match self.ty(ty)? {
            Type::Bool => Layout { size: 1, align: 1 },
            Type::Int(width) | Type::Float(width) => {
                let size = u64::from(*width / 8);
                Layout { size, align: size }
            }
            Type::Vector { component, count } => {
                let size = self.layout(*component)?.size * u64::from(if *count == 3 { 4 } else { *count });
                Layout { size, align: size }
            }
            Type::Array { element, length, .. } => {
                let element = self.layout(*element)?;
                let size = element
                    .size
                    .checked_mul(*length)
                    .ok_or_else(|| Error::invalid_argument(format!("SPIR-V array type %{ty} is larger than memory")))?;
                Layout {
                    size,
                    align: element.align,
                }
            }
            Type::RuntimeArray { element, .. } => Layout {
                size: 0,
                align: self.layout(*element)?.align,
            },
            Type::Struct { members, .. } => {
                let mut layout = Layout { size: 0, align: 1 };
                for member in members {
                    let member = self.layout(*member)?;
                    layout.size = align_up(layout.size, member.align) + member.size;
                    layout.align = layout.align.max(member.align);
                }
                layout.size = align_up(layout.size, layout.align);
                layout
            }
            Type::Pointer { .. } => Layout { size: 8, align: 8 },
            Type::Void | Type::Function => {
                return Err(Error::invalid_argument(format!("SPIR-V type %{ty} has no size")));
            }
        })
    }

    /// Refuses an aggregate whose decorated layout (offsets, strides) differs from OpenCL C's, so
    /// that a kernel never reads a buffer at the wrong place.
    fn check_layout(&self, ty: Word) -> Result<()> {
        let mismatch = |what: String| {
            Err(Error::unimplemented(format!(
                "SPIR-V type %{ty}: {what}, which OpenCL C's layout does not give"
            )))
        };
        match self.ty(ty)? {
            Type::Array { element, stride, .. } | Type::RuntimeArray { element, stride } => {
                let size = self.layout(*element)?.size;
                if let Some(stride) = stride.filter(|s| u64::from(*s) != size) {
                    return mismatch(format!("array stride {stride} for elements of {size} bytes"));
                }
            }
            Type::Struct { members, offsets } => {
                let mut at = 0;
                for (index, (member, offset)) in members.iter().zip(offsets).enumerate() {
                    let layout = self.layout(*member)?;
                    at = align_up(at, layout.align);
                    if let Some(offset) = offset.filter(|o| u64::from(*o) != at) {
                        return mismatch(format!("member {index} at offset {offset} instead of {at}"));
                    }
                    if matches!(self.ty(*member)?, Type::RuntimeArray { .. }) && index + 1 != members.len() {
                        return mismatch(format!("runtime array as member {index}, not the last"));
                    }
                    at += layout.size;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The typedefs of every struct and array type, in an order where each follows what it uses.
    pub(crate) fn typedefs(&self) -> Result<String> {
        let mut out = String::new();
        for &ty in &self.aggregates {
            match self.ty(ty)? {
                Type::Array { element, length, .. } => {
                    let _ = writeln!(
                        out,
                        "typedef struct {{ {} a[{length}]; }} t{ty};",
                        self.memory_type_name(*element)?
                    );
                }
                Type::Struct { members, .. } => {
                    let mut fields = String::new();
                    for (index, member) in members.iter().enumerate() {
                        let field = match self.ty(*member)? {
                            // A flexible array member, as C99 spells it; alone in its struct, where
                            // C forbids that (PoCL's compiler refuses it while Intel's refuses
                            // the `[0]` extension instead), a one-element array, which compilers
                            // treat as flexible too when it is the struct's last member.
                            Type::RuntimeArray { element, .. } => {
                                let length = if members.len() == 1 { "1" } else { "" };
                                format!("{} m{index}[{length}];", self.memory_type_name(*element)?)
                            }
                            _ => format!("{} m{index};", self.memory_type_name(*member)?),
                        };
                        let _ = write!(fields, " {field}");
                    }
                    let _ = writeln!(out, "typedef struct {{{fields} }} t{ty};");
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The OpenCL C expression of the constant `id`, if it is one.
    pub(crate) fn constant_expression(&self, id: Word) -> Option<&str> {
        self.constant_text.get(&id).map(String::as_str)
    }

    /// Records a constant with its expression. Composites are written from their parts' written
    /// text, and refused past a size: nested composites that repeat a part double at each level.
    fn insert_constant(&mut self, this: Word, constant: Constant) -> Result<()> {
        let text = match &constant {
            Constant::Bool { value, .. } => value.to_string(),
            Constant::Scalar { ty, bits } => self.scalar_literal(*ty, *bits)?,
            Constant::Zero(ty) => self.zero(*ty)?,
            Constant::Composite { ty, parts } => {
                let parts: Vec<String> = parts
                    .iter()
                    .filter_map(|part| self.constant_text.get(part).cloned())
                    .collect();
                if parts.iter().map(String::len).sum::<usize>() > MAX_CONSTANT_TEXT {
                    return Err(Error::resource_exhausted(format!(
                        "SPIR-V composite constant %{this} is written in more than {MAX_CONSTANT_TEXT} bytes"
                    )));
                }
                self.composite(*ty, &parts)?
            }
        };
        self.constant_text.insert(this, text);
        self.constants.insert(this, constant);
        Ok(())
    }

    fn scalar_literal(&self, ty: Word, bits: u64) -> Result<String> {
        Ok(match self.ty(ty)? {
            Type::Int(64) => format!("{bits}ul"),
            Type::Int(32) => format!("{}u", bits as u32),
            Type::Int(width) => {
                let name = unsigned_name(*width)?;
                format!("(({name}){}u)", bits & ((1u64 << width) - 1))
            }
            Type::Float(64) => format!("as_double({bits:#x}ul)"),
            Type::Float(32) => format!("as_float({:#x}u)", bits as u32),
            // Every f16 is exactly a float: emulated f16 constants are written as that float.
            Type::Float(16) if self.emulate_f16 => {
                format!("as_float({:#x}u)", half::f16::from_bits(bits as u16).to_f32().to_bits())
            }
            Type::Float(16) => format!("as_half((ushort){:#x})", bits as u16),
            _ => {
                return Err(Error::invalid_argument(format!(
                    "SPIR-V scalar constant of type %{ty}, which is not an integer or a float"
                )))
            }
        })
    }

    /// A zero (or false) of type `ty`.
    pub(crate) fn zero(&self, ty: Word) -> Result<String> {
        Ok(match self.ty(ty)? {
            Type::Bool => "false".into(),
            Type::Int(_) | Type::Float(_) => format!("(({})0)", self.type_name(ty)?),
            Type::Vector { .. } => format!("(({})(0))", self.type_name(ty)?),
            Type::Array { .. } | Type::Struct { .. } => format!("(({}){{0}})", self.type_name(ty)?),
            _ => return Err(Error::unimplemented(format!("a null value of SPIR-V type %{ty}"))),
        })
    }

    /// A value of the composite type `ty` built from `parts`.
    pub(crate) fn composite(&self, ty: Word, parts: &[String]) -> Result<String> {
        let name = self.type_name(ty)?;
        // A scalar `true` is 1; a vector's true lane is -1 (all bits, what `select` tests).
        let joined = if self.is_bool_vector(ty)? {
            parts
                .iter()
                .map(|p| format!("-(int)({p})"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            parts.join(", ")
        };
        Ok(match self.ty(ty)? {
            Type::Vector { .. } => format!("(({name})({joined}))"),
            Type::Array { .. } => format!("(({name}){{{{{joined}}}}})"),
            Type::Struct { .. } => format!("(({name}){{{joined}}})"),
            _ => return Err(Error::invalid_argument(format!("SPIR-V type %{ty} is not a composite"))),
        })
    }
}

/// The longest OpenCL C text one constant may take.
const MAX_CONSTANT_TEXT: usize = 1 << 20;

/// Whether pointers into `class` address memory that other invocations or the host share (where
/// emulated f16 is a bit pattern), rather than an invocation's own variables.
pub(crate) fn is_memory(class: StorageClass) -> bool {
    !matches!(class, StorageClass::Function | StorageClass::Private)
}

/// The types `ty` is made of.
fn used_types(ty: &Type) -> Vec<Word> {
    match ty {
        Type::Vector { component, .. } => vec![*component],
        Type::Array { element, .. } | Type::RuntimeArray { element, .. } => vec![*element],
        Type::Struct { members, .. } => members.clone(),
        Type::Pointer { pointee, .. } => vec![*pointee],
        _ => Vec::new(),
    }
}

/// Capabilities whose code the translator writes, given the device's options.
fn check_capabilities(module: &Module, options: &Options) -> Result<()> {
    for instruction in &module.capabilities {
        let capability = match instruction.operands.first() {
            Some(Operand::Capability(capability)) => *capability,
            _ => return Err(Error::invalid_argument("SPIR-V OpCapability without a capability")),
        };
        let supported = match capability {
            Capability::Shader
            | Capability::Matrix
            | Capability::Int8
            | Capability::Int16
            | Capability::Int64
            | Capability::StorageBuffer8BitAccess
            | Capability::StorageBuffer16BitAccess
            | Capability::StoragePushConstant8
            | Capability::StoragePushConstant16
            | Capability::UniformAndStorageBuffer8BitAccess
            | Capability::UniformAndStorageBuffer16BitAccess
            | Capability::GroupNonUniform
            | Capability::GroupNonUniformArithmetic
            | Capability::GroupNonUniformShuffle => true,
            Capability::Float16 => true,
            Capability::Float64 => options.fp64,
            _ => false,
        };
        if !supported {
            return Err(Error::unimplemented(format!(
                "SPIR-V capability {capability:?} is not translated to OpenCL C for this device"
            )));
        }
    }
    Ok(())
}

fn decorations(module: &Module) -> Result<HashMap<Word, Decorations>> {
    let mut all: HashMap<Word, Decorations> = HashMap::new();
    for instruction in module.annotations.iter().filter(|i| i.class.opcode == Op::Decorate) {
        let entry = all.entry(id(instruction, 0)?).or_default();
        match decoration(instruction, 1)? {
            Decoration::DescriptorSet => entry.set = Some(literal(instruction, 2)?),
            Decoration::Binding => entry.binding = Some(literal(instruction, 2)?),
            Decoration::BuiltIn => entry.builtin = Some(builtin(instruction, 2)?),
            Decoration::ArrayStride => entry.array_stride = Some(literal(instruction, 2)?),
            Decoration::SpecId => entry.spec_id = Some(literal(instruction, 2)?),
            _ => {}
        }
    }
    Ok(all)
}

fn member_offsets(module: &Module) -> Result<HashMap<(Word, u32), u32>> {
    let mut offsets = HashMap::new();
    for instruction in module
        .annotations
        .iter()
        .filter(|i| i.class.opcode == Op::MemberDecorate)
    {
        if decoration(instruction, 2)? == Decoration::Offset {
            offsets.insert(
                (id(instruction, 0)?, literal(instruction, 1)?),
                literal(instruction, 3)?,
            );
        }
    }
    Ok(offsets)
}
