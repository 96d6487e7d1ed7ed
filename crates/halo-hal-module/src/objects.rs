//! The HAL objects as VM reference types (`!hal.device`, `!hal.buffer_view`, ...).
//!
//! Each wraps the HAL's own handle (an `Arc` or a cheap clone), so a VM register holding one keeps
//! the object alive exactly as long as IREE's retain/release would.

use halo_hal::{Buffer, BufferView, CommandBuffer, Device, Executable, Fence};
use halo_vm::ref_types::{Ref, RefObject};
use std::sync::{Arc, OnceLock};

macro_rules! ref_object {
    ($(#[$doc:meta])* $name:ident($inner:ty) = $type_name:literal) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(pub $inner);

        impl RefObject for $name {
            fn type_name(&self) -> &'static str {
                $type_name
            }
        }

        impl $name {
            /// Wraps the object in a VM reference.
            pub fn into_ref(self) -> Ref {
                Ref::new(self)
            }
        }
    };
}

ref_object!(
    /// `!hal.device`: one device of the module's device group.
    HalDevice(Arc<dyn Device>) = "hal.device"
);
ref_object!(
    /// `!hal.allocator`: a device's allocator (reached through its device, which owns it).
    HalAllocator(Arc<dyn Device>) = "hal.allocator"
);
ref_object!(
    /// `!hal.buffer`: a range of device memory.
    HalBuffer(Buffer) = "hal.buffer"
);

/// `!hal.buffer_view`: a buffer with shape and element type; what programs take and return.
pub struct HalBufferView {
    view: BufferView,
    /// The view's buffer as a `!hal.buffer` reference, made on the first `hal.buffer_view.buffer`
    /// and shared after, so programs that ask for it on every call allocate nothing for it.
    buffer: OnceLock<Ref>,
}

impl HalBufferView {
    /// Wraps `view`.
    pub fn new(view: BufferView) -> Self {
        HalBufferView {
            view,
            buffer: OnceLock::new(),
        }
    }

    /// Wraps `view`, whose buffer is the one `buffer` (a [`HalBuffer`] reference) holds.
    pub(crate) fn over(view: BufferView, buffer: Ref) -> Self {
        HalBufferView {
            view,
            buffer: OnceLock::from(buffer),
        }
    }

    /// The buffer view.
    pub fn view(&self) -> &BufferView {
        &self.view
    }

    /// The view's buffer as a [`HalBuffer`] reference.
    pub fn buffer_ref(&self) -> Ref {
        self.buffer
            .get_or_init(|| HalBuffer(self.view.buffer().clone()).into_ref())
            .clone()
    }

    /// Wraps the view in a VM reference.
    pub fn into_ref(self) -> Ref {
        Ref::new(self)
    }
}

impl RefObject for HalBufferView {
    fn type_name(&self) -> &'static str {
        "hal.buffer_view"
    }
}

ref_object!(
    /// `!hal.command_buffer`: a recording of transfers and dispatches.
    HalCommandBuffer(Arc<CommandBuffer>) = "hal.command_buffer"
);
ref_object!(
    /// `!hal.executable`: kernels prepared for one device.
    HalExecutable(Arc<dyn Executable>) = "hal.executable"
);
ref_object!(
    /// `!hal.fence`: timepoints queue operations wait on and signal.
    HalFence(Fence) = "hal.fence"
);
ref_object!(
    /// `!hal.file`: read-only bytes that queue reads copy from (`hal.ex.file.from_memory`).
    HalFile(HostFile) = "hal.file"
);

/// The bytes behind a [`HalFile`]: a range of a read-only `vm.buffer`, kept alive by reference.
#[derive(Clone)]
pub struct HostFile {
    /// The `vm.buffer` holding the bytes.
    pub source: Ref,
    /// Byte range within it.
    pub range: std::ops::Range<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::buffer_view::Encoding;
    use halo_hal::{Allocator, BufferParams, ElementType, HeapAllocator};

    fn view() -> BufferView {
        let buffer = HeapAllocator::default()
            .allocate_buffer(BufferParams::default(), 16)
            .unwrap();
        BufferView::new(buffer, &[4], ElementType::FLOAT_32, Encoding::DenseRowMajor).unwrap()
    }

    #[test]
    fn a_view_hands_out_one_buffer_reference() {
        let view = HalBufferView::new(view());
        let (first, second) = (view.buffer_ref(), view.buffer_ref());
        assert!(first.ptr_eq(&second));
        assert_eq!(first.expect::<HalBuffer>("buffer").unwrap().0.byte_length(), 16);
    }

    #[test]
    fn a_view_over_a_buffer_reference_hands_out_that_reference() {
        let view = view();
        let buffer = HalBuffer(view.buffer().clone()).into_ref();
        assert!(HalBufferView::over(view, buffer.clone()).buffer_ref().ptr_eq(&buffer));
    }
}
