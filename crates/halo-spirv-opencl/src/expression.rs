//! Instructions that compute a value: arithmetic, comparisons, conversions, composites and the
//! GLSL.std.450 functions, each as one OpenCL C expression.
//!
//! Integers are unsigned in the kernel (see `types`); an instruction that reads its operands as
//! signed reinterprets them, and narrow integers (8 and 16 bits) compute in `uint` so that C's
//! promotion to `int` cannot overflow.

use crate::kernel::KernelWriter;
use crate::operands::{id, literal, op_name, result_type};
use crate::types::{component, Type};
use halo_hal::{Error, Result};
use rspirv::dr::Instruction;
use rspirv::spirv::{Op, Word};

/// How an integer instruction reads its operands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sign {
    Unsigned,
    Signed,
}

impl KernelWriter<'_> {
    /// Writes an instruction that computes a value, or refuses it as unimplemented.
    pub(crate) fn expression(&mut self, instruction: &Instruction) -> Result<()> {
        let expression = match instruction.class.opcode {
            Op::IAdd => self.integer_binary(instruction, "+", Sign::Unsigned)?,
            Op::ISub => self.integer_binary(instruction, "-", Sign::Unsigned)?,
            Op::IMul => self.integer_binary(instruction, "*", Sign::Unsigned)?,
            Op::UDiv => self.integer_binary(instruction, "/", Sign::Unsigned)?,
            Op::UMod => self.integer_binary(instruction, "%", Sign::Unsigned)?,
            Op::SDiv => self.integer_binary(instruction, "/", Sign::Signed)?,
            Op::SRem => self.integer_binary(instruction, "%", Sign::Signed)?,
            Op::BitwiseAnd => self.integer_binary(instruction, "&", Sign::Unsigned)?,
            Op::BitwiseOr => self.integer_binary(instruction, "|", Sign::Unsigned)?,
            Op::BitwiseXor => self.integer_binary(instruction, "^", Sign::Unsigned)?,
            Op::ShiftLeftLogical => self.shift(instruction, "<<", Sign::Unsigned)?,
            Op::ShiftRightLogical => self.shift(instruction, ">>", Sign::Unsigned)?,
            Op::ShiftRightArithmetic => self.shift(instruction, ">>", Sign::Signed)?,
            Op::SMod => self.signed_modulo(instruction)?,
            Op::Not => self.narrow(instruction, format!("~{}", self.operand(instruction, 0)?))?,
            Op::SNegate => self.narrow(instruction, format!("-{}", self.operand(instruction, 0)?))?,
            Op::FAdd => self.binary(instruction, "+")?,
            Op::FSub => self.binary(instruction, "-")?,
            Op::FMul => self.binary(instruction, "*")?,
            Op::FDiv => self.binary(instruction, "/")?,
            Op::FRem => self.call(instruction, "fmod", 2)?,
            Op::FMod => {
                let (a, b) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
                format!("({a} - {b} * floor({a} / {b}))")
            }
            Op::FNegate => format!("(-{})", self.operand(instruction, 0)?),
            Op::IEqual | Op::LogicalEqual => self.compare(instruction, "==", None)?,
            Op::INotEqual | Op::LogicalNotEqual => self.compare(instruction, "!=", None)?,
            Op::UGreaterThan => self.compare(instruction, ">", Some(Sign::Unsigned))?,
            Op::UGreaterThanEqual => self.compare(instruction, ">=", Some(Sign::Unsigned))?,
            Op::ULessThan => self.compare(instruction, "<", Some(Sign::Unsigned))?,
            Op::ULessThanEqual => self.compare(instruction, "<=", Some(Sign::Unsigned))?,
            Op::SGreaterThan => self.compare(instruction, ">", Some(Sign::Signed))?,
            Op::SGreaterThanEqual => self.compare(instruction, ">=", Some(Sign::Signed))?,
            Op::SLessThan => self.compare(instruction, "<", Some(Sign::Signed))?,
            Op::SLessThanEqual => self.compare(instruction, "<=", Some(Sign::Signed))?,
            // C's relational operators on floats are the ordered comparisons.
            Op::FOrdEqual => self.compare(instruction, "==", None)?,
            Op::FOrdLessThan => self.compare(instruction, "<", None)?,
            Op::FOrdGreaterThan => self.compare(instruction, ">", None)?,
            Op::FOrdLessThanEqual => self.compare(instruction, "<=", None)?,
            Op::FOrdGreaterThanEqual => self.compare(instruction, ">=", None)?,
            Op::FOrdNotEqual => self.boolean(instruction, self.call(instruction, "islessgreater", 2)?)?,
            Op::FUnordNotEqual => self.compare(instruction, "!=", None)?,
            Op::FUnordEqual => self.negated_compare(instruction, "islessgreater")?,
            Op::FUnordLessThan => self.negated_compare(instruction, "isgreaterequal")?,
            Op::FUnordGreaterThan => self.negated_compare(instruction, "islessequal")?,
            Op::FUnordLessThanEqual => self.negated_compare(instruction, "isgreater")?,
            Op::FUnordGreaterThanEqual => self.negated_compare(instruction, "isless")?,
            Op::IsNan => self.boolean(instruction, self.call(instruction, "isnan", 1)?)?,
            Op::IsInf => self.boolean(instruction, self.call(instruction, "isinf", 1)?)?,
            Op::LogicalAnd => self.compare(instruction, "&&", None)?,
            Op::LogicalOr => self.compare(instruction, "||", None)?,
            Op::LogicalNot => self.boolean(instruction, format!("!{}", self.operand(instruction, 0)?))?,
            Op::Select => self.select(instruction)?,
            Op::Any => format!("(any({}) != 0)", self.operand(instruction, 0)?),
            Op::All => format!("(all({}) != 0)", self.operand(instruction, 0)?),
            Op::CopyObject => self.operand(instruction, 0)?,
            Op::ConvertFToU | Op::ConvertUToF | Op::FConvert | Op::UConvert => {
                self.convert(instruction, Sign::Unsigned, Sign::Unsigned)?
            }
            Op::ConvertFToS => self.convert(instruction, Sign::Unsigned, Sign::Signed)?,
            Op::ConvertSToF => self.convert(instruction, Sign::Signed, Sign::Unsigned)?,
            Op::SConvert => self.convert(instruction, Sign::Signed, Sign::Signed)?,
            Op::Bitcast => {
                let ty = result_type(instruction)?;
                if matches!(self.index.ty(ty)?, Type::Pointer { .. }) {
                    return Err(Error::unimplemented("pointer bitcasts"));
                }
                let source = self.operand_type(instruction, 0)?;
                match (self.index.emulated_half(ty)?, self.index.emulated_half(source)?) {
                    (None, None) => {}
                    (Some(1), None) => {
                        return self.assign(
                            instruction,
                            &format!("f16_from_bits({})", self.operand(instruction, 0)?),
                        )
                    }
                    (None, Some(1)) => {
                        let bits = format!("f16_bits({})", self.operand(instruction, 0)?);
                        return self.assign(instruction, &format!("as_{}({bits})", self.index.type_name(ty)?));
                    }
                    _ => return Err(Error::unimplemented("bitcasts of f16 vectors without cl_khr_fp16")),
                }
                format!("as_{}({})", self.index.type_name(ty)?, self.operand(instruction, 0)?)
            }
            Op::CompositeExtract => {
                let (path, _) = self.composite_path(instruction, 1, self.operand_type(instruction, 0)?)?;
                format!("({}){path}", self.operand(instruction, 0)?)
            }
            Op::CompositeInsert => return self.composite_insert(instruction),
            Op::CompositeConstruct => {
                let parts = (0..instruction.operands.len())
                    .map(|k| self.operand(instruction, k))
                    .collect::<Result<Vec<_>>>()?;
                self.index.composite(result_type(instruction)?, &parts)?
            }
            Op::VectorShuffle => self.shuffle(instruction)?,
            Op::Dot => self.call(instruction, "dot", 2)?,
            Op::ExtInst => self.glsl(instruction)?,
            Op::GroupNonUniformShuffle
            | Op::GroupNonUniformShuffleXor
            | Op::GroupNonUniformShuffleUp
            | Op::GroupNonUniformShuffleDown
            | Op::GroupNonUniformBroadcast
            | Op::GroupNonUniformBroadcastFirst
            | Op::GroupNonUniformFAdd
            | Op::GroupNonUniformIAdd
            | Op::GroupNonUniformFMul
            | Op::GroupNonUniformIMul
            | Op::GroupNonUniformFMin
            | Op::GroupNonUniformFMax
            | Op::GroupNonUniformUMin
            | Op::GroupNonUniformUMax
            | Op::GroupNonUniformSMin
            | Op::GroupNonUniformSMax
            | Op::GroupNonUniformBitwiseAnd
            | Op::GroupNonUniformBitwiseOr
            | Op::GroupNonUniformBitwiseXor => return self.subgroup(instruction),
            _ => {
                return Err(Error::unimplemented(format!(
                    "SPIR-V Op{} is not translated to OpenCL C",
                    op_name(instruction)
                )))
            }
        };
        let expression = self.rounded_to_half(instruction, expression)?;
        self.assign(instruction, &expression)
    }

    /// An arithmetic result of emulated f16, computed in float, rounded to f16 as the device would
    /// have (float holds every product and sum of two f16 exactly enough to round once).
    fn rounded_to_half(&self, instruction: &Instruction, expression: String) -> Result<String> {
        let Some(count) = self.index.emulated_half(result_type(instruction)?)? else {
            return Ok(expression);
        };
        let computes = matches!(
            instruction.class.opcode,
            Op::FAdd
                | Op::FSub
                | Op::FMul
                | Op::FDiv
                | Op::FRem
                | Op::FMod
                | Op::Dot
                | Op::ExtInst
                | Op::FConvert
                | Op::ConvertSToF
                | Op::ConvertUToF
        );
        Ok(match (computes, count) {
            (false, _) => expression,
            (true, 1) => format!("f16_round({expression})"),
            (true, count) => format!("f16_round{count}({expression})"),
        })
    }

    /// `expression`, reinterpreted as `sign` in the type `ty`.
    fn as_sign(&self, ty: Word, expression: &str, sign: Sign) -> Result<String> {
        let name = match sign {
            Sign::Signed => self.index.signed_type_name(ty)?,
            Sign::Unsigned => self.index.type_name(ty)?,
        };
        Ok(if self.index.scalar_width(ty)?.1 {
            format!("as_{name}({expression})")
        } else {
            format!("(({name})({expression}))")
        })
    }

    /// Whether `ty` is a scalar integer narrower than 32 bits (which C promotes to `int`).
    fn is_narrow_scalar(&self, ty: Word) -> Result<bool> {
        Ok(matches!(self.index.ty(ty)?, Type::Int(width) if *width < 32))
    }

    /// `expression` computed in `uint` and truncated to the result type when that is narrow.
    fn narrow(&self, instruction: &Instruction, expression: String) -> Result<String> {
        let ty = result_type(instruction)?;
        Ok(if self.is_narrow_scalar(ty)? {
            format!("(({})({expression}))", self.index.type_name(ty)?)
        } else {
            format!("({expression})")
        })
    }

    fn integer_binary(&self, instruction: &Instruction, operator: &str, sign: Sign) -> Result<String> {
        let ty = result_type(instruction)?;
        let (a, b) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
        match sign {
            Sign::Unsigned if self.is_narrow_scalar(ty)? => {
                self.narrow(instruction, format!("(uint){a} {operator} (uint){b}"))
            }
            Sign::Unsigned => Ok(format!("({a} {operator} {b})")),
            Sign::Signed => {
                let (a, b) = (self.as_sign(ty, &a, sign)?, self.as_sign(ty, &b, sign)?);
                self.as_sign(ty, &format!("{a} {operator} {b}"), Sign::Unsigned)
            }
        }
    }

    fn shift(&self, instruction: &Instruction, operator: &str, sign: Sign) -> Result<String> {
        let ty = result_type(instruction)?;
        let (a, b) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
        let vector = self.index.scalar_width(ty)?.1;
        // A vector shift takes its amounts in the shifted type.
        let b = if vector { self.as_sign(ty, &b, sign)? } else { b };
        match sign {
            Sign::Unsigned if self.is_narrow_scalar(ty)? => {
                self.narrow(instruction, format!("(uint){a} {operator} {b}"))
            }
            Sign::Unsigned => Ok(format!("({a} {operator} {b})")),
            Sign::Signed => {
                let a = self.as_sign(ty, &a, sign)?;
                self.as_sign(ty, &format!("{a} {operator} {b}"), Sign::Unsigned)
            }
        }
    }

    /// SPIR-V's `SMod`: the remainder with the divisor's sign.
    fn signed_modulo(&mut self, instruction: &Instruction) -> Result<String> {
        let ty = result_type(instruction)?;
        if self.index.scalar_width(ty)?.1 {
            return Err(Error::unimplemented("OpSMod on vectors"));
        }
        let signed = self.index.signed_type_name(ty)?;
        let (a, b) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
        let (a, b) = (self.as_sign(ty, &a, Sign::Signed)?, self.as_sign(ty, &b, Sign::Signed)?);
        let remainder = format!("(({signed})({a} % {b}))");
        let adjusted =
            format!("({remainder} != 0 && (({remainder} < 0) != ({b} < 0)) ? {remainder} + {b} : {remainder})");
        self.as_sign(ty, &adjusted, Sign::Unsigned)
    }

    fn binary(&self, instruction: &Instruction, operator: &str) -> Result<String> {
        Ok(format!(
            "({} {operator} {})",
            self.operand(instruction, 0)?,
            self.operand(instruction, 1)?
        ))
    }

    /// A call of `function` on the first `arity` operands.
    fn call(&self, instruction: &Instruction, function: &str, arity: usize) -> Result<String> {
        let arguments = (0..arity)
            .map(|k| self.operand(instruction, k))
            .collect::<Result<Vec<_>>>()?;
        Ok(format!("{function}({})", arguments.join(", ")))
    }

    /// `expression` as the boolean result: a scalar `bool`, or an `int` vector of -1 and 0 (the
    /// lanes of OpenCL C's vector comparisons are -1 and 0 already, as wide as their operands).
    fn boolean(&self, instruction: &Instruction, expression: String) -> Result<String> {
        let ty = result_type(instruction)?;
        match self.index.ty(ty)? {
            Type::Bool => Ok(format!("({expression} != 0)")),
            Type::Vector { .. } if self.index.is_bool_vector(ty)? => {
                Ok(format!("convert_{}({expression})", self.index.type_name(ty)?))
            }
            _ => Err(Error::invalid_argument(format!(
                "Op{} must produce booleans",
                op_name(instruction)
            ))),
        }
    }

    /// `OpSelect`: C's conditional for a scalar condition; `select` for a vector one, whose lanes
    /// it tests by their top bit, in integers as wide as the values chosen.
    fn select(&self, instruction: &Instruction) -> Result<String> {
        let [c, a, b] = [0, 1, 2].map(|k| self.operand(instruction, k));
        let (c, a, b) = (c?, a?, b?);
        let condition = self.operand_type(instruction, 0)?;
        if !self.index.is_bool_vector(condition)? {
            return Ok(format!("({c} ? {a} : {b})"));
        }
        let ty = result_type(instruction)?;
        let Type::Vector { count, .. } = self.index.ty(ty)? else {
            return Err(Error::invalid_argument(
                "OpSelect on a vector condition must choose vectors",
            ));
        };
        let (width, _) = self.index.scalar_width(ty)?;
        let lanes = format!("{}{count}", crate::types::signed_name(width)?);
        Ok(format!("select({b}, {a}, convert_{lanes}({c}))"))
    }

    fn compare(&self, instruction: &Instruction, operator: &str, sign: Option<Sign>) -> Result<String> {
        let (mut a, mut b) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
        if let Some(sign) = sign {
            let ty = self.operand_type(instruction, 0)?;
            a = self.as_sign(ty, &a, sign)?;
            b = self.as_sign(self.operand_type(instruction, 1)?, &b, sign)?;
        }
        self.boolean(instruction, format!("({a} {operator} {b})"))
    }

    fn negated_compare(&self, instruction: &Instruction, ordered: &str) -> Result<String> {
        self.boolean(instruction, format!("!{}", self.call(instruction, ordered, 2)?))
    }

    /// A numeric conversion, reading an integer operand as `from` and producing an integer result
    /// as `to` (floats have no sign to choose).
    fn convert(&self, instruction: &Instruction, from: Sign, to: Sign) -> Result<String> {
        let (source, target) = (self.operand_type(instruction, 0)?, result_type(instruction)?);
        let mut value = self.operand(instruction, 0)?;
        if from == Sign::Signed {
            value = self.as_sign(source, &value, from)?;
        }
        if to == Sign::Signed {
            let name = self.index.signed_type_name(target)?;
            return self.as_sign(target, &format!("convert_{name}({value})"), Sign::Unsigned);
        }
        Ok(format!("convert_{}({value})", self.index.type_name(target)?))
    }

    fn composite_insert(&mut self, instruction: &Instruction) -> Result<()> {
        let result = crate::operands::result_id(instruction)?;
        let (path, _) = self.composite_path(instruction, 2, result_type(instruction)?)?;
        let (object, composite) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
        self.statement(&format!("v{result} = {composite}; v{result}{path} = {object};"));
        Ok(())
    }

    fn shuffle(&self, instruction: &Instruction) -> Result<String> {
        let first = self.operand_type(instruction, 0)?;
        let first_count = match self.index.ty(first)? {
            Type::Vector { count, .. } => *count,
            _ => return Err(Error::invalid_argument("OpVectorShuffle of a non-vector")),
        };
        let (a, b) = (self.operand(instruction, 0)?, self.operand(instruction, 1)?);
        let mut parts = Vec::new();
        for k in 2..instruction.operands.len() {
            let selector = literal(instruction, k)?;
            parts.push(match selector {
                u32::MAX => "0".to_string(),
                s if s < first_count => format!("({a}){}", component(s)?),
                s => format!("({b}){}", component(s - first_count)?),
            });
        }
        self.index.composite(result_type(instruction)?, &parts)
    }

    /// A GLSL.std.450 extended instruction as the OpenCL C built-in with the same meaning.
    fn glsl(&self, instruction: &Instruction) -> Result<String> {
        if !self.index.is_glsl(id(instruction, 0)?) {
            return Err(Error::unimplemented("extended instructions outside GLSL.std.450"));
        }
        let number = literal(instruction, 1)?;
        let ty = result_type(instruction)?;
        let arguments = (2..instruction.operands.len())
            .map(|k| self.operand(instruction, k))
            .collect::<Result<Vec<_>>>()?;
        let call = |function: &str| format!("{function}({})", arguments.join(", "));
        let signed = |function: &str| -> Result<String> {
            let args = (2..instruction.operands.len())
                .map(|k| {
                    self.as_sign(
                        self.operand_type(instruction, k)?,
                        &self.operand(instruction, k)?,
                        Sign::Signed,
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            self.as_sign(ty, &format!("{function}({})", args.join(", ")), Sign::Unsigned)
        };
        let arity = |n: usize| -> Result<()> {
            if arguments.len() == n {
                Ok(())
            } else {
                Err(Error::invalid_argument(format!(
                    "GLSL.std.450 instruction {number} takes {n} operands, given {}",
                    arguments.len()
                )))
            }
        };
        let (function, operands) = match number {
            1 => ("round", 1),
            2 => ("rint", 1),
            3 => ("trunc", 1),
            4 => ("fabs", 1),
            5 => {
                arity(1)?;
                return signed("abs");
            }
            6 => ("sign", 1),
            8 => ("floor", 1),
            9 => ("ceil", 1),
            10 => {
                arity(1)?;
                return Ok(format!("({0} - floor({0}))", arguments[0]));
            }
            11 => ("radians", 1),
            12 => ("degrees", 1),
            13 => ("sin", 1),
            14 => ("cos", 1),
            15 => ("tan", 1),
            16 => ("asin", 1),
            17 => ("acos", 1),
            18 => ("atan", 1),
            19 => ("sinh", 1),
            20 => ("cosh", 1),
            21 => ("tanh", 1),
            22 => ("asinh", 1),
            23 => ("acosh", 1),
            24 => ("atanh", 1),
            25 => ("atan2", 2),
            26 => ("pow", 2),
            27 => ("exp", 1),
            28 => ("log", 1),
            29 => ("exp2", 1),
            30 => ("log2", 1),
            31 => ("sqrt", 1),
            32 => ("rsqrt", 1),
            37 | 79 => ("fmin", 2),
            38 => ("min", 2),
            39 => {
                arity(2)?;
                return signed("min");
            }
            40 | 80 => ("fmax", 2),
            41 => ("max", 2),
            42 => {
                arity(2)?;
                return signed("max");
            }
            43 | 44 => ("clamp", 3),
            45 => {
                arity(3)?;
                return signed("clamp");
            }
            46 => ("mix", 3),
            48 => ("step", 2),
            49 => ("smoothstep", 3),
            50 => ("fma", 3),
            81 => {
                arity(3)?;
                return Ok(format!(
                    "fmin(fmax({}, {}), {})",
                    arguments[0], arguments[1], arguments[2]
                ));
            }
            _ => {
                return Err(Error::unimplemented(format!(
                    "GLSL.std.450 instruction {number} is not translated to OpenCL C"
                )))
            }
        };
        arity(operands)?;
        Ok(call(function))
    }
}
