//! Tests of the real `apollo11` binary.

mod blobs;
mod harness;
mod hostile;
mod inspect;
mod lifecycle;
mod paths;
mod storage;
mod validation;
