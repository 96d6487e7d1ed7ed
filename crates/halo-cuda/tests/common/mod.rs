//! What several test binaries share: the fake CUDA library (`halo-cuda-fake`, a dev-dependency
//! that cargo builds as a shared library beside the test binaries).

use halo_cuda::{GpuDriver, Vendor};

/// The `cuda` driver over the fake library.
pub fn fake_driver() -> halo_hal::Result<GpuDriver> {
    let exe = std::env::current_exe().expect("the test binary's path");
    GpuDriver::from_library(Vendor::Cuda, &exe.with_file_name("libhalo_cuda_fake.so"))
}
