//! Every answer of the API checked against its schema in the served OpenAPI document: the
//! keys a schema requires are present, values have its types and enums, and an object whose
//! schema says `additionalProperties: false` has no other key.

use crate::harness::TestServer;
use apollo11_client::Answer;
use serde_json::{json, Value};

/// What in `value` (at `at`) breaks `schema`, whose `$ref`s resolve in `doc`.
fn breaks(doc: &Value, schema: &Value, value: &Value, at: &str) -> Vec<String> {
    if let Some(name) = schema["$ref"].as_str() {
        let name = name.trim_start_matches("#/components/schemas/");
        return breaks(doc, &doc["components"]["schemas"][name], value, at);
    }
    for any in ["anyOf", "oneOf"] {
        if let Some(options) = schema[any].as_array() {
            let fits = |o: &Value| breaks(doc, o, value, at).is_empty();
            if !options.iter().any(fits) {
                return vec![format!("{at}: {value} fits none of {any}")];
            }
        }
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            return vec![format!("{at}: {value} is not in {allowed:?}")];
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
        return vec![format!("{at}: {value} is not of type {types:?}")];
    }
    let mut found = Vec::new();
    if let (Some(object), Some(properties)) = (value.as_object(), schema["properties"].as_object())
    {
        for key in schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap_or_default();
            if !object.contains_key(key) {
                found.push(format!("{at}: `{key}` is required and missing"));
            }
        }
        for (key, item) in object {
            match properties.get(key) {
                Some(property) => found.extend(breaks(doc, property, item, &format!("{at}.{key}"))),
                None if schema["additionalProperties"] == false => {
                    found.push(format!("{at}: `{key}` is not in the schema"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(schema)) = (value.as_array(), schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            found.extend(breaks(doc, schema, item, &format!("{at}[{i}]")));
        }
    }
    found
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

/// The schema of the JSON answer `status` of `method` on `route`.
fn schema_of<'d>(doc: &'d Value, method: &str, route: &str, status: u16) -> &'d Value {
    let mut answer = &doc["paths"][route][method]["responses"][status.to_string()];
    if let Some(name) = answer["$ref"].as_str() {
        answer =
            &doc["components"]["responses"][name.trim_start_matches("#/components/responses/")];
    }
    let schema = &answer["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "{method} {route} {status}: no schema");
    schema
}

#[test]
fn the_checker_finds_a_missing_key_an_extra_key_and_a_wrong_type() {
    let doc = json!({"components": {"schemas": {"A": {"type": "object", "required": ["a"],
        "additionalProperties": false, "properties": {"a": {"type": "integer"}}}}}});
    let a = json!({"$ref": "#/components/schemas/A"});
    assert!(breaks(&doc, &a, &json!({"a": 1}), "").is_empty());
    assert_eq!(breaks(&doc, &a, &json!({}), "").len(), 1);
    assert_eq!(breaks(&doc, &a, &json!({"a": 1, "b": 2}), "").len(), 1);
    assert_eq!(breaks(&doc, &a, &json!({"a": "1"}), "").len(), 1);
}

/// The signal route.
const SIGNAL: &str = "/api/v1/runs/{id}/steps/{step}/signal";

/// A run whose step waits for a signal, as the run view shows it, then signals: refused
/// (409) to a step not waiting, accepted to the waiting one.
async fn signals(server: &TestServer) -> Vec<(&'static str, &'static str, String, Answer)> {
    server.start_run("approve", "appr").await;
    let waiting = server
        .wait_for("appr", "waiting for a signal", |r| {
            !r["steps"]["gate"]["waiting"].is_null()
        })
        .await;
    let gate = &waiting["steps"]["gate"];
    assert_eq!(gate["waiting"]["for"], "signal", "{gate}");
    assert!(gate["waiting"]["deadline"].is_u64(), "{gate}");
    assert!(gate["unplaced"].is_null(), "a wait is never placed: {gate}");
    let mut answers = Vec::new();
    let view = server.client.get("/api/v1/runs/appr").await.unwrap();
    answers.push(("get", "/api/v1/runs/{id}", String::new(), view));
    let body = json!({"data": {"wave": 2}, "by": "alice", "reason": "fine"});
    for step in ["after", "gate"] {
        let path = format!("/api/v1/runs/appr/steps/{step}/signal");
        let answer = server.client.post(&path, &body).await.unwrap();
        answers.push(("post", SIGNAL, path, answer));
    }
    let statuses: Vec<u16> = answers.iter().skip(1).map(|a| a.3.status).collect();
    assert_eq!(statuses, [409, 202], "the signal route's answers");
    assert_eq!(answers[1].3.json()["error"]["code"], "not_waiting");
    server
        .wait_for("appr", "succeeded", |r| r["state"] == "succeeded")
        .await;
    answers
}

/// The rerun route: its plan (GET) and the rerun itself (POST).
const RERUN: &str = "/api/v1/runs/{id}/steps/{step}/rerun";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_fits_its_schema_in_the_openapi_document() {
    let server = TestServer::start().await;
    let doc = server
        .client
        .get("/api/v1/openapi.json")
        .await
        .unwrap()
        .json();
    let started = server
        .client
        .post(
            "/api/v1/runs",
            &json!({"workflow": "quick", "run_id": "fit"}),
        )
        .await
        .unwrap();
    let mut answers = vec![("post", "/api/v1/runs", "/api/v1/runs".to_owned(), started)];
    server
        .wait_for("fit", "succeeded", |r| r["state"] == "succeeded")
        .await;
    server.start_run("gated", "held").await;
    let note = json!({"by": "alice", "reason": "a look"});
    let paused = server
        .client
        .post("/api/v1/runs/held/pause", &note)
        .await
        .unwrap();
    answers.push(("post", "/api/v1/runs/{id}/pause", String::new(), paused));
    // No worker: its try waits unplaced.
    server.start_run("placed", "waits").await;
    let waits = server
        .wait_for("waits", "waiting for a worker", |r| {
            !r["steps"]["db"]["unplaced"].is_null()
        })
        .await;
    let unplaced = &waits["steps"]["db"]["unplaced"];
    assert_eq!(
        unplaced["waiting_for"], "a worker with role=db",
        "{unplaced}"
    );
    answers.extend(signals(&server).await);
    for (route, path) in [
        ("/api/v1/meta", "/api/v1/meta"),
        ("/api/v1/workflows", "/api/v1/workflows"),
        ("/api/v1/runs", "/api/v1/runs?all=true"),
        ("/api/v1/runs/{id}", "/api/v1/runs/fit"),
        ("/api/v1/runs/{id}", "/api/v1/runs/waits"),
        ("/api/v1/runs/{id}/events", "/api/v1/runs/fit/events"),
        ("/api/v1/runs/{id}/plan", "/api/v1/runs/fit/plan"),
        ("/api/v1/runs/{id}", "/api/v1/runs/nope"),
        ("/healthz", "/healthz"),
        (RERUN, "/api/v1/runs/fit/steps/a/rerun?downstream=true"),
        (RERUN, "/api/v1/runs/fit/steps/nope/rerun"),
        (RERUN, "/api/v1/runs/held/steps/wait/rerun"),
    ] {
        let answer = server.client.get(path).await.unwrap();
        answers.push(("get", route, path.to_owned(), answer));
    }
    let rerun = json!({"by": "alice", "reason": "again", "downstream": true});
    for path in [
        "/api/v1/runs/fit/steps/a/rerun",
        "/api/v1/runs/held/steps/wait/rerun",
    ] {
        let answer = server.client.post(path, &rerun).await.unwrap();
        answers.push(("post", RERUN, path.to_owned(), answer));
    }
    server
        .wait_for("fit", "succeeded again", |r| r["state"] == "succeeded")
        .await;
    let events = server.client.get("/api/v1/runs/fit/events").await.unwrap();
    answers.push(("get", "/api/v1/runs/{id}/events", String::new(), events));
    let reloaded = server.reload().await;
    answers.push(("post", "/api/v1/workflows/reload", String::new(), reloaded));
    let statuses: Vec<u16> = answers
        .iter()
        .filter(|a| a.1 == RERUN)
        .map(|a| a.3.status)
        .collect();
    assert_eq!(
        statuses,
        [200, 404, 409, 202, 409],
        "the rerun route's answers"
    );
    for (method, route, path, answer) in answers {
        let schema = schema_of(&doc, method, route, answer.status);
        let found = breaks(&doc, schema, &answer.json(), "answer");
        assert!(found.is_empty(), "{method} {route} ({path}): {found:#?}");
    }
    server.stop().await;
}
