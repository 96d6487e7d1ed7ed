//! Parsing and printing single elements exactly as IREE's tools do (`%G` floats, hex for opaque types).

use crate::element_type::{ElementType, NumericalType};
use crate::{Error, Result};
use half::{bf16, f16};

/// Appends the text of one element stored little-endian in `bytes` (at least one element long).
pub fn format_element(element_type: ElementType, bytes: &[u8], out: &mut String) {
    use NumericalType::*;
    let size = element_type.byte_size();
    let b = &bytes[..size];
    let int = |signed: bool| -> String {
        let mut raw = [0u8; 8];
        raw[..size].copy_from_slice(b);
        let unsigned = u64::from_le_bytes(raw);
        if signed {
            let shift = 64 - 8 * size as u32;
            (((unsigned << shift) as i64) >> shift).to_string()
        } else {
            unsigned.to_string()
        }
    };
    let text = match (element_type.numerical_type(), element_type.bit_count()) {
        (Integer | IntegerSigned, 8 | 16 | 32 | 64) => int(true),
        (IntegerUnsigned, 8 | 16 | 32 | 64) => int(false),
        (FloatIeee, 16) => format_g(f16::from_le_bytes([b[0], b[1]]).to_f64()),
        (FloatIeee, 32) => format_g(f32::from_le_bytes(b.try_into().unwrap()) as f64),
        (FloatIeee, 64) => format_g(f64::from_le_bytes(b.try_into().unwrap())),
        (FloatBrain, 16) => format_g(bf16::from_le_bytes([b[0], b[1]]).to_f64()),
        (kind @ (Float8E5M2 | Float8E4M3Fn | Float8E5M2Fnuz | Float8E4M3Fnuz | Float8E8M0Fnu), 8) => {
            format_g(f8_to_f32(kind, b[0]) as f64)
        }
        _ => b.iter().map(|byte| format!("{byte:02X}")).collect(),
    };
    out.push_str(&text);
}

/// Parses one element's text into `out` (exactly one element long), with IREE's range rules.
pub fn parse_element(element_type: ElementType, text: &str, out: &mut [u8]) -> Result<()> {
    use NumericalType::*;
    let bad = || Error::invalid_argument(format!("'{text}' is not a valid {element_type} value"));
    let bits = element_type.bit_count();
    match (element_type.numerical_type(), bits) {
        (Integer | IntegerSigned | IntegerUnsigned, 8 | 16 | 32 | 64) => {
            let value = parse_integer(text).ok_or_else(bad)?;
            let (min, max) = integer_range(element_type.numerical_type(), bits);
            if value < min || value > max {
                return Err(bad());
            }
            out.copy_from_slice(&(value as u64).to_le_bytes()[..out.len()]);
        }
        (FloatIeee, 16) => out.copy_from_slice(&f16::from_f32(parse_f32(text).ok_or_else(bad)?).to_le_bytes()),
        (FloatIeee, 32) => out.copy_from_slice(&parse_f32(text).ok_or_else(bad)?.to_le_bytes()),
        (FloatIeee, 64) => out.copy_from_slice(&parse_f64(text).ok_or_else(bad)?.to_le_bytes()),
        (FloatBrain, 16) => out.copy_from_slice(&bf16::from_f32(parse_f32(text).ok_or_else(bad)?).to_le_bytes()),
        (kind @ (Float8E5M2 | Float8E4M3Fn | Float8E5M2Fnuz | Float8E4M3Fnuz | Float8E8M0Fnu), 8) => {
            out[0] = f32_to_f8(kind, parse_f32(text).ok_or_else(bad)?);
        }
        _ => {
            // Opaque and boolean elements are written as hex bytes, two digits per byte.
            if text.len() != out.len() * 2 || !text.is_ascii() {
                return Err(Error::invalid_argument(format!(
                    "'{text}' is not {} hex digits for a {element_type} element",
                    out.len() * 2
                )));
            }
            for (i, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
            }
        }
    }
    Ok(())
}

fn integer_range(kind: NumericalType, bits: u32) -> (i128, i128) {
    let umax = (1i128 << bits) - 1;
    let smin = -(1i128 << (bits - 1));
    let smax = (1i128 << (bits - 1)) - 1;
    match kind {
        NumericalType::IntegerSigned => (smin, smax),
        NumericalType::IntegerUnsigned => (0, umax),
        // Signless integers take either interpretation.
        _ => (smin, umax),
    }
}

fn parse_integer(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let magnitude = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => i128::from_str_radix(hex, 16).ok()?,
        None if digits.bytes().all(|c| c.is_ascii_digit()) && !digits.is_empty() => digits.parse().ok()?,
        None => return None,
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn parse_f64(text: &str) -> Option<f64> {
    text.parse::<f64>().ok()
}

fn parse_f32(text: &str) -> Option<f32> {
    text.parse::<f32>().ok()
}

/// Formats like C's `printf("%G")`: six significant digits, trailing zeros dropped.
pub fn format_g(value: f64) -> String {
    const PRECISION: i32 = 6;
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-NAN".into()
        } else {
            "NAN".into()
        };
    }
    if value.is_infinite() {
        return if value < 0.0 { "-INF".into() } else { "INF".into() };
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let scientific = format!("{:.*e}", (PRECISION - 1) as usize, value);
    let (mantissa, exponent) = scientific.split_once('e').expect("exponent form");
    let exponent: i32 = exponent.parse().expect("exponent digits");
    if (-4..PRECISION).contains(&exponent) {
        let fixed = format!("{:.*}", (PRECISION - 1 - exponent) as usize, value);
        strip_fraction_zeros(&fixed).to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}E{sign}{:02}", strip_fraction_zeros(mantissa), exponent.abs())
    }
}

fn strip_fraction_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Layout of an 8-bit float: exponent and mantissa widths, bias, and how it spells special values.
struct F8Layout {
    exponent_bits: u32,
    mantissa_bits: u32,
    bias: i32,
    /// Finite-only types: all-ones is NaN rather than infinity.
    has_infinity: bool,
    /// FNUZ types: the single NaN is 0x80 and there is no negative zero.
    nan_is_negative_zero: bool,
}

fn f8_layout(kind: NumericalType) -> F8Layout {
    let (exponent_bits, mantissa_bits, bias, has_infinity, nan_is_negative_zero) = match kind {
        NumericalType::Float8E5M2 => (5, 2, 15, true, false),
        NumericalType::Float8E4M3Fn => (4, 3, 7, false, false),
        NumericalType::Float8E5M2Fnuz => (5, 2, 16, false, true),
        NumericalType::Float8E4M3Fnuz => (4, 3, 8, false, true),
        _ => (8, 0, 127, false, false),
    };
    F8Layout {
        exponent_bits,
        mantissa_bits,
        bias,
        has_infinity,
        nan_is_negative_zero,
    }
}

/// Decodes an 8-bit float of kind `kind` to f32.
pub fn f8_to_f32(kind: NumericalType, code: u8) -> f32 {
    let layout = f8_layout(kind);
    if kind == NumericalType::Float8E8M0Fnu {
        return if code == 0xFF {
            f32::NAN
        } else {
            2f32.powi(code as i32 - 127)
        };
    }
    if layout.nan_is_negative_zero && code == 0x80 {
        return f32::NAN;
    }
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent_max = (1u32 << layout.exponent_bits) - 1;
    let exponent = (code as u32 >> layout.mantissa_bits) & exponent_max;
    let mantissa = code as u32 & ((1 << layout.mantissa_bits) - 1);
    let mantissa_scale = (1u32 << layout.mantissa_bits) as f32;
    if layout.has_infinity && exponent == exponent_max {
        return if mantissa == 0 { sign * f32::INFINITY } else { f32::NAN };
    }
    if !layout.has_infinity && !layout.nan_is_negative_zero && code & 0x7F == 0x7F {
        return f32::NAN;
    }
    if exponent == 0 {
        sign * (mantissa as f32 / mantissa_scale) * 2f32.powi(1 - layout.bias)
    } else {
        sign * (1.0 + mantissa as f32 / mantissa_scale) * 2f32.powi(exponent as i32 - layout.bias)
    }
}

/// Encodes f32 as the nearest 8-bit float of kind `kind` (ties to even; finite overflow saturates
/// to the largest finite value; infinity stays infinity where the type has one).
pub fn f32_to_f8(kind: NumericalType, value: f32) -> u8 {
    if value.is_nan() {
        return (0..=255u8).find(|c| f8_to_f32(kind, *c).is_nan()).unwrap_or(0xFF);
    }
    if let Some(code) = (0..=255u8).find(|c| value.is_infinite() && f8_to_f32(kind, *c) == value) {
        return code;
    }
    let mut best: Option<(u8, f32)> = None;
    for code in 0..=255u8 {
        let decoded = f8_to_f32(kind, code);
        if !decoded.is_finite() {
            continue;
        }
        let distance = (decoded - value).abs();
        let better = match best {
            None => true,
            Some((best_code, best_distance)) => {
                distance < best_distance || (distance == best_distance && code & 1 == 0 && best_code & 1 == 1)
            }
        };
        if better {
            best = Some((code, distance));
        }
    }
    best.map(|(code, _)| code).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(element_type: &str, bytes: &[u8]) -> String {
        let mut out = String::new();
        format_element(ElementType::parse(element_type).unwrap(), bytes, &mut out);
        out
    }

    #[test]
    fn g_format_matches_printf() {
        // Expected strings are what glibc's printf("%G") prints (checked against iree-run-module).
        let cases = [
            (0.1f32 as f64, "0.1"),
            (1e-7f32 as f64, "1E-07"),
            (123456789f32 as f64, "1.23457E+08"),
            (-0.0, "-0"),
            (f64::INFINITY, "INF"),
            (f64::NAN, "NAN"),
            (1.5, "1.5"),
            (-3.0, "-3"),
            (100000.0, "100000"),
            (1000000.0, "1E+06"),
            (0.0001, "0.0001"),
            (0.00001, "1E-05"),
            (3.296875, "3.29688"),
            (9999995.0, "1E+07"),
            (1e100, "1E+100"),
        ];
        for (value, expected) in cases {
            assert_eq!(format_g(value), expected, "{value}");
        }
    }

    #[test]
    fn integers_wrap_like_iree() {
        let mut out = [0u8; 1];
        parse_element(ElementType::INT_8, "200", &mut out).unwrap();
        assert_eq!(fmt("i8", &out), "-56");
        assert_eq!(fmt("ui8", &out), "200");
        assert!(parse_element(ElementType::INT_8, "256", &mut out).is_err());
        assert!(parse_element(ElementType::parse("si8").unwrap(), "128", &mut out).is_err());
        assert!(parse_element(ElementType::parse("ui8").unwrap(), "-1", &mut out).is_err());
    }

    #[test]
    fn booleans_and_opaque_are_hex() {
        let mut out = [0u8; 1];
        parse_element(ElementType::BOOL_8, "01", &mut out).unwrap();
        assert_eq!(out, [1]);
        assert!(parse_element(ElementType::BOOL_8, "1", &mut out).is_err());
        assert_eq!(fmt("cf64", &[1, 2, 3, 4, 0, 0, 0x80, 0x3f]), "010203040000803F");
    }

    #[test]
    fn half_types() {
        let mut out = [0u8; 2];
        parse_element(ElementType::BFLOAT_16, "1e10", &mut out).unwrap();
        assert_eq!(fmt("bf16", &out), "9.99922E+09");
        parse_element(ElementType::FLOAT_16, "0.1", &mut out).unwrap();
        assert_eq!(fmt("f16", &out), "0.0999756");
    }

    #[test]
    fn f8_round_trips_every_code() {
        for kind in [
            NumericalType::Float8E5M2,
            NumericalType::Float8E4M3Fn,
            NumericalType::Float8E5M2Fnuz,
            NumericalType::Float8E4M3Fnuz,
        ] {
            for code in 0..=255u8 {
                let value = f8_to_f32(kind, code);
                if value.is_nan() || value == 0.0 {
                    continue;
                }
                assert_eq!(f32_to_f8(kind, value), code, "{kind:?} {code:#x}");
            }
        }
        assert_eq!(f8_to_f32(NumericalType::Float8E4M3Fn, 0x7E), 448.0);
        assert_eq!(f8_to_f32(NumericalType::Float8E5M2, 0x7B), 57344.0);
    }
}
