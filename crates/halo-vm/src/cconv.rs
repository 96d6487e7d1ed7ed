//! IREE's calling convention strings: `0` then argument kinds, `_`, result kinds.
//!
//! Kinds: `v` none, `i` i32, `I` i64, `f` f32, `F` f64, `r` ref; `C`...`D` brackets a variadic
//! segment of tuples (`0iCrD_r`: an i32 then any number of refs, returning a ref).

use halo_hal::{Error, Result};

/// One argument or result position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A single value of this kind (`i`, `I`, `f`, `F`, `r`).
    Value(char),
    /// Any number of tuples of these kinds.
    Variadic(Vec<char>),
}

/// A parsed calling convention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The string it came from.
    pub text: String,
    /// Argument positions.
    pub arguments: Vec<Item>,
    /// Result positions.
    pub results: Vec<Item>,
    /// Argument kinds flattened once, when no argument is variadic (calls reuse them).
    fixed_arguments: Option<Box<[char]>>,
    /// Result kinds flattened once.
    result_kinds: Box<[char]>,
}

fn parse_items(text: &str, whole: &str) -> Result<Vec<Item>> {
    let bad = |why: &str| Error::invalid_argument(format!("calling convention '{whole}': {why}"));
    let mut items = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            'v' => {}
            'i' | 'I' | 'f' | 'F' | 'r' => items.push(Item::Value(c)),
            'C' => {
                let mut tuple = Vec::new();
                loop {
                    match chars.next() {
                        Some('D') => break,
                        Some(k @ ('i' | 'I' | 'f' | 'F' | 'r')) => tuple.push(k),
                        Some(other) => return Err(bad(&format!("'{other}' inside a variadic segment"))),
                        None => return Err(bad("unterminated variadic segment")),
                    }
                }
                items.push(Item::Variadic(tuple));
            }
            other => return Err(bad(&format!("unknown kind '{other}'"))),
        }
    }
    Ok(items)
}

impl Signature {
    /// Parses `0args_results` (`0` alone, or `0args` with no results, are accepted).
    pub fn parse(text: &str) -> Result<Self> {
        let body = text.strip_prefix('0').ok_or_else(|| {
            Error::invalid_argument(format!("calling convention '{text}' lacks the version prefix 0"))
        })?;
        let (arguments, results) = body.split_once('_').unwrap_or((body, ""));
        let arguments = parse_items(arguments, text)?;
        let results = parse_items(results, text)?;
        let fixed_arguments = if arguments.iter().any(|item| matches!(item, Item::Variadic(_))) {
            None
        } else {
            Some(flatten(&arguments, &[], text)?.into())
        };
        Ok(Signature {
            text: text.to_string(),
            result_kinds: flatten(&results, &[], text)?.into(),
            fixed_arguments,
            arguments,
            results,
        })
    }

    /// Argument kinds when no argument is variadic (`None` otherwise).
    pub fn fixed_argument_kinds(&self) -> Option<&[char]> {
        self.fixed_arguments.as_deref()
    }

    /// Result kinds.
    pub fn result_kinds(&self) -> &[char] {
        &self.result_kinds
    }

    /// Number of variadic segments among the arguments.
    pub fn argument_segments(&self) -> usize {
        self.arguments
            .iter()
            .filter(|item| matches!(item, Item::Variadic(_)))
            .count()
    }

    /// Flattened argument kinds for the given variadic segment sizes (in tuples).
    pub fn flatten_arguments(&self, segment_sizes: &[usize]) -> Result<Vec<char>> {
        flatten(&self.arguments, segment_sizes, &self.text)
    }

    /// Flattened result kinds (results are never variadic in practice).
    pub fn flatten_results(&self) -> Result<Vec<char>> {
        flatten(&self.results, &[], &self.text)
    }
}

fn flatten(items: &[Item], segment_sizes: &[usize], text: &str) -> Result<Vec<char>> {
    let mut sizes = segment_sizes.iter();
    let mut out = Vec::new();
    for item in items {
        match item {
            Item::Value(kind) => out.push(*kind),
            Item::Variadic(tuple) => {
                let count = sizes.next().ok_or_else(|| {
                    Error::invalid_argument(format!("calling convention '{text}': missing a variadic segment size"))
                })?;
                for _ in 0..*count {
                    out.extend(tuple.iter().copied());
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iree_conventions() {
        let s = Signature::parse("0iiCiiD_i").unwrap();
        assert_eq!(
            s.arguments,
            vec![Item::Value('i'), Item::Value('i'), Item::Variadic(vec!['i', 'i'])]
        );
        assert_eq!(s.results, vec![Item::Value('i')]);
        assert_eq!(s.flatten_arguments(&[2]).unwrap(), vec!['i', 'i', 'i', 'i', 'i', 'i']);
        assert_eq!(Signature::parse("0v_v").unwrap().arguments, vec![]);
        assert_eq!(Signature::parse("0").unwrap().results, vec![]);
        assert_eq!(Signature::parse("0rIrrICrIID_v").unwrap().argument_segments(), 1);
        for bad in ["", "iI_i", "0q", "0C", "0CiX"] {
            assert!(Signature::parse(bad).is_err(), "{bad}");
        }
    }
}
