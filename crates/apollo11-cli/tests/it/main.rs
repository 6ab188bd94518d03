//! Tests of the real `apollo11` binary.

mod harness;
mod inspect;
mod lifecycle;
mod paths;
mod storage;
mod validation;
