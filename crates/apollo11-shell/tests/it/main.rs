//! Tests of workflow files.

mod attempt;
mod compat;
mod positions;
mod render;
mod syntax;
mod waits;
