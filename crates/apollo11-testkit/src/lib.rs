//! Test helpers shared by every Apollo-11 crate: a builder for event histories and proptest
//! strategies for events, histories and graphs. Not published.

#![allow(missing_docs)]

mod graphs;
mod history;

pub use graphs::{arb_cyclic_graph, arb_dag_edges, Edges};
pub use history::{arb_event_kind, arb_history, History};
