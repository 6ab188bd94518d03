//! Tests of the real `apollo11` binary.

mod blobs;
mod bundles;
mod conditions;
mod connections;
mod examples;
mod gc;
mod gc_left;
mod harness;
mod hostile;
mod inspect;
mod killed;
mod lifecycle;
mod missing;
mod operator;
mod orphans;
mod output;
mod params;
mod paths;
mod runbook;
mod scrub;
mod serve;
mod storage;
mod store_tls;
mod traces;
mod validation;
mod workers;
