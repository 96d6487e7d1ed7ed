//! Element types of tensors, encoded as IREE encodes them: `(numerical_type << 24) | bit_count`.

use crate::{Error, Result};
use std::fmt;

/// The numerical interpretation of an element (the high byte of [`ElementType`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NumericalType {
    /// Opaque bytes; printed and parsed as hex.
    Unknown = 0x00,
    /// Signless integer (`i32`).
    Integer = 0x10,
    /// Signed integer (`si32`).
    IntegerSigned = 0x11,
    /// Unsigned integer (`ui32`).
    IntegerUnsigned = 0x12,
    /// Boolean stored in a byte (`i1`).
    Boolean = 0x13,
    /// IEEE-754 float (`f16`, `f32`, `f64`).
    FloatIeee = 0x21,
    /// bfloat16 (`bf16`).
    FloatBrain = 0x22,
    /// Complex number of two IEEE floats (`cf64` = `complex<f32>`).
    FloatComplex = 0x23,
    /// 8-bit float E5M2.
    Float8E5M2 = 0x24,
    /// 8-bit float E4M3FN.
    Float8E4M3Fn = 0x25,
    /// 8-bit float E5M2FNUZ.
    Float8E5M2Fnuz = 0x26,
    /// 8-bit float E4M3FNUZ.
    Float8E4M3Fnuz = 0x27,
    /// 8-bit float E8M0FNU.
    Float8E8M0Fnu = 0x28,
}

/// A tensor element type: numerical type and bit width, IREE's `iree_hal_element_type_t`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ElementType(u32);

impl ElementType {
    /// Builds the element type with `numerical_type` and `bit_count` bits.
    pub const fn new(numerical_type: NumericalType, bit_count: u8) -> Self {
        ElementType(((numerical_type as u32) << 24) | bit_count as u32)
    }

    /// Reinterprets IREE's 32-bit encoding; unknown numerical types become opaque.
    pub const fn from_raw(raw: u32) -> Self {
        ElementType(raw)
    }

    /// IREE's 32-bit encoding.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// Width of one element in bits.
    pub const fn bit_count(self) -> u32 {
        self.0 & 0xFF
    }

    /// Whether values of `self` and `other` are stored alike: the same type, or integers of one
    /// width whatever their signedness (programs treat `si32`, `ui32` and `i32` as one).
    pub fn shares_storage_with(self, other: ElementType) -> bool {
        let integer = |t: ElementType| {
            matches!(
                t.numerical_type(),
                NumericalType::Integer | NumericalType::IntegerSigned | NumericalType::IntegerUnsigned
            )
        };
        self == other || (integer(self) && integer(other) && self.bit_count() == other.bit_count())
    }

    /// The numerical interpretation.
    pub fn numerical_type(self) -> NumericalType {
        use NumericalType::*;
        match (self.0 >> 24) as u8 {
            0x10 => Integer,
            0x11 => IntegerSigned,
            0x12 => IntegerUnsigned,
            0x13 => Boolean,
            0x20 | 0x21 => FloatIeee,
            0x22 => FloatBrain,
            0x23 => FloatComplex,
            0x24 => Float8E5M2,
            0x25 => Float8E4M3Fn,
            0x26 => Float8E5M2Fnuz,
            0x27 => Float8E4M3Fnuz,
            0x28 => Float8E8M0Fnu,
            _ => Unknown,
        }
    }

    /// Bytes one element occupies in a dense buffer (sub-byte types round up to one byte).
    pub const fn byte_size(self) -> usize {
        (self.bit_count() as usize).div_ceil(8)
    }

    /// Parses IREE's spelling: `i1`, `i8`, `si32`, `ui16`, `f16`, `bf16`, `cf64`, `f8E4M3FN`, `x32`.
    pub fn parse(text: &str) -> Result<Self> {
        use NumericalType::*;
        let special = [
            ("f8E5M2", Float8E5M2),
            ("f8E4M3FN", Float8E4M3Fn),
            ("f8E5M2FNUZ", Float8E5M2Fnuz),
            ("f8E4M3FNUZ", Float8E4M3Fnuz),
            ("f8E8M0FNU", Float8E8M0Fnu),
        ];
        if text == "i1" {
            return Ok(Self::BOOL_8);
        }
        if let Some((_, numerical)) = special.iter().find(|(name, _)| *name == text) {
            return Ok(Self::new(*numerical, 8));
        }
        let prefixes = [
            ("si", IntegerSigned),
            ("ui", IntegerUnsigned),
            ("i", Integer),
            ("bf", FloatBrain),
            ("cf", FloatComplex),
            ("f", FloatIeee),
            ("x", Unknown),
            ("*", Unknown),
        ];
        let (numerical, bits) = prefixes
            .iter()
            .find_map(|(prefix, numerical)| text.strip_prefix(prefix).map(|rest| (*numerical, rest)))
            .ok_or_else(|| Error::invalid_argument(format!("unknown element type '{text}'")))?;
        let bits: u8 = bits
            .parse()
            .ok()
            .filter(|b| *b > 0)
            .ok_or_else(|| Error::invalid_argument(format!("bad bit count in element type '{text}'")))?;
        Ok(Self::new(numerical, bits))
    }

    /// `i1` booleans stored one per byte.
    pub const BOOL_8: Self = Self::new(NumericalType::Boolean, 8);
    /// Signless 8-bit integer.
    pub const INT_8: Self = Self::new(NumericalType::Integer, 8);
    /// Signless 16-bit integer.
    pub const INT_16: Self = Self::new(NumericalType::Integer, 16);
    /// Signless 32-bit integer.
    pub const INT_32: Self = Self::new(NumericalType::Integer, 32);
    /// Signless 64-bit integer.
    pub const INT_64: Self = Self::new(NumericalType::Integer, 64);
    /// IEEE half.
    pub const FLOAT_16: Self = Self::new(NumericalType::FloatIeee, 16);
    /// IEEE single.
    pub const FLOAT_32: Self = Self::new(NumericalType::FloatIeee, 32);
    /// IEEE double.
    pub const FLOAT_64: Self = Self::new(NumericalType::FloatIeee, 64);
    /// bfloat16.
    pub const BFLOAT_16: Self = Self::new(NumericalType::FloatBrain, 16);
    /// `complex<f32>`.
    pub const COMPLEX_64: Self = Self::new(NumericalType::FloatComplex, 64);
    /// `complex<f64>`.
    pub const COMPLEX_128: Self = Self::new(NumericalType::FloatComplex, 128);
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use NumericalType::*;
        let prefix = match self.numerical_type() {
            Boolean => return f.write_str("i1"),
            Float8E5M2 => return f.write_str("f8E5M2"),
            Float8E4M3Fn => return f.write_str("f8E4M3FN"),
            Float8E5M2Fnuz => return f.write_str("f8E5M2FNUZ"),
            Float8E4M3Fnuz => return f.write_str("f8E4M3FNUZ"),
            Float8E8M0Fnu => return f.write_str("f8E8M0FNU"),
            Integer => "i",
            IntegerSigned => "si",
            IntegerUnsigned => "ui",
            FloatIeee => "f",
            FloatBrain => "bf",
            FloatComplex => "cf",
            Unknown => "*",
        };
        write!(f, "{prefix}{}", self.bit_count())
    }
}

impl fmt::Debug for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ElementType({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_of_one_width_share_storage_and_other_types_do_not() {
        let signed = ElementType::new(NumericalType::IntegerSigned, 32);
        let unsigned = ElementType::new(NumericalType::IntegerUnsigned, 32);
        assert!(ElementType::INT_32.shares_storage_with(signed));
        assert!(unsigned.shares_storage_with(signed));
        assert!(!ElementType::FLOAT_32.shares_storage_with(signed));
        assert!(!ElementType::INT_16.shares_storage_with(signed));
        assert!(ElementType::FLOAT_16.shares_storage_with(ElementType::FLOAT_16));
    }

    #[test]
    fn names_round_trip() {
        for name in [
            "i1",
            "i4",
            "i8",
            "si8",
            "ui8",
            "i16",
            "si16",
            "ui16",
            "i32",
            "si32",
            "ui32",
            "i64",
            "si64",
            "ui64",
            "f16",
            "bf16",
            "f32",
            "f64",
            "cf64",
            "cf128",
            "f8E5M2",
            "f8E4M3FN",
            "f8E5M2FNUZ",
            "f8E4M3FNUZ",
            "f8E8M0FNU",
        ] {
            assert_eq!(ElementType::parse(name).unwrap().to_string(), name);
        }
    }

    #[test]
    fn encodings_match_iree() {
        assert_eq!(ElementType::FLOAT_32.raw(), 0x2100_0020);
        assert_eq!(ElementType::INT_32.raw(), 0x1000_0020);
        assert_eq!(ElementType::BOOL_8.raw(), 0x1300_0008);
        assert_eq!(ElementType::BFLOAT_16.raw(), 0x2200_0010);
        assert_eq!(ElementType::parse("i4").unwrap().byte_size(), 1);
    }

    #[test]
    fn rejects_nonsense() {
        for bad in ["", "q32", "f", "i0", "f999", "int32"] {
            assert!(ElementType::parse(bad).is_err(), "{bad}");
        }
    }
}
