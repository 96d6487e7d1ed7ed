//! Random corruption of the data an embedded library's tables are built from.
//!
//! Loading runs the library's query function, so flips are confined to bytes
//! that are never executed and cannot redirect execution: `.rodata`,
//! `.data.rel.ro` and `.rela.dyn` (relocations may only patch writable
//! segments). The tables read from them must load or fail cleanly; nothing is
//! dispatched, since a corrupt function pointer could still name valid code.

use std::ops::Range;
use std::path::Path;

use halo_cpu_executable::library::{Library, EMBEDDED_ELF_FORMAT};
use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection};
use proptest::prelude::*;

fn kernels() -> Vec<u8> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/library_kernels.{EMBEDDED_ELF_FORMAT}.so"));
    std::fs::read(path).unwrap()
}

fn data_ranges(bytes: &[u8]) -> Vec<Range<usize>> {
    let file = ElfFile64::<LittleEndian>::parse(bytes).unwrap();
    [".rodata", ".data.rel.ro", ".rela.dyn"]
        .iter()
        .map(|name| {
            let (offset, size) = file.section_by_name(name).unwrap().file_range().unwrap();
            offset as usize..(offset + size) as usize
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_tables_load_or_fail_cleanly(
        flips in proptest::collection::vec((0..3usize, any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = kernels();
        let ranges = data_ranges(&bytes);
        for (section, index, value) in flips {
            let range = &ranges[section];
            bytes[range.start + index.index(range.len())] = value;
        }
        if let Ok(library) = Library::load(EMBEDDED_ELF_FORMAT, &bytes, &[]) {
            for ordinal in 0..library.export_count() {
                prop_assert!(library.export_name(ordinal).is_some_and(|n| !n.is_empty()));
                let attrs = library.export_attrs(ordinal);
                prop_assert!(attrs.binding_count <= 64 && attrs.constant_count <= 64);
            }
        }
    }

    /// Whole 64-bit words (pointers, counts) replaced, which byte flips rarely produce.
    #[test]
    fn corrupted_table_words_load_or_fail_cleanly(
        words in proptest::collection::vec((0..3usize, any::<prop::sample::Index>(), any::<u64>()), 1..4),
    ) {
        let mut bytes = kernels();
        let ranges = data_ranges(&bytes);
        for (section, index, value) in words {
            let range = &ranges[section];
            let at = range.start + index.index(range.len() / 8) * 8;
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        let _ = Library::load(EMBEDDED_ELF_FORMAT, &bytes, &[]);
    }
}
