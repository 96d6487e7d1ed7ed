//! Bracket-aware reading of MLIR signature text, such as the ABI declaration
//! (`sync func @f(%input0: tensor<2x?xf32>, %x: tuple<i32, f32>) -> (%output0: i32)`) that
//! `halo compile` writes and the runtime reads: types hold commas and brackets, so lists split
//! only outside them.

/// Where the first character matching `stop` outside any brackets is; a stray closing bracket
/// is ignored.
pub fn top_level_end(text: &str, stop: impl Fn(char) -> bool) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        if depth == 0 && stop(c) {
            return Some(at);
        }
        match c {
            '(' | '<' | '[' | '{' => depth += 1,
            ')' | '>' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The inside of the parenthesized group `text` starts with, and the text after it; `None`
/// when `text` does not start with `(` or the group is not closed.
pub fn parenthesized(text: &str) -> Option<(&str, &str)> {
    let inner = text.strip_prefix('(')?;
    let close = top_level_end(inner, |c| c == ')')?;
    Some((&inner[..close], &inner[close + 1..]))
}

/// The comma-separated items of `text` at bracket depth zero, trimmed; a trailing empty item is
/// dropped.
pub fn top_level_items(mut text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    while !text.trim().is_empty() {
        let end = top_level_end(text, |c| c == ',').unwrap_or(text.len());
        items.push(text[..end].trim());
        text = text.get(end + 1..).unwrap_or("");
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_at_top_level_commas_only() {
        let text = "%input0: tensor<2x?xf32>, %input1: !hal.fence, %x: tuple<i32, f32>) -> (%o: i32)";
        let (inside, rest) = parenthesized(&format!("({text}"))
            .map(|(i, r)| (i.to_string(), r.to_string()))
            .unwrap();
        assert_eq!(
            top_level_items(&inside),
            ["%input0: tensor<2x?xf32>", "%input1: !hal.fence", "%x: tuple<i32, f32>"]
        );
        assert_eq!(rest, " -> (%o: i32)");
        assert!(top_level_items(" ").is_empty());
        assert_eq!(top_level_items("a,,b, "), ["a", "", "b"]);
    }

    #[test]
    fn unclosed_groups_and_missing_stops_are_none() {
        assert_eq!(parenthesized("(a, <b)"), None);
        assert_eq!(parenthesized("a)"), None);
        assert_eq!(top_level_end("f32> x", char::is_whitespace), Some(4));
        assert_eq!(top_level_end("tensor<2 x f32>", char::is_whitespace), None);
    }
}
