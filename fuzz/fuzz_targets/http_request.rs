//! The HTTP API's request handling: bodies, paths, query strings and headers of arbitrary
//! requests through the real router (see `apollo11_fuzz::http`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| apollo11_fuzz::http::check(data));
