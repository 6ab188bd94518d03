//! The event decoder on one record body framed with a valid checksum.
//! See `apollo11_fuzz::targets::event_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| apollo11_fuzz::targets::event_record(data));
