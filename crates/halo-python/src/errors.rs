//! halo's errors as Python exceptions: `halo.Error`, and one subclass per IREE status code.

use halo_hal::StatusCode;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyType;

pyo3::create_exception!(
    halo,
    Error,
    PyException,
    "An error from halo, carrying IREE's status code as `code`."
);

macro_rules! status_exceptions {
    ($($code:ident => $class:ident),* $(,)?) => {
        $(pyo3::create_exception!(halo, $class, Error, concat!("halo's `", stringify!($code), "` status."));)*

        /// The exception class for a status code.
        fn class_of(py: Python<'_>, code: StatusCode) -> Bound<'_, PyType> {
            match code {
                $(StatusCode::$code => py.get_type::<$class>(),)*
            }
        }

        /// Adds `Error` and its subclasses to the module.
        pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = module.py();
            module.add("Error", py.get_type::<Error>())?;
            $(module.add(stringify!($class), py.get_type::<$class>())?;)*
            Ok(())
        }
    };
}

status_exceptions! {
    Cancelled => CancelledError,
    Unknown => UnknownError,
    InvalidArgument => InvalidArgumentError,
    DeadlineExceeded => DeadlineExceededError,
    NotFound => NotFoundError,
    AlreadyExists => AlreadyExistsError,
    PermissionDenied => PermissionDeniedError,
    ResourceExhausted => ResourceExhaustedError,
    FailedPrecondition => FailedPreconditionError,
    Aborted => AbortedError,
    OutOfRange => OutOfRangeError,
    Unimplemented => UnimplementedError,
    Internal => InternalError,
    Unavailable => UnavailableError,
    DataLoss => DataLossError,
    Unauthenticated => UnauthenticatedError,
    Deferred => DeferredError,
    Incompatible => IncompatibleError,
}

/// The Python exception for a halo error: its class follows the status code, its message is the
/// runtime's whole message with the context chain, and `code` names the status
/// (`"INVALID_ARGUMENT"`).
pub fn to_py(error: halo_hal::Error) -> PyErr {
    Python::attach(|py| {
        let class = class_of(py, error.code());
        let raised = PyErr::from_type(class, error.to_string());
        if let Err(failed) = raised.value(py).setattr("code", error.code().name()) {
            return failed;
        }
        raised
    })
}

/// `halo.InvalidArgumentError` with `message`: for Python inputs the runtime cannot take.
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    to_py(halo_hal::Error::invalid_argument(message))
}

/// Converts halo results for `?` in Python-facing code.
pub trait IntoPyResult<T> {
    /// The result with a halo error turned into its Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for halo_hal::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
