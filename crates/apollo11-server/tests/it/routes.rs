//! Each route's success and error shapes.

use crate::harness::{assert_error, TestServer, WORKFLOWS};
use apollo11_client::Client;
use axum::http::Method;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_are_listed_and_reloaded_and_a_bad_file_keeps_the_previous_set() {
    let server = TestServer::start().await;
    let list = server.client.get("/api/v1/workflows").await.unwrap();
    assert_eq!(list.status, 200);
    let listed = list.json();
    let names: Vec<&str> = listed["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "approve",
            "gated",
            "placed",
            "quick",
            "stuck",
            "undo_fails",
            "undone"
        ]
    );
    let gated = &list.json()["workflows"][1];
    assert_eq!(gated["file"], "gated/workflow.toml");
    assert_eq!(gated["on_failure"], "pause");
    assert_eq!(
        gated["steps"][1],
        json!({"name": "after", "depends_on": ["wait"], "idempotency": "natural", "compensate": false})
    );
    let bad = server.workflows.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[workflow]\nname = \"bad\"\n[[steps]]\nname = \"x\"\nrun = 3\n",
    )
    .unwrap();
    let refused = server.reload().await;
    assert_error(&refused, 400, "invalid");
    assert!(
        refused.message().contains("bad.toml:5:"),
        "{}",
        refused.message()
    );
    let still = server.client.get("/api/v1/workflows").await.unwrap().json();
    let known = WORKFLOWS.len();
    assert_eq!(still["workflows"].as_array().unwrap().len(), known);
    std::fs::write(&bad, "[workflow]\nname = \"bad\"\n[[steps]]\nname = \"x\"\nrun = \"true\"\nidempotency = \"natural\"\n").unwrap();
    let reloaded = server.reload().await;
    assert_eq!(reloaded.status, 200, "{}", reloaded.message());
    let now = reloaded.json()["workflows"].as_array().unwrap().len();
    assert_eq!(now, known + 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_over_the_api_succeeds_and_every_read_route_shows_it() {
    let server = TestServer::start().await;
    let created = server
        .client
        .post("/api/v1/runs", &json!({"workflow": "quick"}))
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.message());
    let run_id = created.json()["run_id"].as_str().unwrap().to_owned();
    assert!(run_id.starts_with("quick-"), "{run_id}");
    let run = server
        .wait_for(&run_id, "succeeded", |r| r["state"] == "succeeded")
        .await;
    assert_eq!(run["order"], json!(["a", "b"]));
    assert_eq!(run["workflow"], "quick");
    assert_eq!(run["steps"]["a"]["state"], "succeeded");
    assert_eq!(run["steps"]["a"]["attempt"], 1);
    assert_eq!(run["allowed"]["pause"], false);
    assert_eq!(
        run["allowed"]["override"], false,
        "a finished run takes none"
    );
    assert!(run["refused"]["pause"].as_str().is_some(), "{run}");
    let log = run["steps"]["a"]["log"].as_str().unwrap();
    assert!(log.starts_with("/api/v1/runs/quick%2D"), "{log}");
    assert!(log.ends_with("/steps/a/log?attempt=1"), "{log}");
    let text = server.client.get(log).await.unwrap();
    assert_eq!(text.status, 200);
    assert_eq!(
        text.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(String::from_utf8_lossy(&text.body), "hello from a\n");
    assert_eq!(
        text.header("x-log-bytes"),
        Some("13"),
        "the whole log's size"
    );

    let events = server
        .client
        .get(&format!("/api/v1/runs/{run_id}/events?limit=2"))
        .await
        .unwrap()
        .json();
    assert_eq!(events["events"].as_array().unwrap().len(), 2);
    assert_eq!(events["events"][0]["kind"], "run_created");
    assert_eq!(events["events"][0]["workflow"], "quick");
    let next = events["next_after"].as_u64().unwrap();
    let rest = server
        .client
        .get(&format!("/api/v1/runs/{run_id}/events?after={next}"))
        .await
        .unwrap()
        .json();
    assert_eq!(rest["next_after"], Value::Null);
    assert_eq!(
        rest["events"].as_array().unwrap().len() + 2,
        run["events"].as_u64().unwrap() as usize
    );

    let plan = server
        .client
        .get(&format!("/api/v1/runs/{run_id}/plan"))
        .await
        .unwrap();
    assert_eq!(plan.status, 200);
    assert_eq!(plan.json()["rerun"], json!([]));
    assert_eq!(plan.json()["run_state_after"], "succeeded");

    let again = server
        .client
        .post(
            "/api/v1/runs",
            &json!({"workflow": "quick", "run_id": run_id}),
        )
        .await
        .unwrap();
    assert_error(&again, 409, "conflict");
    let unknown = server
        .client
        .post("/api/v1/runs", &json!({"workflow": "nope"}))
        .await
        .unwrap();
    assert_error(&unknown, 404, "not_found");
    let bad_id = server
        .client
        .post(
            "/api/v1/runs",
            &json!({"workflow": "quick", "run_id": "a/b"}),
        )
        .await
        .unwrap();
    assert_error(&bad_id, 400, "invalid");
    let extra = server
        .client
        .post(
            "/api/v1/runs",
            &json!({"workflow": "quick", "command": "rm -rf /"}),
        )
        .await
        .unwrap();
    assert_error(&extra, 400, "invalid");
    let not_json = server
        .client
        .send(
            Method::POST,
            "/api/v1/runs",
            &[("content-type", "application/json")],
            Bytes::from_static(b"{"),
        )
        .await
        .unwrap();
    assert_error(&not_json, 400, "invalid");
    for missing in [
        "/api/v1/runs/nope",
        "/api/v1/runs/nope/events",
        "/api/v1/runs/nope/plan",
        "/api/v1/runs/nope/events/stream",
    ] {
        assert_error(&server.client.get(missing).await.unwrap(), 404, "not_found");
    }
    let no_log = server
        .client
        .get(&format!("/api/v1/runs/{run_id}/steps/a/log?attempt=9"))
        .await
        .unwrap();
    assert_error(&no_log, 404, "not_found");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_shows_the_run_as_it_stood_after_an_event() {
    let server = TestServer::start().await;
    server.start_run("quick", "r1").await;
    server
        .wait_for("r1", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let events = server
        .client
        .get("/api/v1/runs/r1/events")
        .await
        .unwrap()
        .json();
    let ids: Vec<u64> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_id"].as_u64().unwrap())
        .collect();
    let started_a = server
        .client
        .get(&format!("/api/v1/runs/r1?at={}", ids[1]))
        .await
        .unwrap()
        .json();
    assert_eq!(started_a["event_id"], ids[1]);
    assert_eq!(started_a["events"], 2);
    assert_eq!(started_a["state"], "running");
    assert_eq!(started_a["steps"]["a"]["state"], "running");
    assert_eq!(started_a["steps"]["b"]["state"], "pending");
    assert_eq!(started_a["steps"]["b"]["log"], Value::Null);
    let before = server
        .client
        .get(&format!("/api/v1/runs/r1?at={}", ids[0] - 1))
        .await
        .unwrap();
    assert_error(&before, 404, "not_found");
    let bad = server.client.get("/api/v1/runs/r1?at=abc").await.unwrap();
    assert_error(&bad, 400, "invalid");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_listed_newest_first_in_pages_and_filtered() {
    let server = TestServer::start().await;
    for id in ["r1", "r2", "r3"] {
        server.start_run("quick", id).await;
        server
            .wait_for(id, "succeeded", |r| r["state"] == "succeeded")
            .await;
    }
    server.start_run("stuck", "s1").await;
    server
        .wait_for("s1", "paused", |r| r["state"] == "paused")
        .await;
    let first = server
        .client
        .get("/api/v1/runs?limit=2&state=succeeded")
        .await
        .unwrap()
        .json();
    let ids = |page: &Value| -> Vec<String> {
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), ["r3", "r2"]);
    assert_eq!(first["runs"][0]["steps"], 2);
    assert_eq!(first["runs"][0]["steps_done"], 2);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = server
        .client
        .get(&format!(
            "/api/v1/runs?limit=2&state=succeeded&cursor={cursor}"
        ))
        .await
        .unwrap()
        .json();
    assert_eq!(ids(&second), ["r1"]);
    assert_eq!(second["next_cursor"], Value::Null);
    let both = server
        .client
        .get("/api/v1/runs?state=paused,succeeded")
        .await
        .unwrap()
        .json();
    assert_eq!(ids(&both), ["s1", "r3", "r2", "r1"]);
    let stuck = server
        .client
        .get("/api/v1/runs?workflow=stuck")
        .await
        .unwrap()
        .json();
    assert_eq!(ids(&stuck), ["s1"]);
    let zero = server.client.get("/api/v1/runs?limit=0").await.unwrap();
    assert_error(&zero, 400, "invalid");
    assert_eq!(zero.message(), "limit: 0 is not between 1 and 1000");
    assert_error(
        &server.client.get("/api/v1/runs?state=done").await.unwrap(),
        400,
        "invalid",
    );
    assert_error(
        &server.client.get("/api/v1/runs?cursor=zz").await.unwrap(),
        400,
        "invalid",
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_and_other_methods_405_with_allow() {
    let server = TestServer::start().await;
    assert_error(
        &server.client.get("/api/v1/nope").await.unwrap(),
        404,
        "not_found",
    );
    assert_error(&server.client.get("/nope").await.unwrap(), 404, "not_found");
    let delete = server
        .client
        .send(Method::DELETE, "/api/v1/runs", &[], Bytes::new())
        .await
        .unwrap();
    assert_error(&delete, 405, "method_not_allowed");
    let allow = delete.header("allow").unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    assert_eq!(delete.message(), format!("this route answers {allow} only"));
    let get_pause = server.client.get("/api/v1/runs/r/pause").await.unwrap();
    assert_error(&get_pause, 405, "method_not_allowed");
    assert_eq!(get_pause.header("allow"), Some("POST"));
    assert_eq!(get_pause.message(), "this route answers POST only");
    let post_ui = server.client.post("/ui/app.js", &json!({})).await.unwrap();
    assert_error(&post_ui, 405, "method_not_allowed");
    assert!(post_ui.message().contains("GET"), "{}", post_ui.message());
    let health = server.client.get("/healthz").await.unwrap();
    assert_eq!(
        (health.status, health.json()),
        (200, json!({"status": "ok"}))
    );
    let ready = server.client.get("/readyz").await.unwrap();
    assert_eq!(
        (ready.status, ready.json()),
        (200, json!({"status": "ready"}))
    );
    server.stop().await;
}

/// Every route of the router is in the OpenAPI document with its method, and nothing else
/// is; each answers its method (not "no route", not 405).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_has_every_route_and_only_those() {
    let server = TestServer::start().await;
    let served = server.client.get("/api/v1/openapi.json").await.unwrap();
    assert_eq!(served.status, 200);
    let doc = served.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let routed: BTreeSet<(String, String)> = apollo11_server::routes()
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_owned()))
        .collect();
    assert_eq!(documented, routed);
    for (method, path) in &routed {
        let concrete = path
            .replace("{id}", "r")
            .replace("{step}", "a")
            .replace("{file}", "f.js");
        let answer = answer(&server.client, method, &concrete).await;
        assert_ne!(answer.status, 405, "{method} {path}");
        assert!(
            !answer.message().starts_with("no route"),
            "{method} {path}: {}",
            answer.message()
        );
    }
    server.stop().await;
}

async fn answer(client: &Client, method: &str, path: &str) -> apollo11_client::Answer {
    let method: Method = method.parse().unwrap();
    let body = Bytes::from_static(b"{}");
    if method == Method::GET && path.ends_with("/stream") {
        // Headers only: the stream of an unknown run is a 404 at once.
        let stream = client.stream(path, &[]).await.unwrap();
        return apollo11_client::Answer {
            status: stream.status,
            headers: vec![],
            body: Bytes::new(),
        };
    }
    let json = [("content-type", "application/json")];
    client.send(method, path, &json, body).await.unwrap()
}

/// `GET /` is `ui/index.html` and `GET /ui/{file}` every file of `ui/`, byte for byte, with
/// the type of its extension (browsers run an ES module served as JavaScript only) and
/// `no-cache`; an unknown file is the error object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_files_are_served_from_the_binary() {
    let server = TestServer::start().await;
    let ui = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
    let index = server.client.get("/").await.unwrap();
    assert_eq!(index.status, 200);
    assert_eq!(index.body, std::fs::read(ui.join("index.html")).unwrap());
    assert_eq!(
        index.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let mut served = 0;
    for entry in std::fs::read_dir(&ui).unwrap().flatten() {
        let name = entry.file_name().into_string().unwrap();
        let answer = server.client.get(&format!("/ui/{name}")).await.unwrap();
        assert_eq!(answer.status, 200, "{name}");
        assert_eq!(answer.body, std::fs::read(entry.path()).unwrap(), "{name}");
        assert_eq!(answer.header("cache-control"), Some("no-cache"), "{name}");
        let expected = match name.rsplit_once('.').unwrap().1 {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "html" => "text/html; charset=utf-8",
            other => panic!("ui/{name}: no test of the type of .{other} files"),
        };
        assert_eq!(answer.header("content-type"), Some(expected), "{name}");
        served += 1;
    }
    assert!(
        served >= 3,
        "ui/ holds index.html, its script and its style"
    );
    assert_error(
        &server.client.get("/ui/no-such.js").await.unwrap(),
        404,
        "not_found",
    );
    server.stop().await;
}

/// A start that names the digest of its definition starts only the definition of that
/// digest: another is refused (412) and starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_with_another_definitions_digest_is_refused_and_starts_nothing() {
    let server = TestServer::start().await;
    let listed = server.client.get("/api/v1/workflows").await.unwrap().json();
    let mut workflows = listed["workflows"].as_array().unwrap().iter();
    let quick = workflows.find(|w| w["name"] == "quick").unwrap();
    let digest = quick["digest"].as_str().unwrap().to_owned();
    assert_eq!(digest.len(), 64, "{digest}");
    let other = "0".repeat(64);
    let refused = server
        .client
        .post(
            "/api/v1/runs",
            &json!({"workflow": "quick", "run_id": "other", "digest": other}),
        )
        .await
        .unwrap();
    assert_error(&refused, 412, "definition_differs");
    for says in ["workflow `quick`", "quick.toml", &digest, &other] {
        assert!(
            refused.message().contains(says),
            "{says}: {}",
            refused.message()
        );
    }
    let none = server.client.get("/api/v1/runs/other").await.unwrap();
    assert_eq!(none.status, 404, "nothing was started");
    let started = server
        .client
        .post(
            "/api/v1/runs",
            &json!({"workflow": "quick", "run_id": "same", "digest": digest}),
        )
        .await
        .unwrap();
    assert_eq!(started.status, 201, "{}", started.message());
    server
        .wait_for("same", "succeeded", |r| r["state"] == "succeeded")
        .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_path_or_query_parameter_is_400_naming_it() {
    let server = TestServer::start().await;
    for (path, named) in [
        ("/api/v1/runs/a%2Fb", "id: "),
        ("/api/v1/runs/a%2Fb/steps/s/log?attempt=1", "id: "),
        ("/api/v1/runs/r/steps/..%2Fx/log?attempt=1", "step: "),
        ("/api/v1/runs/r/steps/s/log", "attempt: missing"),
        (
            "/api/v1/runs/r/steps/s/log?attempt=1&compensation=1",
            "compensation: ",
        ),
        (
            "/api/v1/runs/r/events?limit=10001",
            "limit: 10001 is not between 1 and 10000",
        ),
        ("/api/v1/runs?state=done", "state: `done` is not one of"),
        ("/api/v1/runs?cursor=zz", "cursor: not a next_cursor"),
    ] {
        let answer = server.client.get(path).await.unwrap();
        assert_error(&answer, 400, "invalid");
        assert!(
            answer.message().starts_with(named),
            "{path}: {}",
            answer.message()
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_answers_the_limits_and_names_the_server_enforces() {
    let server = TestServer::start().await;
    let meta = server.client.get("/api/v1/meta").await.unwrap().json();
    for state in meta["run_states"].as_array().unwrap() {
        let path = format!("/api/v1/runs?state={}", state.as_str().unwrap());
        assert_eq!(
            server.client.get(&path).await.unwrap().status,
            200,
            "{path}"
        );
    }
    assert_eq!(meta["step_states"].as_array().unwrap().len(), 9, "{meta}");
    server.start_run("gated", "held").await;
    let limits = &meta["limits"];
    for (field, max) in [
        ("by", &limits["by_bytes"]),
        ("reason", &limits["reason_bytes"]),
    ] {
        let max = max.as_u64().unwrap() as usize;
        let mut note = json!({"by": "alice", "reason": "too long"});
        note[field] = json!("x".repeat(max + 1));
        let answer = server
            .client
            .post("/api/v1/runs/held/pause", &note)
            .await
            .unwrap();
        assert_error(&answer, 400, "invalid");
        let said = format!("{field} is {} bytes; at most {max} are allowed", max + 1);
        assert_eq!(answer.message(), said);
    }
    for to in meta["override_targets"].as_array().unwrap() {
        let body = json!({"to": to, "by": "alice", "reason": "a try"});
        let path = "/api/v1/runs/nope/steps/s/override";
        let answer = server.client.post(path, &body).await.unwrap();
        assert_error(&answer, 404, "not_found");
    }
    assert_eq!(limits["body_bytes"], apollo11_server::BODY_BYTES_MAX);
    assert_eq!(limits["log_bytes"], apollo11_server::LOG_BYTES_MAX);
    server.stop().await;
}
