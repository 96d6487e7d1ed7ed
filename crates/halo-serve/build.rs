//! Generates the gRPC messages, server and client (for the load test) from the protocol's `.proto`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/grpc_predict_v2.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        // A damaged request is the client's error, not the server's (see `grpc_codec`).
        .codec_path("crate::grpc_codec::ClientCheckedCodec")
        .compile_fds(descriptors)?;
    Ok(())
}
