#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

pub mod classify;
pub mod definition;
pub mod files;
pub mod run_folder;
pub mod shell;

pub use definition::{load, parse, DefinitionError};
pub use shell::{workflow, ShellStep};
