//! Hand-built SPIR-V (rspirv's builder) for shapes the fixtures may not reach: phis that swap,
//! loops left early, switches, signed arithmetic; each kernel runs on OpenCL and its results are
//! checked against the same computation in Rust.

mod common;

use common::shader::{emit, reference, Shader, Step, OPS};
use common::OpenCl;
use halo_hal::StatusCode;
use halo_spirv_opencl::{translate, Options};
use rspirv::dr::Operand;
use rspirv::spirv::{Capability, GroupOperation, LoopControl, SelectionControl};

fn run(opencl: &OpenCl, words: &[u32], buffers: Vec<Vec<u32>>, workgroups: usize) -> Vec<Vec<u32>> {
    opencl.run_words(words, &opencl.options(), buffers, workgroups)
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

/// Subgroup operations, with subgroups of 4 in workgroups of 8, emulated in workgroup memory or
/// as built-ins where the device has them (Intel's CPU runtime): out[4n..4n+4] = reduce-add,
/// inclusive scan, exclusive scan and xor-1 shuffle of in[n].
#[test]
fn subgroup_reductions_scans_and_shuffles() {
    let Some(opencl) = OpenCl::first("subgroup_reductions_scans_and_shuffles") else {
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
    let options = opencl.options_for_subgroups(4);
    let input: Vec<u32> = (0..16).map(|i| i * i + 1).collect();
    let out = opencl
        .run_words(&words, &options, vec![input.clone(), vec![0; 64]], 2)
        .remove(1);
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
