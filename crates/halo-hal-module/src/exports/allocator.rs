//! `hal.allocator.*`: buffers from a device's allocator, and host bytes imported without a copy.

use super::{object, Row};
use crate::objects::{HalAllocator, HalBuffer};
use crate::{Args, HalArgs, HalModuleState};
use halo_hal::host_memory::HOST_ALIGNMENT;
use halo_hal::{BufferParams, BufferUsage, HostBytes, MemoryAccess, MemoryType, QueueAffinity, Result, ResultExt};
use halo_vm::ref_types::{check_range, Buffer as VmBuffer, Ref};
use halo_vm::{Results, Value};
use smallvec::smallvec;
use std::ops::Range;

pub(crate) const EXPORTS: &[Row] = &[
    ("allocator.allocate", "0rIiiI_r", allocate),
    ("allocator.import", "0riIiirII_r", import),
];

fn params(affinity: i64, memory_types: i32, usage: i32, access: MemoryAccess) -> BufferParams {
    BufferParams {
        memory_type: MemoryType::from_bits_retain(memory_types as u32),
        usage: BufferUsage::from_bits_retain(usage as u32),
        access,
        queue_affinity: QueueAffinity(affinity as u64),
        min_alignment: 0,
    }
}

/// `(allocator, affinity, memory_types, usage, size) -> buffer`
fn allocate(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let allocator = args.object::<HalAllocator>(0)?;
    let size = args.size(4)?;
    let params = params(args.i64(1)?, args.i32(2)?, args.i32(3)?, MemoryAccess::ALL);
    let buffer = allocator
        .0
        .allocator()
        .allocate_buffer(params, size)
        .with_context(|| format!("allocating a buffer of {size} bytes"))?;
    Ok(object(HalBuffer(buffer)))
}

/// `(allocator, try, affinity, memory_types, usage, source, offset, length) -> buffer or null`
///
/// Read-only sources (rodata, including external rodata mapped from the module file) are
/// imported in place for constant use when they start on a [`HOST_ALIGNMENT`] boundary, as every
/// buffer halo allocates does (compiled kernels load bindings with aligned vector instructions);
/// anything else fails, and a `try` import then returns null so the program falls back to
/// allocate-and-copy. A module loaded from bytes at an arbitrary address (`from_bytes`) thus
/// copies its constants instead of faulting in its first kernel.
fn import(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let allocator = args.object::<HalAllocator>(0)?;
    let is_try = args.i32(1)? != 0;
    let source = args.optional_ref(5)?.cloned();
    let outcome = (|| {
        let source = source.ok_or_else(|| halo_hal::Error::invalid_argument("import source is null"))?;
        let bytes = source.expect::<VmBuffer>("import source")?;
        let length = match args.i64(7)? {
            -1 => (bytes.len() as u64).saturating_sub(args.size(6)?),
            length => length as u64,
        };
        let range = check_range(args.size(6)?, length, bytes.len())?;
        let usage = args.i32(4)?;
        let Some(read_only) = bytes.read_only_bytes() else {
            return Err(halo_hal::Error::unimplemented(
                "only read-only vm.buffers can be imported in place",
            ));
        };
        let address = read_only[range.clone()].as_ptr() as usize;
        if !address.is_multiple_of(HOST_ALIGNMENT) {
            return Err(halo_hal::Error::unimplemented(format!(
                "bytes [{}, {}) of the source start at address {address:#x}, not on a {HOST_ALIGNMENT}-byte \
                 boundary, so they cannot be bound to kernels in place",
                range.start, range.end
            )));
        }
        if usage as u32 & BufferUsage::SHARING_IMMUTABLE.bits() == 0 {
            return Err(halo_hal::Error::permission_denied(
                "source buffer is immutable and can only be imported for constant usage",
            ));
        }
        let params = params(args.i64(2)?, args.i32(3)?, usage, MemoryAccess::READ);
        let host = Box::new(ReadOnlyVmBytes {
            source: source.clone(),
            range,
        });
        allocator.0.allocator().import_host(params, host)
    })();
    match outcome {
        Ok(buffer) => Ok(object(HalBuffer(buffer))),
        Err(_) if is_try => Ok(smallvec![Value::Ref(None)]),
        Err(error) => Err(error.context("importing a vm.buffer")),
    }
}

/// A range of a read-only `vm.buffer` lent to a HAL buffer; holding the reference keeps the
/// bytes (often the memory-mapped module file) alive.
struct ReadOnlyVmBytes {
    source: Ref,
    range: Range<usize>,
}

impl HostBytes for ReadOnlyVmBytes {
    fn host_ptr(&mut self) -> *mut u8 {
        // Checked read-only before import; the bytes never move while `source` lives.
        self.source
            .downcast::<VmBuffer>()
            .and_then(VmBuffer::read_only_bytes)
            .map_or(std::ptr::null_mut(), |bytes| {
                bytes[self.range.clone()].as_ptr().cast_mut()
            })
    }
    fn byte_len(&self) -> usize {
        self.range.len()
    }
    fn writable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::state_without_devices;
    use halo_hal::{Device, MemoryType};
    use std::sync::Arc;

    fn local_sync() -> Arc<dyn Device> {
        let mut registry = halo_hal::DriverRegistry::new();
        halo_local::register_drivers(&mut registry);
        registry.create_device("local-sync://").unwrap()
    }

    /// A `try` import for constant use of bytes `[offset, offset + 256)` of read-only `source`.
    fn try_import(device: &Arc<dyn Device>, source: &Ref, offset: i64) -> Option<halo_hal::Buffer> {
        let usage = (BufferUsage::SHARING_IMMUTABLE | BufferUsage::DISPATCH_STORAGE).bits() as i32;
        let args = [
            Value::Ref(Some(HalAllocator(device.clone()).into_ref())),
            Value::I32(1),
            Value::I64(-1),
            Value::I32(MemoryType::DEVICE_LOCAL.bits() as i32),
            Value::I32(usage),
            Value::Ref(Some(source.clone())),
            Value::I64(offset),
            Value::I64(256),
        ];
        let results = import(&state_without_devices(), &Args::from_values(&args)).unwrap();
        match &results[0] {
            Value::Ref(Some(buffer)) => Some(buffer.expect::<HalBuffer>("result").unwrap().0.clone()),
            _ => None,
        }
    }

    #[test]
    fn constants_off_a_host_alignment_boundary_are_copied_by_the_program_not_bound_in_place() {
        let device = local_sync();
        let pattern: Vec<u8> = (0..=255).cycle().take(1024).collect();
        let bytes: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(pattern);
        let start = bytes.as_ref().as_ref().as_ptr() as usize;
        let skip = start.next_multiple_of(HOST_ALIGNMENT) - start;
        let source = Ref::new(VmBuffer::read_only(bytes, 0..1024));

        let aligned = try_import(&device, &source, skip as i64).expect("imported in place");
        let expected: Vec<u8> = (skip..skip + 256).map(|i| i as u8).collect();
        assert_eq!(aligned.read_all().unwrap(), expected);
        for off_boundary in [skip + 4, skip + 16, skip + 32] {
            assert!(
                try_import(&device, &source, off_boundary as i64).is_none(),
                "bytes at {off_boundary} were bound in place"
            );
        }
    }
}
