//! The environment halo hands every call into a library: specialization
//! constants, resolved imports with their thunk, and the host's CPU data.

use std::ffi::{c_int, c_void};

use halo_hal::{Error, Result};

use super::abi::{EnvironmentV0, ImportFn, ProcessorV0};
use crate::elf::image::{page_size, Image, Protection, WritableImage};
use crate::native_faults;

/// A host function executables may import by name (IREE's import provider).
///
/// Kernels call it through halo's import thunk as
/// `function(params, context, reserved)`, where `params` points at a struct the
/// compiler packed (results first, then arguments) and `context` is the value
/// given here. It returns 0 on success; anything else is reported by the
/// calling dispatch as a failure.
#[derive(Debug, Clone, Copy)]
pub struct HostImport {
    name: &'static str,
    function: ImportFn,
    context: *mut c_void,
}

// SAFETY: the context pointer is only passed back to `function`; whoever
// supplies it through `with_context` promises it may be used from any thread.
unsafe impl Send for HostImport {}
// SAFETY: as above; `HostImport` itself is immutable.
unsafe impl Sync for HostImport {}

impl HostImport {
    /// An import named `name` (without the optional-import `?` prefix) with a NULL context.
    pub fn new(name: &'static str, function: ImportFn) -> Self {
        HostImport {
            name,
            function,
            context: std::ptr::null_mut(),
        }
    }

    /// The same import with `context` passed to every call.
    ///
    /// # Safety
    /// `context` must stay valid for as long as any library that resolved this
    /// import is alive, and `function` must tolerate concurrent calls with it
    /// from any thread (kernels of one dispatch run in parallel).
    pub unsafe fn with_context(self, context: *mut c_void) -> Self {
        HostImport { context, ..self }
    }

    /// The name executables import it by.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Calls an import for a kernel; a missing optional import reports failure
/// instead of jumping to NULL.
unsafe extern "C" fn import_thunk(
    function: Option<ImportFn>,
    params: *mut c_void,
    context: *mut c_void,
    reserved: *mut c_void,
) -> c_int {
    match function {
        // Host code: a fault in it must not be recovered by abandoning its frames.
        // SAFETY: `function` came from a `HostImport`, whose contract covers
        // calls with the compiler-packed `params` and its own context.
        Some(function) => native_faults::unguarded(|| unsafe { function(params, context, reserved) }),
        None => -1,
    }
}

/// The host's CPU data in IREE's layout (`schemas/cpu_data.h`), so microkernels choose the
/// paths this CPU has: word 0 holds the feature bits of `cpu_feature_bits.inl` for the host's
/// architecture.
pub fn host_processor() -> ProcessorV0 {
    ProcessorV0 {
        data: crate::arch::host::cpu_data(),
    }
}

/// The `EnvironmentV0` given to the query function and every dispatch, with
/// the arrays it points into.
///
/// Ownership: the boxes never move or change after `Library` construction, so
/// the pointers in `raw` stay valid as long as this value lives; so does the
/// sealed copy, which nothing changes after [`Environment::seal`].
#[derive(Debug)]
pub(crate) struct Environment {
    raw: Box<EnvironmentV0>,
    constants: Box<[u32]>,
    import_funcs: Box<[Option<ImportFn>]>,
    import_contexts: Box<[*const c_void]>,
    sealed: Option<Sealed>,
}

/// A read-only copy of an environment and its arrays, on pages of their own.
///
/// Kernels get the environment's address in their first argument register, the one `rep stos`
/// and `rep movs` write through. In the heap, a damaged kernel writing there wiped the
/// allocator's memory around it, and the process crashed after the fault was recovered; on
/// read-only pages the first byte written faults and nothing is lost.
#[derive(Debug)]
struct Sealed {
    // Kept mapped while `raw` is handed out.
    _pages: Image,
    raw: *const EnvironmentV0,
}

// SAFETY: after construction the environment is immutable; kernels only read it
// and the import contexts are `Send + Sync` by `HostImport`'s contract.
unsafe impl Send for Environment {}
// SAFETY: as above.
unsafe impl Sync for Environment {}

impl Environment {
    /// An environment with the host's processor data, `constants`, and no imports yet.
    pub fn new(constants: &[u32]) -> Self {
        let mut environment = Environment {
            raw: Box::new(EnvironmentV0 {
                constants: std::ptr::null(),
                import_thunk: Some(import_thunk),
                import_funcs: std::ptr::null(),
                import_contexts: std::ptr::null(),
                processor: host_processor(),
            }),
            constants: Box::new([]),
            import_funcs: Box::new([]),
            import_contexts: Box::new([]),
            sealed: None,
        };
        environment.set_constants(constants.into());
        environment
    }

    /// Replaces the specialization constants.
    pub fn set_constants(&mut self, constants: Box<[u32]>) {
        self.constants = constants;
        self.raw.constants = if self.constants.is_empty() {
            std::ptr::null()
        } else {
            self.constants.as_ptr()
        };
    }

    /// The constants the library sees.
    pub fn constants(&self) -> &[u32] {
        &self.constants
    }

    /// Resolves the library's import table against `provided`.
    ///
    /// # Errors
    /// `NotFound` naming the first required import nobody provides.
    pub fn resolve_imports(&mut self, names: &[String], provided: &[HostImport]) -> Result<()> {
        let mut funcs = Vec::with_capacity(names.len());
        let mut contexts = Vec::with_capacity(names.len());
        for (ordinal, name) in names.iter().enumerate() {
            let (optional, bare) = match name.strip_prefix('?') {
                Some(bare) => (true, bare),
                None => (false, name.as_str()),
            };
            match provided.iter().find(|p| p.name == bare) {
                Some(import) => {
                    funcs.push(Some(import.function));
                    contexts.push(import.context.cast_const());
                }
                None if optional => {
                    funcs.push(None);
                    contexts.push(std::ptr::null());
                }
                None => {
                    return Err(Error::not_found(format!(
                        "executable imports '{name}' (import {ordinal}), which the host does not \
                         provide"
                    )));
                }
            }
        }
        self.import_funcs = funcs.into();
        self.import_contexts = contexts.into();
        let empty = self.import_funcs.is_empty();
        self.raw.import_funcs = if empty {
            std::ptr::null()
        } else {
            self.import_funcs.as_ptr()
        };
        self.raw.import_contexts = if empty {
            std::ptr::null()
        } else {
            self.import_contexts.as_ptr()
        };
        Ok(())
    }

    /// Copies the environment into read-only pages that [`Environment::as_ptr`] points at from
    /// now on; changing it afterwards is a bug.
    ///
    /// # Errors
    /// `ResourceExhausted` or `Internal` when the pages cannot be mapped or protected.
    pub fn seal(&mut self) -> Result<()> {
        const WORD: usize = size_of::<usize>();
        let imports = self.import_funcs.len();
        let constants_at = size_of::<EnvironmentV0>();
        let funcs_at = (constants_at + 4 * self.constants.len()).next_multiple_of(WORD);
        let contexts_at = funcs_at + WORD * imports;
        let page = page_size();
        let length = (contexts_at + WORD * imports).next_multiple_of(page);
        let mut pages = WritableImage::reserve(length, page)?;
        let base = pages.base();
        let bytes = pages.bytes_mut();
        let words = self.constants.iter().map(|c| c.to_ne_bytes());
        for (slot, word) in bytes[constants_at..].chunks_exact_mut(4).zip(words) {
            slot.copy_from_slice(&word);
        }
        let funcs = self.import_funcs.iter().map(|f| f.map_or(0, |f| f as usize));
        let contexts = self.import_contexts.iter().map(|c| *c as usize);
        for (slot, word) in bytes[funcs_at..].chunks_exact_mut(WORD).zip(funcs.chain(contexts)) {
            slot.copy_from_slice(&word.to_ne_bytes());
        }
        let at = |offset: usize, present: bool| if present { base + offset } else { 0 };
        let raw = EnvironmentV0 {
            constants: at(constants_at, !self.constants.is_empty()) as *const u32,
            import_funcs: at(funcs_at, imports != 0) as *const Option<ImportFn>,
            import_contexts: at(contexts_at, imports != 0) as *const *const c_void,
            ..*self.raw
        };
        // SAFETY: the pages start at `base`, page-aligned, and hold `constants_at` bytes before
        // the arrays, room for one `EnvironmentV0`; `bytes` borrowed them until here.
        unsafe { std::ptr::write(base as *mut EnvironmentV0, raw) };
        let pages = pages.protect(&vec![Protection::READ_ONLY; length / page])?;
        self.sealed = Some(Sealed {
            _pages: pages,
            raw: base as *const EnvironmentV0,
        });
        Ok(())
    }

    /// The pointer kernels receive (the sealed copy once there is one); valid while `self` lives.
    pub fn as_ptr(&self) -> *const EnvironmentV0 {
        match &self.sealed {
            Some(sealed) => sealed.raw,
            None => &*self.raw,
        }
    }

    /// The processor data kernels see.
    pub fn processor(&self) -> &ProcessorV0 {
        &self.raw.processor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn returns_five(_: *mut c_void, _: *mut c_void, _: *mut c_void) -> c_int {
        5
    }

    #[test]
    fn optional_imports_may_be_missing_and_required_ones_may_not() {
        let mut environment = Environment::new(&[]);
        let names = ["?halo_missing_v0".to_string(), "halo_present_v0".to_string()];
        let provided = [HostImport::new("halo_present_v0", returns_five)];
        environment.resolve_imports(&names, &provided).unwrap();
        // SAFETY: the environment's arrays hold one entry per import name.
        let funcs = unsafe { std::slice::from_raw_parts(environment.raw.import_funcs, 2) };
        assert!(funcs[0].is_none());
        let thunk = environment.raw.import_thunk.unwrap();
        let null = std::ptr::null_mut();
        // SAFETY: both imports ignore their arguments; a missing one is never called.
        unsafe {
            assert_eq!(thunk(funcs[1], null, null, null), 5);
            assert_eq!(thunk(funcs[0], null, null, null), -1);
        }

        let names = ["halo_missing_v0".to_string()];
        let err = environment.resolve_imports(&names, &provided).unwrap_err();
        assert_eq!(err.code(), halo_hal::StatusCode::NotFound);
        assert!(err.message().contains("'halo_missing_v0'"), "{err}");
    }

    #[test]
    fn the_sealed_copy_holds_the_same_environment_on_pages_of_its_own() {
        let mut environment = Environment::new(&[7, 8, 9]);
        let names = ["?halo_missing_v0".to_string(), "halo_present_v0".to_string()];
        let context = 0x5a5a_usize as *mut c_void;
        // SAFETY: the context is never dereferenced: the import is not called.
        let provided = [unsafe { HostImport::new("halo_present_v0", returns_five).with_context(context) }];
        environment.resolve_imports(&names, &provided).unwrap();
        environment.seal().unwrap();
        let sealed = environment.as_ptr();
        assert_ne!(sealed, &*environment.raw as *const EnvironmentV0);
        assert_eq!(sealed as usize % page_size(), 0);
        // SAFETY: the sealed copy lives as long as `environment`, with three constants and two
        // imports, as the heap copy has.
        let (raw, constants, funcs, contexts) = unsafe {
            let raw = &*sealed;
            (
                raw,
                std::slice::from_raw_parts(raw.constants, 3),
                std::slice::from_raw_parts(raw.import_funcs, 2),
                std::slice::from_raw_parts(raw.import_contexts, 2),
            )
        };
        assert_eq!(constants, &[7, 8, 9]);
        assert!(funcs[0].is_none());
        assert_eq!(funcs[1].map(|f| f as usize), Some(returns_five as ImportFn as usize));
        assert_eq!(contexts, &[std::ptr::null(), context.cast_const()]);
        assert_eq!(raw.processor, environment.raw.processor);
        assert_eq!(
            raw.import_thunk.map(|f| f as usize),
            environment.raw.import_thunk.map(|f| f as usize)
        );
    }

    #[test]
    fn constants_are_passed_through() {
        let environment = Environment::new(&[1, 2, 3]);
        assert_eq!(environment.constants(), &[1, 2, 3]);
        // SAFETY: the environment holds three constants.
        let seen = unsafe { std::slice::from_raw_parts(environment.raw.constants, 3) };
        assert_eq!(seen, &[1, 2, 3]);
    }
}
