#![doc = include_str!("../README.md")]

mod build;
mod error;
mod graph;
mod plan;

pub use error::DagError;
pub use graph::{Dag, NodeId};
