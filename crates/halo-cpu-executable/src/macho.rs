//! Checks of a Mach-O dynamic library (`system-dylib-*`, macOS) before the system loader reads
//! it: `dlopen` trusts the file's headers, so a truncated or damaged one could fault inside dyld
//! instead of failing. The checks need no Mac and run on every host.

use halo_hal::{Error, Result};
use object::macho::{self, MachHeader64, SegmentCommand64};
use object::read::macho::MachHeader as _;
use object::LittleEndian as LE;

/// A readable name for a Mach-O `cputype`, so "wrong architecture" errors say which one.
fn cpu_name(cpu_type: u32) -> String {
    let name = match cpu_type {
        macho::CPU_TYPE_ARM64 => "arm_64",
        macho::CPU_TYPE_X86_64 => "x86_64",
        macho::CPU_TYPE_ARM => "arm_32",
        macho::CPU_TYPE_X86 => "x86",
        macho::CPU_TYPE_ARM64_32 => "arm64_32",
        _ => return format!("unknown cputype {cpu_type:#x}"),
    };
    format!("{name} (cputype {cpu_type:#x})")
}

/// Checks that `data` is a whole 64-bit little-endian Mach-O dynamic library for `cpu_type`.
///
/// # Errors
/// `InvalidArgument` naming the field for anything that is not a Mach-O file, is truncated or
/// is not a dynamic library; `Incompatible` for a universal binary, another byte order or
/// another CPU.
pub(crate) fn check_dylib(data: &[u8], cpu_type: u32) -> Result<()> {
    let magic = data.get(..4).map(|m| u32::from_be_bytes([m[0], m[1], m[2], m[3]]));
    match magic {
        Some(macho::FAT_MAGIC | macho::FAT_MAGIC_64) => {
            return Err(Error::incompatible(
                "a universal (fat) Mach-O binary; give the library of one architecture (`lipo \
                 -thin arm64`)",
            ))
        }
        Some(m) if m == macho::MH_MAGIC_64 => {
            return Err(Error::incompatible(
                "a big-endian Mach-O file; Apple's CPUs are little-endian",
            ))
        }
        Some(m) if m.swap_bytes() == macho::MH_MAGIC_64 => {}
        _ => {
            return Err(Error::invalid_argument(format!(
                "not a 64-bit Mach-O file: the first 4 bytes are {:02x?}, expected cf fa ed fe",
                &data[..data.len().min(4)]
            )))
        }
    }
    let header = MachHeader64::<LE>::parse(data, 0).map_err(|_| {
        Error::invalid_argument(format!(
            "Mach-O file is {} bytes, smaller than its 32-byte header",
            data.len()
        ))
    })?;
    let actual = header.cputype(LE);
    if actual != cpu_type {
        return Err(Error::incompatible(format!(
            "Mach-O library is built for {}, but this host runs {}",
            cpu_name(actual),
            cpu_name(cpu_type)
        )));
    }
    let file_type = header.filetype(LE);
    if file_type != macho::MH_DYLIB {
        return Err(Error::invalid_argument(format!(
            "Mach-O filetype {file_type} is not MH_DYLIB ({}); executable libraries are dynamic \
             libraries",
            macho::MH_DYLIB
        )));
    }
    check_segments(header, data)
}

/// Every segment's file range must lie inside the file, there must be one, and arm64 code must
/// carry a code signature: Apple silicon runs no unsigned code, and a library without one would
/// fail inside dyld or end the process when first called instead of failing here.
fn check_segments(header: &MachHeader64<LE>, data: &[u8]) -> Result<()> {
    let mut commands = header.load_commands(LE, data, 0).map_err(|_| {
        Error::invalid_argument(format!(
            "Mach-O load commands ({} bytes after the header) extend past the end of the {}-byte \
             file",
            header.sizeofcmds(LE),
            data.len()
        ))
    })?;
    let mut segments = 0;
    let mut signed = false;
    for index in 0.. {
        let command = commands.next().map_err(|_| {
            Error::invalid_argument(format!(
                "Mach-O load command {index} of {} is truncated or has a bad size",
                header.ncmds(LE)
            ))
        })?;
        let Some(command) = command else { break };
        signed |= command.cmd() == macho::LC_CODE_SIGNATURE;
        if command.cmd() != macho::LC_SEGMENT_64 {
            continue;
        }
        let segment: &SegmentCommand64<LE> = command.data().map_err(|_| {
            Error::invalid_argument(format!("Mach-O load command {index} is too small for LC_SEGMENT_64"))
        })?;
        let (offset, size) = (segment.fileoff.get(LE), segment.filesize.get(LE));
        if offset.checked_add(size).is_none_or(|end| end > data.len() as u64) {
            let name = String::from_utf8_lossy(&segment.segname);
            return Err(Error::invalid_argument(format!(
                "Mach-O segment {} (load command {index}): file range {offset:#x}+{size:#x} lies \
                 outside the {}-byte file",
                name.trim_end_matches('\0'),
                data.len()
            )));
        }
        segments += 1;
    }
    if segments == 0 {
        return Err(Error::invalid_argument("Mach-O library has no LC_SEGMENT_64"));
    }
    if header.cputype(LE) == macho::CPU_TYPE_ARM64 && !signed {
        return Err(Error::invalid_argument(
            "Mach-O library has no code signature (LC_CODE_SIGNATURE), and Apple silicon runs \
             only signed code; sign it (`codesign -s - FILE` signs ad hoc)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::StatusCode;

    /// Libraries `iree-compile` 3.13 wrote for `arm64-apple-darwin`, linked by
    /// `scripts/link-macos-dylib` (see `tests/data/README.md`).
    const REAL_DYLIBS: [&[u8]; 2] = [
        include_bytes!("../tests/data/library_kernels.system-dylib-arm_64.dylib"),
        include_bytes!("../tests/data/library_import.system-dylib-arm_64.dylib"),
    ];

    /// A minimal dylib: the header, one `__TEXT` segment covering the whole file and a code
    /// signature command.
    fn dylib(cpu_type: u32, file_type: u32, segment_size: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        let segment_size_bytes = std::mem::size_of::<SegmentCommand64<LE>>() as u32;
        let command_size = segment_size_bytes + 16;
        for word in [macho::MH_MAGIC_64, cpu_type, 0, file_type, 2, command_size, 0, 0] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        for word in [macho::LC_CODE_SIGNATURE, 16, 0, 0] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(&macho::LC_SEGMENT_64.to_le_bytes());
        bytes.extend_from_slice(&segment_size_bytes.to_le_bytes());
        bytes.extend_from_slice(b"__TEXT\0\0\0\0\0\0\0\0\0\0");
        for value in [0u64, segment_size, 0, segment_size] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.extend_from_slice(&[0; 16]);
        bytes.resize(256, 0);
        bytes
    }

    #[test]
    fn a_whole_dylib_for_the_cpu_passes() {
        check_dylib(
            &dylib(macho::CPU_TYPE_ARM64, macho::MH_DYLIB, 256),
            macho::CPU_TYPE_ARM64,
        )
        .unwrap();
    }

    #[test]
    fn another_cpu_is_incompatible_and_named() {
        let err = check_dylib(
            &dylib(macho::CPU_TYPE_X86_64, macho::MH_DYLIB, 256),
            macho::CPU_TYPE_ARM64,
        )
        .unwrap_err();
        assert_eq!(err.code(), StatusCode::Incompatible);
        assert!(err.message().contains("built for x86_64 (cputype 0x1000007)"), "{err}");
        assert!(err.message().contains("this host runs arm_64"), "{err}");
    }

    #[test]
    fn a_segment_past_the_end_names_the_segment() {
        let err = check_dylib(
            &dylib(macho::CPU_TYPE_ARM64, macho::MH_DYLIB, 4096),
            macho::CPU_TYPE_ARM64,
        )
        .unwrap_err();
        assert_eq!(err.code(), StatusCode::InvalidArgument);
        assert!(err.message().contains("segment __TEXT (load command 1)"), "{err}");
    }

    #[test]
    fn an_executable_is_not_a_library() {
        let err = check_dylib(
            &dylib(macho::CPU_TYPE_ARM64, macho::MH_EXECUTE, 256),
            macho::CPU_TYPE_ARM64,
        )
        .unwrap_err();
        assert!(err.message().contains("filetype 2 is not MH_DYLIB"), "{err}");
    }

    #[test]
    fn truncations_other_files_and_universal_binaries_are_refused() {
        let whole = dylib(macho::CPU_TYPE_ARM64, macho::MH_DYLIB, 256);
        for len in [0, 3, 4, 31, 32, 40, 100] {
            let err = check_dylib(&whole[..len], macho::CPU_TYPE_ARM64).unwrap_err();
            assert_eq!(err.code(), StatusCode::InvalidArgument, "{len} bytes: {err}");
        }
        let err = check_dylib(b"\x7fELF and more bytes than a header", macho::CPU_TYPE_ARM64).unwrap_err();
        assert!(err.message().contains("not a 64-bit Mach-O file"), "{err}");
        let mut fat = whole.clone();
        fat[..4].copy_from_slice(&macho::FAT_MAGIC.to_be_bytes());
        let err = check_dylib(&fat, macho::CPU_TYPE_ARM64).unwrap_err();
        assert!(err.message().contains("universal"), "{err}");
    }

    #[test]
    fn a_load_command_table_past_the_end_is_refused() {
        let mut bytes = dylib(macho::CPU_TYPE_ARM64, macho::MH_DYLIB, 256);
        bytes[20..24].copy_from_slice(&10_000u32.to_le_bytes());
        let err = check_dylib(&bytes, macho::CPU_TYPE_ARM64).unwrap_err();
        assert!(err.message().contains("load commands (10000 bytes"), "{err}");
    }

    #[test]
    fn unsigned_arm64_code_is_refused_with_how_to_sign_it() {
        let mut bytes = dylib(macho::CPU_TYPE_ARM64, macho::MH_DYLIB, 256);
        bytes[32..36].copy_from_slice(&macho::LC_UUID.to_le_bytes());
        let err = check_dylib(&bytes, macho::CPU_TYPE_ARM64).unwrap_err();
        assert!(err.message().contains("no code signature"), "{err}");
        assert!(err.message().contains("codesign -s -"), "{err}");
        bytes[4..8].copy_from_slice(&macho::CPU_TYPE_X86_64.to_le_bytes());
        check_dylib(&bytes, macho::CPU_TYPE_X86_64).unwrap();
    }

    #[test]
    fn irees_dylibs_pass_and_every_truncation_of_them_is_refused() {
        for bytes in REAL_DYLIBS {
            check_dylib(bytes, macho::CPU_TYPE_ARM64).unwrap();
            let err = check_dylib(bytes, macho::CPU_TYPE_X86_64).unwrap_err();
            assert_eq!(err.code(), StatusCode::Incompatible, "{err}");
            // The last segment (__LINKEDIT) ends the file, so every shorter prefix cuts one.
            for len in (0..bytes.len()).step_by(97) {
                let err = check_dylib(&bytes[..len], macho::CPU_TYPE_ARM64).unwrap_err();
                assert_eq!(err.code(), StatusCode::InvalidArgument, "{len} bytes: {err}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, ..Default::default() })]

        /// Damage anywhere in the headers ends in Ok or an error, never in a panic.
        #[test]
        fn damaged_headers_never_panic(
            flips in proptest::collection::vec((0..1024usize, proptest::prelude::any::<u8>()), 1..8),
        ) {
            for original in REAL_DYLIBS {
                let mut bytes = original.to_vec();
                for &(at, value) in &flips {
                    bytes[at] = value;
                }
                let _ = check_dylib(&bytes, macho::CPU_TYPE_ARM64);
            }
        }
    }
}
