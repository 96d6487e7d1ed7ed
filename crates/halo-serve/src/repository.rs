//! A model repository: one folder per model, each with its module files and a `config.toml`
//! saying how to serve them.
//!
//! ```toml
//! function = "cnn"                  # the exported function requests call; default: the
//!                                   # module's only one (not `__init` or a `$async` form)
//! modules = ["cnn.vmfb"]            # relative to the folder; default: its one .vmfb file, else
//!                                   # its one .onnx/.mlir model, compiled at load (model_source)
//! version = "1"
//! devices = ["local-task"]
//! max_concurrency = 4
//! max_queue = 64
//! timeout_ms = 0                    # 0: no limit
//! input_names = ["image"]           # rename the compiler's input0, ...
//! output_names = ["logits", "probabilities"]
//! input_types = ["tensor<1x6x6x1xf32>"]  # for a function compiled without a declaration
//! output_types = ["tensor<1x3xf32>", "tensor<1x3xf32>"]
//! output_labels = { probabilities = "classes.txt" }  # one class name per line
//! warmup = true                     # one call with zero inputs before the model is ready
//! max_batch_size = 8                # batch concurrent requests, up to 8 rows a call; 0: never
//! max_queue_delay_us = 0            # how long a free thread waits to fill its call; 0: not at all
//! ```
//!
//! Settings a file leaves out come from the server's defaults (its command-line flags).

use crate::model::ModelConfig;
use crate::model_source;
use halo_hal::{Error, Result, ResultExt};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file in each model folder that configures it.
pub const CONFIG_FILE: &str = "config.toml";

/// A model folder's `config.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    function: Option<String>,
    #[serde(default)]
    modules: Vec<PathBuf>,
    version: Option<String>,
    devices: Option<Vec<String>>,
    max_concurrency: Option<usize>,
    max_queue: Option<usize>,
    timeout_ms: Option<u64>,
    #[serde(default)]
    input_names: Vec<String>,
    #[serde(default)]
    output_names: Vec<String>,
    #[serde(default)]
    input_types: Vec<String>,
    #[serde(default)]
    output_types: Vec<String>,
    #[serde(default)]
    output_labels: BTreeMap<String, PathBuf>,
    warmup: Option<bool>,
    max_batch_size: Option<u64>,
    max_queue_delay_us: Option<u64>,
}

/// The settings of models whose configuration leaves them out.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// Device URIs.
    pub devices: Vec<String>,
    /// Requests that may run at once.
    pub max_concurrency: usize,
    /// Requests that may wait beyond those.
    pub max_queue: usize,
    /// How long a request may take.
    pub timeout: Option<Duration>,
    /// Whether models warm up at load.
    pub warmup: bool,
    /// Most rows a batched call takes; 0: no batching.
    pub max_batch_size: u64,
    /// How long a free thread of a batching model waits to fill its call.
    pub max_queue_delay: Duration,
}

/// A folder of model folders.
#[derive(Debug, Clone)]
pub struct ModelRepository {
    root: PathBuf,
    defaults: Defaults,
}

impl ModelRepository {
    /// The repository at `root`.
    ///
    /// # Errors
    /// `NotFound` when `root` is not a folder.
    pub fn open(root: &Path, defaults: Defaults) -> Result<ModelRepository> {
        if !root.is_dir() {
            return Err(Error::not_found(format!(
                "the model repository '{}' is not a folder",
                root.display()
            )));
        }
        Ok(ModelRepository {
            root: root.to_path_buf(),
            defaults,
        })
    }

    /// The names of the models it holds: its folders with a `config.toml`, sorted.
    ///
    /// # Errors
    /// `Unavailable` when the folder cannot be read.
    pub fn names(&self) -> Result<Vec<String>> {
        let entries = std::fs::read_dir(&self.root)
            .map_err(|e| Error::unavailable(format!("reading the model repository '{}': {e}", self.root.display())))?;
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().join(CONFIG_FILE).is_file())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| valid_name(name))
            .collect();
        names.sort();
        Ok(names)
    }

    /// The configuration of model `name`, read from its folder now.
    ///
    /// # Errors
    /// `InvalidArgument` for a name that is not a plain folder name; `NotFound` when there is
    /// no such model; `InvalidArgument` naming the file for a configuration that does not parse
    /// or names no module.
    pub fn config(&self, name: &str) -> Result<ModelConfig> {
        if !valid_name(name) {
            return Err(Error::invalid_argument(format!(
                "'{name}' is not a model name (letters, digits, '_', '-' and '.', not starting with '.')"
            )));
        }
        let folder = self.root.join(name);
        let path = folder.join(CONFIG_FILE);
        if !path.is_file() {
            return Err(Error::not_found(format!(
                "the model repository '{}' has no model '{name}' (no {})",
                self.root.display(),
                path.display()
            )));
        }
        self.read(name, &folder, &path)
            .with_context(|| format!("reading {}", path.display()))
    }

    fn read(&self, name: &str, folder: &Path, path: &Path) -> Result<ModelConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::unavailable(format!("cannot read it: {e}")))?;
        let file: ConfigFile = toml::from_str(&text)
            .map_err(|e| Error::invalid_argument(format!("it is not a model configuration: {e}")))?;
        let modules = if file.modules.is_empty() {
            vec![only_module(folder)?]
        } else {
            file.modules.iter().map(|m| folder.join(m)).collect()
        };
        let defaults = &self.defaults;
        Ok(ModelConfig {
            name: name.to_string(),
            version: file.version.unwrap_or_else(|| "1".into()),
            modules,
            function: file.function,
            devices: file.devices.unwrap_or_else(|| defaults.devices.clone()),
            max_concurrency: file.max_concurrency.unwrap_or(defaults.max_concurrency),
            max_queue: file.max_queue.unwrap_or(defaults.max_queue),
            timeout: match file.timeout_ms {
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
                None => defaults.timeout,
            },
            input_names: file.input_names,
            output_names: file.output_names,
            input_types: file.input_types,
            output_types: file.output_types,
            output_labels: file
                .output_labels
                .into_iter()
                .map(|(output, labels)| (output, folder.join(labels)))
                .collect(),
            warmup: file.warmup.unwrap_or(defaults.warmup),
            max_batch_size: file.max_batch_size.unwrap_or(defaults.max_batch_size),
            max_queue_delay: (file.max_queue_delay_us.map(Duration::from_micros)).unwrap_or(defaults.max_queue_delay),
        })
    }
}

/// A plain folder name, so a client's model name cannot reach outside the repository.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The folder's one `.vmfb` file, else its one ONNX or MLIR model (compiled at load).
fn only_module(folder: &Path) -> Result<PathBuf> {
    let files: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(|e| Error::unavailable(format!("cannot read {}: {e}", folder.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    let modules: Vec<&PathBuf> = files
        .iter()
        .filter(|path| path.extension().is_some_and(|e| e == "vmfb"))
        .collect();
    let sources: Vec<&PathBuf> = files.iter().filter(|path| model_source::is_source(path)).collect();
    match (modules.as_slice(), sources.as_slice()) {
        ([module], _) | ([], [module]) => Ok(module.to_path_buf()),
        _ => Err(Error::invalid_argument(format!(
            "it names no modules and {} has {} .vmfb files and {} ONNX or MLIR models; list them in `modules`",
            folder.display(),
            modules.len(),
            sources.len()
        ))),
    }
}
