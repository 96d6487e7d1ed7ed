//! The gRPC messages' codec: prost's encoding, except that a request that is not valid protobuf
//! is answered `INVALID_ARGUMENT`, naming the message, rather than prost's `INTERNAL`; and the
//! same for a compressed message that does not decompress, which tonic answers `INTERNAL`
//! before the codec sees it ([`client_fault`]).
//!
//! A damaged message is the client's error. Answered `INTERNAL`, it would read as a fault of the
//! server to clients' retry policies and to alerts on server errors; every other bad request is
//! `INVALID_ARGUMENT` already.

use prost::Message;
use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::{ProstCodec, ProstEncoder};

/// `INVALID_ARGUMENT` in place of `status` when it is tonic's `INTERNAL` for a compressed
/// message that does not decompress (damaged, or not in the coding its `grpc-encoding` names) or
/// for a request that ends in the middle of a message; `None` for any other status. (A message decompressing past the size limit is
/// `RESOURCE_EXHAUSTED` already.)
pub fn client_fault(status: &Status) -> Option<Status> {
    if status.code() != tonic::Code::Internal {
        return None;
    }
    let message = status.message();
    if message.starts_with(DECOMPRESSION_FAILED) {
        Some(Status::invalid_argument(format!(
            "the message does not decompress: {message}"
        )))
    } else if message.starts_with(ENDED_EARLY) {
        Some(Status::invalid_argument(format!(
            "the request ended in the middle of a message: {message}"
        )))
    } else {
        None
    }
}

/// How tonic's message for a message that does not decompress begins.
const DECOMPRESSION_FAILED: &str = "Error decompressing";

/// How tonic's message for a request body that ends inside a message begins.
const ENDED_EARLY: &str = "Unexpected EOF decoding stream";

/// Encodes `T` as prost does; decodes `U`, a damaged one being the sender's error.
#[derive(Debug, Clone)]
pub struct ClientCheckedCodec<T, U> {
    encoding: ProstCodec<T, U>,
}

impl<T, U> Default for ClientCheckedCodec<T, U> {
    fn default() -> Self {
        Self {
            encoding: ProstCodec::default(),
        }
    }
}

impl<T, U> Codec for ClientCheckedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ClientCheckedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.encoding.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        ClientCheckedDecoder { message: PhantomData }
    }
}

/// Decodes one `U`, answering `INVALID_ARGUMENT` for bytes that are not one.
#[derive(Debug, Clone)]
pub struct ClientCheckedDecoder<U> {
    message: PhantomData<U>,
}

impl<U: Message + Default> Decoder for ClientCheckedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|error| {
            Status::invalid_argument(format!("the message is not a valid {}: {error}", message_name::<U>()))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

/// The message's name as the `.proto` spells it (`ModelInferRequest`).
fn message_name<U>() -> &'static str {
    let path = std::any::type_name::<U>();
    path.rsplit("::").next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::wire::ModelInferRequest;

    #[test]
    fn a_message_is_named_as_the_proto_names_it() {
        assert_eq!(message_name::<ModelInferRequest>(), "ModelInferRequest");
    }

    /// What tonic makes of one gRPC frame flagged compressed with gzip and holding `payload`.
    async fn read_gzip_frame(payload: &[u8]) -> Result<Option<ModelInferRequest>, Status> {
        let mut frame = vec![1u8];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(payload);
        let body = http_body_util::Full::new(bytes::Bytes::from(frame));
        let decoder = ClientCheckedDecoder::<ModelInferRequest> { message: PhantomData };
        let mut stream =
            tonic::codec::Streaming::new_request(decoder, body, Some(tonic::codec::CompressionEncoding::Gzip), None);
        stream.message().await
    }

    #[tokio::test]
    async fn a_message_that_does_not_decompress_is_the_clients_fault() {
        let refusal = read_gzip_frame(b"not gzip at all").await.expect_err("not gzip");
        assert_eq!(refusal.code(), tonic::Code::Internal, "tonic's own answer: {refusal:?}");
        let named = client_fault(&refusal).expect("a decompression failure");
        assert_eq!(named.code(), tonic::Code::InvalidArgument);
        assert!(
            named.message().starts_with("the message does not decompress: "),
            "{named:?}"
        );
        // Any other status is left alone.
        assert!(client_fault(&Status::internal("the device was lost")).is_none());
        assert!(client_fault(&Status::invalid_argument("Error decompressing")).is_none());
    }
}
