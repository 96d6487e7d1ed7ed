//! The one error type of halo: IREE's status codes plus a message and a context chain.

use std::fmt;

/// IREE's canonical status codes (the same numbers as `iree_status_code_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum StatusCode {
    /// The operation was cancelled, typically by the caller or by shutdown.
    Cancelled = 1,
    /// An error with no better code; prefer a specific one.
    Unknown = 2,
    /// The caller passed something malformed: a bad flag, shape, range or file.
    InvalidArgument = 3,
    /// A wait or operation ran out of time before it could finish.
    DeadlineExceeded = 4,
    /// A named thing (file, function, export, device) does not exist.
    NotFound = 5,
    /// Something being created exists already.
    AlreadyExists = 6,
    /// The caller may not perform the operation.
    PermissionDenied = 7,
    /// Memory or another resource ran out.
    ResourceExhausted = 8,
    /// The object is not in the state the operation needs (e.g. recording ended).
    FailedPrecondition = 9,
    /// The operation was aborted because of a concurrent failure.
    Aborted = 10,
    /// A value lies outside the valid range (ordinal, offset, length).
    OutOfRange = 11,
    /// The operation is valid but not implemented by this driver.
    Unimplemented = 12,
    /// An invariant inside halo was broken: a bug.
    Internal = 13,
    /// The thing is not present on this machine (a driver library, a device); tests skip on it.
    Unavailable = 14,
    /// Data was lost or corrupted beyond recovery.
    DataLoss = 15,
    /// The caller lacks credentials for the operation.
    Unauthenticated = 16,
    /// An operation is waiting on something not yet available (used by async waits).
    Deferred = 17,
    /// The input is incompatible with what this build supports (e.g. a newer ABI version).
    Incompatible = 18,
}

impl StatusCode {
    /// The code a program's raw status number names, as IREE reads it: only the low 5 bits
    /// count (99 becomes 3, `INVALID_ARGUMENT`); 0 and unused numbers are `UNKNOWN`.
    pub fn from_masked(code: u32) -> StatusCode {
        use StatusCode::*;
        [
            Cancelled,
            Unknown,
            InvalidArgument,
            DeadlineExceeded,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            ResourceExhausted,
            FailedPrecondition,
            Aborted,
            OutOfRange,
            Unimplemented,
            Internal,
            Unavailable,
            DataLoss,
            Unauthenticated,
            Deferred,
            Incompatible,
        ]
        .get(((code & 0x1F) as usize).wrapping_sub(1))
        .copied()
        .unwrap_or(Unknown)
    }

    /// IREE's spelling of the code, as its tools print it.
    pub fn name(self) -> &'static str {
        match self {
            StatusCode::Cancelled => "CANCELLED",
            StatusCode::Unknown => "UNKNOWN",
            StatusCode::InvalidArgument => "INVALID_ARGUMENT",
            StatusCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            StatusCode::NotFound => "NOT_FOUND",
            StatusCode::AlreadyExists => "ALREADY_EXISTS",
            StatusCode::PermissionDenied => "PERMISSION_DENIED",
            StatusCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            StatusCode::FailedPrecondition => "FAILED_PRECONDITION",
            StatusCode::Aborted => "ABORTED",
            StatusCode::OutOfRange => "OUT_OF_RANGE",
            StatusCode::Unimplemented => "UNIMPLEMENTED",
            StatusCode::Internal => "INTERNAL",
            StatusCode::Unavailable => "UNAVAILABLE",
            StatusCode::DataLoss => "DATA_LOSS",
            StatusCode::Unauthenticated => "UNAUTHENTICATED",
            StatusCode::Deferred => "DEFERRED",
            StatusCode::Incompatible => "INCOMPATIBLE",
        }
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error: a status code, what went wrong, and what was being done when it did (outermost last).
///
/// Boxed, so `Result<T>` is barely larger than `T`: every call on a hot path returns one, and
/// the unboxed 56 bytes were copied around on each success.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<ErrorParts>);

#[derive(Clone, PartialEq, Eq)]
struct ErrorParts {
    code: StatusCode,
    message: String,
    context: Vec<String>,
}

/// `Result` with halo's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error with `code` and `message`.
    pub fn new(code: StatusCode, message: impl Into<String>) -> Self {
        Error(Box::new(ErrorParts {
            code,
            message: message.into(),
            context: Vec::new(),
        }))
    }

    /// The status code.
    pub fn code(&self) -> StatusCode {
        self.0.code
    }

    /// The innermost message, without context.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The context chain, innermost first.
    pub fn context_chain(&self) -> &[String] {
        &self.0.context
    }

    /// Adds what was being done when this error happened.
    pub fn context(mut self, what: impl Into<String>) -> Self {
        self.0.context.push(what.into());
        self
    }

    /// True when the error means "not present on this machine".
    pub fn is_unavailable(&self) -> bool {
        self.0.code == StatusCode::Unavailable
    }
}

macro_rules! constructors {
    ($($name:ident => $code:ident),* $(,)?) => {
        impl Error {
            $(
                #[doc = concat!("An error with status `", stringify!($code), "`.")]
                pub fn $name(message: impl Into<String>) -> Self {
                    Error::new(StatusCode::$code, message)
                }
            )*
        }
    };
}

constructors! {
    cancelled => Cancelled,
    unknown => Unknown,
    invalid_argument => InvalidArgument,
    deadline_exceeded => DeadlineExceeded,
    not_found => NotFound,
    already_exists => AlreadyExists,
    permission_denied => PermissionDenied,
    resource_exhausted => ResourceExhausted,
    failed_precondition => FailedPrecondition,
    aborted => Aborted,
    out_of_range => OutOfRange,
    unimplemented => Unimplemented,
    internal => Internal,
    unavailable => Unavailable,
    data_loss => DataLoss,
    incompatible => Incompatible,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.code, self.0.message)?;
        for what in &self.0.context {
            write!(f, "; while {what}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        let code = match err.kind() {
            std::io::ErrorKind::NotFound => StatusCode::NotFound,
            std::io::ErrorKind::PermissionDenied => StatusCode::PermissionDenied,
            std::io::ErrorKind::AlreadyExists => StatusCode::AlreadyExists,
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => StatusCode::InvalidArgument,
            std::io::ErrorKind::UnexpectedEof => StatusCode::OutOfRange,
            std::io::ErrorKind::OutOfMemory => StatusCode::ResourceExhausted,
            _ => StatusCode::Unknown,
        };
        Error::new(code, err.to_string())
    }
}

/// Adds context to a `Result`'s error, like IREE's annotated return-if-error.
pub trait ResultExt<T> {
    /// Adds `what` to the error's context chain.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Adds lazily built context to the error's context chain.
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    #[inline]
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().context(what))
    }

    #[inline]
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| e.into().context(what()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_context_innermost_first() {
        let err: Result<()> = Err(Error::not_found("export 'foo'"));
        let err = err.context("loading executable 'x.so'").context("running").unwrap_err();
        assert_eq!(
            err.to_string(),
            "NOT_FOUND: export 'foo'; while loading executable 'x.so'; while running"
        );
        assert_eq!(err.code(), StatusCode::NotFound);
        assert_eq!(err.code() as u32, 5);
    }

    #[test]
    fn io_errors_keep_their_meaning() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert_eq!(Error::from(io).code(), StatusCode::NotFound);
    }
}
