//! The emulated device's compiler: a library's MSL compiled once, at load, into a host shared
//! object by clang as C++ for OpenCL (`-x clcpp`) over halo's stand-in for `<metal_stdlib>`, with
//! one C entry per export that runs every thread of one threadgroup.
//!
//! The threads of a threadgroup run one after another. That is exact for kernels that never
//! wait for each other; kernels with threadgroup barriers or simd-group operations need their
//! threads run in lockstep, which this compiler refuses for now (`Unimplemented`).

use std::ffi::c_void;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use halo_hal::{Error, Result};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use super::kernel_signature::{self, Builtin, Param};
use super::msl_rewrite::{self, ThreadgroupVariable};

/// halo's `<metal_stdlib>`.
const METAL_STDLIB: &str = include_str!("metal_stdlib.h");

/// The environment variable naming the clang to use.
pub const CLANG_ENV: &str = "HALO_METAL_CLANG";

/// What MSL needs threads run in lockstep, which the emulated device does not do yet.
const LOCKSTEP_OPERATIONS: [&str; 2] = ["threadgroup_barrier", "simd_"];

/// Linker flags that make an undefined symbol a link error (Apple's linker does so unasked).
const LINK_FLAGS: &[&str] = if cfg!(target_os = "macos") {
    &[]
} else {
    &["-lm", "-Wl,-z,defs"]
};

/// One export to compile an entry for.
#[derive(Debug, Clone, Copy)]
pub struct KernelEntry<'a> {
    /// The MSL function.
    pub entry_point: &'a str,
    /// Threads per threadgroup along x, y and z.
    pub threadgroup_size: [u32; 3],
}

/// The C signature of a compiled entry: the binding pointers (by HAL ordinal), the 32-bit push
/// constants, the threadgroup's position in the grid and the grid's size in threadgroups.
type EntryFn = unsafe extern "C" fn(*const *mut c_void, *const u32, *const u32, *const u32);

/// A clang that compiles C++ for OpenCL for the host.
#[derive(Debug, Clone)]
pub struct HostCompiler {
    clang: PathBuf,
}

impl HostCompiler {
    /// The clang named by `HALO_METAL_CLANG`, else the first of `clang`, `clang-19` ...
    /// `clang-14` on `PATH`.
    ///
    /// # Errors
    /// `Unavailable` saying what was looked for.
    pub fn locate() -> Result<Self> {
        if let Some(clang) = std::env::var_os(CLANG_ENV).filter(|c| !c.is_empty()) {
            return Ok(HostCompiler { clang: clang.into() });
        }
        let names = [
            "clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14",
        ];
        let path = std::env::var_os("PATH").unwrap_or_default();
        names
            .iter()
            .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
            .find(|candidate| candidate.is_file())
            .map(|clang| HostCompiler { clang })
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "the emulated Metal device compiles MSL with clang, and none was found (set {CLANG_ENV}, or \
                     install clang: Debian's package `clang`)"
                ))
            })
    }

    /// Compiles `source` with one entry per element of `entries`, in order, and loads it.
    ///
    /// # Errors
    /// `Unimplemented` for kernels that need their threads in lockstep or a builtin not provided;
    /// `InvalidArgument` carrying clang's message when the MSL does not compile; `Unavailable`
    /// when clang cannot be run or the temporary files written.
    pub fn compile(&self, source: &str, entries: &[KernelEntry<'_>]) -> Result<CompiledLibrary> {
        if let Some(operation) = LOCKSTEP_OPERATIONS.iter().find(|op| source.contains(*op)) {
            return Err(Error::unimplemented(format!(
                "the MSL uses '{operation}', whose threads must run in lockstep, which the emulated Metal device \
                 does not do yet"
            )));
        }
        let mut program = msl_rewrite::vector_literals(&msl_rewrite::float_literals(source));
        let mut wrappers = String::new();
        for (ordinal, entry) in entries.iter().enumerate() {
            let params = kernel_signature::read(&program, entry.entry_point)?;
            let (hoisted, variables) = msl_rewrite::hoist_threadgroup_variables(&program, entry.entry_point);
            program = hoisted;
            wrappers.push_str(&wrapper(ordinal, entry, &params, &variables));
        }
        program.push_str(&wrappers);
        let dir = TemporaryDir::create()?;
        let write = |name: &str, text: &str| {
            std::fs::write(dir.0.join(name), text)
                .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", dir.0.join(name).display())))
        };
        write("metal_stdlib", METAL_STDLIB)?;
        std::fs::create_dir_all(dir.0.join("simd"))
            .map_err(|e| Error::unavailable(format!("cannot write to {}: {e}", dir.0.display())))?;
        write("simd/simd.h", "#pragma once\n")?;
        write("library.metal", &program)?;
        let object = dir.0.join("library.so");
        self.run_clang(&dir.0, &object)?;
        // SAFETY: the object was just built from the library's MSL and halo's wrappers, which run
        // no initializers; its functions are only called through `CompiledLibrary::run`. Every
        // symbol is bound now, so a missing one fails here rather than in a call.
        let library = unsafe { Library::open(Some(&object), RTLD_NOW | RTLD_LOCAL) }
            .map_err(|e| Error::internal(format!("cannot load the compiled MSL library: {e}")))?;
        let functions = (0..entries.len())
            .map(|ordinal| {
                let name = format!("halo_entry_{ordinal}\0");
                // SAFETY: `halo_entry_N` is defined by `wrapper` with exactly `EntryFn`'s signature.
                unsafe { library.get::<EntryFn>(name.as_bytes()) }
                    .map(|symbol| *symbol)
                    .map_err(|e| Error::internal(format!("compiled MSL library lacks entry {ordinal}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CompiledLibrary {
            functions,
            _library: library,
        })
    }

    fn run_clang(&self, dir: &Path, object: &Path) -> Result<()> {
        let output = Command::new(&self.clang)
            // No implicit OpenCL library (`-cl-no-stdinc`): every name comes from halo's header,
            // and an undefined one fails the link (`-z defs`) instead of the call.
            .args([
                "-x",
                "clcpp",
                "-cl-no-stdinc",
                "-O2",
                "-fPIC",
                "-shared",
                "-Wno-unknown-attributes",
                "-w",
            ])
            .arg("-I")
            .arg(dir)
            .arg(dir.join("library.metal"))
            .arg("-o")
            .arg(object)
            .args(LINK_FLAGS)
            .output()
            .map_err(|e| Error::unavailable(format!("cannot run {}: {e}", self.clang.display())))?;
        if output.status.success() {
            return Ok(());
        }
        let message = String::from_utf8_lossy(&output.stderr);
        let message: String = message.chars().take(4000).collect();
        Err(Error::invalid_argument(format!(
            "the MSL does not compile for the emulated Metal device ({}: {}):\n{message}",
            self.clang.display(),
            output.status
        )))
    }
}

/// The C++ of entry `ordinal`: builds the argument buffer from the binding pointers, holds the
/// threadgroup's `threadgroup` variables, and calls the kernel once per thread of the
/// threadgroup.
fn wrapper(ordinal: usize, entry: &KernelEntry<'_>, params: &[Param], variables: &[ThreadgroupVariable]) -> String {
    let [sx, sy, sz] = entry.threadgroup_size;
    let mut text = format!(
        "\nextern \"C\" void halo_entry_{ordinal}(void* const* bindings, const uint* constants, const uint* group, \
         const uint* groups) {{\n"
    );
    let mut arguments = Vec::new();
    for param in params {
        // C++ for OpenCL refuses casts between address spaces; kernels take their buffers in
        // `constant`, so the host pointers go through an integer.
        let argument = match param {
            Param::ArgumentBuffer { type_name, members } => {
                let _ = writeln!(text, "    {type_name} args;");
                for (member, id) in members {
                    let _ = writeln!(text, "    args.{member} = (decltype(args.{member}))bindings[{id}];");
                }
                format!("*(__constant {type_name}*)(__SIZE_TYPE__)&args")
            }
            Param::PushConstants { type_name } => format!("*(__constant {type_name}*)(__SIZE_TYPE__)constants"),
            Param::Builtin(builtin) => builtin_argument(*builtin, entry.threadgroup_size),
        };
        arguments.push(argument);
    }
    for (index, variable) in variables.iter().enumerate() {
        let ThreadgroupVariable {
            type_name, dimensions, ..
        } = variable;
        let _ = writeln!(text, "    {type_name} threadgroup_{index}{dimensions};");
        arguments.push(format!(
            "*(__local {type_name} (*){dimensions})(__SIZE_TYPE__)&threadgroup_{index}"
        ));
    }
    let _ = writeln!(
        text,
        "    for (uint z = 0; z < {sz}u; ++z)\n    for (uint y = 0; y < {sy}u; ++y)\n    for (uint x = 0; x < {sx}u; \
         ++x)\n        {}({});\n}}",
        entry.entry_point,
        arguments.join(", ")
    );
    text
}

fn builtin_argument(builtin: Builtin, [sx, sy, sz]: [u32; 3]) -> String {
    match builtin {
        Builtin::ThreadInThreadgroup => "(uint3)(x, y, z)".into(),
        Builtin::ThreadgroupInGrid => "(uint3)(group[0], group[1], group[2])".into(),
        Builtin::ThreadInGrid => {
            format!("(uint3)(group[0] * {sx}u + x, group[1] * {sy}u + y, group[2] * {sz}u + z)")
        }
        Builtin::ThreadsPerThreadgroup => format!("(uint3)({sx}u, {sy}u, {sz}u)"),
        Builtin::ThreadgroupsPerGrid => "(uint3)(groups[0], groups[1], groups[2])".into(),
        Builtin::ThreadIndexInThreadgroup => format!("(uint)((z * {sy}u + y) * {sx}u + x)"),
    }
}

/// A library's kernels compiled for the host.
///
/// Threading: entries may run on many threads at once (each threadgroup on one).
#[derive(Debug)]
pub struct CompiledLibrary {
    functions: Vec<EntryFn>,
    // Last, so the code is unloaded after nothing can call it.
    _library: Library,
}

impl CompiledLibrary {
    /// Runs every thread of threadgroup `group` of a grid of `groups` threadgroups of export
    /// `export`.
    ///
    /// # Errors
    /// `InvalidArgument` for an export the library was not compiled with.
    ///
    /// # Safety
    /// `bindings` must hold, at each HAL binding ordinal the kernel uses, a pointer to memory as
    /// large as the kernel reads and writes there, valid and not otherwise used for the call;
    /// `constants` must hold every push constant the kernel reads. The emulated device does not
    /// contain out-of-range accesses yet.
    pub unsafe fn run(
        &self,
        export: usize,
        bindings: &[*mut c_void],
        constants: &[u32],
        group: [u32; 3],
        groups: [u32; 3],
    ) -> Result<()> {
        let function = self.functions.get(export).ok_or_else(|| {
            Error::invalid_argument(format!(
                "export {export} of a library of {} exports",
                self.functions.len()
            ))
        })?;
        // SAFETY: the entry reads the binding pointers and constants the caller vouched for, and
        // the three-word positions, which live for the call.
        unsafe { function(bindings.as_ptr(), constants.as_ptr(), group.as_ptr(), groups.as_ptr()) };
        Ok(())
    }
}

/// A fresh directory in the temporary directory, removed on drop (a loaded library stays
/// mapped after its file is gone).
struct TemporaryDir(PathBuf);

impl TemporaryDir {
    fn create() -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "halo-metal-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
        Ok(TemporaryDir(dir))
    }
}

impl Drop for TemporaryDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
