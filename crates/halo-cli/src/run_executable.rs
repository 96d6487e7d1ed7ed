//! `halo run-executable`: one dispatch, then every binding printed as `iree-run-module` prints.

use crate::executable_args::RunExecutableArgs;
use halo_hal::{CommandBufferMode, CommandCategory, DriverRegistry, Fence, QueueAffinity, Result, ResultExt, Timeout};

/// Dispatches once and prints the bindings.
pub fn run(registry: &DriverRegistry, args: &RunExecutableArgs) -> Result<()> {
    let setup = args.executable.setup(registry)?;
    let device = &setup.device;
    let command_buffer =
        device.create_command_buffer(CommandBufferMode::ONE_SHOT, CommandCategory::ANY, QueueAffinity::ANY, 0)?;
    command_buffer.begin()?;
    command_buffer.dispatch(setup.dispatch.clone())?;
    command_buffer.end()?;
    let semaphore = device.create_semaphore(0)?;
    let done = Fence::at(semaphore, 1);
    device.queue_execute(QueueAffinity::ANY, &Fence::new(), &done, Some(&command_buffer), &[])?;
    done.wait(Timeout::Infinite).context("running the dispatch")?;
    for (ordinal, view) in setup.bindings.iter().enumerate() {
        let tensor = view
            .to_host(device.as_ref())
            .with_context(|| format!("reading binding {ordinal}"))?;
        crate::output::outln!("{}", tensor.format(args.output_max_element_count))?;
    }
    Ok(())
}
