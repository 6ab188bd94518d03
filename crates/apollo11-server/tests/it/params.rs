//! A start's `params`: the registered definition instantiated with them (a `for_each` over a
//! parameter made into its steps, values pinned); a bad value is a 400 naming the parameter,
//! and no run.

use crate::harness::{assert_error, TestServer};
use serde_json::json;

const FLEET: &str = r#"[workflow]
name = "fleet"

[params]
hosts = { type = "list", default = ["a"] }
word = { type = "string", required = true }

[[steps]]
name = "each"
for_each = "${params.hosts}"
run = "echo ${params.word} ${item}"
idempotency = "natural"
"#;

#[tokio::test]
async fn a_start_instantiates_the_workflow_with_the_values_given() {
    let server = TestServer::start().await;
    std::fs::write(server.workflows.path().join("fleet.toml"), FLEET).unwrap();
    assert_eq!(server.reload().await.status, 200);
    for (params, named) in [
        (json!({"hosts": ["b"]}), "`word`"),
        (json!({"word": "w", "hosts": "b"}), "`hosts`"),
        (json!({"word": "w", "colour": "red"}), "`colour`"),
    ] {
        let body = json!({"workflow": "fleet", "run_id": "f0", "params": params});
        let refused = server.client.post("/api/v1/runs", &body).await.unwrap();
        assert_error(&refused, 400, "invalid");
        assert!(refused.message().contains(named), "{}", refused.message());
    }
    let missing = server.client.get("/api/v1/runs/f0").await.unwrap();
    assert_eq!(missing.status, 404, "no run was created");
    let body =
        json!({"workflow": "fleet", "run_id": "f1", "params": {"word": "w", "hosts": ["x", "y"]}});
    let started = server.client.post("/api/v1/runs", &body).await.unwrap();
    assert_eq!(started.status, 201, "{}", started.message());
    let run = server
        .wait_for("f1", "succeeded", |r| r["state"] == "succeeded")
        .await;
    assert_eq!(run["order"], json!(["each[x]", "each[y]"]));
    server.stop().await;
}
