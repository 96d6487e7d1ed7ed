//! NumPy dtypes and halo element types, both ways (IREE's mapping; bfloat16 and the 8-bit floats
//! through `ml_dtypes`).

use crate::errors::{invalid_argument, IntoPyResult};
use halo_hal::{ElementType, NumericalType};
use halo_runtime::npy;
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;

/// The `ml_dtypes` types halo knows, by their NumPy name.
const ML_DTYPES: [(&str, ElementType); 6] = [
    ("bfloat16", ElementType::BFLOAT_16),
    ("float8_e5m2", ElementType::new(NumericalType::Float8E5M2, 8)),
    ("float8_e4m3fn", ElementType::new(NumericalType::Float8E4M3Fn, 8)),
    ("float8_e5m2fnuz", ElementType::new(NumericalType::Float8E5M2Fnuz, 8)),
    ("float8_e4m3fnuz", ElementType::new(NumericalType::Float8E4M3Fnuz, 8)),
    ("float8_e8m0fnu", ElementType::new(NumericalType::Float8E8M0Fnu, 8)),
];

/// The element type of arrays of `dtype`: `.npy`'s mapping for NumPy's own dtypes, the table
/// above for `ml_dtypes`'.
pub fn element_type_of(dtype: &Bound<'_, PyArrayDescr>) -> PyResult<ElementType> {
    if dtype.kind() == b'V' {
        let name = dtype.str()?.to_string();
        let found = ML_DTYPES.iter().find(|(known, _)| *known == name);
        return found
            .map(|(_, element_type)| *element_type)
            .ok_or_else(|| invalid_argument(format!("NumPy dtype '{name}' has no halo element type")));
    }
    let typestr: String = dtype.getattr("str")?.extract()?;
    npy::element_type_of_typestr(&typestr).py()
}

/// How NumPy spells an element type.
pub enum NumpyType {
    /// A built-in dtype, as an array-interface type string (`<f4`).
    Builtin(String),
    /// An `ml_dtypes` dtype: its name, and the type string of raw items of its size (`|V2`).
    MlDtypes(&'static str, String),
}

/// The NumPy type of `element_type`.
pub fn numpy_type_of(element_type: ElementType) -> PyResult<NumpyType> {
    if let Some((name, _)) = ML_DTYPES.iter().find(|(_, known)| *known == element_type) {
        return Ok(NumpyType::MlDtypes(name, format!("|V{}", element_type.byte_size())));
    }
    npy::typestr_of(element_type).map(NumpyType::Builtin).py()
}

/// The NumPy dtype object of `element_type` (importing `ml_dtypes` where it needs one).
pub fn dtype_of<'py>(py: Python<'py>, element_type: ElementType) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy")?;
    match numpy_type_of(element_type)? {
        NumpyType::Builtin(typestr) => numpy.call_method1("dtype", (typestr,)),
        NumpyType::MlDtypes(name, _) => numpy.call_method1("dtype", (ml_dtypes_type(py, name)?,)),
    }
}

/// The `ml_dtypes` scalar type `name`, or an error saying to install it.
pub fn ml_dtypes_type<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let module = py.import("ml_dtypes").map_err(|_| {
        crate::errors::to_py(halo_hal::Error::unimplemented(format!(
            "arrays of {name} need the ml_dtypes package (pip install ml_dtypes)"
        )))
    })?;
    module.getattr(name)
}
