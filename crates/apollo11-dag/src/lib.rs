#![doc = include_str!("../README.md")]
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod build;
mod error;
mod graph;
mod plan;
#[cfg(feature = "proptest")]
pub mod strategies;

pub use error::DagError;
pub use graph::{Dag, NodeId};
