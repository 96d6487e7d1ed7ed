//! Flags shared by `run-executable` and `benchmark-executable`, and the setup they describe.

use crate::registry::DEFAULT_DEVICE;
use clap::Args;
use halo_hal::buffer_view::Encoding;
use halo_hal::guarded_memory::GuardedBytes;
use halo_hal::{
    BufferParams, BufferRef, BufferView, Device, DeviceUri, DispatchCommand, DriverRegistry, Error, Executable,
    ExecutableParams, HostTensor, Result, ResultExt, WorkgroupCount,
};
use std::sync::Arc;

/// The flags of `iree-benchmark-executable` that describe one dispatch.
#[derive(Args, Debug, Clone)]
pub struct ExecutableArgs {
    /// Device URI, e.g. `local-sync` or `local-sync://0`.
    #[arg(long, default_value = DEFAULT_DEVICE)]
    pub device: String,
    /// Format of the executable file, e.g. `embedded-elf-x86_64`, `system-elf-arm_64` or
    /// `system-dylib-arm_64`.
    #[arg(long = "executable_format", visible_alias = "executable-format")]
    pub executable_format: Option<String>,
    /// Path of the executable file.
    #[arg(long = "executable_file", visible_alias = "executable-file")]
    pub executable_file: String,
    /// Export to run: an ordinal or a name.
    #[arg(long = "entry_point", visible_alias = "entry-point", default_value = "0")]
    pub entry_point: String,
    /// Workgroup count `x,y,z`.
    #[arg(long = "workgroup_count", visible_alias = "workgroup-count", default_value = "1,1,1")]
    pub workgroup_count: String,
    /// A binding, in buffer view text (`4xf32=1,2,3,4`); one per binding, in order.
    #[arg(long)]
    pub binding: Vec<String>,
    /// A 32-bit dispatch constant (push constant); one per constant, in order.
    #[arg(long, allow_hyphen_values = true)]
    pub constant: Vec<String>,
    /// Upper bound on `local-task` worker threads (IREE's topology flag).
    #[arg(
        long = "task_topology_max_group_count",
        visible_alias = "task-topology-max-group-count"
    )]
    pub task_topology_max_group_count: Option<usize>,
    /// A 32-bit executable-level specialization constant.
    #[arg(
        long = "executable_constant",
        visible_alias = "executable-constant",
        allow_hyphen_values = true
    )]
    pub executable_constant: Vec<String>,
}

/// Flags of `run-executable`.
#[derive(Args, Debug, Clone)]
pub struct RunExecutableArgs {
    #[command(flatten)]
    pub executable: ExecutableArgs,
    /// Elements printed per binding before the rest is elided with `...` (as `iree-run-module`).
    #[arg(
        long = "output_max_element_count",
        visible_alias = "output-max-element-count",
        default_value_t = 1024
    )]
    pub output_max_element_count: usize,
}

/// Everything a dispatch needs, created from the flags.
pub struct DispatchSetup {
    /// The device.
    pub device: Arc<dyn Device>,
    /// Bindings with their shapes, to print afterwards.
    pub bindings: Vec<BufferView>,
    /// The dispatch to record.
    pub dispatch: DispatchCommand,
}

impl ExecutableArgs {
    /// Creates the device, loads the executable and allocates the bindings.
    pub fn setup(&self, registry: &DriverRegistry) -> Result<DispatchSetup> {
        let device = create_device(registry, &self.device, self.task_topology_max_group_count)?;
        let executable = self.load_executable(device.as_ref())?;
        let export = resolve_entry_point(executable.as_ref(), &self.entry_point)?;
        let workgroup_count = parse_workgroup_count(&self.workgroup_count)?;
        let constants = parse_u32_list(&self.constant, "--constant")?;
        let guarded = GUARDED_DRIVERS.contains(&DeviceUri::parse(&self.device)?.driver.as_str());
        let bindings = self
            .binding
            .iter()
            .enumerate()
            .map(|(ordinal, text)| {
                let tensor = HostTensor::parse(text)?;
                binding(device.as_ref(), guarded, &tensor).with_context(|| format!("allocating binding {ordinal}"))
            })
            .collect::<Result<Vec<_>>>()?;
        let dispatch = DispatchCommand {
            executable,
            export,
            workgroup_count: WorkgroupCount::Static(workgroup_count),
            constants,
            bindings: bindings.iter().map(|view| BufferRef::whole(view.buffer())).collect(),
        };
        Ok(DispatchSetup {
            device,
            bindings,
            dispatch,
        })
    }

    fn load_executable(&self, device: &dyn Device) -> Result<Arc<dyn Executable>> {
        let cache = device.create_executable_cache()?;
        let format = self.executable_format.clone().ok_or_else(|| {
            Error::invalid_argument(format!(
                "--executable_format is required; this device supports: {}",
                cache.supported_formats().join(", ")
            ))
        })?;
        let data = halo_hal::file::read_regular(std::path::Path::new(&self.executable_file))
            .with_context(|| format!("reading executable file '{}'", self.executable_file))?;
        let constants = parse_u32_list(&self.executable_constant, "--executable_constant")?;
        cache
            .prepare_executable(&ExecutableParams {
                format: &format,
                data: &data,
                constants: &constants,
            })
            .with_context(|| format!("preparing executable '{}'", self.executable_file))
    }
}

/// The drivers whose kernels are native code that checks no bounds: a `--workgroup_count` larger
/// than the bindings were sized for makes the extra workgroups access past them, so each binding
/// lies between guard pages there and such an access ends in an error naming the kernel.
const GUARDED_DRIVERS: [&str; 2] = ["local-sync", "local-task"];

/// A binding holding `tensor`, between guard pages when `guarded`.
fn binding(device: &dyn Device, guarded: bool, tensor: &HostTensor) -> Result<BufferView> {
    if !guarded {
        return BufferView::from_host(device, BufferParams::device_local(), tensor);
    }
    let bytes = GuardedBytes::copy_of(&tensor.bytes)?;
    let buffer = device
        .allocator()
        .import_host(BufferParams::device_local(), Box::new(bytes))?;
    BufferView::new(buffer, &tensor.shape, tensor.element_type, Encoding::DenseRowMajor)
}

/// Creates the device `uri` names, capping `local-task` workers at `max_workers` if given.
pub fn create_device(registry: &DriverRegistry, uri: &str, max_workers: Option<usize>) -> Result<Arc<dyn Device>> {
    let mut parsed = DeviceUri::parse(uri)?;
    if let (Some(max), "local-task") = (max_workers, parsed.driver.as_str()) {
        let available = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        parsed
            .params
            .entry("workers".into())
            .or_insert_with(|| max.clamp(1, available).to_string());
    }
    registry
        .create_device_from(&parsed)
        .with_context(|| format!("creating device '{uri}'"))
}

fn resolve_entry_point(executable: &dyn Executable, entry_point: &str) -> Result<u32> {
    match entry_point.parse::<u32>() {
        Ok(ordinal) => {
            halo_hal::executable::check_export_ordinal(executable, ordinal).context("resolving --entry_point")?;
            Ok(ordinal)
        }
        Err(_) => executable.lookup_export(entry_point).context("resolving --entry_point"),
    }
}

/// Parses `x,y,z` (missing trailing counts are 1).
pub fn parse_workgroup_count(text: &str) -> Result<[u32; 3]> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(Error::invalid_argument(format!(
            "--workgroup_count '{text}' must be x,y,z"
        )));
    }
    let mut count = [1u32; 3];
    for (slot, part) in count.iter_mut().zip(&parts) {
        *slot = part
            .parse()
            .map_err(|_| Error::invalid_argument(format!("--workgroup_count '{text}': '{part}' is not a count")))?;
    }
    Ok(count)
}

/// Parses 32-bit values given as unsigned or negative decimal (or 0x hex).
pub fn parse_u32_list(values: &[String], flag: &str) -> Result<Vec<u32>> {
    values
        .iter()
        .map(|text| {
            let parsed = if let Some(hex) = text.strip_prefix("0x") {
                u32::from_str_radix(hex, 16).ok()
            } else {
                text.parse::<u32>()
                    .ok()
                    .or_else(|| text.parse::<i32>().ok().map(|v| v as u32))
            };
            parsed.ok_or_else(|| Error::invalid_argument(format!("{flag}={text} is not a 32-bit integer")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_counts_and_constants() {
        assert_eq!(parse_workgroup_count("4,2,1").unwrap(), [4, 2, 1]);
        assert_eq!(parse_workgroup_count("8").unwrap(), [8, 1, 1]);
        assert!(parse_workgroup_count("1,x,1").is_err());
        assert!(parse_workgroup_count("1,1,1,1").is_err());
        let values = ["7".to_string(), "-1".to_string(), "0x10".to_string()];
        assert_eq!(parse_u32_list(&values, "--constant").unwrap(), [7, u32::MAX, 16]);
        assert!(parse_u32_list(&["1.5".to_string()], "--constant").is_err());
    }
}
