//! Generates ONNX's model messages from its published schema, so graphs can be read and rewritten
//! without losing a field.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/onnx-ml.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
