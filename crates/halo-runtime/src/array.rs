//! `ndarray` arrays as call inputs and outputs (feature `ndarray`).
//!
//! In: an owned array in standard (row-major) layout whose data is aligned as kernels expect
//! ([`HOST_ALIGNMENT`] bytes) becomes the buffer itself; the device reads the array's memory in
//! place and the buffer keeps the array alive. Other arrays are copied once into a new buffer.
//! Out: results are read once, straight into the new array's memory.

use crate::tensor::as_buffer_view;
use halo_hal::host_memory::{HostBytes, HOST_ALIGNMENT};
use halo_hal::{BufferParams, BufferView, Device, ElementType, Error, NumericalType, Result};
use halo_vm::Value;
use ndarray::{ArrayD, IxDyn};

/// Element types with a HAL counterpart (IREE's mapping of numpy dtypes).
pub trait Element: bytemuck::Pod + Send + Sync {
    /// The buffer view element type of arrays of `Self`.
    const ELEMENT_TYPE: ElementType;
}

macro_rules! elements {
    ($($t:ty => $numerical:ident $bits:literal),* $(,)?) => {
        $(impl Element for $t {
            const ELEMENT_TYPE: ElementType = ElementType::new(NumericalType::$numerical, $bits);
        })*
    };
}

elements! {
    i8 => IntegerSigned 8,
    i16 => IntegerSigned 16,
    i32 => IntegerSigned 32,
    i64 => IntegerSigned 64,
    u8 => IntegerUnsigned 8,
    u16 => IntegerUnsigned 16,
    u32 => IntegerUnsigned 32,
    u64 => IntegerUnsigned 64,
    half::f16 => FloatIeee 16,
    half::bf16 => FloatBrain 16,
    f32 => FloatIeee 32,
    f64 => FloatIeee 64,
}

/// An array lent to a buffer: its heap data never moves while the array is not reshaped.
struct ArrayBytes<A: Element>(ArrayD<A>);

impl<A: Element> HostBytes for ArrayBytes<A> {
    fn host_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        std::mem::size_of_val(self.0.as_slice().unwrap_or_default())
    }
    fn writable(&self) -> bool {
        true
    }
}

/// How [`array_input`] placed an array in device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The buffer is the array's own memory.
    InPlace,
    /// The array was copied into a new buffer (not row-major, or not aligned for kernels).
    Copied,
}

/// A buffer view value on `device` holding `array`, without copying where the layout and
/// alignment allow (see the module docs).
///
/// # Errors
/// Allocation or import failures.
pub fn array_input<A: Element>(device: &dyn Device, array: ArrayD<A>) -> Result<(Value, Placement)> {
    let shape: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
    let aligned = (array.as_ptr() as usize).is_multiple_of(HOST_ALIGNMENT);
    let (buffer, placement) = match (array.is_standard_layout(), aligned) {
        (true, true) => (
            device
                .allocator()
                .import_host(BufferParams::host_mappable(), Box::new(ArrayBytes(array)))?,
            Placement::InPlace,
        ),
        _ => {
            let standard = array.as_standard_layout();
            let elements = standard.as_slice().expect("standard layout is contiguous");
            let bytes: &[u8] = bytemuck::cast_slice(elements);
            let buffer = device
                .allocator()
                .allocate_buffer(BufferParams::host_mappable(), bytes.len() as u64)?;
            buffer.map_write(0, bytes)?;
            (buffer, Placement::Copied)
        }
    };
    let view = BufferView::new(
        buffer,
        &shape,
        A::ELEMENT_TYPE,
        halo_hal::buffer_view::Encoding::DenseRowMajor,
    )?;
    Ok((crate::tensor::view_value(view), placement))
}

/// A buffer view value read into a new array of `A`.
///
/// # Errors
/// `InvalidArgument` when the value is not a buffer view or its element type is not `A` (integers
/// match by width, whatever their signedness); mapping failures.
pub fn to_array<A: Element>(device: &dyn Device, value: &Value) -> Result<ArrayD<A>> {
    let view = as_buffer_view(value)?;
    if !view.element_type().shares_storage_with(A::ELEMENT_TYPE) {
        return Err(Error::invalid_argument(format!(
            "a buffer view of {} cannot be read as an array of {} ({})",
            view.element_type(),
            A::ELEMENT_TYPE,
            std::any::type_name::<A>()
        )));
    }
    let shape: Vec<usize> = view.shape().iter().map(|&d| d as usize).collect();
    let mut array = ArrayD::<A>::from_elem(IxDyn(&shape), A::zeroed());
    let elements = array.as_slice_mut().expect("a new array is contiguous");
    halo_hal::transfer::read(device, view.buffer(), 0, bytemuck::cast_slice_mut(elements))?;
    Ok(array)
}
