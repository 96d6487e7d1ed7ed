//! Flags shared by `run-module` and `benchmark-module`: devices, modules, the function and its
//! inputs, in `iree-run-module`'s syntax.

use crate::executable_args::create_device;
use crate::registry::DEFAULT_DEVICE;
use clap::Args;
use halo_hal::buffer_view_text::parse_shape_and_type;
use halo_hal::{DriverRegistry, Error, HostTensor, Result, ResultExt};
use halo_runtime::{Function, LoadMode, Session, Value};
use std::path::Path;

/// The flags naming what to call and with what.
#[derive(Args, Debug, Clone)]
pub struct ModuleArgs {
    /// Device URI; repeat for programs compiled for several devices (the first is the default).
    #[arg(long, default_value = DEFAULT_DEVICE)]
    pub device: Vec<String>,
    /// A `.vmfb` to load; repeat for several (later ones may import earlier ones).
    #[arg(long, required = true)]
    pub module: Vec<String>,
    /// Function to call (`name` or `module.name`).
    #[arg(long)]
    pub function: String,
    /// An input, one per argument in order: a scalar (`5`, `f32=2.5`), a buffer view
    /// (`2x2xi32=1 2 3 4`), raw bytes with a shape (`2x2xi32=@file.bin`), or every array of a
    /// NumPy file (`@file.npy`).
    #[arg(long, allow_hyphen_values = true)]
    pub input: Vec<String>,
    /// Upper bound on `local-task` worker threads (IREE's topology flag).
    #[arg(
        long = "task_topology_max_group_count",
        visible_alias = "task-topology-max-group-count"
    )]
    pub task_topology_max_group_count: Option<usize>,
    /// How module files get into memory: `mmap` maps them (fast to load, pages shared with the
    /// file cache); `preload` reads them whole into memory of their own (slower to load, a few
    /// percent faster for kernels that stream large constants; IREE's default).
    #[arg(long = "module_mode", visible_alias = "module-mode", value_enum, default_value_t = ModuleMode::Mmap)]
    pub module_mode: ModuleMode,
    /// Writes a timeline of the run (calls, `hal` calls, submissions, dispatches, waits) to this
    /// file as Chrome trace-event JSON, for `ui.perfetto.dev` or `chrome://tracing`.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
}

impl ModuleArgs {
    /// Runs `work` under the `--trace` timeline, if one was asked for.
    ///
    /// # Errors
    /// `work`'s error first; else the trace file cannot be created or completed.
    pub fn traced(&self, work: impl FnOnce() -> Result<()>) -> Result<()> {
        let trace = self
            .trace
            .as_deref()
            .map(halo_runtime::trace::Trace::start)
            .transpose()?;
        work()?;
        trace.map_or(Ok(()), halo_runtime::trace::Trace::finish)
    }
}

/// The values of `--module_mode`, as IREE spells them.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleMode {
    /// Map the file.
    Mmap,
    /// Read the whole file into memory.
    Preload,
}

impl From<ModuleMode> for LoadMode {
    fn from(mode: ModuleMode) -> Self {
        match mode {
            ModuleMode::Mmap => LoadMode::Map,
            ModuleMode::Preload => LoadMode::Preload,
        }
    }
}

/// A session with the modules loaded, the function resolved and its inputs built.
pub struct Prepared {
    /// The session.
    pub session: Session,
    /// The function to call.
    pub function: Function,
    /// Its inputs.
    pub inputs: Vec<Value>,
}

impl ModuleArgs {
    /// Creates the devices, loads the modules, resolves the function and parses the inputs.
    pub fn prepare(&self, registry: &DriverRegistry) -> Result<Prepared> {
        let devices = self
            .device
            .iter()
            .map(|uri| create_device(registry, uri, self.task_topology_max_group_count))
            .collect::<Result<Vec<_>>>()?;
        let mut session = Session::with_devices(devices)?;
        for path in &self.module {
            session.load_module_file_as(Path::new(path), self.module_mode.into())?;
        }
        let function = session.function(&self.function)?;
        let inputs = parse_inputs(&session, &function, &self.input)?;
        function.check_inputs(&inputs)?;
        Ok(Prepared {
            session,
            function,
            inputs,
        })
    }
}

/// The path of an `@file.npy` value (every array in the file, in order), for `--input` and
/// `--expected_output` alike.
pub fn npy_file(text: &str) -> Option<&str> {
    text.strip_prefix('@').filter(|path| path.ends_with(".npy"))
}

/// Parses `--input` values against the function's argument kinds.
fn parse_inputs(session: &Session, function: &Function, texts: &[String]) -> Result<Vec<Value>> {
    let kinds = function.argument_kinds();
    let mut inputs = Vec::with_capacity(texts.len());
    for (flag, text) in texts.iter().enumerate() {
        let parsed = (|| {
            if let Some(path) = npy_file(text) {
                return halo_runtime::npy::read_all(Path::new(path))?
                    .iter()
                    .map(|tensor| session.tensor_input(tensor))
                    .collect::<Result<Vec<_>>>();
            }
            let value = match kinds.get(inputs.len()) {
                Some(&kind) if kind != 'r' => parse_scalar(kind, text)?,
                _ => session.tensor_input(&parse_tensor(text)?)?,
            };
            Ok(vec![value])
        })()
        .with_context(|| format!("parsing --input {flag} '{text}'"))?;
        inputs.extend(parsed);
    }
    Ok(inputs)
}

/// A buffer view's contents from text, or from a raw file (`2x2xi32=@file.bin`).
pub fn parse_tensor(text: &str) -> Result<HostTensor> {
    let Some((shape_and_type, path)) = text.split_once("=@") else {
        return HostTensor::parse(text);
    };
    let (shape, element_type) = parse_shape_and_type(shape_and_type)?;
    let expected = shape
        .iter()
        .try_fold(element_type.byte_size() as u64, |bytes, dim| bytes.checked_mul(*dim));
    // Sizes are compared before reading, so a wrong file is never read whole.
    let held = halo_hal::file::regular_file_len(Path::new(path))?;
    if expected != Some(held) {
        let needed = expected.map_or("more than 2^64".to_string(), |n| n.to_string());
        return Err(Error::out_of_range(format!(
            "'{path}' holds {held} bytes but {shape_and_type} needs {needed}"
        )));
    }
    Ok(HostTensor {
        element_type,
        bytes: halo_hal::file::read_regular(Path::new(path))?,
        shape,
    })
}

/// Parses one scalar input for an argument of cconv kind `kind` (`i`, `I`, `f`, `F`).
pub fn parse_scalar(kind: char, text: &str) -> Result<Value> {
    let (declared, value) = match text.split_once('=') {
        Some((ty, value)) => (Some(ty), value),
        None => (None, text),
    };
    let expected = match kind {
        'i' => "i32",
        'I' => "i64",
        'f' => "f32",
        _ => "f64",
    };
    if let Some(declared) = declared {
        if declared != expected {
            return Err(Error::invalid_argument(format!(
                "input is {declared} but the function takes {expected}"
            )));
        }
    }
    let bad = || Error::invalid_argument(format!("'{value}' is not a valid {expected}"));
    Ok(match kind {
        'i' => Value::I32(
            value
                .parse::<i32>()
                .or_else(|_| value.parse::<u32>().map(|v| v as i32))
                .map_err(|_| bad())?,
        ),
        'I' => Value::I64(
            value
                .parse::<i64>()
                .or_else(|_| value.parse::<u64>().map(|v| v as i64))
                .map_err(|_| bad())?,
        ),
        'f' => Value::F32(value.parse::<f32>().map_err(|_| bad())?),
        _ => Value::F64(value.parse::<f64>().map_err(|_| bad())?),
    })
}
