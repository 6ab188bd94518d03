//! The index file decoder on a flags byte and one of the template log's index files.
//! See `apollo11_fuzz::targets::index_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::targets::index_file(data));
