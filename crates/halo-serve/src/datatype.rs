//! The protocol's tensor datatypes (`FP32`, `INT64`, `BOOL`, ...), the element types they carry,
//! and JSON numbers in and out of little-endian element bytes.

use crate::json_data::JsonScalar;
use half::{bf16, f16};
use halo_hal::{ElementType, Error, NumericalType, Result};
use serde::ser::{Serialize, SerializeSeq, Serializer};
use serde_json::Value;

/// The protocol's name for `element_type`, if it has one (signless integers are `INT`).
pub fn datatype_of(element_type: ElementType) -> Option<&'static str> {
    use NumericalType::*;
    Some(match (element_type.numerical_type(), element_type.bit_count()) {
        (Boolean, 8) => "BOOL",
        (IntegerUnsigned, 8) => "UINT8",
        (IntegerUnsigned, 16) => "UINT16",
        (IntegerUnsigned, 32) => "UINT32",
        (IntegerUnsigned, 64) => "UINT64",
        (Integer | IntegerSigned, 8) => "INT8",
        (Integer | IntegerSigned, 16) => "INT16",
        (Integer | IntegerSigned, 32) => "INT32",
        (Integer | IntegerSigned, 64) => "INT64",
        (FloatIeee, 16) => "FP16",
        (FloatIeee, 32) => "FP32",
        (FloatIeee, 64) => "FP64",
        (FloatBrain, 16) => "BF16",
        _ => return None,
    })
}

/// Appends `value`, a JSON number (or boolean for `BOOL`), as one element of `element_type`.
///
/// # Errors
/// `InvalidArgument` when the value is not a number the type can hold.
pub fn push_json_element(element_type: ElementType, value: &JsonScalar, out: &mut Vec<u8>) -> Result<()> {
    use NumericalType::*;
    let wrong = || {
        Error::invalid_argument(format!(
            "{value} is not a {} value",
            datatype_of(element_type).unwrap_or("supported")
        ))
    };
    let integer = |min: i128, max: i128| -> Result<i128> {
        let number = value.as_i128().ok_or_else(wrong)?;
        (min..=max).contains(&number).then_some(number).ok_or_else(wrong)
    };
    let float = || value.as_f64().ok_or_else(wrong);
    match (element_type.numerical_type(), element_type.bit_count()) {
        (Boolean, 8) => out.push(u8::from(value.as_bool().ok_or_else(wrong)?)),
        (IntegerUnsigned, bits @ (8 | 16 | 32 | 64)) => {
            let number = integer(0, (1i128 << bits) - 1)? as u64;
            out.extend_from_slice(&number.to_le_bytes()[..bits as usize / 8]);
        }
        (Integer | IntegerSigned, bits @ (8 | 16 | 32 | 64)) => {
            let number = integer(-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)? as i64;
            out.extend_from_slice(&number.to_le_bytes()[..bits as usize / 8]);
        }
        (FloatIeee, 16) => out.extend_from_slice(&f16::from_f64(float()?).to_le_bytes()),
        (FloatIeee, 32) => out.extend_from_slice(&(float()? as f32).to_le_bytes()),
        (FloatIeee, 64) => out.extend_from_slice(&float()?.to_le_bytes()),
        (FloatBrain, 16) => out.extend_from_slice(&bf16::from_f64(float()?).to_le_bytes()),
        _ => return Err(wrong()),
    }
    Ok(())
}

/// A tensor's elements as a flat JSON array (booleans for `BOOL`, numbers otherwise; a float
/// JSON cannot hold, NaN or infinite, as `null`), written straight from their bytes: a JSON
/// value per element is made only as it is written.
#[derive(Debug)]
pub struct JsonElements {
    element_type: ElementType,
    bytes: Vec<u8>,
}

impl JsonElements {
    /// `bytes` as elements of `element_type`.
    ///
    /// # Errors
    /// `Unimplemented` for an element type the protocol has no datatype for.
    pub fn new(element_type: ElementType, bytes: Vec<u8>) -> Result<Self> {
        if datatype_of(element_type).is_none() {
            return Err(Error::unimplemented(format!(
                "the protocol has no datatype for {element_type:?}"
            )));
        }
        Ok(JsonElements { element_type, bytes })
    }

    /// The elements as JSON values, in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = Value> + '_ {
        self.elements().map(|element| match element {
            Element::Bool(value) => Value::Bool(value),
            Element::Unsigned(value) => value.into(),
            Element::Signed(value) => value.into(),
            Element::Float(value) => value.into(),
        })
    }

    /// The elements, in order.
    pub fn elements(&self) -> impl ExactSizeIterator<Item = Element> + '_ {
        use NumericalType::*;
        let kind = (self.element_type.numerical_type(), self.element_type.bit_count());
        // `new` took only types with a datatype: 1 to 8 bytes each.
        self.bytes
            .chunks_exact(self.element_type.byte_size())
            .map(move |chunk| {
                let mut wide = [0u8; 8];
                wide[..chunk.len()].copy_from_slice(chunk);
                let unsigned = u64::from_le_bytes(wide);
                let signed = |bits: u32| ((unsigned << (64 - bits)) as i64) >> (64 - bits);
                match kind {
                    (Boolean, _) => Element::Bool(unsigned != 0),
                    (IntegerUnsigned, _) => Element::Unsigned(unsigned),
                    (Integer | IntegerSigned, bits) => Element::Signed(signed(bits)),
                    (FloatIeee, 16) => Element::Float(f16::from_bits(unsigned as u16).to_f64()),
                    (FloatIeee, 32) => Element::Float(f64::from(f32::from_bits(unsigned as u32))),
                    (FloatBrain, 16) => Element::Float(bf16::from_bits(unsigned as u16).to_f64()),
                    _ => Element::Float(f64::from_bits(unsigned)),
                }
            })
    }
}

/// One element read from its bytes, in the widest type of its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Element {
    /// A `BOOL`.
    Bool(bool),
    /// A `UINT*`.
    Unsigned(u64),
    /// An `INT*`.
    Signed(i64),
    /// An `FP*` or `BF16`.
    Float(f64),
}

/// `FP32` elements are written in the shortest form that reads back as the same `f32`
/// (`0.1`, not the `f64` form `0.10000000149011612`): half the text, and faster to write and to
/// read. A client reading them as the datatype says gets the exact values.
impl Serialize for JsonElements {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let is_f32 =
            (self.element_type.numerical_type(), self.element_type.bit_count()) == (NumericalType::FloatIeee, 32);
        if !is_f32 {
            return serializer.collect_seq(self.values());
        }
        let mut sequence = serializer.serialize_seq(Some(self.bytes.len() / 4))?;
        for chunk in self.bytes.chunks_exact(4) {
            let value = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            // JSON has no NaN or infinities; serde_json writes them as `null` for any float.
            sequence.serialize_element(&value)?;
        }
        sequence.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str, values: &[Value]) -> Vec<Value> {
        let element_type = ElementType::parse(text).expect("element type");
        let mut bytes = Vec::new();
        for value in values {
            push_json_element(element_type, &value.clone().into(), &mut bytes).expect("encodes");
        }
        assert_eq!(bytes.len(), values.len() * element_type.byte_size());
        JsonElements::new(element_type, bytes)
            .expect("a datatype")
            .values()
            .collect()
    }

    #[test]
    fn every_datatype_round_trips_its_extremes() {
        let cases: &[(&str, &str, Vec<Value>)] = &[
            ("i1", "BOOL", vec![true.into(), false.into()]),
            ("ui8", "UINT8", vec![0.into(), 255.into()]),
            ("ui64", "UINT64", vec![0.into(), u64::MAX.into()]),
            ("i8", "INT8", vec![(-128).into(), 127.into()]),
            ("si16", "INT16", vec![(-32768).into(), 32767.into()]),
            ("i32", "INT32", vec![i32::MIN.into(), i32::MAX.into()]),
            ("i64", "INT64", vec![i64::MIN.into(), i64::MAX.into()]),
            ("f16", "FP16", vec![0.5.into(), (-65504.0).into()]),
            ("bf16", "BF16", vec![1.5.into(), (-2.0).into()]),
            ("f32", "FP32", vec![0.25.into(), (-3.5).into()]),
            ("f64", "FP64", vec![1e300.into(), (-0.1).into()]),
        ];
        for (text, datatype, values) in cases {
            let element_type = ElementType::parse(text).expect("element type");
            assert_eq!(datatype_of(element_type), Some(*datatype));
            assert_eq!(&round_trip(text, values), values, "{text}");
        }
    }

    #[test]
    fn fp32_elements_are_written_in_their_shortest_form() {
        let values = [0.1f32, -3.4028235e38, 1e-45, f32::NAN, f32::INFINITY, 16777216.0];
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let elements = JsonElements::new(ElementType::parse("f32").expect("f32"), bytes).expect("FP32");
        let text = serde_json::to_string(&elements).expect("json");
        assert_eq!(text, "[0.1,-3.4028235e+38,1e-45,null,null,16777216.0]");
        let read: Vec<Option<f32>> = serde_json::from_str(&text).expect("numbers");
        for (value, read) in values.iter().zip(read) {
            assert_eq!(
                read.map(f32::to_bits),
                value.is_finite().then(|| value.to_bits()),
                "{value}"
            );
        }
    }

    #[test]
    fn values_a_type_cannot_hold_are_refused_by_name() {
        let mut out = Vec::new();
        for (text, value) in [
            ("ui8", Value::from(256)),
            ("i8", Value::from(-129)),
            ("i32", Value::from(1.5)),
            ("f32", Value::from("1")),
            ("i1", Value::from(1)),
        ] {
            let element_type = ElementType::parse(text).expect("element type");
            let error = push_json_element(element_type, &value.clone().into(), &mut out).expect_err(text);
            assert!(error.to_string().contains(&value.to_string()), "{error}");
        }
        assert!(out.is_empty());
    }
}
