//! Instructions outside the interpreter's hot loop: refs, globals, buffers, lists, library
//! math, control flow with side tables, and the exits to calls and returns.

use super::{branch, checked, division_by_zero, is_move, null_error, ref_ordinal, Exit, ImportCall};
use crate::compile::{Extra, Function, Inst};
use crate::context::{Instance, ModuleState};
use crate::isa::{Op, IMPORT_ORDINAL_BIT};
use crate::ref_types::{check_range, Buffer, List, Ref};
use crate::unchecked::Registers;
use crate::value::Value;
use halo_hal::host_memory::copied_vec;
use halo_hal::{Error, Result, StatusCode};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Runs one instruction the hot loop does not: the next instruction index, or why to stop.
#[inline(never)]
pub(super) fn step(
    instance: &Arc<Instance>,
    function: &Function,
    inst: &Inst,
    pc: usize,
    fast: &mut Registers<'_>,
    refs: &mut [Option<Ref>],
    state: &mut ModuleState,
) -> Result<ControlFlow<Exit, usize>> {
    let mut next = pc + 1;
    macro_rules! r {
        ($i:expr) => {
            inst.regs[$i] as usize
        };
    }
    macro_rules! i32 {
        ($i:expr) => {
            fast.get(r!($i)) as i32
        };
    }
    macro_rules! u32 {
        ($i:expr) => {
            fast.get(r!($i))
        };
    }
    macro_rules! i64 {
        ($i:expr) => {
            fast.get64(r!($i)) as i64
        };
    }
    macro_rules! f32 {
        ($i:expr) => {
            f32::from_bits(fast.get(r!($i)))
        };
    }
    macro_rules! f64 {
        ($i:expr) => {
            f64::from_bits(i64!($i) as u64)
        };
    }
    macro_rules! set32 {
        ($i:expr, $v:expr) => {{
            let value = $v as u32;
            fast.set(r!($i), value);
        }};
    }
    macro_rules! set64 {
        ($i:expr, $v:expr) => {{
            fast.set64(r!($i), $v as u64);
        }};
    }
    macro_rules! setf32 {
        ($i:expr, $v:expr) => {
            set32!($i, f32::to_bits($v))
        };
    }
    macro_rules! setf64 {
        ($i:expr, $v:expr) => {
            set64!($i, f64::to_bits($v))
        };
    }
    macro_rules! ref_at {
        ($i:expr) => {
            refs[ref_ordinal(inst.regs[$i])]
        };
    }
    macro_rules! take_or_clone {
        ($i:expr) => {
            if is_move(inst.regs[$i]) {
                ref_at!($i).take()
            } else {
                ref_at!($i).clone()
            }
        };
    }
    macro_rules! buffer {
        ($i:expr, $what:expr) => {
            ref_at!($i).clone().ok_or_else(|| null_error($what))?
        };
    }
    match inst.op {
        Op::DivI32S => set32!(2, checked(i32!(0).checked_div(i32!(1)), i32!(1) == 0, i32!(0))?),
        Op::DivI32U => set32!(2, u32!(0).checked_div(u32!(1)).ok_or_else(division_by_zero)?),
        Op::RemI32S => set32!(2, checked(i32!(0).checked_rem(i32!(1)), i32!(1) == 0, 0)?),
        Op::RemI32U => set32!(2, u32!(0).checked_rem(u32!(1)).ok_or_else(division_by_zero)?),
        Op::DivI64S => set64!(2, checked(i64!(0).checked_div(i64!(1)), i64!(1) == 0, i64!(0))?),
        Op::RemI64S => set64!(2, checked(i64!(0).checked_rem(i64!(1)), i64!(1) == 0, 0)?),
        Op::ConstRefZero => ref_at!(0) = None,
        Op::ConstRefRodata => ref_at!(0) = Some(instance.rodata[inst.imm as usize].clone()),
        Op::GlobalLoadI32 | Op::GlobalLoadF32 => {
            let value = state.load32(inst.imm as usize);
            set32!(0, value)
        }
        Op::GlobalLoadI64 | Op::GlobalLoadF64 => {
            let value = state.load64(inst.imm as usize);
            set64!(0, value)
        }
        Op::GlobalStoreI32 | Op::GlobalStoreF32 => {
            let value = u32!(0);
            state.store32(inst.imm as usize, value)
        }
        Op::GlobalStoreI64 | Op::GlobalStoreF64 => {
            let value = i64!(0) as u64;
            state.store64(inst.imm as usize, value)
        }
        Op::GlobalLoadIndirectI32 | Op::GlobalLoadIndirectF32 => {
            let offset = u32!(0) as usize;
            let value = state.checked_load32(offset)?;
            set32!(1, value)
        }
        Op::GlobalLoadIndirectI64 | Op::GlobalLoadIndirectF64 => {
            let offset = u32!(0) as usize;
            let value = state.checked_load64(offset)?;
            set64!(1, value)
        }
        Op::GlobalStoreIndirectI32 | Op::GlobalStoreIndirectF32 => {
            let (offset, value) = (u32!(0) as usize, u32!(1));
            state.checked_store(offset, &value.to_le_bytes())?
        }
        Op::GlobalStoreIndirectI64 | Op::GlobalStoreIndirectF64 => {
            let (offset, value) = (u32!(0) as usize, i64!(1) as u64);
            state.checked_store(offset, &value.to_le_bytes())?
        }
        Op::GlobalLoadRef => {
            let value = state.refs[inst.imm as usize].clone();
            check_ref_type(instance, &value, inst.type_id, inst)?;
            ref_at!(0) = value;
        }
        Op::GlobalStoreRef => {
            let value = take_or_clone!(0);
            state.refs[inst.imm as usize] = value;
        }
        Op::GlobalLoadIndirectRef => {
            let ordinal = u32!(0) as usize;
            let value = state
                .refs
                .get(ordinal)
                .cloned()
                .ok_or_else(|| Error::out_of_range(format!("ref global ordinal {ordinal} out of range")))?;
            ref_at!(1) = value;
        }
        Op::GlobalStoreIndirectRef => {
            let ordinal = u32!(0) as usize;
            let value = take_or_clone!(1);
            let slot = state
                .refs
                .get_mut(ordinal)
                .ok_or_else(|| Error::out_of_range(format!("ref global ordinal {ordinal} out of range")))?;
            *slot = value;
        }

        // Integer arithmetic.
        Op::DivI64U => {
            set64!(
                2,
                (i64!(0) as u64)
                    .checked_div(i64!(1) as u64)
                    .ok_or_else(division_by_zero)?
            )
        }
        Op::RemI64U => {
            set64!(
                2,
                (i64!(0) as u64)
                    .checked_rem(i64!(1) as u64)
                    .ok_or_else(division_by_zero)?
            )
        }

        // Bitwise and shifts (amounts masked to the width, as IREE does).

        // Casts between integer widths.

        // Comparisons.
        Op::CmpEQRef | Op::CmpNERef => {
            let same = match (&ref_at!(0), &ref_at!(1)) {
                (None, None) => true,
                (Some(a), Some(b)) => a.ptr_eq(b),
                _ => false,
            };
            set32!(2, (same == (inst.op == Op::CmpEQRef)) as u32)
        }
        Op::CmpNZRef => set32!(1, ref_at!(0).is_some() as u32),

        // Selects and switches.
        Op::SelectRef => {
            let chosen = if i32!(0) != 0 { 1 } else { 2 };
            ref_at!(3) = take_or_clone!(chosen);
        }
        Op::SwitchI32 | Op::SwitchF32 | Op::SwitchI64 | Op::SwitchF64 | Op::SwitchRef => {
            switch(inst, function, fast.slots(), refs)?
        }

        // Floats.
        Op::RemF32 => setf32!(2, libm::remainderf(f32!(0), f32!(1))),
        Op::CeilF32 => setf32!(1, f32!(0).ceil()),
        Op::FloorF32 => setf32!(1, f32!(0).floor()),
        Op::RoundF32 => setf32!(1, f32!(0).round()),
        Op::RoundF32Even => setf32!(1, f32!(0).round_ties_even()),
        Op::AtanF32 => setf32!(1, f32!(0).atan()),
        Op::Atan2F32 => setf32!(2, f32!(0).atan2(f32!(1))),
        Op::CosF32 => setf32!(1, f32!(0).cos()),
        Op::SinF32 => setf32!(1, f32!(0).sin()),
        Op::ExpF32 => setf32!(1, f32!(0).exp()),
        Op::Exp2F32 => setf32!(1, f32!(0).exp2()),
        Op::ExpM1F32 => setf32!(1, f32!(0).exp_m1()),
        Op::LogF32 => setf32!(1, f32!(0).ln()),
        Op::Log10F32 => setf32!(1, f32!(0).log10()),
        Op::Log1pF32 => setf32!(1, f32!(0).ln_1p()),
        Op::Log2F32 => setf32!(1, f32!(0).log2()),
        Op::PowF32 => setf32!(2, f32!(0).powf(f32!(1))),
        Op::RsqrtF32 => setf32!(1, 1.0 / f32!(0).sqrt()),
        Op::SqrtF32 => setf32!(1, f32!(0).sqrt()),
        Op::TanhF32 => setf32!(1, f32!(0).tanh()),
        Op::ErfF32 => setf32!(1, libm::erff(f32!(0))),
        Op::CastF32SI32 => set32!(1, f32!(0).round() as i64 as i32),
        Op::CastF32UI32 => set32!(1, f32!(0).round() as i64 as u32),
        Op::CastF32SI64 => set64!(1, f32!(0).round() as i64),
        Op::CastF32UI64 => set64!(1, f32!(0).round() as u64),
        // IREE's ordered not-equal is C's `!=`, which is true for NaN operands.
        Op::RemF64 => setf64!(2, libm::remainder(f64!(0), f64!(1))),
        Op::CeilF64 => setf64!(1, f64!(0).ceil()),
        Op::FloorF64 => setf64!(1, f64!(0).floor()),
        Op::RoundF64 => setf64!(1, f64!(0).round()),
        Op::RoundF64Even => setf64!(1, f64!(0).round_ties_even()),
        Op::AtanF64 => setf64!(1, f64!(0).atan()),
        Op::Atan2F64 => setf64!(2, f64!(0).atan2(f64!(1))),
        Op::CosF64 => setf64!(1, f64!(0).cos()),
        Op::SinF64 => setf64!(1, f64!(0).sin()),
        Op::ExpF64 => setf64!(1, f64!(0).exp()),
        Op::Exp2F64 => setf64!(1, f64!(0).exp2()),
        Op::ExpM1F64 => setf64!(1, f64!(0).exp_m1()),
        Op::LogF64 => setf64!(1, domain_nan(f64!(0).ln(), f64!(0).is_nan())),
        Op::Log10F64 => setf64!(1, f64!(0).log10()),
        Op::Log1pF64 => setf64!(1, f64!(0).ln_1p()),
        Op::Log2F64 => setf64!(1, domain_nan(f64!(0).log2(), f64!(0).is_nan())),
        Op::PowF64 => setf64!(
            2,
            domain_nan(f64!(0).powf(f64!(1)), f64!(0).is_nan() || f64!(1).is_nan())
        ),
        Op::RsqrtF64 => setf64!(1, 1.0 / f64!(0).sqrt()),
        Op::SqrtF64 => setf64!(1, f64!(0).sqrt()),
        Op::TanhF64 => setf64!(1, f64!(0).tanh()),
        Op::ErfF64 => setf64!(1, libm::erf(f64!(0))),
        Op::CastF64SI32 => set32!(1, f64!(0).round() as i64 as i32),
        Op::CastF64UI32 => set32!(1, f64!(0).round() as i64 as u32),
        Op::CastF64SI64 => set64!(1, f64!(0).round() as i64),
        Op::CastF64UI64 => set64!(1, f64!(0).round() as u64),

        // Buffers: offsets and lengths count elements of the access width.
        Op::BufferAlloc => {
            let length = i64!(0) as u64;
            let length = usize::try_from(length)
                .map_err(|_| Error::resource_exhausted(format!("vm.buffer of {length} bytes")))?;
            ref_at!(2) = Some(Ref::new(Buffer::zeroed(length)?));
        }
        Op::BufferClone => {
            let source = buffer!(0, "source buffer");
            let source = source.expect::<Buffer>("clone source")?;
            let bytes = source.bytes();
            let range = check_range(i64!(1) as u64, i64!(2) as u64, bytes.len())?;
            let copy = copied_vec(&bytes[range], "a vm.buffer clone")?;
            drop(bytes);
            ref_at!(4) = Some(Ref::new(Buffer::from_vec(copy)));
        }
        Op::BufferLength => {
            let buffer = buffer!(0, "buffer");
            set64!(1, buffer.expect::<Buffer>("buffer")?.len() as u64)
        }
        Op::BufferCopy => {
            let (source, target) = (buffer!(0, "source buffer"), buffer!(2, "target buffer"));
            let (source_offset, target_offset, length) = (i64!(1) as u64, i64!(3) as u64, i64!(4) as u64);
            // A copy, as source and target may be one buffer (one lock).
            let bytes = {
                let source = source.expect::<Buffer>("copy source")?.bytes();
                copied_vec(
                    &source[check_range(source_offset, length, source.len())?],
                    "a vm.buffer copy",
                )?
            };
            let mut target = target.expect::<Buffer>("copy target")?.bytes_mut()?;
            let range = check_range(target_offset, length, target.len())?;
            target[range].copy_from_slice(&bytes);
        }
        Op::BufferCompare => {
            let (lhs, rhs) = (buffer!(0, "lhs buffer"), buffer!(2, "rhs buffer"));
            let (lhs_offset, rhs_offset, length) = (i64!(1) as u64, i64!(3) as u64, i64!(4) as u64);
            let left = {
                let left = lhs.expect::<Buffer>("compare lhs")?.bytes();
                copied_vec(
                    &left[check_range(lhs_offset, length, left.len())?],
                    "a vm.buffer comparison",
                )?
            };
            let right_buffer = rhs.expect::<Buffer>("compare rhs")?;
            let right = right_buffer.bytes();
            let equal = left[..] == right[check_range(rhs_offset, length, right.len())?];
            drop(right);
            set32!(5, equal as u32)
        }
        Op::BufferHash => {
            let source = buffer!(0, "source buffer");
            let bytes = source.expect::<Buffer>("hash source")?.bytes();
            let range = check_range(i64!(1) as u64, i64!(2) as u64, bytes.len())?;
            let hash = siphash(&bytes[range]);
            drop(bytes);
            set64!(3, hash)
        }
        Op::BufferFillI8 | Op::BufferFillI16 | Op::BufferFillI32 | Op::BufferFillF32 => {
            let width = fill_width(inst.op);
            {
                let value = u32!(3).to_le_bytes();
                buffer_fill(inst, fast.view(), refs, width, &value[..width])?
            }
        }
        Op::BufferFillI64 | Op::BufferFillF64 => {
            let value = (i64!(3) as u64).to_le_bytes();
            buffer_fill(inst, fast.view(), refs, 8, &value)?
        }
        Op::BufferLoadI8U
        | Op::BufferLoadI8S
        | Op::BufferLoadI16U
        | Op::BufferLoadI16S
        | Op::BufferLoadI32
        | Op::BufferLoadF32 => {
            let raw = buffer_load(inst, fast.view(), refs)?;
            let value = match inst.op {
                Op::BufferLoadI8S => raw as u8 as i8 as i32 as u32,
                Op::BufferLoadI16S => raw as u16 as i16 as i32 as u32,
                _ => raw as u32,
            };
            set32!(2, value)
        }
        Op::BufferLoadI64 | Op::BufferLoadF64 => {
            let raw = buffer_load(inst, fast.view(), refs)?;
            set64!(2, raw)
        }
        Op::BufferStoreI8 | Op::BufferStoreI16 | Op::BufferStoreI32 | Op::BufferStoreF32 => {
            let width = store_width(inst.op);
            {
                let value = u32!(2).to_le_bytes();
                buffer_store(inst, fast.view(), refs, width, &value[..width])?
            }
        }
        Op::BufferStoreI64 | Op::BufferStoreF64 => {
            let value = (i64!(2) as u64).to_le_bytes();
            buffer_store(inst, fast.view(), refs, 8, &value)?
        }

        // Lists.
        Op::ListAlloc => {
            let element_type = instance.element_type(inst.type_id);
            let capacity = u32!(0) as usize;
            ref_at!(1) = Some(Ref::new(List::new(element_type, capacity)));
        }
        Op::ListReserve => {
            let list = buffer!(0, "list");
            list.expect::<List>("list")?.reserve(u32!(1) as usize)?
        }
        Op::ListSize => {
            let list = buffer!(0, "list");
            set32!(1, list.expect::<List>("list")?.len() as u32)
        }
        Op::ListResize => {
            let list = buffer!(0, "list");
            list.expect::<List>("list")?.resize(u32!(1) as usize)?
        }
        Op::ListGetI32 | Op::ListGetF32 | Op::ListGetI64 | Op::ListGetF64 => {
            let list = buffer!(0, "list");
            let value = list.expect::<List>("list")?.get(u32!(1) as usize)?;
            match (inst.op, value) {
                (Op::ListGetI32, Value::I32(v)) => set32!(2, v),
                (Op::ListGetI32, Value::I64(v)) => set32!(2, v as i32),
                (Op::ListGetF32, Value::F32(v)) => setf32!(2, v),
                (Op::ListGetI64, Value::I64(v)) => set64!(2, v),
                (Op::ListGetI64, Value::I32(v)) => set64!(2, v as i64),
                (Op::ListGetF64, Value::F64(v)) => setf64!(2, v),
                (Op::ListGetF64, Value::F32(v)) => setf64!(2, v as f64),
                (op, value) => {
                    return Err(Error::invalid_argument(format!(
                        "{op:?} of a list item holding {value:?}"
                    )))
                }
            }
        }
        Op::ListSetI32 | Op::ListSetF32 | Op::ListSetI64 | Op::ListSetF64 => {
            let list = buffer!(0, "list");
            let value = match inst.op {
                Op::ListSetI32 => Value::I32(i32!(2)),
                Op::ListSetF32 => Value::F32(f32!(2)),
                Op::ListSetI64 => Value::I64(i64!(2)),
                _ => Value::F64(f64!(2)),
            };
            list.expect::<List>("list")?.set(u32!(1) as usize, value)?
        }
        Op::ListGetRef => {
            let list = buffer!(0, "list");
            let value = match list.expect::<List>("list")?.get(u32!(1) as usize)? {
                Value::Ref(r) => r,
                other => return Err(Error::invalid_argument(format!("list item {other:?} is not a ref"))),
            };
            // As in IREE, an item of another type reads as null rather than failing: programs
            // probe variant lists this way.
            ref_at!(2) = value.filter(|item| ref_type_matches(instance, item, inst.type_id));
        }
        Op::ListSetRef => {
            let list = buffer!(0, "list");
            let value = take_or_clone!(2);
            list.expect::<List>("list")?.set(u32!(1) as usize, Value::Ref(value))?
        }

        // Refs.
        Op::AssignRef => ref_at!(1) = take_or_clone!(0),
        Op::CastAnyRef => {
            let value = take_or_clone!(0);
            check_ref_type(instance, &value, inst.type_id, inst)?;
            ref_at!(1) = value;
        }
        Op::DiscardRefs => {
            if let Some(Extra::List(list)) = function.extras.get(inst.extra as usize) {
                for raw in &function.regs[list.start as usize..list.end as usize] {
                    if is_move(*raw) {
                        refs[ref_ordinal(*raw)] = None;
                    }
                }
            }
        }

        // Control flow.
        Op::CondBranch => next = branch(function, inst, if i32!(0) != 0 { 0 } else { 1 }, fast, refs),
        Op::Branch | Op::Break | Op::CondBreak => next = branch(function, inst, 0, fast, refs),
        Op::BranchTable => {
            let index = i32!(0);
            let case = if index >= 0 && (index as u64) < inst.imm {
                index as usize + 1
            } else {
                0
            };
            next = branch(function, inst, case, fast, refs);
        }
        Op::Fail => {
            let code = u32!(0);
            if code != 0 {
                let message = match function.extras.get(inst.extra as usize) {
                    Some(Extra::Message(message)) => message.clone(),
                    _ => String::new(),
                };
                return Err(Error::new(StatusCode::from_masked(code), message));
            }
            if next == function.insts.len() {
                return Err(Error::invalid_argument(
                    "'fail' with status 0 falls off the end of the function",
                ));
            }
        }
        Op::ImportResolved => {
            let import = (inst.imm as u32 & !IMPORT_ORDINAL_BIT) as usize;
            set32!(0, instance.imports[import].is_some() as u32)
        }
        Op::Trace | Op::Print => {}
        Op::Call | Op::CallVariadic => {
            // Native functions that neither wait nor run bytecode are called right here, over
            // this frame, without leaving the loop (most `hal` calls).
            match ImportCall::of(instance, function, inst)? {
                Some(call) if call.is_leaf() => call.run(fast.slots(), refs, None)?,
                _ => return Ok(ControlFlow::Break(Exit::Call(pc))),
            }
        }
        Op::CallYieldable | Op::CallVariadicYieldable => return Ok(ControlFlow::Break(Exit::Call(pc))),
        Op::Return => return Ok(ControlFlow::Break(Exit::Return(pc))),
        Op::Yield => {
            // A single-threaded invocation has nothing to yield to; continue at the target.
            next = branch(function, inst, 0, fast, refs);
        }
        _ => unreachable!("{:?} runs in the hot loop", inst.op),
    }
    Ok(ControlFlow::Continue(next))
}

fn switch(inst: &Inst, function: &Function, regs: &mut [u32], refs: &mut [Option<Ref>]) -> Result<()> {
    let Some(Extra::List(list)) = function.extras.get(inst.extra as usize) else {
        unreachable!("switch values were lowered")
    };
    let values = &function.regs[list.start as usize..list.end as usize];
    let index = regs[inst.regs[0] as usize] as i32;
    let (default, result) = (inst.regs[1], inst.regs[2]);
    let chosen = if index >= 0 && (index as usize) < values.len() {
        values[index as usize]
    } else {
        default
    };
    match inst.op {
        Op::SwitchRef => refs[ref_ordinal(result)] = refs[ref_ordinal(chosen)].clone(),
        // IREE 3.13 reads the chosen case of an i64 switch as a sign-extended 32-bit register
        // (the default as a full pair); programs see that, so halo does the same.
        Op::SwitchI64 if chosen != default => {
            let low = regs[chosen as usize];
            regs[result as usize] = low;
            regs[result as usize + 1] = ((low as i32) >> 31) as u32;
        }
        Op::SwitchI64 | Op::SwitchF64 => {
            regs[result as usize] = regs[chosen as usize];
            regs[result as usize + 1] = regs[chosen as usize + 1];
        }
        _ => regs[result as usize] = regs[chosen as usize],
    }
    Ok(())
}

fn read_u64(regs: &[u32], reg: u16) -> u64 {
    regs[reg as usize] as u64 | (regs[reg as usize + 1] as u64) << 32
}

/// The buffer in register 0 and the byte range of element `regs[1]` of `width` bytes.
fn buffer_access(
    inst: &Inst,
    regs: &[u32],
    refs: &[Option<Ref>],
    width: usize,
) -> Result<(Ref, std::ops::Range<usize>)> {
    let buffer = refs[ref_ordinal(inst.regs[0])]
        .clone()
        .ok_or_else(|| null_error("buffer"))?;
    let len = buffer.expect::<Buffer>("buffer")?.len();
    let offset = read_u64(regs, inst.regs[1])
        .checked_mul(width as u64)
        .ok_or_else(|| Error::out_of_range("buffer offset overflows"))?;
    let range = check_range(offset, width as u64, len)?;
    Ok((buffer, range))
}

fn buffer_load(inst: &Inst, regs: &[u32], refs: &[Option<Ref>]) -> Result<u64> {
    let width = load_width(inst.op);
    let (buffer, range) = buffer_access(inst, regs, refs, width)?;
    let bytes = buffer.expect::<Buffer>("buffer")?.bytes();
    let mut raw = [0u8; 8];
    raw[..width].copy_from_slice(&bytes[range]);
    Ok(u64::from_le_bytes(raw))
}

fn buffer_store(inst: &Inst, regs: &[u32], refs: &[Option<Ref>], width: usize, value: &[u8]) -> Result<()> {
    let (buffer, range) = buffer_access(inst, regs, refs, width)?;
    let mut bytes = buffer.expect::<Buffer>("buffer")?.bytes_mut()?;
    bytes[range].copy_from_slice(value);
    Ok(())
}

fn buffer_fill(inst: &Inst, regs: &[u32], refs: &[Option<Ref>], width: usize, pattern: &[u8]) -> Result<()> {
    let buffer = refs[ref_ordinal(inst.regs[0])]
        .clone()
        .ok_or_else(|| null_error("buffer"))?;
    let (offset, length) = (read_u64(regs, inst.regs[1]), read_u64(regs, inst.regs[2]));
    let mut bytes = buffer.expect::<Buffer>("buffer")?.bytes_mut()?;
    let scale = |v: u64| {
        v.checked_mul(width as u64)
            .ok_or_else(|| Error::out_of_range("fill range overflows"))
    };
    let range = check_range(scale(offset)?, scale(length)?, bytes.len())?;
    for chunk in bytes[range].chunks_exact_mut(width) {
        chunk.copy_from_slice(pattern);
    }
    Ok(())
}

/// Whether `value` is of the ref type that type-table entry `type_id` names.
fn ref_type_matches(instance: &Instance, value: &Ref, type_id: u32) -> bool {
    match instance.ref_types.get(type_id as usize) {
        Some(None) => true,
        Some(Some(name)) => name == value.type_name(),
        None => false,
    }
}

fn check_ref_type(instance: &Instance, value: &Option<Ref>, type_id: u32, inst: &Inst) -> Result<()> {
    let Some(value) = value else { return Ok(()) };
    if ref_type_matches(instance, value, type_id) {
        Ok(())
    } else {
        let expected = instance.types.get(type_id as usize).map(String::as_str).unwrap_or("");
        Err(Error::invalid_argument(format!(
            "{:?}: a {} where {expected} is required",
            inst.op,
            value.type_name()
        )))
    }
}

/// IREE's runtime binaries link glibc's compatibility `log`, `log2` and `pow`, which return a
/// positive NaN for a domain error where current glibc (and so Rust) returns the negative default
/// NaN; programs print the difference, so halo returns what IREE does.
fn domain_nan(result: f64, input_was_nan: bool) -> f64 {
    if result.is_nan() && !input_was_nan {
        f64::NAN
    } else {
        result
    }
}

fn load_width(op: Op) -> usize {
    match op {
        Op::BufferLoadI8U | Op::BufferLoadI8S => 1,
        Op::BufferLoadI16U | Op::BufferLoadI16S => 2,
        Op::BufferLoadI64 | Op::BufferLoadF64 => 8,
        _ => 4,
    }
}

fn store_width(op: Op) -> usize {
    match op {
        Op::BufferStoreI8 => 1,
        Op::BufferStoreI16 => 2,
        _ => 4,
    }
}

fn fill_width(op: Op) -> usize {
    match op {
        Op::BufferFillI8 => 1,
        Op::BufferFillI16 => 2,
        _ => 4,
    }
}

/// SipHash-2-4 keyed with bytes 0..16, the hash `vm.buffer.hash` computes in IREE.
fn siphash(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = siphasher::sip::SipHasher24::new_with_keys(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
    hasher.write(bytes);
    hasher.finish()
}
