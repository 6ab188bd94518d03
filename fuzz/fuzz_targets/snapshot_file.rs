//! The snapshot decoder on a flags byte and the template log's snapshot file.
//! See `apollo11_fuzz::targets::snapshot_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::targets::snapshot_file(data));
