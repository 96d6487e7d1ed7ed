//! `--expected_output`: comparing results with expected values as `iree-run-module` does, with
//! its tolerances and its report text.

use crate::module_args::{npy_file, parse_scalar, parse_tensor};
use clap::Args;
use halo_hal::buffer_view::shape_text;
use halo_hal::element_text::format_element;
use halo_hal::{Device, ElementType, HostTensor, NumericalType, Result, ResultExt};
use halo_runtime::{format_output, tensor, Value};

/// Tolerances of the approximate comparison (IREE's flags and defaults).
#[derive(Args, Debug, Clone)]
pub struct Tolerances {
    /// Absolute tolerance for f16 elements.
    #[arg(long = "expected_f16_threshold", default_value_t = 0.001)]
    pub f16: f64,
    /// Absolute tolerance for f32 elements.
    #[arg(long = "expected_f32_threshold", default_value_t = 0.0001)]
    pub f32: f64,
    /// Absolute tolerance for f64 elements.
    #[arg(long = "expected_f64_threshold", default_value_t = 0.0001)]
    pub f64: f64,
    /// Absolute tolerance for bf16 elements.
    #[arg(long = "expected_bf16_threshold", default_value_t = 0.01)]
    pub bf16: f64,
    /// Relative tolerance for every float type.
    #[arg(long = "expected_rtol", default_value_t = 1e-5)]
    pub rtol: f64,
    /// `approximate` (tolerances, NaN equals NaN) or `exact` (bytes).
    #[arg(long = "equality_mode", default_value = "approximate")]
    pub equality_mode: EqualityMode,
}

/// How elements are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EqualityMode {
    /// `|actual - expected| <= atol + rtol * |expected|` for floats; integers exactly.
    Approximate,
    /// Byte equality.
    Exact,
}

/// The outcome and the text to print.
pub struct Report {
    /// True when every compared result matched.
    pub passed: bool,
    /// `[SUCCESS] ...` or one `[FAILED] ...` block per mismatching result.
    pub text: String,
}

/// Compares `results` with the `expected` texts.
pub fn compare(
    device: &dyn Device,
    results: &[Value],
    expected: &[String],
    tolerances: &Tolerances,
    max_elements: usize,
) -> Result<Report> {
    let expected = expand_npy_files(expected)?;
    let mut failures = Vec::new();
    if results.len() != expected.len() {
        failures.push(format!(
            "[FAILED] the function returned {} results but {} expected outputs were given",
            results.len(),
            expected.len()
        ));
    }
    for (index, (result, want)) in results.iter().zip(&expected).enumerate() {
        let failure = match want {
            Expected::Ignored => None,
            Expected::Text(text) => compare_one(device, result, text, tolerances, max_elements)
                .with_context(|| format!("parsing expected output {index} '{text}'"))?,
            Expected::Array(array, origin) => compare_tensor(device, result, array, tolerances, max_elements)
                .with_context(|| format!("comparing with expected output {index} from {origin}"))?,
        };
        if let Some(why) = failure {
            failures.push(format!("[FAILED] result[{index}]: {why}"));
        }
    }
    Ok(if failures.is_empty() {
        Report {
            passed: true,
            text: "[SUCCESS] all function outputs matched their expected values.".to_string(),
        }
    } else {
        Report {
            passed: false,
            text: failures.join("\n"),
        }
    })
}

fn compare_one(
    device: &dyn Device,
    result: &Value,
    want: &str,
    tolerances: &Tolerances,
    max_elements: usize,
) -> Result<Option<String>> {
    let Value::Ref(Some(_)) = result else {
        let expected = parse_scalar(result.cconv_char(), want)?;
        let (actual, expected) = (
            format_output(device, result, max_elements)?,
            format_output(device, &expected, max_elements)?,
        );
        return Ok((actual != expected).then(|| format!("value {actual} does not match the expected {expected}")));
    };
    compare_tensor(device, result, &parse_tensor(want)?, tolerances, max_elements)
}

/// One expected output: `(ignored)`, a value in `--input` syntax, or one array of an `.npy` file.
enum Expected {
    Ignored,
    Text(String),
    /// The array and where it came from (`'x.npy' array 2`).
    Array(HostTensor, String),
}

/// The expected outputs with each `@file.npy` replaced by every array it holds, in order, as
/// `--input` reads them.
fn expand_npy_files(texts: &[String]) -> Result<Vec<Expected>> {
    let mut expected = Vec::with_capacity(texts.len());
    for text in texts {
        match npy_file(text) {
            Some(path) => {
                let arrays = halo_runtime::npy::read_all(std::path::Path::new(path))
                    .with_context(|| format!("reading expected outputs '{path}'"))?;
                let origin = |index| format!("'{path}' array {index}");
                expected.extend(
                    arrays
                        .into_iter()
                        .enumerate()
                        .map(|(i, a)| Expected::Array(a, origin(i))),
                );
            }
            None if text == "(ignored)" => expected.push(Expected::Ignored),
            None => expected.push(Expected::Text(text.clone())),
        }
    }
    Ok(expected)
}

/// A result against an expected array; `Some(why)` when they differ.
fn compare_tensor(
    device: &dyn Device,
    result: &Value,
    expected: &HostTensor,
    tolerances: &Tolerances,
    max_elements: usize,
) -> Result<Option<String>> {
    if !matches!(result, Value::Ref(Some(_))) {
        return Ok(Some("a scalar result cannot match an array from an .npy file".into()));
    }
    let actual = tensor::to_host(device, result)?;
    let meta = |t: &HostTensor| shape_text(&t.shape, t.element_type);
    let views = || {
        format!(
            "\n  expected:\n{}\n  actual:\n{}",
            expected.format(max_elements),
            actual.format(max_elements)
        )
    };
    if actual.shape != expected.shape || actual.element_type != expected.element_type {
        return Ok(Some(format!(
            "metadata is {}; expected that the view matches {}; expected that the view is equal to contents of a view of {}{}",
            meta(&actual),
            meta(expected),
            meta(expected),
            views()
        )));
    }
    let element_type = actual.element_type;
    let size = element_type.byte_size().max(1);
    let mismatch = actual
        .bytes
        .chunks(size)
        .zip(expected.bytes.chunks(size))
        .position(|(a, e)| !elements_equal(element_type, a, e, tolerances));
    Ok(mismatch.map(|index| {
        let element = |t: &HostTensor| {
            let mut text = String::new();
            format_element(element_type, &t.bytes[index * size..(index + 1) * size], &mut text);
            text
        };
        format!(
            "element at index {index} ({}) does not match the expected ({}); expected that the view is equal to contents of a view of {}{}",
            element(&actual),
            element(expected),
            meta(expected),
            views()
        )
    }))
}

/// One element of each, compared as `--equality_mode` says.
fn elements_equal(element_type: ElementType, actual: &[u8], expected: &[u8], tolerances: &Tolerances) -> bool {
    if tolerances.equality_mode == EqualityMode::Exact {
        return actual == expected;
    }
    let (decode, atol): (fn(&[u8]) -> f64, f64) = match (element_type.numerical_type(), element_type.bit_count()) {
        (NumericalType::FloatIeee, 16) => (|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64(), tolerances.f16),
        (NumericalType::FloatBrain, 16) => (|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64(), tolerances.bf16),
        (NumericalType::FloatIeee, 32) => (
            |b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64,
            tolerances.f32,
        ),
        (NumericalType::FloatIeee, 64) => (|b| f64::from_le_bytes(b.try_into().expect("8 bytes")), tolerances.f64),
        _ => return actual == expected,
    };
    let (a, e) = (decode(actual), decode(expected));
    (a.is_nan() && e.is_nan()) || (a - e).abs() <= atol + tolerances.rtol * e.abs()
}
