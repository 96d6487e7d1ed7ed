//! Functions for fixed batch sizes beside an imported model's own (`halo compile
//! --batch-sizes=1,2,4,8`).
//!
//! IREE's code for a dynamic batch dimension is slower than for a known one (the test-scale
//! encoder: 57 us a call at batch 1 against 28 us when the size is known; 319 us at 16 against
//! 293 us). Each size gets a public function `@<name>_b<size>` taking and returning the model's
//! tensors with that leading dimension, which casts them to the dynamic form and calls the
//! model's function: once the compiler inlines the call, every shape in it is known, so each
//! size compiles as if the model had been exported for it, while the weights stay one copy.
//! `halo serve --max-batch-size` calls these functions when it finds them, padding a call up to
//! the next size.

use crate::declaration::{public_function, results_of};
use crate::model::ModelFormat;
use halo_hal::mlir_text::{parenthesized, top_level_items};
use halo_hal::{Error, Result};
use std::path::Path;

/// The largest batch size `--batch-sizes` takes.
pub const MAX_BATCH_SIZE: u64 = 1 << 16;

/// The name of the function for batch `size` of function `name`.
pub fn batch_function_name(name: &str, size: u64) -> String {
    format!("{name}_b{size}")
}

/// `sizes` sorted, without repeats, each checked to be from 1 to [`MAX_BATCH_SIZE`].
///
/// # Errors
/// `InvalidArgument` naming a size out of that range.
pub(crate) fn checked_batch_sizes(sizes: &[u64]) -> Result<Vec<u64>> {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if let Some(bad) = sorted.iter().find(|&&size| size == 0 || size > MAX_BATCH_SIZE) {
        return Err(Error::invalid_argument(format!(
            "batch size {bad} is not from 1 to {MAX_BATCH_SIZE}"
        )));
    }
    Ok(sorted)
}

/// The batch sizes to add functions for to `model`, sorted without repeats, checked before
/// anything is imported: each from 1 to [`MAX_BATCH_SIZE`], and only for an ONNX model, whose
/// import gets them.
///
/// # Errors
/// `InvalidArgument` naming a size out of range or a model that is not ONNX.
pub fn batch_sizes_for(model: &Path, sizes: &[u64]) -> Result<Vec<u64>> {
    let sizes = checked_batch_sizes(sizes)?;
    if !sizes.is_empty() && ModelFormat::of_file(model)? != ModelFormat::Onnx {
        return Err(Error::invalid_argument(format!(
            "--batch-sizes is for ONNX models, whose import halo adds the functions to; '{}' is not one",
            model.display()
        )));
    }
    Ok(sizes)
}

/// `mlir`, an imported model with one public function whose tensors all lead with a dynamic
/// (batch) dimension, with a function per size in `sizes` added before the module's end.
///
/// # Errors
/// `InvalidArgument` when the module has no one public function, or naming an input or output
/// that is not a tensor with a dynamic leading dimension.
pub(crate) fn add_batch_functions(mlir: &str, sizes: &[u64]) -> Result<String> {
    let mut public = mlir.lines().filter(|line| public_function(line).is_some());
    let (Some(line), None) = (public.next(), public.next()) else {
        return Err(Error::invalid_argument(
            "--batch-sizes needs a model whose import has exactly one public function",
        ));
    };
    let signature = Signature::of(line)?;
    let end = module_end(mlir)
        .ok_or_else(|| Error::invalid_argument("--batch-sizes: the imported module has no closing brace"))?;
    let mut out = String::with_capacity(mlir.len() + sizes.len() * 1024);
    out.push_str(&mlir[..end]);
    for &size in sizes {
        out.push_str(&signature.wrapper(line, size));
    }
    out.push_str(&mlir[end..]);
    Ok(out)
}

/// The imported function's name and its argument and result types.
struct Signature<'a> {
    name: &'a str,
    arguments: Vec<&'a str>,
    results: Vec<&'a str>,
}

impl<'a> Signature<'a> {
    fn of(line: &'a str) -> Result<Signature<'a>> {
        let unreadable = || Error::invalid_argument(format!("--batch-sizes cannot read the function line: {line}"));
        let signature = public_function(line).ok_or_else(unreadable)?;
        let open = signature.find('(').ok_or_else(unreadable)?;
        let (arguments, rest) = parenthesized(&signature[open..]).ok_or_else(unreadable)?;
        let (results, _) = rest
            .trim_start()
            .strip_prefix("->")
            .and_then(|results| results_of(results.trim_start()))
            .ok_or_else(unreadable)?;
        let arguments = (top_level_items(arguments).into_iter())
            .map(|argument| {
                argument
                    .split_once(": ")
                    .map(|(_, ty)| ty.trim())
                    .ok_or_else(unreadable)
            })
            .collect::<Result<Vec<_>>>()?;
        let signature = Signature {
            name: &signature[..open],
            arguments,
            results,
        };
        let tensors = (signature.arguments.iter().map(|ty| ("input", ty)).enumerate())
            .chain(signature.results.iter().map(|ty| ("output", ty)).enumerate());
        for (index, (what, ty)) in tensors {
            if !ty.starts_with("!torch.vtensor<[?") {
                return Err(Error::invalid_argument(format!(
                    "--batch-sizes needs every input and output of '{}' to lead with a dynamic batch dimension \
                     (a symbolic first dimension in the ONNX graph); {what} {index} is {ty}",
                    signature.name
                )));
            }
        }
        Ok(signature)
    }

    /// The function for batch `size`: the model function's `line` with the size in place of
    /// each leading `?` (declaration included), and a body that casts and calls.
    fn wrapper(&self, line: &str, size: u64) -> String {
        let sized = |text: &str| {
            text.replace("!torch.vtensor<[?", &format!("!torch.vtensor<[{size}"))
                .replace("tensor<?", &format!("tensor<{size}"))
        };
        let header = sized(&line.replacen(
            &format!("@{}(", self.name),
            &format!("@{}(", batch_function_name(self.name, size)),
            2,
        ));
        let mut body = String::new();
        let mut casts = Vec::with_capacity(self.arguments.len());
        for (index, dynamic) in self.arguments.iter().enumerate() {
            body.push_str(&format!(
                "    %in{index} = torch.tensor_static_info_cast %arg{index} : {} to {dynamic}\n",
                sized(dynamic)
            ));
            casts.push(format!("%in{index}"));
        }
        let results = match self.results.len() {
            1 => vec!["%called".to_string()],
            count => (0..count).map(|index| format!("%called#{index}")).collect(),
        };
        let binding = match self.results.len() {
            1 => "%called".to_string(),
            count => format!("%called:{count}"),
        };
        body.push_str(&format!(
            "    {binding} = func.call @{}({}) : ({}) -> ({})\n",
            self.name,
            casts.join(", "),
            self.arguments.join(", "),
            self.results.join(", ")
        ));
        let mut returned = Vec::with_capacity(results.len());
        for (index, (result, dynamic)) in results.iter().zip(&self.results).enumerate() {
            body.push_str(&format!(
                "    %out{index} = torch.tensor_static_info_cast {result} : {dynamic} to {}\n",
                sized(dynamic)
            ));
            returned.push(format!("%out{index}"));
        }
        let types: Vec<String> = self.results.iter().map(|ty| sized(ty)).collect();
        body.push_str(&format!("    return {} : {}\n", returned.join(", "), types.join(", ")));
        format!("{}\n{body}  }}\n", header.trim_end())
    }
}

/// Where the module's closing brace is: the last `}` before the resources (`{-#`), if any.
fn module_end(mlir: &str) -> Option<usize> {
    let resources = mlir.find("\n{-#").unwrap_or(mlir.len());
    mlir[..resources].rfind('}')
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMPORTED: &str = "module {\n  func.func @encoder(%arg0: !torch.vtensor<[?,16],si64>) -> !torch.vtensor<[?,16,32],f32> attributes {iree.reflection = {iree.abi.declaration = \"sync func @encoder(%tokens: tensor<?x16xi64>) -> (%out: tensor<?x16x32xf32>)\"}, torch.onnx_meta.opset_version = 17 : si64} {\n    %0 = torch.foo %arg0\n    return %0 : !torch.vtensor<[?,16,32],f32>\n  }\n}\n\n{-#\n  dialect_resources: {}\n#-}\n";

    #[test]
    fn each_size_gets_a_function_with_its_shapes_and_declaration_calling_the_model() {
        let out = add_batch_functions(IMPORTED, &[1, 4]).unwrap();
        let expected = "  func.func @encoder_b4(%arg0: !torch.vtensor<[4,16],si64>) -> !torch.vtensor<[4,16,32],f32> attributes {iree.reflection = {iree.abi.declaration = \"sync func @encoder_b4(%tokens: tensor<4x16xi64>) -> (%out: tensor<4x16x32xf32>)\"}, torch.onnx_meta.opset_version = 17 : si64} {\n    %in0 = torch.tensor_static_info_cast %arg0 : !torch.vtensor<[4,16],si64> to !torch.vtensor<[?,16],si64>\n    %called = func.call @encoder(%in0) : (!torch.vtensor<[?,16],si64>) -> (!torch.vtensor<[?,16,32],f32>)\n    %out0 = torch.tensor_static_info_cast %called : !torch.vtensor<[?,16,32],f32> to !torch.vtensor<[4,16,32],f32>\n    return %out0 : !torch.vtensor<[4,16,32],f32>\n  }\n";
        assert!(out.contains(expected), "{out}");
        assert!(out.contains("@encoder_b1("), "{out}");
        assert!(
            out.starts_with(&IMPORTED[..IMPORTED.find("}\n\n{-#").unwrap()]),
            "the model is kept"
        );
        assert!(out.ends_with("  }\n}\n\n{-#\n  dialect_resources: {}\n#-}\n"), "{out}");
    }

    #[test]
    fn several_results_are_unpacked_and_several_arguments_cast() {
        let mlir = "module {\n  func.func @f(%arg0: !torch.vtensor<[?,2],f32>, %arg1: !torch.vtensor<[?],si64>) -> (!torch.vtensor<[?,3],f32>, !torch.vtensor<[?,?],f32>) attributes {torch.onnx_meta.opset_version = 17 : si64} {\n  }\n}\n";
        let out = add_batch_functions(mlir, &[8]).unwrap();
        assert!(out.contains("%called:2 = func.call @f(%in0, %in1)"), "{out}");
        assert!(out.contains("%out1 = torch.tensor_static_info_cast %called#1 : !torch.vtensor<[?,?],f32> to !torch.vtensor<[8,?],f32>"), "{out}");
        assert!(
            out.contains(
                "%in1 = torch.tensor_static_info_cast %arg1 : !torch.vtensor<[8],si64> to !torch.vtensor<[?],si64>"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_model_without_a_dynamic_batch_or_one_public_function_is_refused_naming_why() {
        let fixed = IMPORTED.replace("[?,16],si64", "[1,16],si64");
        let error = add_batch_functions(&fixed, &[2]).unwrap_err();
        assert!(
            error.to_string().contains("input 0 is !torch.vtensor<[1,16],si64>"),
            "{error}"
        );
        let fixed_output = IMPORTED.replace("-> !torch.vtensor<[?,16,32],f32>", "-> !torch.vtensor<[1,16,32],f32>");
        let error = add_batch_functions(&fixed_output, &[2]).unwrap_err();
        assert!(error.to_string().contains("output 0 is"), "{error}");
        let two = IMPORTED.replace(
            "}\n\n{-#",
            "  func.func @other(%arg0: !torch.int) -> !torch.int {\n  }\n}\n\n{-#",
        );
        let error = add_batch_functions(&two, &[2]).unwrap_err();
        assert!(error.to_string().contains("exactly one public function"), "{error}");
    }

    #[test]
    fn sizes_are_sorted_without_repeats_and_checked() {
        assert_eq!(checked_batch_sizes(&[8, 1, 4, 1]).unwrap(), [1, 4, 8]);
        for bad in [0, MAX_BATCH_SIZE + 1] {
            let error = checked_batch_sizes(&[1, bad]).unwrap_err();
            assert!(error.to_string().contains(&format!("batch size {bad}")), "{error}");
        }
    }
}
