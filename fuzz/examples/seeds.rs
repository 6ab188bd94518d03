//! Writes the seed corpora of `fuzz/seeds/TARGET/` from logs written by the log itself, the
//! example workflows and one request per route:
//! `cargo run --manifest-path fuzz/Cargo.toml --example seeds`.

use apollo11_core::{EventKind, OverrideTarget, Payload, RunId, Seq};
use apollo11_fuzz::datadir::{self, File};
use apollo11_fuzz::{block_on, format, http::TOKEN};
use apollo11_log::{EventStore, NewEvent};
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let template = datadir::template();
    let files = |suffix: &str| -> Vec<&File> {
        let files = template.iter().filter(|(name, _)| name.ends_with(suffix));
        files.collect()
    };
    let segments = files(".seg");
    for (i, (_, bytes)) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        write(
            &root,
            "segment",
            &format!("segment-{i}"),
            &[&[3u8][..], bytes].concat(),
        );
        if last {
            write(&root, "segment", "last", &[&[7u8][..], bytes].concat());
        }
    }
    for (i, (_, bytes)) in files(".idx").iter().enumerate() {
        let flags = (i as u8) << 1 | 1;
        write(
            &root,
            "index_file",
            &format!("index-{i}"),
            &[&[flags][..], bytes].concat(),
        );
    }
    for (_, bytes) in files(".snap") {
        write(
            &root,
            "snapshot_file",
            "snapshot",
            &[&[1u8][..], bytes].concat(),
        );
    }
    for (i, event) in events().into_iter().enumerate() {
        write(
            &root,
            "event_record",
            &format!("event-{i}"),
            &first_body(event),
        );
    }
    for example in ["five-stage", "ops-runbook"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../examples/{example}/workflow.toml"));
        let text = std::fs::read(path).expect("an example workflow");
        write(&root, "workflow_toml", example, &text);
    }
    for (i, request) in requests().iter().enumerate() {
        write(
            &root,
            "http_request",
            &format!("request-{i:02}"),
            request.as_bytes(),
        );
    }
}

fn write(root: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).expect("a seeds folder");
    std::fs::write(dir.join(name), bytes).expect("a seed file");
}

/// One event of each kind, with and without a step and a payload.
fn events() -> Vec<NewEvent> {
    let by = || ("ops".to_owned(), "a reason".to_owned());
    let kinds = [
        EventKind::RunCreated {
            workflow: "{\"name\":\"w\"}".into(),
        },
        EventKind::Started,
        EventKind::Succeeded,
        EventKind::Failed {
            error: "exit 3".into(),
            retryable: true,
        },
        EventKind::Compensating,
        EventKind::Compensated,
        EventKind::CompensationFailed {
            error: "interrupted".into(),
            retryable: false,
        },
        EventKind::ManualOverride {
            to: OverrideTarget::Skipped,
            by: by().0,
            reason: by().1,
        },
        EventKind::RunPaused {
            by: by().0,
            reason: by().1,
        },
        EventKind::RunResumed {
            by: by().0,
            reason: by().1,
        },
        EventKind::RollbackRequested {
            by: by().0,
            reason: by().1,
        },
    ];
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| NewEvent {
            step: (i % 2 == 1).then(|| "step".into()),
            kind,
            attempt: i as u32,
            at_ms: 1_700_000_000_000 + i as u64,
            instance: "host-1".into(),
            payload: Payload::inline(vec![i as u8; i * 3]),
        })
        .collect()
}

/// The body of the record of `event`, the first of a new log.
fn first_body(event: NewEvent) -> Vec<u8> {
    let files = datadir::written(|log| {
        block_on(log.append(&RunId::from("run-1"), Seq(1), vec![event])).expect("an append");
    });
    let (_, segment) = files
        .iter()
        .find(|(n, _)| n.ends_with(".seg"))
        .expect("a segment");
    format::first_record_body(segment)
        .expect("a record")
        .to_vec()
}

/// One request per route (see `apollo11_fuzz::http` for the shape), and a few refused ones.
fn requests() -> Vec<String> {
    let auth = format!("Authorization: Bearer {TOKEN}");
    let get = |target: &str| format!("GET {target}\n{auth}\n\n");
    let post = |target: &str, body: &str| {
        format!("POST {target}\n{auth}\nContent-Type: application/json\n\n{body}")
    };
    let note = r#"{"by":"fuzz","reason":"seed"}"#;
    vec![
        "GET /healthz\n\n".into(),
        "GET /readyz\n\n".into(),
        "GET /\n\n".into(),
        "GET /ui/app.js\n\n".into(),
        "GET /api/v1/runs\n\n".into(),
        get("/api/v1/openapi.json"),
        get("/api/v1/workflows"),
        post("/api/v1/workflows/reload", ""),
        get("/api/v1/runs?state=succeeded&workflow=ok&limit=1"),
        get("/api/v1/runs?limit=1&cursor=abc"),
        post("/api/v1/runs", r#"{"workflow":"ok"}"#),
        post("/api/v1/runs", r#"{"workflow":"ok","run_id":"seeded"}"#),
        get("/api/v1/runs/done"),
        get("/api/v1/runs/done?at=3"),
        get("/api/v1/runs/done/events?after=1&limit=2"),
        get("/api/v1/runs/held/events/stream?after=1"),
        format!("GET /api/v1/runs/held/events/stream\n{auth}\nLast-Event-ID: 2\n\n"),
        get("/api/v1/runs/held/plan"),
        post("/api/v1/runs/held/pause", note),
        post("/api/v1/runs/held/resume", note),
        post("/api/v1/runs/held/rollback", note),
        post(
            "/api/v1/runs/held/steps/a/override",
            r#"{"to":"succeeded","by":"fuzz","reason":"seed"}"#,
        ),
        get("/api/v1/runs/done/steps/a/log?attempt=1&compensation=false"),
        get("/metrics"),
        format!("DELETE /api/v1/runs\n{auth}\n\n"),
        get("/api/v1/runs/%2e%2e/steps/a%2Fb/log"),
    ]
}
