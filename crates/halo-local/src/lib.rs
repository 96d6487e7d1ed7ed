//! CPU executables and drivers.
