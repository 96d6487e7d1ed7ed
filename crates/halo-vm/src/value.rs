//! Values the VM passes around: scalars and reference-counted objects.

use crate::ref_types::Ref;
use std::fmt;

/// A VM value: a scalar or a (possibly null) reference.
#[derive(Clone)]
pub enum Value {
    /// 32-bit integer.
    I32(i32),
    /// 64-bit integer.
    I64(i64),
    /// 32-bit float.
    F32(f32),
    /// 64-bit float.
    F64(f64),
    /// A reference; `None` is null.
    Ref(Option<Ref>),
}

impl Value {
    /// The cconv character of this value's kind (`i`, `I`, `f`, `F`, `r`).
    pub fn cconv_char(&self) -> char {
        match self {
            Value::I32(_) => 'i',
            Value::I64(_) => 'I',
            Value::F32(_) => 'f',
            Value::F64(_) => 'F',
            Value::Ref(_) => 'r',
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::I32(v) => write!(f, "i32={v}"),
            Value::I64(v) => write!(f, "i64={v}"),
            Value::F32(v) => write!(f, "f32={v}"),
            Value::F64(v) => write!(f, "f64={v}"),
            Value::Ref(None) => f.write_str("(null)"),
            Value::Ref(Some(r)) => write!(f, "!{}", r.type_name()),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::I32(a), Value::I32(b)) => a == b,
            (Value::I64(a), Value::I64(b)) => a == b,
            (Value::F32(a), Value::F32(b)) => a.to_bits() == b.to_bits(),
            (Value::F64(a), Value::F64(b)) => a.to_bits() == b.to_bits(),
            (Value::Ref(a), Value::Ref(b)) => match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => a.ptr_eq(b),
                _ => false,
            },
            _ => false,
        }
    }
}

/// The results of a native function: up to two inline (what almost every function returns), so
/// a call allocates nothing for them.
pub type Results = smallvec::SmallVec<[Value; 2]>;
