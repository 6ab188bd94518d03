//! Tests of workflow files.

mod compat;
mod syntax;
