//! A whole program on the Tenstorrent mock device: the same answers as the CPU, with every input
//! and output carried by the mock's transfer queue (its memory cannot be mapped by the host).

mod common;

use halo_runtime::{tensor, HostTensor, Instance, Session, Value};
use halo_tenstorrent::TenstorrentDevice;

fn run_mlp(device: &str) -> (Session, Vec<HostTensor>) {
    let mut session = Session::new(&Instance::new(), &[device]).unwrap();
    session.load_module_file(&common::module("mlp.vmfb")).unwrap();
    let function = session.function("mlp").unwrap();
    let input = halo_runtime::npy::read_all(&common::models().join("mlp.basic.0.npy")).unwrap();
    let inputs: Vec<Value> = input.iter().map(|t| session.tensor_input(t).unwrap()).collect();
    let outputs = session.call(&function, &inputs).unwrap();
    let host = outputs
        .iter()
        .map(|value| tensor::to_host(session.device().as_ref(), value).unwrap())
        .collect();
    (session, host)
}

#[test]
fn mlp_on_the_mock_device_matches_the_cpu_through_queue_transfers() {
    let (_, expected) = run_mlp("local-sync");
    let (session, actual) = run_mlp("tenstorrent://mock?dram=256MiB");
    assert_eq!(actual, expected);
    let device = session.device().as_any().downcast_ref::<TenstorrentDevice>().unwrap();
    let statistics = device.statistics();
    println!("{statistics:#?}");
    let input_bytes = 2 * 8 * 4;
    let output_bytes: u64 = actual.iter().map(|t| t.bytes.len() as u64).sum();
    assert!(statistics.traffic.host_to_device_bytes >= input_bytes, "{statistics:?}");
    assert!(
        statistics.traffic.device_to_host_bytes >= output_bytes,
        "{statistics:?}"
    );
    assert!(statistics.queues.transfer_operations > 0 && statistics.queues.compute_operations > 0);
}
