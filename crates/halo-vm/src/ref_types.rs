//! Reference-counted objects of the VM: the type-erased [`Ref`] and the built-in `vm.buffer` and
//! `vm.list`. Rust's `Arc` does the counting; a register, list slot or global holding a `Ref`
//! holds a reference, and dropping it releases one.

use crate::value::Value;
use halo_hal::{Error, Result};
use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

/// An object the VM can hold by reference.
pub trait RefObject: Any + Send + Sync {
    /// The type's registered name, e.g. `vm.buffer`, `vm.list`, `hal.buffer`.
    fn type_name(&self) -> &'static str;
}

/// A counted reference to a [`RefObject`].
#[derive(Clone)]
pub struct Ref(Arc<dyn RefObject>);

impl Ref {
    /// Wraps `object`.
    pub fn new<T: RefObject>(object: T) -> Self {
        Ref(Arc::new(object))
    }

    /// The object's type name.
    pub fn type_name(&self) -> &'static str {
        self.0.type_name()
    }

    /// The object as `T`, if it is one.
    #[inline]
    pub fn downcast<T: RefObject>(&self) -> Option<&T> {
        // Upcasting reads `Any`'s vtable from `RefObject`'s: one indirect call (`type_id`), where an
        // `as_any` method made two.
        let object: &dyn Any = &*self.0;
        object.downcast_ref::<T>()
    }

    /// The object as `T`, or an `InvalidArgument` error naming both types.
    pub fn expect<T: RefObject>(&self, what: &str) -> Result<&T> {
        self.downcast::<T>().ok_or_else(|| {
            Error::invalid_argument(format!(
                "{what} is a {} where a {} is required",
                self.type_name(),
                short::<T>()
            ))
        })
    }

    /// True when both refer to the same object.
    pub fn ptr_eq(&self, other: &Ref) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

pub(crate) fn short<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}

impl fmt::Debug for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "!{}", self.type_name())
    }
}

/// Bytes a `vm.buffer` holds: its own, or a read-only range of something kept alive (rodata).
enum Storage {
    Owned(Mutex<Vec<u8>>),
    Borrowed {
        owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
        range: Range<usize>,
    },
}

/// A `vm.buffer`: a byte array, mutable or read-only.
pub struct Buffer {
    storage: Storage,
}

impl RefObject for Buffer {
    fn type_name(&self) -> &'static str {
        "vm.buffer"
    }
}

/// The bytes of a buffer while it is accessed.
pub enum BufferBytes<'a> {
    /// A mutable buffer's bytes (locked).
    Mutable(MutexGuard<'a, Vec<u8>>),
    /// A read-only buffer's bytes.
    ReadOnly(&'a [u8]),
}

impl std::ops::Deref for BufferBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            BufferBytes::Mutable(guard) => guard,
            BufferBytes::ReadOnly(bytes) => bytes,
        }
    }
}

impl Buffer {
    /// A zeroed mutable buffer of `length` bytes.
    ///
    /// # Errors
    /// `ResourceExhausted` when that much memory cannot be had: lengths come from programs.
    pub fn zeroed(length: usize) -> Result<Self> {
        halo_hal::host_memory::zeroed_vec(length, "a vm.buffer").map(Self::from_vec)
    }

    /// A mutable buffer holding `bytes`.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        Buffer {
            storage: Storage::Owned(Mutex::new(bytes)),
        }
    }

    /// A read-only view of `range` of `owner`'s bytes, without copying.
    pub fn read_only(owner: Arc<dyn AsRef<[u8]> + Send + Sync>, range: Range<usize>) -> Self {
        Buffer {
            storage: Storage::Borrowed { owner, range },
        }
    }

    /// True when the buffer may be written.
    pub fn is_mutable(&self) -> bool {
        matches!(self.storage, Storage::Owned(_))
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, for reading.
    pub fn bytes(&self) -> BufferBytes<'_> {
        match &self.storage {
            Storage::Owned(bytes) => BufferBytes::Mutable(bytes.lock().unwrap_or_else(|p| p.into_inner())),
            Storage::Borrowed { owner, range } => BufferBytes::ReadOnly(&(**owner).as_ref()[range.clone()]),
        }
    }

    /// The bytes of a read-only buffer, borrowed for as long as the buffer lives (`None` for a
    /// mutable one, whose bytes are only reachable under its lock).
    pub fn read_only_bytes(&self) -> Option<&[u8]> {
        match &self.storage {
            Storage::Owned(_) => None,
            Storage::Borrowed { owner, range } => Some(&(**owner).as_ref()[range.clone()]),
        }
    }

    /// The bytes as text (lossy UTF-8): what native modules read names and messages from.
    pub fn to_text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// The bytes, for writing.
    ///
    /// # Errors
    /// `PermissionDenied` for a read-only buffer.
    pub fn bytes_mut(&self) -> Result<MutexGuard<'_, Vec<u8>>> {
        match &self.storage {
            Storage::Owned(bytes) => Ok(bytes.lock().unwrap_or_else(|p| p.into_inner())),
            Storage::Borrowed { .. } => Err(Error::permission_denied("buffer is read-only")),
        }
    }
}

/// Checks `[offset, offset + length)` against `len`, as IREE reports out-of-bounds accesses.
pub fn check_range(offset: u64, length: u64, len: usize) -> Result<Range<usize>> {
    match offset.checked_add(length) {
        Some(end) if end <= len as u64 => Ok(offset as usize..end as usize),
        _ => Err(Error::out_of_range(format!(
            "out-of-bounds access detected (offset={offset}, length={length}, buffer length={len})"
        ))),
    }
}

/// What a list may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElementType {
    /// 8-bit integers (held as sign-extended i32 values).
    I8,
    /// 16-bit integers (held as sign-extended i32 values).
    I16,
    /// 32-bit integers.
    I32,
    /// 64-bit integers.
    I64,
    /// 32-bit floats.
    F32,
    /// 64-bit floats.
    F64,
    /// References of the named type, or any type when `None`.
    Ref(Option<String>),
    /// Any value (`?`).
    Variant,
}

fn check_len(len: usize, what: &str) -> Result<()> {
    if len > List::MAX_LEN {
        return Err(Error::resource_exhausted(format!(
            "vm.list {what} {len} exceeds halo's limit of {} items",
            List::MAX_LEN
        )));
    }
    Ok(())
}

/// A `vm.list`: a growable sequence of values.
pub struct List {
    element_type: ElementType,
    items: Mutex<Vec<Value>>,
}

impl RefObject for List {
    fn type_name(&self) -> &'static str {
        "vm.list"
    }
}

impl List {
    /// The most items a list may hold. Compiled programs keep arguments, results and buffer
    /// views in lists, never bulk data; without a bound a program could ask for billions of
    /// 16-byte slots, which the allocator grants on credit (overcommit) and the zero-fill then
    /// turns into an out-of-memory kill instead of an error.
    pub const MAX_LEN: usize = 1 << 24;

    /// An empty list of `element_type` with room for `capacity` items.
    pub fn new(element_type: ElementType, capacity: usize) -> Self {
        List {
            element_type,
            items: Mutex::new(Vec::with_capacity(capacity.min(1 << 20))),
        }
    }

    /// What the list holds.
    pub fn element_type(&self) -> &ElementType {
        &self.element_type
    }

    fn items(&self) -> MutexGuard<'_, Vec<Value>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.items().len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Grows capacity to at least `capacity`.
    pub fn reserve(&self, capacity: usize) -> Result<()> {
        check_len(capacity, "capacity")?;
        let mut items = self.items();
        let additional = capacity.saturating_sub(items.len());
        items
            .try_reserve(additional)
            .map_err(|_| Error::resource_exhausted(format!("list capacity {capacity}")))
    }

    /// Sets the size, filling new slots with zero values (or null refs).
    pub fn resize(&self, size: usize) -> Result<()> {
        check_len(size, "size")?;
        let zero = match self.element_type {
            ElementType::I8 | ElementType::I16 | ElementType::I32 => Value::I32(0),
            ElementType::I64 => Value::I64(0),
            ElementType::F32 => Value::F32(0.0),
            ElementType::F64 => Value::F64(0.0),
            ElementType::Ref(_) | ElementType::Variant => Value::Ref(None),
        };
        let mut items = self.items();
        let len = items.len();
        if size > len {
            items
                .try_reserve(size - len)
                .map_err(|_| Error::resource_exhausted(format!("list size {size}")))?;
        }
        items.resize(size, zero);
        Ok(())
    }

    /// The item at `index`.
    pub fn get(&self, index: usize) -> Result<Value> {
        let items = self.items();
        items
            .get(index)
            .cloned()
            .ok_or_else(|| out_of_range(index, items.len()))
    }

    /// Replaces the item at `index` (narrowing integers to the element width).
    pub fn set(&self, index: usize, value: Value) -> Result<()> {
        let value = match (&self.element_type, value) {
            (ElementType::I8, Value::I32(v)) => Value::I32(v as i8 as i32),
            (ElementType::I16, Value::I32(v)) => Value::I32(v as i16 as i32),
            (_, value) => value,
        };
        let mut items = self.items();
        let len = items.len();
        let slot = items.get_mut(index).ok_or_else(|| out_of_range(index, len))?;
        *slot = value;
        Ok(())
    }

    /// Appends an item.
    pub fn push(&self, value: Value) {
        self.items().push(value);
    }

    /// A copy of every item.
    pub fn to_vec(&self) -> Vec<Value> {
        self.items().clone()
    }
}

fn out_of_range(index: usize, len: usize) -> Error {
    Error::out_of_range(format!("list index {index} out of bounds (size {len})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_beyond_the_bound_fail_and_stay_as_they_were() {
        let list = List::new(ElementType::I32, 0);
        list.resize(3).unwrap();
        for (size, what) in [(List::MAX_LEN + 1, "size"), (402_554_880, "size"), (usize::MAX, "size")] {
            let error = list.resize(size).unwrap_err();
            assert_eq!(error.code(), halo_hal::StatusCode::ResourceExhausted);
            assert!(
                error.to_string().contains(&format!("vm.list {what} {size} exceeds")),
                "{error}"
            );
        }
        let error = list.reserve(List::MAX_LEN + 1).unwrap_err();
        assert!(error.to_string().contains("vm.list capacity"), "{error}");
        assert_eq!(list.len(), 3);
        list.reserve(1000).unwrap();
    }
}
