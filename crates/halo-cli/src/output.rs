//! Standard output that reports failures instead of panicking (`println!` panics when stdout is a
//! closed pipe or a full disk). A reader that went away (`halo devices | head -1`) ends the
//! command quietly, as it does other command-line tools; any other failure is an error message.

use halo_hal::{Error, Result};
use std::io::Write;

/// The message of the error that stands for "the reader closed standard output".
const CLOSED: &str = "standard output was closed by its reader";

/// Writes formatted text to standard output.
pub fn write(text: std::fmt::Arguments<'_>) -> Result<()> {
    std::io::stdout().lock().write_fmt(text).map_err(output_error)
}

/// Flushes what standard output still buffers, so that a full disk is reported, not lost.
pub fn flush() -> Result<()> {
    std::io::stdout().lock().flush().map_err(output_error)
}

/// Whether `error` only says that the reader of standard output went away.
pub fn is_closed(error: &Error) -> bool {
    error.code() == halo_hal::StatusCode::Cancelled && error.message() == CLOSED
}

fn output_error(error: std::io::Error) -> Error {
    match error.kind() {
        std::io::ErrorKind::BrokenPipe => Error::cancelled(CLOSED),
        std::io::ErrorKind::StorageFull => Error::resource_exhausted(format!("writing standard output: {error}")),
        _ => Error::unavailable(format!("writing standard output: {error}")),
    }
}

/// `print!` that returns the failure as a `halo_hal::Error`.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write(format_args!($($arg)*)) };
}

/// `println!` that returns the failure as a `halo_hal::Error`.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::output::write(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {out, outln};
