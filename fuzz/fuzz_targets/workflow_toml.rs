//! The TOML workflow loader on any text.
//! See `apollo11_fuzz::targets::workflow_toml`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::targets::workflow_toml(data));
