//! Files that users name (modules, executables, inputs, flagfiles): only regular files are
//! read, since a FIFO blocks until a writer appears and a device such as `/dev/zero` never ends,
//! and buffers for their contents are allocated fallibly.

use crate::{Error, Result};
use std::io::Read;
use std::path::Path;

/// The length of the regular file at `path`.
///
/// # Errors
/// `NotFound` when it cannot be inspected; `InvalidArgument` when it is not a regular file.
pub fn regular_file_len(path: &Path) -> Result<u64> {
    let metadata =
        std::fs::metadata(path).map_err(|e| Error::not_found(format!("reading '{}': {e}", path.display())))?;
    if !metadata.is_file() {
        return Err(Error::invalid_argument(format!(
            "'{}' is not a regular file ({})",
            path.display(),
            describe(&metadata.file_type())
        )));
    }
    Ok(metadata.len())
}

/// The contents of the regular file at `path`.
///
/// # Errors
/// As [`regular_file_len`]; `ResourceExhausted` when its contents do not fit in memory;
/// `DataLoss` when reading fails.
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let len = regular_file_len(path)?;
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::not_found(format!("reading '{}': {e}", path.display())))?;
    let mut bytes = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|len| bytes.try_reserve_exact(len).ok())
        .ok_or_else(|| {
            Error::resource_exhausted(format!(
                "'{}' holds {len} bytes, more than fit in memory",
                path.display()
            ))
        })?;
    // A file that grows while it is read is read as far as its length when it was inspected.
    file.by_ref()
        .take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::data_loss(format!("reading '{}': {e}", path.display())))?;
    Ok(bytes)
}

/// The contents of the regular text file at `path`.
///
/// # Errors
/// As [`read_regular`]; `InvalidArgument` when it is not UTF-8.
pub fn read_regular_text(path: &Path) -> Result<String> {
    String::from_utf8(read_regular(path)?)
        .map_err(|_| Error::invalid_argument(format!("'{}' is not UTF-8 text", path.display())))
}

fn describe(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("halo-file-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("data.bin");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(read_regular(&file).unwrap(), b"abc");
        assert_eq!(regular_file_len(&file).unwrap(), 3);
        let error = read_regular(&dir).unwrap_err();
        assert!(
            error.to_string().contains("is not a regular file (a directory)"),
            "{error}"
        );
        let error = read_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(error.to_string().contains("a character device"), "{error}");
        let error = read_regular(&dir.join("missing")).unwrap_err();
        assert_eq!(error.code(), crate::StatusCode::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
