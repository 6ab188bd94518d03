//! Segment recovery on a flags byte and arbitrary segment bytes.
//! See `apollo11_fuzz::targets::segment`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::targets::segment(data));
