//! The run bundle decoder: the input is a whole bundle file. Nothing may panic; a bundle it
//! accepts is written again by `encode` into one it reads back as the same run.
#![no_main]

use apollo11_log::bundle::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(bundle) = decode(bytes) {
        let again = encode(&bundle).expect("a decoded bundle encodes");
        assert_eq!(decode(&again).expect("its encoding decodes"), bundle);
    }
});
