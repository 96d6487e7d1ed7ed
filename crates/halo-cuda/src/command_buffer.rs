//! Command buffers: halo-hal's validated command list turned into stream operations when it is
//! submitted (binding-table slots resolved, kernels and device addresses looked up, limits
//! checked), then issued onto the device's stream once the submission's waits are met.
//!
//! This is IREE's stream-backed command buffer: every operation goes onto one in-order stream,
//! so barriers cost nothing. With `command_buffers=graph`, the operations of a command buffer of
//! kernel launches become a graph instead ([`crate::graph`]). Indirect workgroup counts are not
//! supported (IREE's CUDA stream command buffers refuse them too): reading the count would need a
//! host round trip.

use crate::api::CuFunction;
use crate::buffer::GpuAllocation;
use crate::device::DeviceShared;
use crate::executable::GpuExecutable;
use halo_hal::{downcast, Binding, BufferRef, Command, DispatchCommand, Error, Result, WorkgroupCount};
use std::ffi::c_void;
use std::sync::Arc;

/// One operation on the stream, with every address resolved.
#[derive(PartialEq)]
pub(crate) enum StreamOp {
    /// Everything before finishes before anything after starts. The stream is in order anyway;
    /// graphs let the launches between two barriers run concurrently.
    Barrier,
    /// `cuMemsetD{8,16,32}Async` of `count` elements of `width` bytes.
    Fill {
        target: u64,
        pattern: u32,
        width: u8,
        count: usize,
    },
    /// A host-to-device copy of bytes held here.
    Write { target: u64, data: Box<[u8]> },
    /// A copy between two unified addresses.
    Copy { source: u64, target: u64, length: usize },
    /// A kernel launch; `params` holds one 8-byte slot per kernel parameter.
    Launch {
        function: CuFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_memory: u32,
        params: Vec<u64>,
    },
}

// SAFETY: the only handle is a `CUfunction`, an identifier any thread may use with the context
// current; the executable that owns it is kept alive by the submission.
unsafe impl Send for StreamOp {}

/// Turns `commands` with `table` bound to their slots into stream operations.
///
/// # Errors
/// A buffer or executable of another device, an indirect dispatch, a grid beyond the device's
/// limits, or a dispatch whose bindings or constants do not match its kernel.
pub(crate) fn translate(shared: &Arc<DeviceShared>, commands: &[Command], table: &[Binding]) -> Result<Vec<StreamOp>> {
    let mut ops = Vec::with_capacity(commands.len());
    for (index, command) in commands.iter().enumerate() {
        let op = match command {
            Command::Barrier => {
                if ops.last().is_some_and(|last| *last != StreamOp::Barrier) {
                    ops.push(StreamOp::Barrier);
                }
                continue;
            }
            Command::Fill { target, pattern } => fill(shared, target, pattern, table),
            Command::Update { data, target } => address(shared, target, table).map(|(target, _)| StreamOp::Write {
                target,
                data: data.clone(),
            }),
            Command::Copy { source, target } => {
                let (source, length) = address(shared, source, table)?;
                let (target, _) = address(shared, target, table)?;
                host_size(length).map(|length| StreamOp::Copy { source, target, length })
            }
            Command::Dispatch(dispatch) => launch(shared, dispatch, table),
        };
        match op {
            // Empty operations do nothing (and CUDA refuses some of them).
            Ok(StreamOp::Launch { grid, .. }) if grid.contains(&0) => {}
            Ok(StreamOp::Fill { count: 0, .. } | StreamOp::Copy { length: 0, .. }) => {}
            Ok(StreamOp::Write { data, .. }) if data.is_empty() => {}
            Ok(op) => ops.push(op),
            Err(error) => return Err(error.context(format!("command {index} of the command buffer"))),
        }
    }
    Ok(ops)
}

/// The unified address and length of a buffer reference.
fn address(shared: &Arc<DeviceShared>, reference: &BufferRef, table: &[Binding]) -> Result<(u64, u64)> {
    let resolved = reference.resolve(table)?;
    let allocation: &GpuAllocation = downcast(resolved.buffer.allocation().as_any(), "a buffer")?;
    if !allocation.is_on(shared) {
        return Err(Error::invalid_argument("a buffer belongs to another GPU device"));
    }
    let address = allocation.device_pointer() + resolved.buffer.byte_offset() + resolved.offset;
    Ok((address, resolved.length))
}

fn host_size(length: u64) -> Result<usize> {
    usize::try_from(length).map_err(|_| Error::out_of_range(format!("{length} bytes do not fit this host")))
}

fn fill(shared: &Arc<DeviceShared>, target: &BufferRef, pattern: &[u8], table: &[Binding]) -> Result<StreamOp> {
    let (target, length) = address(shared, target, table)?;
    let width = pattern.len();
    let length = host_size(length)?;
    if target % width as u64 != 0 {
        // CUDA's wide fills need aligned addresses; a subspan at an odd offset gets its pattern
        // written out instead.
        let data: Vec<u8> = pattern.iter().copied().cycle().take(length).collect();
        return Ok(StreamOp::Write {
            target,
            data: data.into(),
        });
    }
    let mut word = [0u8; 4];
    word[..width].copy_from_slice(pattern);
    Ok(StreamOp::Fill {
        target,
        pattern: u32::from_le_bytes(word),
        width: width as u8,
        count: length / width,
    })
}

fn launch(shared: &Arc<DeviceShared>, dispatch: &DispatchCommand, table: &[Binding]) -> Result<StreamOp> {
    let executable: &GpuExecutable = downcast(dispatch.executable.as_any(), "the dispatched executable")?;
    let kernel = executable.kernel(dispatch.export, shared)?;
    let info = &kernel.spec.info;
    let WorkgroupCount::Static(grid) = &dispatch.workgroup_count else {
        return Err(Error::unimplemented(
            "indirect workgroup counts are not supported by GPU stream command buffers",
        ));
    };
    let limits = &shared.limits;
    if (0..3).any(|i| grid[i] > limits.max_grid[i]) {
        return Err(Error::out_of_range(format!(
            "workgroup count {grid:?} of '{}' exceeds the device's grid limits {:?}",
            info.name, limits.max_grid
        )));
    }
    if dispatch.bindings.len() != info.binding_count as usize
        || dispatch.constants.len() != info.constant_count as usize
    {
        return Err(Error::invalid_argument(format!(
            "dispatch of '{}' passes {} bindings and {} constants; the kernel takes {} and {}",
            info.name,
            dispatch.bindings.len(),
            dispatch.constants.len(),
            info.binding_count,
            info.constant_count
        )));
    }
    let mut params = Vec::with_capacity(dispatch.bindings.len() + dispatch.constants.len());
    for (ordinal, binding) in dispatch.bindings.iter().enumerate() {
        let (address, _) = address(shared, binding, table)
            .map_err(|e| e.context(format!("binding {ordinal} of dispatch '{}'", info.name)))?;
        params.push(address);
    }
    params.extend(dispatch.constants.iter().map(|&c| u64::from(c)));
    Ok(StreamOp::Launch {
        function: kernel.function,
        grid: *grid,
        block: info.workgroup_size,
        shared_memory: kernel.spec.shared_memory,
        params,
    })
}

/// Issues `ops` onto the device's stream. The caller holds the stream and has made the context
/// current on this thread.
pub(crate) fn issue(shared: &DeviceShared, stream: crate::api::CuStream, ops: &mut [StreamOp]) -> Result<()> {
    let api = &shared.api;
    for op in ops {
        // SAFETY: every address was resolved from a live allocation of this device that the
        // submission keeps alive until the stream passes it, and lengths were range-checked;
        // host data lives in `ops`, which outlives the calls (pageable copies are staged before
        // `cuMemcpyHtoDAsync` returns).
        unsafe {
            match op {
                StreamOp::Barrier => {}
                StreamOp::Fill {
                    target,
                    pattern,
                    width,
                    count,
                } => match width {
                    1 => api.memset_d8_async(*target, *pattern as u8, *count, stream)?,
                    2 => api.memset_d16_async(*target, *pattern as u16, *count, stream)?,
                    _ => api.memset_d32_async(*target, *pattern, *count, stream)?,
                },
                StreamOp::Write { target, data } => {
                    api.memcpy_htod_async(*target, data.as_ptr().cast(), data.len(), stream)?
                }
                StreamOp::Copy { source, target, length } => api.memcpy_async(*target, *source, *length, stream)?,
                StreamOp::Launch {
                    function,
                    grid,
                    block,
                    shared_memory,
                    params,
                } => {
                    // The driver reads each parameter through a pointer to its slot; constants
                    // are u32s in the low half of theirs (little-endian).
                    let mut pointers: Vec<*mut c_void> =
                        params.iter_mut().map(|slot| (slot as *mut u64).cast()).collect();
                    api.launch_kernel(
                        *function,
                        grid[0],
                        grid[1],
                        grid[2],
                        block[0],
                        block[1],
                        block[2],
                        *shared_memory,
                        stream,
                        pointers.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )?
                }
            }
        }
    }
    Ok(())
}
