//! SPIR-V types as OpenCL C types: their names, their layout, and the typedefs that give arrays
//! and structs a name.
//!
//! Integers are held unsigned (`uint`, `ulong`, ...) because SPIR-V types carry no signedness in
//! practice: each instruction says how it reads its operands, and the signed ones reinterpret.
//! Fixed arrays are wrapped in a struct (`typedef struct { float a[4]; } t9;`) so that they can be
//! assigned, passed and returned like every other value; a runtime array is the flexible last
//! member of its block.

use halo_hal::{Error, Result};
use rspirv::spirv::{StorageClass, Word};

/// A type the translator can name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Type {
    Void,
    Bool,
    /// An integer of this many bits.
    Int(u32),
    /// A float of this many bits.
    Float(u32),
    Vector {
        component: Word,
        count: u32,
    },
    Array {
        element: Word,
        length: u64,
        stride: Option<u32>,
    },
    RuntimeArray {
        element: Word,
        stride: Option<u32>,
    },
    Struct {
        members: Vec<Word>,
        offsets: Vec<Option<u32>>,
    },
    Pointer {
        class: StorageClass,
        pointee: Word,
    },
    Function,
}

/// Size and alignment in bytes of a type in OpenCL C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) size: u64,
    pub(crate) align: u64,
}

/// The OpenCL C address space qualifier of pointers into `class`.
pub(crate) fn address_space(class: StorageClass) -> Result<&'static str> {
    match class {
        StorageClass::StorageBuffer | StorageClass::Uniform => Ok("__global "),
        StorageClass::Workgroup => Ok("__local "),
        StorageClass::Function | StorageClass::Private | StorageClass::PushConstant => Ok(""),
        other => Err(Error::unimplemented(format!(
            "SPIR-V storage class {other:?} has no OpenCL C address space here"
        ))),
    }
}

/// The unsigned OpenCL C name of an integer of `width` bits.
pub(crate) fn unsigned_name(width: u32) -> Result<&'static str> {
    match width {
        8 => Ok("uchar"),
        16 => Ok("ushort"),
        32 => Ok("uint"),
        64 => Ok("ulong"),
        _ => Err(Error::unimplemented(format!("{width}-bit integers"))),
    }
}

/// The signed OpenCL C name of an integer of `width` bits.
pub(crate) fn signed_name(width: u32) -> Result<&'static str> {
    match width {
        8 => Ok("char"),
        16 => Ok("short"),
        32 => Ok("int"),
        64 => Ok("long"),
        _ => Err(Error::unimplemented(format!("{width}-bit integers"))),
    }
}

/// The OpenCL C name of a float of `width` bits.
pub(crate) fn float_name(width: u32) -> Result<&'static str> {
    match width {
        16 => Ok("half"),
        32 => Ok("float"),
        64 => Ok("double"),
        _ => Err(Error::unimplemented(format!("{width}-bit floats"))),
    }
}

/// Whether OpenCL C has vectors of `count` components.
pub(crate) fn vector_count_supported(count: u32) -> bool {
    matches!(count, 2 | 3 | 4 | 8 | 16)
}

/// The OpenCL C swizzle selecting component `index` of a vector (`.s0` ... `.sf`).
pub(crate) fn component(index: u32) -> Result<String> {
    if index < 16 {
        Ok(format!(".s{index:x}"))
    } else {
        Err(Error::invalid_argument(format!(
            "vector component {index} is past the largest OpenCL C vector"
        )))
    }
}

/// Rounds `value` up to a multiple of `align` (a power of two or 1).
pub(crate) fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align.max(1)) * align.max(1)
}
