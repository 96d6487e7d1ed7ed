//! An inference request's input tensors, decoded from its JSON, from the binary tensor data after
//! it or from registered shared memory, and its outputs encoded back the same ways (or as their
//! classes): the conversion between the Open Inference Protocol's messages ([`crate::protocol`])
//! and the server's tensors.

use crate::datatype::push_json_element;
use crate::json_data::JsonData;
use crate::json_numbers::read_array;
use crate::model::{InputTensor, Model, OutputTensor};
use crate::protocol::{
    InputData, RequestInput, RequestOutput, ResponseOutput, SharedMemoryPlace, TensorParameters, WireOutput,
};
use crate::shared_memory::SharedMemory;
use halo_hal::buffer_view_text::checked_element_count;
use halo_hal::{ElementType, Error, Result};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
