//! Tests of the real `apollo11` binary.

mod harness;
mod inspect;
mod lifecycle;
mod operator;
mod storage;
mod validation;
