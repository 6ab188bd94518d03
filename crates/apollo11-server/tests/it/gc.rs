//! `ServerConfig::gc` (`serve --gc-every`): the server archives, on its own writer and on
//! schedule, the finished runs its policy lets go; they leave the runs list and are answered
//! from the archive as before, while the server keeps driving runs.

use crate::harness::{kept, TestServer};
use apollo11_runtime::inspect::Retention;
use apollo11_server::GcSchedule;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The run object and the events of `run`.
async fn answers(server: &TestServer, run: &str) -> Vec<Value> {
    let mut answers = Vec::new();
    for path in [
        format!("/api/v1/runs/{run}"),
        format!("/api/v1/runs/{run}/events"),
    ] {
        let answer = server.client.get(&path).await.unwrap();
        assert_eq!(answer.status, 200, "{path}: {}", answer.message());
        answers.push(kept(answer.json()));
    }
    answers
}

/// The run ids the runs list has.
async fn listed(server: &TestServer) -> Vec<String> {
    let list = server.client.get("/api/v1/runs").await.unwrap().json();
    (list["runs"].as_array().unwrap().iter())
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_archives_what_its_policy_lets_go_on_schedule_and_answers_as_before() {
    let server = TestServer::start_configured(None, |config| {
        config.options.segment_bytes_max = 4096;
        config.gc = Some(GcSchedule {
            every: Duration::from_millis(200),
            policy: Retention::new(None, Some(1)).unwrap(),
        });
    })
    .await;
    let runs = ["q1", "q2", "q3", "q4"];
    let mut before = Vec::new();
    for run in runs {
        server.start_run("quick", run).await;
        server
            .wait_for(run, "succeeded", |r| r["state"] == "succeeded")
            .await;
        before.push(answers(&server, run).await);
    }
    // The newest run of the workflow stays; the others go once their segments are sealed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while listed(&server).await.contains(&"q1".to_owned()) {
        assert!(Instant::now() < deadline, "q1 never archived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed(&server).await.contains(&"q4".to_owned()));
    for (run, expected) in runs.iter().zip(&before) {
        assert_eq!(&answers(&server, run).await, expected, "{run}");
    }
    let archives = std::fs::read_dir(server.data.path().join("archive")).unwrap();
    assert!(archives.count() >= 1);
    // The server goes on driving runs.
    server.start_run("quick", "q5").await;
    server
        .wait_for("q5", "succeeded", |r| r["state"] == "succeeded")
        .await;
    server.stop().await;
}
