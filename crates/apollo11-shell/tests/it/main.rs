//! Tests of workflow files.

mod attempt;
mod compat;
mod render;
mod syntax;
