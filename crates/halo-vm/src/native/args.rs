//! What a native function sees of its arguments: typed reads by position, straight from the
//! caller's registers, with errors that name the argument.

use crate::interp::{pair, ref_ordinal};
use crate::ref_types::{short, Buffer, Ref, RefObject};
use crate::value::Value;
use halo_hal::{Error, Result};

/// The flattened arguments of one native call (variadic segments inline, in calling-convention
/// order).
///
/// Reading an argument reads the caller's register in place: a call builds no list of values
/// and counts no references, which is most of what a small native call costs otherwise.
pub struct Args<'a> {
    source: Source<'a>,
}

enum Source<'a> {
    /// The caller's frame.
    Registers(Registers<'a>),
    /// Values a Rust caller passed.
    Values(&'a [Value]),
}

/// Arguments in the caller's frame: `list[i]` is argument `i`'s register, of kind `kinds[i]`;
/// `i32s` and `refs` start at the frame's first register.
#[derive(Clone, Copy)]
struct Registers<'a> {
    kinds: &'a [char],
    list: &'a [u16],
    i32s: &'a [u32],
    refs: &'a [Option<Ref>],
}

impl<'a> Registers<'a> {
    #[inline]
    fn bits32(&self, index: usize) -> u32 {
        self.i32s[self.list[index] as usize]
    }

    #[inline]
    fn bits64(&self, index: usize) -> u64 {
        pair(self.i32s, self.list[index] as usize)
    }

    #[inline]
    fn reference(&self, index: usize) -> Option<&'a Ref> {
        self.refs[ref_ordinal(self.list[index])].as_ref()
    }

    fn value(&self, index: usize) -> Option<Value> {
        Some(match self.kinds.get(index)? {
            'i' => Value::I32(self.bits32(index) as i32),
            'f' => Value::F32(f32::from_bits(self.bits32(index))),
            'I' => Value::I64(self.bits64(index) as i64),
            'F' => Value::F64(f64::from_bits(self.bits64(index))),
            _ => Value::Ref(self.reference(index).cloned()),
        })
    }
}

impl<'a> Args<'a> {
    /// Arguments held in `values` (for calling a native function from Rust).
    pub fn from_values(values: &'a [Value]) -> Self {
        Args {
            source: Source::Values(values),
        }
    }

    /// Arguments in registers of the caller's frame: `list[i]` names argument `i`'s register,
    /// of kind `kinds[i]`; `i32s` and `refs` start at the frame's first register.
    pub(crate) fn from_registers(kinds: &'a [char], list: &'a [u16], i32s: &'a [u32], refs: &'a [Option<Ref>]) -> Self {
        debug_assert_eq!(kinds.len(), list.len());
        Args {
            source: Source::Registers(Registers {
                kinds,
                list,
                i32s,
                refs,
            }),
        }
    }

    /// How many arguments were passed.
    #[inline]
    pub fn len(&self) -> usize {
        match self.source {
            Source::Registers(registers) => registers.list.len(),
            Source::Values(values) => values.len(),
        }
    }

    /// True when no argument was passed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The calling-convention kind of argument `index` (`i`, `I`, `f`, `F` or `r`), or `None`
    /// past the last argument.
    #[inline]
    pub fn kind(&self, index: usize) -> Option<char> {
        match self.source {
            Source::Registers(registers) => registers.kinds.get(index).copied(),
            Source::Values(values) => values.get(index).map(Value::cconv_char),
        }
    }

    /// Argument `index` as a value (a ref is counted once more).
    ///
    /// # Errors
    /// `InvalidArgument` when fewer arguments were passed.
    pub fn value(&self, index: usize) -> Result<Value> {
        let value = match self.source {
            Source::Registers(registers) => registers.value(index),
            Source::Values(values) => values.get(index).cloned(),
        };
        value
            .ok_or_else(|| Error::invalid_argument(format!("argument {index} is missing ({} were passed)", self.len())))
    }

    /// All arguments as values (refs counted once more).
    pub fn to_values(&self) -> Vec<Value> {
        (0..self.len()).filter_map(|index| self.value(index).ok()).collect()
    }

    /// An i32 argument.
    ///
    /// # Errors
    /// `InvalidArgument` naming the argument when it is missing or of another kind.
    #[inline(always)]
    pub fn i32(&self, index: usize) -> Result<i32> {
        match self.source {
            Source::Registers(r) if r.kinds.get(index) == Some(&'i') => return Ok(r.bits32(index) as i32),
            Source::Values(values) => {
                if let Some(Value::I32(v)) = values.get(index) {
                    return Ok(*v);
                }
            }
            Source::Registers(_) => {}
        }
        Err(self.mismatch(index, "an i32"))
    }

    /// An i64 argument.
    ///
    /// # Errors
    /// As [`Args::i32`].
    #[inline(always)]
    pub fn i64(&self, index: usize) -> Result<i64> {
        match self.source {
            Source::Registers(r) if r.kinds.get(index) == Some(&'I') => return Ok(r.bits64(index) as i64),
            Source::Values(values) => {
                if let Some(Value::I64(v)) = values.get(index) {
                    return Ok(*v);
                }
            }
            Source::Registers(_) => {}
        }
        Err(self.mismatch(index, "an i64"))
    }

    /// A ref argument, or `None` when null.
    ///
    /// # Errors
    /// As [`Args::i32`].
    #[inline(always)]
    pub fn optional_ref(&self, index: usize) -> Result<Option<&'a Ref>> {
        match self.source {
            Source::Registers(r) if r.kinds.get(index) == Some(&'r') => return Ok(r.reference(index)),
            Source::Values(values) => {
                if let Some(Value::Ref(r)) = values.get(index) {
                    return Ok(r.as_ref());
                }
            }
            Source::Registers(_) => {}
        }
        Err(self.mismatch(index, "a ref"))
    }

    /// An object of type `T`, or `None` when null.
    ///
    /// # Errors
    /// As [`Args::i32`], and `InvalidArgument` naming both types for an object of another type.
    #[inline(always)]
    pub fn optional_object<T: RefObject>(&self, index: usize) -> Result<Option<&'a T>> {
        match self.optional_ref(index)? {
            None => Ok(None),
            Some(r) => match r.downcast::<T>() {
                Some(object) => Ok(Some(object)),
                None => r.expect::<T>(&format!("argument {index}")).map(Some),
            },
        }
    }

    /// A non-null object of type `T`.
    ///
    /// # Errors
    /// As [`Args::optional_object`], and `InvalidArgument` when it is null.
    #[inline(always)]
    pub fn object<T: RefObject>(&self, index: usize) -> Result<&'a T> {
        self.optional_object(index)?.ok_or_else(|| null_object::<T>(index))
    }

    /// A `vm.buffer` argument read as text (names, messages, keys).
    ///
    /// # Errors
    /// As [`Args::object`].
    pub fn text(&self, index: usize) -> Result<String> {
        Ok(self.object::<Buffer>(index)?.to_text())
    }

    // Errors are rare: kept out of line so the accessors inline into their callers.
    #[cold]
    #[inline(never)]
    fn mismatch(&self, index: usize, expected: &str) -> Error {
        match self.value(index) {
            Ok(got) => Error::invalid_argument(format!("argument {index} is {got:?} where {expected} is required")),
            Err(missing) => missing,
        }
    }
}

#[cold]
#[inline(never)]
fn null_object<T>(index: usize) -> Error {
    Error::invalid_argument(format!("argument {index} is null where a {} is required", short::<T>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::{REF_BANK_BIT, REF_MOVE_BIT};
    use halo_hal::StatusCode;

    /// A frame with i32 register 0 = -7, i64 registers 2-3 = 2^40 + 5, ref register 1 = a
    /// `vm.buffer` holding "hal", and ref register 0 null.
    fn frame() -> (Vec<u32>, Vec<Option<Ref>>) {
        let wide = (1u64 << 40) + 5;
        let i32s = vec![-7i32 as u32, 0, wide as u32, (wide >> 32) as u32];
        let refs = vec![None, Some(Ref::new(Buffer::from_vec(b"hal".to_vec())))];
        (i32s, refs)
    }

    #[test]
    fn register_arguments_read_in_place_by_kind() {
        let (i32s, refs) = frame();
        let list = [0, 2, REF_BANK_BIT | REF_MOVE_BIT | 1, REF_BANK_BIT];
        let args = Args::from_registers(&['i', 'I', 'r', 'r'], &list, &i32s, &refs);
        assert_eq!(args.len(), 4);
        assert_eq!(args.i32(0).unwrap(), -7);
        assert_eq!(args.i64(1).unwrap(), (1 << 40) + 5);
        assert_eq!(args.text(2).unwrap(), "hal");
        assert!(args.optional_ref(3).unwrap().is_none());
        assert_eq!(args.kind(2), Some('r'));
        assert_eq!(args.kind(4), None);
        assert_eq!(args.value(0).unwrap(), Value::I32(-7));
        assert_eq!(args.to_values().len(), 4);
    }

    #[test]
    fn wrong_kinds_and_missing_arguments_are_named() {
        let (i32s, refs) = frame();
        let list = [0, REF_BANK_BIT];
        let args = Args::from_registers(&['i', 'r'], &list, &i32s, &refs);
        let error = args.i64(0).unwrap_err();
        assert_eq!(error.code(), StatusCode::InvalidArgument);
        assert!(
            error.to_string().contains("argument 0 is i32=-7 where an i64"),
            "{error}"
        );
        let Err(error) = args.object::<Buffer>(1) else {
            panic!("a null ref read as an object")
        };
        assert!(
            error.to_string().contains("argument 1 is null where a Buffer"),
            "{error}"
        );
        let error = args.i32(2).unwrap_err();
        assert!(
            error.to_string().contains("argument 2 is missing (2 were passed)"),
            "{error}"
        );
    }

    #[test]
    fn value_arguments_read_the_same_way() {
        let values = [Value::I32(3), Value::I64(-1), Value::Ref(None)];
        let args = Args::from_values(&values);
        assert_eq!(args.i32(0).unwrap(), 3);
        assert_eq!(args.i64(1).unwrap(), -1);
        assert!(args.optional_object::<Buffer>(2).unwrap().is_none());
        assert_eq!(args.kind(1), Some('I'));
        let error = args.optional_ref(0).unwrap_err();
        assert!(error.to_string().contains("argument 0 is i32=3 where a ref"), "{error}");
    }
}
