//! `hal.executable.*` and `hal.ex.file.from_memory`: kernels prepared from the module's rodata,
//! and rodata wrapped as files for queue reads.

use super::{object, Row};
use crate::objects::{HalDevice, HalExecutable, HalFile, HostFile};
use crate::{Args, HalArgs, HalModuleState};
use halo_hal::{Error, ExecutableParams, MemoryAccess, Result, ResultExt};
use halo_vm::ref_types::{check_range, Buffer as VmBuffer};
use halo_vm::{Results, Value};
use smallvec::smallvec;

pub(crate) const EXPORTS: &[Row] = &[
    ("ex.file.from_memory", "0rIirIIi_r", file_from_memory),
    ("executable.create", "0rIrrr_r", create),
    ("executable.lookup.function", "0rr_I", lookup_function),
];

/// `(device, affinity, format, data, constants or null) -> executable`
fn create(state: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let device = &args.object::<HalDevice>(0)?.0;
    let format = args.text(2)?;
    let data = args.object::<VmBuffer>(3)?.bytes();
    let constants = match args.optional_object::<VmBuffer>(4)? {
        None => Vec::new(),
        Some(buffer) => {
            let bytes = buffer.bytes();
            if bytes.len() % 4 != 0 {
                return Err(Error::invalid_argument(format!(
                    "executable constants must be 4-byte values but the buffer has {} bytes",
                    bytes.len()
                )));
            }
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect()
        }
    };
    let executable = state
        .executable_cache(device)?
        .prepare_executable(&ExecutableParams {
            format: &format,
            data: &data,
            constants: &constants,
        })
        .with_context(|| format!("preparing a '{format}' executable for {}", device.driver_name()))?;
    Ok(object(HalExecutable(executable)))
}

/// `(executable, name) -> function id` (the export ordinal).
fn lookup_function(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    let executable = &args.object::<HalExecutable>(0)?.0;
    // Called per dispatch by programs with dynamic shapes: the name is compared in place.
    let name = args.object::<VmBuffer>(1)?.bytes();
    let name =
        std::str::from_utf8(&name).map_err(|_| Error::invalid_argument("executable function name is not UTF-8"))?;
    let ordinal = executable.lookup_export(name)?;
    Ok(smallvec![Value::I64(ordinal as i64)])
}

/// `(device, affinity, access, buffer, offset, length, flags) -> file`: read-only only.
fn file_from_memory(_: &HalModuleState, args: &Args<'_>) -> Result<Results> {
    args.object::<HalDevice>(0)?;
    let access = MemoryAccess::from_bits_retain(args.i32(2)? as u16);
    if !MemoryAccess::READ.contains(access) {
        return Err(Error::permission_denied(
            "only read-only memory can be accessed through a file handle",
        ));
    }
    let source = args
        .optional_ref(3)?
        .ok_or_else(|| Error::invalid_argument("file source is null"))?;
    let length = source.expect::<VmBuffer>("file source")?.len();
    let range = check_range(args.size(4)?, args.size(5)?, length)?;
    Ok(object(HalFile(HostFile {
        source: source.clone(),
        range,
    })))
}
