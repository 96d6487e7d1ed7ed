//! Reading a device URI's parameters (`driver://path?key=value&...`) the same way in every
//! driver: one syntax for booleans and numbers, and one shape for each error, so that
//! `device_local_mappable=1` means the same wherever it is accepted and a mistyped key is
//! answered with the keys the driver knows.

use std::ops::RangeInclusive;
use std::str::FromStr;
use std::time::Duration;

use crate::disk_cache::CacheDir;
use crate::driver::{parse_spin_us, MAX_SPIN_US};
use crate::{DeviceParams, Error, Result};

/// One driver's reading of a device URI's parameters. Each read takes its key out; [`finish`]
/// then refuses whatever no read took, listing every key the driver asked for.
///
/// [`finish`]: ParamReader::finish
#[derive(Debug)]
pub struct ParamReader<'a> {
    driver: &'a str,
    unread: DeviceParams,
    known: Vec<&'static str>,
}

impl<'a> ParamReader<'a> {
    /// A reader of `params` for the driver named `driver` (the name errors give).
    pub fn new(driver: &'a str, params: &DeviceParams) -> Self {
        ParamReader {
            driver,
            unread: params.clone(),
            known: Vec::new(),
        }
    }

    /// The value of `key`, turned by `parse` into a `T`; `expected` says what `parse` accepts.
    ///
    /// # Errors
    /// `InvalidArgument` naming the driver, the parameter, its value and `expected` when `parse`
    /// refuses it.
    pub fn value<T>(
        &mut self,
        key: &'static str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>> {
        self.known.push(key);
        let Some(value) = self.unread.remove(key) else {
            return Ok(None);
        };
        parse(&value).map(Some).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{} device parameter {key}={value} is not {expected}",
                self.driver
            ))
        })
    }

    /// A boolean: `true` or `1`, `false` or `0`.
    ///
    /// # Errors
    /// As [`ParamReader::value`].
    pub fn flag(&mut self, key: &'static str) -> Result<Option<bool>> {
        self.value(key, "true, false, 1 or 0", parse_flag)
    }

    /// A whole number within `range`.
    ///
    /// # Errors
    /// As [`ParamReader::value`].
    pub fn number<T>(&mut self, key: &'static str, range: RangeInclusive<T>) -> Result<Option<T>>
    where
        T: FromStr + PartialOrd + std::fmt::Display,
    {
        let expected = format!("a whole number from {} to {}", range.start(), range.end());
        self.value(key, &expected, |value| {
            value.parse::<T>().ok().filter(|n| range.contains(n))
        })
    }

    /// A duration in whole microseconds, from 0 to [`MAX_SPIN_US`] (a second): how long a
    /// waiting thread spins or polls.
    ///
    /// # Errors
    /// As [`ParamReader::value`].
    pub fn micros(&mut self, key: &'static str) -> Result<Option<Duration>> {
        self.value(key, &format!("microseconds from 0 to {MAX_SPIN_US}"), parse_spin_us)
    }

    /// Where a driver keeps what it compiled between processes: a folder, or `off`.
    ///
    /// # Errors
    /// As [`ParamReader::value`], for an empty value.
    pub fn cache_dir(&mut self, key: &'static str) -> Result<Option<CacheDir>> {
        self.value(key, "a folder or off", |value| {
            (!value.is_empty()).then(|| CacheDir::parse(value))
        })
    }

    /// One of the words of `choices`, as the value paired with it.
    ///
    /// # Errors
    /// As [`ParamReader::value`], listing the words.
    pub fn choice<T: Copy>(&mut self, key: &'static str, choices: &[(&str, T)]) -> Result<Option<T>> {
        let words: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
        let expected = match words.split_last() {
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => "any value (none is accepted)".to_string(),
        };
        self.value(key, &expected, |value| {
            choices.iter().find(|(word, _)| *word == value).map(|&(_, v)| v)
        })
    }

    /// Refuses any parameter no read took.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first such key and listing the driver's keys.
    pub fn finish(self) -> Result<()> {
        match self.unread.keys().next() {
            None => Ok(()),
            Some(key) => Err(Error::invalid_argument(format!(
                "{} has no device parameter '{key}' (known: {})",
                self.driver,
                self.known.join(", ")
            ))),
        }
    }
}

/// The one boolean syntax of device parameters.
fn parse_flag(value: &str) -> Option<bool> {
    match value {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> DeviceParams {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_kind_reads_its_values_and_absent_keys_are_none() {
        let given = params(&[("a", "1"), ("b", "false"), ("n", "16"), ("mode", "graph")]);
        let mut reader = ParamReader::new("test", &given);
        assert_eq!(reader.flag("a").unwrap(), Some(true));
        assert_eq!(reader.flag("b").unwrap(), Some(false));
        assert_eq!(reader.flag("absent").unwrap(), None);
        assert_eq!(reader.number("n", 1u32..=128).unwrap(), Some(16));
        assert_eq!(reader.micros("n").unwrap(), None, "each key is read once");
        assert_eq!(reader.cache_dir("cache").unwrap(), None);
        assert_eq!(reader.choice("mode", &[("stream", 1), ("graph", 2)]).unwrap(), Some(2));
        reader.finish().unwrap();
    }

    /// One read of a parameter, its result dropped.
    type Read = fn(&mut ParamReader) -> Result<()>;

    #[test]
    fn a_bad_value_names_driver_key_value_and_what_is_accepted() {
        let cases: [(&str, &str, Read, &str); 5] = [
            (
                "f",
                "yes",
                |r| r.flag("f").map(drop),
                "test device parameter f=yes is not true, false, 1 or 0",
            ),
            (
                "n",
                "0",
                |r| r.number("n", 1u64..=8).map(drop),
                "n=0 is not a whole number from 1 to 8",
            ),
            (
                "n",
                "-3",
                |r| r.number("n", 1u64..=8).map(drop),
                "n=-3 is not a whole number from 1 to 8",
            ),
            ("c", "", |r| r.cache_dir("c").map(drop), "c= is not a folder or off"),
            (
                "m",
                "tree",
                |r| r.choice("m", &[("a", ()), ("b", ()), ("c", ())]).map(drop),
                "m=tree is not a, b or c",
            ),
        ];
        for (key, value, read, says) in cases {
            let given = params(&[(key, value)]);
            let err = read(&mut ParamReader::new("test", &given)).unwrap_err();
            assert_eq!(err.code(), crate::StatusCode::InvalidArgument);
            assert!(err.message().contains(says), "{err}");
        }
    }

    #[test]
    fn an_unread_key_is_refused_with_the_keys_the_driver_knows() {
        let given = params(&[("spin", "1"), ("poll_us", "5")]);
        let mut reader = ParamReader::new("vulkan", &given);
        reader.number("poll_us", 0u64..=10).unwrap();
        reader.flag("robust").unwrap();
        let err = reader.finish().unwrap_err();
        assert!(
            err.message()
                .contains("vulkan has no device parameter 'spin' (known: poll_us, robust)"),
            "{err}"
        );
    }
}
