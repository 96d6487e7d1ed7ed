//! One `MTLCommandBuffer`: compute and blit encoders opened as the commands need them, all
//! serial, so with Metal's hazard tracking (on for every buffer halo allocates) each command
//! sees the results of the ones before it and a barrier needs nothing more.

use super::memory::MetalAllocation;
use super::{describe, AppleBackend, ApplePipelines, PUSH_CONSTANT_BUFFER_INDEX};
use crate::backend::{check_grid, Committed, Dispatch, Encoder, Span, Threadgroups};
use halo_hal::{downcast, Error, Result};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSRange;
use objc2_metal::{
    MTLArgumentEncoder, MTLBlitCommandEncoder, MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder,
    MTLCommandQueue, MTLComputeCommandEncoder, MTLComputePipelineState, MTLDevice, MTLFunction, MTLResourceOptions,
    MTLResourceUsage, MTLSize,
};
use std::ffi::c_void;
use std::ptr::NonNull;

/// Threads per threadgroup of halo's transfer kernels.
const TRANSFER_THREADS: u32 = 256;

/// The most bytes one transfer kernel dispatch covers (its indices are 32-bit).
const TRANSFER_CHUNK: u64 = 1 << 31;

/// The encoder open now.
enum Open {
    None,
    Compute(Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>),
    Blit(Retained<ProtocolObject<dyn MTLBlitCommandEncoder>>),
}

/// A command buffer being encoded.
pub(super) struct AppleEncoder<'a> {
    backend: &'a AppleBackend,
    command_buffer: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
    open: Open,
    /// Argument buffers and staged update bytes, alive until the command buffer has run.
    kept: Vec<Retained<ProtocolObject<dyn MTLBuffer>>>,
}

impl<'a> AppleEncoder<'a> {
    pub(super) fn new(backend: &'a AppleBackend) -> Result<Self> {
        let command_buffer = (backend.queue.0.commandBuffer())
            .ok_or_else(|| Error::resource_exhausted("the Metal command queue gave no command buffer"))?;
        Ok(AppleEncoder {
            backend,
            command_buffer,
            open: Open::None,
            kept: Vec::new(),
        })
    }

    fn end_open(&mut self) {
        match std::mem::replace(&mut self.open, Open::None) {
            Open::None => {}
            Open::Compute(encoder) => encoder.endEncoding(),
            Open::Blit(encoder) => encoder.endEncoding(),
        }
    }

    fn compute(&mut self) -> Result<Retained<ProtocolObject<dyn MTLComputeCommandEncoder>>> {
        if let Open::Compute(encoder) = &self.open {
            return Ok(encoder.clone());
        }
        self.end_open();
        let encoder = (self.command_buffer.computeCommandEncoder())
            .ok_or_else(|| Error::resource_exhausted("the Metal command buffer gave no compute encoder"))?;
        self.open = Open::Compute(encoder.clone());
        Ok(encoder)
    }

    fn blit(&mut self) -> Result<Retained<ProtocolObject<dyn MTLBlitCommandEncoder>>> {
        if let Open::Blit(encoder) = &self.open {
            return Ok(encoder.clone());
        }
        self.end_open();
        let encoder = (self.command_buffer.blitCommandEncoder())
            .ok_or_else(|| Error::resource_exhausted("the Metal command buffer gave no blit encoder"))?;
        self.open = Open::Blit(encoder.clone());
        Ok(encoder)
    }

    /// A new shared buffer of `length` bytes (at least one), kept until the command buffer ran.
    fn scratch(&mut self, length: usize) -> Result<Retained<ProtocolObject<dyn MTLBuffer>>> {
        let buffer = (self.backend.device.0)
            .newBufferWithLength_options(length.max(1), MTLResourceOptions::StorageModeShared)
            .ok_or_else(|| Error::resource_exhausted(format!("no Metal buffer of {length} bytes for a command")))?;
        self.kept.push(buffer.clone());
        Ok(buffer)
    }

    /// Runs halo's `pipeline` over `length` bytes in chunks a 32-bit index covers: `buffers` are
    /// bound at 0.. with each chunk's offset added, `spec(chunk_length)` after them.
    fn transfer_kernel(
        &mut self,
        pipeline: &ProtocolObject<dyn MTLComputePipelineState>,
        buffers: &[(&ProtocolObject<dyn MTLBuffer>, u64)],
        length: u64,
        spec: impl Fn(u32) -> [u32; 4],
    ) -> Result<()> {
        let encoder = self.compute()?;
        encoder.setComputePipelineState(pipeline);
        let mut done = 0;
        while done < length {
            let chunk = (length - done).min(TRANSFER_CHUNK) as u32;
            for (index, &(buffer, offset)) in buffers.iter().enumerate() {
                // SAFETY: the offset lies inside the buffer (the command was validated), and the
                // kernel touches only the chunk's bytes after it.
                unsafe { encoder.setBuffer_offset_atIndex(Some(buffer), (offset + done) as usize, index) };
            }
            let words = spec(chunk);
            // SAFETY: 16 readable bytes, copied by Metal before the call returns.
            unsafe {
                encoder.setBytes_length_atIndex(NonNull::from(&words).cast::<c_void>(), 16, buffers.len());
            }
            let groups = chunk.div_ceil(TRANSFER_THREADS);
            encoder.dispatchThreadgroups_threadsPerThreadgroup(size([groups, 1, 1]), size([TRANSFER_THREADS, 1, 1]));
            done += u64::from(chunk);
        }
        Ok(())
    }
}

/// The Metal buffer under a span and the span's offset in it.
fn metal_buffer<'s>(span: &Span<'s>) -> Result<(&'s ProtocolObject<dyn MTLBuffer>, u64)> {
    let allocation: &MetalAllocation = downcast(span.buffer.allocation().as_any(), "a Metal buffer")?;
    Ok((allocation.buffer(), span.buffer.byte_offset() + span.offset))
}

fn size([width, height, depth]: [u32; 3]) -> MTLSize {
    MTLSize {
        width: width as usize,
        height: height as usize,
        depth: depth as usize,
    }
}

/// Whether the blit encoder takes these offsets and length (macOS wants multiples of 4).
fn blit_aligned(values: &[u64]) -> bool {
    values.iter().all(|v| v % 4 == 0)
}

impl Encoder for AppleEncoder<'_> {
    fn dispatch(&mut self, dispatch: &Dispatch<'_>) -> Result<()> {
        let pipelines: &ApplePipelines = downcast(dispatch.pipelines.as_any(), "a Metal pipeline")?;
        let pipeline = pipelines.exports.get(dispatch.export).ok_or_else(|| {
            Error::out_of_range(format!(
                "export {} of an executable of {} exports",
                dispatch.export,
                pipelines.exports.len()
            ))
        })?;
        if let Threadgroups::Direct(groups) = dispatch.threadgroups {
            if groups.contains(&0) {
                return Ok(());
            }
            check_grid(groups, pipeline.threadgroup_size)?;
        }
        // SAFETY: buffer 0 of every IREE kernel is its argument buffer.
        let arguments = unsafe { pipeline.function.0.newArgumentEncoderWithBufferIndex(0) };
        let argument_buffer = self.scratch(arguments.encodedLength())?;
        let encoder = self.compute()?;
        encoder.setComputePipelineState(&pipeline.state.0);
        // SAFETY: the argument buffer holds `encodedLength` bytes from offset 0.
        unsafe { arguments.setArgumentBuffer_offset(Some(&argument_buffer), 0) };
        for (ordinal, span) in dispatch.bindings.iter().enumerate() {
            let (buffer, offset) = metal_buffer(span)?;
            // SAFETY: `[[id(n)]]` is the HAL binding ordinal in IREE's MSL, and the offset lies in
            // the buffer (the command was validated).
            unsafe { arguments.setBuffer_offset_atIndex(Some(buffer), offset as usize, ordinal) };
            // Buffers reached through an argument buffer are resident only when declared.
            encoder.useResource_usage(
                ProtocolObject::from_ref(buffer),
                MTLResourceUsage::Read | MTLResourceUsage::Write,
            );
        }
        // SAFETY: the argument buffer was encoded above and lives until the command buffer ran.
        unsafe { encoder.setBuffer_offset_atIndex(Some(&argument_buffer), 0, 0) };
        if let Some(first) = dispatch.constants.first() {
            // SAFETY: the constants are readable for their length; Metal copies them now.
            unsafe {
                encoder.setBytes_length_atIndex(
                    NonNull::from(first).cast::<c_void>(),
                    4 * dispatch.constants.len(),
                    PUSH_CONSTANT_BUFFER_INDEX,
                );
            }
        }
        let threads = size(pipeline.threadgroup_size);
        match dispatch.threadgroups {
            Threadgroups::Direct(groups) => encoder.dispatchThreadgroups_threadsPerThreadgroup(size(groups), threads),
            Threadgroups::Indirect(span) => {
                let (buffer, offset) = metal_buffer(&span)?;
                // SAFETY: three u32 counts lie at the offset (the command was validated).
                unsafe {
                    encoder.dispatchThreadgroupsWithIndirectBuffer_indirectBufferOffset_threadsPerThreadgroup(
                        buffer,
                        offset as usize,
                        threads,
                    );
                }
            }
        }
        Ok(())
    }

    fn fill(&mut self, target: Span<'_>, pattern: &[u8]) -> Result<()> {
        if target.length == 0 {
            return Ok(());
        }
        let (buffer, offset) = metal_buffer(&target)?;
        let one_byte = pattern.iter().all(|&b| b == pattern[0]);
        if one_byte && blit_aligned(&[offset, target.length]) {
            let range = NSRange::new(offset as usize, target.length as usize);
            self.blit()?.fillBuffer_range_value(buffer, range, pattern[0]);
            return Ok(());
        }
        let mut word = [0u8; 4];
        word[..pattern.len()].copy_from_slice(pattern);
        let (word, width) = (u32::from_le_bytes(word), pattern.len() as u32);
        let fill = self.backend.fill.0.clone();
        self.transfer_kernel(&fill, &[(buffer, offset)], target.length, |chunk| {
            [word, chunk, width, 0]
        })
    }

    fn update(&mut self, target: Span<'_>, data: &[u8]) -> Result<()> {
        let Some(bytes) = NonNull::new(data.as_ptr().cast_mut()) else {
            return Ok(());
        };
        // SAFETY: `data` is readable for its length; Metal copies it into the new buffer.
        let staged = unsafe {
            (self.backend.device.0).newBufferWithBytes_length_options(
                bytes.cast(),
                data.len(),
                MTLResourceOptions::StorageModeShared,
            )
        }
        .ok_or_else(|| Error::resource_exhausted(format!("no Metal buffer to stage {} bytes", data.len())))?;
        self.kept.push(staged.clone());
        let source = (&*staged, 0);
        let (buffer, offset) = metal_buffer(&target)?;
        self.copy_between(source, (buffer, offset), data.len() as u64)
    }

    fn copy(&mut self, source: Span<'_>, target: Span<'_>) -> Result<()> {
        let source = metal_buffer(&source)?;
        let target_place = metal_buffer(&target)?;
        self.copy_between(source, target_place, target.length)
    }

    fn barrier(&mut self) -> Result<()> {
        // Serial encoders and tracked buffers already order every command after the ones before.
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<Box<dyn Committed>> {
        self.end_open();
        self.command_buffer.commit();
        Ok(Box::new(CommittedBuffer {
            command_buffer: self.command_buffer.clone(),
            _kept: std::mem::take(&mut self.kept),
        }))
    }
}

/// A committed `MTLCommandBuffer`, with the argument buffers and staged bytes it reads.
struct CommittedBuffer {
    command_buffer: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
    _kept: Vec<Retained<ProtocolObject<dyn MTLBuffer>>>,
}

// SAFETY: once committed, a command buffer is only waited for and asked its status and error,
// which Metal allows from any thread (its completion handlers run on Metal's own threads); the
// kept buffers are thread-safe Metal objects.
unsafe impl Send for CommittedBuffer {}

impl Committed for CommittedBuffer {
    fn wait(self: Box<Self>) -> Result<()> {
        self.command_buffer.waitUntilCompleted();
        if self.command_buffer.status() == MTLCommandBufferStatus::Error {
            let reason = self
                .command_buffer
                .error()
                .map_or_else(|| "no reason given".into(), |e| describe(&e));
            return Err(Error::internal(format!("the Metal command buffer failed: {reason}")));
        }
        Ok(())
    }
}

impl AppleEncoder<'_> {
    /// Copies `length` bytes, by blit where macOS allows it and by halo's kernel elsewhere.
    fn copy_between(
        &mut self,
        (source, source_offset): (&ProtocolObject<dyn MTLBuffer>, u64),
        (target, target_offset): (&ProtocolObject<dyn MTLBuffer>, u64),
        length: u64,
    ) -> Result<()> {
        if length == 0 {
            return Ok(());
        }
        if blit_aligned(&[source_offset, target_offset, length]) {
            let blit = self.blit()?;
            // SAFETY: both ranges lie inside their buffers (the command was validated).
            unsafe {
                blit.copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size(
                    source,
                    source_offset as usize,
                    target,
                    target_offset as usize,
                    length as usize,
                );
            }
            return Ok(());
        }
        let copy = self.backend.copy.0.clone();
        let buffers = [(source, source_offset), (target, target_offset)];
        self.transfer_kernel(&copy, &buffers, length, |chunk| [chunk, 0, 0, 0])
    }
}

impl Drop for AppleEncoder<'_> {
    fn drop(&mut self) {
        // An encoder left open when encoding failed must still be ended before release.
        self.end_open();
    }
}
