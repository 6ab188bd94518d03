//! The HTTP API under arbitrary requests: a server on a data dir holding a succeeded run and
//! a paused one, its router driven with `oneshot` (no socket). The input is a request in
//! the shape of HTTP/1 text: `METHOD TARGET`, header lines `Name: value`, an empty line,
//! the body. Requests that `http` cannot represent are skipped (hyper refuses them before
//! any handler). Every answer must be a 2xx or a 4xx, and every error the API's JSON object.

use apollo11_server::{Server, ServerConfig};
use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Request, StatusCode};
use axum::Router;
use std::sync::OnceLock;
use std::time::Duration;
use tower::ServiceExt;

/// The token the server requires; seeds send it.
pub const TOKEN: &str = "fuzz-token-0123456789abcdef";

/// Longest an answer (headers and a body that is not a stream) may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

const SUCCEEDS: &str = r#"[workflow]
name = "ok"
[[steps]]
name = "a"
run = "true"
idempotency = "natural"
[[steps]]
name = "b"
run = "true"
idempotency = "natural"
depends_on = ["a"]
"#;
const PAUSES: &str = r#"[workflow]
name = "stuck"
on_failure = "pause"
[[steps]]
name = "a"
run = "exit 3"
idempotency = "compensate"
compensate = "true"
retry = { max_attempts = 1 }
"#;

struct Served {
    runtime: tokio::runtime::Runtime,
    router: Router,
}

fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let router = runtime.block_on(start());
        Served { runtime, router }
    })
}

/// Binds a server on a fresh data dir (left in the temporary folder: libFuzzer ends the
/// process without running destructors) and starts the runs every input can reach.
async fn start() -> Router {
    let root = tempfile::tempdir().expect("a temporary folder");
    let root = root.keep();
    let workflows = root.join("workflows");
    std::fs::create_dir(&workflows).expect("the workflows folder");
    std::fs::write(workflows.join("ok.toml"), SUCCEEDS).expect("a workflow file");
    std::fs::write(workflows.join("stuck.toml"), PAUSES).expect("a workflow file");
    let mut config = ServerConfig::new(root.join("data"), "127.0.0.1:0".parse().expect("addr"));
    config.workflows = Some(workflows);
    config.token = Some(TOKEN.into());
    let router = Server::bind(config)
        .await
        .expect("a server on a new data dir")
        .router();
    for (workflow, run) in [("ok", "done"), ("stuck", "held")] {
        let body = format!("{{\"workflow\":\"{workflow}\",\"run_id\":\"{run}\"}}");
        let request = with_token(Request::post("/api/v1/runs"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body));
        let answer = router.clone().oneshot(request.expect("a request")).await;
        assert_eq!(answer.expect("infallible").status(), StatusCode::CREATED);
    }
    // Let both runs reach their end before fuzzing starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    router
}

fn with_token(builder: axum::http::request::Builder) -> axum::http::request::Builder {
    builder.header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
}

/// Parses the input into a request, `None` when `http` cannot represent it.
fn request(data: &[u8]) -> Option<Request<Body>> {
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let mut lines = head.split(|&b| b == b'\n');
    let first = lines.next()?;
    let space = first.iter().position(|&b| b == b' ')?;
    let mut builder = Request::builder()
        .method(&first[..space])
        .uri(&first[space + 1..]);
    for line in lines {
        let colon = line.iter().position(|&b| b == b':')?;
        let value = line[colon + 1..]
            .strip_prefix(b" ")
            .unwrap_or(&line[colon + 1..]);
        let name = HeaderName::from_bytes(&line[..colon]).ok()?;
        builder = builder.header(name, HeaderValue::from_bytes(value).ok()?);
    }
    builder.body(Body::from(body.to_vec())).ok()
}

/// Sends the request the input describes and checks the answer.
pub fn check(data: &[u8]) {
    let Some(request) = request(data) else {
        return;
    };
    let served = served();
    let what = format!("{} {}", request.method(), request.uri());
    served.runtime.block_on(async {
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, answer(served.router.clone(), request));
        let (status, body) = answer.await.unwrap_or_else(|_| panic!("{what}: no answer"));
        assert!(
            status.is_success() || status.is_client_error(),
            "{what}: {status} {body:?}"
        );
        if let Some(body) = body.filter(|_| !status.is_success()) {
            error_object(&what, status, &body);
        }
    });
}

/// The status and, unless the answer is an event stream, the body.
async fn answer(router: Router, request: Request<Body>) -> (StatusCode, Option<Vec<u8>>) {
    let response = router
        .oneshot(request)
        .await
        .expect("the router is infallible");
    let status = response.status();
    let stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    if stream {
        return (status, None);
    }
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await;
    (status, Some(body.expect("a body that reads").to_vec()))
}

/// Checks that `body` is the API's error object: `{"error": {"code", "message"}}`.
fn error_object(what: &str, status: StatusCode, body: &[u8]) {
    let value: serde_json::Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{what}: {status} with a body that is not JSON ({e})"));
    let error = &value["error"];
    assert!(
        error["code"].is_string() && error["message"].is_string(),
        "{what}: {status} with {value}"
    );
}
