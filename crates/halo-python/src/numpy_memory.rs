//! The memory of NumPy arrays, lent to halo buffers or read in place. This module holds the
//! package's `unsafe`: reading the array object's data pointer and flags.

use halo_hal::HostBytes;
use numpy::npyffi::flags::NPY_ARRAY_WRITEABLE;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// Where an array's elements are and how many bytes they take.
struct DataRange {
    ptr: *mut u8,
    len: usize,
    writable: bool,
}

fn data_range(array: &Bound<'_, PyUntypedArray>) -> DataRange {
    let raw = array.as_array_ptr();
    // SAFETY: `raw` is the object `array` refers to, alive while `array` is; NumPy keeps `data`
    // and `flags` valid for as long as the array object lives.
    let (ptr, flags) = unsafe { ((*raw).fields.data.cast::<u8>(), (*raw).fields.flags) };
    let len = array.shape().iter().product::<usize>() * array.dtype().itemsize();
    DataRange {
        ptr,
        len,
        writable: flags & NPY_ARRAY_WRITEABLE != 0,
    }
}

/// The address of an array's first element.
pub fn data_address(array: &Bound<'_, PyUntypedArray>) -> usize {
    data_range(array).ptr as usize
}

/// The elements of a C-contiguous array as bytes, borrowed while `array` is.
pub fn contiguous_bytes<'a>(array: &'a Bound<'_, PyUntypedArray>) -> &'a [u8] {
    assert!(array.is_c_contiguous(), "contiguous_bytes needs a C-contiguous array");
    let range = data_range(array);
    if range.len == 0 {
        return &[];
    }
    // SAFETY: a C-contiguous array holds `len` bytes from `data`, and the array cannot be
    // resized or freed while `array` borrows it; another thread writing the elements meanwhile
    // races as it would with any NumPy extension reading them.
    unsafe { std::slice::from_raw_parts(range.ptr, range.len) }
}

/// A C-contiguous array's memory lent to a buffer: holding the array keeps its data alive and
/// in place (NumPy refuses to resize an array that others reference).
pub struct LentArray {
    _owner: Py<PyUntypedArray>,
    range: DataRange,
}

// SAFETY: the pointer is only used as plain memory by the buffer that owns this value; the
// array object itself is only held (`Py` may be dropped on any thread).
unsafe impl Send for LentArray {}
// SAFETY: as for `Send`; `&LentArray` gives no access to the array object.
unsafe impl Sync for LentArray {}

impl LentArray {
    /// Lends `array`'s memory; the caller checked that it is C-contiguous.
    pub fn new(array: &Bound<'_, PyUntypedArray>) -> Self {
        assert!(array.is_c_contiguous(), "only C-contiguous arrays are lent");
        LentArray {
            range: data_range(array),
            _owner: array.clone().unbind(),
        }
    }
}

impl HostBytes for LentArray {
    fn host_ptr(&mut self) -> *mut u8 {
        self.range.ptr
    }
    fn byte_len(&self) -> usize {
        self.range.len
    }
    fn writable(&self) -> bool {
        self.range.writable
    }
}
