//! The HTTP API's request handling: bodies, paths, query strings and headers of arbitrary
//! requests through the real router. See `apollo11_fuzz::http::check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::http::check(data));
