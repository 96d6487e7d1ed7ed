//! The emulated device's compiler: a library's MSL compiled once, at load, into a host shared
//! object by clang as C++ for OpenCL (`-x clcpp`) over halo's stand-in for `<metal_stdlib>`, with
//! one C entry per export that runs every thread of one threadgroup.
//!
//! Trust: the MSL becomes host code and runs in this process, so a program on the emulated
//! device is only as safe as its origin (as with `system-elf-*` CPU executables). What the
//! dispatch decides is contained: every element of a binding's runtime array (the form
//! SPIRV-Cross gives every IREE binding) is checked against the dispatch's bindings
//! (`binding_checks.c`), so a grid larger than the kernel's or a binding shorter than it reads
//! ends in an error instead of touching other memory.
//!
//! The threads of a threadgroup run one after another, which is exact for kernels that never
//! wait for each other. Kernels with threadgroup barriers or simd-group operations, and kernels
//! whose statements touch bindings one after another (where a GPU's lockstep simd-groups order
//! what one thread writes before another reads it; `msl_rewrite::simd_lockstep_points`), run
//! their threads in lockstep instead, as fibers (`threadgroup_fibers.c`, linked in only then):
//! each runs to its next barrier, and all go on once every running thread is there. The
//! lockstep points of the second kind hold the whole threadgroup, not only its simd-group: an
//! order a GPU may also take, so a kernel right on a GPU is right here.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use halo_hal::disk_cache::{digest_hex, CacheDir, DiskCache};
use halo_hal::{Error, Result};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use super::kernel_signature::{self, Builtin, Param};
use super::msl_rewrite::{self, ThreadgroupVariable};
use crate::executable_def::MAX_THREADS_PER_THREADGROUP;

/// halo's `<metal_stdlib>`.
const METAL_STDLIB: &str = include_str!("metal_stdlib.h");

/// The environment variable that keeps each library's generated C++ and C (for seeing what the
/// emulated device compiled); its folder is printed.
pub const KEEP_SOURCES_ENV: &str = "HALO_METAL_KEEP_SOURCES";

/// The environment variable naming the clang to use.
pub const CLANG_ENV: &str = "HALO_METAL_CLANG";

/// The scheduler of lockstep threads.
const THREADGROUP_FIBERS: &str = include_str!("threadgroup_fibers.c");

/// The checks of binding accesses, linked with every library.
const BINDING_CHECKS: &str = include_str!("binding_checks.c");

/// What in MSL needs the threads of a threadgroup run in lockstep.
const LOCKSTEP_OPERATIONS: [&str; 3] = ["threadgroup_barrier", "simdgroup_barrier", "simd_"];

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

/// The C signature of a compiled entry: the bindings (by HAL ordinal) and their count, the
/// 32-bit push constants, the threadgroup's position in the grid, the grid's size in
/// threadgroups, and where to put the first access outside the bindings (address and size);
/// 0, 1 when the threads' stacks could not be allocated, 2 after an access outside the bindings.
type EntryFn =
    unsafe extern "C" fn(*const BindingMemory, u32, *const u32, *const u32, *const u32, *mut [usize; 2]) -> i32;

/// The memory of one binding as a compiled entry takes it (`struct halo_binding`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BindingMemory {
    /// Its first byte.
    pub start: *mut c_void,
    /// Its length in bytes.
    pub length: usize,
}

/// The most push constants a dispatch passes (IREE's limit); entries always read this many, the
/// ones past a dispatch's own being zero.
pub const MAX_PUSH_CONSTANTS: usize = 64;

/// A clang that compiles C++ for OpenCL for the host, and where it keeps what it compiled.
#[derive(Clone)]
pub struct HostCompiler {
    clang: PathBuf,
    /// Compiled libraries between processes (`with_cache`).
    disk: Option<Arc<DiskCache>>,
}

/// The first bytes of every entry of the compiled-library cache.
const CACHE_MAGIC: [u8; 8] = *b"HALOMTLE";

/// The environment variable naming the emulated device's cache folder, or `off`.
pub const CACHE_DIR_ENV: &str = "HALO_METAL_PROGRAM_CACHE";

/// The cache folder from `HALO_METAL_PROGRAM_CACHE`, else the user's
/// (`$XDG_CACHE_HOME/halo/metal-emulated`, or `~/.cache/...`), else off.
pub fn cache_dir_from_env() -> CacheDir {
    CacheDir::from_env(CACHE_DIR_ENV, "metal-emulated")
}

impl HostCompiler {
    /// The clang named by `HALO_METAL_CLANG`, else the first of `clang`, `clang-19` ...
    /// `clang-14` on `PATH`.
    ///
    /// # Errors
    /// `Unavailable` saying what was looked for.
    pub fn locate() -> Result<Self> {
        if let Some(clang) = std::env::var_os(CLANG_ENV).filter(|c| !c.is_empty()) {
            let clang = PathBuf::from(clang);
            if !clang.is_file() {
                return Err(Error::unavailable(format!(
                    "{CLANG_ENV} names {}, which is not a file",
                    clang.display()
                )));
            }
            return Ok(HostCompiler { clang, disk: None });
        }
        let names = [
            "clang", "clang-19", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14",
        ];
        let path = std::env::var_os("PATH").unwrap_or_default();
        names
            .iter()
            .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
            .find(|candidate| candidate.is_file())
            .map(|clang| HostCompiler { clang, disk: None })
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "the emulated Metal device compiles MSL with clang, and none was found (set {CLANG_ENV}, or \
                     install clang: Debian's package `clang`)"
                ))
            })
    }

    /// The same compiler, keeping each library it compiles under `dir` (in a folder of this
    /// clang's version, so another compiler never sees the entries), and loading it from there
    /// when the same code comes again: a load then costs no compile.
    pub fn with_cache(mut self, dir: &CacheDir) -> Self {
        self.disk = match dir {
            CacheDir::Off => None,
            CacheDir::At(root) => {
                let version = Command::new(&self.clang)
                    .arg("--version")
                    .output()
                    .map(|o| o.stdout)
                    .unwrap_or_default();
                let folder = digest_hex(&[self.clang.as_os_str().as_encoded_bytes(), &version]);
                Some(Arc::new(DiskCache::new(
                    root.join(format!("clang-{}", &folder[..16])),
                    CACHE_MAGIC,
                )))
            }
        };
        self
    }

    /// The cache of compiled libraries, when there is one.
    pub fn cache(&self) -> Option<&DiskCache> {
        self.disk.as_deref()
    }

    /// Compiles `source` with one entry per element of `entries`, in order, and loads it.
    ///
    /// # Errors
    /// `Unimplemented` for a builtin not provided; `InvalidArgument` for an entry point that is
    /// not an identifier or a threadgroup of no threads or more than
    /// [`MAX_THREADS_PER_THREADGROUP`], and carrying clang's message when the MSL does not
    /// compile; `Unavailable` when clang cannot be run or the temporary files written.
    pub fn compile(&self, source: &str, entries: &[KernelEntry<'_>]) -> Result<CompiledLibrary> {
        entries.iter().try_for_each(check_entry)?;
        let explicit_lockstep = LOCKSTEP_OPERATIONS.iter().any(|op| source.contains(op));
        let mut lockstep = explicit_lockstep;
        let literals = msl_rewrite::vector_literals(&msl_rewrite::float_literals(source));
        let mut program = msl_rewrite::checked_binding_arrays(&msl_rewrite::bool_vector_declarations(&literals));
        let mut wrappers = String::new();
        let mut binding_counts = Vec::with_capacity(entries.len());
        for (ordinal, entry) in entries.iter().enumerate() {
            let params = kernel_signature::read(&program, entry.entry_point)?;
            binding_counts.push(binding_count(&params));
            let (hoisted, variables) = msl_rewrite::hoist_threadgroup_variables(&program, entry.entry_point);
            let (stepped, implicit_lockstep) =
                msl_rewrite::simd_lockstep_points(&hoisted, entry.entry_point, &variables);
            program = stepped;
            let entry_lockstep = explicit_lockstep || implicit_lockstep;
            lockstep |= entry_lockstep;
            let used = kernel_signature::used_thread_dimensions(&program, entry.entry_point);
            let run_size = [0, 1, 2].map(|d| if used[d] { entry.threadgroup_size[d] } else { 1 });
            wrappers.push_str(&wrapper(ordinal, entry, &params, &variables, entry_lockstep, run_size));
        }
        if lockstep {
            program.push_str("\nextern \"C\" int halo_run_group(__SIZE_TYPE__ context, uint count, uint entry);\n");
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
        write("binding_checks.c", BINDING_CHECKS)?;
        let fibers = if lockstep {
            thread_table(entries.len())
        } else {
            String::new()
        };
        if lockstep {
            write("threadgroup.c", &fibers)?;
        }
        let object = dir.0.join("library.so");
        let key = digest_hex(&[
            program.as_bytes(),
            METAL_STDLIB.as_bytes(),
            BINDING_CHECKS.as_bytes(),
            fibers.as_bytes(),
            LINK_FLAGS.join(" ").as_bytes(),
        ]);
        let library = self.load_or_compile(&dir.0, &object, lockstep, &key)?;
        let functions = (binding_counts.into_iter().enumerate())
            .map(|(ordinal, bindings)| {
                let name = format!("halo_entry_{ordinal}\0");
                // SAFETY: `halo_entry_N` is defined by `wrapper` with exactly `EntryFn`'s signature.
                unsafe { library.get::<EntryFn>(name.as_bytes()) }
                    .map(|symbol| (*symbol, bindings))
                    .map_err(|e| Error::internal(format!("compiled MSL library lacks entry {ordinal}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CompiledLibrary {
            functions,
            _library: library,
        })
    }

    /// The library built from the sources in `dir` (entry `key` of the cache): the cache's copy
    /// when it has one that loads, else clang's, which becomes the entry.
    fn load_or_compile(&self, dir: &Path, object: &Path, lockstep: bool, key: &str) -> Result<Library> {
        if let Some(disk) = &self.disk {
            if let Some(bytes) = disk.load(key) {
                let loaded = std::fs::write(object, bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|()| open_object(object).map_err(|e| e.to_string()));
                match loaded {
                    Ok(library) => return Ok(library),
                    Err(why) => disk.refuse(key, &format!("it does not load ({why})")),
                }
            }
        }
        self.run_clang(dir, object, lockstep)?;
        if let Some(disk) = &self.disk {
            match std::fs::read(object) {
                Ok(bytes) => disk.store(key, &bytes),
                Err(e) => disk.nothing_to_store(key, &e.to_string()),
            }
        }
        open_object(object)
    }

    fn run_clang(&self, dir: &Path, object: &Path, lockstep: bool) -> Result<()> {
        let mut command = Command::new(&self.clang);
        command
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
            .args(["-x", "c"])
            .arg(dir.join("binding_checks.c"));
        if lockstep {
            command.arg(dir.join("threadgroup.c"));
        }
        let output = command
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

/// Loads a compiled library with every symbol bound now, so a missing one fails here rather
/// than in a call.
fn open_object(object: &Path) -> Result<Library> {
    // SAFETY: the object was built from a library's MSL and halo's wrappers (by clang now, or
    // earlier into the cache, whose entries are checked against their digest), which run no
    // initializers; its functions are only called through `CompiledLibrary::run`.
    unsafe { Library::open(Some(object), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| Error::internal(format!("cannot load the compiled MSL library: {e}")))
}

/// An entry point is a C identifier (it is written into the wrappers), and its threadgroup has 1
/// to [`MAX_THREADS_PER_THREADGROUP`] threads.
fn check_entry(entry: &KernelEntry<'_>) -> Result<()> {
    let name = entry.entry_point;
    let identifier = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !identifier {
        return Err(Error::invalid_argument(format!(
            "entry point '{name}' is not an MSL identifier"
        )));
    }
    let threads = entry
        .threadgroup_size
        .iter()
        .try_fold(1u32, |n, &side| n.checked_mul(side));
    if !threads.is_some_and(|n| (1..=MAX_THREADS_PER_THREADGROUP).contains(&n)) {
        return Err(Error::invalid_argument(format!(
            "'{name}' has threadgroups of {:?} threads; a threadgroup holds 1 to {MAX_THREADS_PER_THREADGROUP}",
            entry.threadgroup_size
        )));
    }
    Ok(())
}

/// One past the highest binding ordinal the kernel's argument buffer names.
fn binding_count(params: &[Param]) -> usize {
    (params.iter())
        .filter_map(|param| match param {
            Param::ArgumentBuffer { members, .. } => members.iter().map(|&(_, id)| id as usize + 1).max(),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The C of the fiber scheduler and its table of thread functions, one per entry.
fn thread_table(entries: usize) -> String {
    let mut text = String::from(THREADGROUP_FIBERS);
    let names: Vec<String> = (0..entries).map(|ordinal| format!("halo_thread_{ordinal}")).collect();
    for name in &names {
        let _ = writeln!(text, "void {name}(size_t context, unsigned index);");
    }
    let _ = writeln!(
        text,
        "void (*const halo_threads[])(size_t, unsigned) = {{ {} }};",
        names.join(", ")
    );
    text
}

/// The C++ of entry `ordinal`: a context holding the argument buffer built from the binding
/// pointers and the threadgroup's `threadgroup` variables; a thread function that calls the
/// kernel as thread `index` of the threadgroup; and the entry, which runs the threads of
/// `run_size` (the threadgroup, less the dimensions the kernel does not tell threads apart by),
/// one after another or (`lockstep`) as fibers.
fn wrapper(
    ordinal: usize,
    entry: &KernelEntry<'_>,
    params: &[Param],
    variables: &[ThreadgroupVariable],
    lockstep: bool,
    run_size: [u32; 3],
) -> String {
    let [sx, sy, sz] = run_size;
    let threads = u64::from(sx) * u64::from(sy) * u64::from(sz);
    let mut context = format!("\nstruct halo_context_{ordinal} {{\n");
    let mut setup = String::new();
    let mut arguments = Vec::new();
    for param in params {
        // C++ for OpenCL refuses casts between address spaces; kernels take their buffers in
        // `constant`, so the host pointers go through an integer.
        let argument = match param {
            Param::ArgumentBuffer { type_name, members } => {
                let _ = writeln!(context, "    {type_name} args;");
                for (member, id) in members {
                    let _ = writeln!(
                        setup,
                        "    c.args.{member} = (decltype(c.args.{member}))bindings[{id}].start;"
                    );
                }
                format!("*(__constant {type_name}*)(__SIZE_TYPE__)&c.args")
            }
            Param::PushConstants { type_name } => format!("*(__constant {type_name}*)(__SIZE_TYPE__)c.constants"),
            Param::Builtin(builtin) => builtin_argument(*builtin, entry.threadgroup_size),
        };
        arguments.push(argument);
    }
    for (
        index,
        ThreadgroupVariable {
            type_name, dimensions, ..
        },
    ) in variables.iter().enumerate()
    {
        let _ = writeln!(context, "    {type_name} threadgroup_{index}{dimensions};");
        arguments.push(format!(
            "*(__local {type_name} (*){dimensions})(__SIZE_TYPE__)&c.threadgroup_{index}"
        ));
    }
    let run = if lockstep {
        format!("    int status = halo_run_group((__SIZE_TYPE__)&c, {threads}u, {ordinal}u);")
    } else {
        format!("    for (uint i = 0; i < {threads}u; ++i) halo_thread_{ordinal}((__SIZE_TYPE__)&c, i);\n    int status = 0;")
    };
    format!(
        "{context}    const uint* constants;\n    const uint* group;\n    const uint* groups;\n}};\n\n\
         extern \"C\" void halo_thread_{ordinal}(__SIZE_TYPE__ context, uint index) {{\n\
         \x20   halo_context_{ordinal}& c = *(halo_context_{ordinal}*)context;\n\
         \x20   uint x = index % {sx}u, y = index / {sx}u % {sy}u, z = index / ({sx}u * {sy}u);\n\
         \x20   {}({});\n}}\n\n\
         extern \"C\" int halo_entry_{ordinal}(const halo_binding* bindings, uint binding_count, const uint* constants, \
         const uint* group, const uint* groups, __SIZE_TYPE__* stray) {{\n\
         \x20   halo_context_{ordinal} c;\n{setup}\
         \x20   c.constants = constants;\n    c.group = group;\n    c.groups = groups;\n\
         \x20   halo_bindings_enter(bindings, binding_count);\n{run}\n\
         \x20   int strayed = halo_bindings_leave(stray);\n    return status ? status : strayed ? 2 : 0;\n}}\n",
        entry.entry_point,
        arguments.join(", ")
    )
}

fn builtin_argument(builtin: Builtin, [sx, sy, sz]: [u32; 3]) -> String {
    match builtin {
        Builtin::ThreadInThreadgroup => "(uint3)(x, y, z)".into(),
        Builtin::ThreadgroupInGrid => "(uint3)(c.group[0], c.group[1], c.group[2])".into(),
        Builtin::ThreadInGrid => {
            format!("(uint3)(c.group[0] * {sx}u + x, c.group[1] * {sy}u + y, c.group[2] * {sz}u + z)")
        }
        Builtin::ThreadsPerThreadgroup => format!("(uint3)({sx}u, {sy}u, {sz}u)"),
        Builtin::ThreadgroupsPerGrid => "(uint3)(c.groups[0], c.groups[1], c.groups[2])".into(),
        Builtin::ThreadIndexInThreadgroup => "index".into(),
        Builtin::ThreadIndexInSimdgroup => "(index % 32u)".into(),
        Builtin::SimdgroupIndexInThreadgroup => "(index / 32u)".into(),
        Builtin::ThreadsPerSimdgroup => "32u".into(),
    }
}

/// A library's kernels compiled for the host.
///
/// Threading: entries may run on many threads at once (each threadgroup on one).
#[derive(Debug)]
pub struct CompiledLibrary {
    /// Each entry with the number of bindings it reads (one past its highest `[[id(n)]]`).
    functions: Vec<(EntryFn, usize)>,
    // Last, so the code is unloaded after nothing can call it.
    _library: Library,
}

impl CompiledLibrary {
    /// Runs every thread of threadgroup `group` of a grid of `groups` threadgroups of export
    /// `export`.
    ///
    /// Accesses to the bindings' runtime arrays are contained: an element outside every binding
    /// reads as zero and is not written, and the call ends in an error naming it.
    ///
    /// # Errors
    /// `InvalidArgument` for an export the library was not compiled with, fewer bindings than
    /// the kernel reads or more than [`MAX_PUSH_CONSTANTS`] constants; `ResourceExhausted` when
    /// the threads of a lockstep threadgroup get no stacks; `OutOfRange` naming the first access
    /// outside the bindings.
    ///
    /// # Safety
    /// Each binding must be valid memory of its length, not otherwise used for the call.
    pub unsafe fn run(
        &self,
        export: usize,
        bindings: &[BindingMemory],
        constants: &[u32],
        group: [u32; 3],
        groups: [u32; 3],
    ) -> Result<()> {
        let &(function, needed) = self.functions.get(export).ok_or_else(|| {
            Error::invalid_argument(format!(
                "export {export} of a library of {} exports",
                self.functions.len()
            ))
        })?;
        if bindings.len() < needed {
            return Err(Error::invalid_argument(format!(
                "export {export} reads {needed} bindings; {} were given",
                bindings.len()
            )));
        }
        // The kernel reads its push constant struct whole, whatever the dispatch passed.
        let mut padded = [0u32; MAX_PUSH_CONSTANTS];
        padded
            .get_mut(..constants.len())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "{} push constants; a dispatch passes at most {MAX_PUSH_CONSTANTS}",
                    constants.len()
                ))
            })?
            .copy_from_slice(constants);
        let mut stray = [0usize; 2];
        // SAFETY: the entry reads the bindings the caller vouched for (at most `needed` of them,
        // each access checked against all), the padded constants and the three-word positions,
        // which live for the call, and writes `stray`.
        let status = unsafe {
            function(
                bindings.as_ptr(),
                bindings.len() as u32,
                padded.as_ptr(),
                group.as_ptr(),
                groups.as_ptr(),
                &mut stray,
            )
        };
        match status {
            0 => Ok(()),
            2 => Err(stray_access_error(bindings, stray)),
            _ => Err(Error::resource_exhausted(
                "no memory for the stacks of a threadgroup's threads on the emulated Metal device",
            )),
        }
    }
}

/// The error for an access to `[address, address + size)` outside `bindings`, placed relative to
/// the binding that starts nearest below it.
fn stray_access_error(bindings: &[BindingMemory], [address, size]: [usize; 2]) -> Error {
    let nearest = (bindings.iter().enumerate())
        .filter(|(_, binding)| binding.start as usize <= address)
        .max_by_key(|(_, binding)| binding.start as usize);
    let place = match nearest {
        Some((ordinal, binding)) => format!(
            "at byte {} of binding {ordinal}, which holds {} bytes",
            address - binding.start as usize,
            binding.length
        ),
        None => format!("at address {address:#x}, below every binding"),
    };
    Error::out_of_range(format!(
        "an access of {size} bytes {place}: outside the dispatch's bindings (read as zero, not written)"
    ))
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
        if std::env::var_os(KEEP_SOURCES_ENV).is_some() {
            tracing::info!(dir = %self.0.display(), "kept the emulated Metal device's generated sources");
            eprintln!("halo: kept the emulated Metal device's sources in {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
