//! `halo dump-module`: what a `.vmfb` contains, like `iree-dump-module`.

use halo_hal::{Result, ResultExt};
use halo_vm::isa::disasm::disassemble;
use halo_vm::BytecodeModule;
use std::fmt::Write;

/// Prints the module's metadata, tables and a disassembly of every function.
pub fn run(path: &str) -> Result<()> {
    let module =
        BytecodeModule::from_file(std::path::Path::new(path)).with_context(|| format!("loading module '{path}'"))?;
    crate::output::out!("{}", describe(&module))?;
    Ok(())
}

/// The dump as text.
pub fn describe(module: &BytecodeModule) -> String {
    let mut out = String::new();
    let (major, minor) = module.bytecode_version();
    let _ = writeln!(out, "@{} : version {}", module.name(), module.version());
    let _ = writeln!(
        out,
        "bytecode version {major}.{minor}, requirements: {}",
        module.requirements()
    );
    section(&mut out, "Required Types", module.types().iter().map(|t| t.to_string()));
    section(
        &mut out,
        "Module Dependencies",
        module.dependencies().iter().map(|d| {
            format!(
                "{}, version >= {}{}",
                d.name,
                d.minimum_version,
                if d.optional { ", optional" } else { "" }
            )
        }),
    );
    section(
        &mut out,
        "Imported Functions",
        module.imports().iter().map(|i| {
            format!(
                "{}{} {}",
                i.full_name,
                if i.optional { " (optional)" } else { "" },
                i.calling_convention.unwrap_or("")
            )
        }),
    );
    section(
        &mut out,
        "Exported Functions",
        module.exports().iter().map(|e| {
            let signature = module.function_signature(e.internal_ordinal);
            let cconv = signature.as_ref().and_then(|s| s.calling_convention).unwrap_or("");
            let declaration = signature
                .as_ref()
                .and_then(|s| s.attr("iree.abi.declaration"))
                .unwrap_or("");
            format!("{} -> func[{}] {cconv} {declaration}", e.local_name, e.internal_ordinal)
        }),
    );
    section(
        &mut out,
        "Rodata",
        (0..module.rodata_count()).map(|i| {
            let external = if module.rodata_is_external(i).unwrap_or(false) {
                "external"
            } else {
                "embedded"
            };
            format!("{} bytes, {external}", module.rodata(i).map_or(0, <[u8]>::len))
        }),
    );
    let _ = writeln!(
        out,
        "\nGlobals: {} bytes of primitives, {} refs",
        module.global_bytes_capacity(),
        module.global_ref_count()
    );
    let _ = writeln!(
        out,
        "\nFunctions:\n  # | Offset   |   Length | Blocks | i32 # | ref # | Name"
    );
    for ordinal in 0..module.function_count() {
        let Some(descriptor) = module.function(ordinal) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{ordinal:>3} | {:08X} | {:>8} | {:>6} | {:>5} | {:>5} | {}",
            descriptor.bytecode_offset,
            descriptor.bytecode_length,
            descriptor.block_count,
            descriptor.i32_register_count,
            descriptor.ref_register_count,
            module.function_name(ordinal).unwrap_or("")
        );
    }
    for ordinal in 0..module.function_count() {
        let name = module
            .function_name(ordinal)
            .map(str::to_string)
            .unwrap_or_else(|| format!("#{ordinal}"));
        let _ = writeln!(out, "\nfunc[{ordinal}] {name}:");
        for line in disassemble(module.function_bytecode(ordinal).unwrap_or(&[])) {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

fn section(out: &mut String, title: &str, items: impl Iterator<Item = String>) {
    let _ = writeln!(out, "\n{title}:");
    for (index, item) in items.enumerate() {
        let _ = writeln!(out, "  [{index:>3}] {item}");
    }
}
