//! A model admits `max_concurrency + max_queue` requests at once and refuses more as
//! unavailable, naming the model, until one leaves.

use halo_serve::{Model, ModelConfig};
use std::path::Path;

fn tiny_add(max_concurrency: usize, max_queue: usize) -> Model {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/models");
    let config = ModelConfig {
        name: "adder".into(),
        version: "3".into(),
        modules: vec![fixtures.join("tiny_add.vmfb")],
        function: "tiny_add".into(),
        devices: vec!["local-sync".into()],
        max_concurrency,
        max_queue,
    };
    Model::load(&halo_runtime::Instance::new(), config).expect("the fixture loads")
}

#[test]
fn requests_beyond_the_running_and_queued_limits_are_unavailable() {
    let model = tiny_add(1, 1);
    let first = model.admit().expect("one runs");
    let second = model.admit().expect("one waits");
    let refused = model.admit().err().expect("a third is refused");
    assert_eq!(refused.code(), halo_hal::StatusCode::Unavailable);
    assert!(refused.to_string().contains("model 'adder' is busy"), "{refused}");
    drop(first);
    let third = model.admit().expect("a place came free");
    drop((second, third));
}

#[test]
fn the_declaration_names_inputs_and_outputs_with_datatypes_and_shapes() {
    let model = tiny_add(1, 0);
    let names: Vec<_> = model
        .inputs()
        .iter()
        .map(|s| (s.name.as_str(), s.datatype, s.shape.clone()))
        .collect();
    assert_eq!(names, [("input0", "FP32", vec![4]), ("input1", "FP32", vec![4])]);
    assert_eq!(model.outputs()[0].name, "output0");
}
