//! The gRPC messages' codec: prost's encoding, except that a request that is not valid protobuf
//! is answered `INVALID_ARGUMENT`, naming the message, rather than prost's `INTERNAL`.
//!
//! A damaged message is the client's error. Answered `INTERNAL`, it would read as a fault of the
//! server to clients' retry policies and to alerts on server errors; every other bad request is
//! `INVALID_ARGUMENT` already.

use prost::Message;
use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;
use tonic_prost::{ProstCodec, ProstEncoder};

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
}
