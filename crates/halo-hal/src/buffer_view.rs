//! Buffer views: a buffer plus shape and element type, what programs pass in and out.

use crate::buffer::Buffer;
use crate::buffer_view_text::{element_count, format_tensor, HostTensor};
use crate::device::Device;
use crate::element_type::ElementType;
use crate::memory::BufferParams;
use crate::transfer;
use crate::{Error, Result};
use smallvec::SmallVec;

/// How elements are laid out (`iree_hal_encoding_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Layout known only to the producer.
    Opaque = 0,
    /// Dense, row-major.
    DenseRowMajor = 1,
}

/// A buffer with a shape and element type (`iree_hal_buffer_view_t`).
#[derive(Debug, Clone)]
pub struct BufferView {
    buffer: Buffer,
    /// Inline up to rank 4, so making a view allocates nothing beyond itself.
    shape: SmallVec<[u64; 4]>,
    element_type: ElementType,
    encoding: Encoding,
}

impl BufferView {
    /// Wraps `buffer`, which must hold at least the dense size of the shape.
    ///
    /// # Errors
    /// `OutOfRange` when the buffer is smaller than the shape needs.
    pub fn new(buffer: Buffer, shape: &[u64], element_type: ElementType, encoding: Encoding) -> Result<Self> {
        let needed = dense_byte_length(shape, element_type)?;
        if encoding == Encoding::DenseRowMajor && buffer.byte_length() < needed {
            return Err(Error::out_of_range(format!(
                "buffer of {} bytes is smaller than the {needed} bytes a {} view needs",
                buffer.byte_length(),
                shape_text(shape, element_type)
            )));
        }
        Ok(BufferView {
            buffer,
            shape: SmallVec::from_slice(shape),
            element_type,
            encoding,
        })
    }

    /// Allocates a buffer of `params` on `device` holding `tensor`'s bytes, staged through the
    /// queue when the host cannot map it.
    pub fn from_host(device: &dyn Device, params: BufferParams, tensor: &HostTensor) -> Result<Self> {
        let buffer = device.allocator().allocate_buffer(params, tensor.bytes.len() as u64)?;
        transfer::write(device, &buffer, 0, &tensor.bytes)?;
        BufferView::new(buffer, &tensor.shape, tensor.element_type, Encoding::DenseRowMajor)
    }

    /// The buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
    /// Dimensions.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Element type.
    pub fn element_type(&self) -> ElementType {
        self.element_type
    }
    /// Encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// Number of elements.
    pub fn element_count(&self) -> u64 {
        element_count(&self.shape)
    }
    /// Dense size in bytes.
    pub fn byte_length(&self) -> u64 {
        self.element_count() * self.element_type.byte_size() as u64
    }

    /// Reads the contents of this view on `device` back into host memory, staged through the
    /// queue when the host cannot map the buffer.
    pub fn to_host(&self, device: &dyn Device) -> Result<HostTensor> {
        let mut bytes = crate::host_memory::zeroed_vec(self.byte_length() as usize, "a buffer view's contents")?;
        transfer::read(device, &self.buffer, 0, &mut bytes)?;
        Ok(HostTensor {
            shape: self.shape.to_vec(),
            element_type: self.element_type,
            bytes,
        })
    }

    /// Prints this view as `iree-run-module` does, reading back only the first `max_elements`
    /// elements: the text elides the rest, so they are never copied.
    pub fn format(&self, device: &dyn Device, max_elements: usize) -> Result<String> {
        let shown = self.element_count().min(max_elements as u64);
        let length = shown * self.element_type.byte_size() as u64;
        let mut bytes = crate::host_memory::zeroed_vec(length as usize, "the printed elements of a buffer view")?;
        transfer::read(device, &self.buffer, 0, &mut bytes)?;
        Ok(format_tensor(&self.shape, self.element_type, &bytes, max_elements))
    }
}

/// Bytes a dense row-major tensor of `shape` needs.
pub fn dense_byte_length(shape: &[u64], element_type: ElementType) -> Result<u64> {
    shape
        .iter()
        .try_fold(element_type.byte_size() as u64, |acc, dim| acc.checked_mul(*dim))
        .ok_or_else(|| Error::invalid_argument(format!("{} overflows", shape_text(shape, element_type))))
}

/// `2x3xf32`: a shape and element type as IREE's tools print them.
pub fn shape_text(shape: &[u64], element_type: ElementType) -> String {
    let mut text: String = shape.iter().map(|d| format!("{d}x")).collect();
    text.push_str(&element_type.to_string());
    text
}
