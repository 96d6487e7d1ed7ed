//! Finds the inputs' `data` arrays in an inference request's JSON text and takes them out, so
//! that serde reads only the request's small frame and [`crate::json_numbers`] reads the
//! numbers. Even skipping a 240 KB array of numbers cost serde about 1.3 ns a byte, as much again
//! as reading them.
//!
//! Only arrays at `inputs[i].data` are taken; scalars, and everything else in the request, stay
//! for serde. Where the text is not what this expects (it is not JSON, or not an object), nothing
//! is taken and serde reads the text as sent, so it names what is wrong.

use std::borrow::Cow;
use std::ops::Range;

/// A request's JSON with its inputs' `data` arrays taken out.
#[derive(Debug)]
pub struct LiftedArrays<'a> {
    /// The JSON with each array taken replaced by `0`.
    pub json: Cow<'a, [u8]>,
    /// Per element of `inputs`, in order: the text of its `data` array, when it was taken.
    pub arrays: Vec<Option<&'a [u8]>>,
}

impl LiftedArrays<'_> {
    /// Whether any array was taken out.
    pub fn any(&self) -> bool {
        !self.arrays.is_empty()
    }
}

/// Takes the `data` arrays of `json`'s inputs out of it.
pub fn lift_data_arrays(json: &[u8]) -> LiftedArrays<'_> {
    let mut found = Vec::new();
    let mut walker = Walker { text: json, at: 0 };
    if walker.request(&mut found).is_none() || found.is_empty() {
        return LiftedArrays {
            json: Cow::Borrowed(json),
            arrays: Vec::new(),
        };
    }
    let taken: usize = found.iter().map(|(_, range)| range.len()).sum();
    let mut stripped = Vec::with_capacity(json.len() - taken + found.len());
    let mut arrays = vec![None; found.iter().map(|(input, _)| input + 1).max().unwrap_or(0)];
    let mut kept_from = 0;
    for (input, range) in found {
        stripped.extend_from_slice(&json[kept_from..range.start]);
        stripped.push(b'0');
        kept_from = range.end;
        arrays[input] = Some(&json[range]);
    }
    stripped.extend_from_slice(&json[kept_from..]);
    LiftedArrays {
        json: Cow::Owned(stripped),
        arrays,
    }
}

/// A cursor over JSON text that follows its structure only as far as finding the arrays needs;
/// every method returns `None` where the text is not as valid JSON would be.
struct Walker<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Walker<'a> {
    /// Walks `{"inputs": [{"data": [...]}, ...], ...}`, noting each input's array and its index.
    fn request(&mut self, found: &mut Vec<(usize, Range<usize>)>) -> Option<()> {
        self.object(|walker, key| {
            if key != b"inputs" || walker.peek()? != b'[' {
                return walker.skip_value();
            }
            walker.array(|walker, index| {
                if walker.peek()? != b'{' {
                    return walker.skip_value();
                }
                walker.object(|walker, key| {
                    let start = walker.at;
                    let is_array = walker.peek()? == b'[';
                    walker.skip_value()?;
                    if key == b"data" && is_array {
                        found.push((index, start..walker.at));
                    }
                    Some(())
                })
            })
        })
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after any space, left unread.
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    /// Reads the next byte after any space.
    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    /// Walks an object, calling `member` with each key's text as written, at its value, which
    /// `member` must read.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        (self.next()? == b'{').then_some(())?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.skip_space();
            let key = self.string()?;
            (self.next()? == b':').then_some(())?;
            self.skip_space();
            member(self, key)?;
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// Walks an array, calling `element` at each element with its index; it must read it.
    fn array(&mut self, mut element: impl FnMut(&mut Self, usize) -> Option<()>) -> Option<()> {
        (self.next()? == b'[').then_some(())?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        for index in 0.. {
            self.skip_space();
            element(self, index)?;
            match self.next()? {
                b',' => continue,
                b']' => return Some(()),
                _ => return None,
            }
        }
        None
    }

    /// Reads a string, returning its text between the quotes, escapes as written.
    fn string(&mut self) -> Option<&'a [u8]> {
        (self.text.get(self.at)? == &b'"').then_some(())?;
        let start = self.at + 1;
        let mut at = start;
        loop {
            at += memchr::memchr2(b'"', b'\\', &self.text[at..])?;
            if self.text[at] == b'"' {
                self.at = at + 1;
                return Some(&self.text[start..at]);
            }
            at += 2;
            if at > self.text.len() {
                return None;
            }
        }
    }

    /// Passes over one value without reading it.
    fn skip_value(&mut self) -> Option<()> {
        match *self.text.get(self.at)? {
            b'"' => self.string().map(drop),
            b'[' => self.skip_nested(b'[', b']'),
            b'{' => self.skip_nested(b'{', b'}'),
            _ => {
                let start = self.at;
                while let Some(byte) = self.text.get(self.at) {
                    if matches!(byte, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
                        break;
                    }
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }

    /// Passes over an array or object by counting its brackets outside strings: in valid JSON
    /// the other kind of bracket balances on its own.
    fn skip_nested(&mut self, open: u8, close: u8) -> Option<()> {
        let mut depth = 0usize;
        loop {
            let found = self.at + memchr::memchr3(open, close, b'"', &self.text[self.at..])?;
            self.at = found;
            match self.text[found] {
                b'"' => {
                    self.string()?;
                }
                byte => {
                    self.at += 1;
                    if byte == open {
                        depth += 1;
                    } else {
                        depth -= 1;
                        if depth == 0 {
                            return Some(());
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifted(json: &str) -> (String, Vec<Option<String>>) {
        let lifted = lift_data_arrays(json.as_bytes());
        let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).expect("utf-8");
        (
            text(&lifted.json),
            lifted.arrays.iter().map(|array| array.map(text)).collect(),
        )
    }

    #[test]
    fn each_inputs_data_array_is_taken_out_by_its_index() {
        let json = r#"{"id": "x", "inputs": [
            {"name": "a", "data": [[1, 2], [3, 4]], "shape": [2, 2], "datatype": "FP32"},
            {"name": "b", "datatype": "INT64", "parameters": {"binary_data_size": 8}, "shape": [1]},
            {"data" : [ 5 ] , "name": "c"}
        ], "outputs": [{"name": "y", "data": [9]}]}"#;
        let (stripped, arrays) = lifted(json);
        assert_eq!(
            arrays,
            [Some("[[1, 2], [3, 4]]".to_string()), None, Some("[ 5 ]".to_string())]
        );
        assert!(stripped.contains(r#""data": 0, "shape""#), "{stripped}");
        assert!(stripped.contains(r#"{"data" : 0 , "name": "c"}"#), "{stripped}");
        assert!(
            stripped.contains(r#""outputs": [{"name": "y", "data": [9]}]"#),
            "outputs are left"
        );
        let value: serde_json::Value = serde_json::from_str(&stripped).expect("still JSON");
        assert_eq!(value["inputs"][0]["data"], 0);
    }

    #[test]
    fn strings_that_look_like_structure_are_passed_over() {
        let json = r#"{"id": "\"inputs\": [{\"data\": [1]}]", "inputs": [{"name": "q\"]}", "data": [1, "]", [2]]}]}"#;
        let (stripped, arrays) = lifted(json);
        assert_eq!(arrays, [Some(r#"[1, "]", [2]]"#.to_string())]);
        assert!(stripped.ends_with(r#""data": 0}]}"#), "{stripped}");
    }

    #[test]
    fn scalars_and_requests_not_shaped_as_expected_are_left_alone() {
        for json in [
            r#"{"inputs": [{"name": "a", "data": 7}]}"#,
            r#"{"inputs": {"data": [1]}}"#,
            r#"[{"inputs": [{"data": [1]}]}]"#,
            r#"{"inputs": [{"data": [1, 2}]}"#,
            r#"{"inputs": [{"data": [1]"#,
            r#"{"inputs": [{"data" [1]}]}"#,
            r#"{"inputs": [{"d\u0061ta": [1]}]}"#,
            r#"{"a": "unterminated"#,
            "",
        ] {
            let lifted = lift_data_arrays(json.as_bytes());
            assert!(!lifted.any(), "{json}");
            assert!(matches!(lifted.json, Cow::Borrowed(_)), "{json}");
        }
    }

    #[test]
    fn deep_nesting_elsewhere_needs_no_stack() {
        let json = format!(
            r#"{{"x": {}{}, "inputs": [{{"data": [1]}}]}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(lifted(&json).1, [Some("[1]".to_string())]);
    }

    /// The part of a request the arrays are taken from, read as the server reads requests.
    #[derive(serde::Deserialize)]
    struct Frame {
        inputs: Vec<FrameInput>,
    }

    #[derive(serde::Deserialize)]
    struct FrameInput {
        data: Option<serde_json::Value>,
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        #[test]
        fn what_a_damaged_request_yields_is_what_serde_reads_in_it(
            edits in proptest::collection::vec((0..200usize, 0..16usize, 0..3u8), 1..5),
        ) {
            let mut json = br#"{"id": "a\"b", "inputs": [{"name": "x", "data": [[1, 2], [3]], "shape": [3]},
                {"data": 5, "name": "y"}, {"data": [], "p": {"q": ["]"]}}], "outputs": [{"data": [7]}]}"#
                .to_vec();
            for (place, byte, kind) in edits {
                let place = place % (json.len() + 1);
                let byte = b"[]{}:,\"\\ data01x"[byte];
                match kind {
                    0 if place < json.len() => json[place] = byte,
                    1 => json.insert(place, byte),
                    _ if place < json.len() => drop(json.remove(place)),
                    _ => {}
                }
            }
            let lifted = lift_data_arrays(&json);
            let taken: Option<Vec<Option<serde_json::Value>>> = lifted
                .arrays
                .iter()
                .map(|array| array.map(|a| serde_json::from_slice(a).ok()).map_or(Some(None), |v| v.map(Some)))
                .collect();
            // A taken array that is not JSON fails its request when it is read; otherwise what
            // serde accepts with the arrays taken out, it accepts as sent, with those arrays as
            // the inputs' data. (Read as the server reads requests: a key twice is refused.)
            let frame = serde_json::from_slice::<Frame>(&lifted.json);
            if let (Ok(frame), Some(taken)) = (frame, taken) {
                let sent: Frame = serde_json::from_slice(&json).map_err(|e| {
                    proptest::test_runner::TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&json)))
                })?;
                for (index, array) in taken.iter().enumerate() {
                    let Some(array) = array else { continue };
                    proptest::prop_assert_eq!(Some(array), sent.inputs[index].data.as_ref());
                    proptest::prop_assert_eq!(frame.inputs[index].data.as_ref(), Some(&serde_json::json!(0)));
                }
            }
        }
    }
}
