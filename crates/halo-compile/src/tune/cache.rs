//! Tuning results kept on disk, so tuning the same model for the same machine again is instant.
//!
//! An entry is a folder named by the key (a SHA-256 over the model's bytes, the device, the
//! target and extra flags, the CPU, the compiler's version and the space's version) holding
//! `report.json` and `best.vmfb`. Entries are written in a temporary folder and renamed into
//! place, so a reader, or another process tuning the same model, never sees half of one; an
//! entry that does not read back whole (bad JSON, a `.vmfb` whose hash is not the report's) is
//! reported and replaced.

use super::report::TuneReport;
use halo_hal::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The environment variable naming the cache folder when no flag does.
pub const CACHE_ENV: &str = "HALO_TUNE_CACHE";

const REPORT_FILE: &str = "report.json";
const VMFB_FILE: &str = "best.vmfb";

/// The folder of tuning results.
#[derive(Debug, Clone)]
pub struct TuneCache {
    root: PathBuf,
}

/// What a lookup found.
pub enum Lookup {
    /// A whole entry: its report and its `.vmfb`.
    Hit(Box<TuneReport>, PathBuf),
    /// No entry.
    Miss,
    /// An entry that does not read back, and why; tuning goes on as for a miss.
    Corrupt(String),
}

impl TuneCache {
    /// The cache in `root`.
    pub fn new(root: PathBuf) -> TuneCache {
        TuneCache { root }
    }

    /// The default folder: `HALO_TUNE_CACHE`, else `$XDG_CACHE_HOME/halo/tune`, else
    /// `$HOME/.cache/halo/tune`; `None` when none of them is set.
    pub fn default_root() -> Option<PathBuf> {
        user_cache_folder(CACHE_ENV, "tune")
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The entry for `key`.
    pub fn lookup(&self, key: &str) -> Lookup {
        let entry = self.root.join(key);
        let report_path = entry.join(REPORT_FILE);
        let text = match std::fs::read_to_string(&report_path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && !entry.exists() => return Lookup::Miss,
            Err(error) => return Lookup::Corrupt(format!("cannot read '{}': {error}", report_path.display())),
        };
        let report: TuneReport = match serde_json::from_str(&text) {
            Ok(report) => report,
            Err(error) => {
                return Lookup::Corrupt(format!("'{}' is not a tuning report: {error}", report_path.display()))
            }
        };
        let vmfb = entry.join(VMFB_FILE);
        match sha256_of_file(&vmfb) {
            Ok(hash) if hash == report.vmfb_sha256 => Lookup::Hit(Box::new(report), vmfb),
            Ok(_) => Lookup::Corrupt(format!("'{}' does not match its report's hash", vmfb.display())),
            Err(error) => Lookup::Corrupt(error.to_string()),
        }
    }

    /// Stores `report` and `vmfb` under `key`, replacing an entry that is there.
    ///
    /// # Errors
    /// `Unavailable` naming the folder when it cannot be written.
    pub fn store(&self, key: &str, report: &TuneReport, vmfb: &Path) -> Result<()> {
        let failed = |what: &str, error: std::io::Error| {
            Error::unavailable(format!(
                "cannot {what} in tuning cache '{}': {error}",
                self.root.display()
            ))
        };
        std::fs::create_dir_all(&self.root).map_err(|e| failed("create the folder", e))?;
        let staging = tempfile::Builder::new()
            .prefix(".entry-")
            .tempdir_in(&self.root)
            .map_err(|e| failed("make an entry", e))?;
        let text = report.to_json()?;
        std::fs::write(staging.path().join(REPORT_FILE), text).map_err(|e| failed("write a report", e))?;
        std::fs::copy(vmfb, staging.path().join(VMFB_FILE)).map_err(|e| failed("copy the .vmfb", e))?;
        let entry = self.root.join(key);
        if entry.exists() {
            // A corrupt entry, or one another process has just written; either way this one is whole.
            std::fs::remove_dir_all(&entry).map_err(|e| failed("replace an entry", e))?;
        }
        let staged = staging.keep();
        std::fs::rename(&staged, &entry).or_else(|error| {
            // Another process renamed its entry into place between the removal and here.
            let _ = std::fs::remove_dir_all(&staged);
            if entry.join(REPORT_FILE).exists() {
                Ok(())
            } else {
                Err(failed("publish an entry", error))
            }
        })
    }
}

/// The SHA-256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A folder of halo's in the user's cache: the environment variable `variable` when set, else
/// `$XDG_CACHE_HOME/halo/<name>`, else `$HOME/.cache/halo/<name>`; `None` when none is set.
pub fn user_cache_folder(variable: &str, name: &str) -> Option<PathBuf> {
    let set = |variable: &str| {
        std::env::var_os(variable)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    set(variable)
        .or_else(|| set("XDG_CACHE_HOME").map(|dir| dir.join("halo").join(name)))
        .or_else(|| set("HOME").map(|dir| dir.join(".cache").join("halo").join(name)))
}

/// The SHA-256 of the file at `path`, in hex.
///
/// # Errors
/// `NotFound`/`InvalidArgument` naming the file when it cannot be read.
pub fn sha256_of_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|error| {
        let code = if error.kind() == std::io::ErrorKind::NotFound {
            halo_hal::StatusCode::NotFound
        } else {
            halo_hal::StatusCode::InvalidArgument
        };
        Error::new(code, format!("cannot read '{}': {error}", path.display()))
    })?;
    Ok(sha256_hex(&bytes))
}

/// The key of a tuning: a hash of every part, each length-prefixed so parts cannot run together.
pub fn key(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The CPU that timings and `host` code depend on: model name and feature flags from
/// `/proc/cpuinfo` where there is one, else the architecture.
pub fn cpu_description() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|line| line.split(':').next().is_some_and(|key| key.trim() == name))
            .and_then(|line| line.split_once(':'))
            .map(|(_, value)| value.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let features = field("flags").or_else(|| field("Features")).unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}; {cores} cores; {features}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::report::tests::sample_report;

    #[test]
    fn keys_separate_their_parts() {
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
        assert_eq!(key(&["a", "b"]), key(&["a", "b"]));
        assert_eq!(key(&["a"]).len(), 64);
    }

    #[test]
    fn a_stored_entry_hits_and_a_damaged_one_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let cache = TuneCache::new(dir.path().join("cache"));
        assert!(matches!(cache.lookup("k"), Lookup::Miss));
        let vmfb = dir.path().join("m.vmfb");
        std::fs::write(&vmfb, b"compiled").unwrap();
        let mut report = sample_report();
        report.vmfb_sha256 = sha256_hex(b"compiled");
        cache.store("k", &report, &vmfb).unwrap();
        let Lookup::Hit(found, path) = cache.lookup("k") else {
            panic!("no hit")
        };
        assert_eq!(found.chosen, report.chosen);
        assert_eq!(std::fs::read(path).unwrap(), b"compiled");
        // Storing again replaces the entry.
        cache.store("k", &report, &vmfb).unwrap();
        assert!(matches!(cache.lookup("k"), Lookup::Hit(..)));

        std::fs::write(cache.root().join("k").join(VMFB_FILE), b"other").unwrap();
        let Lookup::Corrupt(why) = cache.lookup("k") else {
            panic!("not corrupt")
        };
        assert!(why.contains("hash"), "{why}");
        std::fs::write(cache.root().join("k").join(REPORT_FILE), b"{not json").unwrap();
        let Lookup::Corrupt(why) = cache.lookup("k") else {
            panic!("not corrupt")
        };
        assert!(why.contains("not a tuning report"), "{why}");
        cache.store("k", &report, &vmfb).unwrap();
        assert!(matches!(cache.lookup("k"), Lookup::Hit(..)));
        let leftovers = std::fs::read_dir(cache.root()).unwrap().count();
        assert_eq!(leftovers, 1, "staging folders were left behind");
    }

    #[test]
    fn the_cpu_description_names_the_machine() {
        let cpu = cpu_description();
        assert!(cpu.contains("cores"), "{cpu}");
    }
}
