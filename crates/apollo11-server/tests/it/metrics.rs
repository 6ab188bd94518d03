//! `/metrics`: the Prometheus text of the process's recorder, behind the token, accepted by
//! Prometheus's own parser (`promtool check metrics`).

use crate::harness::{assert_error, TestServer};
use apollo11_server::client::Client;
use apollo11_server::metrics;

const TOKEN: &str = "a-token-of-24-characters";

#[tokio::test]
async fn metrics_are_the_recorders_text_behind_the_token() {
    // One recorder per process: this is the only test that installs it.
    let recorder = metrics::install().unwrap();
    let server = TestServer::start_configured(Some(TOKEN), |c| c.metrics = Some(recorder)).await;
    server.start_run("quick", "scraped").await;
    server
        .wait_for("scraped", "succeeded", |r| r["state"] == "succeeded")
        .await;

    let anonymous = Client::new(server.client.address().to_owned(), None);
    assert_error(
        &anonymous.get("/metrics").await.unwrap(),
        401,
        "unauthorized",
    );

    let answer = server.client.get("/metrics").await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.message());
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = std::str::from_utf8(&answer.body).unwrap();
    let succeeded = text
        .lines()
        .find(|l| {
            l.starts_with("apollo11_step_attempts_total{")
                && l.contains(r#"workflow="quick""#)
                && l.contains(r#"outcome="succeeded""#)
        })
        .unwrap_or_else(|| panic!("no succeeded attempts of quick in:\n{text}"));
    let count: f64 = succeeded.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 2.0, "{succeeded}");
    assert!(
        text.contains("# TYPE apollo11_fsync_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("# HELP apollo11_step_attempts_total "),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_server_without_a_recorder_answers_404() {
    let server = TestServer::start().await;
    assert_error(
        &server.client.get("/metrics").await.unwrap(),
        404,
        "not_found",
    );
    server.stop().await;
}
