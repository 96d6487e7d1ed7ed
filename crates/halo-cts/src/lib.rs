//! Conformance tests.
