//! Vulkan result codes as halo errors.

use ash::vk;
use halo_hal::{Error, StatusCode, Timeout};
use std::time::Instant;

/// A HAL timeout as the nanoseconds Vulkan's waits take (`u64::MAX` waits forever).
pub(crate) fn timeout_nanos(timeout: Timeout) -> u64 {
    match timeout {
        Timeout::Immediate => 0,
        Timeout::Infinite => u64::MAX,
        Timeout::Deadline(deadline) => {
            u64::try_from(deadline.saturating_duration_since(Instant::now()).as_nanos()).unwrap_or(u64::MAX)
        }
    }
}

/// The error for `result`, returned by the Vulkan call described by `what`.
pub(crate) fn vk_error(result: vk::Result, what: &str) -> Error {
    let code = match result {
        vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => StatusCode::ResourceExhausted,
        vk::Result::ERROR_FRAGMENTED_POOL | vk::Result::ERROR_OUT_OF_POOL_MEMORY => StatusCode::ResourceExhausted,
        vk::Result::TIMEOUT => StatusCode::DeadlineExceeded,
        // What IREE reports too: whatever the device was computing is gone.
        vk::Result::ERROR_DEVICE_LOST => StatusCode::DataLoss,
        vk::Result::ERROR_INITIALIZATION_FAILED | vk::Result::ERROR_INCOMPATIBLE_DRIVER => StatusCode::Unavailable,
        vk::Result::ERROR_LAYER_NOT_PRESENT | vk::Result::ERROR_EXTENSION_NOT_PRESENT => StatusCode::Unavailable,
        vk::Result::ERROR_FEATURE_NOT_PRESENT => StatusCode::Unavailable,
        vk::Result::ERROR_INVALID_SHADER_NV => StatusCode::InvalidArgument,
        _ => StatusCode::Internal,
    };
    let lost = if result == vk::Result::ERROR_DEVICE_LOST {
        " (the Vulkan device was lost)"
    } else {
        ""
    };
    Error::new(code, format!("{what} failed: {result:?}{lost}"))
}

/// Converts an ash result, naming the call.
pub(crate) trait VkResultExt<T> {
    /// The value, or the halo error for the failed call `what`.
    fn or_vk(self, what: &str) -> halo_hal::Result<T>;
}

impl<T> VkResultExt<T> for ash::prelude::VkResult<T> {
    fn or_vk(self, what: &str) -> halo_hal::Result<T> {
        self.map_err(|result| vk_error(result, what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_loss_is_data_loss_and_says_so() {
        let error = vk_error(vk::Result::ERROR_DEVICE_LOST, "vkQueueSubmit");
        assert_eq!(error.code(), StatusCode::DataLoss);
        assert!(error.message().contains("vkQueueSubmit"), "{error}");
        assert!(error.message().contains("device was lost"), "{error}");
        assert_eq!(
            vk_error(vk::Result::ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory").code(),
            StatusCode::ResourceExhausted
        );
    }
}
