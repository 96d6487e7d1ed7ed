//! The interpreter: runs lowered functions over a register stack.
//!
//! Registers live in two stacks shared by all frames of an invocation: an i32 bank (64-bit values
//! in aligned pairs, as IREE lays them out) and a ref bank. Internal calls push a frame without
//! recursing on the Rust stack; calls to imports marshal values through the callee's calling
//! convention. Everything the verifier proved (register and ordinal ranges, branch targets) is not
//! checked again beyond Rust's own bounds checks.

use crate::cancel::CancelToken;
use crate::cconv::Signature;
use crate::compile::{Branch, Extra, Function, Inst};
use crate::context::{ImportTarget, Instance, ModuleState};
use crate::isa::{REF_BANK_BIT, REF_MOVE_BIT, REF_ORDINAL_MASK};
use crate::ref_types::Ref;
use crate::unchecked::{Code, Registers};
use crate::value::Value;
use halo_hal::{Error, Fence, Result, ResultExt};
use std::ops::ControlFlow;
use std::sync::{Arc, MutexGuard};

pub(crate) mod hot;
mod import;
mod ops;

use import::ImportCall;

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
    /// Whether a call to a native function with a wait hook may suspend the invocation.
    may_yield: bool,
    /// An emptied argument list kept between internal calls, so each call need not allocate one.
    spare_arguments: Vec<Value>,
    limits: Limits<'a>,
}

/// What ends an invocation early: its step limit and its caller's cancellation.
struct Limits<'a> {
    /// Trips through [`execute`]'s loop the invocation may still make.
    steps: u64,
    /// Stops the invocation at its next trip once cancelled.
    cancel: Option<&'a CancelToken>,
}

/// How far a run of an invocation got.
#[derive(Debug)]
pub enum Step {
    /// The outermost function returned these results.
    Done(Vec<Value>),
    /// A native function would wait for this fence; resume once it is reached.
    Wait(Fence),
}

/// Calls internal function `ordinal` of `instance` with `args`, returning its results; native
/// functions that wait block the calling thread. A `cancel` token stops it at its next step.
pub(crate) fn invoke(
    instance: &Arc<Instance>,
    ordinal: u32,
    args: &[Value],
    cancel: Option<&CancelToken>,
) -> Result<Vec<Value>> {
    let mut invocation = Invocation::new(instance.clone(), ordinal, args)?;
    invocation.cancel = cancel.cloned();
    match invocation.run(false)? {
        Step::Done(results) => Ok(results),
        Step::Wait(_) => unreachable!("a blocking run never yields"),
    }
}

/// A call in progress that can suspend where a native function would wait
/// (`hal.fence.await`) and resume later, so no thread blocks on it.
///
/// Ownership: holds the module instance and the call's registers. Threading: may be resumed on
/// any thread, one at a time.
pub struct Invocation {
    instance: Arc<Instance>,
    ordinal: u32,
    stacks: Stacks,
    /// What is left of the step limit (see [`crate::Context::limit_steps`]).
    steps: u64,
    /// Stops the call once cancelled (see [`Invocation::cancel_with`]).
    cancel: Option<CancelToken>,
}

/// The growable memory of an invocation. Finished invocations hand theirs to a small per-thread
/// pool, so a steady stream of calls allocates none of it.
#[derive(Default)]
struct Stacks {
    i32s: Vec<u32>,
    refs: Vec<Option<Ref>>,
    frames: Vec<Frame>,
    /// An emptied argument list for import calls.
    arguments: Vec<Value>,
}

/// How many finished invocations' stacks a thread keeps for reuse.
const POOLED_STACKS: usize = 4;

thread_local! {
    static STACK_POOL: std::cell::RefCell<Vec<Stacks>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Stacks {
    fn take_pooled() -> Stacks {
        STACK_POOL
            .try_with(|pool| pool.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn return_to_pool(mut self) {
        // Dropping refs runs arbitrary destructors, so it happens before the pool is borrowed.
        self.refs.clear();
        self.arguments.clear();
        self.i32s.clear();
        self.frames.clear();
        let _ = STACK_POOL.try_with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOLED_STACKS {
                pool.push(self);
            }
        });
    }
}

impl Drop for Invocation {
    fn drop(&mut self) {
        std::mem::take(&mut self.stacks).return_to_pool();
    }
}

impl Invocation {
    /// Starts a call of internal function `ordinal` with `args` (nothing runs yet).
    ///
    /// # Errors
    /// `InvalidArgument` when `args` do not match the function's calling convention.
    pub fn new(instance: Arc<Instance>, ordinal: u32, args: &[Value]) -> Result<Self> {
        instance.signature(ordinal)?;
        let mut invocation = Invocation {
            steps: instance.step_limit,
            instance,
            ordinal,
            stacks: Stacks::take_pooled(),
            cancel: None,
        };
        invocation.with_machine(false, |machine| {
            let instance = machine.instance;
            let function = &instance.functions[ordinal as usize];
            machine.push_frame(ordinal, function, 0..0);
            machine.write_arguments(instance.signature(ordinal)?, args)
        })?;
        Ok(invocation)
    }

    /// Stops the call with `Cancelled` at its next step once `token` is cancelled, and the
    /// bytecode functions it calls in other modules likewise.
    pub fn cancel_with(&mut self, token: CancelToken) {
        self.cancel = Some(token);
    }

    /// Runs until the call returns or would wait: [`Step::Wait`] hands back the fence to wait
    /// for before calling `resume` again.
    ///
    /// # Errors
    /// Whatever the function fails with; the invocation is finished then.
    pub fn resume(&mut self) -> Result<Step> {
        self.run(true)
    }

    fn run(&mut self, may_yield: bool) -> Result<Step> {
        let run = |invocation: &mut Self| {
            invocation.with_machine(may_yield, |machine| {
                machine.state = Some(machine.instance.lock_state());
                machine.run()
            })
        };
        // A synchronous device blocks this thread in the program's queue operations; it gives up
        // on a wait once the call is cancelled.
        let outcome = match self.cancel.as_ref().map(CancelToken::flag) {
            Some(flag) => halo_hal::caller::on_behalf_of(flag, || run(self)),
            None => run(self),
        };
        let (instance, ordinal) = (&self.instance, self.ordinal);
        outcome.with_context(|| format!("executing '{}.{}'", instance.name, instance.function_name(ordinal)))
    }

    /// Lends the registers to a [`Machine`] for `work` and takes them back.
    fn with_machine<T>(&mut self, may_yield: bool, work: impl FnOnce(&mut Machine<'_>) -> Result<T>) -> Result<T> {
        let stacks = std::mem::take(&mut self.stacks);
        let mut machine = Machine {
            instance: &self.instance,
            i32s: stacks.i32s,
            refs: stacks.refs,
            frames: stacks.frames,
            state: None,
            may_yield,
            spare_arguments: stacks.arguments,
            limits: Limits {
                steps: self.steps,
                cancel: self.cancel.as_ref(),
            },
        };
        let outcome = work(&mut machine);
        machine.state = None;
        self.steps = machine.limits.steps;
        self.stacks = Stacks {
            i32s: machine.i32s,
            refs: machine.refs,
            frames: machine.frames,
            arguments: machine.spare_arguments,
        };
        outcome
    }
}

#[inline]
fn check_count(passed: usize, expected: usize) -> Result<()> {
    if passed == expected {
        Ok(())
    } else {
        Err(count_mismatch(passed, expected))
    }
}

#[cold]
#[inline(never)]
fn count_mismatch(passed: usize, expected: usize) -> Error {
    Error::invalid_argument(format!("{passed} values passed where {expected} are expected"))
}

/// The 64-bit value in the register pair starting at `at` (low half first).
pub(crate) fn pair(i32s: &[u32], at: usize) -> u64 {
    i32s[at] as u64 | (i32s[at + 1] as u64) << 32
}

pub(crate) fn ref_ordinal(raw: u16) -> usize {
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
        let kinds = signature.fixed_argument_kinds().unwrap_or_default();
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

    fn run(&mut self) -> Result<Step> {
        let instance = self.instance;
        loop {
            let frame = self.frames.last().expect("a frame is running");
            let function = &instance.functions[frame.function as usize];
            let (ib, rb, pc) = (frame.i32_base, frame.ref_base, frame.pc);
            let Machine { i32s, refs, state, .. } = self;
            let regs = &mut i32s[ib..ib + function.i32_registers as usize];
            let frame_refs = &mut refs[rb..rb + function.ref_registers as usize];
            let state = state.as_mut().expect("state held outside import calls");
            match execute(instance, function, regs, frame_refs, state, pc, &mut self.limits)? {
                Exit::Call(pc) => {
                    self.frames.last_mut().expect("frame").pc = resume_point(function, pc);
                    if let Some(fence) = self.call(function, &function.insts[pc])? {
                        // Resuming runs the call again; its fence is reached by then.
                        self.frames.last_mut().expect("frame").pc = pc;
                        return Ok(Step::Wait(fence));
                    }
                }
                Exit::Return(pc) => {
                    if let Some(results) = self.return_from(function, &function.insts[pc])? {
                        return Ok(Step::Done(results));
                    }
                }
            }
        }
    }

    /// Performs a call; returns the fence a yielding native function would wait for instead of
    /// calling it, when the invocation may yield and the fence is not reached yet.
    fn call(&mut self, function: &Function, inst: &Inst) -> Result<Option<Fence>> {
        let frame = self.frames.last().expect("frame");
        let (ib, rb) = (frame.i32_base, frame.ref_base);
        let instance = self.instance;
        if let Some(call) = ImportCall::of(instance, function, inst)? {
            return self.call_import(&call, ib, rb);
        }
        let Some(Extra::Call {
            callee, args, results, ..
        }) = function.extras.get(inst.extra as usize)
        else {
            unreachable!("calls were lowered")
        };
        if self.frames.len() >= MAX_FRAMES {
            return Err(Error::resource_exhausted(format!(
                "call depth exceeds {MAX_FRAMES} frames"
            )));
        }
        let callee_function = &self.instance.functions[*callee as usize];
        let signature = instance.signature(*callee)?;
        let kinds = signature
            .fixed_argument_kinds()
            .ok_or_else(|| Error::invalid_argument("internal functions cannot be variadic"))?;
        // The spare argument list carries the values between the frames.
        let mut values = std::mem::take(&mut self.spare_arguments);
        let passed = self
            .read_registers(function, args, (ib, rb), kinds, &mut values)
            .and_then(|()| {
                self.push_frame(*callee, callee_function, results.clone());
                self.write_arguments(signature, &values)
            });
        values.clear();
        self.spare_arguments = values;
        passed.map(|()| None)
    }

    /// Calls an import over the current frame (`ib`, `rb`: its first registers); returns the
    /// fence a waiting native function would wait for, as [`Machine::call`].
    fn call_import(&mut self, call: &ImportCall<'_>, ib: usize, rb: usize) -> Result<Option<Fence>> {
        let wait = match call.target {
            ImportTarget::Native(native) if self.may_yield => native.wait.as_ref(),
            _ => None,
        };
        if let Some(wait) = wait {
            let pending = wait(&call.arguments(&self.i32s[ib..], &self.refs[rb..])).and_then(|fence| match fence {
                Some(fence) if !fence.query()? => Ok(Some(fence)),
                _ => Ok(None),
            });
            if !matches!(pending, Ok(None)) {
                return pending.map_err(|error| call.context(error));
            }
        }
        // The module state is released across a call that may come back into this module, or
        // block: other invocations of the module run meanwhile.
        let releases_state = call.target.releases_state();
        if releases_state {
            self.state = None;
        }
        let outcome = call.run(&mut self.i32s[ib..], &mut self.refs[rb..], self.limits.cancel);
        if releases_state {
            self.state = Some(self.instance.lock_state());
        }
        outcome.map(|()| None)
    }

    fn scalar(&self, at: usize, kind: char) -> Value {
        match kind {
            'i' => Value::I32(self.i32s[at] as i32),
            'f' => Value::F32(f32::from_bits(self.i32s[at])),
            'I' => Value::I64(pair(&self.i32s, at) as i64),
            _ => Value::F64(f64::from_bits(pair(&self.i32s, at))),
        }
    }

    /// Appends the registers of `list` to `values` as values of `kinds`, moving refs that carry
    /// the move bit.
    fn read_registers(
        &mut self,
        function: &Function,
        list: &std::ops::Range<u32>,
        (ib, rb): (usize, usize),
        kinds: &[char],
        values: &mut Vec<Value>,
    ) -> Result<()> {
        let regs = &function.regs[list.start as usize..list.end as usize];
        check_count(regs.len(), kinds.len())?;
        values.reserve(regs.len());
        for (raw, kind) in regs.iter().zip(kinds) {
            values.push(match kind {
                'r' => {
                    let slot = &mut self.refs[rb + ref_ordinal(*raw)];
                    Value::Ref(if is_move(*raw) { slot.take() } else { slot.clone() })
                }
                _ => self.scalar(ib + *raw as usize, *kind),
            });
        }
        Ok(())
    }

    /// Pops the current frame; returns the results when it was the outermost one.
    fn return_from(&mut self, function: &Function, inst: &Inst) -> Result<Option<Vec<Value>>> {
        let frame = self.frames.last().expect("frame");
        let (ib, rb, ordinal) = (frame.i32_base, frame.ref_base, frame.function);
        let instance = self.instance;
        let signature = instance.signature(ordinal)?;
        let list = match function.extras.get(inst.extra as usize) {
            Some(Extra::List(list)) => list.clone(),
            _ => 0..0,
        };
        let outermost = self.frames.len() == 1;
        let mut values = if outermost {
            Vec::new()
        } else {
            std::mem::take(&mut self.spare_arguments)
        };
        self.read_registers(function, &list, (ib, rb), signature.result_kinds(), &mut values)?;
        let frame = self.frames.pop().expect("frame");
        self.i32s.truncate(frame.i32_base);
        self.refs.truncate(frame.ref_base);
        let Some(caller) = self.frames.last() else {
            return Ok(Some(values));
        };
        let (cib, crb) = (caller.i32_base, caller.ref_base);
        let caller_function = &self.instance.functions[caller.function as usize];
        let list = &caller_function.regs[frame.results.start as usize..frame.results.end as usize];
        let kinds = signature.result_kinds();
        let written = write_results(
            list,
            kinds,
            &mut self.i32s[cib..],
            &mut self.refs[crb..],
            values.drain(..),
        );
        self.spare_arguments = values;
        written.map(|()| None)
    }
}

/// Writes `values` into registers `list` of a frame (`i32s` and `refs` start at its first
/// register); the verifier proved that `list` holds registers of `kinds`.
///
/// # Errors
/// `InvalidArgument` when the counts differ or a value is not of its register's kind (a native
/// function returned something other than its calling convention says).
fn write_results(
    list: &[u16],
    kinds: &[char],
    i32s: &mut [u32],
    refs: &mut [Option<Ref>],
    values: impl IntoIterator<IntoIter = impl ExactSizeIterator<Item = Value>>,
) -> Result<()> {
    let values = values.into_iter();
    if list.len() != values.len() {
        return Err(Error::invalid_argument(format!(
            "{} results returned where {} are expected",
            values.len(),
            list.len()
        )));
    }
    for (index, ((&raw, &kind), value)) in list.iter().zip(kinds).zip(values).enumerate() {
        let at = raw as usize;
        match (kind, value) {
            ('i', Value::I32(v)) => i32s[at] = v as u32,
            ('f', Value::F32(v)) => i32s[at] = v.to_bits(),
            ('I', Value::I64(v)) => set_pair(i32s, at, v as u64),
            ('F', Value::F64(v)) => set_pair(i32s, at, v.to_bits()),
            ('r', Value::Ref(r)) => refs[ref_ordinal(raw)] = r,
            (kind, value) => {
                return Err(Error::invalid_argument(format!(
                    "result {index} is {value:?} where the calling convention says '{kind}'"
                )))
            }
        }
    }
    Ok(())
}

fn set_pair(i32s: &mut [u32], at: usize, value: u64) {
    i32s[at] = value as u32;
    i32s[at + 1] = (value >> 32) as u32;
}

/// Where the caller continues after the call at `pc` returns: the next instruction, or the resume
/// block of a yieldable call (whose results are the block's arguments, so nothing moves).
fn resume_point(function: &Function, pc: usize) -> usize {
    match function.extras.get(function.insts[pc].extra as usize) {
        Some(Extra::Call {
            resume: Some(resume), ..
        }) => resume.target as usize,
        _ => pc + 1,
    }
}

/// Why [`execute`] stopped.
pub(super) enum Exit {
    /// The instruction at this index is a call.
    Call(usize),
    /// The instruction at this index is a return.
    Return(usize),
}

/// Runs `function` from instruction `pc` over its frame's registers until it calls or returns.
///
/// Keeping the frame's registers in local slices (rather than indexing the whole stack through
/// the machine) is what makes the loop fast. Only scalar arithmetic and branches run here, so
/// the loop's state stays in machine registers; everything else (refs, buffers, lists, globals,
/// library math, calls) goes through [`ops::step`], and calls and returns back to
/// [`Machine::run`].
#[inline(never)]
fn execute(
    instance: &Arc<Instance>,
    function: &Function,
    regs: &mut [u32],
    refs: &mut [Option<Ref>],
    state: &mut ModuleState,
    mut pc: usize,
    limits: &mut Limits<'_>,
) -> Result<Exit> {
    let code = Code::of(function);
    let mut fast = Registers::of_frame(function, regs);
    loop {
        take_step(limits)?;
        let inst = code.at(pc);
        pc = (inst.handler)(inst, fast.reborrow(), function, hot::BUDGET, 0);
        while pc & hot::CHECKPOINT != 0 {
            take_step(limits)?;
            let at = pc & !hot::CHECKPOINT;
            let handler = function.checkpoints[&(at as u32)];
            pc = handler(code.at(at), fast.reborrow(), function, hot::BUDGET, 0);
        }
        if pc & hot::SLOW == 0 {
            continue;
        }
        pc &= !hot::SLOW;
        let inst = code.at(pc);
        let step = ops::step(instance, function, inst, pc, &mut fast, refs, state);
        match step.map_err(|e| e.context(format!("at bytecode offset {}", function.offsets[pc])))? {
            ControlFlow::Continue(target) => pc = target,
            ControlFlow::Break(exit) => return Ok(exit),
        }
    }
}

/// Counts one trip through [`execute`]'s loop against the invocation's step limit, and stops
/// a cancelled invocation.
#[inline(always)]
fn take_step(limits: &mut Limits<'_>) -> Result<()> {
    if limits.steps == 0 {
        return Err(out_of_steps());
    }
    limits.steps -= 1;
    if limits.cancel.is_some_and(CancelToken::is_cancelled) {
        return Err(cancelled());
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn cancelled() -> Error {
    Error::cancelled("the call was cancelled by its caller")
}

#[cold]
#[inline(never)]
fn out_of_steps() -> Error {
    Error::resource_exhausted("the invocation ran out of its step limit (see Context::limit_steps)")
}

/// Moves block arguments for successor `index` of `inst` and returns the target instruction.
#[inline(always)]
fn branch(function: &Function, inst: &Inst, index: usize, regs: &mut Registers<'_>, refs: &mut [Option<Ref>]) -> usize {
    let Branch {
        target,
        moves,
        ref_moves,
    } = &function.branches[inst.extra as usize + index];
    hot::move_block_arguments(moves, regs);
    if !ref_moves.is_empty() {
        move_refs(ref_moves, refs);
    }
    *target as usize
}

#[inline(never)]
fn move_refs(pairs: &[(u16, u16)], refs: &mut [Option<Ref>]) {
    for &(from, to) in pairs {
        refs[ref_ordinal(to)] = if is_move(from) {
            refs[ref_ordinal(from)].take()
        } else {
            refs[ref_ordinal(from)].clone()
        };
    }
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

impl ImportTarget {
    fn signature(&self) -> &Signature {
        match self {
            ImportTarget::Native(native) => &native.signature,
            ImportTarget::Bytecode { signature, .. } => signature,
        }
    }

    /// Whether the caller's module state is released across the call: the callee may run its
    /// bytecode, or block.
    fn releases_state(&self) -> bool {
        match self {
            ImportTarget::Native(native) => native.releases_state,
            ImportTarget::Bytecode { .. } => true,
        }
    }
}
