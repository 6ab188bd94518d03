//! Tests of workflow files.

mod compat;
mod render;
mod runbook;
mod syntax;
