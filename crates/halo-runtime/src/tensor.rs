//! Buffer views as VM values: host tensors in, host tensors and `iree-run-module` text out.

use halo_hal::element_text::format_g;
use halo_hal::{BufferParams, BufferView, Device, Error, HostTensor, Result};
use halo_hal_module::HalBufferView;
use halo_vm::ref_types::{ElementType as ListElementType, List};
use halo_vm::Value;

/// A buffer view on `device` holding a copy of `tensor`, as a VM value.
///
/// # Errors
/// Allocation failures.
pub fn buffer_view_value(device: &dyn Device, tensor: &HostTensor) -> Result<Value> {
    let view = BufferView::from_host(device, BufferParams::device_local(), tensor)?;
    Ok(view_value(view))
}

/// Wraps a buffer view as a VM value.
pub fn view_value(view: BufferView) -> Value {
    Value::Ref(Some(HalBufferView::new(view).into_ref()))
}

/// The buffer view a value holds.
///
/// # Errors
/// `InvalidArgument` naming what the value is instead.
pub fn as_buffer_view(value: &Value) -> Result<&BufferView> {
    match value {
        Value::Ref(Some(r)) => r.expect::<HalBufferView>("value").map(HalBufferView::view),
        other => Err(Error::invalid_argument(format!("{other:?} is not a buffer view"))),
    }
}

/// Reads a buffer-view value on `device` back into host memory.
///
/// # Errors
/// As [`as_buffer_view`]; failures of the transfer.
pub fn to_host(device: &dyn Device, value: &Value) -> Result<HostTensor> {
    as_buffer_view(value)?.to_host(device)
}

/// Formats a call result as `iree-run-module` prints it after `result[i]: `: `i32=5`,
/// `f32=0.5`, `hal.buffer_view` and its contents on the next line (at most `max_elements`),
/// lists as `vm.list` and one `child_list[i]: ...` line per item. Buffer views are read from
/// `device`.
///
/// # Errors
/// Reading a buffer view's contents failed.
pub fn format_output(device: &dyn Device, value: &Value, max_elements: usize) -> Result<String> {
    format_typed(device, value, None, max_elements)
}

fn format_typed(
    device: &dyn Device,
    value: &Value,
    element_type: Option<&ListElementType>,
    max_elements: usize,
) -> Result<String> {
    Ok(match value {
        Value::I32(v) => match element_type {
            Some(ListElementType::I8) => format!("i8={v}"),
            Some(ListElementType::I16) => format!("i16={v}"),
            _ => format!("i32={v}"),
        },
        Value::I64(v) => format!("i64={v}"),
        Value::F32(v) => format!("f32={}", format_g(*v as f64).to_lowercase()),
        Value::F64(v) => format!("f64={}", format_g(*v).to_lowercase()),
        Value::Ref(None) => "(null)".to_string(),
        Value::Ref(Some(r)) => {
            if let Some(view) = r.downcast::<HalBufferView>() {
                format!("hal.buffer_view\n{}", view.view().format(device, max_elements)?)
            } else if let Some(list) = r.downcast::<List>() {
                let mut text = String::from("vm.list\n");
                for (index, item) in list.to_vec().iter().enumerate() {
                    let item = format_typed(device, item, Some(list.element_type()), max_elements)?;
                    text.push_str(&format!("child_list[{index}]: {item}\n"));
                }
                text
            } else {
                format!("{}\n(no printer)", r.type_name())
            }
        }
    })
}
