//! What each fuzz target checks, one function per target taking libFuzzer's input. The
//! libFuzzer binaries (`fuzz_targets/`) call these; so does the replay of every seed, corpus
//! file and regression on stable (`xtask/tests/fuzz_corpus.rs`).

use crate::{block_on, datadir, flags, format};
use apollo11_log::{FileLog, SnapshotStore};
use std::path::Path;
use std::sync::Arc;

/// Every target by name, in the order `cargo xtask fuzz` runs them.
pub const ALL: [(&str, fn(&[u8])); 7] = [
    ("event_record", event_record),
    ("segment", segment),
    ("snapshot_file", snapshot_file),
    ("index_file", index_file),
    ("bundle", bundle),
    ("workflow_toml", workflow_toml),
    ("http_request", crate::http::check),
];

/// The event decoder: the input is the body of one event record, framed with a valid
/// checksum and committed as a batch of its own at the start of a segment, so every byte
/// reaches the decoder (the event must carry id 1 to be indexed). See `datadir::check` for
/// what must hold.
///
/// # Panics
///
/// When a data dir property breaks.
pub fn event_record(body: &[u8]) {
    let mut segment = format::segment_header(1);
    format::push_batch(&mut segment, &[body]);
    let name = "segments/00000000000000000001.seg".to_owned();
    datadir::check(&datadir::with_files(&[(name, segment)]), true);
}

/// Segment recovery on arbitrary bytes. The first input byte holds flags: bit 0 gives the
/// header a valid checksum, bit 1 every record it can walk to, bit 2 puts the segment after
/// the template log's others (as its last segment) instead of alone, bit 3 (over bit 2)
/// compresses it as `compact` does and puts it in place of the template's first, sealed,
/// segment. See `datadir::check`
/// for what must hold.
///
/// # Panics
///
/// When a data dir property breaks.
pub fn segment(data: &[u8]) {
    let Some((flags, bytes)) = flags(data) else {
        return;
    };
    let mut segment = bytes.to_vec();
    if flags & 1 != 0 {
        format::fix_segment_header(&mut segment);
    }
    if flags & 2 != 0 {
        format::fix_record_crcs(&mut segment);
    }
    let names = template_names(".seg");
    let files = if flags & 8 != 0 {
        let first = names.into_iter().min().expect("the template has segments");
        let cold = apollo11_log::encode_cold_segment(&segment).expect("compressing in memory");
        template_with_segment(first, cold)
    } else if flags & 4 != 0 {
        let last = names.into_iter().max().expect("the template has segments");
        template_with_segment(last, segment)
    } else {
        vec![("segments/00000000000000000001.seg".to_owned(), segment)]
    };
    datadir::check(&datadir::with_files(&files), true);
}

/// The snapshot decoder: the template log with its snapshot's bytes replaced by the input
/// after its first byte, whose bit 0 gives the snapshot a valid checksum. See
/// `datadir::check` for what must hold; a snapshot the log loads must cover events it holds.
///
/// # Panics
///
/// When a snapshot past the log's end loads, or a data dir property breaks.
pub fn snapshot_file(data: &[u8]) {
    let Some((flags, bytes)) = flags(data) else {
        return;
    };
    let mut snapshot = bytes.to_vec();
    if flags & 1 != 0 {
        format::fix_snapshot_crc(&mut snapshot);
    }
    let name = template_names(".snap")[0];
    let fs = datadir::with_files(&datadir::template_with(name, snapshot));
    if let Ok(log) = FileLog::open_read_only_with(Arc::new(fs.clone()), datadir::DIR) {
        let last = log.recovery().events;
        if let Ok(Some(loaded)) = block_on(log.load_snapshot()) {
            assert!(
                loaded.watermark.0 <= last,
                "a snapshot past the log's end loaded"
            );
        }
    }
    datadir::check(&fs, true);
}

/// The index file decoder: the template log with one of its index files (the first input
/// byte's bits 1 to 3 choose which) replaced by the rest of the input; bit 0 gives it a
/// valid checksum. See `datadir::check` for what must hold (with a forged checksum, reads
/// may refuse a log `verify` finds clean: see its notes).
///
/// # Panics
///
/// When a data dir property breaks.
pub fn index_file(data: &[u8]) {
    let Some((flags, bytes)) = flags(data) else {
        return;
    };
    let mut index = bytes.to_vec();
    if flags & 1 != 0 {
        format::fix_index_crc(&mut index);
    }
    let names = template_names(".idx");
    let name = names[usize::from(flags >> 1) % names.len()];
    let files = datadir::template_with(name, index);
    datadir::check(&datadir::with_files(&files), flags & 1 == 0);
}

/// The run bundle decoder: the input is a whole bundle file. Nothing may panic; a bundle it
/// accepts is written again by `encode` into one it reads back as the same run.
///
/// # Panics
///
/// When an accepted bundle does not encode, or its encoding does not decode to it.
pub fn bundle(data: &[u8]) {
    use apollo11_bundle::{decode, encode};
    if let Ok(bundle) = decode(data) {
        let again = encode(&bundle).expect("a decoded bundle encodes");
        assert_eq!(decode(&again).expect("its encoding decodes"), bundle);
    }
}

/// The TOML workflow loader: any text either loads as a workflow that the runtime's builder
/// accepts (what `validate` accepts runs) and that instantiates with its default arguments
/// into one it accepts too (or, with a required parameter, is refused naming it), or is
/// refused with a message at a place inside the text.
///
/// # Panics
///
/// When an accepted workflow, or its instantiation, does not build, or a refusal's message
/// is empty or its place outside the text.
pub fn workflow_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match apollo11_shell::parse(text, "fuzz.toml", Path::new("/fuzz")) {
        Ok(spec) => {
            if let Err(e) = apollo11_shell::workflow(&spec, Path::new("/data")) {
                panic!("a workflow the loader accepted does not build: {e}");
            }
            instantiated(&spec);
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
}

/// An accepted file instantiated with its default arguments, as a run given none would be:
/// with every parameter optional, into a definition the runtime's builder accepts (the
/// loader located any error of it already); with one required, refused naming it.
fn instantiated(spec: &apollo11_core::WorkflowSpec) {
    let defaults = std::collections::BTreeMap::new();
    let required = spec.params.iter().find(|p| p.required);
    match (
        apollo11_shell::definition::instantiate(spec, &defaults),
        required,
    ) {
        (Ok(run), None) => {
            if let Err(e) = apollo11_shell::workflow(&run, Path::new("/data")) {
                panic!("a definition instantiated with its defaults does not build: {e}");
            }
        }
        (Err(e), None) => panic!("the loader accepted a file its defaults do not instantiate: {e}"),
        (Ok(_), Some(p)) => panic!("instantiated without its required parameter `{}`", p.name),
        (Err(e), Some(p)) => assert!(e.contains(&p.name), "{e}: names not `{}`", p.name),
    }
}

/// The names of the template's files ending in `suffix`, in the template's order.
/// The template log with its segment `name` holding `bytes`, and without that segment's
/// index file (the open rebuilds it from the segment).
fn template_with_segment(name: &str, bytes: Vec<u8>) -> Vec<datadir::File> {
    let index = name.replace(".seg", ".idx");
    let mut files = datadir::template_with(name, bytes);
    files.retain(|(n, _)| *n != index);
    files
}

fn template_names(suffix: &str) -> Vec<&'static String> {
    let names = datadir::template().iter().map(|(name, _)| name);
    names.filter(|name| name.ends_with(suffix)).collect()
}
