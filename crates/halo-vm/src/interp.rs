//! The interpreter: runs lowered functions over a register stack.
//!
//! Registers live in two stacks shared by all frames of an invocation: an i32 bank (64-bit values
//! in aligned pairs, as IREE lays them out) and a ref bank. Internal calls push a frame without
//! recursing on the Rust stack; calls to imports marshal values through the callee's calling
//! convention. Everything the verifier proved (register and ordinal ranges, branch targets) is not
//! checked again beyond Rust's own bounds checks.

use crate::cconv::Signature;
use crate::compile::{Branch, Extra, Function, Inst};
use crate::context::{ImportTarget, Instance, ModuleState};
use crate::isa::{Op, IMPORT_ORDINAL_BIT, REF_BANK_BIT, REF_MOVE_BIT, REF_ORDINAL_MASK};
use crate::ref_types::{check_range, Buffer, List, Ref};
use crate::registers::Registers;
use crate::value::Value;
use halo_hal::{Error, Result, ResultExt, StatusCode};
use std::sync::{Arc, MutexGuard};

/// Deepest call stack an invocation may build before failing (guards runaway recursion).
const MAX_FRAMES: usize = 16 * 1024;

struct Frame {
    function: u32,
    pc: usize,
    i32_base: usize,
    ref_base: usize,
    /// Result registers in the caller's frame (into the caller's register pool).
    results: std::ops::Range<u32>,
}

struct Machine<'a> {
    instance: &'a Arc<Instance>,
    i32s: Vec<u32>,
    refs: Vec<Option<Ref>>,
    frames: Vec<Frame>,
    state: Option<MutexGuard<'a, ModuleState>>,
}

/// Calls internal function `ordinal` of `instance` with `args`, returning its results.
pub(crate) fn invoke(instance: &Arc<Instance>, ordinal: u32, args: &[Value]) -> Result<Vec<Value>> {
    let signature = instance.signature(ordinal)?;
    let mut machine = Machine {
        instance,
        i32s: Vec::new(),
        refs: Vec::new(),
        frames: Vec::new(),
        state: None,
    };
    machine.state = Some(instance.lock_state());
    let function = &instance.functions[ordinal as usize];
    machine.push_frame(ordinal, function, 0..0);
    machine.write_arguments(&signature, args)?;
    machine
        .run()
        .with_context(|| format!("executing '{}.{}'", instance.name, instance.function_name(ordinal)))
}

fn is_ref(raw: u16) -> bool {
    raw & REF_BANK_BIT != 0
}

fn ref_ordinal(raw: u16) -> usize {
    (raw & REF_ORDINAL_MASK) as usize
}

fn is_move(raw: u16) -> bool {
    raw & REF_BANK_BIT != 0 && raw & REF_MOVE_BIT != 0
}

fn null_error(what: &str) -> Error {
    Error::invalid_argument(format!("{what} is null"))
}

impl Machine<'_> {
    fn push_frame(&mut self, ordinal: u32, function: &Function, results: std::ops::Range<u32>) {
        let i32_base = self.i32s.len();
        let ref_base = self.refs.len();
        self.i32s.resize(i32_base + function.i32_registers as usize, 0);
        self.refs.resize(ref_base + function.ref_registers as usize, None);
        self.frames.push(Frame {
            function: ordinal,
            pc: 0,
            i32_base,
            ref_base,
            results,
        });
    }

    /// Places `values` in the newest frame's registers, left-aligned per bank (i64/f64 on pairs).
    fn write_arguments(&mut self, signature: &Signature, values: &[Value]) -> Result<()> {
        let kinds = signature.flatten_arguments(&[]).unwrap_or_default();
        if kinds.len() != values.len() {
            return Err(Error::invalid_argument(format!(
                "{} arguments given; '{}' takes {}",
                values.len(),
                signature.text,
                kinds.len()
            )));
        }
        let frame = self.frames.last().expect("frame pushed");
        let (base, mut ref_next) = (frame.i32_base, frame.ref_base);
        // Offsets within the frame: 64-bit values go to even registers of the frame.
        let mut i32_next = 0;
        for (index, (kind, value)) in kinds.iter().zip(values).enumerate() {
            match (kind, value) {
                ('i', Value::I32(v)) => self.put32(base, &mut i32_next, *v as u32),
                ('f', Value::F32(v)) => self.put32(base, &mut i32_next, v.to_bits()),
                ('I', Value::I64(v)) => self.put64(base, &mut i32_next, *v as u64),
                ('F', Value::F64(v)) => self.put64(base, &mut i32_next, v.to_bits()),
                ('r', Value::Ref(r)) => {
                    self.refs[ref_next] = r.clone();
                    ref_next += 1;
                }
                (kind, value) => {
                    return Err(Error::invalid_argument(format!(
                        "argument {index} is {value:?} but '{}' expects '{kind}'",
                        signature.text
                    )))
                }
            }
        }
        Ok(())
    }

    fn put32(&mut self, base: usize, next: &mut usize, value: u32) {
        self.i32s[base + *next] = value;
        *next += 1;
    }

    fn put64(&mut self, base: usize, next: &mut usize, value: u64) {
        *next += *next & 1;
        self.i32s[base + *next] = value as u32;
        self.i32s[base + *next + 1] = (value >> 32) as u32;
        *next += 2;
    }

    fn run(&mut self) -> Result<Vec<Value>> {
        let instance = self.instance;
        loop {
            let frame = self.frames.last().expect("a frame is running");
            let function = &instance.functions[frame.function as usize];
            let (ib, rb, pc) = (frame.i32_base, frame.ref_base, frame.pc);
            let Machine { i32s, refs, state, .. } = self;
            let regs = &mut i32s[ib..ib + function.i32_registers as usize];
            let frame_refs = &mut refs[rb..rb + function.ref_registers as usize];
            let state = state.as_mut().expect("state held outside import calls");
            match execute(instance, function, regs, frame_refs, state, pc)? {
                Exit::Call(pc) => {
                    self.frames.last_mut().expect("frame").pc = pc + 1;
                    self.call(function, &function.insts[pc])?;
                }
                Exit::Return(pc) => {
                    if let Some(results) = self.return_from(function, &function.insts[pc])? {
                        return Ok(results);
                    }
                }
            }
        }
    }

    fn call(&mut self, function: &Function, inst: &Inst) -> Result<()> {
        let Some(Extra::Call {
            callee,
            segments,
            args,
            results,
            ..
        }) = function.extras.get(inst.extra as usize)
        else {
            unreachable!("calls were lowered")
        };
        let frame = self.frames.last().expect("frame");
        let (ib, rb) = (frame.i32_base, frame.ref_base);
        if callee & IMPORT_ORDINAL_BIT == 0 {
            if self.frames.len() >= MAX_FRAMES {
                return Err(Error::resource_exhausted(format!(
                    "call depth exceeds {MAX_FRAMES} frames"
                )));
            }
            let callee_function = &self.instance.functions[*callee as usize];
            let signature = self.instance.signature(*callee)?;
            let values = self.read_registers(function, args, ib, rb, &signature.flatten_arguments(&[])?)?;
            self.push_frame(*callee, callee_function, results.clone());
            return self.write_arguments(&signature, &values);
        }
        let import = (*callee & !IMPORT_ORDINAL_BIT) as usize;
        let target = self.instance.imports[import].clone().ok_or_else(|| {
            Error::not_found(format!(
                "import '{}' is not resolved",
                self.instance.import_names[import]
            ))
        })?;
        let sizes: Vec<usize> = function.regs[segments.start as usize..segments.end as usize]
            .iter()
            .map(|r| self.i32s[ib + *r as usize] as usize)
            .collect();
        let kinds = target.signature().flatten_arguments(&sizes)?;
        let values = self.read_registers(function, args, ib, rb, &kinds)?;
        // The module state is not held across the call: the callee may call back into this module.
        self.state = None;
        let outcome = target
            .call(&values)
            .with_context(|| format!("calling import '{}'", self.instance.import_names[import]));
        self.state = Some(self.instance.lock_state());
        let returned = outcome?;
        self.write_results(function, results, ib, rb, &returned)
    }

    /// Reads the registers of `list` as values of `kinds`, moving refs that carry the move bit.
    fn read_registers(
        &mut self,
        function: &Function,
        list: &std::ops::Range<u32>,
        ib: usize,
        rb: usize,
        kinds: &[char],
    ) -> Result<Vec<Value>> {
        let regs = &function.regs[list.start as usize..list.end as usize];
        if regs.len() != kinds.len() {
            return Err(Error::invalid_argument(format!(
                "{} values passed where {} are expected",
                regs.len(),
                kinds.len()
            )));
        }
        let mut values = Vec::with_capacity(regs.len());
        for (raw, kind) in regs.iter().zip(kinds) {
            let at = ib + *raw as usize;
            values.push(match kind {
                'i' => Value::I32(self.i32s[at] as i32),
                'f' => Value::F32(f32::from_bits(self.i32s[at])),
                'I' => Value::I64((self.i32s[at] as u64 | (self.i32s[at + 1] as u64) << 32) as i64),
                'F' => Value::F64(f64::from_bits(self.i32s[at] as u64 | (self.i32s[at + 1] as u64) << 32)),
                _ => {
                    let slot = &mut self.refs[rb + ref_ordinal(*raw)];
                    Value::Ref(if is_move(*raw) { slot.take() } else { slot.clone() })
                }
            });
        }
        Ok(values)
    }

    fn write_results(
        &mut self,
        function: &Function,
        list: &std::ops::Range<u32>,
        ib: usize,
        rb: usize,
        values: &[Value],
    ) -> Result<()> {
        let regs = &function.regs[list.start as usize..list.end as usize];
        if regs.len() != values.len() {
            return Err(Error::invalid_argument(format!(
                "{} results returned where {} are expected",
                values.len(),
                regs.len()
            )));
        }
        for (raw, value) in regs.iter().zip(values) {
            let at = ib + *raw as usize;
            match value {
                Value::I32(v) => self.i32s[at] = *v as u32,
                Value::F32(v) => self.i32s[at] = v.to_bits(),
                Value::I64(v) => {
                    self.i32s[at] = *v as u32;
                    self.i32s[at + 1] = (*v as u64 >> 32) as u32;
                }
                Value::F64(v) => {
                    self.i32s[at] = v.to_bits() as u32;
                    self.i32s[at + 1] = (v.to_bits() >> 32) as u32;
                }
                Value::Ref(r) => self.refs[rb + ref_ordinal(*raw)] = r.clone(),
            }
        }
        Ok(())
    }

    /// Pops the current frame; returns the results when it was the outermost one.
    fn return_from(&mut self, function: &Function, inst: &Inst) -> Result<Option<Vec<Value>>> {
        let frame = self.frames.last().expect("frame");
        let (ib, rb, ordinal) = (frame.i32_base, frame.ref_base, frame.function);
        let signature = self.instance.signature(ordinal)?;
        let list = match function.extras.get(inst.extra as usize) {
            Some(Extra::List(list)) => list.clone(),
            _ => 0..0,
        };
        let values = self.read_registers(function, &list, ib, rb, &signature.flatten_results()?)?;
        let frame = self.frames.pop().expect("frame");
        self.i32s.truncate(frame.i32_base);
        self.refs.truncate(frame.ref_base);
        let Some(caller) = self.frames.last() else {
            return Ok(Some(values));
        };
        let (cib, crb) = (caller.i32_base, caller.ref_base);
        let caller_function = &self.instance.functions[caller.function as usize];
        self.write_results(caller_function, &frame.results, cib, crb, &values)?;
        Ok(None)
    }
}

/// Why [`execute`] stopped.
enum Exit {
    /// The instruction at this index is a call.
    Call(usize),
    /// The instruction at this index is a return.
    Return(usize),
}

/// Runs `function` from instruction `pc` over its frame's registers until it calls or returns.
///
/// Keeping the frame's registers in local slices (rather than indexing the whole stack through
/// the machine) is what makes the loop fast; calls and returns go back to [`Machine::run`].
fn execute(
    instance: &Arc<Instance>,
    function: &Function,
    regs: &mut [u32],
    refs: &mut [Option<Ref>],
    state: &mut ModuleState,
    mut pc: usize,
) -> Result<Exit> {
    let mut fast = Registers::new(regs);
    loop {
        let inst = &function.insts[pc];
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
                (fast.get(r!($i)) as u64 | (fast.get(r!($i) + 1) as u64) << 32) as i64
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
                let value = $v as u64;
                let at = r!($i);
                fast.set(at, value as u32);
                fast.set(at + 1, (value >> 32) as u32);
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
            // Constants and globals.
            Op::ConstI32Zero | Op::ConstF32Zero => set32!(0, 0u32),
            Op::ConstI64Zero | Op::ConstF64Zero => set64!(0, 0u64),
            Op::ConstI32 | Op::ConstF32 => set32!(0, inst.imm as u32),
            Op::ConstI64 | Op::ConstF64 => set64!(0, inst.imm),
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
            Op::AddI32 => set32!(2, i32!(0).wrapping_add(i32!(1))),
            Op::SubI32 => set32!(2, i32!(0).wrapping_sub(i32!(1))),
            Op::MulI32 => set32!(2, i32!(0).wrapping_mul(i32!(1))),
            Op::DivI32S => set32!(2, checked(i32!(0).checked_div(i32!(1)), i32!(1) == 0, i32!(0))?),
            Op::DivI32U => set32!(2, u32!(0).checked_div(u32!(1)).ok_or_else(division_by_zero)?),
            Op::RemI32S => set32!(2, checked(i32!(0).checked_rem(i32!(1)), i32!(1) == 0, 0)?),
            Op::RemI32U => set32!(2, u32!(0).checked_rem(u32!(1)).ok_or_else(division_by_zero)?),
            Op::FMAI32 => set32!(3, i32!(0).wrapping_mul(i32!(1)).wrapping_add(i32!(2))),
            Op::AbsI32 => set32!(1, i32!(0).wrapping_abs()),
            Op::MinI32S => set32!(2, i32!(0).min(i32!(1))),
            Op::MinI32U => set32!(2, u32!(0).min(u32!(1))),
            Op::MaxI32S => set32!(2, i32!(0).max(i32!(1))),
            Op::MaxI32U => set32!(2, u32!(0).max(u32!(1))),
            Op::CtlzI32 => set32!(1, u32!(0).leading_zeros()),
            Op::AddI64 => set64!(2, i64!(0).wrapping_add(i64!(1))),
            Op::SubI64 => set64!(2, i64!(0).wrapping_sub(i64!(1))),
            Op::MulI64 => set64!(2, i64!(0).wrapping_mul(i64!(1))),
            Op::DivI64S => set64!(2, checked(i64!(0).checked_div(i64!(1)), i64!(1) == 0, i64!(0))?),
            Op::DivI64U => {
                set64!(
                    2,
                    (i64!(0) as u64)
                        .checked_div(i64!(1) as u64)
                        .ok_or_else(division_by_zero)?
                )
            }
            Op::RemI64S => set64!(2, checked(i64!(0).checked_rem(i64!(1)), i64!(1) == 0, 0)?),
            Op::RemI64U => {
                set64!(
                    2,
                    (i64!(0) as u64)
                        .checked_rem(i64!(1) as u64)
                        .ok_or_else(division_by_zero)?
                )
            }
            Op::FMAI64 => set64!(3, i64!(0).wrapping_mul(i64!(1)).wrapping_add(i64!(2))),
            Op::AbsI64 => set64!(1, i64!(0).wrapping_abs()),
            Op::MinI64S => set64!(2, i64!(0).min(i64!(1))),
            Op::MinI64U => set64!(2, (i64!(0) as u64).min(i64!(1) as u64)),
            Op::MaxI64S => set64!(2, i64!(0).max(i64!(1))),
            Op::MaxI64U => set64!(2, (i64!(0) as u64).max(i64!(1) as u64)),
            Op::CtlzI64 => set64!(1, (i64!(0) as u64).leading_zeros() as u64),

            // Bitwise and shifts (amounts masked to the width, as IREE does).
            Op::NotI32 => set32!(1, !u32!(0)),
            Op::AndI32 => set32!(2, u32!(0) & u32!(1)),
            Op::OrI32 => set32!(2, u32!(0) | u32!(1)),
            Op::XorI32 => set32!(2, u32!(0) ^ u32!(1)),
            Op::NotI64 => set64!(1, !i64!(0)),
            Op::AndI64 => set64!(2, i64!(0) & i64!(1)),
            Op::OrI64 => set64!(2, i64!(0) | i64!(1)),
            Op::XorI64 => set64!(2, i64!(0) ^ i64!(1)),
            Op::ShlI32 => set32!(2, u32!(0) << (u32!(1) & 31)),
            Op::ShrI32S => set32!(2, i32!(0) >> (u32!(1) & 31)),
            Op::ShrI32U => set32!(2, u32!(0) >> (u32!(1) & 31)),
            Op::ShlI64 => set64!(2, (i64!(0) as u64) << (u32!(1) & 63)),
            Op::ShrI64S => set64!(2, i64!(0) >> (u32!(1) & 63)),
            Op::ShrI64U => set64!(2, (i64!(0) as u64) >> (u32!(1) & 63)),

            // Casts between integer widths.
            Op::TruncI32I8 => set32!(1, u32!(0) as u8 as u32),
            Op::TruncI32I16 => set32!(1, u32!(0) as u16 as u32),
            Op::TruncI64I32 => set32!(1, i64!(0) as u32),
            Op::ExtI8I32S => set32!(1, u32!(0) as i8 as i32),
            Op::ExtI8I32U => set32!(1, u32!(0) as u8 as u32),
            Op::ExtI16I32S => set32!(1, u32!(0) as i16 as i32),
            Op::ExtI16I32U => set32!(1, u32!(0) as u16 as u32),
            Op::ExtI32I64S => set64!(1, i32!(0) as i64),
            Op::ExtI32I64U => set64!(1, u32!(0) as u64),

            // Comparisons.
            Op::CmpEQI32 => set32!(2, (u32!(0) == u32!(1)) as u32),
            Op::CmpNEI32 => set32!(2, (u32!(0) != u32!(1)) as u32),
            Op::CmpLTI32S => set32!(2, (i32!(0) < i32!(1)) as u32),
            Op::CmpLTI32U => set32!(2, (u32!(0) < u32!(1)) as u32),
            Op::CmpNZI32 => set32!(1, (u32!(0) != 0) as u32),
            Op::CmpEQI64 => set32!(2, (i64!(0) == i64!(1)) as u32),
            Op::CmpNEI64 => set32!(2, (i64!(0) != i64!(1)) as u32),
            Op::CmpLTI64S => set32!(2, (i64!(0) < i64!(1)) as u32),
            Op::CmpLTI64U => set32!(2, ((i64!(0) as u64) < (i64!(1) as u64)) as u32),
            Op::CmpNZI64 => set32!(1, (i64!(0) != 0) as u32),
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
            Op::SelectI32 | Op::SelectF32 => set32!(3, if i32!(0) != 0 { u32!(1) } else { u32!(2) }),
            Op::SelectI64 | Op::SelectF64 => set64!(3, if i32!(0) != 0 { i64!(1) } else { i64!(2) }),
            Op::SelectRef => {
                let chosen = if i32!(0) != 0 { 1 } else { 2 };
                ref_at!(3) = take_or_clone!(chosen);
            }
            Op::SwitchI32 | Op::SwitchF32 | Op::SwitchI64 | Op::SwitchF64 | Op::SwitchRef => {
                switch(inst, function, fast.slots(), refs)?
            }

            // Floats.
            Op::AddF32 => setf32!(2, f32!(0) + f32!(1)),
            Op::SubF32 => setf32!(2, f32!(0) - f32!(1)),
            Op::MulF32 => setf32!(2, f32!(0) * f32!(1)),
            Op::DivF32 => setf32!(2, f32!(0) / f32!(1)),
            Op::RemF32 => setf32!(2, libm::remainderf(f32!(0), f32!(1))),
            Op::FMAF32 => setf32!(3, f32!(0) * f32!(1) + f32!(2)),
            Op::AbsF32 => setf32!(1, f32!(0).abs()),
            Op::NegF32 => setf32!(1, -f32!(0)),
            Op::CeilF32 => setf32!(1, f32!(0).ceil()),
            Op::FloorF32 => setf32!(1, f32!(0).floor()),
            Op::RoundF32 => setf32!(1, f32!(0).round()),
            Op::RoundF32Even => setf32!(1, f32!(0).round_ties_even()),
            Op::MinF32 => setf32!(2, if f32!(1) < f32!(0) { f32!(1) } else { f32!(0) }),
            Op::MaxF32 => setf32!(2, if f32!(0) < f32!(1) { f32!(1) } else { f32!(0) }),
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
            Op::CastSI32F32 => setf32!(1, i32!(0) as f32),
            Op::CastUI32F32 => setf32!(1, u32!(0) as f32),
            Op::CastSI64F32 => setf32!(1, i64!(0) as f32),
            Op::CastUI64F32 => setf32!(1, i64!(0) as u64 as f32),
            Op::CastF32SI32 => set32!(1, f32!(0).round() as i64 as i32),
            Op::CastF32UI32 => set32!(1, f32!(0).round() as i64 as u32),
            Op::CastF32SI64 => set64!(1, f32!(0).round() as i64),
            Op::CastF32UI64 => set64!(1, f32!(0).round() as u64),
            Op::BitcastI32F32 | Op::BitcastF32I32 => set32!(1, u32!(0)),
            Op::CmpEQF32O => set32!(2, (f32!(0) == f32!(1)) as u32),
            Op::CmpEQF32U => set32!(2, (unordered32(f32!(0), f32!(1)) || f32!(0) == f32!(1)) as u32),
            // IREE's ordered not-equal is C's `!=`, which is true for NaN operands.
            Op::CmpNEF32O => set32!(2, (f32!(0) != f32!(1)) as u32),
            Op::CmpNEF32U => set32!(2, (f32!(0) != f32!(1)) as u32),
            Op::CmpLTF32O => set32!(2, (f32!(0) < f32!(1)) as u32),
            Op::CmpLTF32U => set32!(2, (unordered32(f32!(0), f32!(1)) || f32!(0) < f32!(1)) as u32),
            Op::CmpLTEF32O => set32!(2, (f32!(0) <= f32!(1)) as u32),
            Op::CmpLTEF32U => set32!(2, (unordered32(f32!(0), f32!(1)) || f32!(0) <= f32!(1)) as u32),
            Op::CmpNaNF32 => set32!(1, f32!(0).is_nan() as u32),
            Op::AddF64 => setf64!(2, f64!(0) + f64!(1)),
            Op::SubF64 => setf64!(2, f64!(0) - f64!(1)),
            Op::MulF64 => setf64!(2, f64!(0) * f64!(1)),
            Op::DivF64 => setf64!(2, f64!(0) / f64!(1)),
            Op::RemF64 => setf64!(2, libm::remainder(f64!(0), f64!(1))),
            Op::FMAF64 => setf64!(3, f64!(0) * f64!(1) + f64!(2)),
            Op::AbsF64 => setf64!(1, f64!(0).abs()),
            Op::NegF64 => setf64!(1, -f64!(0)),
            Op::CeilF64 => setf64!(1, f64!(0).ceil()),
            Op::FloorF64 => setf64!(1, f64!(0).floor()),
            Op::RoundF64 => setf64!(1, f64!(0).round()),
            Op::RoundF64Even => setf64!(1, f64!(0).round_ties_even()),
            Op::MinF64 => setf64!(2, if f64!(1) < f64!(0) { f64!(1) } else { f64!(0) }),
            Op::MaxF64 => setf64!(2, if f64!(0) < f64!(1) { f64!(1) } else { f64!(0) }),
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
            Op::TruncF64F32 => setf32!(1, f64!(0) as f32),
            Op::ExtF32F64 => setf64!(1, f32!(0) as f64),
            Op::CastSI32F64 => setf64!(1, i32!(0) as f64),
            Op::CastUI32F64 => setf64!(1, u32!(0) as f64),
            Op::CastSI64F64 => setf64!(1, i64!(0) as f64),
            Op::CastUI64F64 => setf64!(1, i64!(0) as u64 as f64),
            Op::CastF64SI32 => set32!(1, f64!(0).round() as i64 as i32),
            Op::CastF64UI32 => set32!(1, f64!(0).round() as i64 as u32),
            Op::CastF64SI64 => set64!(1, f64!(0).round() as i64),
            Op::CastF64UI64 => set64!(1, f64!(0).round() as u64),
            Op::BitcastI64F64 | Op::BitcastF64I64 => set64!(1, i64!(0)),
            Op::CmpEQF64O => set32!(2, (f64!(0) == f64!(1)) as u32),
            Op::CmpEQF64U => set32!(2, (unordered64(f64!(0), f64!(1)) || f64!(0) == f64!(1)) as u32),
            Op::CmpNEF64O => set32!(2, (f64!(0) != f64!(1)) as u32),
            Op::CmpNEF64U => set32!(2, (f64!(0) != f64!(1)) as u32),
            Op::CmpLTF64O => set32!(2, (f64!(0) < f64!(1)) as u32),
            Op::CmpLTF64U => set32!(2, (unordered64(f64!(0), f64!(1)) || f64!(0) < f64!(1)) as u32),
            Op::CmpLTEF64O => set32!(2, (f64!(0) <= f64!(1)) as u32),
            Op::CmpLTEF64U => set32!(2, (unordered64(f64!(0), f64!(1)) || f64!(0) <= f64!(1)) as u32),
            Op::CmpNaNF64 => set32!(1, f64!(0).is_nan() as u32),

            // Buffers: offsets and lengths count elements of the access width.
            Op::BufferAlloc => {
                let length = i64!(0) as u64;
                let length = usize::try_from(length)
                    .ok()
                    .filter(|l| *l <= isize::MAX as usize / 2)
                    .ok_or_else(|| Error::resource_exhausted(format!("buffer of {length} bytes")))?;
                ref_at!(2) = Some(Ref::new(Buffer::new(length)));
            }
            Op::BufferClone => {
                let source = buffer!(0, "source buffer");
                let source = source.expect::<Buffer>("clone source")?;
                let bytes = source.bytes();
                let range = check_range(i64!(1) as u64, i64!(2) as u64, bytes.len())?;
                let copy = bytes[range].to_vec();
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
                let bytes = {
                    let source = source.expect::<Buffer>("copy source")?.bytes();
                    source[check_range(source_offset, length, source.len())?].to_vec()
                };
                let mut target = target.expect::<Buffer>("copy target")?.bytes_mut()?;
                let range = check_range(target_offset, length, target.len())?;
                target[range].copy_from_slice(&bytes);
            }
            Op::BufferCompare => {
                let (lhs, rhs) = (buffer!(0, "lhs buffer"), buffer!(2, "rhs buffer"));
                let (lhs_offset, rhs_offset, length) = (i64!(1) as u64, i64!(3) as u64, i64!(4) as u64);
                let left = lhs.expect::<Buffer>("compare lhs")?.bytes()[..].to_vec();
                let right_buffer = rhs.expect::<Buffer>("compare rhs")?;
                let right = right_buffer.bytes();
                let equal = left[check_range(lhs_offset, length, left.len())?]
                    == right[check_range(rhs_offset, length, right.len())?];
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
                check_ref_type(instance, &value, inst.type_id, inst)?;
                ref_at!(2) = value;
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
            Op::Branch | Op::Break | Op::CondBreak => next = branch(function, inst, 0, &mut fast, refs),
            Op::CondBranch => next = branch(function, inst, if i32!(0) != 0 { 0 } else { 1 }, &mut fast, refs),
            Op::BranchTable => {
                let index = i32!(0);
                let case = if index >= 0 && (index as u64) < inst.imm {
                    index as usize + 1
                } else {
                    0
                };
                next = branch(function, inst, case, &mut fast, refs);
            }
            Op::Fail => {
                let code = u32!(0);
                if code != 0 {
                    let message = match function.extras.get(inst.extra as usize) {
                        Some(Extra::Message(message)) => message.clone(),
                        _ => String::new(),
                    };
                    return Err(Error::new(status_code(code), message));
                }
            }
            Op::ImportResolved => {
                let import = (inst.imm as u32 & !IMPORT_ORDINAL_BIT) as usize;
                set32!(0, instance.imports[import].is_some() as u32)
            }
            Op::Trace | Op::Print => {}
            Op::Call | Op::CallVariadic | Op::CallYieldable | Op::CallVariadicYieldable => return Ok(Exit::Call(pc)),
            Op::Return => return Ok(Exit::Return(pc)),
            Op::Yield => {
                // A single-threaded invocation has nothing to yield to; continue at the target.
                next = branch(function, inst, 0, &mut fast, refs);
            }
        }
        pc = next;
    }
}

/// Moves block arguments for successor `index` of `inst` and returns the target instruction.
fn branch(function: &Function, inst: &Inst, index: usize, regs: &mut Registers<'_>, refs: &mut [Option<Ref>]) -> usize {
    let Branch { target, remap } = &function.branches[inst.extra as usize + index];
    // Pairs are applied in order, as IREE does; the compiler orders them accordingly.
    for &(from, to) in &function.pairs[remap.start as usize..remap.end as usize] {
        if is_ref(from) {
            let value = if is_move(from) {
                refs[ref_ordinal(from)].take()
            } else {
                refs[ref_ordinal(from)].clone()
            };
            refs[ref_ordinal(to)] = value;
        } else {
            regs.set(to as usize, regs.get(from as usize));
        }
    }
    *target as usize
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

fn check_ref_type(instance: &Instance, value: &Option<Ref>, type_id: u32, inst: &Inst) -> Result<()> {
    let Some(value) = value else { return Ok(()) };
    let expected = instance.types.get(type_id as usize).map(String::as_str).unwrap_or("");
    if crate::context::ref_type_matches(expected, value.type_name()) {
        Ok(())
    } else {
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

fn unordered32(a: f32, b: f32) -> bool {
    a.is_nan() || b.is_nan()
}

fn unordered64(a: f64, b: f64) -> bool {
    a.is_nan() || b.is_nan()
}

fn division_by_zero() -> Error {
    Error::invalid_argument("integer division by zero")
}

/// Signed division: zero divisors are errors; the one overflowing case wraps.
fn checked<T>(value: Option<T>, divisor_zero: bool, overflow: T) -> Result<T> {
    match value {
        Some(v) => Ok(v),
        None if divisor_zero => Err(division_by_zero()),
        None => Ok(overflow),
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

fn status_code(code: u32) -> StatusCode {
    use StatusCode::*;
    [
        Cancelled,
        Unknown,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
        Deferred,
        Incompatible,
    ]
    // IREE keeps only the low 5 bits of a status code (99 becomes 3, INVALID_ARGUMENT).
    .get(((code & 0x1F) as usize).wrapping_sub(1))
    .copied()
    .unwrap_or(Unknown)
}

impl ImportTarget {
    fn signature(&self) -> &Signature {
        match self {
            ImportTarget::Native(native) => &native.signature,
            ImportTarget::Bytecode { signature, .. } => signature,
        }
    }

    fn call(&self, args: &[Value]) -> Result<Vec<Value>> {
        match self {
            ImportTarget::Native(native) => (native.function)(args),
            ImportTarget::Bytecode { instance, ordinal, .. } => invoke(instance, *ordinal, args),
        }
    }
}
