//! Exported functions with what the compiler recorded about them, and the input checks made
//! against that record before a call.

use halo_hal::{mlir_text, Error, Result};
use halo_vm::cconv::Signature;
use halo_vm::context::Instance as ModuleInstance;
use halo_vm::Value;
use std::sync::Arc;

/// How a function synchronizes (`iree.abi.model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbiModel {
    /// Returns when its results are ready (awaiting fences inside).
    Sync,
    /// `coarse-fences`: takes a wait fence and a signal fence after its inputs, returns once
    /// the work is queued, and signals the fence when the results are ready
    /// (`--iree-execution-model=async-external`).
    CoarseFences,
}

/// An exported function of a loaded module.
///
/// Ownership: keeps its module alive. Threading: any thread.
#[derive(Clone)]
pub struct Function {
    pub(crate) name: String,
    pub(crate) module: Arc<ModuleInstance>,
    pub(crate) ordinal: u32,
    pub(crate) signature: Signature,
    declaration: Option<String>,
    model: AbiModel,
}

impl Function {
    pub(crate) fn new(name: &str, module: Arc<ModuleInstance>, ordinal: u32) -> Result<Self> {
        let def = module.module().function_signature(ordinal);
        let cconv = def
            .as_ref()
            .and_then(|d| d.calling_convention)
            .ok_or_else(|| Error::failed_precondition(format!("function '{name}' has no calling convention")))?;
        let signature = Signature::parse(cconv)?;
        let attr = |key| def.as_ref().and_then(|d| d.attr(key)).map(str::to_string);
        let model = match attr("iree.abi.model").as_deref() {
            Some("coarse-fences") => AbiModel::CoarseFences,
            _ => AbiModel::Sync,
        };
        let function = Function {
            name: name.to_string(),
            declaration: attr("iree.abi.declaration"),
            signature,
            module,
            ordinal,
            model,
        };
        if model == AbiModel::CoarseFences && !function.all_kinds().ends_with(&['r', 'r']) {
            return Err(Error::invalid_argument(format!(
                "function '{name}' is declared coarse-fences but takes no fences ({})",
                function.signature.text
            )));
        }
        Ok(function)
    }

    /// The name it was looked up by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its calling convention (`0rr_r`).
    pub fn calling_convention(&self) -> &str {
        &self.signature.text
    }

    /// The source-level declaration the compiler recorded, if any
    /// (`sync func @f(%input0: tensor<4xf32>) -> (%output0: tensor<4xf32>)`).
    pub fn declaration(&self) -> Option<&str> {
        self.declaration.as_deref()
    }

    /// How it synchronizes.
    pub fn abi_model(&self) -> AbiModel {
        self.model
    }

    /// Every argument kind, fences included (exports are never variadic).
    fn all_kinds(&self) -> &[char] {
        self.signature.fixed_argument_kinds().unwrap_or_default()
    }

    /// The cconv kind (`i`, `I`, `f`, `F`, `r`) of each input the caller passes (without the
    /// fences of a coarse-fences function).
    pub fn argument_kinds(&self) -> Vec<char> {
        let all = self.all_kinds();
        let fences = if self.model == AbiModel::CoarseFences { 2 } else { 0 };
        all[..all.len() - fences].to_vec()
    }

    /// The cconv kind of each result.
    pub fn result_kinds(&self) -> &[char] {
        self.signature.result_kinds()
    }

    /// The declared type of input `index` (`tensor<4xf32>`), from the declaration.
    pub fn input_declaration(&self, index: usize) -> Option<String> {
        let declaration = self.declaration.as_deref()?;
        let open = declaration.find('(')?;
        split_top_level(&declaration[open + 1..])
            .get(index)
            .map(|arg| arg.split_once(": ").map_or(*arg, |(_, ty)| ty).to_string())
    }

    /// The declared inputs as (name, type) pairs (`("input0", "tensor<4xf32>")`), from the
    /// declaration; empty without one.
    pub fn declared_inputs(&self) -> Vec<(String, String)> {
        let Some(declaration) = self.declaration.as_deref() else {
            return Vec::new();
        };
        let Some(open) = declaration.find('(') else {
            return Vec::new();
        };
        split_top_level(&declaration[open + 1..])
            .iter()
            .map(|item| named(item))
            .collect()
    }

    /// The declared results as (name, type) pairs, from the declaration; empty without one.
    pub fn declared_outputs(&self) -> Vec<(String, String)> {
        let Some((_, results)) = self.declaration.as_deref().and_then(|d| d.rsplit_once("->")) else {
            return Vec::new();
        };
        let results = results.trim();
        let items = match results.strip_prefix('(') {
            Some(list) => split_top_level(list),
            None => vec![results],
        };
        items.iter().map(|item| named(item)).collect()
    }

    /// Checks `inputs` against the function's inputs: count and kind, naming the declaration.
    ///
    /// # Errors
    /// `InvalidArgument` naming the function, the input and its declared type.
    pub fn check_inputs(&self, inputs: &[Value]) -> Result<()> {
        let kinds = self.argument_kinds();
        if kinds.len() != inputs.len() {
            return Err(Error::invalid_argument(format!(
                "function '{}' takes {} inputs but {} were given{}",
                self.name,
                kinds.len(),
                inputs.len(),
                self.declared()
            )));
        }
        for (index, (kind, input)) in kinds.iter().zip(inputs).enumerate() {
            if input.cconv_char() != *kind {
                let declared = self
                    .input_declaration(index)
                    .unwrap_or_else(|| kind_name(*kind).to_string());
                return Err(Error::invalid_argument(format!(
                    "input {index} of '{}' must be {declared} but is {}{}",
                    self.name,
                    kind_name(input.cconv_char()),
                    self.declared()
                )));
            }
        }
        Ok(())
    }

    /// `; declared as ...` for error messages, or nothing.
    pub(crate) fn declared(&self) -> String {
        self.declaration
            .as_deref()
            .map(|d| format!(" (declared as `{d}`)"))
            .unwrap_or_default()
    }
}

fn kind_name(kind: char) -> &'static str {
    match kind {
        'i' => "an i32",
        'I' => "an i64",
        'f' => "an f32",
        'F' => "an f64",
        _ => "a reference (tensor, list or other object)",
    }
}

/// `%input0: tensor<4xf32>` as `("input0", "tensor<4xf32>")`; an unnamed item has no name.
fn named(item: &str) -> (String, String) {
    match item.split_once(": ") {
        Some((name, ty)) => (name.trim_start_matches('%').to_string(), ty.trim().to_string()),
        None => (String::new(), item.trim().to_string()),
    }
}

/// The comma-separated items of a parenthesized list, up to its closing parenthesis.
fn split_top_level(text: &str) -> Vec<&str> {
    let end = mlir_text::top_level_end(text, |c| c == ')').unwrap_or(text.len());
    mlir_text::top_level_items(&text[..end])
}

#[cfg(test)]
mod tests {
    use super::{named, split_top_level};

    #[test]
    fn declared_items_lose_the_percent_sign_and_keep_their_type() {
        assert_eq!(
            named("%input0: tensor<2x?xf32>"),
            ("input0".into(), "tensor<2x?xf32>".into())
        );
        assert_eq!(named("tensor<4xf32>"), (String::new(), "tensor<4xf32>".into()));
    }

    #[test]
    fn declarations_split_at_top_level_commas_only() {
        let items = split_top_level("%input0: tensor<2x?xf32>, %input1: !hal.fence, %x: tuple<i32, f32>) -> (%o: i32)");
        assert_eq!(
            items,
            ["%input0: tensor<2x?xf32>", "%input1: !hal.fence", "%x: tuple<i32, f32>"]
        );
        assert!(split_top_level(")").is_empty());
    }
}
