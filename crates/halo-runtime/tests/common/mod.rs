//! Where the tests find the model fixtures (`fixtures/models`).

use std::path::{Path, PathBuf};

/// The model fixtures: their cases, inputs and IREE's outputs.
pub fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models")
}

/// This architecture's build of the fixture program `file` (`<name>.vmfb`): compiled for x86-64
/// in `fixtures/models`, for AArch64 in its `arm_64/`.
pub fn module(file: &str) -> PathBuf {
    if cfg!(target_arch = "aarch64") {
        models().join("arm_64").join(file)
    } else {
        models().join(file)
    }
}
