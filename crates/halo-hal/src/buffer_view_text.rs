//! IREE's buffer view text format: `2x3xf32=[1 2 3][4 5 6]`, `i32=7`, splats such as `4xf32=1`.

use crate::element_text::{format_element, parse_element};
use crate::element_type::ElementType;
use crate::{Error, Result, ResultExt};

/// A dense row-major tensor held in host memory: what a buffer view's text describes.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    /// Dimensions, outermost first; empty for a scalar.
    pub shape: Vec<u64>,
    /// Type of every element.
    pub element_type: ElementType,
    /// Little-endian element bytes, `element_count * element_type.byte_size()` long.
    pub bytes: Vec<u8>,
}

/// Ranks above this are rejected as malformed input rather than allocated.
const MAX_RANK: usize = 128;

impl HostTensor {
    /// Number of elements (1 for a scalar).
    pub fn element_count(&self) -> u64 {
        element_count(&self.shape)
    }

    /// Parses IREE's text form; a single value fills the whole tensor, no values mean zeros.
    ///
    /// # Errors
    /// `InvalidArgument` naming the text when the shape, type or a value is malformed;
    /// `OutOfRange` when the number of values does not match the shape.
    pub fn parse(text: &str) -> Result<HostTensor> {
        parse_tensor(text).with_context(|| format!("parsing buffer view '{text}'"))
    }

    /// Prints like `iree-run-module`, eliding past `max_elements` elements with `...`.
    pub fn format(&self, max_elements: usize) -> String {
        format_tensor(&self.shape, self.element_type, &self.bytes, max_elements)
    }
}

/// Product of dims, 1 for rank 0; `u64::MAX` when it overflows (shapes come from requests and
/// programs, and no data can match that many elements).
pub fn element_count(shape: &[u64]) -> u64 {
    checked_element_count(shape).unwrap_or(u64::MAX)
}

/// Product of dims, 1 for rank 0; `None` when it overflows (a dimension of 0 makes it 0 however
/// large the others are).
pub fn checked_element_count(shape: &[u64]) -> Option<u64> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1u64, |count, &dim| count.checked_mul(dim))
}

/// Splits `AxBxT` into a shape and an element type the way IREE does (at the last `x`).
pub fn parse_shape_and_type(text: &str) -> Result<(Vec<u64>, ElementType)> {
    let text = text.trim().trim_matches('"');
    if text.is_empty() {
        return Err(Error::invalid_argument("empty shape and element type"));
    }
    let (shape_text, type_text) = match text.rfind('x') {
        Some(index) if index > 0 && text[..index].bytes().all(|c| c.is_ascii_digit() || c == b'x') => {
            (&text[..index], &text[index + 1..])
        }
        _ => ("", text),
    };
    Ok((parse_shape(shape_text)?, ElementType::parse(type_text)?))
}

/// Parses `2x3x4`; an empty string is a scalar shape.
pub fn parse_shape(text: &str) -> Result<Vec<u64>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let shape = text
        .split('x')
        .map(|dim| {
            dim.parse::<u64>()
                .map_err(|_| Error::invalid_argument(format!("shape dimension '{dim}' of '{text}' is not a number")))
        })
        .collect::<Result<Vec<_>>>()?;
    if shape.len() > MAX_RANK {
        return Err(Error::invalid_argument(format!(
            "shape '{text}' has rank {} > {MAX_RANK}",
            shape.len()
        )));
    }
    Ok(shape)
}

fn parse_tensor(text: &str) -> Result<HostTensor> {
    let text = text.trim().trim_matches('"');
    let (head, data) = text.split_once('=').unwrap_or((text, ""));
    let (shape, element_type) = parse_shape_and_type(head)?;
    let count =
        checked_element_count(&shape).ok_or_else(|| Error::invalid_argument(format!("shape {shape:?} overflows")))?;
    let size = element_type.byte_size();
    let byte_length = count
        .checked_mul(size as u64)
        .filter(|n| *n <= isize::MAX as u64)
        .ok_or_else(|| Error::resource_exhausted(format!("tensor {head} is too large")))?
        as usize;
    let mut bytes = crate::host_memory::zeroed_vec(byte_length, &format!("tensor {head}"))?;
    let tokens: Vec<&str> = data
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '[' | ']'))
        .filter(|t| !t.is_empty())
        .collect();
    match tokens.len() {
        0 => {}
        1 if count > 0 => {
            parse_element(element_type, tokens[0], &mut bytes[..size])?;
            let (first, rest) = bytes.split_at_mut(size);
            for chunk in rest.chunks_exact_mut(size) {
                chunk.copy_from_slice(first);
            }
        }
        n if n as u64 == count => {
            for (token, chunk) in tokens.iter().zip(bytes.chunks_exact_mut(size)) {
                parse_element(element_type, token, chunk)?;
            }
        }
        n => {
            return Err(Error::out_of_range(format!(
                "{n} values given for {count} elements of {head}"
            )));
        }
    }
    Ok(HostTensor {
        shape,
        element_type,
        bytes,
    })
}

/// Prints a dense tensor like `iree-run-module`: `2x2xi32=[1 2][3 4]`.
pub fn format_tensor(shape: &[u64], element_type: ElementType, bytes: &[u8], max_elements: usize) -> String {
    let mut out = String::new();
    for dim in shape {
        out.push_str(&dim.to_string());
        out.push('x');
    }
    out.push_str(&element_type.to_string());
    out.push('=');
    let mut budget = max_elements as u64;
    let leaf_shape: &[u64] = if shape.is_empty() { &[1] } else { shape };
    format_level(leaf_shape, element_type, bytes, &mut budget, &mut out);
    out
}

fn format_level(shape: &[u64], element_type: ElementType, bytes: &[u8], budget: &mut u64, out: &mut String) {
    let size = element_type.byte_size();
    if shape.len() > 1 {
        let stride = element_count(&shape[1..]) as usize * size;
        for i in 0..shape[0] as usize {
            out.push('[');
            let start = (i * stride).min(bytes.len());
            format_level(&shape[1..], element_type, &bytes[start..], budget, out);
            out.push(']');
        }
        return;
    }
    let shown = shape[0].min(*budget);
    *budget -= shown;
    for i in 0..shown as usize {
        if i > 0 {
            out.push(' ');
        }
        format_element(element_type, &bytes[i * size..], out);
    }
    if shown < shape[0] {
        out.push_str("...");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(text: &str) -> String {
        HostTensor::parse(text).unwrap().format(1024)
    }

    #[test]
    fn element_counts_that_overflow_are_named_not_wrapped() {
        assert_eq!(element_count(&[]), 1);
        assert_eq!(element_count(&[2, 3]), 6);
        let huge = [1 << 32, 1 << 32];
        assert_eq!(checked_element_count(&huge), None);
        assert_eq!(element_count(&huge), u64::MAX, "saturates instead of wrapping to 0");
        assert_eq!(
            checked_element_count(&[1 << 32, 1 << 32, 0]),
            Some(0),
            "a zero dimension wins"
        );
        assert!(HostTensor::parse("4294967296x4294967296xf32").is_err());
    }

    #[test]
    fn prints_like_iree_run_module() {
        assert_eq!(round_trip("2x3xf32=1,2,3,4,5,6"), "2x3xf32=[1 2 3][4 5 6]");
        assert_eq!(round_trip("i32=-7"), "i32=-7");
        assert_eq!(round_trip("4xf32=1"), "4xf32=1 1 1 1");
        assert_eq!(round_trip("3xi8"), "3xi8=0 0 0");
        assert_eq!(round_trip("4xi1=01 00 01 01"), "4xi1=01 00 01 01");
        assert_eq!(round_trip("2x2xbf16=[1.5 -3][0.25 2]"), "2x2xbf16=[1.5 -3][0.25 2]");
        assert_eq!(round_trip("0xf32"), "0xf32=");
        assert_eq!(round_trip("2x0x3xi32"), "2x0x3xi32=[][]");
    }

    #[test]
    fn elides_past_the_budget() {
        let tensor = HostTensor::parse("2x3xi32=1 2 3 4 5 6").unwrap();
        assert_eq!(tensor.format(4), "2x3xi32=[1 2 3][4...]");
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "4xq32=1",
            "axf32",
            "2xf32=1 2 3",
            "3xf32=1 2",
            "2xi32=1 zz",
            "4x?xf32",
        ] {
            let err = HostTensor::parse(bad).unwrap_err();
            assert!(err.to_string().contains("parsing buffer view"), "{bad}: {err}");
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in ".{0,40}") {
            let _ = HostTensor::parse(&text);
        }

        #[test]
        fn i32_values_round_trip(values in proptest::collection::vec(any::<i32>(), 2..20)) {
            let text = format!(
                "{}xi32={}",
                values.len(),
                values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ")
            );
            prop_assert_eq!(round_trip(&text), text);
        }

        #[test]
        fn f32_text_reparses_to_close_value(value in -1e30f32..1e30f32) {
            let text = format!("f32={value:e}");
            let printed = round_trip(&text);
            let reparsed = HostTensor::parse(&printed).unwrap();
            let back = f32::from_le_bytes(reparsed.bytes[..4].try_into().unwrap());
            prop_assert!((back - value).abs() <= value.abs() * 1e-5);
        }
    }
}
