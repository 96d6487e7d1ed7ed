//! The Open Inference Protocol's JSON messages (KServe v2 REST). Their tensors are decoded and
//! encoded by [`crate::inference_tensors`]; Triton's model configuration and statistics
//! extensions are [`crate::model_configuration`] and [`crate::statistics`].

use crate::classification;
use crate::data_arrays::lift_data_arrays;
use crate::datatype::JsonElements;
use crate::json_data::JsonData;
use crate::model::{Model, OutputTensor, TensorSpec};
use crate::model_configuration::PLATFORM;
use halo_hal::{ElementType, Error, Result};
use serde::{Deserialize, Serialize};

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

impl ServerMetadata {
    /// This server's metadata and the extensions it speaks.
    pub fn of_halo() -> Self {
        ServerMetadata {
            name: "halo",
            version: env!("CARGO_PKG_VERSION"),
            extensions: vec![
                "binary_tensor_data",
                "classification",
                "model_repository",
                "model_configuration",
                "statistics",
            ],
        }
    }
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
            platform: PLATFORM,
            inputs: model.inputs().iter().map(TensorMetadata::from).collect(),
            outputs: model.outputs().iter().map(TensorMetadata::from).collect(),
        }
    }
}

/// One input of an inference request; its `data` may be text of the request's body.
#[derive(Debug, Deserialize)]
pub struct RequestInput<'a> {
    /// The input's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its datatype.
    pub datatype: String,
    /// Its elements, row-major, flat or nested; absent when they follow the JSON as binary.
    #[serde(default)]
    pub data: Option<InputData<'a>>,
    /// `binary_data_size`: how many bytes of the binary tail are this input's.
    #[serde(default)]
    pub parameters: TensorParameters,
}

/// An input's JSON `data`.
#[derive(Debug)]
pub enum InputData<'a> {
    /// Read by serde, element by element.
    Values(JsonData),
    /// An array's text, as [`InferRequest::parse`] took it out of the request, still to read.
    Text(&'a [u8]),
}

impl<'de> Deserialize<'de> for InputData<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        JsonData::deserialize(deserializer).map(InputData::Values)
    }
}

/// The per-tensor parameters of the binary tensor data and shared memory extensions.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct TensorParameters {
    /// The byte length of the tensor's raw data after the JSON header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_data_size: Option<u64>,
    /// For a requested output: whether to send it as raw bytes.
    #[serde(default, skip_serializing)]
    pub binary_data: Option<bool>,
    /// The registered shared memory region holding the tensor (or to write it to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_region: Option<String>,
    /// Its byte length there (for an output: the room it has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_byte_size: Option<u64>,
    /// Where it starts in the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_offset: Option<u64>,
    /// For a requested output: send its this many largest elements as classes instead
    /// (the classification extension; 0 or absent: the output itself).
    #[serde(default, skip_serializing)]
    pub classification: Option<u64>,
}

/// Where in shared memory a tensor is, or goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedMemoryPlace {
    /// The registered region.
    pub region: String,
    /// The tensor's byte length (an output's room).
    pub byte_size: u64,
    /// Its start in the region.
    pub offset: u64,
}

impl SharedMemoryPlace {
    /// The place the shared memory parameters of `tensor` name, if any.
    ///
    /// # Errors
    /// `InvalidArgument` for a size or offset without a region, or a region without a size.
    pub fn of(
        region: Option<String>,
        byte_size: Option<u64>,
        offset: Option<u64>,
        tensor: &str,
    ) -> Result<Option<SharedMemoryPlace>> {
        match (region, byte_size) {
            (Some(region), Some(byte_size)) => Ok(Some(SharedMemoryPlace {
                region,
                byte_size,
                offset: offset.unwrap_or(0),
            })),
            (None, None) if offset.is_none() => Ok(None),
            (Some(_), None) => Err(Error::invalid_argument(format!(
                "'{tensor}' names a shared memory region but no shared_memory_byte_size"
            ))),
            (None, _) => Err(Error::invalid_argument(format!(
                "'{tensor}' has shared memory parameters but no shared_memory_region"
            ))),
        }
    }
}

impl TensorParameters {
    pub(crate) fn shared_memory(&self, tensor: &str) -> Result<Option<SharedMemoryPlace>> {
        SharedMemoryPlace::of(
            self.shared_memory_region.clone(),
            self.shared_memory_byte_size,
            self.shared_memory_offset,
            tensor,
        )
    }
}

/// A request's choice of output.
#[derive(Debug, Deserialize)]
pub struct RequestOutput {
    /// Which output.
    pub name: String,
    /// `binary_data`: whether it comes back as raw bytes.
    #[serde(default)]
    pub parameters: TensorParameters,
}

/// Request-wide parameters.
#[derive(Debug, Default, Deserialize)]
pub struct RequestParameters {
    /// Whether outputs not named in `outputs` come back as raw bytes.
    #[serde(default)]
    pub binary_data_output: bool,
    /// The request's own time limit in microseconds, as Triton's clients send it.
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `POST /v2/models/{name}/infer`: its JSON part.
#[derive(Debug, Deserialize)]
pub struct InferRequest<'a> {
    /// An identifier the response repeats.
    #[serde(default)]
    pub id: Option<String>,
    /// Request-wide parameters.
    #[serde(default)]
    pub parameters: RequestParameters,
    /// Its inputs.
    pub inputs: Vec<RequestInput<'a>>,
    /// The outputs wanted, in order; all of them, as JSON, when absent.
    #[serde(default)]
    pub outputs: Option<Vec<RequestOutput>>,
}

impl InferRequest<'_> {
    /// Parses a request body whose first `json_length` bytes are JSON (the whole body when
    /// `None`), returning the request and the binary tensor data after it.
    ///
    /// # Errors
    /// `InvalidArgument` for a length past the body or JSON that is not a request.
    pub fn parse(body: &[u8], json_length: Option<usize>) -> Result<(InferRequest<'_>, &[u8])> {
        let split = json_length.unwrap_or(body.len());
        let (json, binary) = body.split_at_checked(split).ok_or_else(|| {
            Error::invalid_argument(format!(
                "Inference-Header-Content-Length is {split} but the body has {} bytes",
                body.len()
            ))
        })?;
        let lifted = lift_data_arrays(json);
        let mut request: InferRequest = serde_json::from_slice(&lifted.json).map_err(|e| {
            // Positions in the text with the arrays taken out would mislead: name them in the
            // text as sent.
            let e = if lifted.any() {
                serde_json::from_slice::<InferRequest>(json).err().unwrap_or(e)
            } else {
                e
            };
            Error::invalid_argument(format!("the request is not a valid inference request: {e}"))
        })?;
        for (input, array) in request.inputs.iter_mut().zip(lifted.arrays) {
            if let Some(text) = array {
                input.data = Some(InputData::Text(text));
            }
        }
        Ok((request, binary))
    }
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
    /// Its elements, flat and row-major; absent when they follow the JSON as binary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<OutputData>,
    /// `binary_data_size` for a binary output.
    #[serde(skip_serializing_if = "TensorParameters::is_empty")]
    pub parameters: TensorParameters,
}

/// An output's elements in JSON: numbers (booleans for `BOOL`), or class texts.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum OutputData {
    /// The tensor's own elements.
    Numbers(JsonElements),
    /// Its classes, as the classification extension writes them.
    Classes(Vec<String>),
}

/// An output as it goes back: the tensor itself, or, when the request asked for classes, its
/// largest elements as text (the classification extension).
pub struct WireOutput {
    /// Its name.
    pub name: String,
    /// The shape it goes back with.
    pub shape: Vec<u64>,
    /// The datatype it goes back as.
    pub datatype: &'static str,
    /// What it carries.
    pub elements: WireElements,
}

/// What an output carries back.
pub enum WireElements {
    /// The tensor's own elements, their little-endian bytes.
    Tensor(ElementType, Vec<u8>),
    /// Its class texts (`value:index`, or `value:index:label`), largest first.
    Classes(Vec<String>),
}

impl WireOutput {
    /// `output` as the request asks for it: with `classes` set (and not 0), its that many
    /// largest elements.
    ///
    /// # Errors
    /// `InvalidArgument` for classes of an output that has none (`BOOL`); `Unimplemented` for
    /// an element type the protocol has no datatype for.
    pub fn of(output: OutputTensor, classes: Option<u64>) -> Result<WireOutput> {
        let Some(count) = classes.filter(|&count| count > 0) else {
            return Ok(WireOutput {
                datatype: output.datatype()?,
                name: output.name,
                shape: output.shape,
                elements: WireElements::Tensor(output.element_type, output.bytes),
            });
        };
        let texts = classification::top_classes(&output, count)?;
        Ok(WireOutput {
            name: output.name,
            shape: vec![texts.len() as u64],
            datatype: classification::DATATYPE,
            elements: WireElements::Classes(texts),
        })
    }
}

impl WireElements {
    /// The raw contents, as binary data, gRPC and shared memory carry them.
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            WireElements::Tensor(_, bytes) => bytes,
            WireElements::Classes(texts) => classification::bytes_contents(&texts),
        }
    }

    /// The JSON array of the elements.
    ///
    /// # Errors
    /// `Unimplemented` for an element type the protocol has no datatype for.
    pub fn into_json(self) -> Result<OutputData> {
        Ok(match self {
            WireElements::Tensor(element_type, bytes) => OutputData::Numbers(JsonElements::new(element_type, bytes)?),
            WireElements::Classes(texts) => OutputData::Classes(texts),
        })
    }
}

impl TensorParameters {
    pub(crate) fn is_empty(&self) -> bool {
        self.binary_data_size.is_none() && self.shared_memory_region.is_none()
    }
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

/// Refuses the repository extension's load parameters (a configuration or files sent with the
/// request): halo reads a model's configuration from its folder only, and saying so beats
/// loading something other than what the client sent.
///
/// # Errors
/// `InvalidArgument` naming the parameters.
pub fn refuse_load_parameters<'a>(names: impl Iterator<Item = &'a String>) -> Result<()> {
    let mut names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        return Ok(());
    }
    names.sort_unstable();
    Err(Error::invalid_argument(format!(
        "halo takes no load parameters (got {}); a model's settings come from its config.toml",
        names.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_with_its_data_twice_is_refused_whichever_the_reader() {
        for data in [
            r#""data": [1], "data": 5"#,
            r#""data": 5, "data": [1]"#,
            r#""data": [1], "data": [2]"#,
        ] {
            let body = format!(r#"{{"inputs": [{{"name": "x", "shape": [1], "datatype": "FP32", {data}}}]}}"#);
            let error = InferRequest::parse(body.as_bytes(), None).expect_err(&body);
            assert!(error.to_string().contains("duplicate field `data`"), "{error}");
        }
    }

    #[test]
    fn data_arrays_are_handed_on_as_their_text_and_scalars_as_values() {
        let body = br#"{"inputs": [{"name": "a", "shape": [2], "datatype": "FP32", "data": [1, 2]},
            {"name": "b", "shape": [], "datatype": "FP32", "data": 3}]}"#;
        let (request, binary) = InferRequest::parse(body, None).expect("a request");
        assert!(binary.is_empty());
        assert!(matches!(request.inputs[0].data, Some(InputData::Text(b"[1, 2]"))));
        assert!(matches!(&request.inputs[1].data, Some(InputData::Values(values)) if values.0.len() == 1));
    }

    #[test]
    fn load_parameters_are_refused_by_name_and_none_pass() {
        assert!(refuse_load_parameters(std::iter::empty()).is_ok());
        let names = ["file:1/model.vmfb".to_string(), "config".to_string()];
        let error = refuse_load_parameters(names.iter()).unwrap_err();
        assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument);
        assert!(error.message().contains("(got config, file:1/model.vmfb)"), "{error}");
    }
}
