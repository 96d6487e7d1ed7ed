//! Calls to imports: native functions read their arguments in place from the caller's frame and
//! their results go straight into it; other modules' exports get the arguments as values.

use super::{check_count, invoke, is_move, ref_ordinal, write_results};
use crate::cancel::CancelToken;
use crate::compile::{Extra, Function, Inst};
use crate::context::{ImportTarget, Instance};
use crate::isa::IMPORT_ORDINAL_BIT;
use crate::native::Args;
use crate::ref_types::Ref;
use crate::value::Results;
use halo_hal::{Error, Result, StatusCode};

/// One call instruction's import, resolved: what it calls and which registers it passes.
pub(super) struct ImportCall<'f> {
    instance: &'f Instance,
    import: usize,
    pub(super) target: &'f ImportTarget,
    kinds: &'f [char],
    args: &'f [u16],
    results: &'f [u16],
}

impl<'f> ImportCall<'f> {
    /// The import called by `inst` (a call of `function`), or `None` for an internal call.
    ///
    /// # Errors
    /// `NotFound` for an unresolved optional import; `InvalidArgument` for an argument count
    /// that does not match the calling convention.
    // Inlined: returned through memory, the struct was read back before its stores had landed.
    #[inline(always)]
    pub(super) fn of(instance: &'f Instance, function: &'f Function, inst: &Inst) -> Result<Option<Self>> {
        let Some(Extra::Call {
            callee,
            variadic_kinds,
            args,
            results,
            ..
        }) = function.extras.get(inst.extra as usize)
        else {
            unreachable!("calls were lowered")
        };
        if callee & IMPORT_ORDINAL_BIT == 0 {
            return Ok(None);
        }
        let import = (callee & !IMPORT_ORDINAL_BIT) as usize;
        let target = instance.imports[import]
            .as_ref()
            .ok_or_else(|| import_error(instance, import, StatusCode::NotFound, "is not resolved"))?;
        let kinds = match variadic_kinds {
            Some(kinds) => kinds,
            None => target.signature().fixed_argument_kinds().ok_or_else(|| {
                import_error(
                    instance,
                    import,
                    StatusCode::InvalidArgument,
                    "is variadic but called without segment sizes",
                )
            })?,
        };
        let args = &function.regs[args.start as usize..args.end as usize];
        check_count(args.len(), kinds.len())?;
        Ok(Some(ImportCall {
            instance,
            import,
            target,
            kinds,
            args,
            results: &function.regs[results.start as usize..results.end as usize],
        }))
    }

    /// Whether the callee is a native function that neither waits, blocks nor runs bytecode: such
    /// a call can be made without leaving the interpreter loop (and with the module state kept
    /// locked).
    #[inline]
    pub(super) fn is_leaf(&self) -> bool {
        matches!(self.target, ImportTarget::Native(native) if !native.releases_state && native.wait.is_none())
    }

    /// The arguments, read in place from the caller's frame (`i32s` and `refs` start at its
    /// first register).
    pub(super) fn arguments<'a>(&'a self, i32s: &'a [u32], refs: &'a [Option<Ref>]) -> Args<'a> {
        Args::from_registers(self.kinds, self.args, i32s, refs)
    }

    /// Makes the call over the caller's frame: arguments from it, results into it.
    pub(super) fn run(&self, i32s: &mut [u32], refs: &mut [Option<Ref>], cancel: Option<&CancelToken>) -> Result<()> {
        let span = tracing::info_span!("vm.import", name = tracing::field::Empty);
        if !span.is_disabled() {
            span.record("name", self.name());
        }
        let _entered = span.enter();
        let outcome = match self.target {
            ImportTarget::Native(native) => (native.function)(&self.arguments(i32s, refs)),
            ImportTarget::Bytecode { instance, ordinal, .. } => {
                invoke(instance, *ordinal, &self.arguments(i32s, refs).to_values(), cancel).map(Results::from_vec)
            }
        };
        self.release_moved(refs);
        outcome
            .and_then(|results| {
                write_results(
                    self.results,
                    self.target.signature().result_kinds(),
                    i32s,
                    refs,
                    results,
                )
            })
            .map_err(|error| self.context(error))
    }

    /// Adds this call's context to `error`.
    #[cold]
    #[inline(never)]
    /// The import's full name (`hal.command_buffer.dispatch`).
    pub(super) fn name(&self) -> &str {
        &self.instance.import_names[self.import]
    }

    pub(super) fn context(&self, error: Error) -> Error {
        error.context(format!("calling import '{}'", self.instance.import_names[self.import]))
    }

    /// Empties the ref registers the arguments moved: the callee took them over (and kept a
    /// counted copy of any it holds on to).
    fn release_moved(&self, refs: &mut [Option<Ref>]) {
        for (&raw, &kind) in self.args.iter().zip(self.kinds) {
            if kind == 'r' && is_move(raw) {
                refs[ref_ordinal(raw)] = None;
            }
        }
    }
}

/// An error about import `import` of `instance`, naming it. Out of line, so that the name is
/// not loaded on the way to every call (that load cost a cache miss there).
#[cold]
#[inline(never)]
fn import_error(instance: &Instance, import: usize, code: StatusCode, problem: &str) -> Error {
    Error::new(code, format!("import '{}' {problem}", instance.import_names[import]))
}
