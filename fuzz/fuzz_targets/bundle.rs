//! The run bundle decoder on a whole bundle file.
//! See `apollo11_fuzz::targets::bundle`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::targets::bundle(data));
