//! Triton's model configuration extension (`GET /v2/models/{name}/config`, gRPC `ModelConfig`):
//! a served model described as Triton describes one, its tensors' datatypes by Triton's names.

use crate::model::{Model, TensorSpec};
use serde::Serialize;

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

#[cfg(test)]
mod tests {
    use super::*;

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
