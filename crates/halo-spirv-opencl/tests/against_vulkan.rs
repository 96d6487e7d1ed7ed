//! Differential tests: generated SPIR-V compute programs run on Vulkan (lavapipe in CI, through
//! halo's Vulkan driver) and, translated, on OpenCL (PoCL in CI); both must give the same bits.
//! Vulkan runs the SPIR-V as written, so it is the reference for what the translation means,
//! floating point included. Without either device the tests say by name that they skipped.

mod common;

use common::shader::{emit, Shader, Step, OPS};
use common::OpenCl;
use halo_hal::{
    BufferParams, BufferRef, CommandBufferMode, CommandCategory, Device, DispatchCommand, DriverRegistry,
    ExecutableParams, Fence, QueueAffinity, Timeout, WorkgroupCount, WHOLE_BUFFER,
};
use halo_spirv_fb::{encode, BindingSlot, SpirvExecutable, SpirvExport};
use rspirv::dr::Operand;
use rspirv::spirv::{Capability, LoopControl, Word};
use std::sync::Arc;
use std::time::Duration;

/// The first Vulkan device, or `None` (printing that `test` skipped).
fn vulkan(test: &str) -> Option<Arc<dyn Device>> {
    let mut registry = DriverRegistry::new();
    halo_vulkan::register_driver(&mut registry);
    match registry.create_device("vulkan://") {
        Ok(device) => Some(device),
        Err(error) => {
            println!("{test}: skipped: no Vulkan device ({error})");
            None
        }
    }
}

/// Runs `words`' entry point `main` on `device` over `workgroups` along x, one buffer of `u32`s
/// per binding of set 0, returning the buffers as they are afterwards.
fn run_on_vulkan(device: &Arc<dyn Device>, words: &[u32], buffers: &[Vec<u32>], workgroups: u32) -> Vec<Vec<u32>> {
    let executable = encode(&SpirvExecutable {
        modules: vec![words.to_vec()],
        exports: vec![SpirvExport {
            name: "main".into(),
            entry_point: "main".into(),
            module: 0,
            bindings: (0..buffers.len() as u32)
                .map(|binding| BindingSlot { set: 0, binding })
                .collect(),
            constant_count: 0,
            subgroup_size: 0,
        }],
    });
    let executable = device
        .create_executable_cache()
        .unwrap()
        .prepare_executable(&ExecutableParams {
            format: halo_spirv_fb::FORMAT,
            data: &executable,
            constants: &[],
        })
        .unwrap();
    let hal_buffers: Vec<_> = buffers
        .iter()
        .map(|values| {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let buffer = device
                .allocator()
                .allocate_buffer(BufferParams::host_mappable(), bytes.len() as u64)
                .unwrap();
            buffer.map_write(0, &bytes).unwrap();
            buffer
        })
        .collect();
    let command_buffer = device
        .create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, QueueAffinity::ANY, 0)
        .unwrap();
    command_buffer.begin().unwrap();
    command_buffer
        .dispatch(DispatchCommand {
            executable,
            export: 0,
            workgroup_count: WorkgroupCount::Static([workgroups, 1, 1]),
            constants: Vec::new(),
            bindings: hal_buffers
                .iter()
                .map(|b| BufferRef::direct(b, 0, WHOLE_BUFFER))
                .collect(),
        })
        .unwrap();
    command_buffer.end().unwrap();
    let done = Fence::at(device.create_semaphore(0).unwrap(), 1);
    device
        .queue_execute(QueueAffinity::ANY, &Fence::new(), &done, Some(&command_buffer), &[])
        .unwrap();
    done.wait(Timeout::from(Duration::from_secs(60))).unwrap();
    hal_buffers
        .iter()
        .map(|b| {
            let bytes = b.read_all().unwrap();
            bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                .collect()
        })
        .collect()
}

/// What the generated programs compute on.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Unsigned integers of this many bits (8, 16, 32).
    Integer(u32),
    /// 32-bit floats.
    Float,
}

/// The float operations a generated program draws from.
const FLOAT_OPS: u8 = 9;

/// Appends a float `step`, then scales a result above 2^20 in magnitude down by 2^-40 (exactly)
/// and flushes one below 1e-30 to zero, so that no program makes an infinity, a NaN or a
/// denormal. Without the `SignedZeroInfNanPreserve` and `DenormPreserve` modes (which
/// `iree-compile` does not emit) Vulkan lets a device treat those loosely (lavapipe flushes
/// denormals and folds `x * 0` to `0`), while OpenCL C keeps them, so programs that made them
/// could differ by what both specifications allow. For the same reason zeros compare equal
/// whatever their sign, and division is by `|y| + 1`.
fn emit_float(s: &mut Shader, float: Word, glsl: Word, registers: &[Word], step: Step) -> Word {
    let (x, y) = (registers[step.a], registers[step.b]);
    let ext = |s: &mut Shader, number: u32, operands: &[Word]| {
        let operands: Vec<Operand> = operands.iter().map(|id| Operand::IdRef(*id)).collect();
        s.b.ext_inst(float, None, glsl, number, operands).unwrap()
    };
    let constant = |s: &mut Shader, value: f32| s.b.constant_bit32(float, value.to_bits());
    let value = match step.op {
        0 => s.b.f_add(float, None, x, y).unwrap(),
        1 => s.b.f_sub(float, None, x, y).unwrap(),
        2 => s.b.f_mul(float, None, x, y).unwrap(),
        3 => {
            let magnitude = ext(s, 4, &[y]); // FAbs
            let one = constant(s, 1.0);
            let divisor = s.b.f_add(float, None, magnitude, one).unwrap();
            s.b.f_div(float, None, x, divisor).unwrap()
        }
        4 => s.b.f_negate(float, None, x).unwrap(),
        5 => ext(s, 8, &[x]), // Floor
        6 => {
            let magnitude = ext(s, 4, &[x]);
            ext(s, 31, &[magnitude]) // Sqrt
        }
        7 => {
            let less = s.b.f_ord_less_than(s.boolean, None, x, y).unwrap();
            s.b.select(float, None, less, x, y).unwrap()
        }
        _ => {
            let whole = ext(s, 3, &[x]); // Trunc
            let int = s.b.convert_f_to_s(s.int, None, whole).unwrap();
            s.b.convert_s_to_f(float, None, int).unwrap()
        }
    };
    let magnitude = ext(s, 4, &[value]);
    let (limit, scale) = (constant(s, 1_048_576.0), constant(s, 2f32.powi(-40)));
    let big = s.b.f_ord_greater_than(s.boolean, None, magnitude, limit).unwrap();
    let scaled = s.b.f_mul(float, None, value, scale).unwrap();
    let value = s.b.select(float, None, big, scaled, value).unwrap();
    let magnitude = ext(s, 4, &[value]);
    let (tiny, zero) = (constant(s, 1.0e-30), constant(s, 0.0));
    let is_tiny = s.b.f_ord_less_than(s.boolean, None, magnitude, tiny).unwrap();
    s.b.select(float, None, is_tiny, zero, value).unwrap()
}

/// A program over 8 invocations: each loads its 4 inputs from buffer 0, runs `steps` on them
/// `inputs[1] & 3` times in a loop whose accumulator starts at input 0 and is each turn's last
/// result (a loop with phis, left at its header), and stores the accumulator to buffer 1.
fn generate(kind: Kind, steps: &[Step]) -> Vec<u32> {
    let mut s = Shader::new(2);
    let ty = match kind {
        Kind::Integer(8) => {
            s.b.capability(Capability::Int8);
            s.b.type_int(8, 0)
        }
        Kind::Integer(16) => {
            s.b.capability(Capability::Int16);
            s.b.type_int(16, 0)
        }
        Kind::Integer(_) => s.uint,
        Kind::Float => s.b.type_float(32, None),
    };
    let glsl = s.b.ext_inst_import("GLSL.std.450");
    let four = s.constant(4);
    let base = s.b.i_mul(s.uint, None, s.x, four).unwrap();
    let mut raw = Vec::new();
    for k in 0..4 {
        let offset = s.constant(k);
        let at = s.b.i_add(s.uint, None, base, offset).unwrap();
        let pointer = s.element(0, at);
        raw.push(s.b.load(s.uint, None, pointer, None, []).unwrap());
    }
    let inputs: Vec<Word> = raw
        .iter()
        .map(|&value| match kind {
            Kind::Integer(32) => value,
            Kind::Integer(_) => s.b.u_convert(ty, None, value).unwrap(),
            Kind::Float => s.b.bitcast(ty, None, value).unwrap(),
        })
        .collect();
    let three = s.constant(3);
    let turns = s.b.bitwise_and(s.uint, None, raw[1], three).unwrap();
    let zero = s.constant(0);
    let one = s.constant(1);
    let entry = s.entry;
    let (header, body, continuing, merge) = (s.b.id(), s.b.id(), s.b.id(), s.b.id());
    let (next_accumulator, next_turn) = (s.b.id(), s.b.id());
    s.b.branch(header).unwrap();
    s.b.begin_block(Some(header)).unwrap();
    let accumulator =
        s.b.phi(ty, None, [(inputs[0], entry), (next_accumulator, continuing)])
            .unwrap();
    let turn = s.b.phi(s.uint, None, [(zero, entry), (next_turn, continuing)]).unwrap();
    let more = s.b.u_less_than(s.boolean, None, turn, turns).unwrap();
    s.b.loop_merge(merge, continuing, LoopControl::NONE, []).unwrap();
    s.b.branch_conditional(more, body, merge, []).unwrap();
    s.b.begin_block(Some(body)).unwrap();
    let mut registers = vec![accumulator, inputs[1], inputs[2], inputs[3]];
    for &step in steps {
        let value = match kind {
            Kind::Integer(width) => emit(&mut s, ty, width, &registers, step),
            Kind::Float => emit_float(&mut s, ty, glsl, &registers, step),
        };
        registers.push(value);
    }
    s.b.copy_object(ty, Some(next_accumulator), *registers.last().unwrap())
        .unwrap();
    s.b.branch(continuing).unwrap();
    s.b.begin_block(Some(continuing)).unwrap();
    s.b.i_add(s.uint, Some(next_turn), turn, one).unwrap();
    s.b.branch(header).unwrap();
    s.b.begin_block(Some(merge)).unwrap();
    let result = match kind {
        Kind::Integer(32) => accumulator,
        Kind::Integer(_) => s.b.u_convert(s.uint, None, accumulator).unwrap(),
        Kind::Float => s.b.bitcast(s.uint, None, accumulator).unwrap(),
    };
    let out = s.element(1, s.x);
    s.b.store(out, result, None, []).unwrap();
    s.finish_with_workgroup(4)
}

/// Inputs for float programs, as bits: mostly magnitudes up to 1000, some zeros of both signs
/// and ones. The conversion step needs no other bound: values stay below 2^20.
fn float_input() -> impl proptest::strategy::Strategy<Value = u32> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (-1.0e3f32..1.0e3f32).prop_map(f32::to_bits),
        1 => proptest::sample::select(vec![0.0f32, -0.0, 1.0, -1.0]).prop_map(f32::to_bits),
    ]
}

/// Two results agree when their bits do, or when both are zeros (see [`emit_float`]).
fn same(kind: Kind, a: u32, b: u32) -> bool {
    a == b || (matches!(kind, Kind::Float) && (a | b) & 0x7fff_ffff == 0)
}

fn check(test: &str, kind: Kind, steps: Vec<(u8, usize, usize)>, inputs: Vec<u32>) -> Result<(), String> {
    let (Some(opencl), Some(vulkan)) = (OpenCl::first(test), vulkan(test)) else {
        return Ok(());
    };
    let steps: Vec<Step> = steps
        .iter()
        .enumerate()
        .map(|(n, &(op, a, b))| Step {
            op,
            a: a % (4 + n),
            b: b % (4 + n),
        })
        .collect();
    let words = generate(kind, &steps);
    let buffers = vec![inputs, vec![0; 8]];
    let on_opencl = opencl
        .run_words(&words, &opencl.options(), buffers.clone(), 2)
        .remove(1);
    let on_vulkan = run_on_vulkan(&vulkan, &words, &buffers, 2).remove(1);
    for (n, (a, b)) in on_opencl.iter().zip(&on_vulkan).enumerate() {
        if !same(kind, *a, *b) {
            return Err(format!(
                "invocation {n}: OpenCL {a:#x}, Vulkan {b:#x}; {kind:?} {steps:?} inputs {:?}",
                &buffers[0][4 * n..4 * n + 4]
            ));
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]

    /// Integer programs (8-, 16- and 32-bit wrapping arithmetic, shifts, divisions and
    /// remainders, compare-and-select) in a loop give the same bits on OpenCL as on Vulkan.
    ///
    /// Except `OpSMod`, which becomes `OpSRem` here: lavapipe (Mesa 22.3, Debian 12) computes
    /// the remainder with the dividend's sign for it when the operands' signs differ, at every
    /// width (`SMod(2871, -17538)` gives 2871, not -14667 as SPIR-V defines). The translator's
    /// `OpSMod` is checked against SPIR-V's definition in `control_flow.rs` instead.
    #[test]
    fn generated_integer_programs_agree_with_vulkan(
        width in proptest::sample::select(vec![8u32, 16, 32]),
        steps in proptest::collection::vec((0..OPS, 0usize..64, 0usize..64), 1..10),
        inputs in proptest::collection::vec(proptest::num::u32::ANY, 32),
    ) {
        let steps = steps.into_iter().map(|(op, a, b)| (if op == 13 { 12 } else { op }, a, b)).collect();
        let outcome = check("generated_integer_programs_agree_with_vulkan", Kind::Integer(width), steps, inputs);
        proptest::prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }

    /// Float programs (add, subtract, multiply, divide, negate, floor, square root, select on a
    /// comparison, conversions to integers and back) in a loop give the same bits on OpenCL as on
    /// Vulkan, zeros of either sign aside.
    #[test]
    fn generated_float_programs_agree_with_vulkan(
        steps in proptest::collection::vec((0..FLOAT_OPS, 0usize..64, 0usize..64), 1..10),
        inputs in proptest::collection::vec(float_input(), 32),
    ) {
        let outcome = check("generated_float_programs_agree_with_vulkan", Kind::Float, steps, inputs);
        proptest::prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }
}
