//! Tests of the server over real HTTP on a loopback port: routes and their errors, auth,
//! limits, hostile paths, the event stream, actions (started and acted on even when their request is dropped), `/metrics`, and a server killed with `kill -9`.

mod actions;
mod archive;
mod crash;
mod dropped;
mod gc;
mod harness;
mod idempotent;
mod metrics;
mod params;
mod routes;
mod schema;
mod security;
mod stream;
