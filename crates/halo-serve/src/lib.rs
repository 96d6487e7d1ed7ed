//! halo's model server: IREE-compiled modules served over the Open Inference Protocol (KServe
//! v2, also spoken by Triton and its clients), so serving platforms can put halo behind their
//! load balancers and scale it out.
//!
//! Each model is one exported function of a loaded module. Its inputs and outputs, with the
//! protocol's datatypes and shapes, come from the declaration `iree-compile` records for the
//! function. Requests run on the model's computing threads, at most `max_concurrency` at once, with
//! up to `max_queue` more waiting; beyond that a request is refused with `503`.

pub mod batch_scheduling;
pub mod batcher;
pub mod body_pause;
pub mod classification;
pub mod compute;
pub mod connection_start;
pub mod data_arrays;
pub mod datatype;
pub mod grpc;
pub mod grpc_admission;
pub mod grpc_codec;
pub mod grpc_health;
pub mod grpc_loading;
pub mod http;
pub mod http_connections;
pub mod inference_tensors;
pub mod json_data;
pub mod json_numbers;
pub mod metrics;
pub mod model;
pub mod model_config;
pub mod model_configuration;
pub mod model_source;
pub mod protocol;
pub mod repository;
pub mod server;
pub mod serving;
pub mod shared_memory;
pub mod sized_functions;
pub mod statistics;
pub mod tensor_spec;

pub use model::{Model, ModelConfig};
pub use server::{Listeners, Server, ServerConfig};
