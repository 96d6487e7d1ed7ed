//! `ndarray` arrays in and out of calls (feature `ndarray`, on for the workspace's tests).

mod common;

use halo_runtime::array::{array_input, to_array, Placement};
use halo_runtime::{tensor, Instance, Session, StatusCode};
use ndarray::{s, Array1, ArrayD, IxDyn};

fn session(device: &str) -> Session {
    let mut session = Session::new(&Instance::new(), &[device]).unwrap();
    session.load_module_file(&common::module("tiny_add.vmfb")).unwrap();
    session
}

/// `values` in an array whose first element sits on a 64-byte boundary, so it can be lent.
fn aligned(values: &[f32]) -> ArrayD<f32> {
    let mut padded = Array1::from_elem(16 + values.len(), f32::NAN);
    let skip = (0..16)
        .find(|k| (padded.as_ptr() as usize + 4 * k).is_multiple_of(64))
        .expect("one of 16 consecutive f32s is 64-byte aligned");
    padded
        .slice_mut(s![skip..skip + values.len()])
        .assign(&Array1::from(values.to_vec()));
    padded.slice_move(s![skip..skip + values.len()]).into_dyn()
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn aligned_row_major_arrays_are_used_in_place_and_results_come_back_as_arrays() {
    for device in ["local-sync", "local-task"] {
        let session = session(device);
        let function = session.function("tiny_add").unwrap();
        let a = aligned(&[1.5, 2.0, -3.0, 4.0]);
        let address = a.as_ptr() as usize;
        let (a_value, placement) = array_input(session.device().as_ref(), a).unwrap();
        assert_eq!(placement, Placement::InPlace);
        // The buffer reads the array's own memory: its contents are the array's.
        assert_eq!(address % 64, 0);
        let lent = tensor::to_host(session.device().as_ref(), &a_value).unwrap();
        assert_eq!(lent.bytes, le_bytes(&[1.5, 2.0, -3.0, 4.0]));
        let b = ArrayD::from_shape_vec(IxDyn(&[4]), vec![10.0f32, 20.0, 30.0, 0.25]).unwrap();
        let (b_value, _) = array_input(session.device().as_ref(), b).unwrap();
        let outputs = session.call(&function, &[a_value, b_value]).unwrap();
        let sum = to_array::<f32>(session.device().as_ref(), &outputs[0]).unwrap();
        assert_eq!(sum.shape(), &[4]);
        assert_eq!(sum.as_slice().unwrap(), &[11.5, 22.0, 27.0, 4.25], "on {device}");
    }
}

#[test]
fn arrays_that_are_not_row_major_are_copied_in_row_major_order() {
    let session = session("local-sync");
    let device = session.device().as_ref();
    let transposed = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1i32, 2, 3, 4])
        .unwrap()
        .reversed_axes();
    let (value, placement) = array_input(device, transposed).unwrap();
    assert_eq!(placement, Placement::Copied);
    let back = to_array::<i32>(session.device().as_ref(), &value).unwrap();
    assert_eq!(back.as_slice().unwrap(), &[1, 3, 2, 4]);
    assert_eq!(back.shape(), &[2, 2]);
}

#[test]
fn reading_a_result_as_the_wrong_element_type_names_both_types() {
    let session = session("local-sync");
    let values = ArrayD::from_shape_vec(IxDyn(&[4]), vec![1.0f32; 4]).unwrap();
    let (value, _) = array_input(session.device().as_ref(), values).unwrap();
    let error = to_array::<i32>(session.device().as_ref(), &value).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    assert!(
        error.to_string().contains("f32") && error.to_string().contains("si32"),
        "{error}"
    );
    // Integers read back whatever their signedness, as programs treat them.
    let ints = ArrayD::from_shape_vec(IxDyn(&[2]), vec![-1i32, 7]).unwrap();
    let (value, _) = array_input(session.device().as_ref(), ints).unwrap();
    assert_eq!(
        to_array::<u32>(session.device().as_ref(), &value)
            .unwrap()
            .as_slice()
            .unwrap(),
        &[u32::MAX, 7]
    );
}
