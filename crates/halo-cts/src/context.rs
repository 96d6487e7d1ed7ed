//! The device handed to each case, with the helpers cases share.

use crate::{DeviceFactory, Manifest};
use halo_hal::{
    Binding, Buffer, BufferParams, BufferRef, CommandBuffer, CommandBufferMode, CommandCategory, Device, Executable,
    ExecutableParams, Fence, QueueAffinity, Result, Timeout,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Whether command buffer cases name buffers directly or through binding-table slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recording {
    /// Buffers fixed at record time.
    Direct,
    /// Buffers bound at submit through the binding table.
    BindingTable,
}

/// A device under test plus what a case needs to drive it.
pub struct CtsDevice {
    /// The device.
    pub device: Arc<dyn Device>,
    /// The driver's manifest.
    pub manifest: &'static Manifest,
    /// How command buffer cases reference buffers.
    pub recording: Recording,
    /// Creates more devices from URIs, as the suite's registry does.
    pub factory: DeviceFactory,
}

/// Generous bound on any wait in the suite, so a hang fails instead of blocking CI.
pub const WAIT: Duration = Duration::from_secs(20);

impl CtsDevice {
    /// Wraps `device` so that a driver's own tests can run a case on a device they configured.
    pub fn new(
        device: Arc<dyn Device>,
        manifest: &'static Manifest,
        recording: Recording,
        factory: DeviceFactory,
    ) -> Self {
        CtsDevice {
            device,
            manifest,
            recording,
            factory,
        }
    }

    /// A host-mappable buffer of `size` zeroed bytes.
    pub fn buffer(&self, size: u64) -> Buffer {
        self.device
            .allocator()
            .allocate_buffer(BufferParams::host_mappable(), size)
            .expect("allocating buffer")
    }

    /// A host-mappable buffer holding `bytes`.
    pub fn buffer_with(&self, bytes: &[u8]) -> Buffer {
        let buffer = self.buffer(bytes.len() as u64);
        buffer.map_write(0, bytes).expect("writing buffer");
        buffer
    }

    /// A begun command buffer of the given mode that may reference `slots` binding-table slots.
    pub fn command_buffer(&self, mode: CommandBufferMode, slots: u32) -> Arc<CommandBuffer> {
        let command_buffer = self
            .device
            .create_command_buffer(mode, CommandCategory::ANY, QueueAffinity::ANY, slots)
            .expect("creating command buffer");
        command_buffer.begin().expect("begin");
        command_buffer
    }

    /// A reference to `[offset, offset + length)` of `buffer`, as slot `slot` in binding-table
    /// mode (the caller passes the table from [`Self::table`]).
    pub fn reference(&self, slot: u32, buffer: &Buffer, offset: u64, length: u64) -> BufferRef {
        match self.recording {
            Recording::Direct => BufferRef::direct(buffer, offset, length),
            Recording::BindingTable => BufferRef::slot(slot, offset, length),
        }
    }

    /// The binding table for `buffers` (slot `i` is `buffers[i]`); empty in direct mode.
    pub fn table<'a>(&self, buffers: &[&'a Buffer]) -> Vec<Binding<'a>> {
        match self.recording {
            Recording::Direct => Vec::new(),
            Recording::BindingTable => buffers.iter().map(|b| Binding::whole(b)).collect(),
        }
    }

    /// Submits `command_buffer` with `table` and waits for it.
    pub fn submit_and_wait(&self, command_buffer: &Arc<CommandBuffer>, table: &[Binding]) -> Result<()> {
        let semaphore = self.device.create_semaphore(0)?;
        let done = Fence::at(semaphore, 1);
        self.device
            .queue_execute(QueueAffinity::ANY, &Fence::new(), &done, Some(command_buffer), table)?;
        done.wait(Timeout::from(WAIT))
    }

    /// Path of the fixture executable `name` in this driver's format: `<name>.<format>.so` for
    /// CPU libraries, `<name>.<format>.fb` for GPU FlatBuffers (`fixtures/executables`).
    pub fn executable_path(&self, name: &str) -> PathBuf {
        let format = self.manifest.executable_format;
        let extension = if format.ends_with("-fb") { "fb" } else { "so" };
        fixture_path(&format!("{name}.{format}.{extension}"))
    }

    /// Loads a fixture executable (see [`Self::executable_path`]).
    pub fn executable(&self, name: &str) -> Arc<dyn Executable> {
        let path = self.executable_path(name);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        self.device
            .create_executable_cache()
            .and_then(|cache| {
                cache.prepare_executable(&ExecutableParams {
                    format: self.manifest.executable_format,
                    data: &data,
                    constants: &[],
                })
            })
            .unwrap_or_else(|e| panic!("preparing {}: {e}", path.display()))
    }
}

/// Path of a file under the repository's `fixtures/executables`.
pub fn fixture_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/executables")
        .join(file)
}

/// Little-endian bytes of f32 values.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// f32 values from little-endian bytes.
pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Little-endian bytes of i32 values.
pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// i32 values from little-endian bytes.
pub fn i32_values(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
