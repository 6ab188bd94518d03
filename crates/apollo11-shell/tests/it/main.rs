//! Tests of workflow files.

mod attempt;
mod compat;
mod gate;
mod positions;
mod render;
mod schedules;
mod syntax;
mod waits;
