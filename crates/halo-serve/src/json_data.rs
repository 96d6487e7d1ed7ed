//! A tensor's JSON `data`, read straight into a flat row-major list of scalars.
//!
//! Reading it as a `serde_json::Value` built a tree node per element and a vector per nested
//! array, which cost more than parsing the numbers: a 12,288-element FP32 input took about 1 ms
//! more per request over JSON than over binary tensors. Nested arrays are flattened as they are
//! read, and a number takes 16 bytes.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// One element of a tensor's JSON data, as the request wrote it.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonScalar {
    /// `true` or `false`.
    Bool(bool),
    /// A negative integer.
    Int(i64),
    /// A non-negative integer.
    UInt(u64),
    /// A number with a fraction or an exponent.
    Float(f64),
    /// Anything else (a string, `null`, an object): kept to name it in the error.
    Other(Value),
}

impl JsonScalar {
    /// The element as a boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            JsonScalar::Bool(value) => Some(*value),
            _ => None,
        }
    }

    /// The element as an integer, if it is one.
    pub fn as_i128(&self) -> Option<i128> {
        match self {
            JsonScalar::Int(value) => Some((*value).into()),
            JsonScalar::UInt(value) => Some((*value).into()),
            _ => None,
        }
    }

    /// The element as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            JsonScalar::Int(value) => Some(*value as f64),
            JsonScalar::UInt(value) => Some(*value as f64),
            JsonScalar::Float(value) => Some(*value),
            _ => None,
        }
    }
}

impl From<Value> for JsonScalar {
    fn from(value: Value) -> Self {
        match value {
            Value::Bool(value) => JsonScalar::Bool(value),
            Value::Number(ref number) => {
                if let Some(value) = number.as_u64() {
                    JsonScalar::UInt(value)
                } else if let Some(value) = number.as_i64() {
                    JsonScalar::Int(value)
                } else {
                    number.as_f64().map_or(JsonScalar::Other(value), JsonScalar::Float)
                }
            }
            other => JsonScalar::Other(other),
        }
    }
}

/// As JSON writes it, for error messages.
impl fmt::Display for JsonScalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonScalar::Bool(value) => write!(f, "{value}"),
            JsonScalar::Int(value) => write!(f, "{value}"),
            JsonScalar::UInt(value) => write!(f, "{value}"),
            JsonScalar::Float(value) => write!(f, "{}", Value::from(*value)),
            JsonScalar::Other(value) => write!(f, "{value}"),
        }
    }
}

/// The elements of a tensor's JSON `data`: a scalar, or arrays nested to any depth, flattened in
/// row-major order.
#[derive(Debug, Default, PartialEq)]
pub struct JsonData(pub Vec<JsonScalar>);

impl<'de> Deserialize<'de> for JsonData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut scalars = Vec::new();
        Flatten(&mut scalars).deserialize(deserializer)?;
        Ok(JsonData(scalars))
    }
}

/// Appends the scalars of one JSON value (an array's, depth first) to the list it holds.
struct Flatten<'a>(&'a mut Vec<JsonScalar>);

impl<'de> DeserializeSeed<'de> for Flatten<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Flatten<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor elements: a scalar or nested arrays of scalars")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<(), E> {
        self.0.push(JsonScalar::Bool(value));
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<(), E> {
        self.0.push(match u64::try_from(value) {
            Ok(value) => JsonScalar::UInt(value),
            Err(_) => JsonScalar::Int(value),
        });
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<(), E> {
        self.0.push(JsonScalar::UInt(value));
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<(), E> {
        self.0.push(JsonScalar::Float(value));
        Ok(())
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        self.0.push(JsonScalar::Other(Value::String(value.to_string())));
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.push(JsonScalar::Other(Value::Null));
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Flatten(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let object = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.0.push(JsonScalar::Other(object));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<JsonScalar> {
        serde_json::from_str::<JsonData>(text).expect(text).0
    }

    #[test]
    fn nested_arrays_flatten_in_row_major_order() {
        use JsonScalar::*;
        assert_eq!(
            read("[[1, -2], [2.5, [true]], []]"),
            [UInt(1), Int(-2), Float(2.5), Bool(true)]
        );
        assert_eq!(read("7"), [UInt(7)], "a scalar stands for itself");
        assert_eq!(read("[]"), []);
    }

    #[test]
    fn anything_else_is_kept_to_be_named() {
        let scalars = read(r#"[1, "a", null, {"x": 3}]"#);
        let shown: Vec<String> = scalars.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["1", "\"a\"", "null", "{\"x\":3}"]);
        assert_eq!(scalars[1].as_f64(), None);
    }

    #[test]
    fn numbers_read_as_the_widest_kind_that_holds_them() {
        use JsonScalar::*;
        assert_eq!(
            read(&format!("[{}, {}, 1e3]", u64::MAX, i64::MIN)),
            [UInt(u64::MAX), Int(i64::MIN), Float(1000.0)]
        );
        assert_eq!(JsonScalar::from(serde_json::json!(-3)), Int(-3));
        assert_eq!(JsonScalar::from(serde_json::json!(0.5)).as_f64(), Some(0.5));
        assert_eq!(UInt(5).as_i128(), Some(5));
        assert_eq!(Float(5.0).as_i128(), None, "a float is no integer");
    }

    #[test]
    fn deeper_nesting_than_json_allows_is_an_error_not_a_crash() {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(serde_json::from_str::<JsonData>(&deep).is_err());
    }
}
