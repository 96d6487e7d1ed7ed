//! Subgroup operations. On devices without subgroups they are emulated: a subgroup is a run of
//! `subgroup_size` consecutive invocations of the workgroup, and each operation goes through
//! workgroup memory: every invocation stores its value, a barrier, then each reads what its
//! operation needs. On devices whose subgroups can be made `subgroup_size` wide
//! ([`Subgroups::Native`]) they are OpenCL's subgroup built-ins, one per component of a vector.
//!
//! The barriers make every invocation of the workgroup take part, so the emulation holds where
//! IREE puts subgroup operations: in control flow that the whole workgroup runs (reductions and
//! their shuffles). Which subgroup size the program was compiled for is not in the SPIR-V (IREE
//! divides invocation ids by it as a constant); it comes from the options.

use crate::kernel::{KernelWriter, LOCAL_INDEX};
use crate::operands::{id, op_name, result_id, result_type};
use crate::types::Type;
use crate::{Subgroups, NOT_NATIVE};
use halo_hal::{Error, Result};
use rspirv::dr::{Instruction, Operand};
use rspirv::spirv::{BuiltIn, GroupOperation, Op};

/// SPIR-V's `Subgroup` scope.
const SUBGROUP_SCOPE: u64 = 3;
/// Bytes of scratch per invocation: the largest value a subgroup operation moves.
const SCRATCH_BYTES: u64 = 16;

impl KernelWriter<'_> {
    /// The value of a subgroup builtin.
    pub(crate) fn subgroup_builtin(&self, builtin: BuiltIn) -> Result<String> {
        let size = self.checked_subgroup_size()?;
        let invocations: u32 = self.workgroup_size.iter().product();
        if self.subgroups == Subgroups::Native {
            self.uses_native_subgroups.set(true);
            return Ok(match builtin {
                BuiltIn::SubgroupSize => format!("{size}u"),
                BuiltIn::SubgroupLocalInvocationId => "get_sub_group_local_id()".into(),
                BuiltIn::SubgroupId => "get_sub_group_id()".into(),
                _ => "get_num_sub_groups()".into(),
            });
        }
        Ok(match builtin {
            BuiltIn::SubgroupSize => format!("{size}u"),
            BuiltIn::SubgroupLocalInvocationId => format!("({LOCAL_INDEX} % {size}u)"),
            BuiltIn::SubgroupId => format!("({LOCAL_INDEX} / {size}u)"),
            _ => format!("{}u", invocations / size),
        })
    }

    /// The emulated subgroup size, checked against the workgroup it must tile.
    fn checked_subgroup_size(&self) -> Result<u32> {
        let size = self.subgroup_size;
        let invocations: u32 = self.workgroup_size.iter().product();
        if size == 0 {
            return Err(Error::unimplemented(
                "subgroup operations without a subgroup size to emulate (the program's Vulkan target's)",
            ));
        }
        if !invocations.is_multiple_of(size) {
            return Err(Error::unimplemented(format!(
                "subgroups of {size} in a workgroup of {invocations} invocations, which they do not tile"
            )));
        }
        Ok(size)
    }

    /// Writes a subgroup operation.
    pub(crate) fn subgroup(&mut self, instruction: &Instruction) -> Result<()> {
        let scope = self.index.integer_constant(id(instruction, 0)?)?;
        if scope != SUBGROUP_SCOPE {
            return Err(Error::unimplemented(format!(
                "Op{} of scope {scope}; only subgroup scope is",
                op_name(instruction)
            )));
        }
        let size = self.checked_subgroup_size()?;
        let ty = result_type(instruction)?;
        let name = self.index.type_name(ty)?;
        if self.index.layout(ty)?.size > SCRATCH_BYTES {
            return Err(Error::unimplemented(format!("subgroup operations on {name}")));
        }
        let result = result_id(instruction)?;
        if self.subgroups == Subgroups::Native {
            let value = self.native_subgroup(instruction, &name)?;
            self.uses_native_subgroups.set(true);
            self.statement(&format!("v{result} = {value};"));
            return Ok(());
        }
        let lane = format!("({LOCAL_INDEX} % {size}u)");
        let (value, read) = match instruction.class.opcode {
            Op::GroupNonUniformShuffle | Op::GroupNonUniformBroadcast => (
                self.operand(instruction, 1)?,
                format!("s[{} % {size}u]", self.operand(instruction, 2)?),
            ),
            Op::GroupNonUniformShuffleXor => (
                self.operand(instruction, 1)?,
                format!("s[({lane} ^ {}) % {size}u]", self.operand(instruction, 2)?),
            ),
            Op::GroupNonUniformShuffleUp => (
                self.operand(instruction, 1)?,
                format!("s[({lane} - {}) % {size}u]", self.operand(instruction, 2)?),
            ),
            Op::GroupNonUniformShuffleDown => (
                self.operand(instruction, 1)?,
                format!("s[({lane} + {}) % {size}u]", self.operand(instruction, 2)?),
            ),
            Op::GroupNonUniformBroadcastFirst => (self.operand(instruction, 1)?, "s[0]".to_string()),
            _ => return self.subgroup_arithmetic(instruction, size, &name),
        };
        self.uses_subgroup_scratch = true;
        let store = exchange(&name, &value);
        self.statement(&format!(
            "{store} {{ __local {name}* s = {}; v{result} = {read}; }}",
            base(&name, size)
        ));
        Ok(())
    }

    /// `Reduce`, `InclusiveScan` and `ExclusiveScan` of an arithmetic or bitwise operation, in
    /// lane order.
    fn subgroup_arithmetic(&mut self, instruction: &Instruction, size: u32, name: &str) -> Result<()> {
        let ty = result_type(instruction)?;
        let float = matches!(self.index.ty(ty)?, Type::Float(_))
            || matches!(self.index.ty(ty)?, Type::Vector { component, .. } if matches!(self.index.ty(*component)?, Type::Float(_)));
        let combine = |a: &str, b: &str| -> Result<String> {
            let signed = |f: &str| -> Result<String> {
                let signed = self.index.signed_type_name(ty)?;
                Ok(format!("as_{name}({f}(as_{signed}({a}), as_{signed}({b})))"))
            };
            Ok(match instruction.class.opcode {
                Op::GroupNonUniformFAdd | Op::GroupNonUniformIAdd => format!("({a} + {b})"),
                Op::GroupNonUniformFMul | Op::GroupNonUniformIMul => format!("({a} * {b})"),
                Op::GroupNonUniformFMin => format!("fmin({a}, {b})"),
                Op::GroupNonUniformFMax => format!("fmax({a}, {b})"),
                Op::GroupNonUniformUMin => format!("min({a}, {b})"),
                Op::GroupNonUniformUMax => format!("max({a}, {b})"),
                Op::GroupNonUniformSMin => signed("min")?,
                Op::GroupNonUniformSMax => signed("max")?,
                Op::GroupNonUniformBitwiseAnd => format!("({a} & {b})"),
                Op::GroupNonUniformBitwiseOr => format!("({a} | {b})"),
                Op::GroupNonUniformBitwiseXor => format!("({a} ^ {b})"),
                _ => {
                    return Err(Error::unimplemented(format!(
                        "SPIR-V Op{} is not translated to OpenCL C",
                        op_name(instruction)
                    )))
                }
            })
        };
        let step = combine("acc", "s[i]")?;
        let operation = match instruction.operands.get(1) {
            Some(Operand::GroupOperation(operation)) => *operation,
            _ => return Err(Error::invalid_argument("subgroup arithmetic without a group operation")),
        };
        if instruction.operands.len() != 3 {
            return Err(Error::unimplemented("clustered subgroup operations"));
        }
        let lane = format!("({LOCAL_INDEX} % {size}u)");
        // The lanes combined, in order: [start, end), onto `initial`.
        let (initial, start, end) = match operation {
            GroupOperation::Reduce => ("s[0]".to_string(), "1u", format!("{size}u")),
            GroupOperation::InclusiveScan => ("s[0]".to_string(), "1u", format!("{lane} + 1u")),
            GroupOperation::ExclusiveScan => {
                let identity = match instruction.class.opcode {
                    Op::GroupNonUniformFAdd | Op::GroupNonUniformIAdd => "0",
                    Op::GroupNonUniformFMul | Op::GroupNonUniformIMul => "1",
                    _ => {
                        return Err(Error::unimplemented(format!(
                            "exclusive scans of Op{}",
                            op_name(instruction)
                        )))
                    }
                };
                let identity = if float {
                    format!("{identity}.0f")
                } else {
                    identity.to_string()
                };
                (format!("(({name})({identity}))"), "0u", lane)
            }
            other => return Err(Error::unimplemented(format!("subgroup group operation {other:?}"))),
        };
        let result = result_id(instruction)?;
        let store = exchange(name, &self.operand(instruction, 2)?);
        self.uses_subgroup_scratch = true;
        self.statement(&format!(
            "{store} {{ __local {name}* s = {}; {name} acc = {initial}; \
             for (uint i = {start}; i < {end}; ++i) acc = {step}; v{result} = acc; }}",
            base(name, size)
        ));
        Ok(())
    }

    /// A subgroup operation as OpenCL built-ins: one call, or one per component of a vector.
    fn native_subgroup(&self, instruction: &Instruction, name: &str) -> Result<String> {
        let ty = result_type(instruction)?;
        let refuse = || Error::unimplemented(format!("Op{} on {name} {NOT_NATIVE}", op_name(instruction)));
        let (components, scalar) = match self.index.ty(ty)? {
            Type::Vector { component, count } => (Some(*count), *component),
            _ => (None, ty),
        };
        let signed = match self.index.ty(scalar)? {
            Type::Float(_) => false,
            Type::Int { .. } => matches!(
                instruction.class.opcode,
                Op::GroupNonUniformSMin | Op::GroupNonUniformSMax
            ),
            _ => return Err(refuse()),
        };
        let scalar_name = self.index.type_name(scalar)?;
        let signed_name = if signed {
            self.index.signed_type_name(scalar)?
        } else {
            String::new()
        };
        let function = |value: &str| -> Result<String> {
            let value = if signed {
                format!("as_{signed_name}({value})")
            } else {
                value.to_string()
            };
            let call = match instruction.class.opcode {
                Op::GroupNonUniformShuffle => format!("sub_group_shuffle({value}, {})", self.operand(instruction, 2)?),
                Op::GroupNonUniformBroadcast => {
                    format!("sub_group_broadcast({value}, {})", self.operand(instruction, 2)?)
                }
                Op::GroupNonUniformShuffleXor => {
                    format!("sub_group_shuffle_xor({value}, {})", self.operand(instruction, 2)?)
                }
                Op::GroupNonUniformShuffleUp => {
                    format!("sub_group_shuffle_up({value}, {})", self.operand(instruction, 2)?)
                }
                Op::GroupNonUniformShuffleDown => {
                    format!("sub_group_shuffle_down({value}, {})", self.operand(instruction, 2)?)
                }
                Op::GroupNonUniformBroadcastFirst => format!("sub_group_broadcast_first({value})"),
                _ => self.native_arithmetic(instruction, &value).ok_or_else(refuse)?,
            };
            Ok(if signed {
                format!("as_{scalar_name}({call})")
            } else {
                call
            })
        };
        let value = self.operand(instruction, if is_shuffle(instruction) { 1 } else { 2 })?;
        match components {
            None => function(&value),
            Some(count) => {
                let parts = (0..count)
                    .map(|k| function(&format!("({value}).s{k:x}")))
                    .collect::<Result<Vec<_>>>()?;
                Ok(format!("(({name})({}))", parts.join(", ")))
            }
        }
    }

    /// A reduction or scan as `sub_group_non_uniform_<operation>_<op>(value)`, where one exists.
    fn native_arithmetic(&self, instruction: &Instruction, value: &str) -> Option<String> {
        if instruction.operands.len() != 3 {
            return None;
        }
        let operation = match instruction.operands.get(1) {
            Some(Operand::GroupOperation(GroupOperation::Reduce)) => "reduce",
            Some(Operand::GroupOperation(GroupOperation::InclusiveScan)) => "scan_inclusive",
            Some(Operand::GroupOperation(GroupOperation::ExclusiveScan)) => "scan_exclusive",
            _ => return None,
        };
        let op = match instruction.class.opcode {
            Op::GroupNonUniformFAdd | Op::GroupNonUniformIAdd => "add",
            Op::GroupNonUniformFMul | Op::GroupNonUniformIMul => "mul",
            Op::GroupNonUniformFMin | Op::GroupNonUniformUMin | Op::GroupNonUniformSMin => "min",
            Op::GroupNonUniformFMax | Op::GroupNonUniformUMax | Op::GroupNonUniformSMax => "max",
            Op::GroupNonUniformBitwiseAnd => "and",
            Op::GroupNonUniformBitwiseOr => "or",
            Op::GroupNonUniformBitwiseXor => "xor",
            _ => return None,
        };
        Some(format!("sub_group_non_uniform_{operation}_{op}({value})"))
    }

    /// The scratch's declaration, when a subgroup operation needs it.
    pub(crate) fn subgroup_scratch(&self) -> Option<String> {
        self.uses_subgroup_scratch.then(|| {
            let invocations: u32 = self.workgroup_size.iter().product();
            format!("__local ulong sg[{}];", invocations as u64 * SCRATCH_BYTES / 8)
        })
    }
}

/// Stores this invocation's `value` where its subgroup can read it: a barrier first so that no
/// invocation still reads the previous operation's values, one after so that all are there.
fn exchange(name: &str, value: &str) -> String {
    format!(
        "barrier(CLK_LOCAL_MEM_FENCE); ((__local {name}*)sg)[{LOCAL_INDEX}] = {value}; barrier(CLK_LOCAL_MEM_FENCE);"
    )
}

/// The first scratch slot of this invocation's subgroup.
fn base(name: &str, size: u32) -> String {
    format!("((__local {name}*)sg + {LOCAL_INDEX} / {size}u * {size}u)")
}

/// Whether `instruction` moves a value between lanes (its value is operand 1, not 2).
fn is_shuffle(instruction: &Instruction) -> bool {
    matches!(
        instruction.class.opcode,
        Op::GroupNonUniformShuffle
            | Op::GroupNonUniformBroadcast
            | Op::GroupNonUniformShuffleXor
            | Op::GroupNonUniformShuffleUp
            | Op::GroupNonUniformShuffleDown
            | Op::GroupNonUniformBroadcastFirst
    )
}
