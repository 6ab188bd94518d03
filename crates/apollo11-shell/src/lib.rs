#![doc = include_str!("../README.md")]

pub mod definition;
pub mod files;
pub mod shell;

pub use definition::{load, parse, DefinitionError};
pub use shell::{workflow, ShellStep};
