//! The Open Inference Protocol's JSON messages (KServe v2 REST), and their conversion to and from
//! the server's tensors.

use crate::classification;
use crate::data_arrays::lift_data_arrays;
use crate::datatype::{push_json_element, JsonElements};
use crate::json_data::JsonData;
use crate::json_numbers::read_array;
use crate::model::{InputTensor, Model, OutputTensor, TensorSpec};
use crate::shared_memory::SharedMemory;
use crate::statistics::Counted;
use halo_hal::buffer_view_text::checked_element_count;
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
    fn shared_memory(&self, tensor: &str) -> Result<Option<SharedMemoryPlace>> {
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
    fn is_empty(&self) -> bool {
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

/// Decodes a request's inputs for `model`: JSON elements as the model's declared type, binary
/// ones taken in order from `binary`, the data after the JSON, and those in shared memory
/// read from their registered region.
///
/// # Errors
/// `InvalidArgument` naming the input: an unknown name, data that is not numbers, a number of
/// elements that does not match the shape, binary sizes that do not add up to `binary`, a
/// shared memory range that is not registered.
pub fn decode_inputs(
    model: &Model,
    inputs: Vec<RequestInput<'_>>,
    mut binary: &[u8],
    shared: &SharedMemory,
) -> Result<Vec<InputTensor>> {
    let tensors = inputs
        .into_iter()
        .map(|input| {
            let spec = model.input_spec(&input.name)?;
            if let Some(place) = input.parameters.shared_memory(&input.name)? {
                if input.data.is_some() || input.parameters.binary_data_size.is_some() {
                    return Err(Error::invalid_argument(format!(
                        "input '{}' is in shared memory and also has data",
                        input.name
                    )));
                }
                let bytes = shared.read(&place.region, place.offset, place.byte_size, &input.name)?;
                return Ok(InputTensor {
                    name: input.name,
                    datatype: input.datatype,
                    shape: input.shape,
                    bytes,
                });
            }
            match (input.parameters.binary_data_size, &input.data) {
                (Some(size), None) => {
                    let (bytes, rest) = usize::try_from(size)
                        .ok()
                        .and_then(|size| binary.split_at_checked(size))
                        .ok_or_else(|| {
                            Error::invalid_argument(format!(
                                "input '{}' has binary_data_size {size} but only {} bytes of binary data remain",
                                input.name,
                                binary.len()
                            ))
                        })?;
                    binary = rest;
                    binary_input(input, bytes)
                }
                (None, Some(_)) => json_input(spec.element_type, input),
                (Some(_), Some(_)) => Err(Error::invalid_argument(format!(
                    "input '{}' has both data and binary_data_size",
                    input.name
                ))),
                (None, None) => Err(Error::invalid_argument(format!(
                    "input '{}' has neither data nor binary_data_size",
                    input.name
                ))),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    if !binary.is_empty() {
        return Err(Error::invalid_argument(format!(
            "{} bytes of binary data follow the inputs' binary_data_size",
            binary.len()
        )));
    }
    Ok(tensors)
}

fn binary_input(input: RequestInput<'_>, bytes: &[u8]) -> Result<InputTensor> {
    let mut owned = Vec::new();
    owned
        .try_reserve_exact(bytes.len())
        .map_err(|_| Error::resource_exhausted(format!("input '{}' is too large", input.name)))?;
    owned.extend_from_slice(bytes);
    Ok(InputTensor {
        name: input.name,
        datatype: input.datatype,
        shape: input.shape,
        bytes: owned,
    })
}

fn json_input(element_type: ElementType, mut input: RequestInput<'_>) -> Result<InputTensor> {
    let data = input.data.take();
    let bytes = json_bytes(element_type, &input, data)?;
    Ok(InputTensor {
        name: input.name,
        datatype: input.datatype,
        shape: input.shape,
        bytes,
    })
}

/// `input`'s JSON `data` as element bytes: read straight from the text where the fast reader
/// takes it, else element by element, naming what is wrong.
fn json_bytes(element_type: ElementType, input: &RequestInput<'_>, data: Option<InputData<'_>>) -> Result<Vec<u8>> {
    let count = checked_element_count(&input.shape).ok_or_else(|| {
        Error::invalid_argument(format!(
            "input '{}' of shape {:?} has more elements than a tensor can hold",
            input.name, input.shape
        ))
    })?;
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
    let values = match data {
        Some(InputData::Text(text)) => {
            if read_array(text, element_type, count, &mut bytes) == Some(count) {
                return Ok(bytes);
            }
            // Whatever the fast reader refused, the general one names.
            bytes.clear();
            serde_json::from_slice(text).map_err(|e| {
                Error::invalid_argument(format!("input '{}': its data is not valid JSON: {e}", input.name))
            })?
        }
        Some(InputData::Values(values)) => values,
        None => JsonData::default(),
    };
    let scalars = &values.0[..];
    if scalars.len() as u64 != count {
        return Err(Error::invalid_argument(format!(
            "input '{}' of shape {:?} needs {count} elements but has {}",
            input.name,
            input.shape,
            if scalars.len() as u64 > count {
                "more".to_string()
            } else {
                scalars.len().to_string()
            }
        )));
    }
    for scalar in scalars {
        push_json_element(element_type, scalar, &mut bytes)
            .map_err(|e| Error::invalid_argument(format!("input '{}': {}", input.name, e.message())))?;
    }
    Ok(bytes)
}

/// The outputs a request asks for by name, in its order, each with what the request says of it;
/// every output, in the model's order, with `default` when it names none.
///
/// # Errors
/// `InvalidArgument` for a name the model has no output of, or a name asked twice.
pub fn select_outputs<T: Clone>(
    outputs: Vec<OutputTensor>,
    wanted: Option<Vec<(String, T)>>,
    default: T,
) -> Result<Vec<(OutputTensor, T)>> {
    let Some(wanted) = wanted else {
        return Ok(outputs.into_iter().map(|o| (o, default.clone())).collect());
    };
    let mut outputs: Vec<Option<OutputTensor>> = outputs.into_iter().map(Some).collect();
    wanted
        .into_iter()
        .map(|(name, choice)| {
            let output = outputs
                .iter_mut()
                .find(|o| o.as_ref().is_some_and(|o| o.name == name))
                .and_then(Option::take)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "the request asks for output '{name}', which the model does not have or which is asked twice"
                    ))
                })?;
            Ok((output, choice))
        })
        .collect()
}

/// The outputs a response carries, and their binary data after the JSON.
pub struct EncodedOutputs {
    /// Each output's JSON part.
    pub outputs: Vec<ResponseOutput>,
    /// The raw bytes of the binary outputs, in order; `None` when every output is JSON.
    pub binary: Option<Vec<u8>>,
}

/// How one output goes back.
#[derive(Debug, Clone)]
enum OutputForm {
    Json,
    Binary,
    SharedMemory(SharedMemoryPlace),
}

/// Encodes `outputs` as `request` asks: the ones it names (all when it names none), each itself
/// or its classes, as JSON, per the binary data extension as raw bytes after the JSON, or
/// written into a registered shared memory region.
///
/// # Errors
/// `InvalidArgument` for a requested output the model does not have, a shared memory range
/// that is not registered or too small, or classes of a `BOOL` output; an output whose element
/// type the protocol cannot carry.
pub fn encode_outputs(
    outputs: Vec<OutputTensor>,
    wanted: Option<Vec<RequestOutput>>,
    binary_by_default: bool,
    shared: &SharedMemory,
) -> Result<EncodedOutputs> {
    let default = if binary_by_default {
        OutputForm::Binary
    } else {
        OutputForm::Json
    };
    let wanted = wanted
        .map(|wanted| {
            wanted
                .into_iter()
                .map(|w| {
                    let form = match w.parameters.shared_memory(&w.name)? {
                        Some(place) => OutputForm::SharedMemory(place),
                        None if w.parameters.binary_data.unwrap_or(binary_by_default) => OutputForm::Binary,
                        None => OutputForm::Json,
                    };
                    Ok((w.name, (form, w.parameters.classification)))
                })
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let chosen = select_outputs(outputs, wanted, (default, None))?;
    let mut binary: Option<Vec<u8>> = None;
    let outputs = chosen
        .into_iter()
        .map(|(output, (form, classes))| {
            let WireOutput {
                name,
                shape,
                datatype,
                elements,
            } = WireOutput::of(output, classes)?;
            let (data, parameters) = match form {
                OutputForm::Binary => {
                    let bytes = elements.into_bytes();
                    let size = bytes.len() as u64;
                    binary.get_or_insert_with(Vec::new).extend_from_slice(&bytes);
                    let parameters = TensorParameters {
                        binary_data_size: Some(size),
                        ..TensorParameters::default()
                    };
                    (None, parameters)
                }
                OutputForm::SharedMemory(place) => {
                    let bytes = elements.into_bytes();
                    let size = bytes.len() as u64;
                    shared.write(&place.region, place.offset, place.byte_size, &bytes, &name)?;
                    let parameters = TensorParameters {
                        shared_memory_region: Some(place.region),
                        shared_memory_byte_size: Some(size),
                        shared_memory_offset: (place.offset != 0).then_some(place.offset),
                        ..TensorParameters::default()
                    };
                    (None, parameters)
                }
                OutputForm::Json => (Some(elements.into_json()?), TensorParameters::default()),
            };
            Ok(ResponseOutput {
                data,
                parameters,
                datatype,
                name,
                shape,
            })
        })
        .collect::<Result<_>>()?;
    Ok(EncodedOutputs { outputs, binary })
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

/// Triton's datatypes as its model configuration spells them, with their enum numbers.
const CONFIG_DATATYPES: [(&str, i32); 14] = [
    ("BOOL", 1),
    ("UINT8", 2),
    ("UINT16", 3),
    ("UINT32", 4),
    ("UINT64", 5),
    ("INT8", 6),
    ("INT16", 7),
    ("INT32", 8),
    ("INT64", 9),
    ("FP16", 10),
    ("FP32", 11),
    ("FP64", 12),
    ("BYTES", 13),
    ("BF16", 14),
];

/// The number of Triton's `DataType` enum for a protocol datatype (`FP32` is `TYPE_FP32`, 11);
/// 0 (`TYPE_INVALID`) for none.
pub fn config_datatype_number(datatype: &str) -> i32 {
    CONFIG_DATATYPES
        .iter()
        .find(|(name, _)| *name == datatype)
        .map_or(0, |(_, number)| *number)
}

/// Triton's spelling of a protocol datatype in a model configuration (`TYPE_FP32`; `BYTES` is
/// `TYPE_STRING`).
pub fn config_datatype_name(datatype: &str) -> String {
    match datatype {
        "BYTES" => "TYPE_STRING".into(),
        other => format!("TYPE_{other}"),
    }
}

/// An input or output in a model configuration.
#[derive(Debug, Serialize)]
pub struct ConfigTensor {
    /// Its name.
    pub name: String,
    /// Its datatype as Triton's configuration spells it (`TYPE_FP32`).
    pub data_type: String,
    /// Its dimensions, `-1` where dynamic.
    pub dims: Vec<i64>,
    /// Its datatype as the protocol spells it (`FP32`), for the gRPC enum.
    #[serde(skip)]
    pub datatype: &'static str,
    /// For an output with class labels: the name of their file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_filename: Option<String>,
}

/// `GET /v2/models/{name}/config`: the model's configuration as Triton's model configuration
/// extension describes one. The dimensions are the function's own, the batch dimension (`-1`)
/// included where the model batches.
#[derive(Debug, Serialize)]
pub struct ModelConfiguration {
    /// The model's name.
    pub name: String,
    /// The runtime that serves it.
    pub platform: &'static str,
    /// The backend that serves it.
    pub backend: &'static str,
    /// Most rows a call takes from concurrent requests; 0: requests are not batched together.
    pub max_batch_size: i32,
    /// Present when requests are batched (Triton's dynamic batcher settings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_batching: Option<DynamicBatching>,
    /// Its inputs.
    pub input: Vec<ConfigTensor>,
    /// Its outputs.
    pub output: Vec<ConfigTensor>,
}

impl ModelConfiguration {
    /// The configuration of `model`.
    pub fn of(model: &Model) -> Self {
        let tensors = |specs: &[TensorSpec]| {
            specs
                .iter()
                .map(|spec| ConfigTensor {
                    name: spec.name.clone(),
                    data_type: config_datatype_name(spec.datatype),
                    dims: spec.shape.clone(),
                    datatype: spec.datatype,
                    label_filename: (model.config().output_labels.get(&spec.name))
                        .and_then(|path| path.file_name())
                        .map(|name| name.to_string_lossy().into_owned()),
                })
                .collect()
        };
        ModelConfiguration {
            name: model.config().name.clone(),
            platform: PLATFORM,
            backend: "halo",
            max_batch_size: i32::try_from(model.config().max_batch_size).unwrap_or(i32::MAX),
            dynamic_batching: (model.config().max_batch_size > 0).then_some(DynamicBatching {
                preferred_batch_size: (model.batch_sizes().iter())
                    .map(|&size| i32::try_from(size).unwrap_or(i32::MAX))
                    .collect(),
                max_queue_delay_microseconds: u64::try_from(model.config().max_queue_delay.as_micros())
                    .unwrap_or(u64::MAX),
            }),
            input: tensors(model.inputs()),
            output: tensors(model.outputs()),
        }
    }
}

/// Triton's `ModelDynamicBatching`: how requests are batched.
#[derive(Debug, Serialize)]
pub struct DynamicBatching {
    /// Batch sizes a call prefers; empty: any.
    pub preferred_batch_size: Vec<i32>,
    /// How long a call waits for a fuller batch; 0: it takes what is waiting.
    pub max_queue_delay_microseconds: u64,
}

/// The platform name halo's models report.
pub const PLATFORM: &str = "halo_iree";

/// One model's entry in `GET /v2/models[/{name}]/stats` (Triton's statistics extension).
#[derive(Debug, Serialize)]
pub struct ModelStatisticsEntry {
    /// The model's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Milliseconds since the Unix epoch of its last request; 0 for none.
    pub last_inference: u64,
    /// Successful requests.
    pub inference_count: u64,
    /// Successful calls.
    pub execution_count: u64,
    /// Counts and cumulative nanoseconds by stage.
    pub inference_stats: InferenceStats,
    /// Successful calls per batch size (1 for every call of a model that does not batch).
    pub batch_stats: Vec<BatchStatisticsEntry>,
}

/// Triton's `InferStatistics`: counts and cumulative nanoseconds by stage.
#[derive(Debug, Serialize)]
pub struct InferenceStats {
    /// Successful requests.
    pub success: Counted,
    /// Failed requests.
    pub fail: Counted,
    /// Waiting for a turn.
    pub queue: Counted,
    /// Preparing inputs: part of `compute_infer` in halo.
    pub compute_input: Counted,
    /// Computing, with the input and output copies.
    pub compute_infer: Counted,
    /// Reading outputs: part of `compute_infer` in halo.
    pub compute_output: Counted,
    /// Response cache hits: halo has no response cache.
    pub cache_hit: Counted,
    /// Response cache misses.
    pub cache_miss: Counted,
}

/// Triton's `InferBatchStatistics`: calls of one batch size.
#[derive(Debug, Serialize)]
pub struct BatchStatisticsEntry {
    /// Rows per call.
    pub batch_size: u64,
    /// Preparing inputs: part of `compute_infer` in halo.
    pub compute_input: Counted,
    /// The calls and their time.
    pub compute_infer: Counted,
    /// Reading outputs: part of `compute_infer` in halo.
    pub compute_output: Counted,
}

impl ModelStatisticsEntry {
    /// The statistics of `model` now.
    pub fn of(model: &Model) -> Self {
        let now = model.statistics();
        ModelStatisticsEntry {
            name: model.config().name.clone(),
            version: model.config().version.clone(),
            last_inference: now.last_inference,
            inference_count: now.inference_count,
            execution_count: now.execution_count,
            inference_stats: InferenceStats {
                success: now.success,
                fail: now.fail,
                queue: now.queue,
                compute_input: Counted::default(),
                compute_infer: now.compute_infer,
                compute_output: Counted::default(),
                cache_hit: Counted::default(),
                cache_miss: Counted::default(),
            },
            batch_stats: (now.batch_stats.iter())
                .map(|batch| BatchStatisticsEntry {
                    batch_size: batch.batch_size,
                    compute_input: Counted::default(),
                    compute_infer: batch.compute_infer,
                    compute_output: Counted::default(),
                })
                .collect(),
        }
    }
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

    #[test]
    fn an_output_without_a_protocol_datatype_is_refused_by_name_in_either_form() {
        for binary in [false, true] {
            let output = tensor("scores", "f8E5M2", vec![2], vec![0, 0]);
            let error = encode_outputs(vec![output], None, binary, &SharedMemory::default())
                .err()
                .expect("refused");
            assert_eq!(error.code(), halo_hal::StatusCode::Unimplemented);
            assert!(error.to_string().contains("output 'scores'"), "{error}");
        }
    }

    /// An output without labels.
    fn tensor(name: &str, element_type: &str, shape: Vec<u64>, bytes: Vec<u8>) -> OutputTensor {
        OutputTensor {
            name: name.into(),
            shape,
            element_type: ElementType::parse(element_type).expect("an element type"),
            bytes,
            labels: None,
        }
    }

    fn scores() -> OutputTensor {
        let bytes = [0.25f32, 0.5, 0.125].iter().flat_map(|v| v.to_le_bytes()).collect();
        tensor("scores", "f32", vec![1, 3], bytes)
    }

    fn wanted(parameters: &str) -> Vec<RequestOutput> {
        let text = format!(r#"[{{"name": "scores", "parameters": {parameters}}}]"#);
        serde_json::from_str(&text).expect("requested outputs")
    }

    #[test]
    fn classes_go_back_as_bytes_in_either_form() {
        let shared = SharedMemory::default();
        let json =
            encode_outputs(vec![scores()], Some(wanted(r#"{"classification": 2}"#)), false, &shared).expect("encoded");
        assert!(json.binary.is_none());
        assert_eq!(
            serde_json::to_value(&json.outputs[0]).expect("json"),
            serde_json::json!({"name": "scores", "shape": [2], "datatype": "BYTES",
                "data": ["0.500000:1", "0.250000:0"]})
        );
        let binary = r#"{"classification": 1, "binary_data": true}"#;
        let raw = encode_outputs(vec![scores()], Some(wanted(binary)), false, &shared).expect("encoded");
        assert_eq!(raw.binary.as_deref(), Some(&b"\x0a\0\0\x000.500000:1"[..]));
        assert_eq!(raw.outputs[0].parameters.binary_data_size, Some(14));
        // 0 classes asks for the output itself.
        let itself =
            encode_outputs(vec![scores()], Some(wanted(r#"{"classification": 0}"#)), false, &shared).expect("encoded");
        assert_eq!(itself.outputs[0].datatype, "FP32");
    }

    #[test]
    fn classes_of_booleans_are_refused_naming_the_output() {
        let flags = tensor("flags", "i1", vec![2], vec![1, 0]);
        let wanted =
            serde_json::from_str(r#"[{"name": "flags", "parameters": {"classification": 1}}]"#).expect("outputs");
        let error = encode_outputs(vec![flags], Some(wanted), false, &SharedMemory::default())
            .err()
            .expect("refused");
        assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument);
        assert!(error.to_string().contains("output 'flags' is BOOL"), "{error}");
    }

    #[test]
    fn datatypes_take_tritons_configuration_names_and_numbers() {
        assert_eq!(config_datatype_name("FP32"), "TYPE_FP32");
        assert_eq!(config_datatype_name("BYTES"), "TYPE_STRING");
        assert_eq!(config_datatype_number("FP32"), 11);
        assert_eq!(config_datatype_number("BOOL"), 1);
        assert_eq!(config_datatype_number("BF16"), 14);
        assert_eq!(config_datatype_number("COMPLEX"), 0);
    }
}
