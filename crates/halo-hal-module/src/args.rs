//! Typed access to a native call's arguments, with errors that name the argument.

use halo_hal::{Error, Fence, Result};
use halo_vm::ref_types::{Buffer as VmBuffer, Ref, RefObject};
use halo_vm::Value;

use crate::objects::HalFence;

/// The flattened arguments of one call (variadic segments inline, as the VM passes them).
pub struct Args<'a> {
    values: &'a [Value],
}

impl<'a> Args<'a> {
    /// Wraps `values`.
    pub fn new(values: &'a [Value]) -> Self {
        Args { values }
    }

    /// All values.
    pub fn values(&self) -> &'a [Value] {
        self.values
    }

    fn get(&self, index: usize) -> Result<&'a Value> {
        self.values.get(index).ok_or_else(|| {
            Error::invalid_argument(format!(
                "argument {index} is missing ({} were passed)",
                self.values.len()
            ))
        })
    }

    fn mismatch(&self, index: usize, expected: &str) -> Error {
        let got = self.values.get(index).map(|v| format!("{v:?}")).unwrap_or_default();
        Error::invalid_argument(format!("argument {index} is {got} where {expected} is required"))
    }

    /// An i32 argument.
    pub fn i32(&self, index: usize) -> Result<i32> {
        match self.get(index)? {
            Value::I32(v) => Ok(*v),
            _ => Err(self.mismatch(index, "an i32")),
        }
    }

    /// An i64 argument.
    pub fn i64(&self, index: usize) -> Result<i64> {
        match self.get(index)? {
            Value::I64(v) => Ok(*v),
            _ => Err(self.mismatch(index, "an i64")),
        }
    }

    /// An i64 byte offset or length; -1, IREE's whole-buffer marker, becomes
    /// [`halo_hal::WHOLE_BUFFER`] (the same bits).
    pub fn size(&self, index: usize) -> Result<u64> {
        Ok(self.i64(index)? as u64)
    }

    /// A ref argument, or `None` when null.
    pub fn optional_ref(&self, index: usize) -> Result<Option<&'a Ref>> {
        match self.get(index)? {
            Value::Ref(r) => Ok(r.as_ref()),
            _ => Err(self.mismatch(index, "a ref")),
        }
    }

    /// A non-null object of type `T`.
    pub fn object<T: RefObject>(&self, index: usize) -> Result<&'a T> {
        self.optional_object(index)?.ok_or_else(|| {
            Error::invalid_argument(format!(
                "argument {index} is null where a {} is required",
                type_name::<T>()
            ))
        })
    }

    /// An object of type `T`, or `None` when null.
    pub fn optional_object<T: RefObject>(&self, index: usize) -> Result<Option<&'a T>> {
        match self.optional_ref(index)? {
            None => Ok(None),
            Some(r) => match r.downcast::<T>() {
                Some(object) => Ok(Some(object)),
                None => r.expect::<T>(&format!("argument {index}")).map(Some),
            },
        }
    }

    /// A `vm.buffer` argument read as text (names, messages, query keys).
    pub fn text(&self, index: usize) -> Result<String> {
        Ok(self.object::<VmBuffer>(index)?.to_text())
    }

    /// A fence argument; null is the empty fence (already reached).
    pub fn fence(&self, index: usize) -> Result<&'a Fence> {
        static EMPTY: Fence = Fence::new();
        Ok(self.optional_object::<HalFence>(index)?.map_or(&EMPTY, |f| &f.0))
    }
}

fn type_name<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}
