//! A module's functions for fixed batch sizes (`halo compile --batch-sizes`): found beside a
//! model's function, checked against its tensors, and chosen for a call by its rows.

use crate::batcher::BatchKey;
use crate::tensor_spec::{InputTensor, TensorSpec};
use halo_hal::{Error, Result};
use halo_runtime::{Function, Session};

/// Checks that a model with `max_batch_size` can batch: each input and output a tensor whose
/// leading dimension is dynamic, the batch dimension requests are joined along.
pub(crate) fn check_batchable(max_batch_size: u64, inputs: &[TensorSpec], outputs: &[TensorSpec]) -> Result<()> {
    let tensors = (inputs.iter().map(|spec| ("input", spec))).chain(outputs.iter().map(|spec| ("output", spec)));
    for (what, spec) in tensors {
        if spec.scalar || spec.shape.first() != Some(&-1) {
            return Err(Error::invalid_argument(format!(
                "max_batch_size {max_batch_size} needs every input and output to lead with a dynamic batch \
                 dimension; {what} '{}' has shape {:?}{}",
                spec.name,
                spec.shape,
                if spec.scalar { " (a scalar)" } else { "" }
            )));
        }
    }
    Ok(())
}

/// The module's functions for fixed batch sizes of `function` (`<name>_b<size>`, as `halo
/// compile --batch-sizes` names them), smallest first, each checked to take and return the
/// `specs` (inputs, outputs) with its size as the leading dimension.
///
/// # Errors
/// `InvalidArgument` naming a function whose tensors are not those.
pub(crate) fn batch_functions(
    session: &Session,
    public_functions: &[String],
    function: &Function,
    (inputs, outputs): (&[TensorSpec], &[TensorSpec]),
) -> Result<Vec<(u64, Function)>> {
    let prefix = format!("{}_b", function.name());
    let mut sized = Vec::new();
    for name in public_functions {
        let Some(size) = name.strip_prefix(&prefix).and_then(|size| size.parse::<u64>().ok()) else {
            continue;
        };
        if size == 0 || name != &halo_compile::batch_function_name(function.name(), size) {
            continue;
        }
        let candidate = session.function(name)?;
        let fits = |declared: Vec<(String, String)>, specs: &[TensorSpec]| {
            declared.len() == specs.len()
                && declared.iter().zip(specs).all(|((name, ty), spec)| {
                    TensorSpec::declared(name, ty).is_ok_and(|sized| {
                        sized.element_type == spec.element_type
                            && sized.shape.first() == Some(&(size as i64))
                            && sized.shape[1..] == spec.shape[1..]
                    })
                })
        };
        if !fits(candidate.declared_inputs(), inputs) || !fits(candidate.declared_outputs(), outputs) {
            return Err(Error::invalid_argument(format!(
                "function '{name}' does not take and return the tensors of '{}' with {size} rows: \
                 it cannot serve its batches of {size}",
                function.name()
            )));
        }
        sized.push((size, candidate));
    }
    sized.sort_by_key(|(size, _)| *size);
    Ok(sized)
}

/// The fixed batch sizes a model that does not batch calls with requests of that many rows (or
/// fewer, padded): those of [`batch_functions`] when every input and output leads with a dynamic
/// dimension, else none. A module whose sized functions do not fit is still served, through its
/// function alone, as it was before they were looked for.
pub(crate) fn unbatched_sizes(
    session: &Session,
    public_functions: &[String],
    function: &Function,
    specs: (&[TensorSpec], &[TensorSpec]),
) -> Vec<(u64, Function)> {
    if check_batchable(1, specs.0, specs.1).is_err() {
        return Vec::new();
    }
    batch_functions(session, public_functions, function, specs).unwrap_or_else(|error| {
        tracing::warn!(
            "calling '{}' alone, not its fixed batch sizes: {error}",
            function.name()
        );
        Vec::new()
    })
}

/// The rows of a request whose inputs all lead with the same number of them, at least one: the
/// batcher's own reading of a request ([`BatchKey::of`]), its refusals taken as no rows.
pub(crate) fn common_rows(inputs: &[InputTensor]) -> Option<u64> {
    BatchKey::of(inputs).ok().map(|(_, rows)| rows).filter(|&rows| rows > 0)
}

/// Checks that a model with fixed-size functions has one for every batch `max_batch_size`
/// allows.
pub(crate) fn check_batch_sizes(max_batch_size: u64, sized: &[(u64, Function)]) -> Result<()> {
    match sized.last() {
        Some((largest, _)) if *largest < max_batch_size => Err(Error::invalid_argument(format!(
            "max_batch_size {max_batch_size} is more than the largest fixed batch size the module has \
             functions for ({:?}); set it to at most {largest}",
            sized.iter().map(|(size, _)| size).collect::<Vec<_>>()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(shape: &[u64]) -> InputTensor {
        InputTensor {
            name: "x".into(),
            datatype: "FP32".into(),
            shape: shape.to_vec(),
            bytes: Vec::new(),
        }
    }

    #[test]
    fn a_request_has_rows_when_every_input_leads_with_the_same_number_of_them() {
        assert_eq!(common_rows(&[input(&[3, 16]), input(&[3])]), Some(3));
        assert_eq!(
            common_rows(&[input(&[3, 16]), input(&[2, 16])]),
            None,
            "inputs disagree"
        );
        assert_eq!(common_rows(&[input(&[0, 16])]), None, "no rows");
        assert_eq!(common_rows(&[input(&[])]), None, "a scalar");
        assert_eq!(common_rows(&[]), None, "no inputs");
    }

    #[test]
    fn only_tensors_leading_with_a_dynamic_dimension_can_batch() {
        let spec = |ty: &str| TensorSpec::declared("x", ty).expect("a spec");
        let dynamic = [spec("tensor<?x16xf32>")];
        assert!(check_batchable(4, &dynamic, &[spec("tensor<?x10xf32>")]).is_ok());
        let error = check_batchable(4, &dynamic, &[spec("tensor<1x10xf32>")]).unwrap_err();
        assert!(error.message().contains("output 'x' has shape [1, 10]"), "{error}");
        let error = check_batchable(4, &[spec("f32")], &dynamic).unwrap_err();
        assert!(error.message().contains("(a scalar)"), "{error}");
    }
}
