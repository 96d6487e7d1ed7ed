//! The classification extension: an output asked for with the parameter `classification: k`
//! comes back as its `k` largest elements, largest first, each the text `value:index` in a
//! `BYTES` tensor of shape `[k]` (fewer when the output has fewer elements). This is Triton's
//! answer for a model that does not batch requests, which halo's models do not: the whole
//! output is one set of class scores.

use crate::datatype::{Element, JsonElements};
use crate::model::OutputTensor;
use halo_hal::{Error, Result, ResultExt};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

/// The protocol's datatype of a classification result.
pub const DATATYPE: &str = "BYTES";

/// An output's class names: line i of its label file names class i.
pub type ClassLabels = Arc<[String]>;

/// The labels in the file at `path`, one per line (empty lines included, a last line
/// break not a label), as Triton reads a label file.
///
/// # Errors
/// An I/O error or text that is not UTF-8, naming the file.
pub fn read_labels(path: &Path) -> Result<ClassLabels> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().map(str::to_string).collect())
}

/// `output`'s `count` largest elements as `value:index` texts, or `value:index:label` where
/// the output has a label for the index, largest first; equal values in index order, NaN
/// last. Floats are written with six decimals and integers in full, as Triton writes them.
///
/// # Errors
/// `InvalidArgument` naming the output when its elements are booleans, which have no ranking,
/// or of a type the protocol cannot carry.
pub fn top_classes(output: &OutputTensor, count: u64) -> Result<Vec<String>> {
    let datatype = output.datatype()?;
    if datatype == "BOOL" {
        return Err(Error::invalid_argument(format!(
            "output '{}' is BOOL, which has no classes to rank",
            output.name
        )));
    }
    let elements: Vec<Element> = JsonElements::new(output.element_type, output.bytes.clone())?
        .elements()
        .collect();
    let keep = usize::try_from(count).unwrap_or(usize::MAX).min(elements.len());
    if keep == 0 {
        return Ok(Vec::new());
    }
    let mut order: Vec<usize> = (0..elements.len()).collect();
    let rank = |&a: &usize, &b: &usize| descending(elements[a], elements[b]).then(a.cmp(&b));
    if keep < order.len() {
        order.select_nth_unstable_by(keep - 1, rank);
        order.truncate(keep);
    }
    order.sort_unstable_by(rank);
    let label = |index: usize| output.labels.as_deref().and_then(|labels| labels.get(index));
    Ok(order
        .into_iter()
        .map(|index| match label(index) {
            Some(label) => format!("{}:{index}:{label}", text(elements[index])),
            None => format!("{}:{index}", text(elements[index])),
        })
        .collect())
}

/// Larger first, NaN after every number.
fn descending(a: Element, b: Element) -> Ordering {
    match (a, b) {
        (Element::Unsigned(a), Element::Unsigned(b)) => b.cmp(&a),
        (Element::Signed(a), Element::Signed(b)) => b.cmp(&a),
        (Element::Float(a), Element::Float(b)) => b.partial_cmp(&a).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan())),
        // One output's elements are all of one kind.
        _ => Ordering::Equal,
    }
}

fn text(element: Element) -> String {
    match element {
        Element::Bool(value) => u8::from(value).to_string(),
        Element::Unsigned(value) => value.to_string(),
        Element::Signed(value) => value.to_string(),
        Element::Float(value) if value.is_nan() => "nan".into(),
        Element::Float(value) => format!("{value:.6}"),
    }
}

/// `texts` as a `BYTES` tensor's raw contents: each a 4-byte little-endian length, then its bytes.
pub fn bytes_contents(texts: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(texts.iter().map(|t| t.len() + 4).sum());
    for text in texts {
        // A class text is a number and an index: far below 4 GiB.
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::ElementType;

    fn output(element_type: &str, bytes: Vec<u8>) -> OutputTensor {
        let element_type = ElementType::parse(element_type).expect("element type");
        let count = (bytes.len() / element_type.byte_size()) as u64;
        OutputTensor {
            name: "scores".into(),
            shape: vec![1, count],
            element_type,
            bytes,
            labels: None,
        }
    }

    fn f32s(values: &[f32]) -> OutputTensor {
        output("f32", values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    #[test]
    fn the_largest_come_first_with_their_indices() {
        let scores = f32s(&[0.1, 0.7, 0.05, 0.15]);
        assert_eq!(top_classes(&scores, 2).expect("ranks"), ["0.700000:1", "0.150000:3"]);
        assert_eq!(
            top_classes(&scores, 10).expect("ranks"),
            ["0.700000:1", "0.150000:3", "0.100000:0", "0.050000:2"]
        );
        assert!(top_classes(&scores, 0).expect("ranks").is_empty());
        assert_eq!(top_classes(&scores, u64::MAX).expect("ranks").len(), 4);
    }

    #[test]
    fn ties_keep_index_order_and_nan_ranks_last() {
        let scores = f32s(&[1.0, f32::NAN, 1.0, f32::NEG_INFINITY, f32::INFINITY, 1.0]);
        assert_eq!(
            top_classes(&scores, 6).expect("ranks"),
            ["inf:4", "1.000000:0", "1.000000:2", "1.000000:5", "-inf:3", "nan:1"]
        );
        // The partial selection ranks as the full sort does.
        assert_eq!(
            top_classes(&scores, 3).expect("ranks"),
            ["inf:4", "1.000000:0", "1.000000:2"]
        );
    }

    #[test]
    fn integers_rank_exactly_and_are_written_in_full() {
        let large = [i64::MAX - 1, i64::MIN, i64::MAX, -3];
        let scores = output("i64", large.iter().flat_map(|v| v.to_le_bytes()).collect());
        assert_eq!(
            top_classes(&scores, 3).expect("ranks"),
            [format!("{}:2", i64::MAX), format!("{}:0", i64::MAX - 1), "-3:3".into()]
        );
        let bytes = output("ui8", vec![7, 255, 0]);
        assert_eq!(top_classes(&bytes, 2).expect("ranks"), ["255:1", "7:0"]);
    }

    #[test]
    fn half_precision_scores_rank_by_value() {
        let values = [
            half::f16::from_f32(0.25),
            half::f16::from_f32(-2.0),
            half::f16::from_f32(8.5),
        ];
        let scores = output("f16", values.iter().flat_map(|v| v.to_le_bytes()).collect());
        assert_eq!(top_classes(&scores, 2).expect("ranks"), ["8.500000:2", "0.250000:0"]);
    }

    #[test]
    fn a_class_with_a_label_is_written_with_it() {
        let mut scores = f32s(&[0.5, 0.25, 0.75]);
        scores.labels = Some(vec!["cat".to_string(), String::new()].into());
        assert_eq!(
            top_classes(&scores, 3).expect("ranks"),
            ["0.750000:2", "0.500000:0:cat", "0.250000:1:"]
        );
    }

    #[test]
    fn booleans_have_no_classes() {
        let error = top_classes(&output("i1", vec![1, 0]), 1).expect_err("refused");
        assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument);
        assert!(error.to_string().contains("output 'scores' is BOOL"), "{error}");
    }

    #[test]
    fn bytes_contents_prefix_each_text_with_its_length() {
        let texts = ["0.5:1".to_string(), String::new(), "7:0".into()];
        assert_eq!(bytes_contents(&texts), b"\x05\0\0\x000.5:1\0\0\0\0\x03\0\0\x007:0");
    }
}
