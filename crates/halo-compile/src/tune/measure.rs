//! Running one compiled variant on a device: its per-call time and its outputs.

use halo_hal::buffer_view_text::{checked_element_count, parse_shape_and_type};
use halo_hal::Device;
use halo_hal::{Error, HostTensor, NumericalType, Result, ResultExt};
use halo_runtime::{tensor, Function, LoadMode, Session, Value};
use halo_vm::BytecodeModule;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every variant is run on: a device, a function and its inputs.
pub struct Workload {
    /// The device URI the variants run on.
    pub device: String,
    /// The function to time; `None` picks the module's only public one.
    pub function: Option<String>,
    /// The inputs; empty means inputs generated from the function's declaration.
    pub inputs: Vec<HostTensor>,
    /// How long each variant's calls are timed in all (after one untimed call), its calls taking
    /// turns with the other variants'.
    pub min_time: Duration,
}

/// A result read back: a tensor, or a scalar as `iree-run-module` prints it.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A buffer view's contents.
    Tensor(HostTensor),
    /// A scalar's text.
    Scalar(String),
}

/// One variant loaded on the device with its inputs, called once, ready to be timed call by call
/// in turn with the others (so that every variant sees the same disturbances of the machine).
pub struct LoadedVariant {
    session: Session,
    function: Function,
    name: String,
    inputs: Vec<Value>,
    results: Vec<Value>,
}

impl LoadedVariant {
    /// Loads `vmfb` in a session on `device` and makes a first, untimed call of the workload's
    /// function (which also warms caches and pools).
    ///
    /// # Errors
    /// Loading, input and call failures, naming the file and the function.
    pub fn load(device: &Arc<dyn Device>, vmfb: &Path, workload: &Workload) -> Result<Self> {
        let mut session = Session::with_devices(vec![device.clone()])?;
        let module =
            BytecodeModule::open(vmfb, LoadMode::Preload).with_context(|| format!("loading '{}'", vmfb.display()))?;
        let name = match &workload.function {
            Some(name) => name.clone(),
            None => only_public_function(&module, vmfb)?,
        };
        session.load_module(Arc::new(module))?;
        let function = session.function(&name)?;
        let hosts = if workload.inputs.is_empty() {
            generated_inputs(&function.declared_inputs(), function.argument_kinds().len(), &name)?
        } else {
            workload.inputs.clone()
        };
        let inputs = hosts
            .iter()
            .map(|host| session.tensor_input(host))
            .collect::<Result<Vec<Value>>>()?;
        let results = session.call(&function, &inputs)?;
        Ok(LoadedVariant {
            session,
            function,
            name,
            inputs,
            results,
        })
    }

    /// The function being timed.
    pub fn function_name(&self) -> &str {
        &self.name
    }

    /// Wall time of one call.
    ///
    /// # Errors
    /// The call's failure.
    pub fn time_call(&mut self) -> Result<Duration> {
        let started = Instant::now();
        self.results = self.session.call(&self.function, &self.inputs)?;
        Ok(started.elapsed())
    }

    /// The last call's results, read back to the host.
    ///
    /// # Errors
    /// A result that cannot be read back.
    pub fn outputs(&self) -> Result<Vec<Output>> {
        let device = self.session.device().as_ref();
        self.results
            .iter()
            .map(|value| match value {
                Value::Ref(Some(_)) => tensor::to_host(device, value).map(Output::Tensor),
                scalar => tensor::format_output(device, scalar, 0).map(Output::Scalar),
            })
            .collect()
    }
}

fn only_public_function(module: &BytecodeModule, vmfb: &Path) -> Result<String> {
    match module.public_functions().as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(Error::invalid_argument(format!(
            "'{}' exports no function to time",
            vmfb.display()
        ))),
        several => Err(Error::invalid_argument(format!(
            "'{}' exports {} functions ({}); say which to time with --function",
            vmfb.display(),
            several.len(),
            several.join(", ")
        ))),
    }
}

/// Inputs made from the declared types (`tensor<1x3x64x64xf32>`): floats uniform in [-1, 1),
/// integers in [0, 4) so they can index small dimensions, the same on every run.
pub(crate) fn generated_inputs(
    declared: &[(String, String)],
    arguments: usize,
    function: &str,
) -> Result<Vec<HostTensor>> {
    if declared.len() != arguments {
        return Err(Error::invalid_argument(format!(
            "function '{function}' has no declaration of its {arguments} inputs to generate them from; give them with --input"
        )));
    }
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    declared
        .iter()
        .enumerate()
        .map(|(index, (name, ty))| {
            let mut generate = || -> Result<HostTensor> {
                let inner = ty
                    .strip_prefix("tensor<")
                    .and_then(|t| t.strip_suffix('>'))
                    .ok_or_else(|| Error::unimplemented(format!("only tensors can be generated, not '{ty}'")))?;
                if inner.contains('?') {
                    return Err(Error::invalid_argument(format!("'{ty}' has a dynamic shape")));
                }
                let (shape, element_type) = parse_shape_and_type(inner)?;
                let count = checked_element_count(&shape)
                    .and_then(|count| usize::try_from(count).ok())
                    .filter(|&count| count.checked_mul(element_type.byte_size()).is_some())
                    .ok_or_else(|| Error::resource_exhausted(format!("'{ty}' is too large to generate")))?;
                let mut bytes = Vec::new();
                bytes
                    .try_reserve_exact(count * element_type.byte_size())
                    .map_err(|_| Error::resource_exhausted(format!("'{ty}' is too large to generate")))?;
                for _ in 0..count {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
                    push_element(&mut bytes, element_type, unit)
                        .ok_or_else(|| Error::unimplemented(format!("cannot generate elements of '{ty}'")))?;
                }
                Ok(HostTensor {
                    shape,
                    element_type,
                    bytes,
                })
            };
            generate()
                .with_context(|| format!("generating input {index} '{name}' of '{function}' (give it with --input)"))
        })
        .collect()
}

/// Appends one element made from `unit` in [0, 1); `None` for a type it cannot make.
fn push_element(bytes: &mut Vec<u8>, element_type: halo_hal::ElementType, unit: f64) -> Option<()> {
    let float = unit * 2.0 - 1.0;
    let small = (unit * 4.0) as u64;
    match (element_type.numerical_type(), element_type.bit_count()) {
        (NumericalType::FloatIeee, 16) => bytes.extend(half::f16::from_f64(float).to_le_bytes()),
        (NumericalType::FloatBrain, 16) => bytes.extend(half::bf16::from_f64(float).to_le_bytes()),
        (NumericalType::FloatIeee, 32) => bytes.extend((float as f32).to_le_bytes()),
        (NumericalType::FloatIeee, 64) => bytes.extend(float.to_le_bytes()),
        (NumericalType::Boolean, 8) => bytes.push((small % 2) as u8),
        (
            NumericalType::Integer | NumericalType::IntegerSigned | NumericalType::IntegerUnsigned,
            bits @ (8 | 16 | 32 | 64),
        ) => bytes.extend(&small.to_le_bytes()[..bits as usize / 8]),
        _ => return None,
    }
    Some(())
}

/// How far `actual` is from `baseline`: the largest element difference over the largest
/// magnitude of the baseline's output, per output, the worst of them; integers and scalars
/// count as 0 when equal and infinite otherwise, as do differing shapes, types and counts.
pub fn deviation(actual: &[Output], baseline: &[Output]) -> f64 {
    if actual.len() != baseline.len() {
        return f64::INFINITY;
    }
    actual
        .iter()
        .zip(baseline)
        .map(|pair| match pair {
            (Output::Tensor(a), Output::Tensor(b)) => tensor_deviation(a, b),
            (a, b) if a == b => 0.0,
            _ => f64::INFINITY,
        })
        .fold(0.0, f64::max)
}

fn tensor_deviation(actual: &HostTensor, baseline: &HostTensor) -> f64 {
    if actual.shape != baseline.shape || actual.element_type != baseline.element_type {
        return f64::INFINITY;
    }
    let element_type = actual.element_type;
    let decode: fn(&[u8]) -> f64 = match (element_type.numerical_type(), element_type.bit_count()) {
        (NumericalType::FloatIeee, 16) => |b| half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        (NumericalType::FloatBrain, 16) => |b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        (NumericalType::FloatIeee, 32) => |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        (NumericalType::FloatIeee, 64) => |b| f64::from_le_bytes(b[..8].try_into().unwrap_or_default()),
        _ => {
            return if actual.bytes == baseline.bytes {
                0.0
            } else {
                f64::INFINITY
            }
        }
    };
    let size = element_type.byte_size().max(1);
    let (mut largest_difference, mut largest_magnitude) = (0.0_f64, 0.0_f64);
    for (a, b) in actual.bytes.chunks(size).zip(baseline.bytes.chunks(size)) {
        let (a, b) = (decode(a), decode(b));
        if a.is_nan() != b.is_nan() {
            return f64::INFINITY;
        }
        if !a.is_nan() {
            largest_difference = largest_difference.max((a - b).abs());
            largest_magnitude = largest_magnitude.max(b.abs());
        }
    }
    if largest_difference == 0.0 {
        0.0
    } else {
        largest_difference / largest_magnitude.max(f64::MIN_POSITIVE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_hal::ElementType;

    fn f32s(values: &[f32]) -> Output {
        Output::Tensor(HostTensor {
            shape: vec![values.len() as u64],
            element_type: ElementType::parse("f32").unwrap(),
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        })
    }

    #[test]
    fn deviation_is_relative_to_the_largest_baseline_magnitude() {
        let baseline = [f32s(&[2.0, -4.0, 1.0])];
        assert_eq!(deviation(&baseline, &baseline), 0.0);
        let near = [f32s(&[2.0, -4.0, 1.004])];
        let d = deviation(&near, &baseline);
        assert!((d - 0.001).abs() < 1e-6, "{d}");
        assert_eq!(deviation(&[f32s(&[2.0, -4.0])], &baseline), f64::INFINITY);
        assert_eq!(deviation(&[f32s(&[2.0, -4.0, f32::NAN])], &baseline), f64::INFINITY);
        assert_eq!(deviation(&[], &baseline), f64::INFINITY);
        let scalar = [Output::Scalar("i32=3".into())];
        assert_eq!(deviation(&scalar, &scalar), 0.0);
        assert_eq!(deviation(&[Output::Scalar("i32=4".into())], &scalar), f64::INFINITY);
    }

    #[test]
    fn generated_inputs_follow_the_declaration_and_repeat() {
        let declared = vec![
            ("x".to_string(), "tensor<2x3xf32>".to_string()),
            ("ids".to_string(), "tensor<4xi64>".to_string()),
        ];
        let first = generated_inputs(&declared, 2, "f").unwrap();
        assert_eq!(first, generated_inputs(&declared, 2, "f").unwrap());
        assert_eq!(first[0].shape, [2, 3]);
        assert_eq!(first[0].bytes.len(), 24);
        let floats: Vec<f32> = first[0]
            .bytes
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert!(floats.iter().all(|v| (-1.0..1.0).contains(v)), "{floats:?}");
        assert!(floats.windows(2).any(|w| w[0] != w[1]), "{floats:?}");
        let ids: Vec<i64> = first[1]
            .bytes
            .chunks(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert!(ids.iter().all(|v| (0..4).contains(v)), "{ids:?}");

        let error = generated_inputs(&declared, 3, "f").unwrap_err();
        assert!(error.to_string().contains("--input"), "{error}");
        let dynamic = vec![("x".to_string(), "tensor<?x3xf32>".to_string())];
        let error = generated_inputs(&dynamic, 1, "f").unwrap_err();
        assert!(error.to_string().contains("dynamic shape"), "{error}");
        assert!(error.to_string().contains("input 0 'x'"), "{error}");
    }
}
