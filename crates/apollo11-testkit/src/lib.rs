//! Test helpers shared by every Apollo-11 crate: proptest strategies for events, histories
//! and graphs, and (re-exported) the history builder `apollo11_machine::History`. Not
//! published.

#![allow(missing_docs)]

mod graphs;
mod history;

pub use graphs::{arb_cyclic_graph, arb_dag_edges, Edges};
pub use history::{arb_event_kind, arb_history, History};
