//! A served model's tensors: each input and output as the protocol describes it, a request's
//! decoded inputs checked against them, and results read back to the host.

use crate::classification::ClassLabels;
use crate::datatype::datatype_of;
use halo_hal::buffer_view_text::element_count;
use halo_hal::{ElementType, Error, Result};

/// One input or output as the protocol describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    /// Its name (`input0`, `output0`, as the compiler declared it).
    pub name: String,
    /// The protocol's datatype (`FP32`).
    pub datatype: &'static str,
    /// The element type the function takes or returns.
    pub element_type: ElementType,
    /// Its dimensions; `-1` where dynamic. Empty for a scalar.
    pub shape: Vec<i64>,
    /// Whether the function takes it as a scalar VM value rather than a tensor.
    pub scalar: bool,
}

impl TensorSpec {
    /// The spec of a declared `(name, type)`: `tensor<1x?xf32>`, `f32`, `i64`.
    pub(crate) fn declared(name: &str, ty: &str) -> Result<TensorSpec> {
        let (shape, element, scalar) = match ty.strip_prefix("tensor<").and_then(|t| t.strip_suffix('>')) {
            Some(inner) => {
                let mut parts: Vec<&str> = inner.split('x').collect();
                let element = parts.pop().unwrap_or_default();
                let shape = parts
                    .iter()
                    .map(|d| if *d == "?" { Ok(-1) } else { d.parse::<i64>() })
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|_| Error::unimplemented(format!("'{name}' has a shape the server cannot read: {ty}")))?;
                (shape, element, false)
            }
            None => (Vec::new(), ty, true),
        };
        let element_type = ElementType::parse(element)?;
        let datatype = datatype_of(element_type)
            .ok_or_else(|| Error::unimplemented(format!("'{name}' is {ty}, which the protocol has no datatype for")))?;
        Ok(TensorSpec {
            name: name.to_string(),
            datatype,
            element_type,
            shape,
            scalar,
        })
    }

    /// Checks a request's `shape` against this spec's; a scalar may come as `[1]`, the shape
    /// many clients give a one-element array.
    pub(crate) fn check_shape(&self, shape: &[u64]) -> Result<()> {
        let fits = (self.scalar && shape == [1])
            || shape.len() == self.shape.len()
                && shape
                    .iter()
                    .zip(&self.shape)
                    .all(|(&given, &declared)| declared < 0 || given as i64 == declared);
        if fits {
            Ok(())
        } else {
            Err(Error::invalid_argument(format!(
                "input '{}' has shape {shape:?}; the model takes {:?}",
                self.name, self.shape
            )))
        }
    }
}

/// A request's input, decoded.
#[derive(Debug, Clone)]
pub struct InputTensor {
    /// Which input it is.
    pub name: String,
    /// The datatype the client named.
    pub datatype: String,
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// Its little-endian element bytes.
    pub bytes: Vec<u8>,
}

/// A result, read back to the host.
#[derive(Debug, Clone)]
pub struct OutputTensor {
    /// Its name.
    pub name: String,
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// Its element type.
    pub element_type: ElementType,
    /// Its little-endian element bytes.
    pub bytes: Vec<u8>,
    /// The names of its classes, when the model has a label file for it.
    pub labels: Option<ClassLabels>,
}

impl OutputTensor {
    /// The protocol's datatype for it.
    ///
    /// # Errors
    /// `Unimplemented` naming the output when the protocol has no datatype for its elements.
    pub fn datatype(&self) -> Result<&'static str> {
        datatype_of(self.element_type).ok_or_else(|| {
            Error::unimplemented(format!(
                "output '{}' is {:?}, which the protocol has no datatype for",
                self.name, self.element_type
            ))
        })
    }
}

/// Checks a request's `input` against `spec`: its datatype, shape and byte count.
pub(crate) fn check_input(spec: &TensorSpec, input: &InputTensor) -> Result<()> {
    if input.datatype != spec.datatype {
        return Err(Error::invalid_argument(format!(
            "input '{}' is {}; the model takes {}",
            spec.name, input.datatype, spec.datatype
        )));
    }
    spec.check_shape(&input.shape)?;
    let expected = element_count(&input.shape).saturating_mul(spec.element_type.byte_size() as u64);
    if input.bytes.len() as u64 != expected {
        return Err(Error::invalid_argument(format!(
            "input '{}' of shape {:?} needs {expected} bytes of {} but has {}",
            spec.name,
            input.shape,
            spec.datatype,
            input.bytes.len()
        )));
    }
    Ok(())
}

/// An input of `spec`'s static shape, every element zero.
pub(crate) fn zeros(spec: &TensorSpec) -> Result<InputTensor> {
    let shape = spec
        .shape
        .iter()
        .map(|&d| u64::try_from(d))
        .collect::<std::result::Result<Vec<u64>, _>>()
        .map_err(|_| {
            Error::invalid_argument(format!(
                "input '{}' has the dynamic shape {:?}; a warm-up needs static shapes",
                spec.name, spec.shape
            ))
        })?;
    let what = format!("warming up with input '{}' of shape {shape:?}", spec.name);
    let bytes = element_count(&shape)
        .checked_mul(spec.element_type.byte_size() as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Error::resource_exhausted(format!("{what}: too large")))?;
    Ok(InputTensor {
        bytes: halo_hal::host_memory::zeroed_vec(bytes, &what)?,
        name: spec.name.clone(),
        datatype: spec.datatype.to_string(),
        shape,
    })
}
