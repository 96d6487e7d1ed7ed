//! A tensor's JSON `data` array read straight from its text into little-endian element bytes.
//!
//! Through serde, every number became a tagged value before it became an element, and a
//! 12,288-float FP32 request cost the server about 3 ns a byte of JSON: more than the model took
//! to run. This reads the array's text once, checks its grammar as it goes and writes each
//! element in place. It takes numbers only: anything else (booleans, strings, `null`, a fraction
//! for an integer type, a value out of the type's range, more elements than wanted) makes it give
//! up, so that the general reader ([`crate::json_data`]) names what was wrong.

use half::{bf16, f16};
use halo_hal::{ElementType, NumericalType};

/// How the numbers of one element type become bytes.
#[derive(Debug, Clone, Copy)]
enum Element {
    F16,
    Bf16,
    F32,
    F64,
    Signed { bytes: usize },
    Unsigned { bytes: usize },
}

impl Element {
    fn of(element_type: ElementType) -> Option<Element> {
        use NumericalType::*;
        let bits = element_type.bit_count();
        let bytes = bits as usize / 8;
        Some(match (element_type.numerical_type(), bits) {
            (FloatIeee, 16) => Element::F16,
            (FloatBrain, 16) => Element::Bf16,
            (FloatIeee, 32) => Element::F32,
            (FloatIeee, 64) => Element::F64,
            (Integer | IntegerSigned, 8 | 16 | 32 | 64) => Element::Signed { bytes },
            (IntegerUnsigned, 8 | 16 | 32 | 64) => Element::Unsigned { bytes },
            _ => return None,
        })
    }

    /// Appends `number` as one element, or `None` when the type cannot hold it.
    #[inline(always)]
    fn push(self, number: &Number, token: &[u8], out: &mut Vec<u8>) -> Option<()> {
        match self {
            Element::F32 => out.extend_from_slice(&number.to_f32(token)?.to_le_bytes()),
            Element::F64 => out.extend_from_slice(&number.to_f64(token)?.to_le_bytes()),
            Element::F16 => out.extend_from_slice(&f16::from_f64(number.to_f64(token)?).to_le_bytes()),
            Element::Bf16 => out.extend_from_slice(&bf16::from_f64(number.to_f64(token)?).to_le_bytes()),
            Element::Signed { bytes } => {
                let value = number.to_integer()?;
                let half = 1i128 << (bytes * 8 - 1);
                (-half..half).contains(&value).then_some(())?;
                out.extend_from_slice(&(value as i64).to_le_bytes()[..bytes]);
            }
            Element::Unsigned { bytes } => {
                let value = number.to_integer()?;
                (0..1i128 << (bytes * 8)).contains(&value).then_some(())?;
                out.extend_from_slice(&(value as u64).to_le_bytes()[..bytes]);
            }
        }
        Some(())
    }
}

/// Appends the elements of `text`, a JSON array of numbers nested to any depth (flattened in
/// row-major order), to `out` as elements of `element_type`; `None` when the text is anything
/// else, holds a number the type cannot hold, or holds more than `limit` elements. On `None`,
/// `out` may hold some of the elements.
pub fn read_array(text: &[u8], element_type: ElementType, limit: u64, out: &mut Vec<u8>) -> Option<u64> {
    let element = Element::of(element_type)?;
    let mut at = skip_space(text, 0);
    if text.get(at) != Some(&b'[') {
        return None;
    }
    let (mut depth, mut count) = (0u64, 0u64);
    // After `[` or `,` a value comes next; right after `[` the array may also end.
    let (mut value_next, mut may_close) = (true, true);
    loop {
        at = skip_space(text, at);
        match *text.get(at)? {
            b'[' if value_next => {
                depth += 1;
                may_close = true;
                at += 1;
            }
            b']' if !value_next || may_close => {
                depth -= 1;
                (value_next, may_close) = (false, false);
                at += 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if !value_next => {
                (value_next, may_close) = (true, false);
                at += 1;
            }
            b'-' | b'0'..=b'9' if value_next => {
                let (number, end) = Number::scan(text, at)?;
                count += 1;
                if count > limit {
                    return None;
                }
                element.push(&number, &text[at..end], out)?;
                (value_next, may_close) = (false, false);
                at = end;
            }
            _ => return None,
        }
    }
    (skip_space(text, at) == text.len()).then_some(count)
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = text.get(at) {
        at += 1;
    }
    at
}

/// A JSON number taken apart: `±mantissa × 10^exponent`, exact unless `inexact`.
#[derive(Debug)]
struct Number {
    negative: bool,
    mantissa: u64,
    exponent: i64,
    /// Nonzero digits past what a `u64` holds were dropped.
    inexact: bool,
    /// Written with neither a fraction nor an exponent.
    integer: bool,
}

impl Number {
    /// Reads the number starting at `at` by JSON's grammar: the number and the index after it.
    #[inline(always)]
    fn scan(text: &[u8], mut at: usize) -> Option<(Number, usize)> {
        let mut number = Number {
            negative: false,
            mantissa: 0,
            exponent: 0,
            inexact: false,
            integer: true,
        };
        if text.get(at) == Some(&b'-') {
            number.negative = true;
            at += 1;
        }
        match text.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => at = number.take_digits(text, at, 0),
            _ => return None,
        }
        if text.get(at) == Some(&b'.') {
            number.integer = false;
            let start = at + 1;
            at = number.take_digits(text, start, -1);
            if at == start {
                return None;
            }
        }
        if let Some(b'e' | b'E') = text.get(at) {
            number.integer = false;
            at += 1;
            let negative = match text.get(at) {
                Some(b'-') => true,
                Some(b'+') => false,
                _ => false,
            };
            if let Some(b'-' | b'+') = text.get(at) {
                at += 1;
            }
            let start = at;
            let mut exponent = 0i64;
            while let Some(digit @ b'0'..=b'9') = text.get(at) {
                // Saturates far past any float's range, so a long exponent cannot overflow.
                exponent = (exponent * 10 + i64::from(digit - b'0')).min(1 << 40);
                at += 1;
            }
            if at == start {
                return None;
            }
            number.exponent += if negative { -exponent } else { exponent };
        }
        Some((number, at))
    }

    /// Takes a run of digits into the mantissa while it fits a `u64`; `scale` is what each digit
    /// taken adds to the exponent (-1 in a fraction), and each digit dropped adds one more.
    #[inline(always)]
    fn take_digits(&mut self, text: &[u8], mut at: usize, scale: i64) -> usize {
        // Eight at a time while they fit: one digit at a time is a chain of dependent
        // multiplications, which made scanning most of the reader's time.
        while self.mantissa < 100_000_000_000 {
            let Some(eight) = text.get(at..at + 8).and_then(eight_digits) else {
                break;
            };
            self.mantissa = self.mantissa * 100_000_000 + eight;
            self.exponent += 8 * scale;
            at += 8;
        }
        while let Some(digit @ b'0'..=b'9') = text.get(at) {
            let digit = u64::from(digit - b'0');
            match self.mantissa.checked_mul(10).and_then(|m| m.checked_add(digit)) {
                Some(mantissa) => {
                    self.mantissa = mantissa;
                    self.exponent += scale;
                }
                None => {
                    self.inexact |= digit != 0;
                    self.exponent += scale + 1;
                }
            }
            at += 1;
        }
        at
    }

    /// The number as an integer, if it was written as one.
    fn to_integer(&self) -> Option<i128> {
        (self.integer && !self.inexact && self.exponent == 0).then_some(())?;
        let magnitude = i128::from(self.mantissa);
        Some(if self.negative { -magnitude } else { magnitude })
    }

    /// The nearest `f64`, as Rust's parser reads `token`; `None` past `f64`'s range, which
    /// JSON numbers do not reach.
    fn to_f64(&self, token: &[u8]) -> Option<f64> {
        let value = match self.scaled() {
            Some(Scaled::Exact(value)) => value,
            _ => std::str::from_utf8(token).ok()?.parse().ok()?,
        };
        value.is_finite().then_some(value)
    }

    /// The nearest `f64` to `token` rounded to `f32`, as [`Number::to_f64`] then a cast gives it.
    #[inline(always)]
    fn to_f32(&self, token: &[u8]) -> Option<f32> {
        match self.scaled() {
            Some(Scaled::Exact(value)) => Some(value as f32),
            Some(Scaled::Near(value)) if clear_of_f32_ties(value) => Some(value as f32),
            _ => self.to_f64(token).map(|value| value as f32),
        }
    }

    /// The number computed in `f64` in at most two steps, when its digits fit a `u64` and its
    /// power of ten is within 44.
    #[inline(always)]
    fn scaled(&self) -> Option<Scaled> {
        if self.inexact {
            return None;
        }
        let magnitude = self.mantissa as f64;
        let power = usize::try_from(self.exponent.unsigned_abs()).ok()?;
        let signed = |value: f64| if self.negative { -value } else { value };
        let exact = match POWERS_OF_TEN.get(power) {
            Some(&scale) if self.mantissa <= 1 << 53 => scale,
            _ => {
                // At most five roundings (the conversion, two powers, their product and the
                // last multiplication), each by at most 2^-53 of the value: within five units.
                let (first, second) = (power.min(22), power.saturating_sub(22));
                let powers = if self.exponent < 0 {
                    &INVERSE_POWERS_OF_TEN
                } else {
                    &POWERS_OF_TEN
                };
                let scale = powers[first] * *powers.get(second)?;
                return Some(Scaled::Near(signed(magnitude * scale)));
            }
        };
        // Both exact: one correctly rounded step gives the nearest `f64`.
        let value = if self.exponent < 0 {
            magnitude / exact
        } else {
            magnitude * exact
        };
        Some(Scaled::Exact(signed(value)))
    }
}

/// A number computed in `f64`.
enum Scaled {
    /// The nearest `f64`.
    Exact(f64),
    /// Within five units in the last place of the number.
    Near(f64),
}

/// Whether `value`, a [`Scaled::Near`] value, is in `f32`'s normal range and far enough from a
/// point halfway between two `f32`s that the number it stands for, and that number's nearest
/// `f64`, round to the same `f32` as `value` does. Clients write `f32` values through `f64`
/// (`0.30000001192092896`), which is far from every tie.
#[inline(always)]
fn clear_of_f32_ties(value: f64) -> bool {
    // The 29 low bits of the fraction are what rounding to `f32` drops; a tie is 1 << 28.
    let dropped = value.to_bits() & ((1 << 29) - 1);
    (f64::from(f32::MIN_POSITIVE)..f64::from(f32::MAX)).contains(&value.abs())
        && dropped.abs_diff(1 << 28) > F32_TIE_MARGIN
}

/// The value of eight ASCII digits, if all eight bytes are digits.
#[inline(always)]
fn eight_digits(bytes: &[u8]) -> Option<u64> {
    let chunk = u64::from_le_bytes(bytes.try_into().ok()?);
    // A byte below '0' borrows into its high bit when '0' is taken away, and one above '9'
    // carries into it when 0x46 is added; the lowest such byte is always seen.
    let high_bits =
        (chunk.wrapping_sub(0x3030_3030_3030_3030) | chunk.wrapping_add(0x4646_4646_4646_4646)) & 0x8080_8080_8080_8080;
    if high_bits != 0 {
        return None;
    }
    // Byte k holds digit k, the first digit lowest. Fold neighbours into two-digit pairs (in the
    // even bytes), then the four pairs into one number with two multiplications.
    let digits = chunk - 0x3030_3030_3030_3030;
    let pairs = digits * 10 + (digits >> 8);
    let (first_third, second_fourth) = (pairs & 0x0000_00ff_0000_00ff, (pairs >> 16) & 0x0000_00ff_0000_00ff);
    let high = first_third.wrapping_mul(100 + (1_000_000 << 32)) + second_fourth.wrapping_mul(1 + (10_000 << 32));
    Some(high >> 32)
}

/// How many `f64` units in the last place a [`Scaled::Near`] value must stay from an `f32` tie:
/// its error is at most five, and the margin leaves room to spare.
const F32_TIE_MARGIN: u64 = 8;

/// The powers of ten that an `f64` holds exactly.
const POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// Their inverses, each off by at most half a unit: multiplying by one is faster than dividing.
const INVERSE_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17,
    1e-18, 1e-19, 1e-20, 1e-21, 1e-22,
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn f32_type() -> ElementType {
        ElementType::parse("f32").expect("f32")
    }

    /// What the general reader makes of `text`: its bytes, or `None` where it refuses the text.
    fn general(text: &str, element_type: ElementType) -> Option<Vec<u8>> {
        let data: crate::json_data::JsonData = serde_json::from_str(text).ok()?;
        let mut out = Vec::new();
        for scalar in &data.0 {
            crate::datatype::push_json_element(element_type, scalar, &mut out).ok()?;
        }
        Some(out)
    }

    fn read(text: &str, element_type: ElementType) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        read_array(text.as_bytes(), element_type, u64::MAX, &mut out)?;
        Some(out)
    }

    fn floats(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
            .collect()
    }

    #[test]
    fn nested_arrays_are_read_flat_in_row_major_order() {
        let bytes = read(" [[1, -2.5], [ [3e2] ], [], 0.25 ] ", f32_type()).expect("numbers");
        assert_eq!(floats(&bytes), [1.0, -2.5, 300.0, 0.25]);
        assert_eq!(read("[]", f32_type()), Some(vec![]));
    }

    #[test]
    fn what_is_not_an_array_of_numbers_is_left_to_the_general_reader() {
        for text in [
            "", "[", "[1", "[1,]", "[,1]", "[1 2]", "[1]]", "[[1]", "[1] x", "1", "[01]", "[1.]", "[.5]", "[+1]",
            "[1e]", "[-]", "[true]", "[null]", "[\"1\"]", "[{}]", "[NaN]", "[1,,2]",
        ] {
            assert_eq!(read(text, f32_type()), None, "{text:?}");
        }
    }

    #[test]
    fn integers_out_of_range_or_with_fractions_are_refused() {
        let i8_type = ElementType::parse("i8").expect("i8");
        assert_eq!(read("[-128, 127]", i8_type), Some(vec![0x80, 0x7f]));
        for text in ["[128]", "[-129]", "[1.0]", "[1e0]", "[99999999999999999999]"] {
            assert_eq!(read(text, i8_type), None, "{text}");
        }
        let u64_type = ElementType::parse("ui64").expect("ui64");
        assert_eq!(
            read(&format!("[{}]", u64::MAX), u64_type),
            Some(u64::MAX.to_le_bytes().to_vec())
        );
        assert_eq!(read("[-1]", u64_type), None);
    }

    #[test]
    fn eight_digits_are_read_at_once_and_anything_else_is_not() {
        for digits in ["00000000", "12345678", "99999999", "10000001"] {
            assert_eq!(eight_digits(digits.as_bytes()), digits.parse().ok(), "{digits}");
        }
        for byte in (0..=255u8).filter(|b| !b.is_ascii_digit()) {
            for place in 0..8 {
                let mut bytes = *b"12345678";
                bytes[place] = byte;
                assert_eq!(eight_digits(&bytes), None, "{bytes:?}");
            }
        }
    }

    #[test]
    fn more_elements_than_the_limit_are_refused() {
        let mut out = Vec::new();
        assert_eq!(read_array(b"[1, 2]", f32_type(), 2, &mut out), Some(2));
        assert_eq!(read_array(b"[1, 2, 3]", f32_type(), 2, &mut out), None);
    }

    #[test]
    fn deep_nesting_needs_no_stack() {
        let deep = format!("{}1{}", "[".repeat(1_000_000), "]".repeat(1_000_000));
        assert_eq!(read(&deep, f32_type()).map(|b| floats(&b)), Some(vec![1.0]));
    }

    #[test]
    fn edges_of_each_float_type_read_as_the_general_reader_reads_them() {
        let texts = [
            "[0, -0, -0.0, 1e-46, 1e-45, 1.4e-45, 1.17549435e-38, 3.4028235e38, 3.4028236e38, 1e39, -1e39]",
            "[1e308, 1.8e308, 5e-324, 2.2250738585072014e-308, 123456789012345678901234567890]",
            "[0.30000001192092896, 16777217, 16777216.000000001, 1e22, 1e23, 0.000000000000000000001234]",
            "[1.00000005960464477539, 1.0000000596046448, 65504, 65520, 3.3895313892515355e38]",
        ];
        for name in ["f16", "bf16", "f32", "f64"] {
            let element_type = ElementType::parse(name).expect(name);
            for text in texts {
                assert_eq!(read(text, element_type), general(text, element_type), "{name} {text}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn damaged_arrays_are_refused_or_read_as_the_general_reader_reads_them(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..6),
            name in "(f16|bf16|f32|f64|i8|i32|i64|ui8|ui64)",
        ) {
            let mut text = b"[[1.5, -0.25, 3e2], [0, 12345678901234567890, -7, 1E-3]]".to_vec();
            // Each edit replaces, inserts or removes a byte, with JSON's own bytes likelier.
            for (place, byte, kind) in edits {
                let place = place % (text.len() + 1);
                let byte = b"[]{},.-+eE0123456789 \"x"[usize::from(byte) % 22];
                match kind {
                    0 if place < text.len() => text[place] = byte,
                    1 => text.insert(place, byte),
                    _ if place < text.len() => drop(text.remove(place)),
                    _ => {}
                }
            }
            let element_type = ElementType::parse(&name).expect("type");
            let mut out = Vec::new();
            if read_array(&text, element_type, u64::MAX, &mut out).is_some() {
                let text = String::from_utf8(text).expect("only ASCII was written");
                prop_assert_eq!(Some(out), general(&text, element_type), "{}", text);
            }
        }

        #[test]
        fn f32_values_written_as_clients_write_them_read_back_exactly(
            values in proptest::collection::vec(any::<f32>().prop_filter("finite", |v| v.is_finite()), 0..64),
        ) {
            // Python clients (`tolist()`, `json.dumps`) write each f32 as the shortest f64 text.
            let text = serde_json::to_string(&values.iter().map(|&v| f64::from(v)).collect::<Vec<_>>())
                .expect("json");
            let bytes = read(&text, f32_type()).expect("numbers");
            prop_assert_eq!(floats(&bytes), values);
        }

        #[test]
        fn any_decimal_reads_as_rusts_parser_then_a_cast_reads_it(
            negative in any::<bool>(),
            integer in "(0|[1-9][0-9]{0,24})",
            fraction in proptest::option::of("[0-9]{1,25}"),
            exponent in proptest::option::of(-60i32..60),
        ) {
            let mut token = format!("{}{integer}", if negative { "-" } else { "" });
            if let Some(fraction) = fraction {
                token += &format!(".{fraction}");
            }
            if let Some(exponent) = exponent {
                token += &format!("e{exponent}");
            }
            let expected: f64 = token.parse().expect("a valid number");
            let text = format!("[{token}]");
            let bytes = read(&text, f32_type()).expect("a number");
            prop_assert_eq!(floats(&bytes)[0].to_bits(), (expected as f32).to_bits(), "{}", token);
            let bytes = read(&text, ElementType::parse("f64").expect("f64")).expect("a number");
            prop_assert_eq!(bytes, expected.to_le_bytes().to_vec(), "{}", token);
        }

        #[test]
        fn integers_read_as_the_general_reader_reads_them(value in any::<i64>(), name in "(i8|i16|i32|i64|ui8|ui16|ui32|ui64)") {
            let element_type = ElementType::parse(&name).expect("type");
            let text = format!("[{value}]");
            prop_assert_eq!(read(&text, element_type), general(&text, element_type));
        }
    }
}
