//! NumPy `.npy` files as host tensors: what `--input=@x.npy` reads and `--output=@y.npy` writes.
//!
//! Element types follow IREE's tools: `bool` is `i1`, `int8` is `si8`, `uint16` is `ui16`,
//! `float16` is `f16`, ... Data is copied as little-endian bytes; big-endian and Fortran-order
//! files are rejected rather than converted.

use halo_hal::{ElementType, Error, HostTensor, NumericalType, Result, ResultExt};
use npyz::{DType, Order, TypeChar, TypeStr, WriteOptions, WriterBuilder};
use std::io::{Read, Write};
use std::path::Path;

/// Reads every array in a `.npy` stream (files may hold several, one after another).
///
/// # Errors
/// `InvalidArgument` naming the file for a malformed header or an unsupported dtype.
pub fn read_all(path: &Path) -> Result<Vec<HostTensor>> {
    let bytes = std::fs::read(path).map_err(|e| Error::not_found(format!("reading '{}': {e}", path.display())))?;
    let mut rest = bytes.as_slice();
    let mut tensors = Vec::new();
    while !rest.is_empty() {
        let (tensor, consumed) =
            read_one(rest).with_context(|| format!("reading array {} of '{}'", tensors.len(), path.display()))?;
        tensors.push(tensor);
        rest = &rest[consumed..];
    }
    Ok(tensors)
}

/// Reads the first array of a `.npy` file.
///
/// # Errors
/// As [`read_all`]; `InvalidArgument` for an empty file.
pub fn read(path: &Path) -> Result<HostTensor> {
    read_all(path)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::invalid_argument(format!("'{}' holds no array", path.display())))
}

fn read_one(bytes: &[u8]) -> Result<(HostTensor, usize)> {
    let bad = |why: String| Error::invalid_argument(why);
    let mut reader = bytes;
    let file = npyz::NpyFile::new(&mut reader).map_err(|e| bad(format!("malformed .npy header: {e}")))?;
    if file.order() == Order::Fortran && file.shape().len() > 1 {
        return Err(bad("Fortran-order arrays are not supported".into()));
    }
    let DType::Plain(type_str) = file.dtype() else {
        return Err(bad(format!("structured dtype {:?} is not supported", file.dtype())));
    };
    let element_type = element_type(&type_str)?;
    let shape = file.shape().to_vec();
    let header_length = bytes.len() - file.into_inner().len();
    let length = shape
        .iter()
        .try_fold(element_type.byte_size() as u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))? as usize;
    let mut data = &bytes[header_length..];
    let mut tensor_bytes = vec![0; length];
    data.read_exact(&mut tensor_bytes).map_err(|_| {
        bad(format!(
            "the data is shorter than the {length} bytes shape {shape:?} needs"
        ))
    })?;
    let tensor = HostTensor {
        shape,
        element_type,
        bytes: tensor_bytes,
    };
    Ok((tensor, header_length + length))
}

fn element_type(type_str: &TypeStr) -> Result<ElementType> {
    use NumericalType::*;
    let size = type_str.size_field();
    let little = type_str.endianness() != npyz::Endianness::Big || size == 1;
    let numerical = match type_str.type_char() {
        TypeChar::Bool if size == 1 => return Ok(ElementType::BOOL_8),
        TypeChar::Int => IntegerSigned,
        TypeChar::Uint => IntegerUnsigned,
        TypeChar::Float => FloatIeee,
        TypeChar::Complex => FloatComplex,
        _ => NumericalType::Unknown,
    };
    if numerical == NumericalType::Unknown || !little || !matches!(size, 1 | 2 | 4 | 8 | 16) {
        return Err(Error::invalid_argument(format!("unsupported .npy dtype '{type_str}'")));
    }
    Ok(ElementType::new(numerical, (size * 8) as u8))
}

fn type_str(element_type: ElementType) -> Result<TypeStr> {
    use NumericalType::*;
    let bytes = element_type.byte_size();
    let kind = match element_type.numerical_type() {
        Boolean => "b",
        IntegerSigned | Integer => "i",
        IntegerUnsigned => "u",
        FloatIeee => "f",
        FloatComplex => "c",
        _ => return Err(Error::unimplemented(format!("{element_type} has no .npy dtype"))),
    };
    let order = if bytes == 1 { "|" } else { "<" };
    format!("{order}{kind}{bytes}")
        .parse()
        .map_err(|e| Error::internal(format!("dtype for {element_type}: {e}")))
}

/// Writes `tensor` as one `.npy` array to `path`, replacing it or appending to it.
///
/// # Errors
/// `Unimplemented` for element types NumPy lacks (bf16, f8); I/O failures naming the file.
pub fn write(path: &Path, tensor: &HostTensor, append: bool) -> Result<()> {
    let dtype = DType::Plain(type_str(tensor.element_type)?);
    let io = |e: std::io::Error| Error::permission_denied(format!("writing '{}': {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(io)?;
    let mut writer = std::io::BufWriter::new(file);
    let writer = WriteOptions::new_header_only()
        .dtype(dtype)
        .shape(&tensor.shape)
        .writer(&mut writer)
        .write_header_only()
        .map_err(io)?;
    writer.write_all(&tensor.bytes).map_err(io)?;
    writer.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_round_trip_and_append() {
        let dir = std::env::temp_dir().join(format!("halo-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        let a = HostTensor::parse("2x3xf32=1 2 3 4 5 6").unwrap();
        let b = HostTensor::parse("2xi1=01 00").unwrap();
        write(&path, &a, false).unwrap();
        write(&path, &b, true).unwrap();
        let read_back = read_all(&path).unwrap();
        assert_eq!(read_back, vec![a.clone(), b]);
        write(&path, &a, false).unwrap();
        assert_eq!(read_all(&path).unwrap(), vec![a]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn truncated_data_is_an_error() {
        let dir = std::env::temp_dir().join(format!("halo-npy-short-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        write(&path, &HostTensor::parse("4xi32=1 2 3 4").unwrap(), false).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let error = read(&path).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument, "{error}");
        assert!(error.to_string().contains("shorter"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
