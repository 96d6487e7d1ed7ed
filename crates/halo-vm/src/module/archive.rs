//! The archive around the FlatBuffer: optional ZIP local-file header, size prefix, and the
//! 64-byte-aligned base that external rodata offsets count from.
//!
//! Layout of a `.vmfb` as iree-compile 3.13 writes it (checked against real files):
//! ```text
//! [ZIP local-file header: 30 bytes + file name + extra field]   only with the polyglot-zip option (default on)
//! [u32 little-endian length N][N bytes of FlatBuffer, identifier "IREE"]
//! [padding up to a multiple of 64 from the start of the file]    <- rodata base
//! [external rodata segments at `rodata base + external_data_offset`]
//! [ZIP central directory]                                          only with the polyglot-zip option
//! ```
//! With the ZIP option each external segment is itself preceded by a ZIP local-file header (its
//! extra field pads the data to the segment's alignment), which is why the first segment's
//! `external_data_offset` is 64 or 96 rather than 0; the offsets already account for it. Without
//! the ZIP option the first segment sits at offset 0.

use halo_hal::{Error, Result};
use std::ops::Range;

/// Signature that opens a ZIP local-file header (`PK\x03\x04`, little-endian).
pub const ZIP_LOCAL_FILE_HEADER_SIGNATURE: u32 = 0x0403_4B50;
/// Size of the fixed part of a ZIP local-file header.
pub const ZIP_LOCAL_FILE_HEADER_SIZE: usize = 30;
/// Alignment of the rodata base within the file. External segments are aligned to their own
/// `alignment` relative to it (16 for executables), not necessarily to 64.
pub const ARCHIVE_SEGMENT_ALIGNMENT: usize = 64;
/// File identifier of a `BytecodeModuleDef` FlatBuffer.
pub const FILE_IDENTIFIER: &[u8; 4] = b"IREE";
/// Fewest bytes a module may have after the ZIP header: size prefix, root offset, identifier and
/// a minimal vtable reference (IREE's loader rejects anything shorter too).
const MIN_MODULE_BYTES: usize = 16;

/// Where the parts of an archive lie, as byte offsets from the start of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveLayout {
    /// Length of the ZIP local-file header that was skipped (0 when the file has none).
    pub zip_header_len: usize,
    /// The FlatBuffer itself, without its 4-byte size prefix.
    pub flatbuffer: Range<usize>,
    /// Where external rodata offsets count from: the end of the FlatBuffer rounded up to 64.
    /// May lie past the end of the file when the module has no external rodata.
    pub rodata_base: usize,
}

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Finds the FlatBuffer and the rodata base in `bytes`, checking every length against the file.
///
/// # Errors
/// `InvalidArgument` when the ZIP header or the size prefix points past the end of the file, the
/// file is too short to hold a module, or the FlatBuffer identifier is not `IREE`.
pub fn parse(bytes: &[u8]) -> Result<ArchiveLayout> {
    let file_len = bytes.len();
    if file_len == 0 {
        return Err(Error::invalid_argument("module file is empty (0 bytes)"));
    }

    // Like IREE, a header is only looked for when all of its fixed part is present.
    let mut zip_header_len = 0;
    if file_len >= ZIP_LOCAL_FILE_HEADER_SIZE && read_u32(bytes, 0) == ZIP_LOCAL_FILE_HEADER_SIGNATURE {
        let name_len = usize::from(read_u16(bytes, 26));
        let extra_len = usize::from(read_u16(bytes, 28));
        zip_header_len = ZIP_LOCAL_FILE_HEADER_SIZE + name_len + extra_len;
        if zip_header_len > file_len {
            return Err(Error::invalid_argument(format!(
                "module starts with a ZIP local-file header of {zip_header_len} bytes \
                 (30 + file name {name_len} + extra field {extra_len}) but the file has only {file_len} bytes"
            )));
        }
    }

    let module_len = file_len - zip_header_len;
    if module_len < MIN_MODULE_BYTES {
        return Err(Error::invalid_argument(format!(
            "module too short: {module_len} bytes at byte offset {zip_header_len} \
             (a size-prefixed FlatBuffer needs at least {MIN_MODULE_BYTES}); file has {file_len} bytes"
        )));
    }

    let prefix_at = zip_header_len;
    let flatbuffer_len = read_u32(bytes, prefix_at) as usize;
    let available = module_len - 4;
    if flatbuffer_len > available {
        return Err(Error::invalid_argument(format!(
            "FlatBuffer size prefix at byte offset {prefix_at} is {flatbuffer_len} bytes \
             but only {available} bytes follow it in the file ({file_len} bytes)"
        )));
    }
    let start = prefix_at + 4;
    if flatbuffer_len < 8 {
        return Err(Error::invalid_argument(format!(
            "FlatBuffer size prefix at byte offset {prefix_at} is {flatbuffer_len} bytes, \
             too small for a root offset and file identifier (8 bytes)"
        )));
    }
    let flatbuffer = start..start + flatbuffer_len;

    let identifier = &bytes[start + 4..start + 8];
    if identifier != FILE_IDENTIFIER {
        return Err(Error::invalid_argument(format!(
            "FlatBuffer at byte offset {start} has file identifier {} but a bytecode module has \"IREE\"; \
             not a .vmfb",
            show_identifier(identifier)
        )));
    }

    let rodata_base = flatbuffer.end.next_multiple_of(ARCHIVE_SEGMENT_ALIGNMENT);
    Ok(ArchiveLayout {
        zip_header_len,
        flatbuffer,
        rodata_base,
    })
}

fn show_identifier(identifier: &[u8]) -> String {
    match std::str::from_utf8(identifier) {
        Ok(text) if text.chars().all(|c| c.is_ascii_graphic()) => format!("\"{text}\""),
        _ => format!("{identifier:02x?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module_with_prefix(len: u32, total: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; total];
        bytes[..4].copy_from_slice(&len.to_le_bytes());
        bytes[8..12].copy_from_slice(FILE_IDENTIFIER);
        bytes
    }

    #[test]
    fn plain_module_rodata_base_is_aligned_end_of_flatbuffer() {
        let layout = parse(&module_with_prefix(100, 200)).unwrap();
        assert_eq!(layout.zip_header_len, 0);
        assert_eq!(layout.flatbuffer, 4..104);
        assert_eq!(layout.rodata_base, 128);
    }

    #[test]
    fn zip_header_is_skipped() {
        let mut bytes = vec![0u8; 40];
        bytes[..4].copy_from_slice(&ZIP_LOCAL_FILE_HEADER_SIGNATURE.to_le_bytes());
        bytes[26..28].copy_from_slice(&6u16.to_le_bytes());
        bytes[28..30].copy_from_slice(&4u16.to_le_bytes());
        bytes.extend(module_with_prefix(60, 64));
        let layout = parse(&bytes).unwrap();
        assert_eq!(layout.zip_header_len, 40);
        assert_eq!(layout.flatbuffer, 44..104);
        assert_eq!(layout.rodata_base, 128);
    }

    #[test]
    fn zip_header_past_end_is_rejected() {
        let mut bytes = vec![0u8; 64];
        bytes[..4].copy_from_slice(&ZIP_LOCAL_FILE_HEADER_SIGNATURE.to_le_bytes());
        bytes[26..28].copy_from_slice(&u16::MAX.to_le_bytes());
        let err = parse(&bytes).unwrap_err();
        assert!(err.message().contains("ZIP local-file header"), "{err}");
    }

    #[test]
    fn size_prefix_past_end_is_rejected() {
        let err = parse(&module_with_prefix(1000, 64)).unwrap_err();
        assert!(
            err.message().contains("size prefix at byte offset 0 is 1000 bytes"),
            "{err}"
        );
    }

    #[test]
    fn wrong_identifier_is_rejected() {
        let mut bytes = module_with_prefix(20, 64);
        bytes[8..12].copy_from_slice(b"NOPE");
        let err = parse(&bytes).unwrap_err();
        assert!(err.message().contains("\"NOPE\""), "{err}");
    }
}
