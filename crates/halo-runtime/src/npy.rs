//! NumPy `.npy` files as host tensors: what `--input=@x.npy` reads and `--output=@y.npy` writes.
//!
//! Element types follow IREE's tools: `bool` is `i1`, `int8` is `si8`, `uint16` is `ui16`,
//! `float16` is `f16`, ... Data is copied as little-endian bytes; big-endian and Fortran-order
//! files are rejected rather than converted.

use halo_hal::{ElementType, Error, HostTensor, NumericalType, Result, ResultExt};
use npyz::{DType, Order, TypeChar, TypeStr, WriteOptions, WriterBuilder};
use std::io::Write;
use std::path::Path;

/// Reads every array in a `.npy` stream (files may hold several, one after another).
///
/// # Errors
/// `InvalidArgument` naming the file for a malformed header or an unsupported dtype.
pub fn read_all(path: &Path) -> Result<Vec<HostTensor>> {
    let bytes = halo_hal::file::read_regular(path)?;
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

/// Checks that the header length a `.npy` preamble declares fits in `bytes`, before the parser
/// allocates a buffer of that length (a version-2 header may claim 4 GiB in a 20-byte file).
fn check_header_length(bytes: &[u8]) -> Result<()> {
    let declared = match bytes.get(6) {
        Some(1) => bytes
            .get(8..10)
            .map(|b| (u16::from_le_bytes([b[0], b[1]]) as usize, 10)),
        Some(2 | 3) => bytes
            .get(8..12)
            .map(|b| (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)),
        _ => None,
    };
    match declared {
        Some((length, preamble)) if length > bytes.len() - preamble => Err(Error::invalid_argument(format!(
            "malformed .npy header: it declares {length} bytes of header; {} follow",
            bytes.len() - preamble
        ))),
        // Anything else is the parser's to judge.
        _ => Ok(()),
    }
}

fn read_one(bytes: &[u8]) -> Result<(HostTensor, usize)> {
    let bad = |why: String| Error::invalid_argument(why);
    check_header_length(bytes)?;
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
    let data = &bytes[header_length..];
    // Checked before copying: the shape comes from the file and may claim any size.
    let tensor_bytes = data.get(..length).map(<[u8]>::to_vec).ok_or_else(|| {
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

/// The element type of NumPy's array-interface type string (`<f4`, `|b1`), whatever its byte
/// order: the mapping `.npy` files use, for other NumPy bridges (the Python package).
///
/// # Errors
/// `InvalidArgument` for dtypes with no element type.
pub fn element_type_of_typestr(typestr: &str) -> Result<ElementType> {
    let little = match typestr.strip_prefix(['>', '=']) {
        Some(rest) => format!("<{rest}"),
        None => typestr.to_string(),
    };
    let parsed: TypeStr = little
        .parse()
        .map_err(|_| Error::invalid_argument(format!("NumPy dtype '{typestr}' has no halo element type")))?;
    element_type(&parsed)
}

/// NumPy's little-endian array-interface type string for `element_type` (`<f4`, `|b1`).
///
/// # Errors
/// `Unimplemented` for element types NumPy lacks (bf16, f8).
pub fn typestr_of(element_type: ElementType) -> Result<String> {
    type_str(element_type).map(|t| t.to_string())
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

    #[test]
    fn sizes_claimed_by_the_file_are_checked_before_allocating() {
        // A version-2 header claiming 4 GiB of header in a 20-byte file.
        let mut huge_header = b"\x93NUMPY\x02\x00".to_vec();
        huge_header.extend_from_slice(&u32::MAX.to_le_bytes());
        huge_header.extend_from_slice(b"{}{}{}{}");
        let error = read_one(&huge_header).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("declares 4294967295 bytes of header; 8 follow"),
            "{error}"
        );
        // A well-formed header whose shape claims 2^60 elements with no data behind it.
        let dir = std::env::temp_dir().join(format!("halo-npy-huge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npy");
        write(&path, &HostTensor::parse("1xi8=1").unwrap(), false).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let at = bytes.windows(5).position(|w| w == b"(1, )").unwrap();
        let huge = b"(1152921504606846976, )";
        // The header keeps its length: the longer shape takes the place of padding spaces.
        let end = bytes.iter().position(|&b| b == b'\n').unwrap();
        let mut claimed = bytes[..at].to_vec();
        claimed.extend_from_slice(huge);
        claimed.extend_from_slice(&bytes[at + 5..end - (huge.len() - 5)]);
        claimed.extend_from_slice(&bytes[end..]);
        let error = read_one(&claimed).unwrap_err();
        assert!(
            error.to_string().contains("shorter than the 1152921504606846976 bytes"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
