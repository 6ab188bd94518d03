//! Tests of workflow files.

mod attempt;
mod compat;
mod positions;
mod render;
mod schedules;
mod syntax;
mod waits;
