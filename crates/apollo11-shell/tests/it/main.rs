//! Tests of workflow files.

mod compat;
