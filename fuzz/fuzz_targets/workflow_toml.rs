//! The TOML workflow loader: any text either loads as a workflow that the runtime's builder
//! accepts (what `validate` accepts runs), or is refused with a message at a place inside
//! the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match apollo11_shell::parse(text, "fuzz.toml", Path::new("/fuzz")) {
        Ok(spec) => {
            if let Err(e) = apollo11_shell::workflow(&spec, Path::new("/data")) {
                panic!("a workflow the loader accepted does not build: {e}");
            }
        }
        Err(e) => {
            assert!(!e.message.is_empty(), "an error says what is wrong");
            assert!(
                e.line <= text.split('\n').count(),
                "{e}: line past the text"
            );
            if e.line > 0 {
                let line = text.split('\n').nth(e.line - 1).unwrap_or_default();
                assert!(e.column <= line.len() + 1, "{e}: column past its line");
            }
        }
    }
});
