//! `hal.buffer_view.*`: shaped views over buffers, and the checks programs run on their inputs.

use super::{object, Row};
use crate::objects::{HalBuffer, HalBufferView};
use crate::{Args, HalArgs, HalModuleState};
use halo_hal::buffer_view::Encoding;
use halo_hal::{BufferView, ElementType, Error, NumericalType, Result, ResultExt};
use halo_vm::ref_types::Buffer as VmBuffer;
use halo_vm::{Results, Value};
use smallvec::{smallvec, SmallVec};

pub(crate) const EXPORTS: &[Row] = &[
    ("buffer_view.assert", "0rriiCID_v", assert),
    ("buffer_view.buffer", "0r_r", buffer),
    ("buffer_view.create", "0rIIiiCID_r", create),
    ("buffer_view.dim", "0ri_I", dim),
    ("buffer_view.element_type", "0r_i", element_type),
    ("buffer_view.encoding_type", "0r_i", encoding_type),
    ("buffer_view.rank", "0r_i", rank),
];

fn encoding(raw: i32) -> Result<Encoding> {
    match raw {
        0 => Ok(Encoding::Opaque),
        1 => Ok(Encoding::DenseRowMajor),
        other => Err(Error::unimplemented(format!("buffer view encoding {other:#010x}"))),
    }
}

/// The dimensions from index `first` on (a variadic i64 segment).
fn dims(args: &Args<'_>, first: usize) -> Result<SmallVec<[u64; 4]>> {
    (first..args.len()).map(|i| args.size(i)).collect()
}

/// `(buffer, offset, length, element_type, encoding, dims...) -> buffer_view`
fn create(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let source = &args.object::<HalBuffer>(0)?.0;
    let (offset, length) = (args.size(1)?, args.size(2)?);
    let whole = offset == 0 && length == source.byte_length();
    let buffer = if whole {
        source.clone()
    } else {
        source.subspan(offset, length).with_context(|| {
            format!("invalid subspan of an existing buffer (source_offset={offset}, length={length})")
        })?
    };
    let element_type = ElementType::from_raw(args.i32(3)? as u32);
    let view = BufferView::new(buffer, &dims(args, 5)?, element_type, encoding(args.i32(4)?)?)?;
    // A view of the whole buffer shares its reference with `hal.buffer_view.buffer`.
    Ok(match args.optional_ref(0)? {
        Some(buffer) if whole => object(HalBufferView::over(view, buffer.clone())),
        _ => object(HalBufferView::new(view)),
    })
}

/// Whether a view of `actual` elements may be passed where `expected` is declared: opaque
/// matches anything, integers of one width match regardless of signedness.
fn element_types_compatible(actual: ElementType, expected: ElementType) -> bool {
    actual.numerical_type() == NumericalType::Unknown || actual.shares_storage_with(expected)
}

/// `(buffer_view, message, element_type, encoding, dims...)`: the view has the encoding,
/// element type and shape the function declares; the error names the argument (`message`).
fn assert(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let view = args.object::<HalBufferView>(0)?.view();
    let message_buffer = args.object::<VmBuffer>(1)?;
    // Only failures read the message, so the common path allocates nothing for it.
    let message = || message_buffer.to_text();
    let expected_type = ElementType::from_raw(args.i32(2)? as u32);
    let expected_encoding = args.i32(3)?;
    let expected_shape = dims(args, 4)?;
    let actual_encoding = view.encoding() as i32;
    if view.encoding() != Encoding::Opaque && actual_encoding != expected_encoding {
        return Err(Error::invalid_argument(format!(
            "{} encoding mismatch; expected {expected_encoding:08X} but have {actual_encoding:08X}",
            message()
        )));
    }
    let actual_type = view.element_type();
    if !element_types_compatible(actual_type, expected_type) {
        return Err(Error::invalid_argument(format!(
            "{} element type mismatch; expected {expected_type} ({:08X}) but have {actual_type} ({:08X})",
            message(),
            expected_type.raw(),
            actual_type.raw()
        )));
    }
    let actual_shape = view.shape();
    let scalar = |rank: usize| if rank == 0 { " (scalar)" } else { "" };
    let mismatch = if actual_shape.len() != expected_shape.len() {
        Some(format!(
            "{} shape rank mismatch; expected {}{} but have {}{}",
            message(),
            expected_shape.len(),
            scalar(expected_shape.len()),
            actual_shape.len(),
            scalar(actual_shape.len())
        ))
    } else {
        (0..actual_shape.len())
            .find(|&i| actual_shape[i] != expected_shape[i])
            .map(|i| {
                format!(
                    "{} shape dimension {i} mismatch; expected {} but have {}",
                    message(),
                    expected_shape[i],
                    actual_shape[i]
                )
            })
    };
    match mismatch {
        None => Ok(Results::new()),
        Some(text) => Err(Error::invalid_argument(format!(
            "{text}; expected shape `{}`, actual shape `{}`",
            shape_text(&expected_shape),
            shape_text(actual_shape)
        ))),
    }
}

fn shape_text(shape: &[u64]) -> String {
    shape.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
}

/// `(buffer_view) -> buffer`
fn buffer(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    Ok(smallvec![Value::Ref(Some(
        args.object::<HalBufferView>(0)?.buffer_ref()
    ))])
}

/// `(buffer_view, index) -> dim`
fn dim(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let view = args.object::<HalBufferView>(0)?.view();
    let index = args.i32(1)?;
    let dim = usize::try_from(index)
        .ok()
        .and_then(|i| view.shape().get(i))
        .ok_or_else(|| {
            Error::out_of_range(format!(
                "dimension {index} of a rank-{} buffer view",
                view.shape().len()
            ))
        })?;
    Ok(smallvec![Value::I64(*dim as i64)])
}

/// `(buffer_view) -> element_type`
fn element_type(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let view = args.object::<HalBufferView>(0)?.view();
    Ok(smallvec![Value::I32(view.element_type().raw() as i32)])
}

/// `(buffer_view) -> encoding_type`
fn encoding_type(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let view = args.object::<HalBufferView>(0)?.view();
    Ok(smallvec![Value::I32(view.encoding() as i32)])
}

/// `(buffer_view) -> rank`
fn rank(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let view = args.object::<HalBufferView>(0)?.view();
    Ok(smallvec![Value::I32(view.shape().len() as i32)])
}
