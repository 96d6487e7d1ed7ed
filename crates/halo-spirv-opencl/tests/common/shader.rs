//! SPIR-V compute shaders built with rspirv's builder for the tests, and the straight-line
//! integer programs the property tests generate.

use rspirv::binary::Assemble;
use rspirv::dr::{Builder, Operand};
use rspirv::spirv::{
    AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel, FunctionControl, MemoryModel,
    StorageClass, Word,
};

/// A compute shader of one invocation per element: `buffers` storage buffers of `uint`s at
/// set 0, bindings 0.., and the invocation's global x id loaded in the entry block.
pub struct Shader {
    pub b: Builder,
    pub uint: Word,
    pub int: Word,
    pub boolean: Word,
    pub element_pointer: Word,
    pub buffers: Vec<Word>,
    pub function: Word,
    pub gid: Word,
    /// The global x id of the invocation.
    pub x: Word,
    /// The label of the entry block.
    pub entry: Word,
}

impl Shader {
    pub fn new(buffers: u32) -> Shader {
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
        let entry = b.begin_block(None).unwrap();
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
            entry,
        }
    }

    pub fn constant(&mut self, value: u32) -> Word {
        self.b.constant_bit32(self.uint, value)
    }

    /// A pointer to element `index` of buffer `buffer`.
    pub fn element(&mut self, buffer: usize, index: Word) -> Word {
        let zero = self.constant(0);
        self.b
            .access_chain(self.element_pointer, None, self.buffers[buffer], [zero, index])
            .unwrap()
    }

    pub fn finish(self) -> Vec<u32> {
        self.finish_with_workgroup(1)
    }

    /// The module, with workgroups of `invocations` along x.
    pub fn finish_with_workgroup(mut self, invocations: u32) -> Vec<u32> {
        self.b.ret().unwrap();
        self.b.end_function().unwrap();
        self.b
            .entry_point(ExecutionModel::GLCompute, self.function, "main", [self.gid]);
        self.b
            .execution_mode(self.function, ExecutionMode::LocalSize, [invocations, 1, 1]);
        self.b.module().assemble()
    }
}

/// One operation of a generated program: `op(register a, register b)` appended as a register.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub op: u8,
    pub a: usize,
    pub b: usize,
}

/// The operations a generated program draws from.
pub const OPS: u8 = 16;

/// What `Step` computes on `width`-bit values held in u64s, as SPIR-V defines it.
pub fn reference(op: u8, x: u64, y: u64, width: u32) -> u64 {
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
pub fn emit(s: &mut Shader, ty: Word, width: u32, registers: &[Word], step: Step) -> Word {
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
