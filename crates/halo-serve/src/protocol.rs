//! The Open Inference Protocol's JSON messages (KServe v2 REST), and their conversion to and from
//! the server's tensors.

use crate::datatype::{json_elements, push_json_element};
use crate::model::{InputTensor, Model, OutputTensor, TensorSpec};
use halo_hal::buffer_view_text::element_count;
use halo_hal::{ElementType, Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `GET /v2`.
#[derive(Debug, Serialize)]
pub struct ServerMetadata {
    /// The server's name.
    pub name: &'static str,
    /// Its version.
    pub version: &'static str,
    /// Protocol extensions it supports.
    pub extensions: Vec<&'static str>,
}

/// An input or output in model metadata.
#[derive(Debug, Serialize)]
pub struct TensorMetadata {
    /// Its name.
    pub name: String,
    /// Its datatype (`FP32`).
    pub datatype: &'static str,
    /// Its shape, `-1` where dynamic.
    pub shape: Vec<i64>,
}

impl From<&TensorSpec> for TensorMetadata {
    fn from(spec: &TensorSpec) -> Self {
        TensorMetadata {
            name: spec.name.clone(),
            datatype: spec.datatype,
            shape: spec.shape.clone(),
        }
    }
}

/// `GET /v2/models/{name}`.
#[derive(Debug, Serialize)]
pub struct ModelMetadata {
    /// The model's name.
    pub name: String,
    /// Its versions.
    pub versions: Vec<String>,
    /// The runtime that serves it.
    pub platform: &'static str,
    /// Its inputs.
    pub inputs: Vec<TensorMetadata>,
    /// Its outputs.
    pub outputs: Vec<TensorMetadata>,
}

impl ModelMetadata {
    /// The metadata of `model`.
    pub fn of(model: &Model) -> Self {
        ModelMetadata {
            name: model.config().name.clone(),
            versions: vec![model.config().version.clone()],
            platform: "halo_iree",
            inputs: model.inputs().iter().map(TensorMetadata::from).collect(),
            outputs: model.outputs().iter().map(TensorMetadata::from).collect(),
        }
    }
}

/// One input of an inference request.
#[derive(Debug, Deserialize)]
pub struct RequestInput {
    /// The input's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its datatype.
    pub datatype: String,
    /// Its elements, row-major, flat or nested.
    pub data: Value,
}

/// `POST /v2/models/{name}/infer`, as JSON.
#[derive(Debug, Deserialize)]
pub struct InferRequest {
    /// An identifier the response repeats.
    #[serde(default)]
    pub id: Option<String>,
    /// Its inputs.
    pub inputs: Vec<RequestInput>,
}

/// One output of an inference response.
#[derive(Debug, Serialize)]
pub struct ResponseOutput {
    /// The output's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its datatype.
    pub datatype: &'static str,
    /// Its elements, flat and row-major.
    pub data: Vec<Value>,
}

/// The answer to an inference request.
#[derive(Debug, Serialize)]
pub struct InferResponse {
    /// The model that answered.
    pub model_name: String,
    /// Its version.
    pub model_version: String,
    /// The request's identifier, if it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The results.
    pub outputs: Vec<ResponseOutput>,
}

/// The body of every error answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    /// What was wrong.
    pub error: String,
}

/// Decodes a JSON request's inputs for `model`, each element as the model's declared type.
///
/// # Errors
/// `InvalidArgument` naming the input: an unknown name or datatype, data that is not numbers,
/// or a number of elements that does not match the shape.
pub fn decode_inputs(model: &Model, inputs: Vec<RequestInput>) -> Result<Vec<InputTensor>> {
    inputs
        .into_iter()
        .map(|input| {
            let spec = model.input_spec(&input.name)?;
            decode_input(spec.element_type, input)
        })
        .collect()
}

fn decode_input(element_type: ElementType, input: RequestInput) -> Result<InputTensor> {
    let count = element_count(&input.shape);
    let mut bytes = Vec::new();
    bytes
        .try_reserve(
            usize::try_from(count)
                .unwrap_or(usize::MAX)
                .saturating_mul(element_type.byte_size()),
        )
        .map_err(|_| {
            Error::resource_exhausted(format!(
                "input '{}' of shape {:?} is too large",
                input.name, input.shape
            ))
        })?;
    let mut elements = 0u64;
    let mut pending = vec![&input.data];
    // Depth-first, last child pushed first, so elements come out row-major.
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items.iter().rev()),
            scalar => {
                elements += 1;
                if elements > count {
                    break;
                }
                push_json_element(element_type, scalar, &mut bytes)
                    .map_err(|e| Error::invalid_argument(format!("input '{}': {}", input.name, e.message())))?;
            }
        }
    }
    if elements != count {
        return Err(Error::invalid_argument(format!(
            "input '{}' of shape {:?} needs {count} elements but has {}",
            input.name,
            input.shape,
            if elements > count {
                "more".to_string()
            } else {
                elements.to_string()
            }
        )));
    }
    Ok(InputTensor {
        name: input.name,
        datatype: input.datatype,
        shape: input.shape,
        bytes,
    })
}

/// The JSON form of `outputs`.
///
/// # Errors
/// An output whose element type the protocol cannot carry.
pub fn encode_outputs(outputs: Vec<OutputTensor>) -> Result<Vec<ResponseOutput>> {
    outputs
        .into_iter()
        .map(|output| {
            Ok(ResponseOutput {
                data: json_elements(output.element_type, &output.bytes)?,
                datatype: output.datatype(),
                name: output.name,
                shape: output.shape,
            })
        })
        .collect()
}
