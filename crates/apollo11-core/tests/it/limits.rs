//! The limits are tested by the relations they must keep, not by restating their values:
//! changing one so that another stops making sense fails here.

// The assertions are on constants on purpose: they fail when someone (or a mutation test)
// changes a limit.
#![allow(clippy::assertions_on_constants)]

use apollo11_core::limits::*;

/// Bytes of an encoded event besides its strings and payload (ids, seq, attempt, time,
/// variant tags and length prefixes), with room to spare.
const EVENT_FIXED_BYTES: u32 = 128;

/// The largest event a writer may append: run id and step name at the name limit, an
/// instance label, an operator's name and reason (the longest kind's strings), and an inline
/// payload at the limit.
fn largest_event_bytes() -> u32 {
    2 * NAME_BYTES_MAX
        + 2 * LABEL_BYTES_MAX
        + ERROR_MESSAGE_BYTES_MAX
        + PAYLOAD_INLINE_BYTES_MAX
        + EVENT_FIXED_BYTES
}

#[test]
fn the_largest_event_fits_one_record() {
    assert!(
        largest_event_bytes() <= RECORD_BYTES_MAX,
        "{} > {RECORD_BYTES_MAX}",
        largest_event_bytes()
    );
}

#[test]
fn a_segment_at_its_largest_plus_one_full_append_keeps_u32_offsets() {
    // The log rolls to a new segment before an append that would pass the limit, so a
    // segment holds at most the limit plus one append (and its commit record); record
    // offsets inside a segment are u32.
    let append = u64::from(APPEND_BATCH_EVENTS_MAX + 1) * u64::from(RECORD_BYTES_MAX);
    assert!(SEGMENT_BYTES_MAX_LIMIT + append <= u64::from(u32::MAX));
    assert!(
        SEGMENT_BYTES_MAX <= SEGMENT_BYTES_MAX_LIMIT,
        "the default is accepted"
    );
}

#[test]
fn the_default_segment_holds_the_largest_append() {
    let append = u64::from(APPEND_BATCH_EVENTS_MAX + 1) * u64::from(RECORD_BYTES_MAX);
    assert!(
        append <= SEGMENT_BYTES_MAX,
        "an append never overfills a default segment"
    );
}

#[test]
fn preallocation_grows_a_segment_by_whole_pages_and_many_records_at_a_time() {
    const PAGE_BYTES: u64 = 4096;
    assert_eq!(SEGMENT_PREALLOCATE_BYTES % PAGE_BYTES, 0);
    assert!(SEGMENT_PREALLOCATE_BYTES >= 16 * u64::from(RECORD_BYTES_MAX));
    assert!(
        SEGMENT_PREALLOCATE_BYTES < SEGMENT_BYTES_MAX,
        "a segment grows in steps"
    );
}

#[test]
fn group_commit_gathers_at_least_one_largest_record() {
    assert!(GROUP_COMMIT_BYTES_MAX >= RECORD_BYTES_MAX);
}

#[test]
fn names_fit_one_path_component_with_their_suffixes() {
    // A step's files are `<step>.<attempt>.compensate.output`: the name, a u32 attempt and
    // the longest suffix must stay within the 255 bytes of one file name.
    let suffix = ".4294967295.compensate.output".len() as u32;
    assert!(NAME_BYTES_MAX + suffix <= 255);
    assert!(
        NAME_BYTES_MAX <= LABEL_BYTES_MAX,
        "a run id may be used as a label"
    );
}

#[test]
fn every_bound_allows_something() {
    for (what, value) in [
        ("inline payload", u64::from(PAYLOAD_INLINE_BYTES_MAX)),
        ("error message", u64::from(ERROR_MESSAGE_BYTES_MAX)),
        ("dag nodes", u64::from(DAG_NODES_MAX)),
        ("snapshot interval", SNAPSHOT_EVERY_EVENTS),
        ("queue depth", u64::from(QUEUE_DEPTH_MAX)),
        ("auto timeout samples", u64::from(AUTO_TIMEOUT_SAMPLES_MIN)),
    ] {
        assert!(value > 0, "{what}");
    }
    // An error message is kept whole when it names a run, a step and its log file.
    assert!(ERROR_MESSAGE_BYTES_MAX >= 2 * NAME_BYTES_MAX + 255);
}
