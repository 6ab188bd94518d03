//! Tests of the real `apollo11` binary.

mod blobs;
mod harness;
mod hostile;
mod inspect;
mod lifecycle;
mod operator;
mod output;
mod paths;
mod storage;
mod validation;
