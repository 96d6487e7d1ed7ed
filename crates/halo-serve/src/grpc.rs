//! The protocol's gRPC service (`inference.GRPCInferenceService`) over the loaded models.

use crate::grpc_codec::client_fault;
use crate::inference_tensors::select_outputs;
use crate::metrics::Protocol;
use crate::model::{InputTensor, Model};
use crate::protocol::{SharedMemoryPlace, WireOutput};
use crate::serving::Serving;
use crate::shared_memory::SharedMemory;
use halo_hal::{Error, Result};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status, Streaming};

/// The messages and server stub generated from `proto/grpc_predict_v2.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod wire {
    include!(concat!(env!("OUT_DIR"), "/inference.rs"));
}

use wire::grpc_inference_service_server::{GrpcInferenceService, GrpcInferenceServiceServer};
use wire::model_infer_request::InferInputTensor;
use wire::model_infer_response::InferOutputTensor;
use wire::model_metadata_response::TensorMetadata;
use wire::*;

/// The gRPC service for `serving`'s models, its messages limited to `max_request_bytes` (once
/// decompressed: clients may compress them with gzip or deflate). Answers go uncompressed, as
/// Triton's do by default: compressing them would cost the server's time on every call.
pub fn service(serving: Arc<Serving>, max_request_bytes: usize) -> GrpcInferenceServiceServer<Inference> {
    GrpcInferenceServiceServer::new(Inference { serving })
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Deflate)
        .max_decoding_message_size(max_request_bytes)
        .max_encoding_message_size(usize::MAX)
}

/// The service's implementation.
pub struct Inference {
    serving: Arc<Serving>,
}

/// halo's status codes are gRPC's, so an error keeps its code, and its message and context
/// become the status message.
fn status(error: Error) -> Status {
    if matches!(
        error.code(),
        halo_hal::StatusCode::Internal | halo_hal::StatusCode::Unknown
    ) {
        tracing::warn!(%error, "request failed");
    }
    let text = error.to_string();
    let message = text.strip_prefix(&format!("{}: ", error.code())).unwrap_or(&text);
    Status::new(tonic::Code::from_i32(error.code() as i32), message)
}

fn version(version: &str) -> Option<&str> {
    (!version.is_empty()).then_some(version)
}

/// Requests of one stream that may be running or holding an answer the client has not read;
/// past them the stream stops reading, so a client that sends without reading holds a bounded
/// amount of the server's memory.
const STREAM_IN_FLIGHT: usize = 16;

impl Inference {
    fn find(&self, name: &str, version_text: &str) -> std::result::Result<Arc<Model>, Status> {
        self.serving.find(name, version(version_text)).map_err(status)
    }
}

#[tonic::async_trait]
impl GrpcInferenceService for Inference {
    async fn server_live(&self, _: Request<ServerLiveRequest>) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(&self, _: Request<ServerReadyRequest>) -> Result<Response<ServerReadyResponse>, Status> {
        Ok(Response::new(ServerReadyResponse {
            ready: self.serving.stalled().is_none(),
        }))
    }

    async fn model_ready(&self, request: Request<ModelReadyRequest>) -> Result<Response<ModelReadyResponse>, Status> {
        let request = request.into_inner();
        let model = self.serving.find(&request.name, version(&request.version));
        let ready = model.is_ok_and(|model| model.stalled().is_none());
        Ok(Response::new(ModelReadyResponse { ready }))
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        let metadata = crate::protocol::ServerMetadata::of_halo();
        Ok(Response::new(ServerMetadataResponse {
            name: metadata.name.into(),
            version: metadata.version.into(),
            extensions: metadata.extensions.into_iter().map(String::from).collect(),
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        let request = request.into_inner();
        let model = self.find(&request.name, &request.version)?;
        let metadata = crate::protocol::ModelMetadata::of(&model);
        let tensors = |tensors: Vec<crate::protocol::TensorMetadata>| {
            tensors
                .into_iter()
                .map(|t| TensorMetadata {
                    name: t.name,
                    datatype: t.datatype.into(),
                    shape: t.shape,
                })
                .collect()
        };
        Ok(Response::new(ModelMetadataResponse {
            name: metadata.name,
            versions: metadata.versions,
            platform: metadata.platform.into(),
            inputs: tensors(metadata.inputs),
            outputs: tensors(metadata.outputs),
        }))
    }

    async fn model_infer(&self, request: Request<ModelInferRequest>) -> Result<Response<ModelInferResponse>, Status> {
        let request = request.into_inner();
        let (name, model_version) = (request.model_name.clone(), request.model_version.clone());
        let answer = self
            .serving
            .infer(&name, version(&model_version), Protocol::Grpc, |model| {
                infer(model, &self.serving, request)
            });
        answer.await.map(Response::new).map_err(status)
    }

    async fn model_config(
        &self,
        request: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        let request = request.into_inner();
        let model = self.find(&request.name, &request.version)?;
        let config = crate::model_configuration::ModelConfiguration::of(&model);
        let number = crate::model_configuration::config_datatype_number;
        Ok(Response::new(ModelConfigResponse {
            config: Some(ModelConfig {
                name: config.name,
                platform: config.platform.into(),
                max_batch_size: config.max_batch_size,
                dynamic_batching: config.dynamic_batching.map(|batching| ModelDynamicBatching {
                    preferred_batch_size: batching.preferred_batch_size,
                    max_queue_delay_microseconds: batching.max_queue_delay_microseconds,
                }),
                input: (config.input.into_iter())
                    .map(|t| ModelInput {
                        data_type: number(t.datatype),
                        name: t.name,
                        dims: t.dims,
                    })
                    .collect(),
                output: (config.output.into_iter())
                    .map(|t| ModelOutput {
                        data_type: number(t.datatype),
                        name: t.name,
                        dims: t.dims,
                        label_filename: t.label_filename.unwrap_or_default(),
                    })
                    .collect(),
                backend: config.backend.into(),
            }),
        }))
    }

    async fn model_statistics(
        &self,
        request: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        let request = request.into_inner();
        let models: Vec<Arc<Model>> = if request.name.is_empty() {
            self.serving.models().values().cloned().collect()
        } else {
            vec![self.find(&request.name, &request.version)?]
        };
        Ok(Response::new(ModelStatisticsResponse {
            model_stats: models.iter().map(|model| statistics(model)).collect(),
        }))
    }

    async fn system_shared_memory_status(
        &self,
        request: Request<SystemSharedMemoryStatusRequest>,
    ) -> Result<Response<SystemSharedMemoryStatusResponse>, Status> {
        let name = request.into_inner().name;
        let regions = self
            .serving
            .shared_memory
            .status((!name.is_empty()).then_some(name.as_str()))
            .map_err(status)?;
        Ok(Response::new(SystemSharedMemoryStatusResponse {
            regions: regions
                .into_iter()
                .map(|region| {
                    let entry = system_shared_memory_status_response::RegionStatus {
                        name: region.name.clone(),
                        key: region.key,
                        offset: region.offset,
                        byte_size: region.byte_size,
                    };
                    (region.name, entry)
                })
                .collect(),
        }))
    }

    async fn system_shared_memory_register(
        &self,
        request: Request<SystemSharedMemoryRegisterRequest>,
    ) -> Result<Response<SystemSharedMemoryRegisterResponse>, Status> {
        let request = request.into_inner();
        self.serving
            .shared_memory
            .register(&request.name, &request.key, request.offset, request.byte_size)
            .map_err(status)?;
        Ok(Response::new(SystemSharedMemoryRegisterResponse {}))
    }

    async fn system_shared_memory_unregister(
        &self,
        request: Request<SystemSharedMemoryUnregisterRequest>,
    ) -> Result<Response<SystemSharedMemoryUnregisterResponse>, Status> {
        let name = request.into_inner().name;
        self.serving
            .shared_memory
            .unregister((!name.is_empty()).then_some(name.as_str()))
            .map_err(status)?;
        Ok(Response::new(SystemSharedMemoryUnregisterResponse {}))
    }

    type ModelStreamInferStream =
        Pin<Box<dyn tokio_stream::Stream<Item = Result<ModelStreamInferResponse, Status>> + Send>>;

    /// Each request on the stream runs as soon as it arrives (up to `STREAM_IN_FLIGHT` at a
    /// time), under the model's admission like any other, and its answer goes back when it is
    /// ready; a failed request is answered on the stream with its message, and the stream goes on.
    async fn model_stream_infer(
        &self,
        request: Request<Streaming<ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        let mut incoming = request.into_inner();
        let serving = self.serving.clone();
        let (answers, receiver) = tokio::sync::mpsc::channel(STREAM_IN_FLIGHT);
        let in_flight = Arc::new(tokio::sync::Semaphore::new(STREAM_IN_FLIGHT));
        tokio::spawn(async move {
            loop {
                let Ok(turn) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                match incoming.message().await {
                    Ok(Some(request)) => {
                        let (serving, answers) = (serving.clone(), answers.clone());
                        tokio::spawn(async move {
                            // A client that has gone away needs no answer.
                            let _ = answers.send(Ok(streamed(&serving, request).await)).await;
                            drop(turn);
                        });
                    }
                    Ok(None) => break,
                    Err(failure) => {
                        let _ = answers.send(Err(client_fault(&failure).unwrap_or(failure))).await;
                        break;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn repository_index(
        &self,
        request: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        let ready_only = request.into_inner().ready;
        let models = self
            .serving
            .index()
            .map_err(status)?
            .into_iter()
            .filter(|entry| entry.ready() || !ready_only)
            .map(|entry| repository_index_response::ModelIndex {
                state: if entry.ready() { "READY" } else { "UNAVAILABLE" }.into(),
                version: entry.version.unwrap_or_default(),
                name: entry.name,
                reason: String::new(),
            })
            .collect();
        Ok(Response::new(RepositoryIndexResponse { models }))
    }

    async fn repository_model_load(
        &self,
        request: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        let request = request.into_inner();
        crate::protocol::refuse_load_parameters(request.parameters.keys()).map_err(status)?;
        self.serving.load(&request.model_name).await.map_err(status)?;
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        let request = request.into_inner();
        self.serving.unload(&request.model_name).map_err(status)?;
        Ok(Response::new(RepositoryModelUnloadResponse {}))
    }
}

/// Triton's statistics message for `model`: the HTTP answer's entry in the gRPC message.
fn statistics(model: &Model) -> ModelStatistics {
    let entry = crate::statistics::ModelStatisticsEntry::of(model);
    let stats = entry.inference_stats;
    let duration = |counted: crate::statistics::Counted| {
        Some(StatisticDuration {
            count: counted.count,
            ns: counted.ns,
        })
    };
    ModelStatistics {
        name: entry.name,
        version: entry.version,
        last_inference: entry.last_inference,
        inference_count: entry.inference_count,
        execution_count: entry.execution_count,
        inference_stats: Some(InferStatistics {
            success: duration(stats.success),
            fail: duration(stats.fail),
            queue: duration(stats.queue),
            compute_input: duration(stats.compute_input),
            compute_infer: duration(stats.compute_infer),
            compute_output: duration(stats.compute_output),
            cache_hit: duration(stats.cache_hit),
            cache_miss: duration(stats.cache_miss),
        }),
        batch_stats: (entry.batch_stats.into_iter())
            .map(|batch| InferBatchStatistics {
                batch_size: batch.batch_size,
                compute_input: duration(batch.compute_input),
                compute_infer: duration(batch.compute_infer),
                compute_output: duration(batch.compute_output),
            })
            .collect(),
    }
}

/// The answer on a stream to one request: its response, or its error's message with the
/// request's id, so that a client can tell which request failed.
async fn streamed(serving: &Serving, request: ModelInferRequest) -> ModelStreamInferResponse {
    let (name, model_version, id) = (
        request.model_name.clone(),
        request.model_version.clone(),
        request.id.clone(),
    );
    let answer = serving.infer(&name, version(&model_version), Protocol::Grpc, |model| {
        infer(model, serving, request)
    });
    match answer.await {
        Ok(response) => ModelStreamInferResponse {
            error_message: String::new(),
            infer_response: Some(response),
        },
        Err(error) => ModelStreamInferResponse {
            error_message: status(error).message().to_string(),
            infer_response: Some(ModelInferResponse {
                model_name: name,
                model_version,
                id,
                ..Default::default()
            }),
        },
    }
}

async fn infer(model: Arc<Model>, serving: &Serving, request: ModelInferRequest) -> Result<ModelInferResponse> {
    let shared = &serving.shared_memory;
    let inputs = decode_inputs(&model, request.inputs, request.raw_input_contents, shared)?;
    let deadline = model.deadline(requested_timeout(&request.parameters));
    let outputs = model.run(inputs, &serving.metrics, deadline).await?;
    let wanted = (!request.outputs.is_empty())
        .then(|| {
            request
                .outputs
                .into_iter()
                .map(|o| {
                    let place = shared_memory_place(&o.parameters, &o.name)?;
                    let classes = class_count(&o.parameters, &o.name)?;
                    Ok((o.name, (place, classes)))
                })
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let chosen = select_outputs(outputs, wanted, (None, None))?;
    let (outputs, raw): (Vec<_>, Vec<_>) = chosen
        .into_iter()
        .map(|(output, (place, classes))| encode_output(WireOutput::of(output, classes)?, place, shared))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    Ok(ModelInferResponse {
        model_name: model.config().name.clone(),
        model_version: model.config().version.clone(),
        id: request.id,
        parameters: Default::default(),
        outputs,
        raw_output_contents: raw,
    })
}

/// The request's `timeout` parameter, in microseconds as Triton's clients send it.
fn requested_timeout(parameters: &std::collections::HashMap<String, InferParameter>) -> Option<Duration> {
    unsigned_parameter(parameters, "timeout")?
        .ok()
        .map(Duration::from_micros)
}

/// The parameter `key` as an unsigned integer (an `int64_param` of 0 or more, or any
/// `uint64_param`): `None` when it is absent, the value it holds instead when it is not one.
fn unsigned_parameter<'a>(
    parameters: &'a std::collections::HashMap<String, InferParameter>,
    key: &str,
) -> Option<std::result::Result<u64, &'a wire::infer_parameter::ParameterChoice>> {
    use wire::infer_parameter::ParameterChoice;
    Some(match parameters.get(key)?.parameter_choice.as_ref()? {
        ParameterChoice::Uint64Param(value) => Ok(*value),
        ParameterChoice::Int64Param(value) if *value >= 0 => Ok(*value as u64),
        other => Err(other),
    })
}

/// The classification extension's `classification` parameter of a requested output: how many
/// classes to send instead of the output.
fn class_count(parameters: &std::collections::HashMap<String, InferParameter>, output: &str) -> Result<Option<u64>> {
    unsigned_parameter(parameters, "classification")
        .transpose()
        .map_err(|other| {
            Error::invalid_argument(format!(
                "output '{output}': classification must be a count of classes, not {other:?}"
            ))
        })
}

/// The shared memory parameters of a tensor, if it names a region.
fn shared_memory_place(
    parameters: &std::collections::HashMap<String, InferParameter>,
    tensor: &str,
) -> Result<Option<SharedMemoryPlace>> {
    use wire::infer_parameter::ParameterChoice;
    let choice = |key: &str| parameters.get(key).and_then(|p| p.parameter_choice.clone());
    let number = |key: &str| unsigned_parameter(parameters, key).and_then(std::result::Result::ok);
    let region = match choice("shared_memory_region") {
        Some(ParameterChoice::StringParam(region)) => Some(region),
        _ => None,
    };
    SharedMemoryPlace::of(
        region,
        number("shared_memory_byte_size"),
        number("shared_memory_offset"),
        tensor,
    )
}

/// An output travels as raw bytes, as Triton sends them and its clients read them, or is written
/// into the shared memory region the request names (its raw entry then empty, so the others keep
/// their places).
fn encode_output(
    output: WireOutput,
    place: Option<SharedMemoryPlace>,
    shared: &SharedMemory,
) -> Result<(InferOutputTensor, Vec<u8>)> {
    use wire::infer_parameter::ParameterChoice;
    let mut tensor = InferOutputTensor {
        datatype: output.datatype.into(),
        name: output.name,
        shape: output.shape.iter().map(|&d| d as i64).collect(),
        parameters: Default::default(),
        contents: None,
    };
    let bytes = output.elements.into_bytes();
    let Some(place) = place else {
        return Ok((tensor, bytes));
    };
    shared.write(&place.region, place.offset, place.byte_size, &bytes, &tensor.name)?;
    let parameter = |choice| InferParameter {
        parameter_choice: Some(choice),
    };
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    tensor.parameters.extend([
        (
            "shared_memory_region".to_string(),
            parameter(ParameterChoice::StringParam(place.region)),
        ),
        (
            "shared_memory_byte_size".to_string(),
            parameter(ParameterChoice::Int64Param(size)),
        ),
    ]);
    Ok((tensor, Vec::new()))
}

/// The inputs of a request: from the shared memory region an input names, else from `raw` (one
/// entry per other input, in order) when it has any, else from each input's typed contents.
fn decode_inputs(
    model: &Model,
    inputs: Vec<InferInputTensor>,
    raw: Vec<Vec<u8>>,
    shared: &SharedMemory,
) -> Result<Vec<InputTensor>> {
    let places = inputs
        .iter()
        .map(|input| shared_memory_place(&input.parameters, &input.name))
        .collect::<Result<Vec<_>>>()?;
    let plain = places.iter().filter(|place| place.is_none()).count();
    if !raw.is_empty() && raw.len() != plain {
        return Err(Error::invalid_argument(format!(
            "the request has {plain} inputs outside shared memory but {} raw_input_contents; raw contents need one per such input",
            raw.len()
        )));
    }
    let mut raw = raw.into_iter();
    inputs
        .into_iter()
        .zip(places)
        .map(|(input, place)| {
            let shape = input
                .shape
                .iter()
                .map(|&d| u64::try_from(d))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|_| Error::invalid_argument(format!("input '{}' has a negative dimension", input.name)))?;
            let from_raw = if place.is_none() { raw.next() } else { None };
            let bytes = match (place, from_raw) {
                (Some(place), _) => shared.read(&place.region, place.offset, place.byte_size, &input.name)?,
                (None, Some(bytes)) => bytes,
                (None, None) => {
                    let spec = model.input_spec(&input.name)?;
                    let contents = input.contents.unwrap_or_default();
                    typed_bytes(spec.datatype, &contents)
                        .map_err(|e| Error::invalid_argument(format!("input '{}': {}", input.name, e.message())))?
                }
            };
            Ok(InputTensor {
                name: input.name,
                datatype: input.datatype,
                shape,
                bytes,
            })
        })
        .collect()
}

/// The little-endian bytes of typed contents for `datatype`; integers narrower than their
/// field are checked to fit.
fn typed_bytes(datatype: &str, contents: &InferTensorContents) -> Result<Vec<u8>> {
    fn narrow<T: Copy + Into<i128>>(values: &[T], min: i128, max: i128, width: usize) -> Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(values.len() * width);
        for &value in values {
            let value: i128 = value.into();
            if !(min..=max).contains(&value) {
                return Err(Error::invalid_argument(format!(
                    "{value} is out of range [{min}, {max}]"
                )));
            }
            bytes.extend_from_slice(&value.to_le_bytes()[..width]);
        }
        Ok(bytes)
    }
    fn wide<const N: usize, T: Copy>(values: &[T], to_bytes: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to_bytes(v)).collect()
    }
    Ok(match datatype {
        "BOOL" => contents.bool_contents.iter().map(|&b| u8::from(b)).collect(),
        "INT8" => narrow(&contents.int_contents, i8::MIN.into(), i8::MAX.into(), 1)?,
        "INT16" => narrow(&contents.int_contents, i16::MIN.into(), i16::MAX.into(), 2)?,
        "INT32" => wide(&contents.int_contents, i32::to_le_bytes),
        "INT64" => wide(&contents.int64_contents, i64::to_le_bytes),
        "UINT8" => narrow(&contents.uint_contents, 0, u8::MAX.into(), 1)?,
        "UINT16" => narrow(&contents.uint_contents, 0, u16::MAX.into(), 2)?,
        "UINT32" => wide(&contents.uint_contents, u32::to_le_bytes),
        "UINT64" => wide(&contents.uint64_contents, u64::to_le_bytes),
        "FP32" => wide(&contents.fp32_contents, f32::to_le_bytes),
        "FP64" => wide(&contents.fp64_contents, f64::to_le_bytes),
        other => {
            return Err(Error::invalid_argument(format!(
                "{other} has no typed contents field; send it in raw_input_contents"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::infer_parameter::ParameterChoice;

    fn parameters(choice: ParameterChoice) -> std::collections::HashMap<String, InferParameter> {
        let parameter = InferParameter {
            parameter_choice: Some(choice),
        };
        [("classification".to_string(), parameter)].into()
    }

    #[test]
    fn a_class_count_is_a_non_negative_int64_or_any_uint64() {
        assert_eq!(class_count(&Default::default(), "scores").expect("none"), None);
        for (choice, count) in [
            (ParameterChoice::Int64Param(3), 3),
            (ParameterChoice::Uint64Param(5), 5),
            (ParameterChoice::Int64Param(0), 0),
        ] {
            assert_eq!(
                class_count(&parameters(choice), "scores").expect("a count"),
                Some(count)
            );
        }
        for choice in [
            ParameterChoice::Int64Param(-1),
            ParameterChoice::StringParam("3".into()),
            ParameterChoice::BoolParam(true),
        ] {
            let error = class_count(&parameters(choice), "scores").expect_err("refused");
            assert_eq!(error.code(), halo_hal::StatusCode::InvalidArgument);
            assert!(error.to_string().contains("output 'scores'"), "{error}");
        }
    }
}
