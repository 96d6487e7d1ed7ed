//! ABI declarations for imported ONNX models.
//!
//! `iree-import-onnx` writes functions without an `iree.abi.declaration`, so the compiled
//! program would not say what its inputs and outputs are, and nothing that reads the reflection
//! (`halo serve`'s metadata, IREE's own tools) could describe it. IREE's torch input conversion
//! carries an `iree.reflection` attribute over to the functions it generates, so halo writes the
//! declaration there before compiling, in the format iree-compile's native bindings use
//! (`sync func @f(%input: tensor<1x3xf32>) -> (%output0: tensor<1x10xf32>)`), with the ONNX
//! graph's own input and output names where they are plain identifiers.

use crate::onnx::ModelProto;
use halo_hal::mlir_text::{parenthesized, top_level_end, top_level_items};
use std::path::Path;

/// The names an ONNX graph gives its inputs and outputs, in the function's argument order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GraphNames {
    /// Graph inputs that are not initializers (weights), as the importer makes arguments of.
    pub inputs: Vec<String>,
    /// Graph outputs.
    pub outputs: Vec<String>,
}

impl GraphNames {
    /// The names in ONNX model `bytes`; none when it does not decode (the importer reports why).
    pub fn of_onnx(bytes: &[u8]) -> GraphNames {
        let Some(graph) = <ModelProto as prost::Message>::decode(bytes).ok().and_then(|m| m.graph) else {
            return GraphNames::default();
        };
        let weights: std::collections::HashSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
        GraphNames {
            inputs: graph
                .input
                .iter()
                .filter(|value| !weights.contains(value.name()))
                .map(|value| value.name().to_string())
                .collect(),
            outputs: graph.output.iter().map(|value| value.name().to_string()).collect(),
        }
    }

    /// The names in the ONNX model file at `path`; none when it cannot be read.
    pub fn of_onnx_file(path: &Path) -> GraphNames {
        std::fs::read(path)
            .map(|bytes| GraphNames::of_onnx(&bytes))
            .unwrap_or_default()
    }
}

/// `mlir` with a declaration added to each public function that has none. The graph's names are
/// used when the module has one public function, as an import does; a function whose signature
/// holds a type the declaration format cannot spell is left as it was.
pub(crate) fn declare_functions(mlir: &str, names: &GraphNames) -> String {
    let public = mlir.lines().filter(|line| public_function(line).is_some()).count();
    let names = if public == 1 {
        names.clone()
    } else {
        GraphNames::default()
    };
    let mut out = String::with_capacity(mlir.len() + 256);
    for line in mlir.split_inclusive('\n') {
        match public_function(line).and_then(|signature| declared(line, signature, &names)) {
            Some(rewritten) => out.push_str(&rewritten),
            None => out.push_str(line),
        }
    }
    out
}

/// The text after `func.func @` on a public function's line.
pub(crate) fn public_function(line: &str) -> Option<&str> {
    line.trim_start().strip_prefix("func.func @")
}

/// `line` with the declaration of the function whose signature (from its name on) it holds.
fn declared(line: &str, signature: &str, names: &GraphNames) -> Option<String> {
    if line.contains("iree.reflection") {
        return None;
    }
    let open = signature.find('(')?;
    let name = &signature[..open];
    if !plain_identifier(name) {
        return None;
    }
    let (arguments, rest) = parenthesized(&signature[open..])?;
    let rest = rest.trim_start();
    let (results, rest) = match rest.strip_prefix("->") {
        Some(results) => results_of(results.trim_start())?,
        None => (Vec::new(), rest),
    };
    let rest = rest.trim_start();
    let inputs = top_level_items(arguments)
        .into_iter()
        .map(|argument| builtin_type(argument.split_once(": ")?.1.trim()))
        .collect::<Option<Vec<_>>>()?;
    let results = results.into_iter().map(builtin_type).collect::<Option<Vec<_>>>()?;
    let declaration = format!(
        "sync func @{name}({}) -> ({})",
        listed(&inputs, &names.inputs, "input"),
        listed(&results, &names.outputs, "output")
    );
    let reflection = format!("iree.reflection = {{iree.abi.declaration = \"{declaration}\"}}");
    let body_at = line.len() - rest.len();
    let (head, tail) = line.split_at(body_at);
    Some(match tail.strip_prefix("attributes {") {
        Some(after) if after.starts_with('}') => format!("{head}attributes {{{reflection}{after}"),
        Some(after) => format!("{head}attributes {{{reflection}, {after}"),
        None => format!("{head}attributes {{{reflection}}} {tail}"),
    })
}

/// The result types after `->` (one bare type or a parenthesized list) and the text after them.
pub(crate) fn results_of(text: &str) -> Option<(Vec<&str>, &str)> {
    if text.starts_with('(') {
        let (list, rest) = parenthesized(text)?;
        return Some((top_level_items(list), rest));
    }
    let end = top_level_end(text, |c| c.is_whitespace()).unwrap_or(text.len());
    Some((vec![&text[..end]], &text[end..]))
}

/// `(name: type, ...)` for `types`, each named by `names` when it is a plain identifier.
fn listed(types: &[String], names: &[String], fallback: &str) -> String {
    let usable = names.len() == types.len() && names.iter().all(|name| plain_identifier(name));
    types
        .iter()
        .enumerate()
        .map(|(index, ty)| match usable {
            true => format!("%{}: {ty}", names[index]),
            false => format!("%{fallback}{index}: {ty}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `name` can stand in a declaration unquoted (and be read back by halo's runtime).
fn plain_identifier(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '$'))
}

/// The type a compiled function takes for torch type `ty`, as a builtin type: value tensors
/// become builtin tensors with signless integers, as the torch conversion makes them.
fn builtin_type(ty: &str) -> Option<String> {
    match ty {
        "!torch.int" => return Some("i64".into()),
        "!torch.float" => return Some("f64".into()),
        "!torch.bool" => return Some("i1".into()),
        _ => {}
    }
    if ty.starts_with("tensor<") {
        return Some(ty.to_string());
    }
    let inner = ty.strip_prefix("!torch.vtensor<[")?.strip_suffix('>')?;
    let (dims, element) = inner.split_once("],")?;
    let element = match element {
        "f16" | "bf16" | "f32" | "f64" | "i1" => element,
        "si8" | "ui8" => "i8",
        "si16" => "i16",
        "si32" => "i32",
        "si64" => "i64",
        _ => return None,
    };
    let dims = dims
        .split(',')
        .filter(|dim| !dim.is_empty())
        .map(|dim| match dim.trim() {
            "?" => Some("?".to_string()),
            dim => dim.parse::<u64>().ok().map(|size| size.to_string()),
        })
        .collect::<Option<Vec<_>>>()?;
    Some(match dims.is_empty() {
        true => format!("tensor<{element}>"),
        false => format!("tensor<{}x{element}>", dims.join("x")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMPORTED: &str = "module {\n  func.func @squeezenet(%arg0: !torch.vtensor<[1,3,64,64],f32>, %arg1: !torch.vtensor<[?,16],si64>) -> !torch.vtensor<[1,10],f32> attributes {torch.onnx_meta.ir_version = 8 : si64} {\n    return %1 : !torch.vtensor<[1,10],f32>\n  }\n}\n";

    fn names(inputs: &[&str], outputs: &[&str]) -> GraphNames {
        GraphNames {
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn an_imported_function_gets_builtin_types_and_the_graphs_names() {
        let out = declare_functions(IMPORTED, &names(&["image", "tokens.1"], &["logits"]));
        let expected = "func.func @squeezenet(%arg0: !torch.vtensor<[1,3,64,64],f32>, %arg1: !torch.vtensor<[?,16],si64>) -> !torch.vtensor<[1,10],f32> attributes {iree.reflection = {iree.abi.declaration = \"sync func @squeezenet(%image: tensor<1x3x64x64xf32>, %tokens.1: tensor<?x16xi64>) -> (%logits: tensor<1x10xf32>)\"}, torch.onnx_meta.ir_version = 8 : si64} {";
        assert_eq!(out.lines().nth(1).unwrap().trim(), expected);
        assert_eq!(out.lines().count(), IMPORTED.lines().count());
        assert_eq!(out.lines().nth(2), IMPORTED.lines().nth(2));
    }

    #[test]
    fn names_that_are_not_identifiers_or_do_not_match_fall_back_to_positions() {
        let positional_inputs = "(%input0: tensor<1x3x64x64xf32>, %input1: tensor<?x16xi64>)";
        for (graph, inputs, outputs) in [
            (
                names(&["input:0", "b"], &["out"]),
                positional_inputs,
                "(%out: tensor<1x10xf32>)",
            ),
            (
                names(&["a"], &["out", "extra"]),
                positional_inputs,
                "(%output0: tensor<1x10xf32>)",
            ),
            (GraphNames::default(), positional_inputs, "(%output0: tensor<1x10xf32>)"),
        ] {
            let out = declare_functions(IMPORTED, &graph);
            assert!(out.contains(&format!("@squeezenet{inputs} -> {outputs}")), "{out}");
        }
    }

    #[test]
    fn names_apply_only_when_one_function_is_public() {
        let two = format!("{IMPORTED}{}", IMPORTED.replace("@squeezenet", "@other"));
        let out = declare_functions(&two, &names(&["image", "tokens"], &["logits"]));
        assert_eq!(out.matches("%input0: tensor<1x3x64x64xf32>").count(), 2, "{out}");
        assert!(!out.contains("%image"), "{out}");
    }

    #[test]
    fn scalars_primitives_several_results_and_no_attributes() {
        let mlir = "func.func @f(%arg0: !torch.vtensor<[],f32>, %arg1: !torch.int, %arg2: !torch.bool) -> (!torch.vtensor<[2],si32>, !torch.float) {\n";
        let out = declare_functions(mlir, &GraphNames::default());
        assert_eq!(
            out,
            "func.func @f(%arg0: !torch.vtensor<[],f32>, %arg1: !torch.int, %arg2: !torch.bool) -> (!torch.vtensor<[2],si32>, !torch.float) attributes {iree.reflection = {iree.abi.declaration = \"sync func @f(%input0: tensor<f32>, %input1: i64, %input2: i1) -> (%output0: tensor<2xi32>, %output1: f64)\"}} {\n"
        );
        let empty = "func.func @g() attributes {} {\n";
        assert_eq!(
            declare_functions(empty, &GraphNames::default()),
            "func.func @g() attributes {iree.reflection = {iree.abi.declaration = \"sync func @g() -> ()\"}} {\n"
        );
    }

    #[test]
    fn what_cannot_be_declared_is_left_as_it_was() {
        for mlir in [
            "func.func @f(%arg0: !torch.vtensor<*,f32>) -> !torch.int {\n",
            "func.func @f(%arg0: !torch.vtensor<[2],complex<f32>>) -> !torch.int {\n",
            "func.func @f(%arg0: !torch.list<int>) -> !torch.int {\n",
            "func.func @\"odd name\"(%arg0: !torch.int) -> !torch.int {\n",
            "func.func @f(%arg0: !torch.int) -> !torch.int attributes {iree.reflection = {}} {\n",
            "func.func private @f(%arg0: !torch.int) -> !torch.int\n",
            "func.func @f(%arg0: !torch.vtensor<[2,3],f32>\n",
            "func.func @f(",
        ] {
            assert_eq!(declare_functions(mlir, &GraphNames::default()), mlir);
        }
    }

    #[test]
    fn graph_names_skip_initializers_and_survive_garbage() {
        use crate::onnx::{GraphProto, TensorProto, ValueInfoProto};
        use prost::Message;
        let value = |name: &str| ValueInfoProto {
            name: Some(name.into()),
            ..ValueInfoProto::default()
        };
        let model = ModelProto {
            graph: Some(GraphProto {
                initializer: vec![TensorProto {
                    name: Some("w".into()),
                    ..TensorProto::default()
                }],
                input: ["x", "w", "y"].map(value).to_vec(),
                output: vec![value("z")],
                ..GraphProto::default()
            }),
            ..ModelProto::default()
        };
        assert_eq!(GraphNames::of_onnx(&model.encode_to_vec()), names(&["x", "y"], &["z"]));
        assert_eq!(GraphNames::of_onnx(b"\xff\xff\xff not a model"), GraphNames::default());
        assert_eq!(
            GraphNames::of_onnx_file(Path::new("/no/such.onnx")),
            GraphNames::default()
        );
    }
}
