//! The token, the body cap, hostile paths, the loopback rule, the rules that keep other
//! sites' pages out (Host, content type, Origin), names that disguise themselves, and
//! answers that name no file of the server.

use crate::harness::{assert_error, TestServer};
use apollo11_client::{Answer, Client};
use apollo11_server::{ServeError, Server, ServerConfig};
use axum::http::Method;
use bytes::Bytes;
use serde_json::json;

const TOKEN: &str = "a-token-of-24-characters";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_api_call_needs_it_and_health_and_ui_do_not() {
    let server = TestServer::start_with(Some(TOKEN)).await;
    let address = server.client.address().to_owned();
    let anonymous = Client::new(address.clone(), None);
    let wrong = Client::new(address, Some("another-token-of-24-chars".into()));
    for path in [
        "/api/v1/runs",
        "/api/v1/workflows",
        "/api/v1/openapi.json",
        "/api/v1/runs/r",
    ] {
        assert_error(&anonymous.get(path).await.unwrap(), 401, "unauthorized");
        assert_error(&wrong.get(path).await.unwrap(), 401, "unauthorized");
    }
    let start = anonymous
        .post("/api/v1/runs", &json!({"workflow": "quick"}))
        .await
        .unwrap();
    assert_error(&start, 401, "unauthorized");
    assert_eq!(server.client.get("/api/v1/runs").await.unwrap().status, 200);
    assert_eq!(anonymous.get("/healthz").await.unwrap().status, 200);
    assert_eq!(anonymous.get("/readyz").await.unwrap().status, 200);
    assert_ne!(anonymous.get("/").await.unwrap().status, 401);
    assert_eq!(
        server.client.get("/api/v1/runs").await.unwrap().json()["runs"],
        json!([]),
        "nothing was started"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_64_kib_is_refused_with_413_a_start_over_1_mib() {
    let server = TestServer::start().await;
    let run_id = "x".repeat(apollo11_server::START_BODY_BYTES_MAX);
    let big = json!({"workflow": "quick", "run_id": run_id});
    assert_error(
        &server.client.post("/api/v1/runs", &big).await.unwrap(),
        413,
        "too_large",
    );
    let note = json!({"by": "me", "reason": "r".repeat(65 * 1024)});
    let pause = server
        .client
        .post("/api/v1/runs/r/pause", &note)
        .await
        .unwrap();
    assert_error(&pause, 413, "too_large");
    server.stop().await;
}

/// Dot segments, encoded slashes and a symlink out of the data dir reach nothing outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_read_nothing_outside_the_data_dir() {
    let server = TestServer::start().await;
    server.start_run("quick", "r").await;
    server
        .wait_for("r", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let secret = server.workflows.path().join("secret.log");
    std::fs::write(&secret, "SECRET").unwrap();
    let step_dir = server.data.path().join("logs/r/b");
    std::os::unix::fs::symlink(&secret, step_dir.join("7.log")).unwrap();
    let cases = [
        ("/api/v1/runs/r/steps/b/log?attempt=7", 404),
        ("/api/v1/runs/%2E%2E/steps/b/log?attempt=1", 400),
        ("/api/v1/runs/..%2F..%2Fetc/steps/b/log?attempt=1", 400),
        (
            "/api/v1/runs/r/steps/..%2F..%2F..%2Fsecret/log?attempt=1",
            400,
        ),
        ("/api/v1/runs/r/steps/%2E%2E/log?attempt=1", 400),
        (
            "/api/v1/runs/r/steps/b%5C..%5C..%5Csecret/log?attempt=1",
            400,
        ),
        ("/api/v1/runs/r/steps/b/log?attempt=..%2F1", 400),
        ("/api/v1/runs/r/steps/b/log?attempt=1&compensation=..", 400),
        ("/ui/..%2F..%2FCargo.toml", 404),
        ("/ui/%2E%2E", 404),
        ("/ui/secret.log", 404),
    ];
    for (path, status) in cases {
        let answer = server.client.get(path).await.unwrap();
        assert_eq!(answer.status, status, "{path}: {}", answer.message());
        assert!(
            !String::from_utf8_lossy(&answer.body).contains("SECRET"),
            "{path}"
        );
        assert_eq!(
            answer.json()["error"]["code"],
            if status == 400 {
                "invalid"
            } else {
                "not_found"
            }
        );
    }
    // Raw `..` segments, as a client that does not normalize sends them.
    let raw = server
        .client
        .send(
            Method::GET,
            "/api/v1/runs/r/steps/../../../../secret.log",
            &[],
            Bytes::new(),
        )
        .await
        .unwrap();
    assert!(matches!(raw.status, 400 | 404), "{}", raw.status);
    assert!(!String::from_utf8_lossy(&raw.body).contains("SECRET"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_address_is_refused_without_a_token() {
    let data = tempfile::tempdir().unwrap();
    let config = ServerConfig::new(data.path().to_owned(), "0.0.0.0:0".parse().unwrap());
    let refused = Server::bind(config).await.err().expect("refused");
    assert!(matches!(refused, ServeError::Config(_)), "{refused}");
    assert!(refused.to_string().contains("--token-file"), "{refused}");
    assert!(
        !data.path().join("LOCK").exists(),
        "the data dir was not touched"
    );
}

/// A POST as a page of another site can send it without asking the server first.
async fn post_as(client: &Client, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let body = Bytes::from(body.to_owned());
    client
        .send(Method::POST, path, headers, body)
        .await
        .unwrap()
}

/// Starts the run `held` of `stuck`, waits until it pauses, and returns its count of events.
async fn held(server: &TestServer) -> usize {
    server.start_run("stuck", "held").await;
    server
        .wait_for("held", "paused", |r| r["state"] == "paused")
        .await;
    events_of(&server.client, "held").await
}

/// The port the server listens on.
fn port_of(server: &TestServer) -> String {
    let (_, port) = server.client.address().rsplit_once(':').unwrap();
    port.to_owned()
}

/// The events of run `r` (the run must exist).
async fn events_of(client: &Client, run: &str) -> usize {
    let answer = client
        .get(&format!("/api/v1/runs/{run}/events"))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.message());
    answer.json()["events"].as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_without_a_json_content_type_is_refused_with_415_and_does_nothing() {
    let server = TestServer::start().await;
    let before = held(&server).await;
    let start = r#"{"workflow":"quick","run_id":"forged"}"#;
    let note = r#"{"by":"csrf-attacker","reason":"forged"}"#;
    let forced = r#"{"to":"succeeded","by":"csrf-attacker","reason":"forged"}"#;
    let attempts = [
        ("/api/v1/runs", start),
        ("/api/v1/runs/held/steps/fails/override", forced),
        ("/api/v1/runs/held/pause", note),
        ("/api/v1/runs/held/rollback", note),
        ("/api/v1/workflows/reload", "{}"),
    ];
    for content_type in [
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonx"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| ("content-type", t))
            .into_iter()
            .collect();
        for (path, body) in attempts {
            let answer = post_as(&server.client, path, &headers, body).await;
            assert_error(&answer, 415, "invalid");
            assert!(
                answer.message().contains("Content-Type: application/json"),
                "{path}: {}",
                answer.message()
            );
        }
    }
    let runs = server.client.get("/api/v1/runs").await.unwrap().json();
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        1,
        "nothing started: {runs}"
    );
    assert_eq!(
        events_of(&server.client, "held").await,
        before,
        "nothing recorded"
    );
    let json = [("content-type", "Application/JSON; charset=utf-8")];
    let answer = post_as(&server.client, "/api/v1/runs", &json, start).await;
    assert_eq!(answer.status, 201, "{}", answer.message());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_under_another_host_name_is_refused_with_403_and_reads_nothing() {
    let server = TestServer::start_configured(None, |config| {
        config.allowed_hosts = vec!["apollo.internal".into(), "proxy.example:443".into()];
    })
    .await;
    server.start_run("quick", "secret-run").await;
    let port = port_of(&server);
    let at = |host: &str| format!("{host}:{port}");
    for host in [
        at("attacker.example"),
        at("localhost.attacker.example"),
        "proxy.example:8080".into(),
        at("127.0.0.1.nip.io"),
    ] {
        for (method, path) in [
            (Method::GET, "/api/v1/runs"),
            (Method::GET, "/api/v1/runs/secret-run"),
            (Method::GET, "/"),
            (Method::GET, "/ui/app.js"),
            (Method::GET, "/healthz"),
            (Method::GET, "/nope"),
            (Method::POST, "/api/v1/runs"),
        ] {
            let headers = [
                ("host", host.as_str()),
                ("content-type", "application/json"),
            ];
            let body = Bytes::from_static(br#"{"workflow":"quick"}"#);
            let answer = server
                .client
                .send(method.clone(), path, &headers, body)
                .await
                .unwrap();
            assert_error(&answer, 403, "invalid");
            assert!(
                answer.message().contains(&format!("Host `{host}`")),
                "{}",
                answer.message()
            );
            assert!(
                !String::from_utf8_lossy(&answer.body).contains("secret-run"),
                "{host} {path}"
            );
        }
    }
    for host in [
        at("localhost"),
        at("127.0.0.1"),
        at("[::1]"),
        at("apollo.internal"),
        "APOLLO.internal".into(),
        "proxy.example:443".into(),
    ] {
        let answer = server
            .client
            .send(
                Method::GET,
                "/api/v1/runs",
                &[("host", &host)],
                Bytes::new(),
            )
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{host}: {}", answer.message());
    }
    let runs = server.client.get("/api/v1/runs").await.unwrap().json();
    assert_eq!(
        runs["runs"].as_array().unwrap().len(),
        1,
        "nothing started: {runs}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_is_not_a_host_is_refused_at_start() {
    let data = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new(data.path().to_owned(), "127.0.0.1:0".parse().unwrap());
    config.allowed_hosts = vec!["http://apollo.internal/".into()];
    let refused = Server::bind(config).await.err().expect("refused");
    assert!(matches!(refused, ServeError::Config(_)), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("--allow-host `http://apollo.internal/`"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_from_another_origin_is_refused_with_403() {
    let server = TestServer::start().await;
    let json = ("content-type", "application/json");
    let start = r#"{"workflow":"quick","run_id":"from-elsewhere"}"#;
    let port = port_of(&server);
    for origin in [
        "http://attacker.example".to_owned(),
        format!("http://attacker.example:{port}"),
        format!("http://localhost:{port}"),
        "null".to_owned(),
    ] {
        let answer = post_as(
            &server.client,
            "/api/v1/runs",
            &[json, ("origin", &origin)],
            start,
        )
        .await;
        assert_error(&answer, 403, "invalid");
        assert!(
            answer.message().contains(&format!("Origin `{origin}`")),
            "{}",
            answer.message()
        );
    }
    let runs = server.client.get("/api/v1/runs").await.unwrap().json();
    assert_eq!(runs["runs"], json!([]), "nothing started");
    let own = format!("http://{}", server.client.address());
    let answer = post_as(
        &server.client,
        "/api/v1/runs",
        &[json, ("origin", &own)],
        start,
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.message());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let server = TestServer::start_with(Some(TOKEN)).await;
    let anonymous = Client::new(server.client.address().to_owned(), None);
    let runs = |authorization: String| {
        let anonymous = anonymous.clone();
        async move {
            let headers = [("authorization", authorization.as_str())];
            let runs = anonymous.send(Method::GET, "/api/v1/runs", &headers, Bytes::new());
            runs.await.unwrap()
        }
    };
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let answer = runs(format!("{scheme} {TOKEN}")).await;
        assert_eq!(answer.status, 200, "{scheme}: {}", answer.message());
    }
    for wrong in [
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
        TOKEN.to_owned(),
    ] {
        assert_error(&runs(wrong).await, 401, "unauthorized");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ui_path_that_is_no_file_is_404_naming_it() {
    let server = TestServer::start().await;
    for (path, named) in [
        ("/ui/app.js%00.html", "app.js\\0.html"),
        ("/ui/a%0Ab.js", "a\\nb.js"),
        ("/ui/..%2Fapp.js", "../app.js"),
        ("/ui/%FF.js", "/ui/%FF.js"),
    ] {
        let answer = server.client.get(path).await.unwrap();
        assert_error(&answer, 404, "not_found");
        let message = answer.message();
        assert!(
            message.contains(&format!("no file `{named}`")),
            "{path}: {message}"
        );
        assert!(!message.contains("run id"), "{path}: {message}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_operators_that_disguise_themselves_are_refused_naming_the_character() {
    let server = TestServer::start().await;
    for (run_id, code, at) in [
        ("deploy\u{202e}gnp.exe", "U+202E", 7),
        ("de\u{200b}ploy", "U+200B", 3),
        ("two\u{a0}words", "U+00A0", 4),
        (" deploy", "U+0020", 1),
        ("deploy ", "U+0020", 7),
    ] {
        let body = json!({"workflow": "quick", "run_id": run_id});
        let answer = server.client.post("/api/v1/runs", &body).await.unwrap();
        assert_error(&answer, 400, "invalid");
        let message = answer.message();
        assert!(
            message.contains(code) && message.contains(&format!("at character {at}")),
            "{message}"
        );
        let path = format!("/api/v1/runs/{}", apollo11_client::segment(run_id));
        assert_error(&server.client.get(&path).await.unwrap(), 400, "invalid");
    }
    let before = held(&server).await;
    for by in [
        "\u{202e}nimda",
        "admin\u{200d}",
        "ad\u{2060}min",
        "\u{feff}admin",
        "ad\u{202f}min",
        " admin",
    ] {
        let note = json!({"by": by, "reason": "disguised"});
        let answer = server
            .client
            .post("/api/v1/runs/held/rollback", &note)
            .await
            .unwrap();
        assert_error(&answer, 400, "invalid");
        assert!(
            answer.message().starts_with("by contains U+"),
            "{}",
            answer.message()
        );
        let forced = json!({"to": "succeeded", "by": by, "reason": "disguised"});
        let answer = server
            .client
            .post("/api/v1/runs/held/steps/fails/override", &forced)
            .await
            .unwrap();
        assert_error(&answer, 400, "invalid");
    }
    assert_eq!(
        events_of(&server.client, "held").await,
        before,
        "nothing recorded"
    );
    std::fs::write(
        server.workflows.path().join("hidden.toml"),
        "[workflow]\nname = \"quick\u{200b}\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n",
    )
    .unwrap();
    let refused = server.reload().await;
    assert_error(&refused, 400, "invalid");
    assert!(
        refused.message().contains("U+200B"),
        "{}",
        refused.message()
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_name_the_run_step_or_file_but_no_path_of_the_server() {
    let server = TestServer::start().await;
    let data = server.data.path().canonicalize().unwrap();
    let workflows = server.workflows.path().canonicalize().unwrap();
    let private = |answer: &Answer| {
        let body = String::from_utf8_lossy(&answer.body).into_owned();
        for dir in [
            &data,
            &workflows,
            &server.data.path().to_owned(),
            &server.workflows.path().to_owned(),
        ] {
            assert!(!body.contains(&*dir.to_string_lossy()), "{body}");
        }
        answer.message()
    };
    // A file where the run's folder goes: the run cannot have it.
    std::fs::create_dir_all(data.join("logs")).unwrap();
    std::fs::write(data.join("logs/blocked"), "").unwrap();
    let body = json!({"workflow": "quick", "run_id": "blocked"});
    let answer = server.client.post("/api/v1/runs", &body).await.unwrap();
    assert_error(&answer, 400, "invalid");
    let message = private(&answer);
    assert!(
        message.contains("run `blocked`: cannot create its folder"),
        "{message}"
    );
    std::fs::write(
        workflows.join("bad.toml"),
        "[workflow]\nname = \"bad\"\n[[steps]]\nname = \"x\"\nrun = 3\n",
    )
    .unwrap();
    let answer = server.reload().await;
    assert_error(&answer, 400, "invalid");
    let message = private(&answer);
    assert!(message.starts_with("bad.toml:5:"), "{message}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_steps_error_names_its_log_inside_the_data_dir_not_where_that_is() {
    let server = TestServer::start().await;
    server.start_run("stuck", "s").await;
    let run = server
        .wait_for("s", "the step failed", |r| r["state"] == "paused")
        .await;
    let data = server.data.path().to_string_lossy().into_owned();
    let events = server.client.get("/api/v1/runs/s/events").await.unwrap();
    for body in [
        run.to_string(),
        String::from_utf8_lossy(&events.body).into_owned(),
    ] {
        assert!(!body.contains(&data), "{body}");
    }
    let error = run["steps"]["fails"]["error"].to_string();
    assert!(error.contains("exited with code 3 (log: "), "{run}");
    assert!(error.contains(".log in the data dir)"), "{error}");
    server.stop().await;
}
