//! The interpreter's hot instructions: scalar arithmetic, comparisons, conversions and branches,
//! each a small function reached through a pointer stored in its [`Inst`].
//!
//! Each handler ends by calling the next instruction's handler, so a run of hot instructions
//! needs no central dispatch loop: in optimized builds that call is a jump (a tail call) and each
//! handler keeps its own registers. The stack stays bounded without relying on that: jumps count
//! against a budget, after which control returns to [`super::execute`]; straight-line runs are
//! cut by checkpoints the compiler places every [`CHECKPOINT_INTERVAL`] instructions; debug
//! builds, which make no tail calls, count every instruction. Instructions without a hot handler
//! return to [`super::execute`], which runs them through [`super::ops::step`].
//!
//! Each handler also hands its result to the next one in a machine register. Where the compiler
//! saw that an instruction reads the register the one before it wrote ([`Inst::forward`]), its
//! handler takes that operand from there: the frame register was written an instant ago, and
//! reading it back waits for the store to reach the load (a few cycles on every link of a
//! dependency chain). On `fixtures/vm/perf_loop`, where 11 of 19 instructions read the value
//! just written, that took whole runs of 10⁷ iterations from 1.03–1.09 × `iree-run-module`'s
//! time to 0.82 × (21 alternating runs), with barely fewer machine instructions: the loop was
//! waiting on stores, not executing instructions.
//!
//! Measured on `fixtures/vm/perf_loop` (callgrind, 10⁶ iterations of 19 VM instructions): one
//! `match` in a loop took 472 M machine instructions, chained handlers 236 M, with forwarding
//! 224 M (IREE 3.13's `iree-run-module`: 275 M).

use crate::compile::{Branch, Function, Inst, WIDE_MOVE};
use crate::isa::Op;
use crate::unchecked::{Code, Registers};

/// Runs `inst` over a frame's registers, then the instructions after it; returns the index
/// where [`super::execute`] continues, possibly tagged [`SLOW`] or [`CHECKPOINT`]. The last
/// argument is the result of the instruction that ran just before (its bits).
pub(crate) type Handler = fn(&Inst, Registers<'_>, &Function, u32, u64) -> usize;

/// How many jumps (every instruction, in debug builds) chain before returning to
/// [`super::execute`].
pub(crate) const BUDGET: u32 = 64;

/// The longest run of instructions that chain without a budget check (release builds). Debug
/// builds place checkpoints closer than [`BUDGET`], so tests chain through several.
pub(crate) const CHECKPOINT_INTERVAL: usize = if cfg!(debug_assertions) { 16 } else { 256 };

/// The highest operand index that can take the previous instruction's result.
pub(crate) const MAX_FORWARDED: u8 = 2;

/// `F` of handlers that read every operand from the frame.
const NOT_FORWARDED: usize = usize::MAX;

/// Tag on a [`Handler`]'s result: the instruction at that index has no hot handler.
pub(crate) const SLOW: usize = 1 << (usize::BITS - 1);

/// Tag on a [`Handler`]'s result: the instruction at that index is a checkpoint; its handler is
/// in [`Function::checkpoints`].
pub(crate) const CHECKPOINT: usize = 1 << (usize::BITS - 2);

/// Continues with the instruction after `inst`, handing it `result`.
#[inline(always)]
fn next(inst: &Inst, regs: Registers<'_>, function: &Function, budget: u32, result: u64) -> usize {
    let code = Code::of(function);
    let next = code.after(inst);
    if !cfg!(debug_assertions) {
        return (next.handler)(next, regs, function, budget, result);
    }
    // An instruction that takes `result` cannot be resumed from `execute`; runs of them end at
    // a checkpoint, so the stack stays bounded.
    if budget == 0 && next.forward.is_none() {
        return code.index_of(next);
    }
    (next.handler)(next, regs, function, budget.saturating_sub(1), result)
}

/// Continues with the instruction at `index`, a branch target (which takes no forwarded result).
#[inline(always)]
fn jump(index: usize, regs: Registers<'_>, function: &Function, budget: u32) -> usize {
    if budget == 0 {
        return index;
    }
    let next = Code::of(function).at(index);
    (next.handler)(next, regs, function, budget - 1, 0)
}

/// The handler of instructions [`super::ops::step`] runs: hands them back.
pub(crate) fn slow(inst: &Inst, _: Registers<'_>, function: &Function, _: u32, _: u64) -> usize {
    Code::of(function).index_of(inst) | SLOW
}

/// The handler of checkpoints: returns to [`super::execute`] before running the instruction.
pub(crate) fn checkpoint(inst: &Inst, _: Registers<'_>, function: &Function, _: u32, _: u64) -> usize {
    Code::of(function).index_of(inst) | CHECKPOINT
}

/// The operands of one instruction over its frame's registers; operand `F` is `last`, the
/// previous instruction's result.
struct Operands<'i, 'r, const F: usize> {
    inst: &'i Inst,
    regs: Registers<'r>,
    last: u64,
    result: u64,
}

impl<'i, 'r, const F: usize> Operands<'i, 'r, F> {
    #[inline(always)]
    fn new(inst: &'i Inst, regs: Registers<'r>, last: u64) -> Self {
        Operands {
            inst,
            regs,
            last,
            result: 0,
        }
    }

    #[inline(always)]
    fn u32(&self, n: usize) -> u32 {
        if n == F {
            return self.last as u32;
        }
        self.regs.get(self.inst.regs[n] as usize)
    }

    #[inline(always)]
    fn i32(&self, n: usize) -> i32 {
        self.u32(n) as i32
    }

    #[inline(always)]
    fn i64(&self, n: usize) -> i64 {
        if n == F {
            return self.last as i64;
        }
        self.regs.get64(self.inst.regs[n] as usize) as i64
    }

    #[inline(always)]
    fn f32(&self, n: usize) -> f32 {
        f32::from_bits(self.u32(n))
    }

    #[inline(always)]
    fn f64(&self, n: usize) -> f64 {
        f64::from_bits(self.i64(n) as u64)
    }

    #[inline(always)]
    fn imm(&self) -> u64 {
        self.inst.imm
    }

    #[inline(always)]
    fn set32(&mut self, n: usize, value: impl Bits32) {
        let bits = value.bits();
        self.result = bits as u64;
        self.regs.set(self.inst.regs[n] as usize, bits);
    }

    #[inline(always)]
    fn set64(&mut self, n: usize, value: impl Bits64) {
        let bits = value.bits();
        self.result = bits;
        self.regs.set64(self.inst.regs[n] as usize, bits);
    }
}

/// Values stored in one i32-bank register.
trait Bits32 {
    fn bits(self) -> u32;
}

impl Bits32 for u32 {
    fn bits(self) -> u32 {
        self
    }
}

impl Bits32 for i32 {
    fn bits(self) -> u32 {
        self as u32
    }
}

impl Bits32 for f32 {
    fn bits(self) -> u32 {
        self.to_bits()
    }
}

/// Values stored in an aligned pair of i32-bank registers.
trait Bits64 {
    fn bits(self) -> u64;
}

impl Bits64 for u64 {
    fn bits(self) -> u64 {
        self
    }
}

impl Bits64 for i64 {
    fn bits(self) -> u64 {
        self as u64
    }
}

impl Bits64 for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// Picks the instantiation of a handler `$run::<F, ...>` for operand `$forward` (`None`: read
/// every operand from the frame).
macro_rules! specialize {
    ($run:ident, $forward:expr $(, $rest:expr)?) => {
        match $forward {
            None => $run::<NOT_FORWARDED $(, $rest)?> as Handler,
            Some(0) => $run::<0 $(, $rest)?>,
            Some(1) => $run::<1 $(, $rest)?>,
            Some(2) => $run::<2 $(, $rest)?>,
            Some(n) => unreachable!("operand {n} is beyond MAX_FORWARDED"),
        }
    };
}

/// Defines [`is_hot`], [`handler`] and [`handler_then_branch`] from one list of hot instructions:
/// `Op | Op => statement` over operands `$o`.
macro_rules! hot_instructions {
    ($o:ident; $($($op:ident)|+ => $body:expr,)*) => {
        /// Whether `op` has handlers of its own (a result it can hand on, operands it can take).
        pub(crate) fn is_hot(op: Op) -> bool {
            matches!(op, $($(Op::$op)|+)|*)
        }

        /// The handler of `op`, taking operand `forward` from the previous instruction: its own
        /// for hot instructions and branches, otherwise [`slow`].
        pub(crate) fn handler(op: Op, forward: Option<u8>) -> Handler {
            match op {
                Op::Branch => |inst, regs, function, budget, _| branch(inst, 0, regs, function, budget),
                Op::CondBranch => |inst, regs, function, budget, _| {
                    let taken = regs.get(inst.regs[0] as usize) != 0;
                    branch(inst, if taken { 0 } else { 1 }, regs, function, budget)
                },
                _ => hot_handler(op, forward, false).unwrap_or(slow),
            }
        }

        /// The handler of hot `op` followed by a `br` (that is not a branch target and moves no
        /// refs): one step for both, as most loops end with one. `None` for other instructions.
        pub(crate) fn handler_then_branch(op: Op, forward: Option<u8>) -> Option<Handler> {
            hot_handler(op, forward, true)
        }

        fn hot_handler(op: Op, forward: Option<u8>, then_branch: bool) -> Option<Handler> {
            Some(match op {
                $($(Op::$op)|+ => {
                    fn run<const F: usize, const BRANCH: bool>(
                        inst: &Inst,
                        regs: Registers<'_>,
                        function: &Function,
                        budget: u32,
                        last: u64,
                    ) -> usize {
                        let mut $o = Operands::<F>::new(inst, regs, last);
                        $body;
                        if BRANCH {
                            let br = Code::of(function).after(inst);
                            branch(br, 0, $o.regs, function, budget)
                        } else {
                            next(inst, $o.regs, function, budget, $o.result)
                        }
                    }
                    if then_branch {
                        specialize!(run, forward, true)
                    } else {
                        specialize!(run, forward, false)
                    }
                })*
                _ => return None,
            })
        }
    };
}

hot_instructions! { o;
    ConstI32Zero | ConstF32Zero => o.set32(0, 0u32),
    ConstI64Zero | ConstF64Zero => o.set64(0, 0u64),
    ConstI32 | ConstF32 => o.set32(0, o.imm() as u32),
    ConstI64 | ConstF64 => o.set64(0, o.imm()),
    AddI32 => o.set32(2, o.i32(0).wrapping_add(o.i32(1))),
    SubI32 => o.set32(2, o.i32(0).wrapping_sub(o.i32(1))),
    MulI32 => o.set32(2, o.i32(0).wrapping_mul(o.i32(1))),
    FMAI32 => o.set32(3, o.i32(0).wrapping_mul(o.i32(1)).wrapping_add(o.i32(2))),
    AbsI32 => o.set32(1, o.i32(0).wrapping_abs()),
    MinI32S => o.set32(2, o.i32(0).min(o.i32(1))),
    MinI32U => o.set32(2, o.u32(0).min(o.u32(1))),
    MaxI32S => o.set32(2, o.i32(0).max(o.i32(1))),
    MaxI32U => o.set32(2, o.u32(0).max(o.u32(1))),
    CtlzI32 => o.set32(1, o.u32(0).leading_zeros()),
    AddI64 => o.set64(2, o.i64(0).wrapping_add(o.i64(1))),
    SubI64 => o.set64(2, o.i64(0).wrapping_sub(o.i64(1))),
    MulI64 => o.set64(2, o.i64(0).wrapping_mul(o.i64(1))),
    FMAI64 => o.set64(3, o.i64(0).wrapping_mul(o.i64(1)).wrapping_add(o.i64(2))),
    AbsI64 => o.set64(1, o.i64(0).wrapping_abs()),
    MinI64S => o.set64(2, o.i64(0).min(o.i64(1))),
    MinI64U => o.set64(2, (o.i64(0) as u64).min(o.i64(1) as u64)),
    MaxI64S => o.set64(2, o.i64(0).max(o.i64(1))),
    MaxI64U => o.set64(2, (o.i64(0) as u64).max(o.i64(1) as u64)),
    CtlzI64 => o.set64(1, (o.i64(0) as u64).leading_zeros() as u64),
    NotI32 => o.set32(1, !o.u32(0)),
    AndI32 => o.set32(2, o.u32(0) & o.u32(1)),
    OrI32 => o.set32(2, o.u32(0) | o.u32(1)),
    XorI32 => o.set32(2, o.u32(0) ^ o.u32(1)),
    NotI64 => o.set64(1, !o.i64(0)),
    AndI64 => o.set64(2, o.i64(0) & o.i64(1)),
    OrI64 => o.set64(2, o.i64(0) | o.i64(1)),
    XorI64 => o.set64(2, o.i64(0) ^ o.i64(1)),
    ShlI32 => o.set32(2, o.u32(0) << (o.u32(1) & 31)),
    ShrI32S => o.set32(2, o.i32(0) >> (o.u32(1) & 31)),
    ShrI32U => o.set32(2, o.u32(0) >> (o.u32(1) & 31)),
    ShlI64 => o.set64(2, (o.i64(0) as u64) << (o.u32(1) & 63)),
    ShrI64S => o.set64(2, o.i64(0) >> (o.u32(1) & 63)),
    ShrI64U => o.set64(2, (o.i64(0) as u64) >> (o.u32(1) & 63)),
    TruncI32I8 => o.set32(1, o.u32(0) as u8 as u32),
    TruncI32I16 => o.set32(1, o.u32(0) as u16 as u32),
    TruncI64I32 => o.set32(1, o.i64(0) as u32),
    ExtI8I32S => o.set32(1, o.u32(0) as i8 as i32),
    ExtI8I32U => o.set32(1, o.u32(0) as u8 as u32),
    ExtI16I32S => o.set32(1, o.u32(0) as i16 as i32),
    ExtI16I32U => o.set32(1, o.u32(0) as u16 as u32),
    ExtI32I64S => o.set64(1, o.i32(0) as i64),
    ExtI32I64U => o.set64(1, o.u32(0) as u64),
    CmpEQI32 => o.set32(2, int_compare(Op::CmpEQI32, &o) as u32),
    CmpNEI32 => o.set32(2, int_compare(Op::CmpNEI32, &o) as u32),
    CmpLTI32S => o.set32(2, int_compare(Op::CmpLTI32S, &o) as u32),
    CmpLTI32U => o.set32(2, int_compare(Op::CmpLTI32U, &o) as u32),
    CmpNZI32 => o.set32(1, int_compare(Op::CmpNZI32, &o) as u32),
    CmpEQI64 => o.set32(2, int_compare(Op::CmpEQI64, &o) as u32),
    CmpNEI64 => o.set32(2, int_compare(Op::CmpNEI64, &o) as u32),
    CmpLTI64S => o.set32(2, int_compare(Op::CmpLTI64S, &o) as u32),
    CmpLTI64U => o.set32(2, int_compare(Op::CmpLTI64U, &o) as u32),
    CmpNZI64 => o.set32(1, int_compare(Op::CmpNZI64, &o) as u32),
    SelectI32 | SelectF32 => o.set32(3, if o.i32(0) != 0 { o.u32(1) } else { o.u32(2) }),
    SelectI64 | SelectF64 => o.set64(3, if o.i32(0) != 0 { o.i64(1) } else { o.i64(2) }),
    AddF32 => o.set32(2, o.f32(0) + o.f32(1)),
    SubF32 => o.set32(2, o.f32(0) - o.f32(1)),
    MulF32 => o.set32(2, o.f32(0) * o.f32(1)),
    DivF32 => o.set32(2, o.f32(0) / o.f32(1)),
    FMAF32 => o.set32(3, o.f32(0) * o.f32(1) + o.f32(2)),
    AbsF32 => o.set32(1, o.f32(0).abs()),
    NegF32 => o.set32(1, -o.f32(0)),
    MinF32 => o.set32(2, if o.f32(1) < o.f32(0) { o.f32(1) } else { o.f32(0) }),
    MaxF32 => o.set32(2, if o.f32(0) < o.f32(1) { o.f32(1) } else { o.f32(0) }),
    CastSI32F32 => o.set32(1, o.i32(0) as f32),
    CastUI32F32 => o.set32(1, o.u32(0) as f32),
    CastSI64F32 => o.set32(1, o.i64(0) as f32),
    CastUI64F32 => o.set32(1, o.i64(0) as u64 as f32),
    BitcastI32F32 | BitcastF32I32 => o.set32(1, o.u32(0)),
    CmpEQF32O => o.set32(2, (o.f32(0) == o.f32(1)) as u32),
    CmpEQF32U => o.set32(2, (unordered32(o.f32(0), o.f32(1)) || o.f32(0) == o.f32(1)) as u32),
    CmpNEF32O => o.set32(2, (o.f32(0) != o.f32(1)) as u32),
    CmpNEF32U => o.set32(2, (o.f32(0) != o.f32(1)) as u32),
    CmpLTF32O => o.set32(2, (o.f32(0) < o.f32(1)) as u32),
    CmpLTF32U => o.set32(2, (unordered32(o.f32(0), o.f32(1)) || o.f32(0) < o.f32(1)) as u32),
    CmpLTEF32O => o.set32(2, (o.f32(0) <= o.f32(1)) as u32),
    CmpLTEF32U => o.set32(2, (unordered32(o.f32(0), o.f32(1)) || o.f32(0) <= o.f32(1)) as u32),
    CmpNaNF32 => o.set32(1, o.f32(0).is_nan() as u32),
    AddF64 => o.set64(2, o.f64(0) + o.f64(1)),
    SubF64 => o.set64(2, o.f64(0) - o.f64(1)),
    MulF64 => o.set64(2, o.f64(0) * o.f64(1)),
    DivF64 => o.set64(2, o.f64(0) / o.f64(1)),
    FMAF64 => o.set64(3, o.f64(0) * o.f64(1) + o.f64(2)),
    AbsF64 => o.set64(1, o.f64(0).abs()),
    NegF64 => o.set64(1, -o.f64(0)),
    MinF64 => o.set64(2, if o.f64(1) < o.f64(0) { o.f64(1) } else { o.f64(0) }),
    MaxF64 => o.set64(2, if o.f64(0) < o.f64(1) { o.f64(1) } else { o.f64(0) }),
    TruncF64F32 => o.set32(1, o.f64(0) as f32),
    ExtF32F64 => o.set64(1, o.f32(0) as f64),
    CastSI32F64 => o.set64(1, o.i32(0) as f64),
    CastUI32F64 => o.set64(1, o.u32(0) as f64),
    CastSI64F64 => o.set64(1, o.i64(0) as f64),
    CastUI64F64 => o.set64(1, o.i64(0) as u64 as f64),
    BitcastI64F64 | BitcastF64I64 => o.set64(1, o.i64(0)),
    CmpEQF64O => o.set32(2, (o.f64(0) == o.f64(1)) as u32),
    CmpEQF64U => o.set32(2, (unordered64(o.f64(0), o.f64(1)) || o.f64(0) == o.f64(1)) as u32),
    CmpNEF64O => o.set32(2, (o.f64(0) != o.f64(1)) as u32),
    CmpNEF64U => o.set32(2, (o.f64(0) != o.f64(1)) as u32),
    CmpLTF64O => o.set32(2, (o.f64(0) < o.f64(1)) as u32),
    CmpLTF64U => o.set32(2, (unordered64(o.f64(0), o.f64(1)) || o.f64(0) < o.f64(1)) as u32),
    CmpLTEF64O => o.set32(2, (o.f64(0) <= o.f64(1)) as u32),
    CmpLTEF64U => o.set32(2, (unordered64(o.f64(0), o.f64(1)) || o.f64(0) <= o.f64(1)) as u32),
    CmpNaNF64 => o.set32(1, o.f64(0).is_nan() as u32),
}

/// The handler for compare `op` followed by a `cond_br` on its result (that is not a branch
/// target), taking operand `forward` from the previous instruction: one step for both, for
/// compares that end loops. `None` for other instructions.
pub(crate) fn compare_and_branch(op: Op, forward: Option<u8>) -> Option<Handler> {
    macro_rules! f {
        ($compare:ident, $result:expr) => {{
            fn run<const F: usize>(
                inst: &Inst,
                regs: Registers<'_>,
                function: &Function,
                budget: u32,
                last: u64,
            ) -> usize {
                let mut o = Operands::<F>::new(inst, regs, last);
                let taken = int_compare(Op::$compare, &o);
                o.set32($result, taken as u32);
                let cond_br = Code::of(function).after(inst);
                branch(cond_br, if taken { 0 } else { 1 }, o.regs, function, budget)
            }
            Some(specialize!(run, forward))
        }};
    }
    match op {
        Op::CmpEQI32 => f!(CmpEQI32, 2),
        Op::CmpNEI32 => f!(CmpNEI32, 2),
        Op::CmpLTI32S => f!(CmpLTI32S, 2),
        Op::CmpLTI32U => f!(CmpLTI32U, 2),
        Op::CmpNZI32 => f!(CmpNZI32, 1),
        Op::CmpEQI64 => f!(CmpEQI64, 2),
        Op::CmpNEI64 => f!(CmpNEI64, 2),
        Op::CmpLTI64S => f!(CmpLTI64S, 2),
        Op::CmpLTI64U => f!(CmpLTI64U, 2),
        Op::CmpNZI64 => f!(CmpNZI64, 1),
        _ => None,
    }
}

/// The integer compares that [`compare_and_branch`] fuses, evaluated once for both tables
/// (`op` is a constant at every call, so the `match` folds away).
#[inline(always)]
fn int_compare<const F: usize>(op: Op, o: &Operands<'_, '_, F>) -> bool {
    match op {
        Op::CmpEQI32 => o.u32(0) == o.u32(1),
        Op::CmpNEI32 => o.u32(0) != o.u32(1),
        Op::CmpLTI32S => o.i32(0) < o.i32(1),
        Op::CmpLTI32U => o.u32(0) < o.u32(1),
        Op::CmpNZI32 => o.u32(0) != 0,
        Op::CmpEQI64 => o.i64(0) == o.i64(1),
        Op::CmpNEI64 => o.i64(0) != o.i64(1),
        Op::CmpLTI64S => o.i64(0) < o.i64(1),
        Op::CmpLTI64U => (o.i64(0) as u64) < (o.i64(1) as u64),
        Op::CmpNZI64 => o.i64(0) != 0,
        _ => unreachable!("{op:?} is not an integer compare"),
    }
}

/// Takes successor `index` of `inst`, which moves only i32-bank block arguments (the compiler
/// gives branches that move refs the [`slow`] handler).
#[inline(always)]
fn branch(inst: &Inst, index: usize, mut regs: Registers<'_>, function: &Function, budget: u32) -> usize {
    let Branch { target, moves, .. } = &function.branches[inst.extra as usize + index];
    move_block_arguments(moves, &mut regs);
    jump(*target as usize, regs, function, budget)
}

/// Applies a branch's i32-bank moves in order, as IREE does (see [`WIDE_MOVE`]).
#[inline(always)]
pub(super) fn move_block_arguments(moves: &[(u16, u16)], regs: &mut Registers<'_>) {
    for &(from, to) in moves {
        let (from, target) = (from as usize, (to & !WIDE_MOVE) as usize);
        if to & WIDE_MOVE == 0 {
            regs.set(target, regs.get(from));
        } else {
            regs.set64(target, regs.get64(from));
        }
    }
}

fn unordered32(a: f32, b: f32) -> bool {
    a.is_nan() || b.is_nan()
}

fn unordered64(a: f64, b: f64) -> bool {
    a.is_nan() || b.is_nan()
}
