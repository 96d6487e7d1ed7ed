//! Hand-built SPIR-V (rspirv's builder) for shapes the fixtures may not reach: phis that swap,
//! loops left early, switches, signed arithmetic; each kernel runs on OpenCL and its results are
//! checked against the same computation in Rust.

mod common;

use common::OpenCl;
use halo_hal::StatusCode;
use halo_spirv_opencl::{translate, Options};
use rspirv::binary::Assemble;
use rspirv::dr::{Builder, Operand};
use rspirv::spirv::{
    AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel, FunctionControl, GroupOperation,
    LoopControl, MemoryModel, SelectionControl, StorageClass, Word,
};

/// A compute shader of one invocation per element: `buffers` storage buffers of `uint`s at
/// set 0, bindings 0.., and the invocation's global x id loaded in the entry block.
struct Shader {
    b: Builder,
    uint: Word,
    int: Word,
    boolean: Word,
    element_pointer: Word,
    buffers: Vec<Word>,
    function: Word,
    gid: Word,
    /// The global x id of the invocation.
    x: Word,
}

impl Shader {
    fn new(buffers: u32) -> Shader {
        let mut b = Builder::new();
        b.set_version(1, 3);
        b.capability(Capability::Shader);
        b.memory_model(AddressingModel::Logical, MemoryModel::GLSL450);
        let void = b.type_void();
        let uint = b.type_int(32, 0);
        let int = b.type_int(32, 1);
        let boolean = b.type_bool();
        let v3uint = b.type_vector(uint, 3);
        let input = b.type_pointer(None, StorageClass::Input, v3uint);
        let gid = b.variable(input, None, StorageClass::Input, None);
        b.decorate(
            gid,
            Decoration::BuiltIn,
            [Operand::BuiltIn(BuiltIn::GlobalInvocationId)],
        );
        let array = b.type_runtime_array(uint);
        b.decorate(array, Decoration::ArrayStride, [Operand::LiteralBit32(4)]);
        let block = b.type_struct([array]);
        b.member_decorate(block, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
        b.decorate(block, Decoration::Block, []);
        let block_pointer = b.type_pointer(None, StorageClass::StorageBuffer, block);
        let element_pointer = b.type_pointer(None, StorageClass::StorageBuffer, uint);
        let buffers = (0..buffers)
            .map(|binding| {
                let variable = b.variable(block_pointer, None, StorageClass::StorageBuffer, None);
                b.decorate(variable, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
                b.decorate(variable, Decoration::Binding, [Operand::LiteralBit32(binding)]);
                variable
            })
            .collect();
        let function_type = b.type_function(void, []);
        let function = b
            .begin_function(void, None, FunctionControl::NONE, function_type)
            .unwrap();
        b.begin_block(None).unwrap();
        let id = b.load(v3uint, None, gid, None, []).unwrap();
        let x = b.composite_extract(uint, None, id, [0]).unwrap();
        Shader {
            b,
            uint,
            int,
            boolean,
            element_pointer,
            buffers,
            function,
            gid,
            x,
        }
    }

    fn constant(&mut self, value: u32) -> Word {
        self.b.constant_bit32(self.uint, value)
    }

    /// A pointer to element `index` of buffer `buffer`.
    fn element(&mut self, buffer: usize, index: Word) -> Word {
        let zero = self.constant(0);
        self.b
            .access_chain(self.element_pointer, None, self.buffers[buffer], [zero, index])
            .unwrap()
    }

    fn finish(self) -> Vec<u32> {
        self.finish_with_workgroup(1)
    }

    /// The module, with workgroups of `invocations` along x.
    fn finish_with_workgroup(mut self, invocations: u32) -> Vec<u32> {
        self.b.ret().unwrap();
        self.b.end_function().unwrap();
        self.b
            .entry_point(ExecutionModel::GLCompute, self.function, "main", [self.gid]);
        self.b
            .execution_mode(self.function, ExecutionMode::LocalSize, [invocations, 1, 1]);
        self.b.module().assemble()
    }
}

fn run(opencl: &OpenCl, words: &[u32], buffers: Vec<Vec<u32>>, workgroups: usize) -> Vec<Vec<u32>> {
    run_with(opencl, words, &opencl.options(), buffers, workgroups)
}

fn run_with(
    opencl: &OpenCl,
    words: &[u32],
    options: &Options,
    mut buffers: Vec<Vec<u32>>,
    workgroups: usize,
) -> Vec<Vec<u32>> {
    let translation = translate(words, options).unwrap();
    let mut bytes: Vec<Vec<u8>> = buffers
        .iter()
        .map(|b| b.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    opencl.run(&translation, 0, &mut bytes, &[], [workgroups, 1, 1]);
    for (buffer, bytes) in buffers.iter_mut().zip(bytes) {
        *buffer = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect();
    }
    buffers
}

/// out[n] = after n turns of a loop whose phis swap (x, y) = (y, x), 100x + y; the loop is left
/// early, with 777, on its turn 7.
#[test]
fn phis_that_swap_and_a_loop_left_early() {
    let Some(opencl) = OpenCl::first("phis_that_swap_and_a_loop_left_early") else {
        return;
    };
    let mut s = Shader::new(1);
    let (entry, header, body, next, merge) = (s.b.selected_block().unwrap(), s.b.id(), s.b.id(), s.b.id(), s.b.id());
    let entry = s.b.module_ref().functions[0].blocks[entry]
        .label
        .as_ref()
        .unwrap()
        .result_id
        .unwrap();
    let (three, five, zero, one, seven, hundred, early) = (
        s.constant(3),
        s.constant(5),
        s.constant(0),
        s.constant(1),
        s.constant(7),
        s.constant(100),
        s.constant(777),
    );
    let n = s.x;
    s.b.branch(header).unwrap();
    s.b.begin_block(Some(header)).unwrap();
    let (x, y, i, i_next) = (s.b.id(), s.b.id(), s.b.id(), s.b.id());
    s.b.phi(s.uint, Some(x), [(three, entry), (y, next)]).unwrap();
    s.b.phi(s.uint, Some(y), [(five, entry), (x, next)]).unwrap();
    s.b.phi(s.uint, Some(i), [(zero, entry), (i_next, next)]).unwrap();
    let scaled = s.b.i_mul(s.uint, None, x, hundred).unwrap();
    let value = s.b.i_add(s.uint, None, scaled, y).unwrap();
    let more = s.b.u_less_than(s.boolean, None, i, n).unwrap();
    s.b.loop_merge(merge, next, LoopControl::NONE, []).unwrap();
    s.b.branch_conditional(more, body, merge, []).unwrap();
    s.b.begin_block(Some(body)).unwrap();
    let seventh = s.b.i_equal(s.boolean, None, i, seven).unwrap();
    s.b.branch_conditional(seventh, merge, next, []).unwrap();
    s.b.begin_block(Some(next)).unwrap();
    s.b.i_add(s.uint, Some(i_next), i, one).unwrap();
    s.b.branch(header).unwrap();
    s.b.begin_block(Some(merge)).unwrap();
    let result = s.b.phi(s.uint, None, [(value, header), (early, body)]).unwrap();
    let out = s.element(0, n);
    s.b.store(out, result, None, []).unwrap();
    let out = run(&opencl, &s.finish(), vec![vec![0; 16]], 16).remove(0);
    let expected: Vec<u32> = (0..16)
        .map(|n| {
            if n > 7 {
                777
            } else if n % 2 == 0 {
                305
            } else {
                503
            }
        })
        .collect();
    assert_eq!(out, expected);
}

/// out[n] = match n % 4 { 0 => 10, 1 => 20, 3 => 40, _ => 99 }, through OpSwitch and a phi.
#[test]
fn a_switch_with_a_default_joins_in_a_phi() {
    let Some(opencl) = OpenCl::first("a_switch_with_a_default_joins_in_a_phi") else {
        return;
    };
    let mut s = Shader::new(1);
    let four = s.constant(4);
    let values = [10, 20, 40, 99].map(|v| s.constant(v));
    let selector = s.b.u_mod(s.uint, None, s.x, four).unwrap();
    let (case0, case1, case3, default, merge) = (s.b.id(), s.b.id(), s.b.id(), s.b.id(), s.b.id());
    s.b.selection_merge(merge, SelectionControl::NONE).unwrap();
    s.b.switch(
        selector,
        default,
        [
            (Operand::LiteralBit32(0), case0),
            (Operand::LiteralBit32(1), case1),
            (Operand::LiteralBit32(3), case3),
        ],
    )
    .unwrap();
    for label in [case0, case1, case3, default] {
        s.b.begin_block(Some(label)).unwrap();
        s.b.branch(merge).unwrap();
    }
    s.b.begin_block(Some(merge)).unwrap();
    let result =
        s.b.phi(
            s.uint,
            None,
            [
                (values[0], case0),
                (values[1], case1),
                (values[2], case3),
                (values[3], default),
            ],
        )
        .unwrap();
    let out = s.element(0, s.x);
    s.b.store(out, result, None, []).unwrap();
    let out = run(&opencl, &s.finish(), vec![vec![0; 12]], 12).remove(0);
    let expected: Vec<u32> = (0..12).map(|n| [10, 20, 99, 40][n % 4]).collect();
    assert_eq!(out, expected);
}

/// SDiv, SRem and SMod (the sign of the divisor), arithmetic shift right and signed compare on
/// negative numbers: out[3n..3n+3] from a[n], b[n].
#[test]
fn signed_division_remainders_and_shifts_of_negative_numbers() {
    let Some(opencl) = OpenCl::first("signed_division_remainders_and_shifts_of_negative_numbers") else {
        return;
    };
    let mut s = Shader::new(3);
    let x = s.x;
    let (a_at, b_at) = (s.element(0, x), s.element(1, x));
    let a = s.b.load(s.uint, None, a_at, None, []).unwrap();
    let b = s.b.load(s.uint, None, b_at, None, []).unwrap();
    let quotient = s.b.s_div(s.int, None, a, b).unwrap();
    let remainder = s.b.s_rem(s.int, None, a, b).unwrap();
    let modulo = s.b.s_mod(s.int, None, a, b).unwrap();
    let three = s.constant(3);
    let shifted = s.b.shift_right_arithmetic(s.uint, None, a, three).unwrap();
    let less = s.b.s_less_than(s.boolean, None, a, b).unwrap();
    let (one, zero) = (s.constant(1), s.constant(0));
    let flag = s.b.select(s.uint, None, less, one, zero).unwrap();
    let mixed = s.b.bitwise_xor(s.uint, None, shifted, flag).unwrap();
    let results = [quotient, remainder, modulo, mixed];
    let four = s.constant(4);
    let base = s.b.i_mul(s.uint, None, x, four).unwrap();
    for (k, value) in results.into_iter().enumerate() {
        let offset = s.constant(k as u32);
        let at = s.b.i_add(s.uint, None, base, offset).unwrap();
        let out = s.element(2, at);
        let value = s.b.bitcast(s.uint, None, value).unwrap();
        s.b.store(out, value, None, []).unwrap();
    }
    let a: Vec<i32> = vec![7, -7, 7, -7, -100, 100, i32::MIN + 1, -1];
    let b: Vec<i32> = vec![3, 3, -3, -3, 7, -7, 2, 5];
    let buffers = vec![
        a.iter().map(|v| *v as u32).collect(),
        b.iter().map(|v| *v as u32).collect(),
        vec![0; 4 * a.len()],
    ];
    let out = run(&opencl, &s.finish(), buffers, a.len()).remove(2);
    for (n, (x, y)) in a.iter().zip(&b).enumerate() {
        let modulo = ((x % y) + y) % y;
        let mixed = ((x >> 3) as u32) ^ u32::from(x < y);
        let expected = [(x / y) as u32, (x % y) as u32, modulo as u32, mixed];
        assert_eq!(out[4 * n..4 * n + 4], expected, "a={x} b={y}");
    }
}

/// Composite constants that nest a part twice at each level would be written in 2^levels bytes:
/// refused past a size instead of exhausting memory.
#[test]
fn nested_composite_constants_are_refused_past_a_size() {
    let mut s = Shader::new(1);
    let mut constant = s.constant(1);
    let mut ty = s.uint;
    for _ in 0..40 {
        ty = s.b.type_struct([ty, ty]);
        constant = s.b.constant_composite(ty, [constant, constant]);
    }
    let error = translate(&s.finish(), &Options::default()).unwrap_err();
    assert_eq!(error.code(), StatusCode::ResourceExhausted, "{error}");
    assert!(error.message().contains("composite constant"), "{error}");
}

/// Subgroup operations emulated in workgroup memory, with subgroups of 4 in workgroups of 8:
/// out[4n..4n+4] = reduce-add, inclusive scan, exclusive scan and xor-1 shuffle of in[n].
#[test]
fn emulated_subgroup_reductions_scans_and_shuffles() {
    let Some(opencl) = OpenCl::first("emulated_subgroup_reductions_scans_and_shuffles") else {
        return;
    };
    let mut s = Shader::new(2);
    s.b.capability(Capability::GroupNonUniform);
    s.b.capability(Capability::GroupNonUniformArithmetic);
    s.b.capability(Capability::GroupNonUniformShuffle);
    let x = s.x;
    let input = s.element(0, x);
    let value = s.b.load(s.uint, None, input, None, []).unwrap();
    let (scope, one) = (s.constant(3), s.constant(1));
    let results = [
        s.b.group_non_uniform_i_add(s.uint, None, scope, GroupOperation::Reduce, value, None),
        s.b.group_non_uniform_i_add(s.uint, None, scope, GroupOperation::InclusiveScan, value, None),
        s.b.group_non_uniform_i_add(s.uint, None, scope, GroupOperation::ExclusiveScan, value, None),
        s.b.group_non_uniform_shuffle_xor(s.uint, None, scope, value, one),
    ];
    let four = s.constant(4);
    let base = s.b.i_mul(s.uint, None, x, four).unwrap();
    for (k, result) in results.into_iter().enumerate() {
        let offset = s.constant(k as u32);
        let at = s.b.i_add(s.uint, None, base, offset).unwrap();
        let out = s.element(1, at);
        s.b.store(out, result.unwrap(), None, []).unwrap();
    }
    let words = s.finish_with_workgroup(8);
    let options = Options {
        subgroup_size: 4,
        ..opencl.options()
    };
    let input: Vec<u32> = (0..16).map(|i| i * i + 1).collect();
    let out = run_with(&opencl, &words, &options, vec![input.clone(), vec![0; 64]], 2).remove(1);
    for (n, chunk) in out.chunks(4).enumerate() {
        let group = &input[n / 4 * 4..n / 4 * 4 + 4];
        let lane = n % 4;
        let expected = [
            group.iter().sum::<u32>(),
            group[..=lane].iter().sum(),
            group[..lane].iter().sum(),
            group[lane ^ 1],
        ];
        assert_eq!(chunk, expected, "invocation {n}");
    }
    let error = translate(&words, &Options::default()).unwrap_err();
    assert_eq!(error.code(), StatusCode::Unimplemented, "{error}");
    assert!(error.message().contains("subgroup size"), "{error}");
}

/// Vectors of booleans (held as `int` lanes of -1 and 0): IsNan and an ordered compare on a
/// float4, LogicalOr, Select on the vector, Any, and a boolean vector built from scalars.
/// out[5n..5n+5] = lanes of select(isnan(a) || a < 0, 0, a) chosen again by (true, false, true,
/// false), then any(a < 0).
#[test]
fn vectors_of_booleans_choose_lanes() {
    let Some(opencl) = OpenCl::first("vectors_of_booleans_choose_lanes") else {
        return;
    };
    let mut s = Shader::new(2);
    let float = s.b.type_float(32, None);
    let float4 = s.b.type_vector(float, 4);
    let bool4 = s.b.type_vector(s.boolean, 4);
    let four = s.constant(4);
    let base = s.b.i_mul(s.uint, None, s.x, four).unwrap();
    let mut lanes = Vec::new();
    for k in 0..4 {
        let offset = s.constant(k);
        let at = s.b.i_add(s.uint, None, base, offset).unwrap();
        let pointer = s.element(0, at);
        let bits = s.b.load(s.uint, None, pointer, None, []).unwrap();
        lanes.push(s.b.bitcast(float, None, bits).unwrap());
    }
    let a = s.b.composite_construct(float4, None, lanes).unwrap();
    let zero = s.b.constant_bit32(float, 0);
    let zero4 = s.b.constant_composite(float4, [zero, zero, zero, zero]);
    let nan = s.b.is_nan(bool4, None, a).unwrap();
    let negative = s.b.f_ord_less_than(bool4, None, a, zero4).unwrap();
    let either = s.b.logical_or(bool4, None, nan, negative).unwrap();
    let cleaned = s.b.select(float4, None, either, zero4, a).unwrap();
    let (yes, no) = (s.b.constant_true(s.boolean), s.b.constant_false(s.boolean));
    let pattern = s.b.composite_construct(bool4, None, [yes, no, yes, no]).unwrap();
    let chosen = s.b.select(float4, None, pattern, cleaned, a).unwrap();
    let any = s.b.any(s.boolean, None, negative).unwrap();
    let (one, zero_u) = (s.constant(1), s.constant(0));
    let any = s.b.select(s.uint, None, any, one, zero_u).unwrap();
    let five = s.constant(5);
    let out_base = s.b.i_mul(s.uint, None, s.x, five).unwrap();
    for k in 0..5u32 {
        let value = if k < 4 {
            let lane = s.b.composite_extract(float, None, chosen, [k]).unwrap();
            s.b.bitcast(s.uint, None, lane).unwrap()
        } else {
            any
        };
        let offset = s.constant(k);
        let at = s.b.i_add(s.uint, None, out_base, offset).unwrap();
        let pointer = s.element(1, at);
        s.b.store(pointer, value, None, []).unwrap();
    }
    let input = [
        1.5f32,
        -2.0,
        f32::NAN,
        3.0,
        -0.5,
        f32::NAN,
        7.0,
        -8.0,
        0.0,
        1.0,
        2.0,
        3.0,
    ];
    let bits: Vec<u32> = input.iter().map(|f| f.to_bits()).collect();
    let out = run(&opencl, &s.finish(), vec![bits, vec![0; 15]], 3).remove(1);
    for (n, group) in input.chunks(4).enumerate() {
        let lanes: Vec<u32> = (0..4)
            .map(|k| {
                let cleaned = if group[k].is_nan() || group[k] < 0.0 {
                    0.0
                } else {
                    group[k]
                };
                if k % 2 == 0 { cleaned } else { group[k] }.to_bits()
            })
            .collect();
        let any = u32::from(group.iter().any(|v| *v < 0.0));
        assert_eq!(out[5 * n..5 * n + 4], lanes[..], "group {n}: {group:?}");
        assert_eq!(out[5 * n + 4], any, "group {n}: {group:?}");
    }
}

/// One operation of a generated program: `op(register a, register b)` appended as a register.
#[derive(Debug, Clone, Copy)]
struct Step {
    op: u8,
    a: usize,
    b: usize,
}

/// The operations a generated program draws from.
const OPS: u8 = 16;

/// What `Step` computes on `width`-bit values held in u64s, as SPIR-V defines it.
fn reference(op: u8, x: u64, y: u64, width: u32) -> u64 {
    let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
    let signed = |v: u64| ((v << (64 - width)) as i64) >> (64 - width);
    let shift = (y & u64::from(width - 1)) as u32;
    let divisor = (y & !1) | 2;
    let result = match op {
        0 => x.wrapping_add(y),
        1 => x.wrapping_sub(y),
        2 => x.wrapping_mul(y),
        3 => x & y,
        4 => x | y,
        5 => x ^ y,
        6 => x << shift,
        7 => (x & mask) >> shift,
        8 => (signed(x) >> shift) as u64,
        9 => (x & mask) / (divisor & mask),
        10 => (x & mask) % (divisor & mask),
        11 => (signed(x) / signed(divisor)) as u64,
        12 => (signed(x) % signed(divisor)) as u64,
        13 => {
            let r = signed(x) % signed(divisor);
            (if r != 0 && (r < 0) != (signed(divisor) < 0) {
                r + signed(divisor)
            } else {
                r
            }) as u64
        }
        14 => {
            if signed(x) < signed(y) {
                x
            } else {
                y
            }
        }
        _ => {
            if (x & mask) < (y & mask) {
                x
            } else {
                y
            }
        }
    };
    result & mask
}

/// Appends `step` to the shader's registers, in SPIR-V.
fn emit(s: &mut Shader, ty: Word, width: u32, registers: &[Word], step: Step) -> Word {
    let (x, y) = (registers[step.a], registers[step.b]);
    let constant = |s: &mut Shader, value: u64| s.b.constant_bit32(ty, value as u32);
    match step.op {
        0 => s.b.i_add(ty, None, x, y),
        1 => s.b.i_sub(ty, None, x, y),
        2 => s.b.i_mul(ty, None, x, y),
        3 => s.b.bitwise_and(ty, None, x, y),
        4 => s.b.bitwise_or(ty, None, x, y),
        5 => s.b.bitwise_xor(ty, None, x, y),
        6..=8 => {
            let mask = constant(s, u64::from(width - 1));
            let shift = s.b.bitwise_and(ty, None, y, mask).unwrap();
            match step.op {
                6 => s.b.shift_left_logical(ty, None, x, shift),
                7 => s.b.shift_right_logical(ty, None, x, shift),
                _ => s.b.shift_right_arithmetic(ty, None, x, shift),
            }
        }
        9..=13 => {
            let (not_one, two) = (constant(s, !1u64 & ((1u64 << width) - 1)), constant(s, 2));
            let even = s.b.bitwise_and(ty, None, y, not_one).unwrap();
            let divisor = s.b.bitwise_or(ty, None, even, two).unwrap();
            match step.op {
                9 => s.b.u_div(ty, None, x, divisor),
                10 => s.b.u_mod(ty, None, x, divisor),
                11 => s.b.s_div(ty, None, x, divisor),
                12 => s.b.s_rem(ty, None, x, divisor),
                _ => s.b.s_mod(ty, None, x, divisor),
            }
        }
        14 => {
            let less = s.b.s_less_than(s.boolean, None, x, y).unwrap();
            s.b.select(ty, None, less, x, y)
        }
        _ => {
            let less = s.b.u_less_than(s.boolean, None, x, y).unwrap();
            s.b.select(ty, None, less, x, y)
        }
    }
    .unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Generated straight-line integer programs on 8-, 16- and 32-bit values compute on OpenCL
    /// what SPIR-V defines (checked against the same steps in Rust): wrapping arithmetic,
    /// shifts, signed and unsigned division and remainders, and compare-and-select.
    #[test]
    fn generated_integer_programs_compute_what_spirv_defines(
        width in proptest::sample::select(vec![8u32, 16, 32]),
        steps in proptest::collection::vec((0..OPS, 0usize..64, 0usize..64), 1..12),
        inputs in proptest::collection::vec(proptest::num::u32::ANY, 32),
    ) {
        let Some(opencl) = OpenCl::first("generated_integer_programs_compute_what_spirv_defines") else {
            return Ok(());
        };
        let mut s = Shader::new(2);
        match width {
            8 => { s.b.capability(Capability::Int8); s.b.capability(Capability::StorageBuffer8BitAccess); }
            16 => { s.b.capability(Capability::Int16); s.b.capability(Capability::StorageBuffer16BitAccess); }
            _ => {}
        }
        let ty = if width == 32 { s.uint } else { s.b.type_int(width, 0) };
        let four = s.constant(4);
        let base = s.b.i_mul(s.uint, None, s.x, four).unwrap();
        let mut registers = Vec::new();
        for k in 0..4 {
            let offset = s.constant(k);
            let at = s.b.i_add(s.uint, None, base, offset).unwrap();
            let pointer = s.element(0, at);
            let value = s.b.load(s.uint, None, pointer, None, []).unwrap();
            registers.push(if width == 32 { value } else { s.b.u_convert(ty, None, value).unwrap() });
        }
        let steps: Vec<Step> = steps
            .iter()
            .enumerate()
            .map(|(n, &(op, a, b))| Step { op, a: a % (4 + n), b: b % (4 + n) })
            .collect();
        for &step in &steps {
            let value = emit(&mut s, ty, width, &registers, step);
            registers.push(value);
        }
        let last = *registers.last().unwrap();
        let result = if width == 32 { last } else { s.b.u_convert(s.uint, None, last).unwrap() };
        let out = s.element(1, s.x);
        s.b.store(out, result, None, []).unwrap();
        let got = run(&opencl, &s.finish(), vec![inputs.clone(), vec![0; 8]], 8).remove(1);
        let mask = (1u64 << width) - 1;
        for n in 0..8 {
            let mut values: Vec<u64> = inputs[4 * n..4 * n + 4].iter().map(|v| u64::from(*v) & mask).collect();
            for step in &steps {
                values.push(reference(step.op, values[step.a], values[step.b], width));
            }
            proptest::prop_assert_eq!(u64::from(got[n]), *values.last().unwrap(), "invocation {}: {:?}", n, steps);
        }
    }
}
