//! What kind of model a file holds: its format decides whether it is imported before compiling,
//! and whether its graph has convolutions decides which flag set `halo compile` tries first.

use halo_hal::{Error, Result};
use std::io::Read;
use std::path::Path;

/// The formats `halo compile` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFormat {
    /// An ONNX protobuf; imported with `iree-import-onnx --opset-version 17`.
    Onnx,
    /// MLIR text in a dialect `iree-compile` takes (e.g. what an importer wrote).
    MlirText,
    /// MLIR bytecode (starts with `ML\xefR`).
    MlirBytecode,
}

const MLIR_BYTECODE_MAGIC: &[u8; 4] = b"ML\xefR";

/// What `halo compile`'s default ranking of flag sets knows of a model's operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphKind {
    /// An ONNX graph with convolutions.
    Convolutional,
    /// An ONNX graph without any (a transformer, an MLP): `O3` made the benchmark set's
    /// transformer encoder 1.34× slower, while it made its CNNs up to 10 % faster.
    WithoutConvolutions,
    /// MLIR, or an ONNX file that does not decode (its importer will say why).
    Unknown,
}

impl GraphKind {
    /// The kind of the model in ONNX file `bytes`.
    pub fn of_onnx(bytes: &[u8]) -> GraphKind {
        match <crate::onnx::ModelProto as prost::Message>::decode(bytes) {
            Ok(model) if model.graph.as_ref().is_some_and(has_convolutions) => GraphKind::Convolutional,
            Ok(_) => GraphKind::WithoutConvolutions,
            Err(_) => GraphKind::Unknown,
        }
    }

    /// The kind of the model file at `path` in `format`.
    pub fn of_file(path: &Path, format: ModelFormat) -> GraphKind {
        match format {
            ModelFormat::Onnx => std::fs::read(path).map_or(GraphKind::Unknown, |bytes| GraphKind::of_onnx(&bytes)),
            ModelFormat::MlirText | ModelFormat::MlirBytecode => GraphKind::Unknown,
        }
    }
}

/// Whether `graph` or a graph nested in its nodes' attributes has a convolution
/// (`Conv`, `ConvTranspose`, `ConvInteger`, ...).
fn has_convolutions(graph: &crate::onnx::GraphProto) -> bool {
    graph.node.iter().any(|node| {
        node.op_type().starts_with("Conv")
            || node
                .attribute
                .iter()
                .any(|a| a.g.iter().chain(&a.graphs).any(has_convolutions))
    })
}

impl ModelFormat {
    /// The format of the model file at `path`, from its name (`.onnx`, `.mlir`, `.mlirbc`) or,
    /// for other names, from its first bytes when they are MLIR bytecode.
    ///
    /// # Errors
    /// `NotFound`/`PermissionDenied` when the file cannot be read, `InvalidArgument` when it is
    /// not a regular file, is empty, or its format cannot be told.
    pub fn of_file(path: &Path) -> Result<ModelFormat> {
        let name = path.display();
        let mut file = std::fs::File::open(path).map_err(|error| {
            let code = match error.kind() {
                std::io::ErrorKind::NotFound => halo_hal::StatusCode::NotFound,
                std::io::ErrorKind::PermissionDenied => halo_hal::StatusCode::PermissionDenied,
                _ => halo_hal::StatusCode::InvalidArgument,
            };
            Error::new(code, format!("cannot read model '{name}': {error}"))
        })?;
        let meta = file
            .metadata()
            .map_err(|error| Error::invalid_argument(format!("cannot inspect model '{name}': {error}")))?;
        if !meta.is_file() {
            return Err(Error::invalid_argument(format!("model '{name}' is not a regular file")));
        }
        if meta.len() == 0 {
            return Err(Error::invalid_argument(format!("model '{name}' is empty")));
        }
        let extension = path.extension().and_then(|ext| ext.to_str()).unwrap_or("");
        match extension.to_ascii_lowercase().as_str() {
            "onnx" => return Ok(ModelFormat::Onnx),
            "mlir" => return Ok(ModelFormat::MlirText),
            "mlirbc" => return Ok(ModelFormat::MlirBytecode),
            _ => {}
        }
        let mut magic = [0u8; 4];
        if file.read_exact(&mut magic).is_ok() && &magic == MLIR_BYTECODE_MAGIC {
            return Ok(ModelFormat::MlirBytecode);
        }
        Err(Error::invalid_argument(format!(
            "cannot tell the format of model '{name}': name it .onnx (ONNX), .mlir (MLIR text) or .mlirbc (MLIR bytecode)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{AttributeProto, GraphProto, ModelProto, NodeProto};
    use prost::Message;

    fn graph(ops: &[&str], nested: Option<GraphProto>) -> GraphProto {
        let node = |op: &&str| NodeProto {
            op_type: Some(op.to_string()),
            attribute: nested
                .iter()
                .map(|g| AttributeProto {
                    name: Some("then_branch".into()),
                    g: Some(g.clone()),
                    ..AttributeProto::default()
                })
                .collect(),
            ..NodeProto::default()
        };
        GraphProto {
            node: ops.iter().map(node).collect(),
            ..GraphProto::default()
        }
    }

    fn kind_of(graph: GraphProto) -> GraphKind {
        let model = ModelProto {
            graph: Some(graph),
            ..ModelProto::default()
        };
        GraphKind::of_onnx(&model.encode_to_vec())
    }

    #[test]
    fn graphs_are_told_apart_by_their_convolutions_nested_ones_included() {
        assert_eq!(
            kind_of(graph(&["MatMul", "Conv", "Relu"], None)),
            GraphKind::Convolutional
        );
        assert_eq!(
            kind_of(graph(&["MatMul", "Softmax"], None)),
            GraphKind::WithoutConvolutions
        );
        let branch = graph(&["ConvTranspose"], None);
        assert_eq!(kind_of(graph(&["If"], Some(branch))), GraphKind::Convolutional);
        assert_eq!(GraphKind::of_onnx(b"\xff\xff not a model"), GraphKind::Unknown);
        let dir = tempfile::tempdir().unwrap();
        let mlir = file_with(dir.path(), "m.mlir", b"module {}");
        assert_eq!(GraphKind::of_file(&mlir, ModelFormat::MlirText), GraphKind::Unknown);
    }

    fn file_with(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn names_and_magic_decide_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        assert_eq!(
            ModelFormat::of_file(&file_with(dir, "m.onnx", b"\x08\x08")).unwrap(),
            ModelFormat::Onnx
        );
        assert_eq!(
            ModelFormat::of_file(&file_with(dir, "m.MLIR", b"module {}")).unwrap(),
            ModelFormat::MlirText
        );
        assert_eq!(
            ModelFormat::of_file(&file_with(dir, "m.mlirbc", b"ML\xefR..")).unwrap(),
            ModelFormat::MlirBytecode
        );
        assert_eq!(
            ModelFormat::of_file(&file_with(dir, "m.bin", b"ML\xefR..")).unwrap(),
            ModelFormat::MlirBytecode
        );
    }

    #[test]
    fn unreadable_empty_and_unknown_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.onnx");
        let error = ModelFormat::of_file(&missing).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::NotFound);
        assert!(error.to_string().contains("absent.onnx"), "{error}");

        let error = ModelFormat::of_file(dir.path()).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");

        let empty = file_with(dir.path(), "e.onnx", b"");
        assert!(ModelFormat::of_file(&empty)
            .unwrap_err()
            .to_string()
            .contains("is empty"));

        let unknown = file_with(dir.path(), "m.pt", b"PK\x03\x04");
        let error = ModelFormat::of_file(&unknown).unwrap_err();
        assert!(error.to_string().contains("cannot tell the format of model"), "{error}");
    }
}
