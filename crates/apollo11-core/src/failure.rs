//! Why an attempt failed, as a class: what a `Failed` event carries, what a retry policy is
//! chosen by, what front ends show and metrics count. And the fingerprint of a failure, with
//! which the machine tells a failure that repeats itself from one that varies.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The class of a failed attempt. Written as text (`exit:3`, `signal:KILL`, `timeout`,
/// `transient`): see [`FailureClass::name`] and [`FailureClass::parse`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureClass {
    /// The command exited with this code (not 0).
    Exit(i32),
    /// The command was killed by this signal (`KILL`, `SEGV`, …, or its number).
    Signal(String),
    /// The attempt ran past its timeout and the engine stopped it.
    Timeout,
    /// The kernel killed it for memory in its cgroup (only when a cgroup's OOM counter says
    /// so).
    Oom,
    /// It used up its CPU time.
    CpuTime,
    /// It could not be started: command not found, folder missing, exec refused.
    Spawn,
    /// Its output was over `STEP_OUTPUT_BYTES_MAX`.
    OutputTooLarge,
    /// An engine that stopped left it unfinished.
    Interrupted,
    /// The worker running it stopped answering.
    WorkerLost,
    /// No worker could take it in time.
    NoWorker,
    /// A failure of no more precise class (a Rust step's own error, a panic, a failure
    /// logged before classes existed).
    Error,
    /// A class the workflow's author declared (`transient`, `fatal`), given by a rule
    /// over the exit code and the last lines of stderr.
    Author(String),
}

/// The names of the classes without a parameter, and of the families `exit` and `signal`:
/// the keys a per-class retry policy may use besides the author's classes, and names an
/// author class may not take.
pub const BUILTIN_CLASSES: [&str; 11] = [
    "exit",
    "signal",
    "timeout",
    "oom",
    "cpu_time",
    "spawn",
    "output_too_large",
    "interrupted",
    "worker_lost",
    "no_worker",
    "error",
];

impl FailureClass {
    /// The class as written: `exit:N`, `signal:NAME`, or its name.
    pub fn name(&self) -> String {
        match self {
            FailureClass::Exit(code) => format!("exit:{code}"),
            FailureClass::Signal(signal) => format!("signal:{signal}"),
            FailureClass::Author(name) => name.clone(),
            other => other.family().to_owned(),
        }
    }

    /// The class without its parameter: `exit`, `signal`, or the name of any other class.
    /// A per-class retry policy is looked up by [`FailureClass::name`], then by this.
    pub fn family(&self) -> &str {
        match self {
            FailureClass::Exit(_) => "exit",
            FailureClass::Signal(_) => "signal",
            FailureClass::Timeout => "timeout",
            FailureClass::Oom => "oom",
            FailureClass::CpuTime => "cpu_time",
            FailureClass::Spawn => "spawn",
            FailureClass::OutputTooLarge => "output_too_large",
            FailureClass::Interrupted => "interrupted",
            FailureClass::WorkerLost => "worker_lost",
            FailureClass::NoWorker => "no_worker",
            FailureClass::Error => "error",
            FailureClass::Author(name) => name,
        }
    }

    /// Reads a class as [`FailureClass::name`] writes it; any other text is an author class.
    pub fn parse(text: &str) -> FailureClass {
        if let Some(code) = text.strip_prefix("exit:").and_then(|c| c.parse().ok()) {
            return FailureClass::Exit(code);
        }
        if let Some(signal) = text.strip_prefix("signal:") {
            return FailureClass::Signal(signal.to_owned());
        }
        match text {
            "timeout" => FailureClass::Timeout,
            "oom" => FailureClass::Oom,
            "cpu_time" => FailureClass::CpuTime,
            "spawn" => FailureClass::Spawn,
            "output_too_large" => FailureClass::OutputTooLarge,
            "interrupted" => FailureClass::Interrupted,
            "worker_lost" => FailureClass::WorkerLost,
            "no_worker" => FailureClass::NoWorker,
            "error" => FailureClass::Error,
            other => FailureClass::Author(other.to_owned()),
        }
    }

    /// The class of a failure logged before classes existed, from its text: `timeout` and
    /// `interrupted` as the engine wrote them, `no_worker` and `worker_lost` from the
    /// prefixes a shell step's placement wrote, `exit:N` from a shell step's
    /// `exited with code N`, `error` for anything else.
    pub fn of_legacy(error: &str) -> FailureClass {
        match error {
            "timeout" => return FailureClass::Timeout,
            "interrupted" => return FailureClass::Interrupted,
            _ if error.starts_with("no_worker: ") => return FailureClass::NoWorker,
            _ if error.starts_with("worker_lost: ") => return FailureClass::WorkerLost,
            _ => {}
        }
        error
            .strip_prefix("exited with code ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|code| code.parse().ok())
            .map_or(FailureClass::Error, FailureClass::Exit)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for FailureClass {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for FailureClass {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(FailureClass::parse(&String::deserialize(d)?))
    }
}

/// One failed attempt, as a `Failed` event records it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttemptFailure {
    /// Its class.
    pub class: FailureClass,
    /// What went wrong, in words.
    pub error: String,
    /// False when the step itself says no retry can help.
    pub retryable: bool,
    /// The failure's [`fingerprint`]; 0 for a failure that has none (a timeout, a lost
    /// worker), which never counts as the same failure repeated.
    pub fingerprint: u64,
    /// Why the engine will not try again, when the retry policy stopped here (`the same
    /// failure repeated`, `class spawn is never retried`), or how long it waits because the
    /// step asked; empty otherwise.
    pub note: String,
    /// The delay before the next attempt the step asked for, in milliseconds: honoured up
    /// to its class's `max_ms`, in place of the backoff.
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
}

impl AttemptFailure {
    /// A failure of `class` with no fingerprint and no note.
    pub fn new(class: FailureClass, error: impl Into<String>, retryable: bool) -> AttemptFailure {
        AttemptFailure {
            class,
            error: error.into(),
            retryable,
            fingerprint: 0,
            note: String::new(),
            retry_after_ms: None,
        }
    }

    /// A failure logged before classes existed: its class read from its text.
    pub fn legacy(error: &str, retryable: bool) -> AttemptFailure {
        AttemptFailure::new(FailureClass::of_legacy(error), error, retryable)
    }
}

/// The fingerprint of a failure: FNV-1a of its class and of `lines` (the last lines of its
/// stderr) normalized, every run of hex digits that holds a decimal digit (numbers, ids,
/// addresses, timestamps) replaced by `#`. Never 0, so that 0 can mean "none".
pub fn fingerprint(class: &FailureClass, lines: &str) -> u64 {
    let normalized = normalize(lines);
    let hash = fnv1a(&[class.name().as_bytes(), b"\n", normalized.as_bytes()]);
    hash.max(1)
}

/// `text` with every run of hex digits that holds a decimal digit replaced by `#`, and
/// trailing whitespace of each line removed.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut run = String::new();
        for c in line.trim_end().chars() {
            if c.is_ascii_hexdigit() {
                run.push(c);
                continue;
            }
            flush_run(&mut out, &mut run);
            out.push(c);
        }
        flush_run(&mut out, &mut run);
        out.push('\n');
    }
    out
}

fn flush_run(out: &mut String, run: &mut String) {
    if run.chars().any(|c| c.is_ascii_digit()) {
        out.push('#');
    } else {
        out.push_str(run);
    }
    run.clear();
}

/// 64-bit FNV-1a: stable across platforms and Rust versions.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|p| p.iter()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_reads_back_as_written() {
        for text in [
            "exit:75",
            "signal:KILL",
            "timeout",
            "spawn",
            "transient",
            "error",
        ] {
            assert_eq!(FailureClass::parse(text).name(), text);
        }
        assert_eq!(
            FailureClass::parse("exit:x"),
            FailureClass::Author("exit:x".into())
        );
        assert_eq!(
            FailureClass::of_legacy("exited with code 3 (log: x)"),
            FailureClass::Exit(3)
        );
        assert_eq!(FailureClass::of_legacy("timeout"), FailureClass::Timeout);
        assert_eq!(FailureClass::of_legacy("boom"), FailureClass::Error);
        assert_eq!(
            FailureClass::of_legacy("worker_lost: w1"),
            FailureClass::WorkerLost
        );
    }

    #[test]
    fn numbers_ids_and_times_do_not_change_a_fingerprint_but_words_do() {
        let class = FailureClass::Exit(1);
        let a = fingerprint(
            &class,
            "2026-12-06T01:02:03Z pid 4411: refused at 0x7ffe12ab",
        );
        let b = fingerprint(
            &class,
            "2026-12-07T09:08:07Z pid 17: refused at 0x7ffd00cd  ",
        );
        assert_eq!(a, b);
        assert_ne!(a, fingerprint(&class, "pid 1: accepted at 0x1"));
        assert_ne!(
            a,
            fingerprint(
                &FailureClass::Exit(2),
                "2026-12-06T01:02:03Z pid 4411: refused at 0x7ffe12ab"
            )
        );
        assert_eq!(normalize("face cafe1 b"), "face # b\n");
    }
}
