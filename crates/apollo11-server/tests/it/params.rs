//! A start's `params`: the registered definition instantiated with them (a `for_each` over a
//! parameter made into its steps, values pinned); a bad value is a 400 naming the parameter,
//! and no run. The declarations as listed and as a run shows them, secrets never with a
//! value; each step's trigger, condition, origin and why it was skipped.

use crate::harness::{assert_error, TestServer};
use serde_json::{json, Value};

const FLEET: &str = r#"[workflow]
name = "fleet"

[params]
hosts = { type = "list", default = ["a"] }
word = { type = "string", required = true, description = "what each host says" }
token = { type = "string", secret = { env = "HOME" } }
key = { type = "string", secret = { file = "KEY_FILE" } }

[[steps]]
name = "each"
for_each = "${params.hosts}"
run = "echo ${params.word} ${item}"
idempotency = "natural"

[[steps]]
name = "cleanup"
run = "true"
idempotency = "natural"
depends_on = ["each"]
trigger = "one_failed"
when = "params.word != \"\""
"#;

/// A server with `fleet` registered, its secret `key` in the file `fleet-key` of the
/// workflows folder.
async fn fleet_server() -> TestServer {
    let server = TestServer::start().await;
    let key = server.workflows.path().join("fleet-key");
    std::fs::write(&key, "k").unwrap();
    let text = FLEET.replace("KEY_FILE", &key.display().to_string());
    std::fs::write(server.workflows.path().join("fleet.toml"), text).unwrap();
    assert_eq!(server.reload().await.status, 200);
    server
}

/// The parameter declarations as a front end shows them.
fn declarations() -> Value {
    json!([
        {"name": "hosts", "type": "list", "default": ["a"], "required": false,
         "description": "", "secret": false, "secret_env": null},
        {"name": "key", "type": "string", "default": null, "required": false,
         "description": "", "secret": true, "secret_env": null},
        {"name": "token", "type": "string", "default": null, "required": false,
         "description": "", "secret": true, "secret_env": "HOME"},
        {"name": "word", "type": "string", "default": null, "required": true,
         "description": "what each host says", "secret": false, "secret_env": null},
    ])
}

#[tokio::test]
async fn a_start_instantiates_the_workflow_with_the_values_given() {
    let server = fleet_server().await;
    let body =
        json!({"workflow": "fleet", "run_id": "f1", "params": {"word": "w", "hosts": ["x", "y"]}});
    let started = server.client.post("/api/v1/runs", &body).await.unwrap();
    assert_eq!(started.status, 201, "{}", started.message());
    let run = server
        .wait_for("f1", "succeeded", |r| r["state"] == "succeeded")
        .await;
    assert_eq!(run["order"], json!(["each[x]", "each[y]", "cleanup"]));
    assert_eq!(run["arguments"], json!({"hosts": ["x", "y"], "word": "w"}));
    let mut params = run["params"].as_array().unwrap().clone();
    params.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    assert_eq!(Value::from(params), declarations());
    assert!(!run.to_string().contains("fleet-key"), "{run}");
    let each = &run["steps"]["each[y]"];
    assert_eq!(
        each["origin"],
        json!({"declaration": "each", "item": "y", "key": "y"})
    );
    assert_eq!(
        (&each["trigger"], &each["condition"], &each["skip_reason"]),
        (&json!("all_succeeded"), &Value::Null, &Value::Null)
    );
    let cleanup = &run["steps"]["cleanup"];
    assert_eq!(cleanup["state"], "skipped");
    assert_eq!(cleanup["trigger"], "one_failed");
    assert_eq!(cleanup["condition"], r#"params.word != """#);
    assert_eq!(cleanup["origin"], Value::Null);
    let reason = cleanup["skip_reason"].as_str().unwrap();
    assert!(reason.contains("one_failed"), "{reason}");
    server.stop().await;
}

#[tokio::test]
async fn the_workflows_list_each_parameter_a_secret_without_its_file() {
    let server = fleet_server().await;
    let listed = server.client.get("/api/v1/workflows").await.unwrap().json();
    let fleet = (listed["workflows"].as_array().unwrap().iter())
        .find(|w| w["name"] == "fleet")
        .unwrap();
    let mut params = fleet["params"].as_array().unwrap().clone();
    params.sort_by_key(|p| p["name"].as_str().unwrap().to_owned());
    assert_eq!(Value::from(params), declarations());
    assert!(!listed.to_string().contains("fleet-key"), "{listed}");
    server.stop().await;
}

#[tokio::test]
async fn a_bad_value_is_a_400_naming_the_parameter_and_creates_nothing() {
    let server = fleet_server().await;
    let large = vec!["h".repeat(100); 700];
    for (params, named) in [
        (json!({"hosts": ["b"]}), "word"),
        (json!({"word": "w", "hosts": "b"}), "hosts"),
        (json!({"word": "w", "colour": "red"}), "colour"),
        (json!({"word": "w", "token": "s3cret"}), "token"),
        (json!({"word": "w", "hosts": large}), "hosts"),
    ] {
        let body = json!({"workflow": "fleet", "run_id": "f0", "params": params});
        let refused = server.client.post("/api/v1/runs", &body).await.unwrap();
        assert_error(&refused, 400, "invalid");
        assert_eq!(refused.json()["error"]["param"], named, "{params}");
        assert!(
            refused.message().contains(&format!("`{named}`")),
            "{}",
            refused.message()
        );
        assert!(
            !refused.message().contains("s3cret"),
            "{}",
            refused.message()
        );
    }
    let runs = server.client.get("/api/v1/runs").await.unwrap().json();
    assert_eq!(runs["runs"], json!([]), "no run was created");
    let events = server.client.get("/api/v1/runs/f0/events").await.unwrap();
    assert_eq!(events.status, 404, "no event of the run was written");
    server.stop().await;
}

const HOSTILE: &str = r#"[workflow]
name = "hostile"

[params]
word = { type = "string", required = true }
token = { type = "string", secret = { file = "TOKEN_FILE" } }

[[steps]]
name = "say"
run = "echo ${params.word} ${params.token} > said"
idempotency = "natural"
"#;

const SECRET: &str = "never-shown-5f1c9a";

#[tokio::test]
async fn a_step_shows_the_command_its_last_try_ran_with_a_secret_only_as_its_variable() {
    let server = TestServer::start().await;
    let token = server.workflows.path().join("token");
    std::fs::write(&token, SECRET).unwrap();
    let text = HOSTILE.replace("TOKEN_FILE", &token.display().to_string());
    std::fs::write(server.workflows.path().join("hostile.toml"), text).unwrap();
    assert_eq!(server.reload().await.status, 200);
    let word = "x; touch pwned <b>'";
    let body = json!({"workflow": "hostile", "run_id": "h1", "params": {"word": word}});
    let started = server.client.post("/api/v1/runs", &body).await.unwrap();
    assert_eq!(started.status, 201, "{}", started.message());
    let run = server
        .wait_for("h1", "succeeded", |r| r["state"] == "succeeded")
        .await;
    let placed = &run["steps"]["say"]["placed"];
    let command = r#"echo 'x; touch pwned <b>'\''' "$APOLLO11_SECRET_TOKEN" > said"#;
    assert_eq!(placed["payload"]["command"], command, "{placed}");
    assert_eq!(
        (&placed["attempt"], &placed["compensation"]),
        (&json!(1), &json!(false))
    );
    let said = std::fs::read_to_string(server.workflows.path().join("said")).unwrap();
    assert_eq!(
        said,
        format!("{word} {SECRET}\n"),
        "the step saw both values"
    );
    assert!(!server.workflows.path().join("pwned").exists());
    let events = server
        .client
        .get("/api/v1/runs/h1/events")
        .await
        .unwrap()
        .json();
    let placed_event = (events["events"].as_array().unwrap().iter())
        .find(|e| e["kind"] == "placed")
        .unwrap();
    assert_eq!(placed_event["payload"], placed["payload"]);
    assert_eq!(placed_event["event_id"], placed["event_id"]);
    for path in [
        "/api/v1/runs/h1",
        "/api/v1/runs/h1/events",
        "/api/v1/runs",
        "/api/v1/workflows",
        "/api/v1/runs/h1/steps/say/log?attempt=1",
    ] {
        let answer = server.client.get(path).await.unwrap();
        assert_eq!(answer.status, 200, "{path}");
        let text = String::from_utf8_lossy(&answer.body);
        assert!(!text.contains(SECRET), "{path}: {text}");
    }
    server.stop().await;
}
